"""``private_kmeans``: DP k-means by sample and aggregate, FriendlyCore on k-tuples of centers.

Algorithm (proof: ``docs/proofs/kmeans.md``). Non-finite rows are dropped first (a declared,
1-stable policy, as in :func:`privagg.private_mean`). Then, with public shares of (ε, δ):

1. **Count.** ``n̂ = n + DLap(1/ε_n)``. The number of parts ``t`` is a public function of
   ``n̂``, ``k`` and ``d`` (:func:`default_parts`); ⊥ when ``t < T_MIN``.
2. **Sample.** The rows are shuffled and each is put in one of ``t`` parts uniformly at random,
   independently of the data; non-private k-means++ (scikit-learn, a data-independent seed per
   part) on each part gives ``t`` tuples of ``k`` centers (a part with fewer than ``k`` rows
   gives the all-NaN tuple ``⊥``). Adding or removing one row changes one tuple.
3. **Radius** (only when ``radius=None``). Report-noisy-max over the public grid
   ``r_j = 2^{j/4}`` of the integer scores ``floor(Q(r_j))`` with ``Q`` the expected BasicFilter
   core size of the tuples under :func:`~privagg.friendlycore.predicates.tuple_match`; changing
   one tuple moves each score by at most ``Δ = ceil(2L) = 4``; discrete Laplace noise of scale
   ``2Δ/ε_sel``, ties to the smaller radius: ε_sel-DP.
4. **Aggregate.** BasicFilter with ``tuple_match(r)`` on the tuples; aligned friendly averaging
   of the core ``C``: ``m̂ = |C| + DLap(1/ε_c)``, ``m_low = m̂ − shift``, ⊥ when
   ``m_low < M_MIN``; every tuple of ``C`` is relabelled to match the first one, the average
   ``kd``-vector is released with ℓ2 sensitivity ``2r√k/m_low`` (discrete Gaussian on a grid).
   The friendly guarantee becomes an add/remove-tuple guarantee (ε₁, δ₁) by the conversion
   theorem, and a replace-one-tuple guarantee ``(2ε₁, (1 + e^{ε₁})δ₁)`` by group privacy.
   The released centers are then sorted (a set).
5. **Refine.** ``LLOYD_STEPS`` private Lloyd steps over all rows: each row goes to its nearest
   (public) center; a noisy histogram of (cluster, distance bin) (discrete Laplace, ℓ1
   sensitivity 1) gives per-cluster counts and clipping radii ``R_c``; the per-cluster sums of
   ``clip(x − c, R_c)/R_c`` (discrete Gaussian, ℓ2 sensitivity 1: one row changes one cluster);
   ``c ← c + R_c·sum/count`` where the noisy count is at least ``M_MIN``. The histogram's outer
   radius is public given the current centers (:func:`clip_radius`).

All steps compose sequentially (adaptive basic composition) under add/remove neighbours:
``(ε_n + ε_sel + ε_agg + s·(ε_lc + ε_ls), δ_agg + s·δ_ls) <= (ε, δ)``
(:func:`kmeans_plan`).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from .._validate import check_positive_int, fail, quiet_numerics
from ..accounting import PrivacyLoss, zcdp_to_epsilon
from ..noise.grid import (
    _sqrt_up,
    gaussian_exponent,
    grid_gaussian_integers,
    rescale_integers,
)
from ..noise.rng import resolve_rng
from ..noise.samplers import bernoulli_rational, discrete_laplace
from ..friendlycore.conversion import end_to_end_budget, friendly_budget, movement_bound
from ..friendlycore.filter import keep_probabilities
from ..engines.base import KMeansSource
from .mean import (
    ArrayPoints,
    M_MIN,
    SUM_BITS,
    _SUM_ROWS,
    _anchored_mean,
    _finite,
    _check_points,
    _check_radius,
    _exact_grid,
    _float_down,
    _float_up,
    _frac,
    anchored_rounding,
    capped_friendly_budget,
    check_delta_floor,
    check_epsilon_floor,
    dlap_tail_shift,
    rho_for,
)
from . import mean as _mean_module
from ..friendlycore.predicates import TupleMatch, squared_distance
from ..friendlycore.radius import grid_radii

__all__ = [
    "KMeansPlan",
    "KMeansRelease",
    "clip_radius",
    "default_parts",
    "kmeans_plan",
    "private_kmeans",
    "tuple_friend_counts",
    "tuple_radius_scores",
]

#: Public floor on the number of parts; fewer → ⊥.
T_MIN = 2 * M_MIN
#: At most this many parts (the pair work is O(t²k²d)).
T_MAX = 1000
#: Public bound on the pair work ``t²k²d/2`` that caps ``t``.
PAIR_WORK = 2 * 10**9
#: Rows per cluster per part aimed at by :func:`default_parts`.
ROWS_PER_CLUSTER = 5
#: Private Lloyd steps after the aggregation.
LLOYD_STEPS = 2
#: Distance bins (ratio √2) of the Lloyd steps' histogram.
HIST_BINS = 40
#: Largest noisy fraction of a cluster beyond its clipping radius.
OUT_FRACTION = 0.02
# Budget shares (public constants).
_SHARE_COUNT = Fraction(1, 40)
_SHARE_SELECT = Fraction(1, 10)
_SHARE_LLOYD_COUNT = Fraction(1, 20)  # per step: the distance histogram
_SHARE_LLOYD_SUM = Fraction(1, 16)  # per step
_SHARE_AGG_DELTA = Fraction(1, 2)
_SHARE_FRIENDLY_COUNT = Fraction(1, 3)
_SAFETY = 1.0 + 2.0**-20  # float rounding of distances and averages (docs/proofs/kmeans.md)
_MATCH_SLACK = 1 + Fraction(1, 2**20)  # r' = r(1 + 2⁻³²) <= r·_MATCH_SLACK (kmeans.md §3)
_PAIR_CHUNK = 1 << 22  # elements per temporary of the pair work
_ROWS = 1 << 14


@dataclass(frozen=True)
class KMeansPlan:
    """Every public scale of :func:`private_kmeans`, computed without data.

    Attributes
    ----------
    eps_count : Fraction
        ε of ``n̂`` (discrete Laplace scale ``1/eps_count``).
    eps_select : Fraction
        Radius selection (0 when the radius is given).
    eps_core_count, delta_core_count : Fraction
        Friendly count part of the aggregation.
    eps_core_mean, delta_core_mean, rho_core_mean : Fraction
        Friendly mean part (ρ-zCDP converted to (ε, δ)).
    eps_tuple, delta_tuple : Fraction
        Add/remove-one-tuple guarantee of the aggregation (conversion theorem).
    eps_agg, delta_agg : Fraction
        Replace-one-tuple guarantee, ``(2ε₁, (1 + e^{ε₁})δ₁)`` rounded up: what one row costs.
    eps_lloyd_count : Fraction
        Per Lloyd step, the (cluster, distance) histogram (pure; its rows give the counts).
    eps_lloyd_sum, delta_lloyd_sum, rho_lloyd_sum : Fraction
        Per Lloyd step, the clipped sums.
    steps : int
        Number of Lloyd steps.
    """

    eps_count: Fraction
    eps_select: Fraction
    eps_core_count: Fraction
    delta_core_count: Fraction
    eps_core_mean: Fraction
    delta_core_mean: Fraction
    rho_core_mean: Fraction
    eps_tuple: Fraction
    delta_tuple: Fraction
    eps_agg: Fraction
    delta_agg: Fraction
    eps_lloyd_count: Fraction
    eps_lloyd_sum: Fraction
    delta_lloyd_sum: Fraction
    rho_lloyd_sum: Fraction
    steps: int

    @property
    def core_count_shift(self) -> int:
        """``m_low = m̂ − shift`` with ``P[DLap(1/eps_core_count) > shift] < delta_core_count``."""
        return dlap_tail_shift(1 / self.eps_core_count, self.delta_core_count)

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """End-to-end (ε, δ) by basic composition of all steps."""
        eps = (self.eps_count + self.eps_select + self.eps_agg
               + self.steps * (self.eps_lloyd_count + self.eps_lloyd_sum))
        dlt = self.delta_agg + self.steps * self.delta_lloyd_sum
        return PrivacyLoss.approx(eps, dlt)

    def public_parameters(self) -> dict[str, Any]:
        """JSON-ready public parameters (for the ledger)."""
        return {"eps_count": float(self.eps_count), "eps_select": float(self.eps_select),
                "eps_agg": float(self.eps_agg), "steps": self.steps,
                "eps_lloyd": float(self.eps_lloyd_count + self.eps_lloyd_sum)}


def _exp_up(x: Fraction) -> Fraction:
    """A rational upper bound of ``e^x``: mpmath at 40 digits (error far below half an ulp),
    rounded to a float and moved up two ulps."""
    with mpmath.workdps(40):
        value = float(mpmath.exp(mpmath.mpf(x.numerator) / x.denominator))
    return Fraction(math.nextafter(math.nextafter(value, math.inf), math.inf))


def kmeans_plan(epsilon: Any, delta: Any, *, select_radius: bool = True,
                where: str = "private_kmeans") -> KMeansPlan:
    """Split (ε, δ) between the steps of :func:`private_kmeans` and calibrate each (public only).

    Shares (as the code: ``_SHARE_*``): ε_n = ε/40; ε_sel = ε/10 (radius chosen privately); per
    Lloyd step ε/20 for the (cluster, distance) histogram and ε/16 (with δ/(2·steps)) for the
    sums; the aggregation gets the rest of ε and δ/2 as
    a replace-one-tuple target, halved for group privacy, turned into a friendly budget by
    :func:`privagg.friendly_budget` and split 1/3 : 2/3 between count and mean (δ half each); the
    per-tuple ε₁ is capped at 64 (:func:`~privagg.mechanisms.mean.capped_friendly_budget`),
    beyond which the rest of ε is left unspent. Every returned guarantee is that of the calibrated noise, never above its share.
    """
    eps = check_epsilon_floor(where, epsilon)
    dlt = check_delta_floor(where, delta)
    return _plan(eps, dlt, bool(select_radius))


@functools.lru_cache(maxsize=64)
def _plan(eps: Fraction, dlt: Fraction, select: bool) -> KMeansPlan:
    steps = LLOYD_STEPS
    eps_count = eps * _SHARE_COUNT
    eps_select = eps * _SHARE_SELECT if select else Fraction(0)
    e_lc = eps * _SHARE_LLOYD_COUNT
    e_ls_target = eps * _SHARE_LLOYD_SUM
    d_ls = dlt * (1 - _SHARE_AGG_DELTA) / steps
    rho_ls = rho_for(e_ls_target, d_ls)
    e_ls = zcdp_to_epsilon(rho_ls, d_ls)
    agg_eps = eps - eps_count - eps_select - steps * (e_lc + e_ls)
    agg_delta = dlt * _SHARE_AGG_DELTA
    # Group privacy of 2: (ε₁, δ₁) per tuple ⇒ (2ε₁, (1 + e^{ε₁})δ₁) per replaced tuple. ε₁ is
    # capped (FRIENDLY_EPS_MAX; e^{ε₁} overflowed beyond ε ≈ 1400): the rest stays unspent.
    ef, df = capped_friendly_budget(agg_eps / 2, lambda e1: agg_delta / (1 + _exp_up(e1)))
    e_cc = ef * _SHARE_FRIENDLY_COUNT
    e_cm = ef - e_cc
    d_cc = df / 2
    d_cm = df - d_cc
    rho_cm = rho_for(e_cm, d_cm)
    e_cm = zcdp_to_epsilon(rho_cm, d_cm)
    e1, d1 = end_to_end_budget(_float_up(e_cc + e_cm), _float_up(d_cc + d_cm))
    e1, d1 = Fraction(e1), Fraction(d1)
    e_agg, d_agg = 2 * e1, (1 + _exp_up(e1)) * d1
    return KMeansPlan(eps_count, eps_select, e_cc, d_cc, e_cm, d_cm, rho_cm, e1, d1, e_agg, d_agg,
                      e_lc, e_ls, d_ls, rho_ls, steps)


@dataclass(frozen=True)
class KMeansRelease:
    """Private k-means centers (or ⊥).

    Attributes
    ----------
    ok : bool
        False when the mechanism output ⊥ (a normal DP output: too few parts agree).
    centers : numpy.ndarray of float64, shape (k, d), or None
        Rows sorted lexicographically (the release is a set).
    epsilon, delta : float
        The end-to-end guarantee (add/remove one row), at most the requested budget.
    radius : float or None
        The tuple radius used (given or privately selected).
    secure : bool
        Noise drawn from the secure generator.
    privacy_loss : PrivacyLoss
    parts : int
        The number of parts ``t`` (0 when ⊥ before the split).
    reason : str or None
        Why the output is ⊥ (None when ``ok``), from public parameters and released values
        only (the noisy count ``n̂``, the number of parts, the noisy core size ``m̂``, the
        released cell side).
    strategy : {"coreset", "aggregate"}
        The strategy used (:func:`private_kmeans`).
    cell_side : float or None
        Coreset strategy: the privately chosen grid cell side (in the projected space when
        ``d > D_CORE``); None otherwise.
    coreset_size : int
        Coreset strategy: the number of released (kept) grid cells.
    n_hat : int or None
        The released noisy count of the rows.
    unit, max_rows_per_unit, neighbors, rows_dropped
        The privacy unit, as in :class:`~privagg.mechanisms.mean.MeanRelease` (None, None,
        ``"add_remove"``, None at record level).
    """

    ok: bool
    centers: np.ndarray | None
    epsilon: float
    delta: float
    radius: float | None
    secure: bool
    privacy_loss: PrivacyLoss
    parts: int = 0
    reason: str | None = None
    strategy: str = "aggregate"
    cell_side: float | None = None
    coreset_size: int = 0
    n_hat: int | None = None
    unit: str | None = None
    max_rows_per_unit: int | None = None
    neighbors: str = "add_remove"

    @property
    def rows_dropped(self) -> str | None:
        """User level: ``"not released"`` (as :attr:`MeanRelease.rows_dropped`); None at record level."""
        return None if self.unit is None else "not released"


def default_parts(n_hat: int, k: int, d: int) -> int:
    """Public number of parts: ``n̂ / (ROWS_PER_CLUSTER·k)`` capped by ``T_MAX`` and by the pair
    work ``t²k²d/2 <= PAIR_WORK``."""
    cap = math.isqrt(2 * PAIR_WORK // (k * k * d))
    return max(0, min(n_hat // (ROWS_PER_CLUSTER * k), T_MAX, cap))


def clip_radius(centers: np.ndarray, radius: float, rows_per_part: float) -> float:
    """Public outer radius of the Lloyd steps' distance histogram: half the least distance
    between two centers (the nearest-center cells contain that ball); for ``k = 1``,
    ``16r·sqrt(rows_per_part)`` (``r`` ≈ the spread of a part's mean). Computed on the centers
    scaled by 1/4 (no overflow) and kept in ``[2⁻⁴⁰⁰, 2¹⁰⁰⁰]``: a function of public values."""
    k = centers.shape[0]
    if k == 1:
        return min(16.0 * radius * math.sqrt(max(rows_per_part, 1.0)), 2.0**1000)
    a, b = np.triu_indices(k, 1)
    with np.errstate(all="ignore"):  # centers 1e200 apart: the squared distance overflows
        diff = centers[a] * 0.25 - centers[b] * 0.25  # exact scaling, no overflow
        half = 2.0 * math.sqrt(float(squared_distance(diff, np.zeros_like(diff)).min()))
    return min(max(half, 2.0**-400), 2.0**1000)


def _part_tuples(x: np.ndarray, k: int, t: int, gen: np.random.Generator, n_init: int) -> np.ndarray:
    """Shuffle, split into ``t`` uniform random parts, k-means++ per part: ``(t, k, d)``.

    A part with fewer than ``k`` rows, or whose k-means fails or gives non-finite centers
    (rows near the float limit), gives the all-NaN tuple ⊥: one row changes one part, so one
    tuple, whatever the part's tuple is."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    n, d = x.shape
    order = gen.permutation(n)
    part = gen.integers(0, t, size=n)
    seeds = gen.integers(0, 2**31 - 1, size=t)
    xs = x[order]
    by_part = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[by_part], np.arange(t + 1))
    out = np.full((t, k, d), np.nan)
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")  # fewer distinct points than k: duplicate centers
        for p in range(t):
            rows = xs[by_part[bounds[p]:bounds[p + 1]]]
            if rows.shape[0] >= k:
                km = KMeans(k, init="k-means++", n_init=n_init, random_state=int(seeds[p]))
                try:
                    out[p] = km.fit(rows).cluster_centers_
                except (ValueError, ArithmeticError):  # e.g. rows near ±1.8e308: the ⊥ tuple
                    pass  # (a tuple is any function of its part; nothing is raised or printed)
    return out


def _pair_stats(tuples: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each unordered pair ``i < j`` of finite tuples once: ``(i, j, cost, equal)`` and ``sep``."""
    m, k, d = tuples.shape
    sep = TupleMatch.separation(tuples) if m else np.zeros(0)
    ii, jj = np.triu_indices(m, 1)
    cost = np.empty(ii.size)
    equal = np.empty(ii.size, dtype=bool)
    step = max(1, _PAIR_CHUNK // (k * k * d))
    for s in range(0, ii.size, step):
        c, e = TupleMatch.match_cost(tuples[ii[s:s + step]], tuples[jj[s:s + step]])
        cost[s:s + step] = c
        equal[s:s + step] = e
    return ii, jj, cost, equal, sep


def _grid_thresholds(radii: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``r2`` and ``s2`` of each radius, exactly as :class:`TupleMatch` computes them."""
    preds = [TupleMatch(float(r)) for r in radii]
    return np.array([p.radius_sq for p in preds]), np.array([p.separation_sq for p in preds])


def _interval_counts(tuples: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """``counts[i, j]``: friends of tuple ``i`` (self included) under ``tuple_match(radii[j])``.

    Each unordered pair is decided once for all radii: it is a friend pair exactly for the grid
    indices in ``[lo, hi)`` with ``lo`` the first index with ``r2_j >= cost`` and ``hi`` the
    first with ``s2_j >= min(sep_i, sep_j)`` (both thresholds are non-decreasing in ``j``), or
    for all indices when the tuples are equal. ``⊥`` tuples are friends of each other only.
    """
    n = tuples.shape[0]
    width = radii.size
    finite = np.isfinite(tuples).all(axis=(1, 2))
    counts = np.zeros((n, width), dtype=np.int64)
    counts[~finite] = int((~finite).sum())
    fin = np.flatnonzero(finite)
    if fin.size == 0:
        return counts
    ii, jj, cost, equal, sep = _pair_stats(tuples[fin])
    r2, s2 = _grid_thresholds(radii)
    lo = np.searchsorted(r2, cost, side="left")
    hi = np.searchsorted(s2, np.minimum(sep[ii], sep[jj]), side="left")
    hi = np.maximum(hi, lo)
    lo[equal], hi[equal] = 0, width
    m = fin.size
    diff = np.zeros(m * (width + 1), dtype=np.int64)
    for ends, sign in ((lo, 1), (hi, -1)):
        for idx in (ii, jj):
            diff += sign * np.bincount(idx * (width + 1) + ends, minlength=m * (width + 1))
    counts[fin] = 1 + np.cumsum(diff.reshape(m, width + 1), axis=1)[:, :width]
    return counts


def tuple_friend_counts(tuples: Any, radius: float) -> np.ndarray:
    """Friend counts of ``(t, k, d)`` tuples under ``tuple_match(radius)`` (not a release)."""
    arr = TupleMatch(radius).prepare(tuples, "tuple_friend_counts")
    return _interval_counts(arr, np.array([float(radius)]))[:, 0]


def tuple_radius_scores(tuples: Any) -> np.ndarray:
    """The integer scores ``floor(Q(r_j))`` over :func:`grid_radii`.

    ``Q(r) = Σ_i p_i(r)``, the BasicFilter keep probabilities (α = 0) of the tuples. Changing one
    tuple moves every score by at most ``ceil(2L)`` (docs/proofs/kmeans.md). Not a release.
    """
    arr = TupleMatch(1.0).prepare(tuples, "tuple_radius_scores")
    t = arr.shape[0]
    radii = grid_radii()
    counts = _interval_counts(arr, radii)
    num = np.clip(2 * counts - t, 0, t).sum(axis=0)  # α = 0: p_i = clip((2c_i − t)/t, 0, 1)
    return num // max(t, 1)


def _select_radius(tuples: np.ndarray, eps: Fraction, gen: np.random.Generator) -> float:
    """Report-noisy-max over the grid (ε-DP under replacing one tuple)."""
    delta_q = math.ceil(2 * movement_bound(0.0))
    scores = tuple_radius_scores(tuples)
    noisy = scores + discrete_laplace(Fraction(2 * delta_q) / eps, size=scores.size, rng=gen)
    return float(grid_radii()[int(np.argmax(noisy))])


def _aligned_average(core: np.ndarray) -> np.ndarray:
    """Relabel every tuple to match ``core[0]`` (nearest center; identity when that is not a
    bijection) and average the aligned ``kd``-vectors relative to ``core[0]`` with
    ``mean._anchored_mean``: exact rationals (object array, shape ``(kd,)``), each within
    ``5u·S + 2⁻¹⁰⁰⁷`` of the exact average when every aligned center is within ``S`` of its
    counterpart in ``core[0]`` — whatever the distance from the origin."""
    m, k, _ = core.shape
    ref = core[0]
    dist = squared_distance(ref[None, :, None, :], core[:, None, :, :])  # (m, k_ref, k)
    perm = np.argmin(dist, axis=2)
    bijective = (np.sort(perm, axis=1) == np.arange(k)).all(axis=1)
    perm[~bijective] = np.arange(k)
    aligned = core[np.arange(m)[:, None], perm]
    return _anchored_mean(aligned.reshape(m, -1))


def _aggregate(tuples: np.ndarray, r: float, plan: KMeansPlan,
               gen: np.random.Generator) -> tuple[np.ndarray | None, int]:
    """FriendlyCore on the tuples with aligned averaging: (sorted ``(k, d)`` centers or None for
    ⊥, the noisy core size m̂)."""
    _, k, d = tuples.shape
    counts = _interval_counts(tuples, np.array([r]))[:, 0]
    num, den = keep_probabilities(counts)
    core = tuples[bernoulli_rational(num, den, rng=gen)]
    core = core[gen.permutation(core.shape[0])]  # a multiset: summation order is random
    m_hat = core.shape[0] + int(discrete_laplace(1 / plan.eps_core_count, rng=gen))
    m_low = m_hat - plan.core_count_shift
    if m_low < M_MIN or core.shape[0] == 0 or not np.isfinite(core).all():
        return None, m_hat
    avg = _aligned_average(core)
    # Exponent from public values as before; sensitivity (grid units) of the exact aligned average
    # plus the rounding of the computed one, whose error is relative to the per-coordinate
    # spread 2r' of aligned core tuples around core[0] (docs/proofs/kmeans.md §5).
    sens = 2.0 * r * math.sqrt(k) / m_low * _SAFETY
    sigma = sens / math.sqrt(2.0 * float(plan.rho_core_mean)) * _SAFETY
    e = gaussian_exponent(sens, sigma, k * d)
    spread = 2 * Fraction(r) * _MATCH_SLACK
    sens_g = (spread * _sqrt_up(k) / m_low / Fraction(2) ** e
              + 2 * anchored_rounding(spread, e) * _sqrt_up(k * d))
    centers = grid_gaussian_integers(_exact_grid(avg, e), exponent=e, bound=math.inf,
                                     l2_sensitivity_grid=sens_g, rho=plan.rho_core_mean,
                                     rng=gen).values.reshape(k, d)
    centers = _finite(centers)
    return centers[np.lexsort(centers.T[::-1])], m_hat


def _nearest(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of the nearest center of every row (blocked; ties to the lower index).

    The Gram expansion ``‖c‖² − 2x·c`` is taken relative to the centers' mean (public): far from
    the origin (``|x| ≈ 10¹⁵``) the absolute one cancels catastrophically and labels rows at
    random. A row for which it overflows (far beyond the centers) is labelled by its scaled
    direct distances. A function of the row and the public centers only, whatever its
    rounding."""
    origin = centers * 0.5
    origin = origin.mean(axis=0) * 2.0  # (no overflow for centers near ±1.8e308)
    shifted = centers - origin
    out = np.empty(x.shape[0], dtype=np.int64)
    c2 = np.einsum("ij,ij->i", shifted, shifted)
    for s in range(0, x.shape[0], _ROWS):
        block = x[s:s + _ROWS] - origin
        score = block @ shifted.T
        np.multiply(score, 2.0, out=score)
        np.subtract(c2[None, :], score, out=score)  # c2 − 2·(block·c), as one expression would
        out[s:s + _ROWS] = np.argmin(score, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):  # (no warning the old code lacked)
            total = float(np.add.reduce(score, axis=None))
        if math.isfinite(total):
            continue  # every score finite (a sum of finite terms can only overflow: then checked)
        bad = ~np.isfinite(score).all(axis=1)
        if bad.any():  # a row so far that the expansion overflows: direct distances, scaled
            rows = x[s:s + _ROWS][bad]
            z = rows[:, None, :] * 0.25 - centers[None, :, :] * 0.25
            z /= np.maximum(np.abs(z).max(axis=(1, 2), keepdims=True), np.finfo(float).tiny)
            out[np.flatnonzero(bad) + s] = np.argmin(np.einsum("ikj,ikj->ik", z, z), axis=1)
    return out


def _lloyd_step(x: np.ndarray, centers: np.ndarray, r_max: float, plan: KMeansPlan,
                gen: np.random.Generator) -> np.ndarray:
    """One private Lloyd step from public ``centers`` (module docstring, step 5).

    Every row goes to its nearest center; one row lands in one cell of the ``k × HIST_BINS``
    histogram of (cluster, distance bin), bin ``b`` holding distances in
    ``(r_max·2^{−(b+1)/2}, r_max·2^{−b/2}]`` (the last bin also everything closer, bin 0 everything
    farther): released with discrete Laplace noise (ℓ1 sensitivity 1). From it (post-processing)
    each cluster's noisy count and clipping radius ``R_c``: the smallest bin edge with at most
    ``OUT_FRACTION`` of the cluster's noisy count beyond it. Then the per-cluster sums of
    ``clip(x − c, R_c)/R_c`` (one row changes one of them by at most 1 in ℓ2): discrete Gaussian.
    """
    k, d = centers.shape
    if isinstance(x, np.ndarray):
        label = _nearest(x, centers)
        hist = _distance_histogram(x, label, centers, r_max)
    else:  # a source (Spark): the exact histogram and sums added over its tasks, the same per-row code
        label = None
        hist = x.lloyd_histogram(centers, r_max)
    hist = hist + discrete_laplace(1 / plan.eps_lloyd_count, size=(k, HIST_BINS), rng=gen)
    counts = hist.sum(axis=1)
    beyond = np.cumsum(hist, axis=1) - hist  # noisy number of rows farther than edge b
    too_many = beyond > OUT_FRACTION * counts[:, None]
    first_bad = np.where(too_many.any(axis=1), np.argmax(too_many, axis=1), HIST_BINS)
    radii = r_max * np.exp2(-np.maximum(first_bad - 1, 0) / 2.0)
    # Exact integer sums of the unit terms on the grid h = 2^-SUM_BITS, then exactly rescaled to the
    # release grid (exponent chosen as before): one row changes one cluster's d coordinates.
    e_h = -SUM_BITS
    if label is None:
        sums = x.cluster_sums(None, centers, centers, radii, e_h)[1].reshape(-1)
    else:
        sums = cluster_integer_sums(x, label, centers, radii, e_h).reshape(-1)  # all clusters at once
    sigma = 1.0 / math.sqrt(2.0 * float(plan.rho_lloyd_sum)) * _SAFETY
    e = gaussian_exponent(_SAFETY, sigma, k * d)
    root_d = _sqrt_up(d)
    sens = ((1 + root_d * Fraction(2) ** e_h / 2) / Fraction(2) ** e
            + (root_d if e > e_h else 0))
    noisy = grid_gaussian_integers(rescale_integers(sums, from_exponent=e_h, to_exponent=e),
                                   exponent=e, l2_sensitivity_grid=sens,
                                   rho=plan.rho_lloyd_sum, rng=gen).values.reshape(k, d)
    moved = counts >= M_MIN
    out = centers.copy()
    out[moved] += noisy[moved] * radii[moved, None] / counts[moved, None]
    return _finite(out)


def _distance_histogram(x: np.ndarray, label: np.ndarray, centers: np.ndarray, r_max: float) -> np.ndarray:
    """The exact ``(k, HIST_BINS)`` histogram of (cluster, distance bin) of :func:`_lloyd_step`
    (int64): a function of each row and the public centers and ``r_max`` (the Lloyd seam of
    sample and aggregate: Spark adds the tasks' histograms, :mod:`privagg.engines.spark_aggregate_kmeans`)."""
    k = centers.shape[0]
    dist = np.empty(x.shape[0])
    for s in range(0, x.shape[0], _ROWS):
        y = x[s:s + _ROWS] - centers[label[s:s + _ROWS]]
        dist[s:s + _ROWS] = np.sqrt(np.einsum("ij,ij->i", y, y))
    with np.errstate(divide="ignore", over="ignore"):  # a row on its center: r_max/tiny = inf
        level = np.floor(2.0 * np.log2(r_max / np.maximum(dist, np.finfo(float).tiny)))
    cell = label * HIST_BINS + np.clip(np.nan_to_num(level, nan=0.0), 0, HIST_BINS - 1).astype(np.int64)
    return np.bincount(cell, minlength=k * HIST_BINS).reshape(k, HIST_BINS)


def lloyd_histogram(x: np.ndarray, centers: np.ndarray, r_max: float) -> np.ndarray:
    """:func:`_distance_histogram` of the rows ``x`` labelled by their nearest center."""
    return _distance_histogram(x, _nearest(x, centers), centers, r_max)


def _check_k(where: str, k: Any) -> int:
    return check_positive_int(where, "k", k, 1, 1000)


STRATEGIES = ("auto", "coreset", "aggregate")


def private_kmeans(
    points: Any,
    k: int,
    *,
    epsilon: Any,
    delta: Any,
    radius: Any = None,
    rng: Any = None,
    ledger: Any = None,
    parts: int | None = None,
    n_init: int = 2,
    strategy: str = "auto",
    units: Any = None,
    max_rows_per_unit: int = 1,
    columns: Any = None,
) -> KMeansRelease:
    """Differentially private k-means centers, with no prior bound on where the data lie.

    Two strategies (``docs/proofs/kmeans.md``):

    * ``"coreset"`` (the default): a private coreset — a stable histogram of the cells of a
      randomly shifted grid (after a random projection to ``D_CORE`` columns when ``d >
      D_CORE``), the cell side chosen by a noisy binary search — then non-private k-means++ on the
      released weighted cells, then ``CORESET_STEPS`` private Lloyd steps on all rows (all
      clusters at once; for ``d > D_CORE`` the first step is anchored at a global
      :func:`privagg.private_mean`). Works on overlapping clusters; ⊥ only when the noisy count
      ``n̂`` is below ``max(N_FLOOR, N_PER_CENTER·k·T, S)`` (T the coreset threshold, S the rows
      the noisy cell-side search needs: ``CoresetPlan.search_rows``, 870 at ε = 1; both public),
      or when no cell reaches T.
    * ``"aggregate"``: sample and aggregate — k-means++ on random parts, FriendlyCore on the
      tuples of centers with :func:`~privagg.friendlycore.predicates.tuple_match`, aligned
      friendly averaging, then private Lloyd steps. Needs clusters more than 6r apart (⊥ on most
      real data) and is slower; on such well-separated data it is as accurate as the coreset.

    ``"auto"`` picks ``"aggregate"`` when ``radius`` or ``parts`` is given (they are its
    parameters) and ``"coreset"`` otherwise: a function of public arguments only.

    Parameters
    ----------
    points : array_like, shape (n, d)
        Real numbers. Rows with a NaN or infinite entry are dropped (data, not errors); entries
        that are not real numbers count as missing (as in :func:`privagg.private_mean`). Or a
        Spark DataFrame (``pip install 'privagg[spark]'``) with ``columns``: the coreset
        strategy's counts and sums run in Spark, and its stable histograms' noise in the tasks,
        the same law as in memory (:mod:`privagg.engines.spark_kmeans`; ``units`` a unit
        column's name: one vector per unit computed in Spark first, :mod:`privagg.engines.spark_units`);
        sample and aggregate (``radius``/``parts``) runs its parts' k-means++ as a grouped map
        in Spark and the aggregation on the driver (:mod:`privagg.engines.spark_aggregate_kmeans`).
    k : int
        Number of centers, 1 to 1000.
    epsilon : float
        ε in [2⁻⁴⁰, ∞) (end to end, add/remove one row; smaller: ParameterError before any charge). The aggregation uses at most ε₁ = 64 per tuple
        (:data:`~privagg.mechanisms.mean.FRIENDLY_EPS_MAX`); beyond, the rest is unspent and
        the reported guarantee is below ε.
    delta : float
        δ in [2⁻⁹⁰⁰, 1).
    radius : float, optional
        ``"aggregate"`` only: tuple radius r (per-part centers of one cluster lie within r of each
        other, clusters are more than 6r apart). ``None``: chosen privately on the grid
        ``2^{j/4}`` (ε/10).
    rng : None, int, SeedSequence or Generator
        ``None``: the secure generator.
    ledger : privagg.accounting.Ledger, optional
        Charged ``release.privacy_loss`` after validation, before any noise is drawn.
    parts : int, optional
        ``"aggregate"`` only: number of parts ``t`` (public, >= 20); ``None``:
        :func:`default_parts` of ``n̂``.
    n_init : int
        ``"aggregate"`` only: scikit-learn ``n_init`` per part (1 to 10).
    strategy : {"auto", "coreset", "aggregate"}
        ``"coreset"``: private grid coreset, k-means on it, private Lloyd steps (docs/proofs/
        kmeans.md §10); ``"aggregate"``: sample and aggregate on FriendlyCore (needs
        well-separated clusters); ``"auto"`` (default): ``"aggregate"`` when ``radius`` or
        ``parts`` is given, else ``"coreset"``.
    units : array-like, optional
        The privacy unit of each row (aligned with ``points``). Given: user level — the rows
        become one vector per unit (:mod:`privagg.engines.unit_rows`) and the guarantee is
        for adding/removing one unit with all its rows (proof: docs/proofs/mean.md §10).
    max_rows_per_unit : int
        k >= 1 (only with ``units``): a unit's vector is the average of k of its rows sampled
        uniformly without replacement (all rows if fewer); 1 (default): one sampled row.
    columns : str or list of str, optional
        With a Spark DataFrame only: its numeric columns to use (default: every column).

    Returns
    -------
    KMeansRelease
        ``ok=False, centers=None`` is ⊥; ``reason`` says why, from released values only.

    Raises
    ------
    ParameterError
        Bad shape or dtype of ``points``, k, ε, δ, radius, parts, n_init, strategy, rng (also
        ``radius``/``parts`` with ``strategy="coreset"``). Never because of a value in the data.
    BudgetExceededError
        From ``ledger``; nothing is released.

    Privacy
    -------
    Add/remove one row. ``"aggregate"``: (ε', δ')-DP with ε' = ε_n + ε_sel + ε_agg + s(ε_lc +
    ε_ls) <= ε and δ' = δ_agg + s·δ_ls <= δ (:func:`kmeans_plan`). ``"coreset"``: the
    composition of :func:`coreset_plan` (<= (ε, δ)). Proofs ``docs/proofs/kmeans.md``. Public: d,
    k, ε, δ, the strategy, the radius and ``parts`` when given, ``n_init``.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> truth = np.array([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0]])
    >>> x = (truth[:, None, :] + g.normal(size=(3, 4000, 2))).reshape(-1, 2)
    >>> rel = private_kmeans(x, 3, epsilon=1.0, delta=1e-6, rng=1)
    >>> rel.ok, rel.strategy, bool(np.abs(rel.centers - truth[np.lexsort(truth.T[::-1])]).max() < 1.0)
    (True, 'coreset', True)
    """
    from ..engines.spark import is_spark_dataframe
    from ..engines.unit_rows import bound_points  # user level: one vector per unit

    if is_spark_dataframe(points):  # the Spark engine (privagg[spark]): the same core, both strategies
        from ..engines import spark_aggregate_kmeans, spark_kmeans, spark_points

        d = len(spark_points.point_columns(points, columns, units, where="private_kmeans"))  # schema only
        check = functools.partial(_check_spark_parameters, d, k, epsilon, delta, radius, parts, n_init, strategy)
        with spark_points.points_of("private_kmeans", points, columns, units, max_rows_per_unit, rng,
                                    check) as (source, gen, secure):
            kk, r = _check_k("private_kmeans", k), _check_radius("private_kmeans", radius)  # (checked: no error)
            if _check_strategy("private_kmeans", strategy, r, parts) == "coreset":
                release = _private_kmeans_coreset(spark_kmeans.SparkKMeansPoints.of(source), kk, epsilon, delta,
                                                  (gen, secure), ledger)
            else:
                release = _private_kmeans_aggregate(spark_aggregate_kmeans.SparkAggregatePoints.of(source), kk,
                                                    epsilon, delta, r, (gen, secure), ledger, parts, n_init)
        return _mean_module._with_unit(release, units, max_rows_per_unit)
    if columns is not None:
        raise fail("private_kmeans", "columns", "None unless points is a Spark DataFrame (choose the columns of an "
                   "array by indexing it)", columns)
    points, rng = bound_points("private_kmeans", points, units, max_rows_per_unit, rng)
    release = _private_kmeans(points, k, epsilon, delta, radius, rng, ledger, parts, n_init, strategy)
    return _mean_module._with_unit(release, units, max_rows_per_unit)


def _check_spark_parameters(d: int, k: Any, epsilon: Any, delta: Any, radius: Any, parts: Any, n_init: Any,
                            strategy: Any) -> None:
    """Every check of :func:`_private_kmeans` that needs no data, for a Spark DataFrame (before its
    first job), for both strategies (sample and aggregate: ``radius``/``parts`` given, or
    ``strategy="aggregate"``; its per-part k-means runs in Spark,
    :mod:`privagg.engines.spark_aggregate_kmeans`)."""
    where = "private_kmeans"
    if d > 2**20:
        raise fail(where, "points", "a DataFrame with at most 2**20 columns", f"{d} columns")
    _check_k(where, k)
    r = _check_radius(where, radius)
    if parts is not None:
        check_positive_int(where, "parts", parts, T_MIN, 100_000)
    check_positive_int(where, "n_init", n_init, 1, 10)
    if _check_strategy(where, strategy, r, parts) == "coreset":
        coreset_plan(epsilon, delta, d, where=where)
    else:
        kmeans_plan(epsilon, delta, select_radius=r is None, where=where)


def _check_strategy(where: str, strategy: Any, radius: Any, parts: Any) -> str:
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise fail(where, "strategy", "one of " + ", ".join(STRATEGIES), strategy)
    if strategy == "auto":
        return "aggregate" if radius is not None or parts is not None else "coreset"
    if strategy == "coreset" and (radius is not None or parts is not None):
        raise fail(where, "strategy", "'aggregate' or 'auto' when radius or parts is given", strategy)
    return strategy


@quiet_numerics
def _private_kmeans(points: Any, k: Any, epsilon: Any, delta: Any, radius: Any, rng: Any,
                    ledger: Any, parts: Any, n_init: Any, strategy: Any = "auto") -> KMeansRelease:
    where = "private_kmeans"
    x = _check_points(where, points)
    if x.shape[1] > 2**20:
        raise fail(where, "points", "an array with at most 2**20 columns", f"shape={x.shape}")
    kk = _check_k(where, k)
    r = _check_radius(where, radius)
    if parts is not None:
        check_positive_int(where, "parts", parts, T_MIN, 100_000)
    check_positive_int(where, "n_init", n_init, 1, 10)
    chosen = _check_strategy(where, strategy, r, parts)
    if chosen == "coreset":
        return _private_kmeans_coreset(ArrayKMeansPoints(x), kk, epsilon, delta, rng, ledger)
    return _private_kmeans_aggregate(x, kk, epsilon, delta, r, rng, ledger, parts, n_init)


@quiet_numerics
def _private_kmeans_aggregate(x: Any, kk: int, epsilon: Any, delta: Any, r: float | None, rng: Any,
                              ledger: Any, parts: Any, n_init: Any) -> KMeansRelease:
    """Sample and aggregate on validated parameters. ``x``: the finite rows (an array), or a
    source (Spark: :class:`~privagg.engines.spark_aggregate_kmeans.SparkAggregatePoints`) with
    ``count()``, ``d``, ``part_tuples(k, t, gen, n_init)`` (the ``(t, k, d)`` per-part centers, the
    law of :func:`_part_tuples`), ``lloyd_histogram`` and ``cluster_sums`` (the exact Lloyd
    counts and sums); ``rng`` an ``rng`` argument or an engine's ``(generator, secure)`` pair.
    Everything after the tuples is this code on the driver, whatever the source."""
    where = "private_kmeans"
    plan = kmeans_plan(epsilon, delta, select_radius=r is None, where=where)
    gen, secure = rng if isinstance(rng, tuple) else resolve_rng(rng, where)
    local = isinstance(x, np.ndarray)
    n, d = (x.shape[0], x.shape[1]) if local else (x.count(), x.d)  # (a source counted before the charge)
    loss = plan.privacy_loss
    eps_out, delta_out = float(loss.epsilon), float(loss.delta)
    if ledger is not None:
        ledger.charge(loss, mechanism=where, parameters={**plan.public_parameters(), "k": kk,
                      "radius": r, "parts": parts, "d": int(d), "strategy": "aggregate"})
    n_hat = n + int(discrete_laplace(1 / plan.eps_count, rng=gen))

    def bottom(used: float | None, t: int, reason: str) -> KMeansRelease:
        return KMeansRelease(False, None, eps_out, delta_out, used, secure, loss, t, reason,
                             n_hat=n_hat)

    t = int(parts) if parts is not None else default_parts(max(n_hat, 0), kk, d)
    if t < T_MIN:
        return bottom(r, 0, f"too few rows for {T_MIN} parts of {ROWS_PER_CLUSTER}·k rows "
                            f"(noisy count n̂ = {n_hat} gives {t} parts)")
    tuples = _part_tuples(x, kk, t, gen, int(n_init)) if local else x.part_tuples(kk, t, gen, int(n_init))
    if r is None:
        r = _select_radius(tuples, plan.eps_select, gen)
    centers, m_hat = _aggregate(tuples, r, plan, gen)
    if centers is None:
        return bottom(r, t, f"too few of the {t} parts agree on the centers (noisy core size "
                            f"m̂ = {m_hat}, needs m̂ >= {M_MIN + plan.core_count_shift} and a "
                            f"finite core; noisy count n̂ = {n_hat}; clusters closer than 6r "
                            "apart never agree: try strategy='coreset')")
    for _ in range(plan.steps):
        big_r = clip_radius(centers, r, max(n_hat, 1) / t)
        centers = _lloyd_step(x, centers, big_r, plan, gen)
    centers = centers[np.lexsort(centers.T[::-1])]
    return KMeansRelease(True, centers, eps_out, delta_out, r, secure, loss, t, n_hat=n_hat)


@quiet_numerics
def _private_kmeans_coreset(x: KMeansSource, k: int, epsilon: Any, delta: Any, rng: Any,
                            ledger: Any) -> KMeansRelease:
    """The coreset strategy on the finite rows of a :class:`~privagg.engines.base.KMeansSource`;
    ``rng`` is an ``rng`` argument or an engine's resolved ``(generator, secure)`` pair."""
    where = "private_kmeans"
    d = x.d
    plan = coreset_plan(epsilon, delta, d, where=where)
    gen, secure = rng if isinstance(rng, tuple) else resolve_rng(rng, where)
    n = x.count()  # before the charge (an engine that cannot evaluate its data charges nothing)
    loss = plan.privacy_loss
    eps_out, delta_out = float(loss.epsilon), float(loss.delta)
    if ledger is not None:
        ledger.charge(loss, mechanism=where, parameters={**plan.public_parameters(), "k": k,
                      "d": int(d)})
    n_hat = n + int(discrete_laplace(1 / plan.eps_count, rng=gen))
    need = plan.min_rows(k)

    def release(centers: np.ndarray | None, reason: str | None, side: float | None = None,
                size: int = 0) -> KMeansRelease:
        if centers is not None:
            centers = centers[np.lexsort(centers.T[::-1])]
        return KMeansRelease(centers is not None, centers, eps_out, delta_out, None, secure, loss,
                             0, reason, "coreset", side, size, n_hat)

    if n_hat < need:
        return release(None, f"n̂ = {n_hat} is below the {need} rows needed for k = {k} at this ε "
                             f"and δ (max({N_FLOOR}, {N_PER_CENTER}·k·T, S) with coreset threshold "
                             f"T = {plan.threshold} and S = {plan.search_rows}, the rows the noisy "
                             f"cell-side search needs at this ε)")
    centers, reason, side, size = _coreset_kmeans(x, k, plan, n_hat, gen)
    return release(centers, reason, side, size)

# ============================================================== the coreset strategy (default)
#: Rows of more than D_CORE columns are projected to D_PROJ columns (JL) for the coreset.
D_CORE = 10
D_PROJ = 8
#: Cell sides searched: ``w_j = 2^{j/4}``, ``j = LEVEL_LO … LEVEL_HI`` (2⁻¹⁰⁰ … 2¹⁰⁰).
LEVEL_LO, LEVEL_HI = -400, 400
#: Noisy comparisons of the binary search over the levels (2^10 >= 801 levels). Comparison ``i``
#: (0-based) gets ``ε_i = eps_level·2(LEVEL_STEPS − i)/(LEVEL_STEPS(LEVEL_STEPS + 1))`` (linearly
#: decreasing, Σ ε_i = eps_level): a wrong answer at step ``i`` moves the result by up to
#: ``801/2^{i+1}`` levels, so the early comparisons get the most budget (docs/proofs/kmeans.md §10).
LEVEL_STEPS = 10
#: The search's public size rule: ⊥ unless the first SEARCH_FAR_STEPS comparisons (whose wrong
#: answers move the side by a factor >= 2^12) together go wrong with modeled probability
#: ``Σ_i P[DLap(scale_i) >= n̂/2 − T] <= SEARCH_FAIL`` (the margin of a level far from the data's
#: scale: ``f_j = 0`` below, ``n − T`` above, against the target ``n̂/2``).
SEARCH_FAR_STEPS = 4
SEARCH_FAIL = Fraction(1, 100)
#: The search finds the least level ``j0`` whose heavy cells hold (beyond T each) LEVEL_MASS of
#: n̂; the side used is then picked among ``j0 − PICK_WINDOW, j0 − PICK_WINDOW + 2, …, j0`` by
#: report-noisy-max of the number of cells with at least T rows.
LEVEL_MASS = Fraction(1, 2)
PICK_WINDOW = 16
#: Shares of the sums' ρ of the coreset strategy's private Lloyd steps (their number is
#: CORESET_STEPS): the early steps move the centers a long way (from the coreset's centers, which
#: miss the rows of the cells below T — the sparse tails of real data), the last ones set them.
#: 8 steps, not 3: on real data 3 stopped far from a local optimum (randhie k = 10: cost 1.31×
#: scikit-learn's; airports k = 5: 2.6×; docs/utility/kmeans.md).
_STEP_WEIGHTS = (Fraction(1, 16),) * 4 + (Fraction(1, 8),) * 2 + (Fraction(1, 4),) * 2
CORESET_STEPS = len(_STEP_WEIGHTS)
#: Clip radius of a cluster: the CLIP_QUANTILE weighted quantile of its coreset cells'
#: distances to the step's reference (plus half a cell diagonal).
CLIP_QUANTILE = 0.99
#: ⊥ below ``n̂ < N_PER_CENTER·k·T`` (T the coreset threshold), ``n̂ < N_FLOOR`` or the search's
#: size (SEARCH_FAIL).
N_PER_CENTER = 4
N_FLOOR = 200
#: k-means++ restarts of the non-private k-means on the released coreset.
CORESET_N_INIT = 4
_C_SHARE_COUNT = Fraction(1, 40)
_C_SHARE_LEVEL = Fraction(1, 10)  # was 1/20: flips at n ~ 10^3 (issue: far releases)
_C_SHARE_PICK = Fraction(1, 10)
_C_SHARE_CORE = Fraction(1, 5)
_C_SHARE_ANCHOR = Fraction(1, 20)  # projected only: coordinate modes (step 1's reference)
_C_SHARE_STEP_COUNT = Fraction(1, 40)  # per step
_C_DELTA_CORE = Fraction(1, 4)
_C_DELTA_ANCHOR = Fraction(1, 8)
#: Blocks of cluster_integer_sums added in int64 before Python integers: each block's sums are
#: below 2^53 in magnitude, so 2^8 of them stay below 2^61.
_SUM_FLUSH = 1 << 8
_HASH_LIMIT = 2.0**52  # a row with |cell coordinate| >= this at a level is in no cell there
#: Fixed odd multipliers of the hash that groups the rows of the coreset histogram by cell
#: (:func:`_grouped_cell_counts`; exact whatever the hash: a collision is detected and resolved).
_GROUP_MULT = np.random.default_rng(0x6B6D65616E73).integers(1, 2**63, size=64, dtype=np.uint64) | np.uint64(1)


@dataclass(frozen=True)
class CoresetPlan:
    """Every public scale of the coreset strategy of :func:`private_kmeans` (no data).

    Attributes
    ----------
    projected : bool
        ``d > D_CORE``: the coreset is built on a random projection to ``D_CORE`` columns and a
        global private mean (:func:`privagg.private_mean`) anchors the first Lloyd step.
    eps_count : Fraction
        ε of ``n̂``.
    eps_level : Fraction
        The ``LEVEL_STEPS`` noisy comparisons of the cell-side search together (sensitivity 1).
    level_scales : tuple of Fraction
        The discrete Laplace scale of each comparison, ``1/ε_i`` with ``ε_i = eps_level·2(L − i)/
        (L(L + 1))``, ``L = LEVEL_STEPS`` (linearly decreasing ε_i, Σ ε_i = eps_level).
    search_rows : int
        The least ``n̂`` the search is reliable for: ``2(m + T)`` with ``m`` the least integer with
        ``Σ_{i < SEARCH_FAR_STEPS} P[DLap(level_scales[i]) >= m] <= SEARCH_FAIL``.
    eps_pick : Fraction
        Report-noisy-max of the side among the window (discrete Laplace ``2/eps_pick``).
    eps_core, delta_core : Fraction
        The coreset: a stable histogram of grid cells (discrete Laplace ``1/eps_core``,
        threshold ``threshold``).
    threshold : int
        Least integer ``T >= 1`` with ``P[DLap(1/eps_core) >= T − 1] <= delta_core``.
    rho_anchor, anchor_threshold, eps_anchor, delta_anchor
        Projected only: the coordinate-mode anchor, a Gaussian stable histogram of the ``(column,
        bin)`` cells (discrete Gaussian of variance ``d/(2ρ)``, ℓ2 sensitivity ``√d``, cells kept
        when ``>= anchor_threshold``), ``(eps_anchor, delta_anchor)``-DP (§10); zeros otherwise.
    anchor_sigma2 : Fraction
        Projected only: the anchor noise's variance, ``d/(2ρ_anchor)``, rounded up to a value the
        exact sampler takes when it is beyond the sampler's table (``noise.grid._cks_friendly``).
    eps_step_count : Fraction
        Per Lloyd step, the noisy cluster sizes (ℓ1 sensitivity 1).
    rho_steps : tuple of Fraction
        Per Lloyd step, the ρ of the clipped sums (discrete Gaussian); together ρ_sum-zCDP.
    eps_sum, delta_sum : Fraction
        ``zcdp_to_epsilon(Σ rho_steps, delta_sum)``.
    """

    projected: bool
    eps_count: Fraction
    eps_level: Fraction
    level_scales: tuple[Fraction, ...]
    search_rows: int
    eps_pick: Fraction
    eps_core: Fraction
    delta_core: Fraction
    threshold: int
    rho_anchor: Fraction
    anchor_threshold: int
    eps_anchor: Fraction
    delta_anchor: Fraction
    eps_step_count: Fraction
    rho_steps: tuple[Fraction, ...]
    eps_sum: Fraction
    delta_sum: Fraction
    anchor_sigma2: Fraction = Fraction(0)

    @property
    def steps(self) -> int:
        return len(self.rho_steps)

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """End-to-end (ε, δ): basic composition of the pure and (ε, δ) parts; the sums compose in
        zCDP and are converted once (docs/proofs/kmeans.md §10)."""
        eps = (self.eps_count + self.eps_level + self.eps_pick + self.eps_core + self.eps_anchor
               + self.steps * self.eps_step_count + self.eps_sum)
        return PrivacyLoss.approx(eps, self.delta_core + self.delta_anchor + self.delta_sum)

    def min_rows(self, k: int) -> int:
        """The public size below which the release is ⊥: ``max(N_FLOOR, N_PER_CENTER·k·T,
        search_rows)``."""
        return max(N_FLOOR, N_PER_CENTER * k * self.threshold, self.search_rows)

    def public_parameters(self) -> dict[str, Any]:
        return {"strategy": "coreset", "projected": self.projected,
                "eps_count": float(self.eps_count), "eps_level": float(self.eps_level),
                "search_rows": self.search_rows,
                "eps_pick": float(self.eps_pick),
                "eps_core": float(self.eps_core), "threshold": self.threshold,
                "eps_anchor": float(self.eps_anchor),
                "steps": self.steps, "eps_sum": float(self.eps_sum)}


def coreset_plan(epsilon: Any, delta: Any, d: int, *, where: str = "private_kmeans") -> CoresetPlan:
    """Split (ε, δ) between the steps of the coreset strategy (public only).

    Shares (``_C_SHARE_*``): ε_n = ε/40, the cell-side search ε/10 (split over its comparisons as
    ``level_scales``) and pick ε/10, the coreset histogram ε/5
    with δ/4, for ``d > D_CORE`` the coordinate-mode anchor ε/20 with δ/8, per Lloyd step ε/40 for
    the cluster sizes; the clipped sums get the rest of ε and of δ as one ρ (certified by
    :func:`~privagg.mechanisms.mean.rho_for`), split between the ``CORESET_STEPS = 8`` steps as
    ``_STEP_WEIGHTS`` (1/16 each for the first four, 1/8 for the next two, 1/4 for the last two).
    """
    eps = check_epsilon_floor(where, epsilon)
    dlt = check_delta_floor(where, delta)
    return _coreset_plan(eps, dlt, d if d > D_CORE else 0)


@functools.lru_cache(maxsize=64)
def _coreset_plan(eps: Fraction, dlt: Fraction, d_proj: int) -> CoresetPlan:
    """``d_proj``: the number of columns when projected, else 0."""
    from ..noise._laws import gaussian_half
    from ..noise.distributions import DiscreteGaussian, DiscreteLaplace
    from ..noise.grid import _cks_friendly

    e_n = eps * _C_SHARE_COUNT
    e_lv = eps * _C_SHARE_LEVEL
    e_pk = eps * _C_SHARE_PICK
    e_core = eps * _C_SHARE_CORE
    d_core = dlt * _C_DELTA_CORE
    threshold = max(1, 1 + DiscreteLaplace(1 / e_core).upper_quantile(float(_float_down(d_core))))
    scales = _level_scales(e_lv)
    search_rows = 2 * (_search_margin(scales) + threshold)
    used_e, used_d = e_n + e_lv + e_pk + e_core, d_core
    rho_a, t_a, e_a, d_a = Fraction(0), 0, Fraction(0), Fraction(0)
    sigma2 = Fraction(0)
    if d_proj:
        # δ_a = δ_g + e^{ε_g}·δ_new (§10): δ_g = δ_new = δ_A/4 keeps it below δ_A for ε_g <= 1.09
        d_g = dlt * _C_DELTA_ANCHOR / 4
        rho_a = rho_for(eps * _C_SHARE_ANCHOR, d_g)
        e_a = zcdp_to_epsilon(rho_a, d_g)
        d_new = dlt * _C_DELTA_ANCHOR / 2 / (1 + _exp_up(e_a))
        sigma2 = Fraction(d_proj) / (2 * rho_a)
        if not gaussian_half(sigma2):
            # beyond the exact sampler's table its σ² must be CKS-friendly (an integer multiple of
            # floor(σ) + 1): rounded up, which only adds noise (ρ = d/(2σ²) <= ρ_a). Without it
            # ε = 0.1 at d = 20 raised ParameterError in the sampler after the charge.
            sigma2 = Fraction(_cks_friendly(math.ceil(sigma2)))
        # d new cells, each passes with P[Z >= T − 1] <= δ_new/d
        t_a = max(1, 1 + DiscreteGaussian(sigma2).upper_quantile(float(_float_down(d_new / d_proj))))
        d_a = d_g + _exp_up(e_a) * d_new
        used_e += e_a
        used_d += d_a
    e_sc = eps * _C_SHARE_STEP_COUNT
    used_e += CORESET_STEPS * e_sc
    e_sum_target, d_sum = eps - used_e, dlt - used_d
    rho = rho_for(e_sum_target, d_sum)
    rhos = tuple(rho * w for w in _STEP_WEIGHTS)
    e_sum = zcdp_to_epsilon(sum(rhos, Fraction(0)), d_sum)
    return CoresetPlan(bool(d_proj), e_n, e_lv, scales, search_rows, e_pk, e_core, d_core, threshold, rho_a, t_a, e_a, d_a,
                       e_sc, rhos, e_sum, d_sum, sigma2 if d_proj else Fraction(0))


def _level_scales(e_lv: Fraction) -> tuple[Fraction, ...]:
    """``1/ε_i``, ``ε_i = e_lv·2(L − i)/(L(L + 1))`` for ``i = 0 … L − 1`` (``L = LEVEL_STEPS``)."""
    n = LEVEL_STEPS
    return tuple(Fraction(n * (n + 1), 2 * (n - i)) / e_lv for i in range(n))


def _search_margin(scales: tuple[Fraction, ...]) -> int:
    """The least integer ``m >= 1`` with ``Σ_{i < SEARCH_FAR_STEPS} P[DLap(scales[i]) >= m] <=
    SEARCH_FAIL`` (each tail rounded up; bisection, the sum decreases in ``m``)."""
    from ..noise.distributions import DiscreteLaplace

    dists = [DiscreteLaplace(b) for b in scales[:SEARCH_FAR_STEPS]]

    def ok(m: int) -> bool:
        return sum(dl.sf(m) for dl in dists) <= SEARCH_FAIL

    lo, hi = 1, 2
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _anchor(x: np.ndarray, width: float, plan: CoresetPlan, gen: np.random.Generator) -> np.ndarray | None:
    """Coordinate modes: every row adds one to the cell ``(j, floor(x_ij/width − u_j))`` of each
    column ``j`` (``u`` public uniform shifts); every occupied cell gets discrete Gaussian noise
    of variance ``d/(2ρ_a)`` and is kept when ``>= anchor_threshold`` (a Gaussian stable
    histogram, §10); per column the center of its kept cell of largest noisy count. None when a
    column keeps no cell."""
    source = _kmeans_source(x)
    d = source.d
    u = gen.random(d)
    # noise and threshold where the rows live (KMeansSource.noisy_column_cells): the kept bins
    col, vals, noisy = source.noisy_column_cells(width, u, plan.anchor_sigma2,
                                                 plan.anchor_threshold, gen)
    if not np.isin(np.arange(d), col).all():
        return None
    order = np.lexsort((-noisy, col))  # per column, the largest noisy count first
    first = order[np.searchsorted(col[order], np.arange(d))]
    return (vals[first] + u + 0.5) * width


def _level_side(j: int) -> float:
    return 2.0 ** (j / 4.0)


def _cell_coordinates(y: np.ndarray, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
    """Integer cell coordinates ``floor(y/side − shift)`` (as float64) and the rows that have a
    cell at this side (every coordinate below ``2^52`` in magnitude, finite)."""
    z = np.floor(y / side - shift)
    ok = (np.abs(z) < _HASH_LIMIT).all(axis=1)
    return z, ok


def cell_hashes(z: np.ndarray, ok: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """The hashed cell of every row that has a cell: ``Σ_j z_j·mult_j mod 2^64`` (uint64)."""
    zi = z[ok].astype(np.int64).view(np.uint64)
    return (zi * mult).sum(axis=1, dtype=np.uint64)  # wraps modulo 2^64


def _level_score(y: Any, shift: np.ndarray, j: int, mult: np.ndarray, threshold: int) -> int:
    """``f_j = Σ_cells max(count − T, 0)`` at side ``w_j``: one row changes it by at most 1.
    ``y``: the coreset-space rows (an array, or :class:`CoresetRows` where the data live)."""
    rows = _coreset_rows(y)
    excess, _ = rows.source.cell_scores(rows.proj, shift, np.array([_level_side(j)]), mult, threshold)
    return int(excess[0])


def _search_level(y: Any, shift: np.ndarray, mult: np.ndarray, n_hat: int, plan: CoresetPlan,
                  gen: np.random.Generator) -> int:
    """Noisy binary search for the least level ``j`` with ``f_j >= LEVEL_MASS·n̂``: exactly
    ``LEVEL_STEPS`` comparisons, comparison ``i`` of ``f_j + DLap(plan.level_scales[i])``
    (ε_i-DP, Σ ε_i = eps_level; the early ones, whose errors cost the most levels, are the most
    accurate)."""
    lo, hi = LEVEL_LO, LEVEL_HI
    target = LEVEL_MASS * n_hat
    noise = [int(discrete_laplace(b, rng=gen)) for b in plan.level_scales]
    for i in range(LEVEL_STEPS):
        mid = (lo + hi) // 2
        if _level_score(y, shift, mid, mult, plan.threshold) + int(noise[i]) >= target:
            hi = mid
        else:
            lo = min(mid + 1, hi)
    return hi


def _heavy_cells(y: Any, shift: np.ndarray, levels: np.ndarray, mult: np.ndarray, threshold: int) -> np.ndarray:
    """Per level ``j``, the number of (hashed) cells with at least T rows at side ``w_j``: one row
    changes each by at most 1 (all levels in one pass over the rows)."""
    rows = _coreset_rows(y)
    sides = np.array([_level_side(int(j)) for j in levels])
    return rows.source.cell_scores(rows.proj, shift, sides, mult, threshold)[1]


def _pick_level(y: Any, shift: np.ndarray, mult: np.ndarray, j0: int, k: int,
                plan: CoresetPlan, gen: np.random.Generator) -> int:
    """Report-noisy-max (discrete Laplace ``2/eps_pick``, ties to the larger side) of the number
    of heavy cells over the public window ``j0 − PICK_WINDOW … j0`` (step 2): eps_pick-DP. When
    the winner's noisy score is below ``max(2k, 4·(2/eps_pick)·ln(#levels))`` (the scores are
    then mostly noise) ``j0`` is used instead (post-processing)."""
    levels = np.arange(max(LEVEL_LO, j0 - PICK_WINDOW), j0 + 1, 2)[::-1]
    if levels[0] != j0:
        levels = np.concatenate(([j0], levels))
    scores = _heavy_cells(y, shift, levels, mult, plan.threshold)
    scale = 2 / plan.eps_pick
    noisy = scores + discrete_laplace(scale, size=levels.size, rng=gen)
    best = int(np.argmax(noisy))
    if noisy[best] < max(2 * k, 4 * float(scale) * math.log(levels.size)):
        return j0
    return int(levels[best])


def _coreset(y: Any, shift: np.ndarray, side: float, plan: CoresetPlan,
             gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stable histogram of the cells at ``side``: every occupied cell's count plus
    ``DLap(1/eps_core)``, kept when ``>= T``. Returns the kept cells' centers (in ``y``'s space)
    and their noisy counts (the weights). Counts, noise and threshold are computed where the rows
    live (:meth:`~privagg.engines.base.KMeansSource.noisy_cells`: here from ``gen``, in Spark in
    the tasks); only the kept cells come back."""
    rows = _coreset_rows(y)
    cells, noisy = rows.source.noisy_cells(rows.proj, shift, side, 1 / plan.eps_core, plan.threshold, gen)
    if cells.shape[0] == 0:
        return np.zeros((0, shift.shape[0])), np.zeros(0)
    return (cells + shift + 0.5) * side, noisy.astype(np.float64)


def _weighted_kmeans(points: np.ndarray, weights: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Non-private k-means++ (scikit-learn) on the released coreset (post-processing); fewer
    cells than k: the cells are repeated (duplicate centers)."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    if points.shape[0] <= k:
        return np.resize(points, (k, points.shape[1]))
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        km = KMeans(k, init="k-means++", n_init=CORESET_N_INIT, random_state=seed)
        return km.fit(points, sample_weight=weights).cluster_centers_


def _coreset_radii(cells: np.ndarray, weights: np.ndarray, cell_label: np.ndarray,
                   ref_proj: np.ndarray, side: float) -> np.ndarray:
    """Per cluster, the CLIP_QUANTILE weighted quantile of its coreset cells' distances to the
    (projected) reference plus half a cell diagonal; a cluster with no cell gets the largest
    radius of the others (post-processing of released values only)."""
    k = ref_proj.shape[0]
    dist = np.sqrt(((cells - ref_proj[cell_label]) ** 2).sum(axis=1)) + side * math.sqrt(cells.shape[1]) / 2
    order = np.lexsort((dist, cell_label))
    lab, dis, wts = cell_label[order], dist[order], weights[order]
    bounds = np.searchsorted(lab, np.arange(k + 1))
    cum = np.cumsum(wts)
    base = np.concatenate(([0.0], cum))[bounds[:-1]]
    total = np.concatenate(([0.0], cum))[bounds[1:]] - base
    radii = np.full(k, np.nan)
    have = total > 0
    if have.any():
        # index of the first cell of each cluster whose cumulative weight reaches the quantile
        goal = base + CLIP_QUANTILE * total
        idx = np.searchsorted(cum, goal[have], side="left")
        idx = np.minimum(np.maximum(idx, bounds[:-1][have]), bounds[1:][have] - 1)
        radii[have] = dis[idx]
    fallback = np.nanmax(radii) if have.any() else side * math.sqrt(cells.shape[1])
    radii = np.where(np.isfinite(radii), radii, fallback)
    return np.clip(radii, 2.0**-400, 2.0**1000)


def _far_rows(z: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``keep·z/‖z‖`` for rows whose squared norm overflows, ``z`` already scaled by 1/4."""
    z = z / np.abs(z).max(axis=1, keepdims=True)
    return z * (keep / np.sqrt(np.einsum("ij,ij->i", z, z)))[:, None]


def cluster_integer_sums(x: np.ndarray, label: np.ndarray, refs: np.ndarray, radii: np.ndarray,
                         exponent: int) -> np.ndarray:
    """All clusters at once: ``S_c = Σ_{label_i = c} rint(clip(x_i − refs_c, R_c)/R_c/2^e)``,
    exactly, as Python integers (object array ``(k, d)``). Every row's term is the term of
    :func:`~privagg.mechanisms.mean._clipped_integer_sum` with ``unit = R_c`` (norm ``<= 2^{−e}``
    before rounding); blocks of ``2^14`` rows are summed per (cluster, column) by one
    ``np.bincount`` (integer-valued float64 partial sums below ``2^53``: exact in any order),
    up to ``_SUM_FLUSH`` blocks in int64 (below ``2^61``), then as Python integers."""
    n, d = x.shape
    k = refs.shape[0]
    margin = 1.0 - _mean_module._clip_margin(d)  # looked up at call time (tests patch it)
    total = np.zeros((k, d), dtype=np.int64).astype(object)
    block = np.zeros(k * d, dtype=np.int64)  # the sums of up to _SUM_FLUSH blocks: |.| < 2^61
    with np.errstate(all="ignore"):
        for s in range(0, n, _SUM_ROWS):
            lab = label[s:s + _SUM_ROWS]
            y = x[s:s + _SUM_ROWS] - refs[lab]
            keep = radii[lab] * margin
            norms = np.sqrt(np.einsum("ij,ij->i", y, y))
            far = ~np.isfinite(norms)
            if far.any():
                zf = x[s:s + _SUM_ROWS][far] * 0.25 - refs[lab[far]] * 0.25
                y[far] = _far_rows(zf, keep[far])
                norms[far] = keep[far]
            factor = np.minimum(1.0, keep / np.maximum(norms, np.finfo(float).tiny))
            y *= np.ldexp(factor / radii[lab], -exponent)[:, None]
            np.rint(y, out=y)
            # per (cluster, column) one bincount bucket: exact, integer-valued and < 2^53
            cell = (lab[:, None] * d + np.arange(d)).reshape(-1)
            part = np.bincount(cell, weights=y.reshape(-1), minlength=k * d)
            block += part.astype(np.int64)
            if (s // _SUM_ROWS) % _SUM_FLUSH == _SUM_FLUSH - 1:
                total += block.reshape(k, d).astype(object)
                block[:] = 0
    return total + block.reshape(k, d).astype(object)


def _noisy_step(x: Any, label: Any, refs: np.ndarray, radii: np.ndarray,
                eps_count: Fraction, rho: Fraction, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One private Lloyd update from public references, labels a function of each row and
    public values: noisy sizes (``DLap(1/eps_count)``, ℓ1 sensitivity 1) and noisy unit sums
    (discrete Gaussian, ρ; one row changes one cluster's d coordinates, as in §6.3). Returns the
    new centers ``refs + R·S̃/count`` (unchanged where the noisy size is below M_MIN) and the
    noisy sizes. The step ``R·S̃/count`` is projected onto the clip ball ``‖step‖ <= R`` (radius
    R of the cluster): post-processing of released values, and never farther from the clipped
    mean, which lies in that (convex) ball. ``x``: an array with ``label`` its rows' labels, or a
    :class:`~privagg.engines.base.KMeansSource` with ``label`` a :class:`Labels` (the rows are
    labelled, counted and summed where they live)."""
    k, d = refs.shape
    e_h = -SUM_BITS
    if isinstance(label, Labels):
        exact, sums = _kmeans_source(x).cluster_sums(label.proj, label.centers, refs, radii, e_h)
    else:
        exact, sums = np.bincount(label, minlength=k), cluster_integer_sums(x, label, refs, radii, e_h)
    sizes = exact + discrete_laplace(1 / eps_count, size=k, rng=gen)
    sums = sums.reshape(-1)
    sigma = 1.0 / math.sqrt(2.0 * float(rho)) * _SAFETY
    e = gaussian_exponent(_SAFETY, sigma, k * d)
    root_d = _sqrt_up(d)
    sens = ((1 + root_d * Fraction(2) ** e_h / 2) / Fraction(2) ** e + (root_d if e > e_h else 0))
    noisy = grid_gaussian_integers(rescale_integers(sums, from_exponent=e_h, to_exponent=e),
                                   exponent=e, l2_sensitivity_grid=sens, rho=rho,
                                   rng=gen).values.reshape(k, d)
    moved = sizes >= M_MIN
    out = refs.copy()
    with np.errstate(all="ignore"):
        unit = noisy[moved] / sizes[moved, None]  # the clipped mean's unit step: norm <= 1 noise-free
        norm = np.sqrt(np.einsum("ij,ij->i", unit, unit))
        unit = np.where((norm > 1.0)[:, None], unit / norm[:, None], unit)
    out[moved] += unit * radii[moved, None]  # the step projected onto the clip ball (post-processing)
    return _finite(out), sizes


def _nearest_plain(y: np.ndarray, centers: np.ndarray) -> np.ndarray:
    return _nearest(y, centers)


def _coreset_kmeans(x: np.ndarray, k: int, plan: CoresetPlan, n_hat: int,
                    gen: np.random.Generator) -> tuple[np.ndarray | None, str | None, float | None, int]:
    """The coreset strategy after the count: (centers or None, reason, cell side, coreset size).
    ``x``: the rows (an array or a :class:`~privagg.engines.base.KMeansSource`), read only through
    the source's exact counts and sums."""
    x = _kmeans_source(x)
    d = x.d
    proj = gen.normal(0.0, 1.0 / math.sqrt(D_PROJ), size=(d, D_PROJ)) if plan.projected else None
    y = CoresetRows(x, proj)  # the rows in the coreset space (x @ proj when projected)
    dc = d if proj is None else D_PROJ
    shift = gen.random(dc)
    mult = gen.integers(1, 2**63, size=dc, dtype=np.uint64) | np.uint64(1)
    j = _pick_level(y, shift, mult, _search_level(y, shift, mult, n_hat, plan, gen), k,
                    plan, gen)
    side = _level_side(j)
    cells, weights = _coreset(y, shift, side, plan, gen)
    if cells.shape[0] == 0:
        return None, (f"no grid cell of side {side:.4g} holds {plan.threshold} rows (the coreset "
                      f"threshold; noisy count n̂ = {n_hat})"), side, 0
    seed = int(gen.integers(0, 2**31 - 1))
    c_proj = _weighted_kmeans(cells, weights, k, seed)
    steps = list(plan.rho_steps)
    if proj is None:
        centers = c_proj
        for rho in steps:
            label = Labels(None, centers)
            radii = _coreset_radii(cells, weights, _nearest(cells, centers), centers, side)
            centers, _ = _noisy_step(x, label, centers, radii, plan.eps_step_count, rho, gen)
        return centers, None, side, cells.shape[0]
    # the anchor's bin width: twice the coreset's RMS radius per column (JL keeps norms)
    wmean = (weights[:, None] * cells).sum(axis=0) / weights.sum()
    rms = math.sqrt(float((weights * ((cells - wmean) ** 2).sum(axis=1)).sum() / weights.sum()))
    width = min(max(2.0 * (rms + side) / math.sqrt(d), 2.0**-400), 2.0**1000)
    mu = _anchor(x, width, plan, gen)
    if mu is None:
        return None, (f"a column has no bin of width {width:.4g} with {plan.anchor_threshold} rows "
                      f"(the anchor's threshold; noisy count n̂ = {n_hat})"), side, cells.shape[0]
    label_p = Labels(proj, c_proj)
    cell_label = _nearest(cells, c_proj)
    refs = np.tile(mu, (k, 1))
    radii = _coreset_radii(cells, weights, cell_label, _finite(refs @ proj), side)
    centers, _ = _noisy_step(x, label_p, refs, radii, plan.eps_step_count, steps[0], gen)
    radii = _coreset_radii(cells, weights, cell_label, _finite(centers @ proj), side)
    centers, _ = _noisy_step(x, label_p, centers, radii, plan.eps_step_count, steps[1], gen)
    for rho in steps[2:]:
        pc = _finite(centers @ proj)
        radii = _coreset_radii(cells, weights, _nearest(cells, pc), pc, side)
        centers, _ = _noisy_step(x, Labels(None, centers), centers, radii, plan.eps_step_count, rho, gen)
    return centers, None, side, cells.shape[0]


# ============================================================== the data seam of the coreset strategy
# The coreset strategy reads its rows only through these exact, noise-free functions of the rows
# (one shared per-row arithmetic): in memory on the whole array (ArrayKMeansPoints), in Spark on
# each task's Arrow batches, the partial counts and sums added by Spark
# (privagg.engines.spark_kmeans). Every noise draw, threshold and accounting step is above.


def coreset_space(x: np.ndarray, proj: np.ndarray | None) -> np.ndarray:
    """The rows in the coreset space: ``x`` itself, or ``_finite(x @ proj)`` (JL, ``d > D_CORE``)."""
    return x if proj is None else _finite(x @ proj)


def _row_hashes(y: np.ndarray, shift: np.ndarray, side: float, mult: np.ndarray) -> np.ndarray:
    """``cell_hashes(*_cell_coordinates(y, shift, side), mult)``: the same float64 operations per
    element, on blocks of ``_ROWS`` rows one column at a time (cache-resident, no (n, dc)
    temporaries and no row-wise reductions; the rows are not copied)."""
    n = y.shape[0]
    h = np.zeros(n, dtype=np.uint64)
    ok = np.ones(n, dtype=bool)
    t = np.empty(min(n, _ROWS))
    with np.errstate(invalid="ignore"):  # the cast of a row without a cell (masked out below)
        for s in range(0, n, _ROWS):
            hb, ob, tb = h[s:s + _ROWS], ok[s:s + _ROWS], t[:min(_ROWS, n - s)]
            for j in range(y.shape[1]):  # a public number of columns (not a loop over rows)
                np.divide(y[s:s + _ROWS, j], side, out=tb)
                np.subtract(tb, shift[j], out=tb)
                np.floor(tb, out=tb)
                ob &= np.abs(tb) < _HASH_LIMIT
                hb += tb.astype(np.int64).view(np.uint64) * mult[j]  # wraps modulo 2^64
    return h[ok]


def _counts_of_sorted(h: np.ndarray) -> np.ndarray:
    """The counts of the hashed cells from their sorted hashes (a deterministic function of each
    row: one row adds one to one bucket; a collision merges buckets, which only costs utility)."""
    if h.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], h[1:] != h[:-1])))
    return np.diff(np.append(starts, h.size))


def cell_scores(y: np.ndarray, shift: np.ndarray, sides: np.ndarray, mult: np.ndarray,
                threshold: int) -> tuple[np.ndarray, np.ndarray]:
    """Per side ``w``: ``Σ max(c − T, 0)`` and ``#{c >= T}`` over the counts ``c`` of the hashed
    cells ``floor(y/w − shift)`` (:func:`cell_hashes`; int64 arrays of len(sides))."""
    excess = np.zeros(len(sides), dtype=np.int64)
    heavy = np.zeros(len(sides), dtype=np.int64)
    for i, side in enumerate(sides):  # a few public sides (not a loop over rows)
        h = _row_hashes(y, shift, float(side), mult)
        h.sort()
        counts = _counts_of_sorted(h)
        excess[i] = np.maximum(counts - threshold, 0).sum()
        heavy[i] = (counts >= threshold).sum()
    return excess, heavy


def _grouped_cell_counts(y: np.ndarray, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cell_counts` of the rows ``y`` (n, dc), faster: the rows are grouped by a hash of
    their cell (one sort of n integers), every group is checked to hold a single cell, and only
    the distinct cells are sorted lexicographically. On a hash collision (two cells, one hash)
    the rows are sorted lexicographically instead: the same cells and counts either way (the
    hash only sets the running time)."""
    z, ok = _cell_coordinates(y, shift, side)
    z = z[ok]
    if z.shape[0] == 0:
        return np.zeros((0, y.shape[1])), np.zeros(0, dtype=np.int64)
    if y.shape[1] > _GROUP_MULT.size:  # (the coreset space has at most D_CORE columns)
        return cell_counts(y, shift, side)
    h = _row_hashes(y, shift, side, _GROUP_MULT[:y.shape[1]])
    order = np.argsort(h)
    hs = h[order]
    new = np.concatenate(([True], hs[1:] != hs[:-1]))
    starts = np.flatnonzero(new)
    first = order[starts]  # one row of every hashed cell
    if (z[order] == np.repeat(z[first], np.diff(np.append(starts, hs.size)), axis=0)).all():
        cells, counts = z[first], np.diff(np.append(starts, hs.size))
        lex = np.lexsort(cells.T[::-1])
        return cells[lex], counts[lex]
    return cell_counts(y, shift, side)  # a hash collision: the rows sorted lexicographically


def cell_counts(y: np.ndarray, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
    """The occupied cells ``floor(y/side − shift)`` (rows with a cell) in lexicographic order,
    float64 (m, dc), and their counts (int64)."""
    z, ok = _cell_coordinates(y, shift, side)
    z = z[ok]
    if z.shape[0] == 0:
        return np.zeros((0, y.shape[1])), np.zeros(0, dtype=np.int64)
    zs = z[np.lexsort(z.T[::-1])]
    starts = np.flatnonzero(np.concatenate(([True], (zs[1:] != zs[:-1]).any(axis=1))))
    return zs[starts], np.diff(np.append(starts, zs.shape[0]))


def column_bins(x: np.ndarray, width: float, u: np.ndarray) -> np.ndarray:
    """``floor(x_ij/width − u_j)``, far rows clamped to ``±_HASH_LIMIT`` (an end bin)."""
    z = np.divide(x, width)
    np.subtract(z, u, out=z)
    np.floor(z, out=z)
    nan = np.isnan(z)  # (none from finite rows) an end bin, by the NaN's sign, as before
    if nan.any():
        z[nan] = np.copysign(_HASH_LIMIT, z[nan])
    return np.clip(z, -_HASH_LIMIT, _HASH_LIMIT, out=z)


def column_cell_counts(x: np.ndarray, width: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column the occupied bins of :func:`column_bins` and their counts: ``(column, bin,
    count)`` sorted by column, then bin (int64, float64, int64)."""
    n, d = x.shape
    zs = np.sort(column_bins(x, width, u), axis=0)
    new = np.ones_like(zs, dtype=bool)
    new[1:] = zs[1:] != zs[:-1]
    flat_new = new.T.reshape(-1)  # column-major: bins of column 0 first
    starts = np.flatnonzero(flat_new)
    col = np.repeat(np.arange(d), new.sum(axis=0))
    return col, zs.T.reshape(-1)[flat_new], np.diff(np.append(starts, n * d))


def cluster_sums(x: np.ndarray, proj: np.ndarray | None, label_centers: np.ndarray, refs: np.ndarray,
                 radii: np.ndarray, exponent: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels ``_nearest(coreset_space(x, proj), label_centers)``; per cluster the size (int64) and
    :func:`cluster_integer_sums` (object (k, d) of Python integers)."""
    label = _nearest(coreset_space(x, proj), label_centers)
    k = refs.shape[0]
    return np.bincount(label, minlength=k), cluster_integer_sums(x, label, refs, radii, exponent)


@dataclass(frozen=True)
class Labels:
    """How the rows of a Lloyd step are labelled: nearest of ``centers`` in the coreset space of
    ``proj`` (None: the rows themselves). Public values only."""

    proj: np.ndarray | None
    centers: np.ndarray


@dataclass(frozen=True)
class CoresetRows:
    """The rows of ``source`` in the coreset space of ``proj`` (None: the rows themselves)."""

    source: Any
    proj: np.ndarray | None


class ArrayKMeansPoints(ArrayPoints, KMeansSource):
    """In memory: the finite float64 rows ``x`` (n, d) for the coreset strategy. The projection
    of the last ``proj`` is kept (the search asks for it a dozen times)."""

    def __init__(self, x: np.ndarray) -> None:
        super().__init__(x)
        self._space: tuple[Any, np.ndarray] = (None, x)

    def _rows_in(self, proj: np.ndarray | None) -> np.ndarray:
        if proj is None:
            return self.x
        if self._space[0] is not proj:
            self._space = (proj, coreset_space(self.x, proj))
        return self._space[1]

    def cell_scores(self, proj: np.ndarray | None, shift: np.ndarray, sides: np.ndarray, mult: np.ndarray,
                    threshold: int) -> tuple[np.ndarray, np.ndarray]:
        return cell_scores(self._rows_in(proj), shift, sides, mult, threshold)

    def cell_counts(self, proj: np.ndarray | None, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
        return _grouped_cell_counts(self._rows_in(proj), shift, side)

    def column_cell_counts(self, width: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return column_cell_counts(self.x, width, u)

    def cluster_sums(self, proj: np.ndarray | None, label_centers: np.ndarray, refs: np.ndarray,
                     radii: np.ndarray, exponent: int) -> tuple[np.ndarray, np.ndarray]:
        label = _nearest(self._rows_in(proj), label_centers)
        k = refs.shape[0]
        return np.bincount(label, minlength=k), cluster_integer_sums(self.x, label, refs, radii, exponent)


def _kmeans_source(x: Any) -> KMeansSource:
    return x if isinstance(x, KMeansSource) else ArrayKMeansPoints(np.asarray(x, dtype=np.float64))


def _coreset_rows(y: Any) -> CoresetRows:
    return y if isinstance(y, CoresetRows) else CoresetRows(_kmeans_source(y), None)
