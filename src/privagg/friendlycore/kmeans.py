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
from .conversion import end_to_end_budget, friendly_budget, movement_bound
from .filter import keep_probabilities
from .mean import (
    M_MIN,
    SUM_BITS,
    _anchored_mean,
    _finite,
    _check_points,
    _check_radius,
    _clipped_integer_sum,
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
from .predicates import TupleMatch, squared_distance
from .radius import grid_radii

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
    per-tuple ε₁ is capped at 64 (:func:`~privagg.friendlycore.mean.capped_friendly_budget`),
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
        only (the noisy count ``n̂``, the number of parts, the noisy core size ``m̂``).
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
        score = c2[None, :] - 2.0 * (block @ shifted.T)
        out[s:s + _ROWS] = np.argmin(score, axis=1)
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
    label = _nearest(x, centers)
    order = np.argsort(label, kind="stable")
    bounds = np.searchsorted(label[order], np.arange(k + 1))
    dist = np.empty(x.shape[0])
    for s in range(0, x.shape[0], _ROWS):
        y = x[s:s + _ROWS] - centers[label[s:s + _ROWS]]
        dist[s:s + _ROWS] = np.sqrt(np.einsum("ij,ij->i", y, y))
    with np.errstate(divide="ignore", over="ignore"):  # a row on its center: r_max/tiny = inf
        level = np.floor(2.0 * np.log2(r_max / np.maximum(dist, np.finfo(float).tiny)))
    cell = label * HIST_BINS + np.clip(np.nan_to_num(level, nan=0.0), 0, HIST_BINS - 1).astype(np.int64)
    hist = np.bincount(cell, minlength=k * HIST_BINS).reshape(k, HIST_BINS)
    hist = hist + discrete_laplace(1 / plan.eps_lloyd_count, size=(k, HIST_BINS), rng=gen)
    counts = hist.sum(axis=1)
    beyond = np.cumsum(hist, axis=1) - hist  # noisy number of rows farther than edge b
    too_many = beyond > OUT_FRACTION * counts[:, None]
    first_bad = np.where(too_many.any(axis=1), np.argmax(too_many, axis=1), HIST_BINS)
    radii = r_max * np.exp2(-np.maximum(first_bad - 1, 0) / 2.0)
    # Exact integer sums of the unit terms on the grid h = 2^-SUM_BITS, then exactly rescaled to the
    # release grid (exponent chosen as before): one row changes one cluster's d coordinates.
    e_h = -SUM_BITS
    sums = np.concatenate([_clipped_integer_sum(x[order[bounds[c]:bounds[c + 1]]], centers[c],
                                                radii[c], e_h, unit=radii[c]) for c in range(k)])
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


def _check_k(where: str, k: Any) -> int:
    return check_positive_int(where, "k", k, 1, 1000)


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
    units: Any = None,
    max_rows_per_unit: int = 1,
) -> KMeansRelease:
    """Differentially private k-means centers, with no prior bound on where the data lie.

    Sample and aggregate (module docstring): k-means++ on random parts, FriendlyCore on the
    tuples of centers with :func:`~privagg.friendlycore.predicates.tuple_match`, aligned friendly
    averaging, then private Lloyd steps on all rows.

    Parameters
    ----------
    points : array_like, shape (n, d)
        Real numbers. Rows with a NaN or infinite entry are dropped (data, not errors); entries
        that are not real numbers count as missing (as in :func:`privagg.private_mean`).
    k : int
        Number of centers, 1 to 1000.
    epsilon : float
        ε in [2⁻¹⁰⁰, ∞) (end to end, add/remove one row). The aggregation uses at most ε₁ = 64 per tuple
        (:data:`~privagg.friendlycore.mean.FRIENDLY_EPS_MAX`); beyond, the rest is unspent and
        the reported guarantee is below ε.
    delta : float
        δ in [2⁻⁹⁰⁰, 1).
    radius : float, optional
        Tuple radius r: per-part centers of one cluster lie within r of each other, clusters are
        more than 6r apart. ``None``: chosen privately on the grid ``2^{j/4}`` (ε/10).
    rng : None, int, SeedSequence or Generator
        ``None``: the secure generator.
    ledger : privagg.accounting.Ledger, optional
        Charged ``release.privacy_loss`` after validation, before any noise is drawn.
    parts : int, optional
        Number of parts ``t`` (public, >= 20); ``None``: :func:`default_parts` of ``n̂``.
    n_init : int
        scikit-learn ``n_init`` per part (1 to 10).
    units : array-like, optional
        The privacy unit of each row (aligned with ``points``). Given: user level — the rows
        become one vector per unit (:mod:`privagg.engines.unit_rows`) and the guarantee is
        for adding/removing one unit with all its rows (proof: docs/proofs/mean.md §10).
    max_rows_per_unit : int
        k >= 1 (only with ``units``): a unit's vector is the average of k of its rows sampled
        uniformly without replacement (all rows if fewer); 1 (default): one sampled row.

    Returns
    -------
    KMeansRelease
        ``ok=False, centers=None`` is ⊥ (too few rows, or too few parts agree); ``reason`` says
        which, from released values only.

    Raises
    ------
    ParameterError
        Bad shape or dtype of ``points``, k, ε, δ, radius, parts, n_init, rng. Never because of a
        value in the data.
    BudgetExceededError
        From ``ledger``; nothing is released.

    Privacy
    -------
    Add/remove one row. (ε', δ')-DP with ε' = ε_n + ε_sel + ε_agg + s(ε_lc + ε_ls) <= ε and
    δ' = δ_agg + s·δ_ls <= δ (:func:`kmeans_plan`; proof ``docs/proofs/kmeans.md``). Public: d, k,
    ε, δ, the radius when given, ``parts`` when given, ``n_init``.

    Examples
    --------
    >>> import numpy as np
    >>> g = np.random.default_rng(0)
    >>> truth = np.array([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0]])
    >>> x = (truth[:, None, :] + g.normal(size=(3, 4000, 2))).reshape(-1, 2)
    >>> rel = private_kmeans(x, 3, epsilon=1.0, delta=1e-6, rng=1)
    >>> rel.ok, bool(np.abs(rel.centers - truth[np.lexsort(truth.T[::-1])]).max() < 1.0)
    (True, True)
    """
    from ..engines.unit_rows import bound_points  # user level: one vector per unit

    points, rng = bound_points("private_kmeans", points, units, max_rows_per_unit, rng)
    return _private_kmeans(points, k, epsilon, delta, radius, rng, ledger, parts, n_init)


@quiet_numerics
def _private_kmeans(points: Any, k: Any, epsilon: Any, delta: Any, radius: Any, rng: Any,
                    ledger: Any, parts: Any, n_init: Any) -> KMeansRelease:
    where = "private_kmeans"
    x = _check_points(where, points)
    if x.shape[1] > 2**20:
        raise fail(where, "points", "an array with at most 2**20 columns", f"shape={x.shape}")
    kk = _check_k(where, k)
    r = _check_radius(where, radius)
    if parts is not None:
        check_positive_int(where, "parts", parts, T_MIN, 100_000)
    check_positive_int(where, "n_init", n_init, 1, 10)
    plan = kmeans_plan(epsilon, delta, select_radius=r is None, where=where)
    gen, secure = resolve_rng(rng, where)
    loss = plan.privacy_loss
    eps_out, delta_out = float(loss.epsilon), float(loss.delta)
    if ledger is not None:
        ledger.charge(loss, mechanism=where, parameters={**plan.public_parameters(), "k": kk,
                      "radius": r, "parts": parts, "d": int(x.shape[1])})
    d = x.shape[1]

    def bottom(used: float | None, t: int, reason: str) -> KMeansRelease:
        return KMeansRelease(False, None, eps_out, delta_out, used, secure, loss, t, reason)

    n_hat = x.shape[0] + int(discrete_laplace(1 / plan.eps_count, rng=gen))
    t = int(parts) if parts is not None else default_parts(max(n_hat, 0), kk, d)
    if t < T_MIN:
        return bottom(r, 0, f"too few rows for {T_MIN} parts of {ROWS_PER_CLUSTER}·k rows "
                            f"(noisy count n̂ = {n_hat} gives {t} parts)")
    tuples = _part_tuples(x, kk, t, gen, int(n_init))
    if r is None:
        r = _select_radius(tuples, plan.eps_select, gen)
    centers, m_hat = _aggregate(tuples, r, plan, gen)
    if centers is None:
        return bottom(r, t, f"too few of the {t} parts agree on the centers (noisy core size "
                            f"m̂ = {m_hat}, needs m̂ >= {M_MIN + plan.core_count_shift} and a "
                            f"finite core; noisy count n̂ = {n_hat})")
    for _ in range(plan.steps):
        big_r = clip_radius(centers, r, max(n_hat, 1) / t)
        centers = _lloyd_step(x, centers, big_r, plan, gen)
    centers = centers[np.lexsort(centers.T[::-1])]
    return KMeansRelease(True, centers, eps_out, delta_out, r, secure, loss, t)
