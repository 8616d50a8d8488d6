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

The *integer path* (:func:`grid_gaussian_integers`, :func:`grid_laplace_integers`) does step 3
alone, for a caller that has already produced the integer vector and proven its sensitivity in
grid units: an exactly computed integer sum rescaled with :func:`rescale_integers`, or a float
computed with a bounded *relative* error and rounded with :func:`grid_integers`, whose rounding
error :func:`rounding_error` bounds at every magnitude (docs/proofs/noise.md, "Integer path").
With ``bound=math.inf`` the integer path clips nothing and takes Python integers of any size
(an object array): for a caller that rounds exactly with rational arithmetic, so that data far
from the origin are released where they lie (docs/proofs/noise.md, "Unbounded integer path").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import check_epsilon, check_finite_positive, fail
from ._laws import gaussian_half
from .rational import to_fraction
from .rng import resolve_rng
from .samplers import _gaussian_flat, _laplace_flat

__all__ = [
    "GridRelease",
    "gaussian_exponent",
    "grid_exponent",
    "grid_gaussian",
    "grid_gaussian_integers",
    "grid_integers",
    "grid_laplace",
    "grid_laplace_integers",
    "laplace_exponent",
    "rescale_integers",
    "rounding_error",
]

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
        The public clipping bound applied to every coordinate (``inf``: none, the unbounded
        integer path).
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


def gaussian_exponent(l2_sensitivity: float, sigma: float, d: int) -> int:
    """The default exponent of :func:`grid_gaussian`: ``grid_exponent(min(sigma, l2/√d))``."""
    return grid_exponent(min(sigma, l2_sensitivity / math.sqrt(max(d, 1))))


def laplace_exponent(l1_sensitivity: float, epsilon: float, d: int) -> int:
    """The default exponent of :func:`grid_laplace`: ``grid_exponent(min(l1/ε, l1/d))``."""
    return grid_exponent(min(l1_sensitivity / epsilon, l1_sensitivity / max(d, 1)))


def _bound(where: str, exponent: int, bound: Any) -> float:
    """The public clip bound (real units), at most ``2^50`` grid steps."""
    if bound is None:
        return math.ldexp(1.0, exponent + DEFAULT_BOUND_BITS)
    b = check_finite_positive(where, "bound", bound)
    if b / math.ldexp(1.0, exponent) > 2.0**DEFAULT_BOUND_BITS:
        raise fail(
            where,
            "bound",
            f"at most 2^{DEFAULT_BOUND_BITS} grid steps ({math.ldexp(1.0, exponent + DEFAULT_BOUND_BITS)!r})",
            bound,
        )
    return b


def _round(x: Any, exponent: int, b: float) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    # Public pre-processing that never raises on data: NaN → 0, ±inf and beyond → ±bound.
    arr = np.clip(np.nan_to_num(arr, nan=0.0, posinf=b, neginf=-b), -b, b)
    return np.rint(np.ldexp(arr, -exponent)).astype(np.int64)


def _prepare(where: str, x: Any, exponent: int, bound: Any) -> tuple[np.ndarray, float]:
    if not -1000 <= exponent <= 900:
        raise fail(
            where,
            "scale",
            "a noise scale between 2^-990 and 2^910",
            math.ldexp(1.0, exponent + GRID_BITS),
        )
    b = _bound(where, exponent, bound)
    return _round(x, exponent, b), b


def _check_exponent(where: str, exponent: Any) -> int:
    if (
        isinstance(exponent, bool)
        or not isinstance(exponent, numbers.Integral)
        or not -1000 <= int(exponent) <= 900
    ):
        raise fail(where, "exponent", "an integer in [-1000, 900]", exponent)
    return int(exponent)


def grid_integers(x: Any, *, exponent: int, bound: Any = None) -> np.ndarray:
    """``rint(clip(x, −bound, bound) / 2^exponent)`` as int64: the rounding of the grid releases.

    NaN becomes 0 and ``±inf`` becomes ``±bound`` (never raises on data). If every entry of ``x``
    is within ``θ|x_j| + τ·2^exponent`` of a real ``x*_j`` (or is ``±inf`` of the sign of a
    ``x*_j`` beyond the bound), the result is within :func:`rounding_error` ``(θ, τ, B)`` of
    ``clip(x*, −bound, bound)/2^exponent`` in every coordinate (``B`` = bound in grid steps).

    Parameters
    ----------
    x : array-like of float
    exponent : int
        Grid exponent in ``[-1000, 900]``.
    bound : float, optional
        Public clip bound (default ``2^50`` grid steps, also the maximum).

    Returns
    -------
    numpy.ndarray of int64, the shape of ``x``, entries in ``[−2^50, 2^50]``.
    """
    where = "grid_integers"
    e = _check_exponent(where, exponent)
    return _round(x, e, _bound(where, e, bound))


def rounding_error(
    relative_error: Any = 0,
    absolute_error: Any = 0,
    bound_steps: int = 1 << DEFAULT_BOUND_BITS,
) -> Fraction:
    """``λ = 1/2 + (θ·B + τ)/(1 − θ)``: the rounding error of :func:`grid_integers` in grid units.

    If ``|x̃ − x| <= θ|x| + τ·g`` (``0 <= θ < 1``), then
    ``|rint(clip(x̃, ±B·g)/g) − clip(x, ±B·g)/g| <= λ`` — whatever the magnitude of ``x``:
    below ``(B·g + τ·g)/(1 − θ)`` the relative error is at most that much, beyond it both
    sides clip to the same ``±B·g`` (docs/proofs/noise.md, Lemma F). Exact rational.
    """
    theta, tau = Fraction(relative_error), Fraction(absolute_error)
    if not 0 <= theta < 1:
        raise fail("rounding_error", "relative_error", "a number in [0, 1)", relative_error)
    if tau < 0 or bound_steps < 0:
        raise fail("rounding_error", "absolute_error", "a number >= 0 (bound_steps too)", absolute_error)
    return Fraction(1, 2) + (theta * bound_steps + tau) / (1 - theta)


def rescale_integers(
    k: Any, *, from_exponent: int, to_exponent: int, bound_steps: int = 1 << DEFAULT_BOUND_BITS
) -> np.ndarray:
    """Exact integers ``k`` on the grid ``2^from_exponent`` moved to the grid ``2^to_exponent``.

    To a coarser grid: ``floor(k/2^s + 1/2)`` with ``s = to − from`` (error ``<= 1/2`` per
    coordinate, a function of that coordinate alone); to a finer or equal grid: ``k·2^{−s}``
    (exact). Then clipped to ``±bound_steps`` (a contraction). Python-integer arithmetic: no
    overflow whatever the size of ``k`` (ints, int64 arrays or object arrays of Python ints).

    Returns
    -------
    numpy.ndarray of int64, the shape of ``k``.
    """
    obj = np.asarray(k).astype(object)
    s = int(to_exponent) - int(from_exponent)
    if s > 0:
        obj = (obj + (1 << (s - 1))) >> s
    elif s < 0:
        obj = obj * (1 << -s)
    lim = int(bound_steps)
    return np.asarray(np.maximum(np.minimum(obj, lim), -lim)).astype(np.int64)


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
    e = laplace_exponent(l1, eps, d_public) if exponent is None else int(exponent)
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
    e = gaussian_exponent(l2, sd, d_public) if exponent is None else int(exponent)
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


def _unbounded(bound: Any) -> bool:
    """Whether ``bound`` asks for no clipping (``math.inf``)."""
    return isinstance(bound, numbers.Real) and not isinstance(bound, bool) and bound == math.inf


def _integer_input(where: str, k: Any, exponent: Any, bound: Any) -> tuple[np.ndarray, int, float]:
    """Validate the integer path's public inputs: ``(k, exponent, bound in real units)``.

    Bounded: ``k`` clipped to the bound, as int64. Unbounded (``bound=math.inf``): ``k`` as an
    object array of Python integers, unchanged (signed-integer or object arrays of ints only)."""
    e = _check_exponent(where, exponent)
    arr = np.asarray(k)
    rule = "an array of signed integers (already on the grid)"
    if _unbounded(bound):
        if arr.dtype == object:
            if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in arr.flat):
                raise fail(where, "k", rule, "an object array holding non-integers")
        elif not np.issubdtype(arr.dtype, np.signedinteger):
            raise fail(where, "k", rule, f"dtype={arr.dtype}")
        obj = np.empty(arr.shape, dtype=object)
        obj.flat[:] = [int(v) for v in arr.flat]
        return obj, e, math.inf
    if not np.issubdtype(arr.dtype, np.signedinteger):
        raise fail(where, "k", rule, f"dtype={arr.dtype}")
    steps = math.floor(Fraction(_bound(where, e, bound)) / Fraction(2) ** e)
    return np.clip(arr, -steps, steps).astype(np.int64), e, steps * math.ldexp(1.0, e)


def _int_on_grid(n: int, exponent: int) -> float:
    """The float nearest ``n·2^exponent`` (up to a second rounding among subnormals); ``±inf``
    beyond the float range."""
    try:
        return math.ldexp(float(n), exponent)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _finish_integers(r: np.ndarray, z: np.ndarray, exponent: int) -> np.ndarray:
    """``(r + Z)·2^exponent`` as float64: exact for the bounded path; for the unbounded one
    (object ``r``) each Python-integer sum is converted once (post-processing)."""
    if r.dtype != object:
        return _finish(r, z, exponent)
    noisy = r + z.astype(object)
    out = np.array([_int_on_grid(v, exponent) for v in noisy.flat], dtype=np.float64)
    return out.reshape(r.shape)


def grid_gaussian_integers(
    k: Any,
    *,
    exponent: int,
    l2_sensitivity_grid: Any,
    rho: Any,
    bound: Any = None,
    rng: Any = None,
) -> GridRelease:
    """ρ-zCDP release of an integer vector already on the grid ``2^exponent``.

    The caller has rounded (or summed exactly) and proven that ``‖k − k'‖_2 <=
    l2_sensitivity_grid`` for neighbouring data sets, in grid units. The noise is the discrete
    Gaussian with ``σ_g² = ceil(Δ²/(2ρ))`` (beyond the table range, the next multiple of
    ``floor(σ_g) + 1``), so the release is ``Δ²/(2σ_g²) <= ρ``-zCDP. ``k`` is clipped to the
    public bound first (a contraction: the sensitivity holds).

    Parameters
    ----------
    k : array-like of signed integers
        The (private) grid coordinates; any shape, ``d`` entries. With ``bound=math.inf`` also
        an object array of Python integers of any size.
    exponent : int
        The grid is ``2^exponent · ℤ``; chosen by the caller from public values only.
    l2_sensitivity_grid : float or Fraction
        Public bound ``Δ`` on ``‖k − k'‖_2`` (grid units), > 0.
    rho : float or Fraction
        The zCDP target ρ > 0 (rounded down to a rational).
    bound : float, optional
        Public clip bound in real units (default and maximum ``2^50`` grid steps), or
        ``math.inf``: no clipping; ``values`` is then ``(k + Z)·2^exponent`` computed exactly in
        Python integers and converted once to the nearest float (``±inf`` beyond the float
        range), so use ``values``, not ``integers``, for such a release.
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    GridRelease
        ``values = (clip(k) + Z)·2^exponent``; ``sensitivity_grid = Δ`` (rounded up to a
        rational), ``noise_grid = σ_g²``, ``rho = Δ²/(2σ_g²)`` rounded up (``<= rho``).

    Privacy
    -------
    Neighbours: any data sets with ``‖k − k'‖_2 <= Δ``. The multivariate discrete Gaussian
    mechanism is ``Δ²/(2σ_g²)``-zCDP (Canonne, Kamath & Steinke 2020). Public: ``Δ``, ρ,
    ``exponent``, ``bound``, ``d``.
    """
    where = "grid_gaussian_integers"
    r, e, b = _integer_input(where, k, exponent, bound)
    check_finite_positive(where, "l2_sensitivity_grid", l2_sensitivity_grid)
    sens = to_fraction(l2_sensitivity_grid, where=where, name="l2_sensitivity_grid")
    target = to_fraction(rho, where=where, name="rho", direction="down")
    gen, secure = resolve_rng(rng, where)
    sigma2 = Fraction(_cks_friendly(math.ceil(sens * sens / (2 * target))))
    z = _gaussian_flat(sigma2, r.size, gen).reshape(r.shape)
    rho_out = _float_up(sens * sens / (2 * sigma2))
    return GridRelease(
        _finish_integers(r, z, e), e, "gaussian", sens, sigma2, b, None, rho_out, secure
    )


def grid_laplace_integers(
    k: Any,
    *,
    exponent: int,
    l1_sensitivity_grid: Any,
    epsilon: Any,
    bound: Any = None,
    rng: Any = None,
) -> GridRelease:
    """ε-DP release of an integer vector already on the grid ``2^exponent``.

    The caller has proven ``‖k − k'‖_1 <= l1_sensitivity_grid`` (grid units); being an integer,
    ``‖k − k'‖_1 <= Δ = floor(l1_sensitivity_grid)``. Discrete Laplace noise of scale
    ``t >= Δ/ε`` (ε rounded down, ``t`` up) per coordinate.

    Parameters
    ----------
    k : array-like of signed integers
    exponent : int
    l1_sensitivity_grid : float or Fraction
        Public bound on ``‖k − k'‖_1`` in grid units, ``>= 1``.
    epsilon : float or Fraction
        ε > 0.
    bound, rng : see :func:`grid_gaussian_integers`.

    Returns
    -------
    GridRelease (``sensitivity_grid = Δ``, ``noise_grid = t``, ``epsilon``)

    Privacy
    -------
    Neighbours: ``‖k − k'‖_1 <= Δ``. ``P[k + Z = y]/P[k' + Z = y] <= e^{‖k − k'‖_1/t} <= e^ε``.
    Public: ``Δ``, ε, ``exponent``, ``bound``, ``d``.
    """
    where = "grid_laplace_integers"
    r, e, b = _integer_input(where, k, exponent, bound)
    check_finite_positive(where, "l1_sensitivity_grid", l1_sensitivity_grid)
    sens = Fraction(math.floor(Fraction(l1_sensitivity_grid)))
    if sens < 1:
        raise fail(where, "l1_sensitivity_grid", "a number >= 1", l1_sensitivity_grid)
    eps = to_fraction(epsilon, where=where, name="epsilon", direction="down")
    gen, secure = resolve_rng(rng, where)
    scale = to_fraction(sens / eps, where=where, name="scale")
    z = _laplace_flat(scale, r.size, gen).reshape(r.shape)
    return GridRelease(
        _finish_integers(r, z, e), e, "laplace", sens, scale, b, float(eps), None, secure
    )
