"""The discrete Gaussian's functions at large σ² (docs/proofs/noise.md §6, "Large σ").

Deterministic known answers (no randomness). Before this change a quantile at σ² = 2³⁶ took 10 s
and from about 2⁴⁰ the exact tail tables exhausted memory (a k-means plan at ε = 10⁻⁹ was killed
at 24 GB); the k-means anchor's variance was not rounded to a value the exact sampler takes, so
``private_kmeans`` at d > 10 and ε = 0.1 raised ParameterError after the charge (last test).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import norm

from privagg.noise import distributions as D
from privagg.noise._exact import decide_le
from privagg.noise.distributions import LARGE_SIGMA2, DiscreteGaussian, DiscreteLaplace

S2 = LARGE_SIGMA2  # 2^24: the bound's first σ², where the exact tables are still cheap (σ = 4096)


def _exact_quantile(s2: Fraction, beta: Fraction) -> int:
    """The exact smallest k >= 1 with P[Z >= k] <= beta, from the exact tail enclosures."""
    return D._step_search(lambda k: k >= 1 and decide_le(D._dg_tail_enclosure(s2, k), beta), 1)


@pytest.mark.parametrize("k", [4096, 16384, 22000, 30000])
def test_tail_bound_is_above_the_exact_tail_and_tight(k: int) -> None:
    lo, hi = D._dg_tail_enclosure(S2, k)(128)
    exact_lo, exact_hi = Fraction(lo, 2**128), Fraction(hi, 2**128)
    u = D._dg_tail_upper(S2, k)
    assert u >= exact_hi  # an upper bound (certified)
    slack = 1 + S2 / (k * k)  # the bound's factor over the tail: about 1 + σ²/k²
    assert u <= exact_lo * slack * Fraction(101, 100)
    # negative control: the bound shrunk by that factor is no longer an upper bound
    assert u / slack / Fraction(101, 100) < exact_lo


@pytest.mark.parametrize("beta", [Fraction(1, 10**6), Fraction(1, 10**9), Fraction(1, 10**15)])
def test_quantiles_at_least_exact_and_within_a_hundredth_of_sigma(beta: Fraction) -> None:
    exact = _exact_quantile(S2, beta)
    q = DiscreteGaussian(S2).upper_quantile(float(beta))
    assert exact <= q <= exact + 0.01 * 4096
    a = DiscreteGaussian(S2).abs_quantile(float(beta))
    exact_abs = _exact_quantile(S2, beta / 2) - 1  # P[|Z| > k] = 2 P[Z >= k + 1]
    assert exact_abs <= a <= exact_abs + 0.01 * 4096


@pytest.mark.parametrize("e", [40, 60, 90])
def test_huge_sigma_quantiles_follow_the_gaussian(e: int) -> None:
    s2 = Fraction(2**e)
    sigma = 2.0 ** (e / 2)
    beta = 1e-9
    q = DiscreteGaussian(s2).upper_quantile(beta)
    cont = sigma * norm.isf(beta)  # the continuous quantile: the discrete one is within ~1 of it
    assert cont - 2 <= q <= cont * 1.01
    assert DiscreteGaussian(s2).variance == float(s2)
    assert 0 < DiscreteGaussian(s2).sf(q) <= beta * (1 + 1e-9)  # a bound <= beta, rounded up to a float
    assert DiscreteGaussian(s2).pmf(0) >= 1 / (math.sqrt(2 * math.pi) * sigma)


def test_search_returns_the_smallest_true_point() -> None:
    """The doubling-and-bisection search agrees with a one-step walk for monotone predicates."""
    rng = np.random.default_rng(20261201)
    print("seed 20261201")
    for _ in range(500):
        answer, start = (int(v) for v in rng.integers(-10**6, 10**6, size=2))
        assert D._step_search(lambda k: k >= answer, start) == answer
    # and on the laws' own predicates (exact path): the known answers of docs/proofs/noise.md §6
    assert 1 + DiscreteLaplace(2).upper_quantile(1e-6) == 28
    assert 1 + DiscreteLaplace(1).upper_quantile(1e-6) == 15
    for s2 in (Fraction(1), Fraction(7, 3), Fraction(1000)):
        for beta in (Fraction(1, 10), Fraction(1, 10**6)):
            walk = 1
            while not decide_le(D._dg_tail_enclosure(s2, walk), beta):
                walk += 1
            assert DiscreteGaussian(s2).upper_quantile(float(beta)) == walk


def test_projected_kmeans_at_small_epsilon_does_not_raise() -> None:
    """d = 20 > D_CORE: the anchor's variance d/(2ρ) at ε = 0.1 is beyond the sampler's table and
    must be rounded to a value the exact sampler takes (on 261742a: ParameterError after the
    charge); ε = 10⁻⁶ needs the large-σ quantile (on 261742a: tens of seconds, then memory)."""
    import privagg

    x = np.random.default_rng(3).normal(size=(3000, 20))
    for eps in (0.1, 1e-6):
        rel = privagg.private_kmeans(x, k=3, epsilon=eps, delta=1e-6, rng=1)
        assert not rel.ok or rel.centers.shape == (3, 20)
