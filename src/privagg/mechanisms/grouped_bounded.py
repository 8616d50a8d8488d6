"""Bounded metrics per group: noisy counts, clamped sums and bounded means (pure ε-DP).

The primitives that :func:`privagg.aggregate` calls for ``count()``, ``sum(col, bounds)`` and
``mean(col, bounds=(lo, hi))`` (contract: :mod:`privagg.mechanisms.grouped`); a sum and a mean of
the same column with the same bounds in one query share one noisy count and one noisy centered
sum (:func:`shared_sums_means`, chosen by the public rule of :func:`share_plan`), and ``count()``
with a bounded mean share the pair (present, missing rows) of noisy counts
(:func:`shared_count_means`, rule :func:`count_share_plan`). Each is one numpy
pass over all groups (``np.add.reduceat`` over the group-sorted rows), never a Python loop per
group or per row. Proofs: ``docs/proofs/aggregate_bounded.md``.

Exact arithmetic (the float-sum traps of Casacuberta et al., CCS 2022). A value is never summed
as a float. Each row's value is clamped to ``[lo, hi]`` and rounded to the public *term grid*
``h = 2^e_t`` (``e_t = E − 38`` for the least ``E`` with ``max(|lo|, |hi|) < 2^E``): the term
``k_i = rint(clamp(x_i)/h)`` is an integer in ``[K_lo, K_hi] = [rint(lo/h), rint(hi/h)]``, a
function of ``x_i`` alone, ``|k_i| <= 2^38``. The group sums ``Σ k_i`` are computed exactly
(int64 blocks of ``2^22`` rows, ``2^22·(2^39 + 1) < 2^62``, then Python integers), so they do
not depend on the order of the rows, on their number or on their magnitudes; one row changes its
group's sum by at most ``max(|K_lo|, |K_hi|)`` *exactly* (the rounding is inside that bound).
The exact sums are moved once to a coarser public *release grid* ``g = 2^e`` (each sum rounded
on its own: at most one grid unit per changed group) and released with exact discrete Laplace
noise (:func:`privagg.noise.grid.grid_laplace_integers`). Same seed, same data in any order:
bit-identical release.

Neighbours (:class:`~privagg.mechanisms.grouped.Contribution`): add/remove one privacy unit with
rows in at most ℓ0 = ``max_groups`` groups and at most ℓ∞ = ``max_rows`` rows in each (record
level: ℓ0 = ℓ∞ = 1); ``replace`` = a removal and an addition, so every ℓ1 sensitivity doubles
(tight: the two units may touch disjoint groups).

The ``*_plan`` functions compute every exponent, sensitivity, scale and interval width from
public inputs only (and validate them): ``aggregate`` can call them before charging the ledger.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import check_positive_int, fail
from ..errors import ParameterError
from ..noise.distributions import DiscreteLaplace
from ..noise.grid import GRID_BITS, grid_laplace_integers, rescale_integers
from ..noise.rational import to_fraction
from .grouped import ColumnSums, Contribution, GroupedValues, MetricResult

__all__ = [
    "CountPlan",
    "CountSharePlan",
    "MeanPlan",
    "SharePlan",
    "SumPlan",
    "bounded_means",
    "clamped_sums",
    "count_pair",
    "count_plan",
    "centered_share",
    "count_share_plan",
    "mean_plan",
    "noisy_counts",
    "share_plan",
    "shared_count_means",
    "shared_sums_means",
    "sum_plan",
]

#: Terms lie on ``h = 2^(E − TERM_BITS)`` for ``max(|lo|, |hi|) < 2^E``: ``|k_i| <= 2^TERM_BITS``.
TERM_BITS = 38
#: Rows per exact int64 block: ``2^22 · (2^39 + 1) < 2^62`` (centered terms are ``<= 2^39 + 1``).
CHUNK_ROWS = 1 << 22
#: ``low``/``high`` cover the noise with probability at least this much.
LEVEL = Fraction(95, 100)
#: Bounds must satisfy ``max(|lo|, |hi|) <= 2^MAX_BOUND_BITS``: grid midpoints stay finite, and the
#: release exponent stays below ``_E_MAX`` (with bounds near 2^1000 it reached the cap and the
#: noise table took minutes to build, a hang that depended only on the parameters).
MAX_BOUND_BITS = 850
#: The release grid exponent is kept in the range that ``grid_laplace_integers`` accepts.
_E_MIN, _E_MAX = -1000, 900
#: Released grid coordinates are clipped to ``±2^RELEASE_BOUND_BITS`` (the grid module's bound).
RELEASE_BOUND_BITS = 50


# --------------------------------------------------------------------------------- validation
def _check_epsilon(where: str, epsilon: Any) -> Fraction:
    """ε > 0 as an exact Fraction (a float is read exactly)."""
    rule = "a finite number > 0 (a Fraction, int or float)"
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise fail(where, "epsilon", rule, epsilon)
    if isinstance(epsilon, (Fraction, numbers.Integral)):
        eps = Fraction(epsilon)
    else:
        f = float(epsilon)
        if not math.isfinite(f):
            raise fail(where, "epsilon", rule, epsilon)
        eps = Fraction(f)
    if eps <= 0:
        raise fail(where, "epsilon", rule, epsilon)
    return eps


def _check_contribution(where: str, contribution: Any) -> Contribution:
    if not isinstance(contribution, Contribution):
        raise fail(where, "contribution", "a grouped.Contribution", contribution)
    check_positive_int(where, "contribution.max_groups", contribution.max_groups)
    check_positive_int(where, "contribution.max_rows", contribution.max_rows)
    if not isinstance(contribution.replace, bool):
        raise fail(where, "contribution.replace", "a bool", contribution.replace)
    return contribution


def _check_bounds(where: str, lower: Any, upper: Any) -> tuple[float, float]:
    rule = f"finite numbers with lower < upper and |bound| <= 2^{MAX_BOUND_BITS}"
    out = []
    for name, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise fail(where, name, rule, v)
        f = float(v)
        if not math.isfinite(f) or abs(f) > 2.0**MAX_BOUND_BITS:
            raise fail(where, name, rule, v)
        out.append(f)
    lo, hi = out
    if not lo < hi:
        raise fail(where, "lower", rule, (lower, upper))
    return lo, hi


def _float_down(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def _float_up(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _floor_log2(q: Fraction) -> int:
    """``floor(log2 q)`` for a rational ``q > 0``, exactly."""
    k = q.numerator.bit_length() - q.denominator.bit_length()
    return k if Fraction(2) ** k <= q else k - 1


def _rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise fail("grouped_bounded", "rng", "a numpy Generator (resolved by aggregate)", rng)
    return rng


# --------------------------------------------------------------------------------------- plans
@dataclass(frozen=True)
class CountPlan:
    """The public calibration of :func:`noisy_counts` (all exact).

    Attributes
    ----------
    sensitivity : int
        ℓ1 sensitivity of the count vector: ``ℓ0·ℓ∞`` (add/remove), ``2·ℓ0·ℓ∞`` (replace).
    scale : Fraction
        Discrete Laplace scale ``t >= sensitivity/ε``.
    epsilon : Fraction
        The guarantee ``sensitivity/t`` (at most the ε given).
    target : Fraction
        The ε the noise was calibrated to: the largest float ``<=`` the ε given (or ``ε/2``).
    half_width : int
        The least ``k`` with ``P[|Z| > k] <= beta`` for ``Z ~ DLap(t)`` (exact decision).
    beta : Fraction
        The interval's miss probability.
    """

    sensitivity: int
    scale: Fraction
    epsilon: Fraction
    target: Fraction
    half_width: int
    beta: Fraction


@dataclass(frozen=True)
class SumPlan:
    """The public calibration of one exact-integer sum release (:func:`clamped_sums`, and the
    centered sum of :func:`bounded_means`).

    Attributes
    ----------
    lower, upper : float
        The clamping bounds.
    term_exponent : int
        Terms are integers on ``2^term_exponent`` (clamped sums: ``E − 38``; the centered sums
        of the mean: ``E − 39``, half that step).
    term_low, term_high : int
        ``rint(lower/h)``, ``rint(upper/h)`` with ``h = 2^(E − 38)``: every rounded term lies in
        this range.
    row_bound : int
        At most this much one row changes its group's integer sum (term units).
    changed_groups : int
        Groups one neighbour step can change: ``ℓ0`` (add/remove) or ``2ℓ0`` (replace).
    term_sensitivity : int
        ℓ1 sensitivity of the exact integer sums: ``changed_groups·ℓ∞·row_bound``.
    exponent : int
        The release grid ``g = 2^exponent``.
    sensitivity : int
        ℓ1 sensitivity in release units (rounding to the release grid included).
    scale, epsilon, target, half_width, beta
        As in :class:`CountPlan`, in release units.
    """

    lower: float
    upper: float
    term_exponent: int
    term_low: int
    term_high: int
    row_bound: int
    changed_groups: int
    term_sensitivity: int
    exponent: int
    sensitivity: int
    scale: Fraction
    epsilon: Fraction
    target: Fraction
    half_width: int
    beta: Fraction


@dataclass(frozen=True)
class MeanPlan:
    """The public calibration of :func:`bounded_means`: a count and a centered sum, each at
    ``float_down(ε/2)``; ``mid = (term_low + term_high)·h/2`` (the grid midpoint of the bounds,
    within ``h/2`` of ``(lo + hi)/2``)."""

    count: CountPlan
    centered: SumPlan
    mid: float

    @property
    def epsilon(self) -> Fraction:
        """The guarantee: the sum of the two parts' (sequential composition)."""
        return self.count.epsilon + self.centered.epsilon


def _laplace_scale(where: str, sensitivity: int, eps_target: Fraction) -> tuple[Fraction, Fraction]:
    """``(t, ε')`` exactly as :func:`grid_laplace_integers` calibrates: ε rounded down to a
    rational, ``t = to_fraction(Δ/ε, up)``, ``ε' = Δ/t``."""
    eps = to_fraction(eps_target, where=where, name="epsilon", direction="down")
    t = to_fraction(Fraction(sensitivity) / eps, where=where, name="scale")
    return t, Fraction(sensitivity) / t


def _target(eps: Fraction) -> Fraction:
    """The largest float ``<= ε``, as a Fraction: every part is calibrated to a float, so the
    float reported in :class:`MetricResult` (rounded up) never exceeds the ε given."""
    return Fraction(_float_down(eps))


def _count_plan(where: str, eps_target: Fraction, c: Contribution, beta: Fraction) -> CountPlan:
    factor = 2 if c.replace else 1
    sens = factor * c.max_groups * c.max_rows
    t, eps_used = _laplace_scale(where, sens, eps_target)
    return CountPlan(sens, t, eps_used, eps_target, DiscreteLaplace(t).abs_quantile(float(beta)),
                     beta)


def count_plan(*, epsilon: Any, contribution: Contribution) -> CountPlan:
    """The public calibration of :func:`noisy_counts` (validates its parameters)."""
    where = "noisy_counts"
    eps = _check_epsilon(where, epsilon)
    c = _check_contribution(where, contribution)
    return _count_plan(where, _target(eps), c, 1 - LEVEL)


def _term_exponent(lo: float, hi: float) -> int:
    """``E − TERM_BITS`` for the least ``E`` with ``max(|lo|, |hi|) < 2^E``."""
    return math.frexp(max(abs(lo), abs(hi)))[1] - TERM_BITS


def _sum_plan(where: str, lo: float, hi: float, term_exponent: int, row_bound: int,
              eps_target: Fraction, c: Contribution, beta: Fraction) -> SumPlan:
    """Release-grid calibration of integer group sums on ``2^term_exponent`` of which one row
    changes its group's by at most ``row_bound``."""
    e_t = _term_exponent(lo, hi)
    k_lo = int(np.rint(math.ldexp(lo, -e_t)))
    k_hi = int(np.rint(math.ldexp(hi, -e_t)))
    factor = 2 if c.replace else 1
    changed = factor * c.max_groups
    term_sens = changed * c.max_rows * row_bound
    h = Fraction(2) ** term_exponent
    per_group = c.max_rows * row_bound * h  # real change of one group's sum
    total = term_sens * h / eps_target  # real noise scale (before rounding)
    e = min(max(_floor_log2(min(total, per_group)) - GRID_BITS, _E_MIN), _E_MAX)
    s = e - term_exponent
    sens = term_sens // (1 << s) + changed if s > 0 else term_sens << -s
    t, eps_used = _laplace_scale(where, sens, eps_target)
    return SumPlan(lo, hi, term_exponent, k_lo, k_hi, row_bound, changed, term_sens, e, sens, t,
                   eps_used, eps_target, DiscreteLaplace(t).abs_quantile(float(beta)), beta)


def sum_plan(*, lower: Any, upper: Any, epsilon: Any, contribution: Contribution) -> SumPlan:
    """The public calibration of :func:`clamped_sums` (validates its parameters).

    Term grid ``h = 2^(E − 38)``; a row's term is in ``[K_lo, K_hi]``, so it changes its group's
    sum by at most ``M = max(|K_lo|, |K_hi|)``; ``Δ_h = f·ℓ0·ℓ∞·M`` (``f = 2`` for replace).
    Release grid ``e = floor(log2 min(Δ_h·h/ε, ℓ∞·M·h)) − 10`` (clamped to ``[−1000, 900]``):
    noise scale ``>= 2^10`` release units and the rounding to it (one unit per changed group)
    costs at most ``2^−10`` of the sensitivity. With ``s = e − e_t > 0``:
    ``Δ = floor(Δ_h/2^s) + f·ℓ0``; with ``s <= 0`` (exact rescaling): ``Δ = Δ_h·2^−s``.
    """
    where = "clamped_sums"
    lo, hi = _check_bounds(where, lower, upper)
    eps = _check_epsilon(where, epsilon)
    c = _check_contribution(where, contribution)
    e_t = _term_exponent(lo, hi)
    m = max(abs(int(np.rint(math.ldexp(lo, -e_t)))), abs(int(np.rint(math.ldexp(hi, -e_t)))))
    return _sum_plan(where, lo, hi, e_t, m, _target(eps), c, 1 - LEVEL)


def mean_plan(*, lower: Any, upper: Any, epsilon: Any, contribution: Contribution) -> MeanPlan:
    """The public calibration of :func:`bounded_means` (validates its parameters).

    Both parts at ``ε_½ = float_down(ε/2)``: the count as :func:`count_plan`; the centered terms
    ``c_i = 2k_i − (K_lo + K_hi)`` (integers on ``h/2``, ``|c_i| <= W = K_hi − K_lo``) as
    :func:`sum_plan` with ``row_bound = W``. Each interval misses with probability ``<= 2.5 %``.
    """
    where = "bounded_means"
    lo, hi = _check_bounds(where, lower, upper)
    eps = _check_epsilon(where, epsilon)
    c = _check_contribution(where, contribution)
    half = Fraction(_float_down(eps / 2))
    beta = (1 - LEVEL) / 2
    centered, mid = _centered_plan(where, lo, hi, half, c, beta)
    return MeanPlan(_count_plan(where, half, c, beta), centered, mid)


def _centered_plan(where: str, lo: float, hi: float, target: Fraction, c: Contribution,
                   beta: Fraction) -> tuple[SumPlan, float]:
    """The centered sums' plan at the target ``target`` (a float) and ``mid``: terms
    ``c_i = 2k_i − (K_lo + K_hi)`` on ``h/2``, row bound ``W = K_hi − K_lo``."""
    e_t = _term_exponent(lo, hi)
    k_lo = int(np.rint(math.ldexp(lo, -e_t)))
    k_hi = int(np.rint(math.ldexp(hi, -e_t)))
    centered = _sum_plan(where, lo, hi, e_t - 1, k_hi - k_lo, target, c, beta)
    mid = math.ldexp(float(k_lo + k_hi), e_t - 1)  # |k_lo + k_hi| <= 2^39 + 1: exact
    return centered, mid


# --------------------------------------------------------------------------- exact integer sums
def _check_values(where: str, gv: Any) -> GroupedValues | ColumnSums:
    """The engine's contract (not data): int group ids sorted in ``[0, G)``, one per value; or
    the engine's per-group aggregates (:class:`ColumnSums`: G present counts), also as the
    ``sums`` of rows an engine keeps (:class:`~privagg.mechanisms.grouped.KeptRows` on Spark)."""
    if isinstance(getattr(gv, "sums", None), ColumnSums):
        gv = gv.sums
    if isinstance(gv, ColumnSums):
        p = np.asarray(gv.present)
        if p.shape != (int(gv.n_groups),) or not np.issubdtype(p.dtype, np.integer):
            raise fail(where, "gv", "G present counts", gv)
        return gv
    if not isinstance(gv, GroupedValues):
        raise fail(where, "gv", "a grouped.GroupedValues", gv)
    g, v = np.asarray(gv.group), np.asarray(gv.values)
    if (g.ndim != 1 or v.shape != g.shape or not np.issubdtype(g.dtype, np.integer)
            or v.dtype != np.float64 or int(gv.n_groups) < 0):
        raise fail(where, "gv", "int64 group ids and float64 values of one length", gv)
    if g.size and (g[0] < 0 or g[-1] >= gv.n_groups or bool(np.any(g[1:] < g[:-1]))):
        raise fail(where, "gv.group", f"sorted group ids in [0, {gv.n_groups})", "other ids")
    return gv


def clamped_terms(values: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """``k_i = rint(clamp(x_i, lower, upper) / h)`` as int64 on the term grid of the bounds.

    A function of ``x_i`` alone (scaling by a power of two is exact; ``rint`` rounds half to
    even); ``±inf`` go to the bounds and a NaN (the engine never passes one) to ``lower``
    (``fmax`` ignores NaN), so every term lies in ``[K_lo, K_hi]`` whatever the input.
    """
    e_t = _term_exponent(lower, upper)
    x = np.fmax(np.asarray(values, dtype=np.float64), lower)
    np.fmin(x, upper, out=x)
    np.ldexp(x, -e_t, out=x)  # exact: a power of two, |x|/h < 2^38 (no overflow)
    np.rint(x, out=x)
    return x.astype(np.int64)


def group_integer_sums(group: np.ndarray, terms: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact ``Σ_{i in g} terms_i`` per group (object array of Python ints, shape ``(G,)``).

    ``group`` sorted ascending; ``|terms| <= 2^40``. Blocks of :data:`CHUNK_ROWS` rows are
    reduced in int64 with ``np.add.reduceat`` (``|block sum| < 2^62``: no overflow), and blocks
    are added as Python integers: exact for any number of rows, in any order within a group.
    """
    total = np.zeros(n_groups, dtype=np.int64).astype(object)
    edges = np.arange(n_groups + 1, dtype=np.int64)
    for start in range(0, terms.size, CHUNK_ROWS):
        g = group[start : start + CHUNK_ROWS]
        k = terms[start : start + CHUNK_ROWS]
        b = np.searchsorted(g, edges)
        first, nonempty = b[:-1], b[1:] > b[:-1]
        part = np.zeros(n_groups, dtype=np.int64)
        part[nonempty] = np.add.reduceat(k, first[nonempty])
        total = total + part.astype(object)
    return total


def _release_sums(exact: np.ndarray, plan: SumPlan, gen: np.random.Generator) -> np.ndarray:
    """``(R + Z)·2^e``: ``R`` the exact term sums rescaled to the release grid (each rounded on
    its own, clipped to ``±2^50``), ``Z ~ DLap(t)`` per group; returns the released floats."""
    r = rescale_integers(exact, from_exponent=plan.term_exponent, to_exponent=plan.exponent,
                         bound_steps=1 << RELEASE_BOUND_BITS)
    return _laplace_release(r, plan, gen)


def _laplace_release(k: np.ndarray, plan: SumPlan | CountPlan, gen: np.random.Generator) -> np.ndarray:
    """:func:`grid_laplace_integers` with the plan's calibration (checked to be the same)."""
    e = plan.exponent if isinstance(plan, SumPlan) else 0
    rel = grid_laplace_integers(k, exponent=e, l1_sensitivity_grid=plan.sensitivity,
                                epsilon=plan.target, rng=gen)
    if rel.noise_grid != plan.scale:  # pragma: no cover - the two calibrations are one formula
        raise AssertionError("grouped_bounded: noise scale differs from the plan")
    return rel.values


def _result(value: np.ndarray, low: np.ndarray, high: np.ndarray, epsilon: Fraction,
            ok: np.ndarray | None = None, reason: np.ndarray | None = None,
            extra: dict[str, Any] | None = None) -> MetricResult:
    g = value.size
    return MetricResult(
        value=value, low=low, high=high,
        ok=np.ones(g, dtype=bool) if ok is None else ok,
        reason=np.full(g, None, dtype=object) if reason is None else reason,
        epsilon=_float_up(epsilon), delta=0.0, extra={} if extra is None else extra,
    )


# ------------------------------------------------------------------------------------ metrics
def noisy_counts(counts: np.ndarray, *, epsilon: Any, contribution: Contribution,
                 rng: np.random.Generator) -> MetricResult:
    """Noisy counts per group: ``n_g + Z_g``, ``Z_g ~ DLap(t)`` independent, ``t = Δ/ε``.

    Parameters
    ----------
    counts : numpy.ndarray of int64, shape (G,)
        Bounded row counts per group (with units and ``max_rows = 1``: distinct units).
    epsilon : Fraction
        This metric's ε.
    contribution : Contribution
    rng : numpy.random.Generator

    Returns
    -------
    MetricResult
        ``value`` the noisy count (an integer, as float64); ``low``/``high`` = ``value ∓ k``
        with ``k`` the exact ``1 − 0.95`` two-sided quantile of ``DLap(t)``: the interval
        contains the true bounded count with probability ``>= 95 %`` per group (noise only);
        ``epsilon`` the guarantee ``Δ/t <= ε``.

    Privacy
    -------
    One neighbour step changes at most ℓ0 counts by at most ℓ∞ each (add/remove):
    ``Δ = ℓ0·ℓ∞``; replace is a removal and an addition: ``Δ = 2ℓ0ℓ∞``. Discrete Laplace with
    ``t >= Δ/ε`` is ε-DP (docs/proofs/aggregate_bounded.md §2). Public: ε, contribution, G.
    """
    where = "noisy_counts"
    plan = count_plan(epsilon=epsilon, contribution=contribution)
    gen = _rng(rng)
    arr = np.asarray(counts)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise fail(where, "counts", "a 1-D array of integer counts", f"shape {arr.shape}, {arr.dtype}")
    value = _laplace_release(arr.astype(np.int64), plan, gen)
    k = float(plan.half_width)
    return _result(value, value - k, value + k, plan.epsilon)


def clamped_sums(gv: GroupedValues, *, lower: float, upper: float, epsilon: Any,
                 contribution: Contribution, rng: np.random.Generator) -> MetricResult:
    """Noisy sums of clamped values per group, released on a public grid (pure ε-DP).

    Algorithm: ``k_i = rint(clamp(x_i, lo, hi)/h)`` on the term grid ``h = 2^(E − 38)``
    (:func:`clamped_terms`); exact integer sums per group (:func:`group_integer_sums`); each
    moved once to the release grid ``g = 2^e`` of :func:`sum_plan`, then exact discrete Laplace
    noise of scale ``t = Δ/ε`` in grid units; ``value = (R_g + Z_g)·g``.

    Returns
    -------
    MetricResult
        ``value`` float64 (G,), exact multiples of ``g``; ``low``/``high`` = ``value ∓ (k + ½)·g``
        (``k`` the exact 95 % two-sided quantile of ``DLap(t)``): contains ``Σ_i k_i·h`` — the sum
        of the group's clamped values, each rounded to ``h`` (at most ``h/2`` each, i.e. ``2^−38``
        of the bound) — with probability ``>= 95 %`` per group. Noise only: not the clamping
        bias. ``epsilon`` = ``Δ/t <= ε``.

    Privacy
    -------
    One row changes its group's integer sum by at most ``M = max(|K_lo|, |K_hi|)``, exactly;
    a neighbour step changes at most ``ℓ0`` groups (``2ℓ0`` for replace) by at most ``ℓ∞·M``
    each; each rescaled sum by at most ``floor(·/2^s) + 1``: ``Δ`` of :func:`sum_plan`. Discrete
    Laplace with ``t >= Δ/ε`` is ε-DP; clipping to ``±2^50`` release units is a contraction
    (docs/proofs/aggregate_bounded.md §3). Public: bounds, ε, contribution, G.
    """
    where = "clamped_sums"
    plan = sum_plan(lower=lower, upper=upper, epsilon=epsilon, contribution=contribution)
    gen = _rng(rng)
    gv = _check_values(where, gv)
    exact = gv.integer_sums(plan.lower, plan.upper)
    value = _release_sums(exact, plan, gen)
    w = (plan.half_width + 0.5) * math.ldexp(1.0, plan.exponent)
    return _result(value, value - w, value + w, plan.epsilon)


def bounded_means(gv: GroupedValues, *, lower: float, upper: float, epsilon: Any,
                  contribution: Contribution, rng: np.random.Generator) -> MetricResult:
    """Bounded means per group: ``clamp(mid + S̃/n̂, lo, hi)``, ⊥ where ``n̂ < 1`` (pure ε-DP).

    Algorithm (:func:`mean_plan`): ``n̂ = n + DLap`` (the count of the group's rows of this
    column) and ``S̃`` the noisy sum of the centered terms ``c_i = 2k_i − (K_lo + K_hi)`` on
    ``h/2`` (``|c_i| <= W = K_hi − K_lo``, i.e. ``clamp(x_i) − mid`` rounded, of size
    ``<= (hi − lo)/2 + h/2``), released like :func:`clamped_sums`; each at ``float_down(ε/2)``.
    ``mid = (K_lo + K_hi)·h/2``. Where ``n̂ < 1`` the group is ⊥ (reason given); else the mean
    is clamped to ``[lo, hi]`` — for a small ``n̂`` it is noisy but never outside the bounds,
    and its interval says how noisy.

    Returns
    -------
    MetricResult
        ``value`` the mean (NaN where ⊥); ``low``/``high``: with ``a = (k_s + ½)·g`` and ``b =
        k_n`` the exact 97.5 % two-sided noise quantiles of the sum and the count,
        ``clamp(mid + [min, max] of s/m over s ∈ [S̃ − a, S̃ + a], m ∈ [n̂ − b, n̂ + b])``, or
        ``[lo, hi]`` when ``n̂ − b < 1``: contains ``clamp(mid + Σc_i·h/2 / n, lo, hi)`` (the mean
        of the rounded clamped values) with probability ``>= 95 %`` (union bound). Noise only,
        not the clamping bias. ``extra["n_hat"]`` the noisy counts (float64, every group);
        ``epsilon`` the sum of the two parts' guarantees ``<= ε``.

    Privacy
    -------
    The count (``Δ = f·ℓ0·ℓ∞``) and the centered sum (``Δ`` of :func:`sum_plan` with row bound
    ``W``) are each ``ε_½``-DP; sequential composition; the mean, the clamp and ⊥ are
    post-processing (docs/proofs/aggregate_bounded.md §4). Public: bounds, ε, contribution, G.
    """
    return _bounded_means(gv, "bounded_means", lower, upper, epsilon, contribution, rng)[0]


def _bounded_means(gv: GroupedValues, where: str, lower: float, upper: float, epsilon: Any,
                   contribution: Contribution, rng: np.random.Generator, plan: MeanPlan | None = None
                   ) -> tuple[MetricResult, np.ndarray, np.ndarray, MeanPlan]:
    """:func:`bounded_means` and its two noisy quantities ``(result, n̂, S̃ in real units, plan)``;
    ``plan`` (from :func:`count_share_plan`) replaces ``mean_plan(…, epsilon)`` when given."""
    if plan is None:
        plan = mean_plan(lower=lower, upper=upper, epsilon=epsilon, contribution=contribution)
    gen = _rng(rng)
    gv = _check_values(where, gv)
    lo, hi = plan.centered.lower, plan.centered.upper
    g_count = int(gv.n_groups)
    n = np.asarray(gv.present_counts()).astype(np.int64)
    # Σ (2k − (K_lo + K_hi)) = 2·Σk − (K_lo + K_hi)·n, exact in Python integers
    exact = 2 * gv.integer_sums(lo, hi) - (plan.centered.term_low + plan.centered.term_high) * n.astype(object)
    n_hat = _laplace_release(n, plan.count, gen)
    s_hat = _release_sums(exact, plan.centered, gen)
    ok = n_hat >= 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(ok, np.clip(plan.mid + s_hat / n_hat, lo, hi), np.nan)
        a = (plan.centered.half_width + 0.5) * math.ldexp(1.0, plan.centered.exponent)
        b = float(plan.count.half_width)
        m_lo, m_hi = n_hat - b, n_hat + b
        s_lo, s_hi = s_hat - a, s_hat + a
        q_lo = np.minimum(s_lo / m_lo, s_lo / m_hi)
        q_hi = np.maximum(s_hi / m_lo, s_hi / m_hi)
        wide = m_lo < 1.0
        low = np.where(wide, lo, np.clip(np.nextafter(plan.mid + q_lo, -np.inf), lo, hi))
        high = np.where(wide, hi, np.clip(np.nextafter(plan.mid + q_hi, np.inf), lo, hi))
    low = np.where(ok, low, np.nan)
    high = np.where(ok, high, np.nan)
    reason = np.full(g_count, None, dtype=object)
    reason[~ok] = "the noisy row count of the group is below 1"
    return (_result(mean, low, high, plan.epsilon, ok=ok, reason=reason, extra={"n_hat": n_hat}),
            n_hat, s_hat, plan)


def shared_sums_means(gv: GroupedValues, *, lower: float, upper: float, epsilon: Any,
                      contribution: Contribution, rng: np.random.Generator
                      ) -> tuple[MetricResult, MetricResult]:
    """``sum(col, b)`` and ``mean(col, b)`` from ONE noisy count and ONE noisy centered sum.

    Exactly :func:`bounded_means` at ``epsilon`` (the same draws: ``n̂`` and ``S̃`` at
    ``float_down(ε/2)`` each), and the sum ``S̃ + mid·n̂`` (post-processing): it estimates
    ``Σ_i k_i·h = Σ_i c_i·h/2 + mid·n``, the quantity :func:`clamped_sums` estimates. The
    two releases together cost ``epsilon`` once (docs/proofs/aggregate_bounded.md §7).

    Returns
    -------
    (MetricResult, MetricResult)
        The sums, then the means (as :func:`bounded_means`, ``extra["n_hat"]`` included).
        Sums: ``value = S̃ + mid·n̂`` (float64, every group); ``low``/``high`` = ``value ∓
        (a + |mid|·b)`` rounded outward by one ulp, with ``a = (k_s + ½)·g`` and ``b = k_n`` the
        97.5 % two-sided noise quantiles of ``S̃`` and ``n̂``: contains ``Σ_i k_i·h`` with
        probability ``>= 95 %`` (union bound; noise only, not the clamping bias). Both report
        ``epsilon`` = the mean plan's guarantee ``<= ε`` (of the two together).
    """
    means, n_hat, s_hat, plan = _bounded_means(gv, "shared_sums_means", lower, upper, epsilon,
                                               contribution, rng)
    return _sum_from(n_hat, s_hat, plan), means


def _sum_from(n_hat: np.ndarray, s_hat: np.ndarray, plan: MeanPlan) -> MetricResult:
    """The sum ``S̃ + mid·n̂`` and its interval (post-processing of the mean's two draws)."""
    value = s_hat + plan.mid * n_hat
    a = (plan.centered.half_width + 0.5) * math.ldexp(1.0, plan.centered.exponent)
    w = a + abs(plan.mid) * float(plan.count.half_width)
    # float rounding of value (two operations) and of value ∓ w: covered by a relative 2^-50
    slack = w * 2.0**-50 + (np.abs(s_hat) + np.abs(plan.mid * n_hat)) * 2.0**-50
    low = np.nextafter(value - (w + slack), -np.inf)
    high = np.nextafter(value + (w + slack), np.inf)
    return _result(value, low, high, plan.epsilon)


@dataclass(frozen=True)
class SharePlan:
    """The public choice for ``sum(col, b)`` with ``mean(col, b)`` in one query (:func:`share_plan`).

    Attributes
    ----------
    shared : bool
        True: both from :func:`shared_sums_means` at ``ε_sum + ε_mean``; False: each on its own
        (:func:`clamped_sums` at ``ε_sum``, :func:`bounded_means` at ``ε_mean``).
    shared_variance, direct_variance : Fraction or None
        ``(t_s·g)² + mid²·t_n²`` (the shared sum) and ``(t_d·g_d)²`` (the direct sum), in squared
        value units, from the plans' scales (``Var ≈ 2t²`` for each discrete Laplace draw, the
        factor 2 common); None where that plan refuses its parameters.
    """

    shared: bool
    shared_variance: Fraction | None
    direct_variance: Fraction | None


def share_plan(*, lower: Any, upper: Any, epsilon_sum: Any, epsilon_mean: Any,
               contribution: Contribution) -> SharePlan:
    """Whether to derive the sum from the mean's two noisy quantities (public: parameters only).

    Shared iff its sum is no noisier: ``(t_s·g_s)² + mid²·t_n² <= (t_d·g_d)²`` (exact rationals)
    with ``(t_s, g_s, t_n)`` of :func:`mean_plan` at ``ε_sum + ε_mean`` and ``(t_d, g_d)`` of
    :func:`sum_plan` at ``ε_sum``. The mean is never worse shared (its two parts get
    ``(ε_sum + ε_mean)/2`` each instead of ``ε_mean/2``). With equal shares it is always shared
    (up to the grids' rounding): ``hw² + mid² <= (hw + |mid|)² = M²``, ``hw = (hi − lo)/2``.
    Raises ParameterError only when neither way can run.
    """
    try:
        both = mean_plan(lower=lower, upper=upper, epsilon=Fraction(epsilon_sum) + Fraction(epsilon_mean),
                         contribution=contribution)
        v_shared: Fraction | None = ((both.centered.scale * Fraction(2) ** both.centered.exponent) ** 2
                                     + Fraction(both.mid) ** 2 * both.count.scale ** 2)
    except ParameterError:
        v_shared = None
    try:
        direct = sum_plan(lower=lower, upper=upper, epsilon=epsilon_sum, contribution=contribution)
        v_direct: Fraction | None = (direct.scale * Fraction(2) ** direct.exponent) ** 2
    except ParameterError:
        if v_shared is None:
            raise
        v_direct = None
    if v_shared is None:
        mean_plan(lower=lower, upper=upper, epsilon=epsilon_mean, contribution=contribution)  # may raise
        return SharePlan(False, None, v_direct)
    return SharePlan(v_direct is None or v_shared <= v_direct, v_shared, v_direct)


# ------------------------------------------------------------- count() with a bounded mean
@dataclass(frozen=True)
class CountSharePlan:
    """The public calibration of :func:`shared_count_means` and the rule (:func:`count_share_plan`).

    Attributes
    ----------
    shared : bool
        True: ``count()`` joins the mean's step (``p̃``, ``S̃``, ``m̃``); False: it runs on its own.
    mean : MeanPlan
        ``count`` = the plan of ``p̃`` (``Δ = f·ℓ0·ℓ∞`` at the target ``ε_P = float_down(ε_count
        + ε_G − ε_S)``, quantile at 2.5 %); ``centered`` and ``mid``: the centered sums of
        :func:`mean_plan` at the target ``ε_S`` (:func:`count_share_plan`). ``mean.epsilon`` is
        the guarantee of the whole step (``<= ε_count + ε_G``).
    missing : CountPlan
        The plan of ``m̃`` (``Δ = f·ℓ0·ℓ∞``) at the target ``float_down(ε_P' + Δ·u/t_S)``: a row
        whose value is missing changes neither ``p`` nor ``S``, so ``m̃`` may cost per row what a
        present row costs (``1/t_P + u/t_S``, ``u`` the per-row part of ``S̃``'s sensitivity in
        release units; docs/proofs/aggregate_bounded.md §8). Quantile at 2.5 %.
    count_half_width : int
        ``k_P + k_M`` (the two 2.5 % two-sided quantiles; the released interval's widest half).
    shared_variance, direct_variance : Fraction or None
        ``t_P² + t_M²`` (the count ``p̃ + m̃`` of a group with missing values: the worst case of
        the rule of :func:`shared_count_means`) and ``t_C²`` (:func:`count_plan` at ``ε_count``), in
        squared rows over 2 (``Var DLap(t) ≈ 2t²``, the factor 2 common); None where the direct
        count refuses its parameters.
    """

    shared: bool
    mean: MeanPlan
    missing: CountPlan
    count_half_width: int
    shared_variance: Fraction
    direct_variance: Fraction | None


def centered_share(epsilon_count: Fraction, epsilon_group: Fraction, epsilon_sum: Fraction) -> Fraction:
    """``ε_S = ε_G/2 + min(ε_count, ε_sum)/2``: the centered sum's part of the joint step (exact).

    Without a shared sum (``ε_sum = 0``) the mean's half, as in :func:`mean_plan`; with one, the
    part ``min(ε_count, ε_sum)`` that the count and the sum have in common is split evenly between
    ``S̃`` and ``p̃`` (the sum reads both, the count only ``p̃``): with equal shares ``e``,
    ``ε_S = ε_P = 3e/2`` (was ``e`` and ``2e``).
    """
    return epsilon_group / 2 + min(epsilon_count, epsilon_sum) / 2


def count_share_plan(*, lower: Any, upper: Any, epsilon_count: Any, epsilon_group: Any,
                     contribution: Contribution, epsilon_sum: Any = 0) -> CountSharePlan:
    """Whether ``count()`` is released with a bounded mean of ``[lower, upper]`` (public rule).

    ``ε_G`` (``epsilon_group``) is the mean's share, or ``ε_sum + ε_mean`` for a shared sum and
    mean (:func:`share_plan`; then ``epsilon_sum`` = ``ε_sum``, else 0). The step at
    ``ε_count + ε_G``: the centered sum ``S̃`` at the target ``ε_S = float_down(``
    :func:`centered_share` ``)``, ``p̃`` (present rows) at ``float_down(ε_count + ε_G − ε_S)``
    and ``m̃`` (missing rows) at the per-row cost of a present row (:class:`CountSharePlan`).
    Shared iff the count is no noisier: ``t_P² + t_M² <= t_C²`` (exact rationals). The mean and
    a shared sum are never worse than in :func:`mean_plan` / :func:`shared_sums_means` at
    ``ε_G`` (``ε_S >= ε_G/2`` and ``ε_P >= ε_G/2 + ε_count/2``). Raises ParameterError when the
    shared step refuses its parameters (validated as :func:`mean_plan`, :func:`count_plan`).
    """
    where = "shared_count_means"
    mean_plan(lower=lower, upper=upper, epsilon=epsilon_group, contribution=contribution)  # validates
    lo, hi = _check_bounds(where, lower, upper)
    eps_c = _check_epsilon(where, epsilon_count)
    eps_g = _check_epsilon(where, epsilon_group)
    c = _check_contribution(where, contribution)
    if isinstance(epsilon_sum, bool) or not isinstance(epsilon_sum, numbers.Real):
        raise fail(where, "epsilon_sum", "a number in [0, epsilon_group)", epsilon_sum)
    eps_s = Fraction(epsilon_sum) if isinstance(epsilon_sum, (Fraction, numbers.Integral)) else (
        Fraction(float(epsilon_sum)) if math.isfinite(float(epsilon_sum)) else Fraction(-1))
    if not 0 <= eps_s < eps_g:
        raise fail(where, "epsilon_sum", "a number in [0, epsilon_group)", epsilon_sum)
    beta = (1 - LEVEL) / 2
    target_s = _target(centered_share(eps_c, eps_g, eps_s))
    centered, mid = _centered_plan(where, lo, hi, target_s, c, beta)
    pair = _count_plan(where, _target(eps_c + eps_g - target_s), c, beta)
    shift = centered.exponent - centered.term_exponent
    row_units = centered.row_bound >> shift if shift > 0 else centered.row_bound << -shift
    missing = _count_plan(where, _target(pair.epsilon + pair.sensitivity * row_units / centered.scale), c, beta)
    k = pair.half_width + missing.half_width
    v_shared = pair.scale**2 + missing.scale**2
    try:
        v_direct: Fraction | None = count_plan(epsilon=eps_c, contribution=c).scale ** 2
    except ParameterError:
        v_direct = None
    return CountSharePlan(v_direct is None or v_shared <= v_direct, MeanPlan(pair, centered, mid), missing, k,
                          v_shared, v_direct)


def shared_count_means(rows: np.ndarray, gv: GroupedValues, *, lower: float, upper: float,
                       epsilon_count: Any, epsilon_group: Any, contribution: Contribution,
                       rng: np.random.Generator, with_sum: bool = False, epsilon_sum: Any = 0
                       ) -> tuple[MetricResult, MetricResult | None, MetricResult]:
    """``count()``, ``mean(col, b)`` (and ``sum(col, b)``) from the pair of noisy counts
    ``(p̃, m̃)`` and one noisy centered sum ``S̃`` (docs/proofs/aggregate_bounded.md §8).

    ``p_g`` = the group's rows with a present (finite) value of the column (``gv``), ``m_g =
    rows_g − p_g`` the others; ``p̃ = p + DLap(t_P)``, then ``S̃`` (as :func:`bounded_means`),
    then ``m̃ = m + DLap(t_M)`` (:func:`count_share_plan`; ``t_M <= t_P``). Post-processing:
    ``count = p̃ + m̃`` where ``m̃ > h_M``, else ``p̃`` (``h_M``, ``h_P``: the 2.5 % two-sided
    quantiles of ``DLap(t_M)``, ``DLap(t_P)``; a group with ``0 < m <= h_M`` missing values may be
    counted short, inside the interval ``[p̃ − h_P + max(m̃ − h_M, 0), p̃ + h_P + max(m̃ + h_M, 0)]``,
    which holds the rows with probability >= 95 %), the
    mean ``clamp(mid + S̃/p̃, lo, hi)`` exactly as :func:`bounded_means` with ``n̂ = p̃``, the
    sum ``S̃ + mid·p̃`` as :func:`shared_sums_means`.

    Parameters
    ----------
    rows : numpy.ndarray of int64, shape (G,)
        The bounded rows per group (what ``count()`` counts); ``rows_g >= p_g`` (the engine's
        contract: ``gv`` holds a subset of those rows).
    gv : GroupedValues
        The column's present values of the same groups.
    epsilon_count, epsilon_group : Fraction
        ``count()``'s share and ``ε_G`` (the mean's, or the shared sum and mean's).
    epsilon_sum : Fraction
        The shared sum's share (part of ``ε_G``; 0 without a sum): it moves ``ε_S``
        (:func:`centered_share`).

    Returns
    -------
    (MetricResult, MetricResult or None, MetricResult)
        The count (the interval above: it contains the bounded row count with probability
        ``>= 95 %``; ``extra``: the released pair ``p_hat``, ``m_hat``), the sum (None unless ``with_sum``), the mean
        (``extra["n_hat"]`` = ``p̃``). Each reports the step's guarantee ``<= ε_count + ε_G``.
    """
    where = "shared_count_means"
    plan = count_share_plan(lower=lower, upper=upper, epsilon_count=epsilon_count,
                            epsilon_group=epsilon_group, contribution=contribution, epsilon_sum=epsilon_sum)
    gen = _rng(rng)
    gv = _check_values(where, gv)
    g_count = int(gv.n_groups)
    present = np.asarray(gv.present_counts())
    r = np.asarray(rows)
    if (r.shape != (g_count,) or not np.issubdtype(r.dtype, np.integer)
            or bool(np.any(r < present))):
        raise fail(where, "rows", "int row counts per group, each >= the group's present values",
                   f"shape {r.shape}, {r.dtype}")
    means, p_hat, s_hat, mp = _bounded_means(gv, where, lower, upper, None, contribution, gen,
                                             plan=plan.mean)
    m_hat = _laplace_release((r - present).astype(np.int64), plan.missing, gen)
    # the missing rows join only where m̃ exceeds its 2.5 % quantile h_M (a column without
    # missing values, the usual case, keeps p̃'s noise alone); the interval as count_pair's
    h_p, h_m = float(plan.mean.count.half_width), float(plan.missing.half_width)
    value = p_hat + np.where(m_hat > h_m, m_hat, 0.0)
    counts = _result(value, p_hat - h_p + np.maximum(m_hat - h_m, 0.0),
                     p_hat + h_p + np.maximum(m_hat + h_m, 0.0), mp.epsilon,
                     extra={"p_hat": p_hat, "m_hat": m_hat})
    sums = _sum_from(p_hat, s_hat, mp) if with_sum else None
    return counts, sums, means


def count_pair(rows: Any, gv: Any, eps: Fraction, contribution: Contribution, gen: Any
               ) -> tuple[MetricResult, tuple[Any, Fraction]]:
    """``count()`` as the pair ``p̃ = p + DLap(t)``, ``m̃ = m + DLap(t)`` (``p_g`` the group's rows
    with a present value of the mean's column, ``m_g = rows_g − p_g``; ``t`` the scale of
    :func:`noisy_counts` at ``eps``): one row step changes one
    of ``p_g``, ``m_g`` by 1, so the pair has the row counts' ℓ1 sensitivity and costs what the
    count costs (used by :func:`privagg.mechanisms.aggregate.aggregate` when ``count()``
    feeds an unbounded mean). Post-processing, with ``h`` the 2.5 % two-sided quantile of ``DLap(t)``:
    ``count = p̃ + m̃`` where ``m̃ > h``, else ``p̃`` (a group without missing values, the usual
    case, keeps the plain count's noise; a few missing rows, ``m <= h``, may be left out);
    interval ``[p̃ − h + max(m̃ − h, 0), p̃ + h + max(m̃ + h, 0)]`` (``P[rows outside] <= 5 %``:
    ``|p̃ − p| <= h`` and ``|m̃ − m| <= h`` each with probability ``>= 97.5 %``, and ``m >= 0``).
    Returns the count and ``(p̃, t)`` (docs/proofs/aggregate_mean.md §8.1)."""
    plan = count_plan(epsilon=eps, contribution=contribution)
    h = float(_count_plan("noisy_counts", plan.target, contribution, (1 - LEVEL) / 2).half_width)
    r = np.asarray(rows).astype(np.int64)
    present = np.asarray(gv.present_counts())
    p_hat = _laplace_release(present.astype(np.int64), plan, gen)
    m_hat = _laplace_release(r - present, plan, gen)
    value = p_hat + np.where(m_hat > h, m_hat, 0.0)
    low = p_hat - h + np.maximum(m_hat - h, 0.0)
    high = p_hat + h + np.maximum(m_hat + h, 0.0)
    return _result(value, low, high, plan.epsilon), (p_hat, plan.scale)
