"""Real-valued release on an explicit grid with exact integer noise.

A float vector is never perturbed by floating-point noise (whose set of representable outputs
leaks the input, Mironov 2012). Instead (docs/proofs/noise.md, "Grid release"):

1. pick a public grid step ``g = 2^e`` with ``g <= 2^-10`` times both the noise scale and the
   sensitivity per coordinate (ℓ1: ``Δ1/d``, ℓ2: ``Δ2/√d``), so that the rounding below
   inflates the sensitivity by a factor of at most ``1 + 2^-10``;
2. clip each coordinate to the public ``[−bound, bound]`` (a contraction: sensitivities hold)
   and round it to the nearest integer multiple of ``g``: ``r = rint(clip(x) / g)``;
   each coordinate moves by at most ``g/2``, so for neighbours ``x, x'``
   ``‖r − r'‖_1 <= ‖x − x'‖_1 / g + d`` and ``‖r − r'‖_2 <= ‖x − x'‖_2 / g + √d``;
3. add exact discrete Laplace / Gaussian noise calibrated to that *inflated* integer
   sensitivity, and return ``(r + Z) · g`` — exactly representable floats (``|r + Z|`` is
   clipped to ``2^53`` as post-processing, and ``g`` is a power of two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import check_epsilon, check_finite_positive, fail
from ._laws import gaussian_half
from .rational import to_fraction
from .rng import resolve_rng
from .samplers import _gaussian_flat, _laplace_flat

__all__ = ["GridRelease", "grid_exponent", "grid_gaussian", "grid_laplace"]

#: Grid steps are at most ``scale · 2^-GRID_BITS``.
GRID_BITS = 10
#: Default public bound on ``|x|`` is ``2^DEFAULT_BOUND_BITS`` grid steps.
DEFAULT_BOUND_BITS = 50
_EXACT = float(2**53)


@dataclass(frozen=True)
class GridRelease:
    """A real vector released on the grid ``2^exponent · ℤ``.

    Attributes
    ----------
    values : numpy.ndarray of float64
        Exactly ``k · 2^exponent`` for integers ``k``; shape of the input.
    exponent : int
        The grid step is ``2.0 ** exponent``.
    mechanism : str
        ``"laplace"`` or ``"gaussian"``.
    sensitivity_grid : Fraction
        The inflated sensitivity in grid units the noise was calibrated to (ℓ1 for Laplace,
        an upper bound of the ℓ2 one for Gaussian).
    noise_grid : Fraction
        Laplace scale ``t`` or Gaussian ``σ²``, in grid units.
    bound : float
        The public clipping bound applied to every coordinate.
    epsilon : float or None
        Pure-DP ε of a Laplace release (None for Gaussian).
    rho : float or None
        zCDP ρ of a Gaussian release, ``sensitivity_grid² / (2 · noise_grid)`` rounded up
        (None for Laplace).
    secure : bool
        Whether the noise came from the secure generator.
    """

    values: np.ndarray
    exponent: int
    mechanism: str
    sensitivity_grid: Fraction
    noise_grid: Fraction
    bound: float
    epsilon: float | None
    rho: float | None
    secure: bool

    @property
    def step(self) -> float:
        """The grid step ``2^exponent``."""
        return math.ldexp(1.0, self.exponent)

    @property
    def integers(self) -> np.ndarray:
        """The released grid coordinates ``values / step`` (int64)."""
        return np.ldexp(self.values, -self.exponent).astype(np.int64)


def grid_exponent(scale: float) -> int:
    """The largest ``e`` with ``2^e <= scale · 2^-10`` (``scale`` a public noise scale)."""
    _, e = math.frexp(float(scale))  # scale = m·2^e, 0.5 <= m < 1
    return e - 1 - GRID_BITS


def _prepare(where: str, x: Any, exponent: int, bound: Any) -> tuple[np.ndarray, float]:
    if not -1000 <= exponent <= 900:
        raise fail(
            where,
            "scale",
            "a noise scale between 2^-990 and 2^910",
            math.ldexp(1.0, exponent + GRID_BITS),
        )
    step = math.ldexp(1.0, exponent)
    if bound is None:
        b = math.ldexp(1.0, exponent + DEFAULT_BOUND_BITS)
    else:
        b = check_finite_positive(where, "bound", bound)
        if b / step > 2.0**DEFAULT_BOUND_BITS:
            raise fail(
                where,
                "bound",
                f"at most 2^{DEFAULT_BOUND_BITS} grid steps ({math.ldexp(1.0, exponent + DEFAULT_BOUND_BITS)!r})",
                bound,
            )
    arr = np.asarray(x, dtype=np.float64)
    # Public pre-processing that never raises on data: NaN → 0, ±inf and beyond → ±bound.
    arr = np.clip(np.nan_to_num(arr, nan=0.0, posinf=b, neginf=-b), -b, b)
    return np.rint(np.ldexp(arr, -exponent)).astype(np.int64), b


def _finish(r: np.ndarray, z: np.ndarray, exponent: int) -> np.ndarray:
    noisy = np.clip((r + z).astype(np.float64), -_EXACT, _EXACT)  # post-processing
    return np.ldexp(noisy, exponent)


def grid_laplace(
    x: Any,
    *,
    l1_sensitivity: Any,
    epsilon: Any,
    bound: Any = None,
    exponent: int | None = None,
    rng: Any = None,
) -> GridRelease:
    """ε-DP release of a real vector on a grid, with exact discrete Laplace noise.

    Parameters
    ----------
    x : array-like of float
        The (private) vector; any shape, ``d`` = its number of entries.
    l1_sensitivity : float
        Public bound on ``‖x − x'‖_1`` over neighbouring data sets.
    epsilon : float
        Privacy parameter ε > 0.
    bound : float, optional
        Public clip bound on every coordinate (default ``2^50`` grid steps).
    exponent : int, optional
        Grid exponent; default :func:`grid_exponent` of
        ``min(l1_sensitivity / epsilon, l1_sensitivity / d)``.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    GridRelease

    Privacy
    -------
    Neighbours: any data sets whose vectors satisfy ``‖x − x'‖_1 <= l1_sensitivity``.
    Rounding to the grid gives integer vectors with ``‖r − r'‖_1 <= Δ = floor(l1/g) + d``;
    the discrete Laplace mechanism with scale ``t >= Δ/ε`` on ℤ^d is ε-DP; clipping before and
    after is a contraction / post-processing. Public: ``l1_sensitivity``, ε, ``bound``, ``d``.
    """
    where = "grid_laplace"
    l1 = check_finite_positive(where, "l1_sensitivity", l1_sensitivity)
    eps = check_epsilon(where, epsilon)
    d_public = int(np.size(x))
    e = (
        grid_exponent(min(l1 / eps, l1 / max(d_public, 1)))
        if exponent is None
        else int(exponent)
    )
    r, b = _prepare(where, x, e, bound)
    gen, secure = resolve_rng(rng, where)
    d = r.size
    sens = Fraction(math.floor(Fraction(l1) / Fraction(2) ** e) + d)
    scale = to_fraction(
        sens / to_fraction(eps, where=where, name="epsilon", direction="down"),
        where=where,
        name="scale",
    )
    z = _laplace_flat(scale, d, gen).reshape(r.shape)
    return GridRelease(
        _finish(r, z, e), e, "laplace", sens, scale, b, eps, None, secure
    )


def _float_up(x: Fraction) -> float:
    """The smallest float >= x."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _cks_friendly(target: int) -> int:
    """The least integer ``>= target`` that the Gaussian sampler handles with small numbers.

    Inside the table range that is ``target``; beyond it, the least multiple of
    ``t = floor(sqrt(·)) + 1`` (of itself) not below ``target``, so that the exact
    Canonne–Kamath–Steinke acceptance ``(|Y| − σ²/t)²/(2σ²)`` has an integer ``σ²/t``.
    """
    if gaussian_half(Fraction(target)):
        return target
    s2 = target
    while True:
        t = math.isqrt(s2) + 1
        nxt = t * -(-s2 // t)
        if math.isqrt(nxt) + 1 == t:
            return nxt
        s2 = nxt


def _sqrt_up(n: int, bits: int = 30) -> Fraction:
    """A rational ``>= sqrt(n)`` within ``2^-bits``."""
    return Fraction(math.isqrt(n << (2 * bits)) + 1, 1 << bits)


def grid_gaussian(
    x: Any,
    *,
    l2_sensitivity: Any,
    sigma: Any,
    bound: Any = None,
    exponent: int | None = None,
    rng: Any = None,
) -> GridRelease:
    """zCDP release of a real vector on a grid, with exact discrete Gaussian noise.

    ``sigma`` is the noise standard deviation the caller calibrated for ``l2_sensitivity``
    (the ratio ``sigma / l2_sensitivity`` fixes the privacy). On the grid the sensitivity is
    inflated to ``Δ = l2/g + √d`` grid units and the noise to ``σ_g = (sigma/l2) · Δ`` (σ_g²
    rounded up to an integer, and beyond the table range to a multiple of ``floor(σ_g) + 1``),
    so the ratio — and the guarantee — is at least as good.

    Parameters
    ----------
    x : array-like of float
    l2_sensitivity : float
        Public bound on ``‖x − x'‖_2`` over neighbouring data sets.
    sigma : float
        Noise standard deviation for that sensitivity (same units as ``x``).
    bound, rng : see :func:`grid_laplace`.
    exponent : int, optional
        Default :func:`grid_exponent` of ``min(sigma, l2_sensitivity / √d)``.

    Returns
    -------
    GridRelease (``rho = Δ²/(2σ_g²) <= l2²/(2 sigma²)``)

    Privacy
    -------
    Neighbours: ``‖x − x'‖_2 <= l2_sensitivity``. After rounding ``‖r − r'‖_2 <= Δ``; the
    d-dimensional discrete Gaussian with variance σ_g² per coordinate is ``Δ²/(2σ_g²)``-zCDP
    (Canonne, Kamath & Steinke 2020, multivariate discrete Gaussian), hence ``l2²/(2 sigma²)``-zCDP, the same as the
    continuous Gaussian mechanism. Public: ``l2_sensitivity``, ``sigma``, ``bound``, ``d``.
    """
    where = "grid_gaussian"
    l2 = check_finite_positive(where, "l2_sensitivity", l2_sensitivity)
    sd = check_finite_positive(where, "sigma", sigma)
    d_public = int(np.size(x))
    e = (
        grid_exponent(min(sd, l2 / math.sqrt(max(d_public, 1))))
        if exponent is None
        else int(exponent)
    )
    r, b = _prepare(where, x, e, bound)
    gen, secure = resolve_rng(rng, where)
    d = r.size
    sens = Fraction(l2) / Fraction(2) ** e + _sqrt_up(max(d, 1))
    ratio = to_fraction(sd, where=where, name="sigma") / to_fraction(
        l2, where=where, name="l2_sensitivity", direction="down"
    )
    sigma2 = Fraction(_cks_friendly(math.ceil((ratio * sens) ** 2)))
    z = _gaussian_flat(sigma2, d, gen).reshape(r.shape)
    rho = _float_up(sens * sens / (2 * sigma2))
    return GridRelease(
        _finish(r, z, e), e, "gaussian", sens, sigma2, b, None, rho, secure
    )
