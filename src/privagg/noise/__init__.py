"""Secure, exact, vectorized noise: the layer every mechanism draws from.

* :mod:`.rng` — the one ``rng`` normaliser (secure AES-CTR generator by default).
* :mod:`.rational` — parameters as exact rationals, rounded towards more noise.
* :mod:`.samplers` — exact Bernoulli, Bernoulli(exp(−γ)), geometric, discrete Laplace and
  discrete Gaussian samplers, vectorized.
* :mod:`.distributions` — analytic pmf / tails / quantiles (certified rounding).
* :mod:`.grid` — real-valued release on a grid of multiples of ``2^e`` with exact integer noise.
"""

from .distributions import DiscreteGaussian, DiscreteLaplace
from .grid import GridRelease, grid_exponent, grid_gaussian, grid_laplace
from .rational import to_fraction
from .rng import SecureGenerator, resolve_rng, secure_generator
from .samplers import (
    bernoulli_exp,
    bernoulli_fraction,
    bernoulli_rational,
    discrete_gaussian,
    discrete_laplace,
    geometric,
)

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "GridRelease",
    "SecureGenerator",
    "bernoulli_exp",
    "bernoulli_fraction",
    "bernoulli_rational",
    "discrete_gaussian",
    "discrete_laplace",
    "geometric",
    "grid_exponent",
    "grid_gaussian",
    "grid_laplace",
    "resolve_rng",
    "secure_generator",
    "to_fraction",
]
