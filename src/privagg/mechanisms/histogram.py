"""Private histograms: the Laplace histogram over a public domain and the stability-based histogram.

Both mechanisms add exact discrete Laplace noise to integer counts (never floating-point noise to
frequencies) and release noisy counts; frequencies are post-processing. Proofs of every statement
made here (privacy, thresholds, accuracy bounds) are in ``docs/proofs/histograms.md``.

Layers:

- :func:`laplace_histogram` / :func:`stable_histogram` take data, count it in memory
  (:mod:`privagg.engines.counting`) and call the count-level functions
  :func:`laplace_histogram_from_counts` / :func:`stable_histogram_from_counts`, which other engines
  (DuckDB) call directly with their own :class:`~privagg.engines.counting.KeyCounts`;
- :class:`LaplaceHistogramParams` / :class:`StableHistogramParams` answer without data: noise
  scale, threshold, privacy loss, accuracy;
- :class:`HistogramRelease` is the immutable result. It never holds true counts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from dataclasses import dataclass, field
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import mpmath
import numpy as np

from .._validate import check_beta, check_choice, check_delta, check_epsilon, check_positive_int, fail
from ..engines.counting import (
    Domain,
    KeyCounts,
    align_to_domain,
    as_domain,
    count_keys,
    is_arrow,
    sort_order,
)
from ..errors import ParameterError
from ..noise.distributions import DiscreteGaussian, DiscreteLaplace
from ..noise.rational import to_fraction
from ..noise.rng import resolve_rng
from ..noise.samplers import bernoulli_fraction, check_noise_scale, discrete_gaussian, discrete_laplace

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from ..accounting import PrivacyLoss

__all__ = [
    "HistogramRelease",
    "LaplaceHistogramParams",
    "StableHistogramParams",
    "laplace_histogram",
    "laplace_histogram_from_counts",
    "stable_histogram",
    "stable_histogram_from_counts",
    "stable_histogram_from_draw",
    "stable_noise_threshold",
    "stable_threshold",
    "noise_scale",
    "KeysPerUnitChoice",
    "auto_l0_release",
    "auto_l0_split",
    "choose_max_keys_per_unit",
    "per_key_delta",
]

NEIGHBORS = ("replace", "add_remove")
THRESHOLDS = ("tight", "seed", "randomized")
#: How the stable histogram selects its keys (``selection=``).
SELECTIONS = ("threshold", "optimal", "gaussian")
_SENSITIVITY = {"replace": 2, "add_remove": 1}  # ℓ1 change of the count vector between neighbours


# --------------------------------------------------------------------------------------------
# data-free parameters
# --------------------------------------------------------------------------------------------


def _exact_epsilon(epsilon: Any, where: str) -> Fraction:
    """ε as an exact rational, never above the value the ledger records.

    Floats are read as their shortest round-tripping decimal (``0.1`` → 1/10, as
    :class:`privagg.accounting.PrivacyLoss` does), then rounded *down* to a rational with a
    denominator ≤ 2^40; the noise scale computed from it is therefore never smaller than the
    nominal ``sensitivity / ε``.
    """
    check_epsilon(where, epsilon)
    if isinstance(epsilon, (numbers.Integral, Fraction)):
        value: Any = epsilon
    else:
        value = Fraction(repr(float(epsilon)))
    try:
        return to_fraction(value, where=where, name="epsilon", direction="down")
    except ParameterError:  # too small for the bounded denominator: name the value as given
        raise fail(where, "epsilon", "a finite number >= 2**-40", epsilon) from None


@functools.lru_cache(maxsize=256)
def _scale_cached(epsilon: Any, neighbors: str, where: str, l1: int = 1) -> Fraction:
    return Fraction(_SENSITIVITY[neighbors] * l1) / _exact_epsilon(epsilon, where)


def _check_bounds(where: str, units: Any, max_keys_per_unit: Any, max_rows_per_key: Any) -> tuple[int, int] | None:
    """(ℓ0, ℓ∞) at user level (``units`` given), None at record level (where both must be left 1)."""
    if units is None:
        for name, value in (("max_keys_per_unit", max_keys_per_unit), ("max_rows_per_key", max_rows_per_key)):
            if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value == 1):
                raise fail(where, name, "left at 1 without units (it bounds a privacy unit's rows)", value)
        return None
    l0 = check_positive_int(where, "max_keys_per_unit", max_keys_per_unit, maximum=1 << 20)
    linf = check_positive_int(where, "max_rows_per_key", max_rows_per_key, maximum=1 << 20)
    return l0, linf


def _resolve_neighbors(where: str, neighbors: Any, user_level: bool) -> str:
    """The neighbour relation; None → "replace" (record level) or "add_remove" (user level)."""
    if neighbors is None:
        return "add_remove" if user_level else "replace"
    return check_choice(where, "neighbors", neighbors, NEIGHBORS)


def noise_scale(epsilon: Any, neighbors: str = "replace", *, where: str = "noise_scale") -> Fraction:
    """Scale t of the discrete Laplace noise on counts: 2/ε (replace-one) or 1/ε (add/remove).

    Exact rational, rounded up (ε is rounded down first), so that shifting one count by 1 changes
    the probability of any output by a factor of at most e^{1/t} ≤ e^{ε/2} (replace-one) or
    e^{ε} (add/remove).
    """
    check_choice(where, "neighbors", neighbors, NEIGHBORS)
    check_epsilon(where, epsilon)
    return _scale_cached(epsilon, neighbors, where)


#: Default share of ε spent on the noisy total of the stable histogram under add/remove
#: (docs/proofs/histograms.md §2.4 for the choice).
DEFAULT_TOTAL_EPSILON_SHARE = 0.1


def _check_total_share(where: str, share: Any, neighbors: str) -> Fraction | None:
    """The share of ε for the noisy total as an exact rational in [0, 1), or None (replace-one).

    Floats are read as their shortest decimal (``0.1`` → 1/10). Share 0 (an int, float or
    Fraction equal to 0, not a bool): no total is released and all of ε goes to the counts
    (docs/proofs/histograms.md §2.4). Under replace-one n is public and no total is released, so
    a share given there is an error rather than silently ignored.
    """
    if neighbors == "replace":
        if share is not None:
            raise fail(where, "total_epsilon_share", "omitted when neighbors='replace' (n is public)", share)
        return None
    if share is None:
        share = DEFAULT_TOTAL_EPSILON_SHARE
    if isinstance(share, numbers.Real) and not isinstance(share, (bool, np.bool_)) and share == 0:
        return Fraction(0)  # no total: frequencies are not released
    check_delta(where, share, "total_epsilon_share")  # a real number in the open interval (0, 1)
    return share if isinstance(share, Fraction) else Fraction(repr(float(share)))


@functools.lru_cache(maxsize=256)
def _split_scales(epsilon: Any, share: Fraction, where: str) -> tuple[Fraction, Fraction]:
    """(t_c, t_n): the scales of the counts and of the total under add/remove, exact rationals.

    ε (rounded down, :func:`_exact_epsilon`) is split as ε_n = share·ε and ε_c = ε − ε_n, each
    rounded *down* to a denominator ≤ 2^40, and t = 1/ε_x rounded *up*: 1/t_c + 1/t_n ≤ ε.
    """
    eps = _exact_epsilon(epsilon, where)
    try:
        eps_n = to_fraction(share * eps, where=where, name="total_epsilon_share", direction="down")
        eps_c = to_fraction(eps - eps_n, where=where, name="total_epsilon_share", direction="down")
    except ParameterError:  # a share so close to 0 or 1 that one part vanishes: name the share
        raise fail(where, "total_epsilon_share", "such that share·ε and (1 − share)·ε are >= 2**-40",
                   float(share)) from None
    t_c = to_fraction(1 / eps_c, where=where, name="epsilon", direction="up")
    t_n = to_fraction(1 / eps_n, where=where, name="epsilon", direction="up")
    return t_c, t_n


def _check_scales(where: str, epsilon: Any, *scales: Fraction | None) -> None:
    """ParameterError (before any charge) if a discrete Laplace scale exceeds
    :data:`~privagg.noise.samplers.MAX_NOISE_SCALE` (2^50): ε too small for int64 noise."""
    for t in scales:
        if t is not None:
            check_noise_scale(where, "epsilon", t, epsilon)


def _charged_delta(delta: float) -> Fraction:
    """δ for the ledger: the larger of the float's exact value and its shortest decimal reading.

    The threshold guarantees P[Z ≥ T − 1] ≤ δ for the float δ; the ledger reads floats as their
    shortest decimal, which may be a hair below the float. Charging the larger never undercharges.
    """
    return max(Fraction(delta), Fraction(repr(float(delta))))


def _float_up(x: Fraction) -> float:
    """The smallest float ≥ x."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def per_key_delta(delta: float, max_keys_per_unit: int) -> float:
    """δ₁ = 1 − (1 − δ)^{1/ℓ0}, rounded down to a float: P[Z ≥ T − ℓ∞] ≤ δ₁ makes the chance that
    any of a unit's ℓ0 new keys appears ≤ 1 − (1 − δ₁)^{ℓ0} ≤ δ (docs/proofs/histograms.md §7.3).
    δ itself for ℓ0 = 1."""
    if max_keys_per_unit == 1:
        return delta
    with mpmath.workdps(60):
        exact = -mpmath.expm1(mpmath.log1p(-mpmath.mpf(delta)) / max_keys_per_unit)
        f = float(exact)
        if mpmath.mpf(f) > exact:
            f = math.nextafter(f, 0.0)
    return f


@functools.lru_cache(maxsize=256)
def _tight_threshold(scale: Fraction, delta: float, l0: int = 1, linf: int = 1) -> int:
    # smallest integer T with P[Z ≥ T − ℓ∞] ≤ δ₁ (δ₁ = δ at ℓ0 = 1), and never below 1
    return max(1, linf + DiscreteLaplace(scale).upper_quantile(per_key_delta(delta, l0)))


@functools.lru_cache(maxsize=256)
def _boundary_probability(scale: Fraction, delta: float, l0: int, linf: int, threshold: int) -> Fraction:
    # threshold="randomized": the largest b = j/2^32 with P[Z ≥ T − ℓ∞] + b·P[Z = T − 1 − ℓ∞] ≤ δ₁,
    # decided exactly (docs/proofs/histograms.md §2.5); 0 at T = 1 (no noisy count ≤ 0 is released)
    if threshold <= 1:
        return Fraction(0)
    return DiscreteLaplace(scale).boundary_probability(threshold - linf, per_key_delta(delta, l0))


@functools.lru_cache(maxsize=256)
def _seed_threshold(scale: Fraction, delta: float, l0: int = 1, linf: int = 1) -> int:
    # ⌈ℓ∞ + t·ln(2ℓ0/δ)⌉ (the seed's ⌈1 + t·ln(2/δ)⌉ at ℓ0 = ℓ∞ = 1), decided with 60
    # significant digits (t·ln(2ℓ0/δ) is irrational: no ties)
    with mpmath.workdps(60):
        x = mpmath.mpf(scale.numerator) / scale.denominator * mpmath.log(2 * l0 / mpmath.mpf(delta))
        return int(mpmath.ceil(linf + x))


def stable_threshold(
    epsilon: Any,
    delta: Any,
    neighbors: str = "replace",
    rule: str = "tight",
    *,
    total_epsilon_share: Any = None,
    max_keys_per_unit: int | None = None,
    max_rows_per_key: int | None = None,
) -> int:
    """Threshold T (in counts) of :func:`stable_histogram`: a key is kept iff its noisy count ≥ T.

    Parameters
    ----------
    epsilon : float
        ε > 0 (the whole release's ε).
    delta : float
        δ in (0, 1).
    neighbors : {"replace", "add_remove"}
        Neighbour relation; fixes the noise scale of the counts: t = 2/ε (replace-one) or
        t = 1/ε_c (add/remove, where ε_c = (1 − share)·ε is what is left for the counts once the
        noisy total is paid; see :class:`StableHistogramParams`).
    rule : {"tight", "seed", "randomized"}
        ``"tight"``: the smallest integer T ≥ 1 with P[Z ≥ T − 1] ≤ δ for Z ~ discrete
        Laplace(t), decided exactly. ``"seed"``: the seed's τ·n = 1 + t·ln(2/δ), rounded up to an
        integer (the comparison with an integer count is the same). ``"randomized"``: the tight T,
        and a noisy count of exactly T − 1 is also kept with probability b
        (:attr:`StableHistogramParams.boundary_probability`), which spends δ exactly.

    total_epsilon_share : float, optional
        add/remove only: the share of ε spent on the noisy total (default 0.1; 0: no total).
    max_keys_per_unit, max_rows_per_key : int, optional
        User level (add/remove of one privacy unit): ℓ0 and ℓ∞. The counts' scale is ℓ0ℓ∞/ε_c and
        T is the smallest integer ≥ 1 with 1 − (1 − P[Z ≥ T − ℓ∞])^{ℓ0} ≤ δ ("tight") or
        ⌈ℓ∞ + t·ln(2ℓ0/δ)⌉ ("seed"); docs/proofs/histograms.md §7.

    Returns
    -------
    int

    Examples
    --------
    >>> stable_threshold(1.0, 1e-6, "replace"), stable_threshold(1.0, 1e-6, "add_remove")
    (28, 16)
    >>> stable_threshold(1.0, 1e-6, "replace", rule="seed")
    31
    >>> stable_threshold(1.0, 1e-6, "add_remove", max_keys_per_unit=1, max_rows_per_key=1)
    16
    """
    bounds = None
    if max_keys_per_unit is not None or max_rows_per_key is not None:
        bounds = _check_bounds("stable_threshold", True, max_keys_per_unit or 1, max_rows_per_key or 1)
    return StableHistogramParams.build(
        epsilon, delta, neighbors, rule, total_epsilon_share=total_epsilon_share, where="stable_threshold",
        bounds=bounds,
    ).threshold


def _beta_all(beta: float, m: int) -> float:
    """Per-draw tail β' with 1 − (1 − β')^m ≤ β (independent draws), rounded down."""
    return -math.expm1(math.log1p(-beta) / m) * (1 - 1e-9)


#: The noise law of the counts: discrete Laplace (every release) or discrete Gaussian
#: (``laplace_histogram(noise="gaussian")``). The accuracy statements below take the law.
NoiseLaw = DiscreteLaplace | DiscreteGaussian


def _as_law(law: NoiseLaw | Fraction) -> NoiseLaw:
    """A law as given, or a discrete Laplace scale t (the helpers' older calling form)."""
    return law if isinstance(law, (DiscreteLaplace, DiscreteGaussian)) else DiscreteLaplace(law)


@functools.lru_cache(maxsize=1024)
def _abs_quantile_all(law: NoiseLaw | Fraction, m: int, beta: float) -> int:
    """Smallest k ≥ 0 with P[max of m iid |Z_i| > k] ≤ β, up to the rounding of β'."""
    return _as_law(law).abs_quantile(_beta_all(beta, m))


@functools.lru_cache(maxsize=1024)
def _abs_quantile(law: NoiseLaw | Fraction, beta: float) -> int:
    return _as_law(law).abs_quantile(beta)


@functools.lru_cache(maxsize=1024)
def _sum_abs_quantile(law: NoiseLaw | Fraction, m: int, beta: float) -> int:
    """s with P[|Z_1 + … + Z_m| > s] ≤ β. Discrete Gaussian: the sum is sub-Gaussian with
    variance proxy mσ² (Canonne, Kamath & Steinke 2020, the discrete Gaussian's moment
    generating function is at most N(0, σ²)'s), so s = ⌈σ·√(2m·ln(2/β))⌉ (docs/proofs/histograms.md §10)."""
    law = _as_law(law)
    if isinstance(law, DiscreteLaplace):
        return law.sum_abs_quantile(m, beta)
    with mpmath.workdps(60):
        s2 = mpmath.mpf(law.sigma2.numerator) / law.sigma2.denominator
        return int(mpmath.ceil(mpmath.sqrt(2 * m * s2 * mpmath.log(2 / mpmath.mpf(beta)))))


NOISES = ("laplace", "gaussian")


def _gaussian_calibration(epsilon: Any, delta: Any, neighbors: str, l0: int, linf: int,
                          where: str) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """(σ², ρ, ε_exact, δ) of the Gaussian user-level Laplace histogram (docs/proofs/histograms.md §10).

    ρ = the certified :func:`privagg.mechanisms.mean.rho_for` (ε, δ) (zcdp_to_epsilon(ρ, δ) ≤ ε);
    Δ₂² = ℓ0ℓ∞² (add/remove) or 2ℓ0ℓ∞² (replace); σ² = Δ₂²/(2ρ) rounded *up* (a rational with
    denominator ≤ 2^40, or beyond the sampler's table an integer its exact CKS sampler takes);
    ρ_actual = Δ₂²/(2σ²) ≤ ρ and ε_exact = min(zcdp_to_epsilon(ρ_actual, δ), zcdp_to_epsilon(ρ, δ)) ≤ ε.
    """
    from ..accounting import zcdp_to_epsilon
    from ..mechanisms.mean import rho_for
    from ..noise._laws import gaussian_half
    from ..noise.grid import _cks_friendly

    eps = _exact_epsilon(epsilon, where)
    dlt = Fraction(repr(float(check_delta(where, delta))))
    rho = rho_for(eps, dlt)
    if rho <= 0:
        raise fail(where, "epsilon", "large enough for a positive zCDP ρ at this δ", epsilon)
    l2_sq = (2 if neighbors == "replace" else 1) * l0 * linf * linf
    sigma2 = to_fraction(Fraction(l2_sq) / (2 * rho), where=where, name="epsilon", direction="up")
    if not gaussian_half(sigma2):
        sigma2 = Fraction(_cks_friendly(math.ceil(sigma2)))
    discrete_gaussian(sigma2, size=0, rng=0)  # a σ² the exact sampler cannot take fails here, before any charge
    rho_actual = Fraction(l2_sq) / (2 * sigma2)
    eps_exact = min(zcdp_to_epsilon(rho_actual, dlt), zcdp_to_epsilon(rho, dlt))
    return sigma2, rho_actual, eps_exact, dlt


def _exact_noise_calibration(epsilon: Any, delta: Any, l0: int, linf: int, sigma2_zcdp: Fraction,
                              where: str) -> tuple[Fraction, Fraction, Fraction] | None:
    """(σ², ε, δ) of the Laplace histogram's Gaussian noise by the exact profile (add/remove,
    docs/proofs/histograms.md §10.1), or None beyond its limits (then the zCDP calibration stays).
    ε is the exact rational of :func:`_exact_epsilon` (≤ the given ε), δ the charged δ (its
    shortest decimal, as the zCDP path); the certified profile at σ² is ≤ min(Fraction(δ), that
    decimal) ≤ δ."""
    from ._gaussian_profile import calibrate_noise

    eps = _exact_epsilon(epsilon, where)
    dlt = float(check_delta(where, delta))
    target = min(Fraction(dlt), Fraction(repr(dlt)))
    found = calibrate_noise(eps, target, l0, linf, sigma2_zcdp)
    if found is None:
        return None
    sigma2 = found[0]
    discrete_gaussian(sigma2, size=0, rng=0)  # the exact sampler takes σ² (checked before any charge)
    return sigma2, eps, Fraction(repr(dlt))


@dataclass(frozen=True)
class LaplaceHistogramParams:
    """Public parameters of :func:`laplace_histogram`; answers without data.

    Attributes
    ----------
    epsilon : float
    neighbors : {"replace", "add_remove"}
    bins : int
        Number of noisy counts: the domain size, plus one with ``other=True``.
    scale : Fraction
        Discrete Laplace scale t of every count (:func:`noise_scale`); with ``noise="gaussian"``
        an upper bound on σ (display only: the law is :attr:`sigma2`).
    noise : {"laplace", "gaussian"}
    sigma2 : Fraction or None
        σ² of the discrete Gaussian noise (``noise="gaussian"``), else None.
    rho : Fraction or None
        The zCDP ρ = Δ₂²/(2σ²) the Gaussian noise gives, else None.
    gaussian_calibration : {"exact", "zcdp"} or None
        ``noise="gaussian"``: ``"exact"`` (add/remove, within the exact path's limits): σ² is the
        smallest whose multivariate discrete Gaussian profile is certified ≤ δ at ε for every
        shift vector of ≤ ℓ0 coordinates in [1, ℓ∞] (docs/proofs/histograms.md §10.1);
        ``"zcdp"``: ρ-zCDP converted (§10; replace-one, or beyond the exact path's limits).
    """

    epsilon: float
    neighbors: str
    bins: int
    scale: Fraction
    max_keys_per_unit: int | None = None
    max_rows_per_key: int | None = None
    noise: str = "laplace"
    sigma2: Fraction | None = None
    rho: Fraction | None = None
    gaussian_epsilon: Fraction | None = field(default=None, repr=False)
    gaussian_delta: Fraction | None = field(default=None, repr=False)
    gaussian_calibration: str | None = None

    @classmethod
    def build(
        cls,
        epsilon: Any,
        neighbors: str,
        bins: int,
        *,
        where: str = "laplace_histogram",
        bounds: tuple[int, int] | None = None,
        noise: str = "laplace",
        delta: Any = None,
    ) -> LaplaceHistogramParams:
        eps = check_epsilon(where, epsilon)
        check_choice(where, "neighbors", neighbors, NEIGHBORS)
        check_choice(where, "noise", noise, NOISES)
        if noise == "laplace" and delta is not None:
            raise fail(where, "delta", "omitted with noise='laplace' (the release is pure ε-DP)", delta)
        if noise == "gaussian":
            if bounds is None:
                raise fail(where, "noise", "'laplace' without units (the Gaussian option is user level)", noise)
            if delta is None:
                raise fail(where, "delta", "given with noise='gaussian' (a number in the open interval (0, 1))", None)
            l0, linf = bounds
            sigma2, rho, eps_exact, dlt = _gaussian_calibration(epsilon, delta, neighbors, l0, linf, where)
            calibration = "zcdp"
            if neighbors == "add_remove":  # §10.1: the exact profile, where it applies
                exact = _exact_noise_calibration(epsilon, delta, l0, linf, sigma2, where)
                if exact is not None:
                    sigma2, eps_exact, dlt = exact
                    rho, calibration = Fraction(l0 * linf * linf) / (2 * sigma2), "exact"
            sigma = to_fraction(Fraction(math.sqrt(sigma2)) * (1 + Fraction(1, 1 << 40)), where=where,
                                name="epsilon", direction="up")
            return cls(eps, neighbors, int(bins), sigma, l0, linf, "gaussian", sigma2, rho, eps_exact, dlt,
                       calibration)
        if bounds is None:
            scale = noise_scale(epsilon, neighbors, where=where)
            _check_scales(where, epsilon, scale)
            return cls(eps, neighbors, int(bins), scale)
        l0, linf = bounds
        scale = _scale_cached(epsilon, neighbors, where, l0 * linf)
        _check_scales(where, epsilon, scale)
        return cls(eps, neighbors, int(bins), scale, l0, linf)

    @property
    def law(self) -> NoiseLaw:
        """The noise law of every count: DiscreteLaplace(scale) or DiscreteGaussian(σ²)."""
        return DiscreteLaplace(self.scale) if self.sigma2 is None else DiscreteGaussian(self.sigma2)

    @property
    def delta(self) -> float:
        return 0.0 if self.gaussian_delta is None else float(self.gaussian_delta)

    @property
    def sensitivity(self) -> int:
        """ℓ1 sensitivity of the count vector: 2 / 1 (record level), 2ℓ0ℓ∞ / ℓ0ℓ∞ (user level)."""
        return _SENSITIVITY[self.neighbors] * (self.max_keys_per_unit or 1) * (self.max_rows_per_key or 1)

    @property
    def epsilon_exact(self) -> Fraction:
        """The ε the noise actually gives (≤ ε, exact): sensitivity / scale (Laplace), or the
        certified conversion of ρ at δ (Gaussian)."""
        if self.gaussian_epsilon is not None:
            return self.gaussian_epsilon
        return Fraction(self.sensitivity) / self.scale

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """ε-DP (pure) under the chosen neighbour relation, with ε = :attr:`epsilon_exact`;
        (ε, δ)-DP from ρ-zCDP with ``noise="gaussian"``."""
        from ..accounting import PrivacyLoss

        if self.gaussian_delta is not None:
            return PrivacyLoss.approx(self.epsilon_exact, self.gaussian_delta)
        return PrivacyLoss.pure(self.epsilon_exact)

    def count_error_bound(self, beta: float = 0.05) -> int:
        """k such that with probability ≥ 1 − β every noisy count is within k of its true count."""
        beta = check_beta("LaplaceHistogramParams.count_error_bound", beta)
        return _abs_quantile_all(self.law, self.bins, beta)

    def public_parameters(self) -> dict[str, Any]:
        out = {
            "epsilon": self.epsilon,
            "neighbors": self.neighbors,
            "bins": self.bins,
            "scale": str(self.scale),
        }
        if self.max_keys_per_unit is not None:
            out.update(max_keys_per_unit=self.max_keys_per_unit, max_rows_per_key=self.max_rows_per_key)
        if self.sigma2 is not None:
            out.update(noise="gaussian", sigma2=str(self.sigma2), rho=str(self.rho), delta=self.delta,
                       gaussian_calibration=self.gaussian_calibration)
        return out


@dataclass(frozen=True)
class StableHistogramParams:
    """Public parameters of :func:`stable_histogram`; answers without data.

    Under add/remove, n is private and the release also carries a noisy total n̂ = n + Z_n,
    Z_n ~ DL(t_n), the denominator of the frequencies. ε is split: ε_n = share·ε for the total
    (pure ε_n-DP, sensitivity 1), ε_c = ε − ε_n for the counts and the threshold ((ε_c, δ)-DP);
    basic composition gives (ε_n + ε_c, δ) = (ε, δ). Under replace-one nothing is split.

    Attributes
    ----------
    epsilon, delta : float
        The whole release's guarantee.
    neighbors : {"replace", "add_remove"}
    threshold_rule : {"tight", "seed", "randomized"}
    scale : Fraction
        Discrete Laplace scale t of the counts: 2/ε (replace-one, :func:`noise_scale`) or 1/ε_c
        (add/remove).
    threshold : int
        T: a present key is kept iff its noisy count ≥ T (:func:`stable_threshold`), computed for
        the counts' scale; with ``threshold_rule="randomized"`` also, with probability
        :attr:`boundary_probability`, when its noisy count is T − 1.
    total_scale : Fraction or None
        Scale t_n = 1/ε_n of the noise on the total (add/remove), None under replace-one and
        with share 0 (no total released).
    total_epsilon_share : float or None
        The share ε_n/ε (add/remove; default 0.1; 0.0: no total, ε_c = ε), None under replace-one.
    noise : {"laplace", "gaussian"}
        The counts' noise (``"gaussian"``: user level, docs/proofs/histograms.md §11; then
        :attr:`scale` is only an upper bound on σ, for display).
    sigma2, rho : Fraction or None
        ``noise="gaussian"``: σ² of the discrete Gaussian and the zCDP ρ = ℓ0ℓ∞²/(2σ²) it gives.
    threshold_delta : float or None
        ``noise="gaussian"``: δ_T, what the threshold pays (the chance that one of a unit's ℓ0 new
        keys is released). With ``gaussian_calibration="zcdp"`` δ_T + ``gaussian_delta`` (the
        conversion's δ/2) ≤ δ; with ``"exact"`` each is ≤ δ and every mix of new and changed keys
        is certified ≤ δ (§11.1). None otherwise.
    gaussian_calibration : {"exact", "zcdp"} or None
        ``noise="gaussian"``: how σ² and T were calibrated (docs/proofs/histograms.md §11.1 / §11).
    boundary_probability : Fraction or None
        ``threshold_rule="randomized"``: b = j/2^32, the largest with P[Z ≥ T − ℓ∞] + b·P[Z = T − 1 −
        ℓ∞] ≤ δ₁ (δ at ℓ0 = 1; docs/proofs/histograms.md §2.5): a noisy count of T − 1 is kept iff an
        independent exact Bernoulli(b) says so. None for the other rules.
    """

    epsilon: float
    delta: float
    neighbors: str
    threshold_rule: str
    scale: Fraction
    threshold: int
    total_scale: Fraction | None = None
    total_epsilon_share: float | None = None
    max_keys_per_unit: int | None = None
    max_rows_per_key: int | None = None
    noise: str = "laplace"
    sigma2: Fraction | None = None
    rho: Fraction | None = None
    gaussian_epsilon: Fraction | None = field(default=None, repr=False)
    gaussian_delta: Fraction | None = field(default=None, repr=False)
    threshold_delta: float | None = None
    gaussian_calibration: str | None = None
    boundary_probability: Fraction | None = None

    def __post_init__(self) -> None:
        if self.neighbors == "replace" and (self.total_scale is not None or self.total_epsilon_share is not None):
            raise ValueError("StableHistogramParams: no total (nor share) under replace-one")
        if self.neighbors != "replace" and (self.total_scale is None) != (self.total_epsilon_share == 0):
            raise ValueError("StableHistogramParams: total_scale is required under add/remove unless the share is 0")

    @classmethod
    def build(
        cls,
        epsilon: Any,
        delta: Any,
        neighbors: str = "replace",
        threshold: str = "tight",
        *,
        total_epsilon_share: Any = None,
        where: str = "stable_histogram",
        bounds: tuple[int, int] | None = None,
        noise: str = "laplace",
    ) -> StableHistogramParams:
        eps = check_epsilon(where, epsilon)
        dlt = check_delta(where, delta)
        check_choice(where, "neighbors", neighbors, NEIGHBORS)
        check_choice(where, "threshold", threshold, THRESHOLDS)
        check_choice(where, "noise", noise, NOISES)
        if noise == "gaussian":
            if bounds is None:
                raise fail(where, "noise", "'laplace' without units (the Gaussian option is user level)", noise)
            if threshold != "tight":
                raise fail(where, "threshold", "'tight' with noise='gaussian'", threshold)
        if bounds is not None and neighbors != "add_remove":
            rule = "'add_remove' with units (one privacy unit added or removed; replace-one-unit is not supported)"
            raise fail(where, "neighbors", rule, neighbors)
        share = _check_total_share(where, total_epsilon_share, neighbors)
        if share is None or share == 0:  # replace-one, or share 0: no total, all of ε on the counts
            scale, total_scale = noise_scale(epsilon, neighbors, where=where), None
        else:
            scale, total_scale = _split_scales(epsilon, share, where)
        l0, linf = bounds if bounds is not None else (1, 1)
        _check_scales(where, epsilon, None if noise == "gaussian" else scale * (l0 * linf),
                      None if total_scale is None else total_scale * (l0 * linf))
        if noise == "gaussian":  # §11: ε_c and δ/2 for the Gaussian counts, δ/2 for the threshold
            return cls._gaussian(eps, dlt, where, 1 / scale, None if total_scale is None else total_scale * (l0 * linf),
                                 float(share), l0, linf)
        if bounds is not None:  # user level: a unit moves the counts by ℓ0ℓ∞ in ℓ1 (§7.2)
            scale = scale * (l0 * linf)
            total_scale = None if total_scale is None else total_scale * (l0 * linf)
        rule = _seed_threshold if threshold == "seed" else _tight_threshold
        t = rule(scale, dlt, l0, linf)
        boundary = _boundary_probability(scale, dlt, l0, linf, t) if threshold == "randomized" else None
        return cls(eps, dlt, neighbors, threshold, scale, t, total_scale, None if share is None else float(share),
                   None if bounds is None else l0, None if bounds is None else linf,
                   boundary_probability=boundary)

    @classmethod
    def _gaussian(cls, eps: float, dlt: float, where: str, eps_c: Fraction, total_scale: Fraction | None, share: float,
                  l0: int, linf: int) -> StableHistogramParams:
        """noise="gaussian" (docs/proofs/histograms.md §11): discrete Gaussian counts, kept iff ≥ T.

        Exact calibration (§11.1, :mod:`._gaussian_profile`) where it applies: the smallest σ² whose
        multivariate discrete Gaussian profile alone is certified ≤ δ at ε_c (every shift vector of
        ≤ ℓ0 coordinates in [1, ℓ∞]), then the smallest T with every mix of b new keys and ℓ0 − b
        changed keys certified ≤ δ in both directions; then ``gaussian_epsilon`` = ε_c,
        ``gaussian_delta`` = the noise part's δ (b = 0), ``threshold_delta`` = the new keys' δ
        (b = ℓ0), each ≤ δ (not summed: a unit cannot do both with all ℓ0 keys).
        Otherwise (large ℓ0·ℓ∞ or σ, tiny δ) the zCDP calibration (§11): ρ-zCDP converted to
        (ε_g, δ_g) with ε_g ≤ ε_c and δ_g = δ/2, δ_T = the largest float ≤ δ − δ_g for the
        threshold: 1 − (1 − P[Z ≥ T − ℓ∞])^{ℓ0} ≤ δ_T."""
        from ._gaussian_profile import calibrate

        target = min(Fraction(dlt), Fraction(repr(float(dlt))))
        sigma2_z = _gaussian_calibration(eps_c, dlt, "add_remove", l0, linf, where)[0]
        cal = calibrate(eps_c, target, l0, linf, sigma2_z)
        if cal is not None:
            sigma2 = cal.sigma2
            discrete_gaussian(sigma2, size=0, rng=0)  # the exact sampler takes σ² (checked before any charge)
            rho = Fraction(l0 * linf * linf) / (2 * sigma2)
            sigma = to_fraction(Fraction(math.sqrt(sigma2)) * (1 + Fraction(1, 1 << 40)), where=where,
                                name="epsilon", direction="up")
            return cls(eps, dlt, "add_remove", "tight", sigma, cal.threshold, total_scale, share, l0, linf,
                       "gaussian", sigma2, rho, eps_c, cal.noise_delta, _float_up(cal.new_keys_delta), "exact")
        sigma2, rho, eps_g, dlt_g = _gaussian_calibration(eps_c, dlt / 2, "add_remove", l0, linf, where)
        rest = _charged_delta(dlt) - dlt_g
        dlt_t = float(rest)
        if Fraction(dlt_t) > rest:
            dlt_t = math.nextafter(dlt_t, 0.0)
        law = DiscreteGaussian(sigma2)
        t = max(1, linf + law.upper_quantile(per_key_delta(dlt_t, l0)))
        sigma = to_fraction(Fraction(math.sqrt(sigma2)) * (1 + Fraction(1, 1 << 40)), where=where,
                            name="epsilon", direction="up")
        return cls(eps, dlt, "add_remove", "tight", sigma, t, total_scale, share, l0, linf, "gaussian", sigma2, rho,
                   eps_g, dlt_g, dlt_t, "zcdp")

    @property
    def _l1(self) -> int:
        return (self.max_keys_per_unit or 1) * (self.max_rows_per_key or 1)

    @property
    def law(self) -> NoiseLaw:
        """The counts' noise law: discrete Laplace of scale :attr:`scale`, or DiscreteGaussian(σ²)
        with ``noise="gaussian"`` (then :attr:`scale` is only an upper bound on σ, for display)."""
        return DiscreteLaplace(self.scale) if self.sigma2 is None else DiscreteGaussian(self.sigma2)

    @property
    def appearance_probability(self) -> float:
        """1 − (1 − :attr:`release_probability`)^{ℓ0}: the most likely that any of one unit's new
        keys is released (≤ δ; equal to :attr:`release_probability` at ℓ0 = 1)."""
        p = self.release_probability
        return min(1.0, -math.expm1((self.max_keys_per_unit or 1) * math.log1p(-p)) * (1 + 1e-12))

    @property
    def release_probability(self) -> float:
        """P[Z ≥ T − ℓ∞] (+ b·P[Z = T − 1 − ℓ∞] with ``threshold_rule="randomized"``): the
        probability that a new key of count ℓ∞ (1 at record level) is released (rounded up)."""
        k = self.threshold - (self.max_rows_per_key or 1)
        p = self.law.sf(k)
        if self.boundary_probability:
            p = min(1.0, math.nextafter(p + float(self.boundary_probability) * self.law.pmf(k - 1), math.inf))
        return p

    @property
    def counts_epsilon(self) -> Fraction:
        """ε_c = sensitivity / scale: what the counts and the threshold cost (exact); with
        ``noise="gaussian"`` the certified conversion of ρ at δ/2."""
        if self.gaussian_epsilon is not None:
            return self.gaussian_epsilon
        return Fraction(_SENSITIVITY[self.neighbors] * self._l1) / self.scale

    @property
    def total_epsilon(self) -> Fraction:
        """ε_n = ℓ0ℓ∞ / total_scale: what the noisy total costs (exact; 0 under replace-one)."""
        return Fraction(0) if self.total_scale is None else self._l1 / self.total_scale

    @property
    def epsilon_exact(self) -> Fraction:
        """The ε the noise actually gives: ε_c + ε_n (≤ ε, exact)."""
        return self.counts_epsilon + self.total_epsilon

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """(ε, δ)-DP under the chosen neighbour relation (ε = :attr:`epsilon_exact`).

        Under add/remove: the pure ε_n total composed with the (ε_c, δ) stable part.
        """
        from ..accounting import PrivacyLoss

        return PrivacyLoss.approx(self.epsilon_exact, _charged_delta(self.delta))

    def count_error_bound(self, beta: float = 0.05, *, max_keys: int | None = None) -> float:
        """k such that with probability ≥ 1 − β every key (released or not) has |released − true| ≤ k.

        Released keys are off by their noise; a suppressed key of true count F has noisy count
        F + Z ≤ T − 1, so F ≤ T − 1 + |Z|. A union over the present keys needs their number: at
        most n under replace-one; under add/remove give a public bound ``max_keys`` (else ∞).
        """
        where = "StableHistogramParams.count_error_bound"
        beta = check_beta(where, beta)
        if max_keys is None:
            return math.inf
        m = check_positive_int(where, "max_keys", max_keys)
        return float(self.threshold - 1 + _abs_quantile_all(self.law, m, beta))

    def public_parameters(self) -> dict[str, Any]:
        out = {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbors": self.neighbors,
            "threshold_rule": self.threshold_rule,
            "threshold": self.threshold,
            "scale": str(self.scale),
        }
        if self.boundary_probability is not None:
            out["boundary_probability"] = str(self.boundary_probability)
        if self.total_epsilon_share is not None:
            out["total_epsilon_share"] = self.total_epsilon_share
        if self.total_scale is not None:
            out["total_scale"] = str(self.total_scale)
        if self.max_keys_per_unit is not None:
            out.update(max_keys_per_unit=self.max_keys_per_unit, max_rows_per_key=self.max_rows_per_key)
        if self.sigma2 is not None:
            out.update(noise="gaussian", sigma2=str(self.sigma2), rho=str(self.rho),
                       gaussian_delta=float(self.gaussian_delta), threshold_delta=self.threshold_delta,
                       gaussian_calibration=self.gaussian_calibration)
        return out


# --------------------------------------------------------------------------------------------
# max_keys_per_unit="auto": ℓ0 from a private quantile of the keys per unit (§9)
# --------------------------------------------------------------------------------------------

#: Public range of the automatic ℓ0: the candidates are 1, …, AUTO_L0_MAX.
AUTO_L0_MAX = 64
#: The quantile of the number of distinct keys per unit that the automatic ℓ0 targets.
AUTO_L0_QUANTILE = Fraction(9, 10)
#: Share of ε paid for choosing ℓ0 (pure DP); the rest, and all of δ, go to the histogram.
AUTO_L0_EPSILON_SHARE = Fraction(1, 10)


@dataclass(frozen=True)
class KeysPerUnitChoice:
    """The private choice of ℓ0 (``max_keys_per_unit="auto"``), docs/proofs/histograms.md §9.

    Attributes
    ----------
    max_keys_per_unit : int
        The chosen ℓ0, in [1, :data:`AUTO_L0_MAX`].
    epsilon : Fraction
        What the choice cost (pure ε, exact): sensitivity / scale ≤ share·ε.
    scale : Fraction
        Discrete Laplace scale of the noise on the keys-per-unit histogram.
    charged : PrivacyLoss
        The whole release's charge (the choice plus the histogram's (ε − ε_q, δ)).
    """

    max_keys_per_unit: int
    epsilon: Fraction
    scale: Fraction
    charged: Any = field(repr=False)
    quantile: Fraction = AUTO_L0_QUANTILE
    max_candidate: int = AUTO_L0_MAX

    def to_dict(self) -> dict[str, Any]:
        """The JSON fields: the chosen ℓ0, the quantile, the public range and the ε it cost."""
        return {"max_keys_per_unit": self.max_keys_per_unit, "quantile": float(self.quantile),
                "range": [1, self.max_candidate], "epsilon": float(self.epsilon), "scale": str(self.scale)}


def auto_l0_split(epsilon: Any, neighbors: str, where: str = "laplace_histogram") -> tuple[Fraction, Fraction, Fraction]:
    """(ε_q, t_q, ε_rest): the choice's cost and noise scale, and the ε left for the histogram.

    ε (rounded down, :func:`_exact_epsilon`) is split as ε_q' = share·ε (rounded down) and
    ε_rest = ε − ε_q' (rounded down); t_q = Δ/ε_q' rounded up (Δ = 1 add/remove, 2 replace: the
    ℓ1 change of the keys-per-unit histogram, §9.1) and ε_q = Δ/t_q ≤ ε_q'. So ε_q + ε_rest ≤ ε.

    >>> auto_l0_split(1.0, "add_remove")
    (Fraction(1, 10), Fraction(10, 1), Fraction(9, 10))
    """
    eps = _exact_epsilon(epsilon, where)
    eps_q = to_fraction(eps * AUTO_L0_EPSILON_SHARE, where=where, direction="down", name="epsilon")
    eps_rest = to_fraction(eps - eps_q, where=where, direction="down", name="epsilon")
    sens = _SENSITIVITY[neighbors]
    t_q = to_fraction(Fraction(sens) / eps_q, where=where, name="epsilon", direction="up")
    _check_scales(where, epsilon, t_q)
    return Fraction(sens) / t_q, t_q, eps_rest


def choose_max_keys_per_unit(keys_per_unit: Any, scale: Fraction | None, rng: Any) -> int:
    """The noisy-histogram quantile: the smallest j in 1..L with Ĉ_j ≥ q·Ĉ_L, 1 when Ĉ_L ≤ 0.

    ``keys_per_unit[j]`` (j = 0..L, L = :data:`AUTO_L0_MAX`) is the number of units with
    min(#distinct keys, L) = j (:meth:`privagg.engines.base.Engine.keys_per_unit`); bins 1..L
    get independent discrete Laplace(``scale``) noise and Ĉ_j is the noisy cumulative count.
    Exact integer comparison (q = 9/10). ``scale=None`` draws no noise: a test's negative
    control only (not private).
    """
    h = np.asarray(keys_per_unit, dtype=np.int64)[1:AUTO_L0_MAX + 1]
    if scale is not None:
        h = h + discrete_laplace(scale, size=h.shape[0], rng=rng)
    c = np.cumsum(h)
    total = int(c[-1])
    if total <= 0:
        return 1
    q = AUTO_L0_QUANTILE
    return int(np.argmax(c * q.denominator >= q.numerator * total)) + 1


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value == "auto"


def auto_l0_release(
    engine: Any,
    mechanism: str,
    *,
    epsilon: Any,
    max_rows_per_key: int,
    rng: Any,
    ledger: Any,
    unit: str,
    neighbors: str | None = None,
    delta: Any = None,
    domain: Any = None,
    other: bool = False,
    threshold: str = "tight",
    total_epsilon_share: Any = None,
    noise: str = "laplace",
) -> HistogramRelease:
    """A user-level histogram with ``max_keys_per_unit="auto"`` on any engine (§9).

    Order: validation of every parameter (the histogram's at ℓ0 = L too) → the engine's
    keys-per-unit histogram → one ledger charge for the total → the noisy quantile → ℓ0 →
    bounding with (ℓ0, ℓ∞) → the histogram at (ε_rest, δ) without a second charge.
    """
    where = mechanism
    linf = check_positive_int(where, "max_rows_per_key", max_rows_per_key, maximum=1 << 20)
    bounds = (AUTO_L0_MAX, linf)
    neighbors = _resolve_neighbors(where, neighbors, True)
    check_epsilon(where, epsilon)
    eps_q, t_q, eps_rest = auto_l0_split(epsilon, neighbors, where)
    if mechanism == "laplace_histogram":
        dom = domain if isinstance(domain, Domain) else as_domain(domain, where)
        with_other = _check_other(where, other)
        rest = LaplaceHistogramParams.build(eps_rest, neighbors, dom.size + int(with_other), where=where,
                                            bounds=bounds, noise=noise, delta=delta)
    else:
        rest = StableHistogramParams.build(eps_rest, delta, neighbors, threshold,
                                           total_epsilon_share=total_epsilon_share, where=where, bounds=bounds)
    from ..accounting import PrivacyLoss
    from ..engines.base import Bounding, draw_secret

    gen, _ = resolve_rng(rng, where)
    h = engine.keys_per_unit(AUTO_L0_MAX)
    # ε_rest bounds the histogram's ε at every ℓ0 (its exact ε does not grow with ℓ0)
    rest_loss = PrivacyLoss.pure(eps_rest) if rest.delta == 0 else PrivacyLoss.approx(eps_rest,
                                                                                     rest.privacy_loss.delta)
    charged = PrivacyLoss.pure(eps_q) + rest_loss
    if ledger is not None:
        public = {**rest.public_parameters(), "max_keys_per_unit": "auto", "auto_l0_epsilon": float(eps_q),
                  "auto_l0_quantile": float(AUTO_L0_QUANTILE), "auto_l0_range": [1, AUTO_L0_MAX]}
        ledger.charge(charged, mechanism=where, parameters=public)
    l0 = choose_max_keys_per_unit(h, t_q, gen)
    bounding = Bounding(l0, linf, draw_secret(gen))
    if mechanism == "laplace_histogram":
        key_counts = engine.bounded_counts(bounding, domain=dom.keys, keep_other=with_other).key_counts
        release = laplace_histogram_from_counts(
            key_counts, epsilon=eps_rest, domain=dom, neighbors=neighbors, other=with_other, rng=gen,
            max_keys_per_unit=l0, max_rows_per_key=linf, unit=unit, noise=noise, delta=delta)
    else:
        key_counts = engine.bounded_counts(bounding).key_counts
        release = stable_histogram_from_counts(
            key_counts, epsilon=eps_rest, delta=delta, neighbors=neighbors, threshold=threshold,
            total_epsilon_share=total_epsilon_share, rng=gen, max_keys_per_unit=l0, max_rows_per_key=linf,
            unit=unit)
    choice = KeysPerUnitChoice(l0, eps_q, t_q, charged)
    return dataclasses.replace(release, epsilon=float(epsilon), auto_l0=choice)


# --------------------------------------------------------------------------------------------
# the release
# --------------------------------------------------------------------------------------------


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)  # arrays: compare by identity
class HistogramRelease:
    """A released private histogram (immutable; holds no true count).

    Attributes
    ----------
    mechanism : {"laplace_histogram", "stable_histogram"}
    keys : numpy.ndarray
        The whole domain in its given order (laplace), or the kept keys in sorted order (stable).
    counts : numpy.ndarray of int64
        Noisy counts aligned with ``keys`` (may be negative for the Laplace histogram).
    frequencies : numpy.ndarray of float64
        ``counts / n`` (replace-one: n public). Add/remove, laplace: ``counts / max(1, total)``
        with ``total`` the sum of all released noisy counts (post-processing; no extra budget).
        Add/remove, stable: ``counts / noisy_total`` (a separately released, budgeted total),
        NaN when ``noisy_total ≤ 0``, and all NaN with ``total_epsilon_share=0`` (no total is
        released: n is private and the released counts miss the suppressed keys, so no
        denominator exists; use the counts).
    epsilon, delta : float
        The guarantee (δ = 0.0 for the Laplace histogram).
    neighbors : {"replace", "add_remove"}
    scale : float
        Noise scale t in counts (discrete Laplace, P[Z = k] ∝ e^{−|k|/t}); with
        ``noise="gaussian"`` an upper bound on σ (the law is ``params.law``).
    threshold : int or None
        T of the stable histogram (a key is kept iff noisy count ≥ T; with
        ``threshold="randomized"`` also at T − 1 with probability ``params.boundary_probability``),
        None for laplace.
    n : int or None
        Number of records, only when public (replace-one).
    secure : bool
        Whether the noise came from the cryptographically secure generator.
    other_count : int or None
        Noisy count of the records outside the domain (``other=True``), else None.
    params : LaplaceHistogramParams or StableHistogramParams
        The data-free parameters (exact scale, accuracy).
    noisy_total : int or None
        Stable histogram under add/remove only: n̂ = n + Z_n, the number of records (missing
        keys included) plus discrete Laplace noise of scale ``params.total_scale``; else None
        (also with ``total_epsilon_share=0``).
        At user level n is the sum of the bounded counts.
    unit : str or None
        User level: the privacy unit (its column name, or ``"units"`` for an array); None at
        record level. Then every count, bound and interval is about the *bounded* counts (each
        unit's ≤ ℓ0 kept keys, ≤ ℓ∞ rows each: ``params.max_keys_per_unit``,
        ``params.max_rows_per_key``); how many rows bounding dropped is not released.
    auto_l0 : KeysPerUnitChoice or None
        ``max_keys_per_unit="auto"``: the privately chosen ℓ0 and what choosing it cost (part of
        ``epsilon``); :attr:`privacy_loss` is then the whole charge. None otherwise.
    selection : {"threshold", "optimal", "gaussian"}
        How the stable histogram chose its keys. ``"optimal"`` (partition selection) and
        ``"gaussian"`` (Gaussian thresholding of the distinct units per key): the counts carry
        their own noise (:attr:`counts_law`, twice the scale of ``params``) and a suppressed key's
        count is not bounded by a threshold on the counts, so :meth:`error_bound` and
        :meth:`count_error_bound` are ``inf``; the per-key intervals of released keys hold.
    counts_law : noise law or None
        The counts' noise law when it is not ``params.law`` (``selection`` not ``"threshold"``),
        else None.
    selection_params : StableHistogramParams or None
        ``selection="gaussian"``: the selection's own parameters (discrete Gaussian σ², threshold
        T on the noisy distinct-unit counts, (ε_c/2, δ) at (ℓ0, 1)); else None.
    """

    mechanism: str
    keys: np.ndarray
    counts: np.ndarray
    frequencies: np.ndarray
    epsilon: float
    delta: float
    neighbors: str
    scale: float
    threshold: int | None
    n: int | None
    secure: bool
    params: LaplaceHistogramParams | StableHistogramParams = field(repr=False)
    other_count: int | None = None
    noisy_total: int | None = None
    unit: str | None = None
    auto_l0: KeysPerUnitChoice | None = None
    selection: str = "threshold"
    counts_law: Any = None
    selection_params: StableHistogramParams | None = field(default=None, repr=False)

    @property
    def max_keys_per_unit(self) -> int | None:
        """ℓ0 at user level, else None."""
        return self.params.max_keys_per_unit

    @property
    def max_rows_per_key(self) -> int | None:
        """ℓ∞ at user level, else None."""
        return self.params.max_rows_per_key

    @property
    def total(self) -> int:
        """Sum of all released noisy counts (other bin included): the Laplace add/remove denominator.

        (The stable histogram under add/remove divides by :attr:`noisy_total` instead: its released
        counts miss the suppressed keys.)
        """
        return int(self.counts.sum()) + (self.other_count or 0)

    @property
    def other_frequency(self) -> float | None:
        """Frequency of the ``other`` bin (same denominator as ``frequencies``), or None."""
        if self.other_count is None:
            return None
        return self.other_count / self._denominator()

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """What this release spent, as a :class:`privagg.accounting.PrivacyLoss` (with
        ``max_keys_per_unit="auto"``: the choice of ℓ0 and the histogram, as charged)."""
        if self.auto_l0 is not None:
            return self.auto_l0.charged
        return self.params.privacy_loss

    @property
    def _law(self) -> Any:
        """The noise law of the released counts."""
        return self.params.law if self.counts_law is None else self.counts_law

    def _denominator(self) -> float:
        if self.n is not None:
            return self.n
        if self.noisy_total is not None:
            return _total_denominator(self.noisy_total)
        if self._no_total:
            return math.nan
        return max(1, self.total)

    @property
    def _no_total(self) -> bool:
        """Stable add/remove with ``total_epsilon_share=0``: no n̂, so no frequency (NaN) and no
        frequency bound (∞); the counts and their bounds are unaffected."""
        return self.mechanism == "stable_histogram" and self.n is None and self.noisy_total is None

    def _total_parts(self, beta: float) -> tuple[int, int]:
        """Stable add/remove: (s, m) with P[|Z_n| > s] ≤ β/2 and m = max(1, n̂ + s) ≥ n on that event."""
        s = _abs_quantile(DiscreteLaplace(self.params.total_scale), beta / 2)
        return s, max(1, int(self.noisy_total) + s)

    def _bins(self) -> int:
        return self.params.bins if isinstance(self.params, LaplaceHistogramParams) else 0

    def error_bound(self, beta: float = 0.05) -> float:
        """B such that with probability ≥ 1 − β every key of the domain has |released − true frequency| ≤ B.

        Keys that are not released count as frequency 0. The probability is over the noise
        (unconditional: not conditioned on which keys were released). Exact per case (proofs in
        ``docs/proofs/histograms.md`` §4), with k_m(β) the smallest k such that m independent noise
        draws all satisfy |Z| ≤ k with probability ≥ 1 − β:

        - laplace, replace-one: k_m(β)/n over the m noisy bins;
        - laplace, add/remove: (k_m(β/2) + s)/N̂ where N̂ = :attr:`total` and s bounds |ΣZ|
          with probability ≥ 1 − β/2; ``inf`` when N̂ ≤ s (the denominator is not known to be
          positive). True frequency = count / (sum of the true counts of the released bins);
        - stable, replace-one: (T − 1 + k_n(β))/n (at most n keys are present; zero keys are exact);
        - stable, add/remove (true frequency F/n, n = all records): β/2 for the total, β/2 for the
          counts. s = the smallest s with P[|Z_n| > s] ≤ β/2, so n ∈ [n̂ − s, n̂ + s]; at most
          n ≤ n̂ + s keys are present, k = k_{n̂+s}(β/2). Released keys are within
          (k + s·f⁺)/n̂ with f⁺ = min(1, (max count + k)/(n̂ − s)) ≥ every released key's true
          frequency; suppressed keys have true frequency ≤ (T − 1 + k)/(n̂ − s). B is the larger;
          ``inf`` when n̂ ≤ s (then also when n̂ ≤ 0, where the frequencies are NaN).
        """
        where = "HistogramRelease.error_bound"
        beta = check_beta(where, beta)
        if self.selection != "threshold":  # no threshold on the counts bounds the suppressed keys
            return math.inf
        t = self._law  # the counts' noise law
        if self.mechanism == "laplace_histogram":
            m = self._bins()
            if self.n is not None:
                return _abs_quantile_all(t, m, beta) / self.n
            k = _abs_quantile_all(t, m, beta / 2)
            s = _sum_abs_quantile(t, m, beta / 2)
            return _ratio_error_bound(k, s, self.total)
        if self.neighbors == "replace":
            return (self.threshold - 1 + _abs_quantile_all(t, self.n, beta)) / self.n
        if self._no_total:  # share 0: no denominator was released
            return math.inf
        s, m = self._total_parts(beta)
        total = int(self.noisy_total)
        if total <= s:
            return math.inf
        k = _abs_quantile_all(t, m, beta / 2)
        top = int(self.counts.max()) if self.counts.size else 0
        f_up = min(1.0, (top + k) / (total - s))
        released = _ratio_error_bound(k, s * f_up, total)
        return max(released, (self.threshold - 1 + k) / (total - s))

    def count_error_bound(self, beta: float = 0.05, *, max_keys: int | None = None) -> float:
        """k such that with probability ≥ 1 − β every key (released or not) has |released − true count| ≤ k.

        laplace: k over the m bins. stable: T − 1 + k over the present keys, whose number is at
        most n (replace-one) or a public bound ``max_keys`` you give. Stable under add/remove
        without ``max_keys``: β/2 goes to the noisy total, whose upper end n̂ + s bounds n (hence
        the number of present keys) with probability ≥ 1 − β/2, and T − 1 + k_{n̂+s}(β/2) is
        returned. ``max_keys`` overrides n when given.
        """
        where = "HistogramRelease.count_error_bound"
        beta = check_beta(where, beta)
        if self.selection != "threshold":  # no threshold on the counts bounds the suppressed keys
            return math.inf
        if isinstance(self.params, LaplaceHistogramParams):
            return float(self.params.count_error_bound(beta))
        if max_keys is None and self.n is not None:
            max_keys = max(1, self.n)
        if max_keys is None and self.noisy_total is not None:
            _, m = self._total_parts(beta)
            return float(self.threshold - 1 + _abs_quantile_all(self._law, m, beta / 2))
        return self.params.count_error_bound(beta, max_keys=max_keys)

    def confidence_intervals(
        self, beta: float = 0.05, *, unit: str = "frequency"
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-key intervals (low, high) that each contain the true value with probability ≥ 1 − β.

        Coverage is per key and unconditional (not simultaneous; for all keys at once use
        :meth:`error_bound`). Counts: noisy count ± a with a the smallest k with P[|Z| > k] ≤ β,
        clipped to the feasible range [0, n] (so an interval is never empty). Frequencies: the
        count interval / n (replace-one); under add/remove, with β split evenly between the key
        and the total, [(c − a')/(N̂ + s), (c + a')/(N̂ − s)] clipped to [0, 1] ([0, 1] when
        N̂ ≤ s), where N̂ is the sum of the released counts (laplace; s bounds |ΣZ|) or the
        separately released :attr:`noisy_total` (stable; s bounds |Z_n|, true frequency F/n).
        For the stable histogram, a key that was released may have been selected by large noise:
        coverage holds over the draws of the noise, not conditionally on the key being released.

        Parameters
        ----------
        beta : float
            Miss probability per key, in (0, 1).
        unit : {"frequency", "count"}

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            float64 arrays aligned with :attr:`keys`.
        """
        where = "HistogramRelease.confidence_intervals"
        beta = check_beta(where, beta)
        check_choice(where, "unit", unit, ("frequency", "count"))
        t = self._law  # the counts' noise law
        c = self.counts.astype(np.float64)
        upper_cap = math.inf if self.n is None else float(self.n)
        if unit == "count" or self.n is not None:
            a = _abs_quantile(t, beta)
            low, high = np.clip(c - a, 0.0, upper_cap), np.clip(c + a, 0.0, upper_cap)
            if unit == "count":
                return low, high
            return low / self.n, high / self.n  # n is public here
        if self._no_total:  # share 0: no frequency was released, so no interval for it
            return np.full_like(c, np.nan), np.full_like(c, np.nan)
        a = _abs_quantile(t, beta / 2)
        if self.mechanism == "stable_histogram":
            s, total = self._total_parts(beta)[0], int(self.noisy_total)
        else:
            s, total = _sum_abs_quantile(t, self._bins(), beta / 2), self.total
        return _ratio_intervals(c, a, s, total)

    def to_dict(self) -> dict[Any, float]:
        """{key: frequency}; the ``other`` bin, when present, under the key None."""
        out = dict(zip(self.keys.tolist(), self.frequencies.tolist(), strict=True))
        if self.other_count is not None:
            out[None] = self.other_frequency
        return out

    def to_pandas(self, beta: float = 0.05) -> Any:
        """DataFrame with columns key, count, frequency, ci_low, ci_high (frequency intervals).

        The ``other`` bin, when present, is the last row with key None (no interval).
        """
        import pandas as pd

        low, high = self.confidence_intervals(beta)
        frame = pd.DataFrame(
            {
                "key": pd.Series(self.keys, dtype=object) if self.keys.dtype.kind == "O" else self.keys,
                "count": self.counts,
                "frequency": self.frequencies,
                "ci_low": low,
                "ci_high": high,
            }
        )
        if self.other_count is not None:
            row = {
                "key": None,
                "count": self.other_count,
                "frequency": self.other_frequency,
                "ci_low": np.nan,
                "ci_high": np.nan,
            }
            frame = pd.concat([frame.astype({"key": object}), pd.DataFrame([row])], ignore_index=True)
        return frame

    def plot(self, path: Any = None, *, beta: float = 0.05, max_keys: int = 40) -> Figure:
        """Bar chart of the frequencies with their (1 − β) intervals and, for the stable
        histogram, the threshold T in frequency units.

        At most ``max_keys`` bars are drawn: the keys with the largest noisy counts
        (post-processing), in domain order for the Laplace histogram (whose domain order is the
        user's) and by decreasing noisy count for the stable histogram. Uses matplotlib's Agg canvas (no display needed). Saves to
        ``path`` when given and returns the :class:`matplotlib.figure.Figure`.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        max_keys = check_positive_int("HistogramRelease.plot", "max_keys", max_keys)
        low, high = self.confidence_intervals(beta)
        idx = np.arange(len(self.keys))
        if self.threshold is not None:  # stable: no meaningful key order, show the largest first
            idx = np.argsort(-self.counts, kind="stable")[:max_keys]
        elif len(idx) > max_keys:
            idx = np.sort(np.argsort(-self.counts, kind="stable")[:max_keys])
        f = self.frequencies[idx]
        fig = Figure(figsize=(max(6.0, 0.3 * len(idx) + 2), 4.0))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        x = np.arange(len(idx))
        ax.bar(x, f, color="#4878a8")
        ax.errorbar(
            x,
            f,
            yerr=[np.maximum(f - low[idx], 0), np.maximum(high[idx] - f, 0)],
            fmt="none",
            ecolor="black",
            capsize=2,
            lw=0.8,
        )
        ax.set_xticks(x, [str(k) for k in self.keys[idx].tolist()], rotation=90, fontsize=7)
        if self.threshold is not None and math.isfinite(self._denominator()):
            ax.axhline(
                self.threshold / self._denominator(),
                color="#c03030",
                ls="--",
                lw=1,
                label=f"threshold T = {self.threshold}" + (
                    f" (T − 1 kept with probability {float(b):.3g})"
                    if (b := getattr(self.params, "boundary_probability", None)) else ""),
            )
            ax.legend(loc="upper right")
        shown = "" if len(idx) == len(self.keys) else f" (top {len(idx)} of {len(self.keys)} keys)"
        ax.set_title(
            f"{self.mechanism}: ε={self.epsilon:g}, δ={self.delta:g}, {self.neighbors}{shown}; "
            f"bars: {1 - beta:.0%} intervals"
        )
        ax.set_ylabel("frequency")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig

    def __post_init__(self) -> None:
        for name in ("keys", "counts", "frequencies"):
            _readonly(getattr(self, name))


# --------------------------------------------------------------------------------------------
# mechanisms
# --------------------------------------------------------------------------------------------


def _check_other(where: str, other: Any) -> bool:
    if not isinstance(other, (bool, np.bool_)):
        raise fail(where, "other", "True or False", other)
    return bool(other)


def _check_nonempty(where: str, key_counts: KeyCounts, neighbors: str) -> None:
    if neighbors == "replace" and key_counts.n == 0:
        raise fail(
            where,
            "data",
            "non-empty when neighbors='replace' (n is public there; use neighbors='add_remove')",
            "an empty input (n = 0)",
        )


def _charge(ledger: Any, params: LaplaceHistogramParams | StableHistogramParams, mechanism: str) -> None:
    if ledger is not None:
        ledger.charge(params.privacy_loss, mechanism=mechanism, parameters=params.public_parameters())


def _frequencies(counts: np.ndarray, denominator: float) -> np.ndarray:
    return counts / np.float64(denominator)


def _total_denominator(noisy_total: int) -> float:
    """The stable add/remove denominator: n̂ itself, NaN when n̂ ≤ 0 (no frequency exists)."""
    return float(noisy_total) if noisy_total >= 1 else math.nan


def _no_total_denominator(noisy_total: int | None) -> float:
    """:func:`_total_denominator`, or NaN without a total (``total_epsilon_share=0``)."""
    return math.nan if noisy_total is None else _total_denominator(noisy_total)


def _ratio_error_bound(k: float, s: float, total: int) -> float:
    """(k + s)/N̂ for frequencies c/N̂ with count noise ≤ k and total noise ≤ s; ∞ when N̂ ≤ s.

    Shared by both add/remove paths (proof: docs/proofs/histograms.md §4.2 and §4.4).
    """
    return (k + s) / total if total > s else math.inf


def _ratio_intervals(c: np.ndarray, a: int, s: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-key [(c − a)/(N̂ + s), (c + a)/(N̂ − s)] clipped to [0, 1]; [0, 1] when N̂ ≤ s (§4.5)."""
    if total <= s:
        return np.zeros_like(c), np.ones_like(c)
    low = np.clip((c - a) / (total + s), 0.0, 1.0)
    high = np.clip((c + a) / (total - s), 0.0, 1.0)
    return low, high


def _spark_input(where: str, data: Any, column: Any) -> bool:
    """True for a Spark DataFrame (which needs ``column``); ``column`` is refused for other data."""
    module = type(data).__module__
    if module.startswith("pyspark."):
        return True
    if column is not None:
        raise fail(where, "column", "omitted unless data is a Spark DataFrame (data is the key column itself)",
                   column)
    return False


def _spark_units(where: str, units: Any) -> None:
    """With a Spark DataFrame, ``units`` is the name of a column of it (or None)."""
    if units is not None and not (isinstance(units, str) and units):
        raise fail(where, "units", "the name of a column of the Spark DataFrame (the privacy unit)",
                   f"<{type(units).__module__}.{type(units).__qualname__}>")


def laplace_histogram(
    data: Any,
    *,
    epsilon: Any,
    domain: Any,
    neighbors: str | None = None,
    other: bool = False,
    rng: Any = None,
    ledger: Any = None,
    units: Any = None,
    max_keys_per_unit: int | str = 1,
    max_rows_per_key: int = 1,
    column: str | None = None,
    noise: str = "laplace",
    delta: Any = None,
) -> HistogramRelease:
    """Laplace histogram over a public domain: every domain key gets a noisy count.

    Algorithm: count the keys of ``data`` (records outside the domain fall into no bin, or into
    the ``other`` bin); add to every count of the domain an independent exact discrete Laplace
    draw Z, P[Z = k] ∝ e^{−|k|/t}, t = 2/ε (replace-one) or 1/ε (add/remove); release the noisy
    counts and the frequencies ``count / n`` (replace-one) or ``count / max(1, Σ counts)``
    (add/remove).

    Parameters
    ----------
    data : array-like
        1-D hashable keys: list/tuple, numpy array, pandas or polars Series, pyarrow array.
        Missing keys (None/null/NaN) count in n and belong to no bin (``other`` if enabled).
        Or a Spark DataFrame with ``column`` (``pip install 'privagg[spark]'``): counted by a
        ``groupBy`` in Spark, the domain a broadcast join (:mod:`privagg.engines.spark`).
    epsilon : float
        ε > 0, finite.
    domain : sequence
        The public keys, distinct, in the order of the release. Never inferred from data.
    neighbors : {"replace", "add_remove"}, optional
        Replace-one (n public; the default without ``units``) or add/remove-one (n private; the
        default with ``units``, where the neighbours add or remove one unit with all its rows,
        or replace one unit by another).
    other : bool
        Add one more noisy bin with the number of records outside the domain.
    rng : None, int, SeedSequence or Generator
        ``None``: the secure generator. Anything else gives ``secure=False`` (tests, simulation).
    ledger : privagg.accounting.Ledger, optional
        Charged with ε after validation and counting, before any noise is drawn.
    units : array-like, optional
        The privacy unit of each record (aligned with ``data``; a missing unit is one more
        unit); with a Spark DataFrame, the name of its unit column. Given: user-level privacy with contribution bounding — each unit keeps at most
        ``max_keys_per_unit`` (ℓ0) of its keys (the ``other`` bin counting as a key) and at most
        ``max_rows_per_key`` (ℓ∞) rows per key, chosen uniformly at random (keyed by a secret
        drawn from ``rng``); the noise scale becomes 2ℓ0ℓ∞/ε (replace) or ℓ0ℓ∞/ε (add/remove),
        and frequencies divide by the sum of the released counts (n is not public). Counts,
        bounds and intervals are about the bounded counts. docs/proofs/histograms.md §7.
    max_keys_per_unit, max_rows_per_key : int
        ℓ0 and ℓ∞ (default 1: a count is a number of distinct units). Only with ``units``.
        ``max_keys_per_unit="auto"``: ℓ0 is chosen privately as the noisy 0.9 quantile of the
        number of distinct keys per unit over 1..:data:`AUTO_L0_MAX`, paid with 10 % of ε (the
        histogram gets the rest); reported as :attr:`HistogramRelease.auto_l0`
        (docs/proofs/histograms.md §9).
    column : str, optional
        The key column when ``data`` is a Spark DataFrame (refused otherwise).
    noise : {"laplace", "gaussian"}
        ``"gaussian"`` (with ``units`` and ``delta``): exact discrete Gaussian noise with ℓ2
        sensitivity √ℓ0·ℓ∞ (add/remove) or √(2ℓ0)·ℓ∞ (replace), calibrated to ρ-zCDP with the
        certified conversion to (ε, δ)-DP; smaller errors than Laplace for large ℓ0. Error
        bounds and intervals use the discrete Gaussian law (docs/proofs/histograms.md §10).
    delta : float, optional
        δ in (0, 1), with ``noise="gaussian"`` only.

    Returns
    -------
    HistogramRelease
        ``keys`` = the domain, ``counts`` int64 (may be negative), ``threshold=None``,
        ``delta=0.0``.

    Raises
    ------
    ParameterError
        Bad ε, neighbours, domain (empty, duplicates, missing keys), ``other`` or ``rng``; 2-D or
        unhashable data; empty data under replace-one. Never because of a record's value:
        records outside the domain are not an error.
    BudgetExceededError
        From ``ledger``; nothing is released.

    Privacy
    -------
    ε-DP for the chosen neighbour relation. Replace-one changes two counts by 1 (ℓ1 change 2,
    scale 2/ε); add/remove changes one count by 1 (scale 1/ε). Public: the domain, ε, the
    neighbour relation, and n under replace-one. Noise is exact (no floating-point leak).

    Examples
    --------
    >>> r = laplace_histogram([1, 1, 2, 5], epsilon=1.0, domain=[1, 2, 3], rng=0)
    >>> r.keys.tolist(), r.n, r.secure
    ([1, 2, 3], 4, False)
    """
    where = "laplace_histogram"
    if _spark_input(where, data, column):  # the Spark engine (privagg[spark]): same core, below
        from ..engines import spark

        _spark_units(where, units)
        neighbors = _resolve_neighbors(where, neighbors, units is not None)
        return spark.laplace_histogram(data, column=column, epsilon=epsilon, domain=domain, neighbors=neighbors,
                                       other=other, rng=rng, ledger=ledger, units=units,
                                       max_keys_per_unit=max_keys_per_unit, max_rows_per_key=max_rows_per_key)
    check_epsilon(where, epsilon)
    if _is_auto(max_keys_per_unit) and units is not None:
        check_choice(where, "noise", noise, NOISES)
        from ..engines.numpy_engine import NumpyEngine

        gen, _ = resolve_rng(rng, where)
        return auto_l0_release(NumpyEngine(data, units, where=where), where, epsilon=epsilon,
                               max_rows_per_key=max_rows_per_key, rng=gen, ledger=ledger, unit=_unit_name(units),
                               neighbors=neighbors, delta=delta, domain=domain, other=other, noise=noise)
    bounds = _check_bounds(where, units, max_keys_per_unit, max_rows_per_key)
    neighbors = _resolve_neighbors(where, neighbors, bounds is not None)
    dom = as_domain(domain, where)
    with_other = _check_other(where, other)
    if bounds is None:
        if noise != "laplace" or delta is not None:  # refused with the reason (units missing)
            LaplaceHistogramParams.build(epsilon, neighbors, dom.size + int(with_other), where=where, noise=noise,
                                         delta=delta)
        resolve_rng(rng, where)
        return laplace_histogram_from_counts(
            count_keys(data, where),
            epsilon=epsilon,
            domain=dom,
            neighbors=neighbors,
            other=other,
            rng=rng,
            ledger=ledger,
        )
    LaplaceHistogramParams.build(epsilon, neighbors, dom.size + int(with_other), where=where, bounds=bounds,
                                 noise=noise, delta=delta)
    gen, _ = resolve_rng(rng, where)
    key_counts = _bounded(where, data, units, bounds, gen, domain=dom, keep_other=with_other)
    return laplace_histogram_from_counts(
        key_counts, epsilon=epsilon, domain=dom, neighbors=neighbors, other=other, rng=gen, ledger=ledger,
        max_keys_per_unit=bounds[0], max_rows_per_key=bounds[1], unit=_unit_name(units), noise=noise, delta=delta,
    )


def _unit_name(units: Any) -> str:
    """The unit's public label: a Series' name (schema), else "units"."""
    name = getattr(units, "name", None)
    return name if isinstance(name, str) and name else "units"


def _bounded(
    where: str, data: Any, units: Any, bounds: tuple[int, int], gen: Any, *, domain: Any = None,
    keep_other: bool = False,
) -> KeyCounts:
    """Bounded counts of in-memory data (the numpy engine), with a secret drawn from ``gen``."""
    from ..engines.base import Bounding, draw_secret
    from ..engines.numpy_engine import NumpyEngine

    engine = NumpyEngine(data, units, where=where)
    bounding = Bounding(bounds[0], bounds[1], draw_secret(gen))
    return engine.bounded_counts(bounding, domain=domain, keep_other=keep_other).key_counts


def laplace_histogram_from_counts(
    key_counts: KeyCounts,
    *,
    epsilon: Any,
    domain: Any,
    neighbors: str | None = None,
    other: bool = False,
    rng: Any = None,
    ledger: Any = None,
    max_keys_per_unit: int | None = None,
    max_rows_per_key: int | None = None,
    unit: str | None = None,
    noise: str = "laplace",
    delta: Any = None,
) -> HistogramRelease:
    """:func:`laplace_histogram` on counts made by an engine (same parameters, same guarantee).

    ``key_counts.keys`` may be a numpy or pyarrow array in any order; ``key_counts.n`` counts
    every record (missing keys included). User level: give ``max_keys_per_unit`` and
    ``max_rows_per_key``; ``key_counts`` must then be an engine's *bounded* counts
    (:meth:`privagg.engines.base.Engine.bounded_counts` with the domain and ``keep_other=other``),
    and ``unit`` names the privacy unit.
    """
    where = "laplace_histogram"
    bounds = None
    if max_keys_per_unit is not None or max_rows_per_key is not None:
        bounds = _check_bounds(where, True, max_keys_per_unit, max_rows_per_key)
    neighbors = _resolve_neighbors(where, neighbors, bounds is not None)
    dom = domain if isinstance(domain, Domain) else as_domain(domain, where)
    with_other = _check_other(where, other)
    params = LaplaceHistogramParams.build(epsilon, neighbors, dom.size + int(with_other), where=where, bounds=bounds,
                                          noise=noise, delta=delta)
    gen, secure = resolve_rng(rng, where)
    if bounds is None:  # at user level n is not public: no emptiness check (and no error)
        _check_nonempty(where, key_counts, neighbors)
    aligned, n_outside = align_to_domain(key_counts, dom, where)
    if with_other:
        aligned = np.append(aligned, np.int64(n_outside))
    _charge(ledger, params, where)
    if params.sigma2 is None:
        noisy = aligned + discrete_laplace(params.scale, size=params.bins, rng=gen)
    else:  # noise="gaussian": exact discrete Gaussian, ρ-zCDP (§10)
        noisy = aligned + discrete_gaussian(params.sigma2, size=params.bins, rng=gen)
    counts, other_count = (noisy[:-1], int(noisy[-1])) if with_other else (noisy, None)
    n = key_counts.n if neighbors == "replace" and bounds is None else None
    denominator = n if n is not None else max(1, int(noisy.sum()))
    return HistogramRelease(
        mechanism=where,
        keys=dom.keys,
        counts=counts,
        frequencies=_frequencies(counts, denominator),
        epsilon=params.epsilon,
        delta=params.delta,
        neighbors=neighbors,
        scale=float(params.scale),
        threshold=None,
        n=n,
        secure=secure,
        params=params,
        other_count=other_count,
        unit=None if bounds is None else (unit or "units"),
    )


def stable_histogram(
    data: Any,
    *,
    epsilon: Any,
    delta: Any,
    neighbors: str | None = None,
    threshold: str = "tight",
    total_epsilon_share: Any = None,
    rng: Any = None,
    ledger: Any = None,
    units: Any = None,
    max_keys_per_unit: int | str = 1,
    max_rows_per_key: int = 1,
    column: str | None = None,
    selection: str = "threshold",
    noise: str = "laplace",
) -> HistogramRelease:
    """Stability-based histogram: noisy counts of the present keys, kept iff noisy count ≥ T.

    Algorithm: count the keys present in ``data`` (the domain is never materialized: cost O(n)
    whatever the number of possible keys); add an exact discrete Laplace draw of scale
    t = 2/ε (replace-one) or 1/ε_c (add/remove) to each count; keep a key iff its noisy count is
    **≥ T** (:func:`stable_threshold`; or = T − 1 and an exact coin of probability b with
    ``threshold="randomized"``); release kept keys (sorted), their noisy counts and
    frequencies ``count / n`` (replace-one). Under add/remove n is private: the release also
    carries a noisy total n̂ = n + Z_n, Z_n ~ DL(1/ε_n), from the same generator, and the
    frequencies are ``count / n̂`` (NaN when n̂ ≤ 0); ε_n = share·ε and ε_c = ε − ε_n.
    Keys absent from the data are never released.

    Parameters
    ----------
    data : array-like
        1-D hashable keys (see :func:`laplace_histogram`). Missing keys count in n only. Or a
        Spark DataFrame with ``column``: counts, noise and threshold run in the cluster, and only
        the released keys reach the driver (:mod:`privagg.engines.spark`).
    epsilon : float
        ε > 0, finite.
    delta : float
        δ in (0, 1).
    neighbors : {"replace", "add_remove"}
    threshold : {"tight", "seed", "randomized"}
        ``"tight"`` (default): smallest integer T ≥ 1 with P[Z ≥ T − 1] ≤ δ for the counts' scale
        (T = 28 replace-one, 16 add/remove at ε = 1, δ = 1e-6 with the default share).
        ``"seed"``: ⌈1 + t·ln(2/δ)⌉ (31 and 18). ``"randomized"``: the tight T, and a key whose
        noisy count is exactly T − 1 is kept with probability b (an independent exact coin), b
        the largest multiple of 2^-32 that keeps a new key's release probability ≤ δ (δ₁ at user
        level): δ is spent exactly, so more keys are released (docs/proofs/histograms.md §2.5; b is
        ``params.boundary_probability`` and in the JSON).
    total_epsilon_share : float, optional
        add/remove only (an error under replace-one, where n is public): the share of ε spent on
        the noisy total, in [0, 1); default 0.1 (docs/proofs/histograms.md §2.4). The counts and
        the threshold use ε_c = (1 − share)·ε. ``0``: no noisy total, all of ε on the counts
        (T = 15 instead of 16 at ε = 1, δ = 1e-6); ``noisy_total`` is None, the frequencies are
        NaN and :meth:`HistogramRelease.error_bound` is ∞ (no denominator is released).
    rng, ledger, column
        As in :func:`laplace_histogram`; the ledger is charged (ε, δ) once, for both parts.
    units, max_keys_per_unit, max_rows_per_key
        User level, as in :func:`laplace_histogram` (add/remove of one unit only, the default
        then). The counts' scale is ℓ0ℓ∞/ε_c, the total's ℓ0ℓ∞/ε_n, and T the smallest integer
        with 1 − (1 − P[Z ≥ T − ℓ∞])^{ℓ0} ≤ δ (one unit can create up to ℓ0 new keys of count
        ≤ ℓ∞; docs/proofs/histograms.md §7). n̂ perturbs the sum of the bounded counts.
        ``max_keys_per_unit="auto"``: ℓ0 chosen privately from 10 % of ε (as in
        :func:`laplace_histogram`; the histogram gets (0.9ε, δ); §9), not with ``selection="optimal"``.
    selection : {"threshold", "optimal", "gaussian"}
        ``"threshold"`` (default): the noisy counts are thresholded at T. ``"optimal"`` (with
        ``units`` only): each key is kept, independently, by the optimal partition selection of
        Desfontaines et al. (:mod:`privagg.mechanisms.partition_selection`) on its number of
        distinct units after bounding, at (ε_c/(2ℓ0), δ/ℓ0) per key (a unit changes at most ℓ0
        of these numbers, each by 1), and the kept keys' bounded counts get discrete Laplace
        noise of scale 2ℓ0ℓ∞/ε_c (the other ε_c/2); ε_n and the charge are as above
        (docs/proofs/histograms.md §8). ``threshold`` is then 0 (no threshold). Not with a
        Spark DataFrame (an error there).
        ``"gaussian"`` (with ``units`` and Laplace counts): Gaussian thresholding of the distinct
        units per key (PipelineDP's ``GAUSSIAN_THRESHOLDING``): a unit changes at most ℓ0 of those
        numbers, each by 1, so the selection is the Gaussian thresholding of ``noise="gaussian"``
        at (ℓ0, 1) and (ε_c/2, δ), with the same exact calibration (σ², T); a key is kept iff its
        distinct units plus discrete Gaussian noise reach T (``selection_params``); the kept keys'
        bounded counts get discrete Laplace noise of scale 2ℓ0ℓ∞/ε_c, as with ``"optimal"``
        (docs/proofs/histograms.md §8.2). Pays off for ℓ∞ > 1 (the selection's noise does not grow
        with ℓ∞) and ℓ0 > 1. ``threshold`` is then 0 (no threshold on the counts).
    noise : {"laplace", "gaussian"}
        ``"laplace"`` (default). ``"gaussian"`` (with ``units``, ``threshold="tight"`` and
        ``selection="threshold"``): Gaussian thresholding — exact discrete Gaussian noise on
        the bounded counts, calibrated by the certified (ε_c, δ) profile of the multivariate
        discrete Gaussian (every shift vector of ≤ ℓ0 coordinates in [1, ℓ∞]): the smallest σ²
        whose noise part is ≤ δ, then the smallest T with every mix of new and changed keys ≤ δ
        (docs/proofs/histograms.md §11.1; large ℓ0·ℓ∞, σ or tiny δ: the zCDP calibration of §11,
        δ/2 + δ/2). The noisy total stays discrete Laplace. Pays off for large ℓ0 (noise grows
        as √ℓ0 instead of ℓ0). ``scale`` is then an upper bound on σ.

    Returns
    -------
    HistogramRelease
        ``keys`` = kept keys sorted, ``counts`` int64 ≥ T (≥ T − 1 with ``threshold="randomized"``),
        ``threshold`` = T; ``noisy_total`` = n̂ under add/remove.

    Raises
    ------
    ParameterError
        Bad ε, δ, neighbours, threshold, share or rng; 2-D or unhashable data; empty data under
        replace-one (under add/remove an empty input gives a valid empty release).
    BudgetExceededError
        From ``ledger``; nothing is released.

    Privacy
    -------
    (ε, δ)-DP for the chosen neighbour relation, with δ ≥ P[Z ≥ T − 1]: a neighbour changes
    counts by 1 (pure ε part), and at most one key's presence matters at a time (the δ part).
    (User level: §7; ``selection="optimal"``: §8, ``"gaussian"``: §8.2; ``noise="gaussian"``: §11 of
    docs/proofs/histograms.md.)
    Under add/remove the noisy total (sensitivity 1) is ε_n-DP and the counts (ε_c, δ)-DP;
    together (ε_n + ε_c, δ) with ε_n + ε_c ≤ ε. Public: ε, δ, the rule, the share, the
    neighbour relation, n under replace-one. The set of possible keys is not needed.

    References
    ----------
    S. Vadhan, "The Complexity of Differential Privacy", 2017, §3.3 (stability-based histogram).

    Examples
    --------
    >>> r = stable_histogram(["a"] * 100 + ["b"], epsilon=1.0, delta=1e-6, rng=0)
    >>> r.threshold, r.keys.tolist()
    (28, ['a'])
    """
    where = "stable_histogram"
    if _spark_input(where, data, column):  # the Spark engine: noise and threshold in the cluster
        from ..engines import spark

        _spark_units(where, units)
        check_choice(where, "selection", selection, SELECTIONS)
        if selection != "threshold":  # not implemented in the cluster (it is not silently ignored)
            raise fail(where, "selection", "'threshold' with a Spark DataFrame", selection)
        check_choice(where, "noise", noise, NOISES)
        if noise != "laplace":
            raise fail(where, "noise", "'laplace' with a Spark DataFrame", noise)
        neighbors = _resolve_neighbors(where, neighbors, units is not None)
        return spark.stable_histogram(data, column=column, epsilon=epsilon, delta=delta, neighbors=neighbors,
                                      threshold=threshold, total_epsilon_share=total_epsilon_share, rng=rng,
                                      ledger=ledger, units=units, max_keys_per_unit=max_keys_per_unit,
                                      max_rows_per_key=max_rows_per_key)
    check_epsilon(where, epsilon)
    if _is_auto(max_keys_per_unit) and units is not None:
        check_choice(where, "selection", selection, ("threshold",))
        check_choice(where, "noise", noise, ("laplace",))
        from ..engines.numpy_engine import NumpyEngine

        gen, _ = resolve_rng(rng, where)
        return auto_l0_release(NumpyEngine(data, units, where=where), where, epsilon=epsilon,
                               max_rows_per_key=max_rows_per_key, rng=gen, ledger=ledger, unit=_unit_name(units),
                               neighbors=neighbors, delta=delta, threshold=threshold,
                               total_epsilon_share=total_epsilon_share)
    bounds = _check_bounds(where, units, max_keys_per_unit, max_rows_per_key)
    neighbors = _resolve_neighbors(where, neighbors, bounds is not None)
    check_choice(where, "selection", selection, SELECTIONS)
    check_choice(where, "noise", noise, NOISES)
    _check_selection_options(where, selection, noise, threshold)
    params = StableHistogramParams.build(
        epsilon, delta, neighbors, threshold, total_epsilon_share=total_epsilon_share, where=where, bounds=bounds,
        noise=noise,
    )
    if selection != "threshold":
        return _optimal_release(where, data, units, bounds, params, resolve_rng(rng, where)[0], ledger, selection)
    if bounds is None:
        resolve_rng(rng, where)
        return _stable_release(count_keys(data, where), params, rng, ledger)
    gen, _ = resolve_rng(rng, where)
    return _stable_release(_bounded(where, data, units, bounds, gen), params, gen, ledger, _unit_name(units))


def _optimal_release(where: str, data: Any, units: Any, bounds: tuple[int, int] | None,
                     params: StableHistogramParams, gen: Any, ledger: Any,
                     selection: str = "optimal") -> HistogramRelease:
    """selection="optimal": each key kept by the optimal partition selection on its distinct-unit
    count at (ε_c/(2ℓ0), δ/ℓ0); "gaussian": by Gaussian thresholding of that count at (ℓ0, 1) and
    (ε_c/2, δ); counts with DL(2ℓ0ℓ∞/ε_c) noise, the noisy total as in the threshold release
    (docs/proofs/histograms.md §8, §8.2)."""
    from ..engines.base import Bounding, draw_secret
    from ..engines.numpy_engine import NumpyEngine

    if bounds is None:
        raise fail(where, "selection", f"{selection!r} only with units (user level)", selection)
    l0, linf = bounds
    _selection_budget(where, params, selection)  # validates the selection's parameters before the charge
    engine = NumpyEngine(data, units, where=where)
    secret = draw_secret(gen)
    bc = engine.bounded_counts(Bounding(l0, linf, secret)).key_counts
    # the same secret keeps the same ℓ0 keys per unit (the kept set does not depend on ℓ∞): the
    # ℓ∞ = 1 counts are the distinct units of each key among the kept pairs, aligned with bc
    uc = bc if linf == 1 else engine.bounded_counts(Bounding(l0, 1, secret)).key_counts
    return _optimal_from_counts(where, bc, uc, params, gen, ledger, _unit_name(units), selection)


def _optimal_budget(where: str, params: StableHistogramParams, l0: int) -> tuple[Fraction, Fraction]:
    """The per-key (ε', δ') = (ε_c/(2ℓ0), δ/ℓ0) of selection="optimal", validated (its table exists)."""
    from .partition_selection import keep_numerators

    eps_sel, delta_sel = params.counts_epsilon / (2 * l0), Fraction(params.delta) / l0
    keep_numerators(eps_sel, delta_sel, where=where)
    return eps_sel, delta_sel


def _check_selection_options(where: str, selection: str, noise: str, threshold: str) -> None:
    """A separate key selection (``"optimal"``/``"gaussian"``) noises the counts with Laplace noise
    and puts no threshold on them: other noise, or a randomized threshold, is a ParameterError."""
    if selection == "threshold":
        return
    if noise != "laplace":
        raise fail(where, "noise", f"'laplace' with selection={selection!r}", noise)
    if threshold == "randomized":  # no threshold on the counts to randomize
        raise fail(where, "threshold", f"'tight' or 'seed' with selection={selection!r}", threshold)


def gaussian_selection_params(params: StableHistogramParams, *, where: str = "stable_histogram"
                              ) -> StableHistogramParams:
    """selection="gaussian": the selection's parameters — Gaussian thresholding of the distinct
    units per key (a unit changes ≤ ℓ0 of them, each by 1: bounds (ℓ0, 1)) at (ε_c/2, δ), no
    total, with the exact calibration of §11.1 (zCDP fallback §11). Public (parameters only)."""
    return StableHistogramParams.build(params.counts_epsilon / 2, params.delta, "add_remove",
                                       total_epsilon_share=0, where=where,
                                       bounds=(params.max_keys_per_unit, 1), noise="gaussian")


def _selection_budget(where: str, params: StableHistogramParams, selection: str) -> Any:
    """The selection's validated parameters: (ε', δ') per key ("optimal") or the Gaussian
    selection's :class:`StableHistogramParams` ("gaussian"); raises ParameterError before any charge."""
    if selection == "gaussian":
        return gaussian_selection_params(params, where=where)
    return _optimal_budget(where, params, params.max_keys_per_unit)


def _aligned_counts(counts: KeyCounts, unit_counts: KeyCounts) -> np.ndarray:
    """The bounded counts c of ``counts`` on the keys of ``unit_counts`` (0 where absent).

    Both come from one secret, so they list the same keys in the same order unless two pairs of
    one unit tie in π (§7.1) and the engine breaks the tie differently in its two runs; then the
    keys are matched by value. Keys absent from ``unit_counts`` have v = 0 and are never kept
    (p(0) = 0), so dropping them changes nothing released (docs/proofs/histograms.md §8)."""
    a, b = counts.keys, unit_counts.keys
    a = a.to_numpy(zero_copy_only=False) if is_arrow(a) else np.asarray(a)
    b = b.to_numpy(zero_copy_only=False) if is_arrow(b) else np.asarray(b)
    c = np.asarray(counts.counts, dtype=np.int64)
    if a.shape == b.shape and a.dtype == b.dtype and bool(np.all(a == b)):
        return c
    import pandas as pd

    idx = pd.Index(a).get_indexer(pd.Index(b))
    return np.where(idx >= 0, c[np.maximum(idx, 0)], 0).astype(np.int64)


def _optimal_from_counts(where: str, bc: KeyCounts, uc: KeyCounts, params: StableHistogramParams, gen: Any,
                         ledger: Any, unit: str | None, selection: str = "optimal") -> HistogramRelease:
    """selection="optimal" / "gaussian" on an engine's bounded counts at (ℓ0, ℓ∞) (``bc``) and at
    (ℓ0, 1) (``uc``, one secret): the charge, the selection on v, the counts' noise, the noisy total."""
    from .partition_selection import select

    budget = _selection_budget(where, params, selection)
    _check_scales(where, params.epsilon, 2 * params.scale)  # the counts' scale here, before the charge
    counts = _aligned_counts(bc, uc)
    if selection == "gaussian":
        sel: StableHistogramParams = budget
        about = {"selection_epsilon": str(sel.epsilon_exact), "selection_delta": str(_charged_delta(sel.delta)),
                 "selection_sigma2": str(sel.sigma2), "selection_threshold": sel.threshold,
                 "selection_calibration": sel.gaussian_calibration}
    else:
        about = {"selection_epsilon_per_key": str(budget[0]), "selection_delta_per_key": str(budget[1])}
    if ledger is not None:  # the parameters actually used (no threshold on the counts)
        ledger.charge(params.privacy_loss, mechanism=where, parameters={
            **params.public_parameters(), "threshold": None, "selection": selection, **about,
            "counts_scale": str(2 * params.scale)})
    v = np.asarray(uc.counts, dtype=np.int64)
    if selection == "gaussian":  # noisy distinct units ≥ T (every present key draws: size public given the keys)
        keep = v + discrete_gaussian(sel.sigma2, size=len(v), rng=gen) >= sel.threshold
    else:
        keep = select(v, *budget, gen)
    count_scale = 2 * params.scale
    noisy = counts + discrete_laplace(count_scale, size=len(counts), rng=gen)
    keys, kept = _kept_keys(uc.keys, keep), noisy[keep]
    order = sort_order(keys)
    keys, kept = keys[order], kept[order]
    noisy_total = None
    if params.total_scale is not None:  # share 0: no total (§2.4)
        noisy_total = int(bc.n) + int(discrete_laplace(params.total_scale, size=1, rng=gen)[0])
    return HistogramRelease(
        mechanism=where, keys=keys, counts=kept, frequencies=_frequencies(kept, _no_total_denominator(noisy_total)),
        epsilon=params.epsilon, delta=params.delta, neighbors=params.neighbors, scale=float(count_scale),
        threshold=0, n=None, secure=resolve_rng(gen, where)[1], params=params, noisy_total=noisy_total,
        unit=unit, selection=selection, counts_law=DiscreteLaplace(count_scale),
        selection_params=budget if selection == "gaussian" else None,
    )


def stable_histogram_from_counts(
    key_counts: KeyCounts,
    *,
    epsilon: Any,
    delta: Any,
    neighbors: str | None = None,
    threshold: str = "tight",
    total_epsilon_share: Any = None,
    rng: Any = None,
    ledger: Any = None,
    max_keys_per_unit: int | None = None,
    max_rows_per_key: int | None = None,
    unit: str | None = None,
    noise: str = "laplace",
    selection: str = "threshold",
    unit_counts: KeyCounts | None = None,
) -> HistogramRelease:
    """:func:`stable_histogram` on counts made by an engine (same parameters, same guarantee).

    ``key_counts.n`` (every record, missing keys included) is what the noisy total perturbs
    under add/remove. User level: give ``max_keys_per_unit`` and ``max_rows_per_key``;
    ``key_counts`` must be an engine's bounded counts (``keep_other=False``).
    ``selection="optimal"`` or ``"gaussian"`` (user level, Laplace noise): ``unit_counts`` are
    the same engine's bounded counts at (ℓ0, 1) with the *same* secret (the distinct units per
    key; optional at ℓ∞ = 1, where they equal ``key_counts``); with the generator that drew the
    secret as ``rng`` the release equals :func:`stable_histogram`'s (docs/proofs/histograms.md §8).
    """
    where = "stable_histogram"
    bounds = None
    if max_keys_per_unit is not None or max_rows_per_key is not None:
        bounds = _check_bounds(where, True, max_keys_per_unit, max_rows_per_key)
    neighbors = _resolve_neighbors(where, neighbors, bounds is not None)
    check_choice(where, "selection", selection, SELECTIONS)
    _check_selection_options(where, selection, noise, threshold)
    params = StableHistogramParams.build(
        epsilon, delta, neighbors, threshold, total_epsilon_share=total_epsilon_share, where=where, bounds=bounds,
        noise=noise,
    )
    if selection != "threshold":
        if bounds is None:
            raise fail(where, "selection", f"{selection!r} only with units (user level)", selection)
        if unit_counts is None and bounds[1] != 1:
            raise fail(where, "unit_counts", f"given with selection={selection!r} and max_rows_per_key > 1", None)
        _selection_budget(where, params, selection)  # before the generator is touched
        gen = resolve_rng(rng, where)[0]
        return _optimal_from_counts(where, key_counts, key_counts if unit_counts is None else unit_counts,
                                    params, gen, ledger, unit or "units", selection)
    if unit_counts is not None:
        raise fail(where, "unit_counts", "omitted with selection='threshold'", "given")
    return _stable_release(key_counts, params, rng, ledger, unit or "units")


def _stable_release(
    key_counts: KeyCounts, params: StableHistogramParams, rng: Any, ledger: Any, unit: str | None = None
) -> HistogramRelease:
    where = "stable_histogram"
    gen, secure = resolve_rng(rng, where)

    def draw() -> tuple[Any, np.ndarray]:
        noisy, keep = stable_noise_threshold(params, key_counts.counts, gen)
        return _kept_keys(key_counts.keys, keep), noisy[keep]

    return stable_histogram_from_draw(key_counts.n, draw, params, rng=gen, secure=secure, ledger=ledger, unit=unit)


# --------------------------------------------------------------------------------------------
# noise where the data is: the one noise-and-threshold step, and the release built around it
# --------------------------------------------------------------------------------------------


def stable_noise_threshold(
    params: StableHistogramParams, counts: Any, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The stable histogram's noise and threshold on one batch of counts: ``(noisy, keep)``.

    ``noisy = counts + Z`` with Z iid exact discrete Laplace(``params.scale``) drawn from ``rng``,
    and ``keep = (noisy ≥ T) & (counts > 0)`` (an engine may list keys of count 0: they are never
    released); with ``threshold_rule="randomized"`` a key whose noisy count is T − 1 is kept too
    when its exact Bernoulli(b) coin (one per key, drawn after the noise) says so. The only implementation of this step: the in-memory path calls it on all counts
    at once; an engine that noises where the data is (Spark) calls it on each partition's batch
    with that task's own generator. Batches are independent, so splitting the counts into batches
    leaves the law of the release unchanged.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if params.sigma2 is not None:  # noise="gaussian" (§11)
        noisy = counts + discrete_gaussian(params.sigma2, size=counts.shape[0], rng=rng)
    else:
        noisy = counts + discrete_laplace(params.scale, size=counts.shape[0], rng=rng)
    keep = noisy >= params.threshold  # ≥, as proven (docs/proofs/histograms.md)
    if params.boundary_probability:  # "randomized": T − 1 passes with probability b (§2.5); a coin per key
        keep |= (noisy == params.threshold - 1) & bernoulli_fraction(params.boundary_probability,
                                                                     size=counts.shape[0], rng=rng)
    return noisy, keep & (counts > 0)


def stable_histogram_from_draw(
    n_records: int,
    draw: Callable[[], tuple[Any, np.ndarray]],
    params: StableHistogramParams,
    *,
    rng: np.random.Generator,
    secure: bool,
    ledger: Any = None,
    unit: str | None = None,
) -> HistogramRelease:
    """The stable histogram around a ``draw`` made by an engine (same guarantee).

    Order: the emptiness check on ``n_records`` (the number of records, missing keys included), the
    ledger charge, then ``draw()`` — which must apply :func:`stable_noise_threshold` to every
    present key's count exactly once and return ``(kept keys, their noisy counts)``, materialised
    once — and last the noisy total n̂ (add/remove) from ``rng``, on the driver.
    """
    where = "stable_histogram"
    n_records = int(n_records)
    _check_nonempty(where, KeyCounts(keys=np.zeros(0), counts=np.zeros(0, dtype=np.int64), n=n_records),
                    params.neighbors)
    _charge(ledger, params, where)
    keys, kept = draw()  # engine-specific: in memory, or inside a cluster
    kept = np.asarray(kept, dtype=np.int64)
    order = sort_order(keys)
    keys, kept = keys[order], kept[order]
    n = n_records if params.neighbors == "replace" else None
    noisy_total = None
    if params.total_scale is not None:  # add/remove: n is private, release n + Z_n (§2.4)
        noisy_total = n_records + int(discrete_laplace(params.total_scale, size=1, rng=rng)[0])
    denominator = n if n is not None else _no_total_denominator(noisy_total)
    return HistogramRelease(
        mechanism=where,
        keys=keys,
        counts=kept,
        frequencies=_frequencies(kept, denominator),
        epsilon=params.epsilon,
        delta=params.delta,
        neighbors=params.neighbors,
        scale=float(params.scale),
        threshold=params.threshold,
        n=n,
        secure=secure,
        params=params,
        noisy_total=noisy_total,
        unit=None if params.max_keys_per_unit is None else unit,
    )


def _kept_keys(keys: Any, keep: np.ndarray) -> np.ndarray:
    if is_arrow(keys):
        import pyarrow as pa

        return keys.filter(pa.array(keep)).to_numpy(zero_copy_only=False)
    return np.asarray(keys)[keep]
