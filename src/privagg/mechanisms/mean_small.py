"""The small-sample coordinate-wise plan of :func:`privagg.private_mean` (issue 11, items 1, 2, 4).

Chosen from the released count (public, like every plan switch of ``private_mean``): when
``radius=None`` (any engine: in memory or Spark), ``d <=`` :data:`COORD_DMAX` and ``n̂·ε/d <``
:data:`COORD_SAMPLE`, at ``d > COORD_NARROW_D`` only from ``n̂·ε/d >=`` :data:`COORD_WIDE_MIN`
(:func:`plan_runs`; ⊥ below ``n̂ < max(COORD_MIN·d, COORD_MIN_COUNT)/ε``), and only when every step gets at least
:data:`STEP_EPS_MIN` (:func:`plan_possible`, ε >= about 2⁻³⁴). Proof: docs/proofs/mean.md §11. After the
count ``n̂`` (ε_n = ε/40), ε/40 goes to a noisy count of the rows outside the clipping box and
``ε_j = (ε − ε/20)/d`` to each coordinate ``j`` (shares :data:`COORD_SHARES`), spent on

1. a spread ``s_j`` (location-free): report-noisy-max of :func:`spread_utility`, the doubled
   interval utility of the median of the UNTIED consecutive-pair distances
   (:func:`~.mean.untied_scale_utility`) over ``2^{k/4}`` (2⁻⁹⁰⁰ … 2⁸⁰⁰), ``C_k`` the number of
   consecutive pairs of the keyed row order with ``|x_a − x_b| <= 2^{k/4}`` (sensitivity 4,
   mean.md §2b), prior :func:`log_prior`;
2. an octave cell: report-noisy-max of :func:`cell_utility` (sensitivity 1) over the partition
   :func:`octave_cells` (cells at least about twice ``s_j`` wide), prior centred at ``s_j``'s octave;
3. ``L_j`` = :func:`levels_needed` refinement levels (a public function of the released cell and
   spread): each splits the cell into :data:`COORD_BRANCH` subcells (plus one on each side) and
   picks one by the cell utility; the center is the last cell's midpoint. If some
   ``L_j > COORD_LEVELS`` (data far from the origin relative to their spread, 1e12 ± 1), nothing
   more is spent here and the FriendlyCore plan runs with :func:`switch_epsilon` (adaptive
   composition; :func:`privagg.mechanisms.mean.mean_privacy_loss` takes the max over branches);
4. the sum of ``x_ij − c_j`` clipped to ``[−R_j, R_j]``, ``R_j = K·s_j`` on the radius grid,
   discrete Laplace on its grid (``_noisy_clipped_release`` with d = 1); mean ``c_j + sum_j/n̂``.

Report-noisy-max: ``argmax_c (u(c) + a(c) + ν_c)``, ``ν_c ~ DLap(2Δ/ε_step)`` i.i.d., ``a`` public
offsets ``(2Δ/ε_step)·ln prior(c)``: ε_step-DP for any data-independent offsets (mean.md §11).
Vectorized over candidates (sorted column, ``searchsorted``); loops run over the d columns only.
Every data access is a :class:`~privagg.engines.base.PointSource` method (``pair_quantile_counts``,
``below_counts``, ``column(j).clipped_integer_sum``, ``outside_count``): exact integers, the same
in every engine, so the plan and its release law do not depend on where the rows live.
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..noise.samplers import discrete_laplace

#: The coordinate plan runs when the released ``n̂·ε/d`` is below this (public).
COORD_SAMPLE = 2500
#: Only for d <= this (public). At d >= 3 only from ``n̂·ε/d >=`` :data:`COORD_WIDE_MIN`.
#: (Before the untied spread and COORD_LEVELS = 6 this was 2: at d = 3, n = 300 the plan measured
#: 3.2× the oracle, ⊥ 6/20; the lattice {0..6}³ at n = 6000 looked "7 SE off", which was the
#: sum's Laplace tail, not a bias: at ε = 100 the plan is within 0.04 SE there.)
COORD_DMAX = 5
#: For d > COORD_NARROW_D the plan needs ``n̂·ε/d >=`` this (public), else the FriendlyCore plans
#: run: the spread step's utility margin is about ``0.0475·n̂ε/d`` noise scales against hundreds
#: of flat-prior candidates, and below about 150 some coordinate's spread is often far off (N(7, 1),
#: ε = 1, 20 runs × 5 seeds, median worst-coordinate error: d = 3, n = 300: 27–802 SE (the oracle
#: about 4); n = 450: 6.7–10.5; d = 5, n = 750: 12–18). A narrower prior (flat ±3 octaves) fixed
#: n = 300 for data near unit scale but put data in units of 1e-6 10⁶ SE off: not taken.
COORD_WIDE_MIN = 150
COORD_NARROW_D = 2
#: ... and below ``n̂·ε/d <`` this (= mean.SCALE_MIN/mean.SHARE_SCALE: from there the FriendlyCore
#: plan's per-column scale step runs and handles mixed units; measured on the lattice {0..40}³ at
#: n = 6000, ε = 1: FriendlyCore 0.03–0.18 from the mean of 20 against the coordinate plan's 0.32–0.49,
#: whose clip of 7 spreads is wide for light-tailed columns).
COORD_WIDE_MAX = 1500
#: Below ``n̂·ε/d <`` this the coordinate plan releases ⊥ (too few rows for any of its steps).
COORD_MIN = 20
#: ... and below ``n̂·ε < COORD_MIN_COUNT`` (public): five scales of the count's noise
#: (DLap(40/ε)). With the floor at COORD_MIN·d/ε alone, tiny tables (n = 5 … 20) whose n̂ came
#: out far too high released means 10+ standard deviations off in most releases (the pair-count
#: targets then lie beyond the data's pairs: a plateau); P[n̂·ε >= 200 | n·ε <= 50] < 1.2 %.
COORD_MIN_COUNT = 200
#: Share of ε of the noisy count of rows outside the clipping box.
COORD_SHARE_OUTSIDE = Fraction(1, 40)
#: Shares of each coordinate's ε_j: spread, octave cell, refinement levels (together), sum.
COORD_SHARES = (Fraction(2, 5), Fraction(1, 5), Fraction(3, 20), Fraction(1, 4))
#: Sensitivity of :func:`spread_utility` (report-noisy-max noise DLap(2·4/ε_s)).
SPREAD_SENSITIVITY = 4
#: Clipping half-width in released spreads (``R_j = K·s_j``, about 6.7σ for Gaussian data: the
#: median pair distance is about 0.95σ; for the lattice {0..6} (s = 2) about 5 half-ranges).
COORD_K = 7.0
#: Subcells per refinement level, and the most levels the plan runs before it switches to the
#: FriendlyCore plan (a chosen cell at most ``COORD_BRANCH^COORD_LEVELS`` spreads wide).
COORD_BRANCH = 32
COORD_LEVELS = 6
#: Exponents ``k`` of the spread grid ``2^{k/4}``: 2⁻⁹⁰⁰ … 2⁸⁰⁰ (public). Bounded so that every
#: released spread gives a clip radius whose sum grid exponent lies in the sampler's [−1000, 900]:
#: with the grid down to 2⁻¹⁰⁷⁴, a column whose consecutive pairs were mostly tied (binary,
#: p = 0.2) got the bottom spread and the clipped sum raised ParameterError after the charge.
#: Data spreads below 2⁻⁹⁰⁰ get 2⁻⁹⁰⁰ (a wider clip); above 2⁸⁰⁰ the cell needs more than
#: COORD_LEVELS levels and the plan switches.
GRID_K = np.arange(-3600, 3201)
#: Base measure over octaves ``o`` (relative to the centre octave): ``∝ (1 + |o|)^{−PRIOR_POWER}``.
PRIOR_POWER = 1.5
#: The base measure is flat within this many octaves of its centre.
PRIOR_FLAT = 20

#: The smallest ε one step may get (the clipped sum's sampler, ``grid_laplace_integers``, takes
#: ε >= 2⁻⁴⁰): below, the coordinate plan is not among the plans (:func:`plan_possible`).
STEP_EPS_MIN = Fraction(1, 2**40)

_LAPLACE = SimpleNamespace(gaussian=False)  # the only plan attribute _noisy_clipped_release reads


def positive_grid() -> np.ndarray:
    """``2^{k/4}`` for ``k`` in :data:`GRID_K` (ascending; float64, public)."""
    return np.exp2(GRID_K / 4.0)


def log_prior(octaves: np.ndarray, centre: float) -> np.ndarray:
    """``ln((1 + |o − centre|)^{−PRIOR_POWER})`` for the (integer) octaves ``o`` of the candidates
    (unnormalized: a constant does not change an argmax)."""
    return -PRIOR_POWER * np.log1p(np.maximum(np.abs(octaves - centre) - PRIOR_FLAT, 0.0))


def spread_utility(counts: np.ndarray, n_hat: int) -> np.ndarray:
    """The spread step's utility: :func:`~.mean.untied_scale_utility` of the pair counts on
    :func:`positive_grid` (twice the interval utility of the median of the UNTIED consecutive
    differences, ``C_0`` = the pairs within the grid's bottom 2⁻⁹⁰⁰: tied). Sensitivity
    :data:`SPREAD_SENSITIVITY` = 4 (docs/proofs/mean.md §2b, §11). The plain median
    (``interval_utility``, t = ⌊(n̂ − 1)/2⌋) gave a column with more than half of its pairs tied
    (a binary or integer column with a point mass) the grid's bottom spread."""
    from .mean import untied_scale_utility

    return untied_scale_utility(counts, n_hat)


def _octave(v: np.ndarray) -> np.ndarray:
    """``⌊log2 |v|⌋`` (0 for v = 0), public post-processing of released values."""
    a = np.abs(np.asarray(v, dtype=np.float64))
    out = np.zeros(a.shape)
    nz = a > 0
    out[nz] = np.frexp(a[nz])[1] - 1
    return out


def noisy_max(utility: np.ndarray, offsets: np.ndarray, eps: Fraction, gen: np.random.Generator,
              sensitivity: int = 1) -> np.ndarray:
    """Report-noisy-max per row of ``utility`` (d, K) with public ``offsets`` (broadcast):
    ``argmax_k (u_k + a_k + ν_k)``, ``ν ~ DLap(2Δ/ε)`` i.i.d. (exact sampler), first maximum.
    ε-DP per row when each ``u_k`` moves by at most the integer ``Δ = sensitivity``."""
    nu = discrete_laplace(Fraction(2 * sensitivity) / eps, size=utility.shape, rng=gen)
    return np.argmax(utility + offsets + nu, axis=1)


def cell_utility(sorted_col: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``u([a, b)) = −max(0, 2·#{x < a} − n, 2·#{x >= b} − n)`` for the cells ``[lo_k, hi_k)`` of
    one sorted column: 0 exactly when the cell holds a median, else minus the rank distance.
    Adding a row moves ``n`` by 1 and each count by at most 1, so each of the three terms by at
    most 1: sensitivity 1 (docs/proofs/mean.md §11)."""
    n = sorted_col.size
    return cell_utility_of_counts(np.searchsorted(sorted_col, lo, side="left"),
                                  np.searchsorted(sorted_col, hi, side="left"), n)


def cell_utility_of_counts(below_lo: np.ndarray, below_hi: np.ndarray, n: int) -> np.ndarray:
    """:func:`cell_utility` from the counts ``#{x < lo_k}``, ``#{x < hi_k}`` and ``n`` (as a
    :class:`~privagg.engines.base.PointSource` returns them, :meth:`~privagg.engines.base.PointSource.below_counts`)."""
    above = n - below_hi
    return -np.maximum(0, np.maximum(2 * below_lo - n, 2 * above - n))


def pair_quantile_counts(x: np.ndarray, keys: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``C[j, k] = #{i : |x_{o(i+1), j} − x_{o(i), j}| <= grid_k}`` over the ``n − 1``
    consecutive pairs of the keyed row order ``o`` (mean.py's §2b order). Adding a row removes one
    pair and adds two: every count moves by at most 2. Translation invariant."""
    from .mean import _keyed_row_order

    if x.shape[0] < 2:
        return np.zeros((x.shape[1], grid.size), dtype=np.int64)
    return sorted_pair_quantile_counts(x[_keyed_row_order(x, keys)], grid)


def sorted_pair_quantile_counts(xs: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """:func:`pair_quantile_counts` of rows already in their order (the pairs ``xs[i], xs[i+1]``):
    a sum over pairs, so the counts of consecutive runs of the order add up (plus their boundary
    pairs; the Spark engine's sorted partitions)."""
    n, d = xs.shape
    out = np.zeros((d, grid.size), dtype=np.int64)
    if n < 2:
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.sort(np.abs(xs[1:] - xs[:-1]), axis=0)  # (n − 1, d), may be inf
    for j in range(d):  # over columns
        out[j] = np.searchsorted(diff[:, j], grid, side="right")
    return out


def octave_cells(e_min: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A public partition of the reals into cells ``(lo, hi, octave)``: ``[−2^{e_min}, 2^{e_min})``
    (octave ``e_min − 1``), then ``[2^e, 2^{e+1})`` and ``[−2^{e+1}, −2^e)`` for
    ``e = e_min … 1023`` (``2^1024`` is ∞). Exactly one cell holds each finite float, so exactly
    the cells holding a median have utility 0."""
    e = np.arange(e_min, 1024)
    a = np.ldexp(1.0, e)
    with np.errstate(over="ignore"):
        b = np.ldexp(1.0, e + 1)
    z = math.ldexp(1.0, e_min)
    lo = np.concatenate([[-z], a, -b])
    hi = np.concatenate([[z], b, -a])
    return lo, hi, np.concatenate([[e_min - 1], e, e]).astype(np.float64)


def levels_needed(width: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Refinement levels until a cell of ``width`` is at most ``spread`` wide (``COORD_BRANCH``
    subcells per level): a public function of released values (huge for width ∞)."""
    with np.errstate(all="ignore"):
        ratio = np.asarray(width, np.float64) / np.asarray(spread, np.float64)
        lv = np.ceil(np.log(np.maximum(ratio, 1.0)) / math.log(COORD_BRANCH))
    return np.where(np.isfinite(lv), lv, 10**6).astype(np.int64)


def coordinate_shares(epsilon: Fraction, d: int) -> tuple[Fraction, Fraction, tuple[Fraction, ...]]:
    """``(ε_n, ε_out, per-coordinate step budgets)`` (spread, octave cell, all refinement levels
    together, clipped sum); ``ε_n + ε_out + d·Σ steps = ε`` exactly."""
    from .mean import _SHARE_COUNT

    eps_n = epsilon * _SHARE_COUNT
    eps_out = epsilon * COORD_SHARE_OUTSIDE
    per = (epsilon - eps_n - eps_out) / d
    return eps_n, eps_out, tuple(per * s for s in COORD_SHARES)


def switch_epsilon(epsilon: Fraction) -> Fraction:
    """The ε left for the FriendlyCore plan when the coordinate plan switches (after the count,
    the spreads and the octave cells of all d coordinates; independent of d)."""
    eps_n, eps_out, _ = coordinate_shares(epsilon, 1)
    return epsilon - eps_n - (epsilon - eps_n - eps_out) * (COORD_SHARES[0] + COORD_SHARES[1])


def smallest_step_epsilon(epsilon: Fraction) -> Fraction:
    """The smallest ε of any step of the plan at ``d = COORD_DMAX`` (one of ``COORD_LEVELS``
    refinement levels, or a smaller share): a function of ε only (public)."""
    _, eps_out, shares = coordinate_shares(epsilon, max(COORD_DMAX, 1))
    return min(eps_out, *shares[:2], shares[2] / max(COORD_LEVELS, 1), shares[3])


def plan_runs(n_hat: int, epsilon: Fraction, d: int) -> bool:
    """Whether the released ``n̂`` selects the coordinate plan (public: n̂, ε, d only):
    ``d <= COORD_DMAX``, ``n̂·ε < COORD_SAMPLE·d`` and, for ``d > COORD_NARROW_D``,
    ``COORD_WIDE_MIN·d <= n̂·ε < COORD_WIDE_MAX·d`` (outside it the FriendlyCore plans, not ⊥)."""
    n_eps = n_hat * epsilon
    return (d <= COORD_DMAX and n_eps < COORD_SAMPLE * d
            and (d <= COORD_NARROW_D or COORD_WIDE_MIN * d <= n_eps < COORD_WIDE_MAX * d))


def plan_possible(epsilon: Fraction) -> bool:
    """Whether every step of the plan gets at least :data:`STEP_EPS_MIN` (public: ε only). Without
    it a tiny ε (about 2⁻³⁸ … 2⁻⁵⁸, where ``n̂ >= COORD_MIN·d/ε`` still happens through the
    count's noise) made the clipped sum raise ParameterError after the charge."""
    return smallest_step_epsilon(epsilon) >= STEP_EPS_MIN


def coordinate_mean(x: Any, n_hat: int, epsilon: Fraction, gen: np.random.Generator
                    ) -> dict[str, Any] | None:
    """Steps 1–4 of the module docstring on the finite rows ``x`` (n, d) — an array or a
    :class:`~privagg.engines.base.PointSource` (every data access is one of its methods, so an
    engine returns the same integers and the release has the same law) — given the released
    ``n̂ >= 1``. Returns the released values (mean, center, spreads, radii, outside count, and the
    public noise description for the confidence intervals), or None after steps 1–2 when a
    coordinate needs more than :data:`COORD_LEVELS` refinement levels (the caller then switches
    to the FriendlyCore plan with :func:`switch_epsilon`)."""
    from .mean import (_finite, _grid_up, _noisy_clipped_release, _source, _sum_exponent,
                       row_keys)

    source = _source(x)
    n, d = source.count(), source.d
    _, eps_out, (e_s, e_o, e_l, e_sum) = coordinate_shares(epsilon, d)
    # 1. spread: the median of the untied |x_a − x_b| over consecutive pairs (sensitivity 4)
    grid_p = positive_grid()
    counts = source.pair_quantile_counts(row_keys(d, gen), grid_p)
    util = spread_utility(counts, n_hat)  # the cell holding the untied median (§11)
    off = float(2 * SPREAD_SENSITIVITY / e_s) * log_prior(np.floor(GRID_K / 4.0), 0.0)
    spread = grid_p[noisy_max(util, off[None, :], e_s, gen, sensitivity=SPREAD_SENSITIVITY)]
    # 2. octave cell (cell utility, prior centred at the spread's octave)
    e_min = (_octave(spread) + 1).astype(np.int64)  # cells at least about twice the spread wide
    cells = [octave_cells(int(e)) for e in e_min.tolist()]
    below = source.below_counts([np.concatenate([c[0], c[1]]) for c in cells])  # one pass, d columns
    util, off = [], []
    for j in range(d):  # over columns
        lo, hi, oct_ = cells[j]
        util.append(cell_utility_of_counts(below[j][: lo.size], below[j][lo.size :], n))
        off.append(float(2 / e_o) * log_prior(oct_, float(e_min[j] - 1)))
    width = max(u.size for u in util)
    util = np.stack([np.pad(u, (0, width - u.size), constant_values=-(10**18)) for u in util])
    off = np.stack([np.pad(o, (0, width - o.size)) for o in off])
    pick = noisy_max(util, off, e_o, gen)
    a = np.array([c[0][k] for c, k in zip(cells, pick.tolist())])  # over columns
    b = np.array([c[1][k] for c, k in zip(cells, pick.tolist())])
    with np.errstate(over="ignore"):
        levels = levels_needed(b - a, spread)
    if int(levels.max()) > COORD_LEVELS:
        return None
    # 3. refinement: COORD_BRANCH subcells (and one more on each side) per level
    steps = np.arange(-1, COORD_BRANCH + 1, dtype=np.float64)
    for j in range(d):  # over columns
        e_lv = e_l / int(levels[j]) if levels[j] else e_l
        for _ in range(int(levels[j])):  # at most COORD_LEVELS
            w = (b[j] - a[j]) / COORD_BRANCH
            sub_lo = a[j] + steps[:-1] * w
            sub_hi = a[j] + steps[1:] * w
            edges = [np.concatenate([sub_lo, sub_hi]) if i == j else np.zeros(0) for i in range(d)]
            bl = source.below_counts(edges)[j]
            util_j = cell_utility_of_counts(bl[: sub_lo.size], bl[sub_lo.size :], n)
            k = noisy_max(util_j[None, :], np.zeros(1), e_lv, gen)[0]
            a[j], b[j] = sub_lo[k], sub_hi[k]
    center = _finite(a + (b - a) / 2)
    # 4. clipped sums, one coordinate at a time (discrete Laplace, ε-DP each)
    radii = np.array([_grid_up(COORD_K * s) for s in spread.tolist()])
    mean = np.empty(d)
    params, steps_g = np.empty(d), np.empty(d)
    for j in range(d):  # over columns
        rel = _noisy_clipped_release(source.column(j), center[j : j + 1], float(radii[j]), e_sum,
                                     _LAPLACE, gen)
        mean[j] = _finite(center[j] + rel.values[0] / n_hat)
        params[j], steps_g[j] = float(rel.noise_grid), rel.step
    # noisy count of the rows beyond the box (any coordinate): sensitivity 1
    out_rows = source.outside_count(center, radii)
    outside = out_rows + int(discrete_laplace(1 / eps_out, rng=gen))
    q = math.exp(-float(eps_out))
    h = np.ldexp(1.0, [_sum_exponent(float(r)) for r in radii])
    return {"mean": mean, "center": center, "spread": spread, "radii": radii,
            "outside": float(outside), "outside_sd": math.sqrt(2.0 * q) / (1.0 - q),
            "noise": ("laplace-coordinate", params, steps_g, None,
                      h / 2.0 + 8.0 * 2.0**-53 * radii, steps_g)}
