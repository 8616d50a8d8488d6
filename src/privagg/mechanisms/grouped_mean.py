"""``friendly_means``: the unbounded mean of every group at once (1-D FriendlyCore per group).

No clamping bounds. Every group runs the 1-D version of :func:`privagg.private_mean` on its own
rows, with the public per-group plan :func:`friendly_means_plan`, and all groups run together in
numpy passes (never a Python loop per group or per row; the only loops are over binary-search
rounds and over the few distinct noise scales). Proof: ``docs/proofs/aggregate_mean.md``.

Per group ``g`` (``n_g`` rows), with the shares of :func:`~privagg.mechanisms.mean.mean_plan`
(``calibration="laplace"``, small-sample shares, pure-ε parts, the only δ is the core-size tail):

1. **Count.** ``n̂_g = n_g + DLap(1/ε_n)`` (or the query's released ``count()`` pair's
   ``p̃_g``: §8.1); ⊥ when ``n̂_g < 1``. **Plan.** The group's shares
   for steps 2–5 are those of the plan :meth:`FriendlyMeansPlan.choose` picks from ``n̂_g``
   (public; adaptive composition): the more rows, the smaller the share of the radius selection
   and locate (only what the core needs to pass, ``n̂ >= m_locate_i``) and the larger the final
   sum's. ⊥ when ``n̂ − t_n`` is below what the radius selection needs (``m_select``).
2. **Subsample.** Poisson, public rate ``min(1, m_locate/n̂_g)``, ``m_locate`` a public function of
   the plan (:func:`friendly_means_plan`).
3. **Radius.** Report-noisy-max (``DLap(4/ε_sel)``) over the public grid ``r_j = 2^{j/4}``,
   ``j = −240 … 240``, of the interval utility ``−max(0, t − C_j, C_{j−1} − t)``,
   ``t = ⌊(m_pub − 1)/2⌋`` (``m_pub = min(n̂ − t_T, m_locate)``; ``mean.pair_utility``),
   ``C_j`` the number of consecutive pairs (in a keyed random order) within ``r_j``; radius
   ``r = 3·r_ĵ`` (docs/proofs/mean.md §4b), a G × L matrix for all groups.
4. **Locate.** BasicFilter (α = 0) with the *exact* predicate ``|a − b| <= r`` (real numbers; its
   friend set is an interval of the sorted values: counts by a vectorized binary search with an
   exact boundary test), noisy core size ``m̂``, ``m_low = m̂ − k`` (a core with ``m_low < 10`` is ⊥: step 5 then runs around 0 when
   ``n̂ − t_T >= 6K``, else the group is ⊥); the core
   average (relative to the least core value, summed exactly on a grid) released on the grid
   with discrete Laplace noise of sensitivity ``2r/m_low`` plus rounding.
5. **Estimate.** A clipping range per side of ``ĉ``: for the rows above ``ĉ`` and, separately,
   below it (parallel composition: a row is on one side only), report-noisy-max (``DLap(2/ε_q)``)
   over the public edges ``U·2^{k/4}`` (``U = grid_up(r + b)``, ``b`` the public locate-noise
   bound) of ``−T_j − λ·level_j`` (``T_j`` the side's rows beyond edge ``j``, ``λ``:
   :func:`side_penalty`) gives ``R_hi`` and ``R_lo``; the sum's center ``c = ĉ + s`` moves toward
   the longer side by the public :func:`recentre_shift` (up to the range's midpoint); the clipped
   sum ``Σ clip(x − c, −(R_lo + s), R_hi − s)`` (the same range) of *all* the group's rows, summed
   exactly on a grid, released with discrete Laplace noise of sensitivity
   ``max(R_lo + s, R_hi − s)``; ``mean = c + S/n̂``.
   Before the clipping range, the **spread floor** (§1.9, ε_sum/5 of the sum's share):
   report-noisy-max over ``U·2^k``, ``k = 0 … 120``, of the median of the rows beyond ``U``
   (capped :func:`floor_cap` rows below ``n̂``) lifts ``U`` to the rows' own scale when the core
   is one atom of tied data (a 0/1 column); a group whose **core is ⊥** runs this step 5 around
   the public center 0 from ``U = 2⁻⁶⁰`` instead of releasing ⊥ (§1.8, ``extra["core_fallback"]``).

Groups whose ``n̂`` is below :data:`SMALL_SWITCH` times what plan 0's radius selection needs
(:meth:`FriendlyMeansPlan.small`) run the small-group plan instead (:func:`_small_means`,
docs/proofs/aggregate_mean.md §8: a second count, a point cell or a subcell of an octave cell, a
centred spread (both on monotone mass utilities) and a clipping range per side selected on the pooled
rows of the small groups — the cell refined and a second spread where the first was mostly the
cell center's offset, step 2b — then each group's clipped sum; the larger of them in two passes, the
second with a scale per group and a pooled range in units of it, §8.2); ⊥ there only when the
combined count is below ``⌈1/ε_g⌉``.

User level and neighbours: :func:`friendly_means_plan` (group privacy over ``max_rows`` rows,
composition over ``max_groups`` groups, a replacement = a removal plus an addition).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from .._validate import fail, quiet_numerics
from ..friendlycore.filter import keep_probabilities
from ..friendlycore.radius import _MANTISSA, _SQRT2_F
from ..noise.grid import GRID_BITS
from ..noise.samplers import bernoulli_rational, discrete_laplace
from .grouped import Contribution, GroupedValues, MetricResult
from .mean import (
    BETA_LOCATE,
    FLOOR_BETA,
    FLOOR_OCTAVES,
    M_MIN,
    QUANTILE_GRID,
    TOP_FACTOR,
    MeanPlan,
    _dlap_two_sided,
    _finite,
    _float_down,
    _float_up,
    _frac,
    floor_cap,
    floor_utility,
    mean_plan,
    noise_half_width,
    pair_factor,
    pair_utility,
    row_hash,
)

__all__ = ["FLOOR_BETA", "FLOOR_OCTAVES", "FriendlyMeansPlan", "RADIUS_EXPONENTS", "SmallBudget",
           "floor_cap", "floor_utility",
           "friend_counts_1d", "friendly_means", "friendly_means_plan", "side_utilities",
           "small_budget", "spread_floor"]

#: Radius grid ``r_j = 2^{j/4}`` for these ``j`` (public): 2⁻⁶⁰ … 2⁶⁰, wider than the
#: d-dimensional grid (2⁻¹⁰ … 2⁴⁰) so that groups of very different scales (1e-3 and 1e6 in one
#: table, or a column in nanoseconds) each get a radius in their own units.
RADIUS_EXPONENTS = np.arange(-240, 241)
#: ``m_locate = max(M_LOCATE_MIN, LOCATE_FACTOR·need)``, ``need = M_MIN + k`` (public).
M_LOCATE_MIN = 1000
LOCATE_FACTOR = 4
#: The count's share of ε_g (public): ε_g/40, as before ``private_mean``'s went to ε/20
#: (docs/proofs/mean.md §13: there measured on 0/1 columns; not re-measured per group, where the
#: count can also be the query's released ``count()``, §8.1).
SHARE_COUNT = Fraction(1, 40)
#: Clipped-sum and core terms are rounded to ``2^(E − TERM_BITS)`` for a radius below ``2^E``:
#: ``|term| <= 2^30``, so the int64 sum of a group is exact for fewer than ``2^33`` rows.
TERM_BITS = 30
#: The noise interval ``[low, high]`` holds with probability >= 1 − BETA (per group).
BETA = 0.05
_U = 2.0**-53
_SAFETY = 1.0 + 2.0**-40
#: Share of the per-group ε given to the per-side clipping-range selection (taken from the final
#: sum; mean.py gives ε/10). Measured: 1/3 or 1/8 are worse on every shape (docs/proofs/aggregate_mean.md §1.5, §5).
SHARE_QUANTILE = Fraction(1, 5)
#: The side penalty per quarter-octave, in units of the selection noise scale ``2/ε_q``
#: (measured best of 0.25, 0.5, 1 over five shapes).
SIDE_PENALTY = 0.5
_LEVEL_LOW = -QUANTILE_GRID  # quarter-octave levels of |x − ĉ|/U below U: −24 … 0
#: The public grid of locate scales ``q``: plan ``i`` gives the radius selection ``q_i·ε_g/5`` and
#: the locate step the end-to-end target ``(q_i·ε_g/3, δ_1)`` (``δ_1 <= δ_g``: the locate δ of
#: plan 0); the rest goes to the final sum.
#: ``q = 1`` is the small-sample plan of ``mean.py``.
LOCATE_SCALES = tuple(Fraction(1, 2**i) for i in range(8))
#: Plan ``i > 0`` is used when ``n̂ >= LOCATE_MARGIN·m_locate_i`` (:meth:`FriendlyMeansPlan.choose`):
#: the subsample is then the full ``m_locate_i = 4·need_i`` (measured: ``n̂ >= 2·need_i`` gives
#: 3–10 % ⊥ at n = 10⁴, ε = 1/7; ``3·need_i`` is no better than this rule).
LOCATE_MARGIN = 1
#: The radius selection needs ``m_pub >= RADIUS_ROWS·ln(L/RADIUS_BETA)/ε_sel`` rows (``L`` radius
#: candidates): below it the noisy maximum too often lands on one of the hundreds of radii beyond
#: the data's spread (each with utility ``−⌊(m − 1)/2⌋``), the core is then every row and the
#: center's noise ``2r/m_low`` is astronomic (measured up to 10¹⁸ SE at ``n̂ ≈ need``). A public
#: rule from ``n̂``: ⊥ where ``n̂ − t_n`` is below it (docs/proofs/aggregate_mean.md §1.7, §5).
RADIUS_ROWS = 8
RADIUS_BETA = 1e-3
#: The spread floor of step 5 (docs/proofs/aggregate_mean.md §1.9): candidates ``U·2^k``,
#: ``k = 0 … FLOOR_OCTAVES`` (from the 2⁻⁶⁰ of a fallback center up to 2⁶⁰), the cap
#: :func:`~privagg.mechanisms.mean.floor_cap` and utility ``floor_utility`` of ``mean.py``.
#: Share of the final sum's ε given to the spread floor (public; §1.9: at 1/10 the 0/1 groups of
#: 5,000 rows of a four-metric query, ε = 1, still released their majority value).
SHARE_FLOOR = Fraction(1, 5)
#: The base ``U`` of a group whose core is ⊥ (too few agreeing rows: no majority atom or cluster):
#: its step 5 runs around the public center 0 from ``U = 2⁻⁶⁰`` (§1.8; the floor lifts it to the
#: rows' own scale) instead of releasing ⊥.
FALLBACK_UNIT = 2.0**-60
#: ... only when ``n̂ − t_T >= FALLBACK_CAPS·K`` (``K``: :func:`floor_cap`; public), so that the
#: floor can find the rows' scale even with 65 % of them at 0; below it the group is ⊥ as before
#: (a fallback whose floor fails would release a mean of 0).
FALLBACK_CAPS = 6
#: The radius utility's target is ``⌊(m_pub − 1)/2⌋`` with ``m_pub = min(n̂ − t, m_locate)``,
#: ``t`` the count noise's ``1 − TARGET_BETA`` tail (public; measured: 10⁻³ ⊥s most bimodal
#: groups near the threshold, the bare ``n̂`` lets the plateau of too-large radii win).
TARGET_BETA = 0.05

# ---------------------------------------------------------------- the small-group plan (§8)
#: Groups whose released ``n̂`` is below :data:`SMALL_SWITCH` times what plan 0's radius selection
#: needs (``n̂ − t_n < SMALL_SWITCH·m_select_0``, :meth:`FriendlyMeansPlan.small`) run the
#: small-group plan (docs/proofs/aggregate_mean.md §8): a second count, one shared location
#: (a point-cell partition's cell, centred spread, a clipping range per side) selected on the pooled rows of all
#: small groups, then each group's clipped sum. Shares of ``ε_r = ε'_g − ε_n`` (public):
#: the second count gets SMALL_COUNT_SHARE.
SMALL_COUNT_SHARE = Fraction(1, 6)
#: Each of the pooled selections (cell, spread; the clip range gets half) gets
#: ``min(SMALL_STEP_CAP·ε_r, SMALL_STEP_ROWS/N_low)``, ``N_low`` a public lower bound on the
#: pooled rows (:func:`small_budget`): ``N·ε >= 80`` keeps a plateau of utility ``−0.3·N``
#: (a 0/1 column's spread candidates below 1 at 30 % ones) ``e^{-12}`` as likely as the best
#: (measured: 24 ⊥-like spreads on half of such releases); the rest goes to the clipped sums.
SMALL_STEP_CAP = Fraction(1, 5)
SMALL_STEP_ROWS = 80
#: The clipping range per side: ``R = K·s`` for these multiples of the released spread (§8.2's
#: second pass).
SIDE_KS = tuple(2.0 ** (i / 2) for i in range(-6, 9))
#: The pooled step's multiples (§8 step 3): the same ladder down to ``2⁻⁷``, so that a side with
#: no rows beyond its center (0/1 data centred on an atom) takes a radius below ``s/8`` in most
#: runs (76 of 100 seeds; never with SIDE_KS) instead of about ``s/3`` (docs/utility/aggregate.md,
#: 2026-12-06 ninth stop; the second pass keeps SIDE_KS: its deviation range at ``ε_sum/20`` lost
#: with the longer ladder).
SIDE_KS_POOLED = tuple(2.0 ** (i / 2) for i in range(-14, 9))
#: Public cost of a side multiple K in rows: ``SIDE_COST·K·G_s/ε_sum`` (``G_s`` small groups).
#: Measured (issue 13 item 4 follow-up, 60 runs on wine, penguins-species, sf-temps, cars,
#: diabetes, airports at the mean's ε = 2/9): 1.4 beats 0.35 and 0.7 on 5 of 6 tables, 2.8
#: is better on two and worse on four (docs/utility/aggregate.md, 2026-12-02).
SIDE_COST = 1.4
#: ⊥ where the combined count ``ñ`` is below ``SMALL_MIN_ROWS/ε_g`` (public).
SMALL_MIN_ROWS = 1
#: A small group with ``ñ_g·ε_sum >= TWO_PASS_ROWS`` (public) spends its clipped sum's ε in two
#: passes (§8.2): a first mean around the pooled center at ``TWO_PASS_FIRST·ε_sum``, a pooled
#: clipping range of the rows' deviations from their group's first mean at ``TWO_PASS_CLIP·ε_sum``
#: (only if those groups pool ``Σ ñ_g·TWO_PASS_CLIP·ε_sum >= SMALL_STEP_ROWS/2`` rows, as the
#: one-pass range needs), and the final clipped sum around the group's own center at the rest;
#: the other small groups spend all of ``ε_sum`` on one sum around the pooled center. Measured:
#: docs/utility/aggregate.md (2026-12-06, fourth stop).
TWO_PASS_ROWS = 200
TWO_PASS_FIRST = Fraction(1, 10)
TWO_PASS_CLIP = Fraction(1, 20)
#: The second pass's ladder unit is ``min(s, TWO_PASS_UNIT·R)`` (``s`` the pooled spread, ``R``
#: the first pass's pooled radius; public): its radii then stop at ``16·R/4 = 4R``, twice the
#: largest deviation between two points of the first pass's range. Where no row lies beyond a
#: radius the base measure alone decides, and at a few groups it is flat (0.4 nats per unit of
#: K at five groups): with the unit ``s`` the ladder reached 16·s, and 0/1 groups drew ranges 2–5
#: times their width (docs/utility/aggregate.md, 2026-12-06 ninth stop).
TWO_PASS_UNIT = 0.25
#: §8.2 b0: a scale per two-pass group at ``TWO_PASS_SCALE·ε_sum`` (taken from the second pass):
#: report-noisy-max of the median-distance mass utility of ``|x − f_g|`` over the public
#: candidates ``unit·2^k``, ``k = −SCALE_OCTAVES … SCALE_OCTAVES`` (``unit`` as above), with the
#: public offsets ``−SCALE_PENALTY·(4/ε_s)·|k|`` (a far pick needs that much more evidence); a
#: pick within ``SCALE_DEAD_ZONE`` octaves of the median pick of the two-pass groups takes the
#: median pick (post-processing). The pooled deviation range is then chosen in units of each
#: group's scale, so groups whose spreads differ by orders of magnitude (one column in different
#: currencies; a 0/1 group among groups around 50) are not clipped to the range of the others (a
#: group on a much smaller scale still carries the noise of its first pass on the pooled range,
#: §8.2; docs/utility/aggregate.md, 2026-12-06 eleventh stop).
TWO_PASS_SCALE = Fraction(1, 10)
#: ... only for the two-pass groups with ``ñ_g·TWO_PASS_SCALE·ε_sum >= SCALE_ROWS`` (public): with
#: fewer rows the noise of the step beats the evidence of a median distance (a 250-row group
#: drew 2^15 times its spread at ε = 1); the others take the median pick and keep
#: ``TWO_PASS_SCALE·ε_sum`` for their second pass.
SCALE_ROWS = 40
SCALE_OCTAVES = 20
SCALE_PENALTY = 0.25
SCALE_DEAD_ZONE = 2
#: A group runs the small-group plan while ``n̂ − t_n < SMALL_SWITCH·m_select_0`` (public): plan 0
#: of the FriendlyCore plan spends about 4/5 of a group's ε on its count, radius, locate and
#: range steps, so just above its own floor (``SMALL_SWITCH = 1``, until the eleventh stop of
#: 2026-12-06) it was 2–7× privagg's bounded mean (or ⊥) on every law measured and released a
#: 0/1 group with 20 % ones as its majority value (the spread floor needs about ``28/ε_f``
#: minority rows); measured in docs/utility/aggregate.md (same stop).
SMALL_SWITCH = 5


@dataclass(frozen=True)
class FriendlyMeansPlan:
    """Every public scale of :func:`friendly_means` (no data).

    Attributes
    ----------
    group : MeanPlan
        Plan 0 (``mean_plan(ε_g, δ_g, calibration="laplace", select_radius=True, small=True)``,
        ε_g/5 moved to the range selection); ``(ε'_g, δ'_g)``, each group's add/remove guarantee,
        is the largest ``privacy_loss`` of :attr:`plans`.
    steps, max_steps : int
        ``N = ℓ0·ℓ∞`` (``2ℓ0ℓ∞`` for replace): add/remove row steps one neighbour makes in all
        groups together; ``K = ℓ∞`` (``2ℓ∞``): at most that many in one group.
    epsilon_group, delta_group : Fraction
        The per-group target ``ε_g = ε/N``, ``δ_g = δ/(N·e^{(K − 1)ε_g})`` (rounded down).
    epsilon, delta : Fraction
        The guarantee over all groups: ``ε = N·ε'_g``, ``δ = N·e^{(K − 1)ε'_g}·δ'_g`` (δ rounded
        up), at most the given (ε, δ).
    m_locate : int
        Expected locate subsample size per group (plan 0).
    need : int
        ``M_MIN + k``: a noisy core size below it is ⊥ (plan 0).
    plans : tuple of MeanPlan
        One per locate scale ``q_i`` of :data:`LOCATE_SCALES` (``plans[0] = group``): the same
        count share, radius selection ``q_i·ε_g/5``, locate target ``(q_i·ε_g/3, δ_1)``, range
        selection ``ε_g/5``, the rest to the final sum. A group uses the plan
        :meth:`choose` picks from its released ``n̂``; ``epsilon``/``delta`` bound every plan.
    m_locates, needs, m_selects : tuple of int
        ``m_locate``, ``need`` and ``m_select`` (the rows the radius selection needs:
        :data:`RADIUS_ROWS`) of each plan; ``m_locate_i >= m_select_i``.
    count_tail, target_tail : int
        ``t_n = ⌈ln(1/(2·RADIUS_BETA))/ε_n⌉``: ``n̂ − t_n <= n`` with probability about
        ``1 − RADIUS_BETA``; the rules read the public lower bound ``n̂ − t_n``. ``target_tail``:
        the same with :data:`TARGET_BETA`, for the radius utility's target.
    """

    group: MeanPlan
    steps: int
    max_steps: int
    epsilon_group: Fraction
    delta_group: Fraction
    epsilon: Fraction
    delta: Fraction
    m_locate: int
    need: int
    plans: tuple = ()
    m_locates: tuple = ()
    needs: tuple = ()
    m_selects: tuple = ()
    count_tail: int = 0
    target_tail: int = 0
    small_floor: int = 0

    def small(self, n_hat: np.ndarray) -> np.ndarray:
        """Whether each group runs the small-group plan (§8), a public function of its released
        ``n̂`` alone: ``n̂ − t_n < SMALL_SWITCH·m_select_0`` (below ``m_select_0`` plan 0's radius
        selection would not run: until issue 13 item 4 such groups were ⊥; up to
        :data:`SMALL_SWITCH` times it plan 0 runs but spends most of the group's ε before its
        sum), ``n̂ < 1`` included (its ⊥ rule reads the combined count ``ñ``, far less noisy than
        ``n̂``)."""
        n_hat = np.asarray(n_hat)
        return n_hat - self.count_tail < SMALL_SWITCH * self.m_selects[0]

    def choose(self, n_hat: np.ndarray) -> np.ndarray:
        """The plan index of each group, a public function of its released ``n̂`` alone: the
        largest ``i`` (least locate share) with ``n̂ >= LOCATE_MARGIN·m_locate_i`` and
        ``n̂ − t_n >= m_select_i``, else 0."""
        n_hat = np.asarray(n_hat)
        idx = np.zeros(n_hat.shape, dtype=np.int64)
        for i in range(1, len(self.plans)):
            fits = ((n_hat >= LOCATE_MARGIN * self.m_locates[i])
                    & (n_hat - self.count_tail >= self.m_selects[i]))
            idx = np.where(fits, i, idx)
        return idx


def _exp_up(x: Fraction) -> Fraction:
    """A rational ``>= e^x`` (60 digits, rounded up)."""
    with mpmath.workdps(60):
        v = mpmath.exp(mpmath.mpf(x.numerator) / x.denominator)
        f = Fraction(mpmath.nstr(v * (1 + mpmath.mpf(10) ** -50), 55))
    return f


def _check_contribution(where: str, c: Any) -> Contribution:
    if not isinstance(c, Contribution):
        raise fail(where, "contribution", "a Contribution", type(c).__name__)
    for name in ("max_groups", "max_rows"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= 10**6:
            raise fail(where, f"contribution.{name}", "an integer in [1, 10**6]", v)
    return c


def friendly_means_plan(epsilon: Any, delta: Any, contribution: Contribution = Contribution(),
                        *, where: str = "friendly_means") -> FriendlyMeansPlan:
    """Validate the public parameters and compute the plan of :func:`friendly_means`.

    Raises ParameterError (public inputs only) for ε below 2⁻⁴⁰ after the division by ``N``,
    δ = 0 or a per-group δ below 2⁻⁹⁰⁰, or a bad ``contribution``: call it before charging a
    ledger; :func:`friendly_means` then cannot fail.
    """
    c = _check_contribution(where, contribution)
    if isinstance(delta, bool) or not isinstance(delta, (int, float, Fraction, np.floating)) \
            or not 0 < delta < 1:
        raise fail(where, "delta", "a number in (0, 1): the unbounded mean needs delta > 0", delta)
    eps, dlt = _frac(epsilon), _frac(delta)
    mult = 2 if c.replace else 1
    n_steps, k_max = c.max_groups * c.max_rows * mult, c.max_rows * mult
    eps_g = eps / n_steps
    dlt_g = dlt / (n_steps * _exp_up((k_max - 1) * eps_g))
    mean_plan(eps_g, dlt_g, calibration="laplace", select_radius=True, small=True,
              where=where, count_share=SHARE_COUNT)  # validates the per-group (ε_g, δ_g) floors
    plans = tuple(_scaled_plan(eps_g, dlt_g, q) for q in LOCATE_SCALES)
    e_max = max(Fraction(p.privacy_loss.epsilon) for p in plans)
    d_max = max(Fraction(p.privacy_loss.delta) for p in plans)
    e_out = n_steps * e_max
    d_out = n_steps * _exp_up((k_max - 1) * e_max) * d_max
    needs = tuple(M_MIN + p.core_count_shift for p in plans)
    m_sels = tuple(_select_rows(p.eps_select) for p in plans)
    m_locs = tuple(max(M_LOCATE_MIN, LOCATE_FACTOR * nd, ms) for nd, ms in zip(needs, m_sels))
    tail = math.ceil(math.log(1 / (2 * RADIUS_BETA)) / float(plans[0].eps_count))
    t_tail = math.ceil(math.log(1 / (2 * TARGET_BETA)) / float(plans[0].eps_count))
    floor = math.ceil(SMALL_MIN_ROWS / eps_g)
    return FriendlyMeansPlan(plans[0], n_steps, k_max, eps_g, dlt_g, e_out, d_out,
                             m_locs[0], needs[0], plans, m_locs, needs, m_sels, tail, t_tail,
                             floor)


def _select_rows(eps_select: Fraction) -> int:
    """``⌈RADIUS_ROWS·ln(L/RADIUS_BETA)/ε_sel⌉`` (public; :data:`RADIUS_ROWS`)."""
    lg = math.log(RADIUS_EXPONENTS.size / RADIUS_BETA)
    return math.ceil(RADIUS_ROWS * lg / float(eps_select))


def _scaled_plan(eps_g: Fraction, dlt_g: Fraction, q: Fraction) -> MeanPlan:
    """The per-group plan with locate scale ``q`` (docs/proofs/aggregate_mean.md §1.7): count
    ``ε_g/40``, radius selection and locate of ``mean_plan(q·ε_g, δ_1, small=True)`` (selection
    ``q·ε_g/5``; locate target ``(q·ε_g/3, δ_1)`` through the conversion theorem, ``δ_1 <= δ_g``
    the locate δ of the q = 1 plan), range selection
    ``ε_g·SHARE_QUANTILE``, final sum ``ε_g`` minus the others (so ``ε <= ε_g``, ``δ <= δ_g``)."""
    base = mean_plan(eps_g, dlt_g, calibration="laplace", select_radius=True, small=True,
                     count_share=SHARE_COUNT)
    # the locate δ target of q < 1 is the δ the q = 1 plan spends (<= δ_g), so no plan spends
    # more δ than the q = 1 plan (the reported δ is the same as with one plan)
    loc = base if q == 1 else mean_plan(eps_g * q, base.delta_locate, calibration="laplace",
                                        select_radius=True, small=True, count_share=SHARE_COUNT)
    q_share = eps_g * SHARE_QUANTILE
    eps_sum = eps_g - base.eps_count - loc.eps_select - loc.eps_locate - q_share
    return dataclasses.replace(
        loc, eps_count=base.eps_count, eps_quantile=q_share, eps_sum=eps_sum,
        eps_floor=Fraction(0))  # this plan's floor is SHARE_FLOOR of its eps_sum (§1.9)


class _Draws:
    """All randomness of :func:`friendly_means`, by name (tests substitute recorded draws)."""

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen = gen

    def dlap(self, name: str, scale: Fraction, shape: Any) -> np.ndarray:
        return discrete_laplace(scale, size=shape, rng=self.gen)

    def dlap_by(self, name: str, scales: tuple, which: np.ndarray, width: int | None = None
                ) -> np.ndarray:
        """``DLap(scales[which_g])`` per group (``width`` draws per group when given): one
        sampler call per distinct plan index (public: a function of the released ``n̂``)."""
        shape = which.shape + (() if width is None else (width,))
        out = np.zeros(shape, dtype=np.int64)
        for k in np.unique(which):
            idx = np.flatnonzero(which == k)
            out[idx] = discrete_laplace(scales[int(k)], size=(idx.size,) + shape[1:],
                                        rng=self.gen)
        return out

    def dlap_scaled(self, name: str, sens: np.ndarray, eps: tuple,
                    which: np.ndarray) -> np.ndarray:
        """``DLap(sens_g/eps[which_g])`` per entry: one exact sampler call per distinct pair
        (integer ``sens``, plan index), public functions of public values with few distinct
        values (:func:`_quantize_up`)."""
        out = np.zeros(sens.shape, dtype=np.int64)
        key = sens * len(eps) + which
        for kk in np.unique(key):
            idx = np.flatnonzero(key == kk)
            s, k = divmod(int(kk), len(eps))
            out[idx] = discrete_laplace(Fraction(s) / eps[k], size=idx.size, rng=self.gen)
        return out

    def em(self, name: str, utility: np.ndarray, mu: np.ndarray, eps: Fraction) -> np.ndarray:
        """:func:`~privagg.mechanisms.mean_small.exponential_mechanism` (exact; one row per
        selection, never one per group)."""
        from .mean_small import exponential_mechanism

        return exponential_mechanism(utility, mu, eps, self.gen)

    def uniform(self, name: str, groups: np.ndarray) -> np.ndarray:
        """One uniform per entry (``groups``: the group of each entry, sorted)."""
        return self.gen.random(groups.size)

    def keys(self, name: str) -> np.ndarray:
        return self.gen.integers(0, 2**63, size=(2, 1), dtype=np.uint64) * np.uint64(2) + np.uint64(1)

    def entropy(self, name: str) -> int | None:
        """The seed of the task streams of an engine that draws where the rows live
        (:meth:`~privagg.mechanisms.grouped.KeptRows.subsample` on Spark): ``None`` with the
        CSPRNG (each task then draws from fresh OS entropy), else a 63-bit integer drawn from
        the seeded generator (tests, simulation)."""
        from ..noise.rng import SecureGenerator

        if isinstance(self.gen, SecureGenerator):
            return None
        return int(self.gen.integers(0, 2**63))

    def bernoulli(self, name: str, num: np.ndarray, den: np.ndarray,
                  groups: np.ndarray) -> np.ndarray:
        return bernoulli_rational(num, den, rng=self.gen)


def _quantize_up(v: np.ndarray) -> np.ndarray:
    """``ceil(v)`` rounded up to 5 significant bits (int64, >= 1): at most 16 distinct values
    per octave, so the noise is drawn with few sampler calls; costs at most 1/16 more noise."""
    k = np.maximum(np.ceil(v), 1.0)
    _, e = np.frexp(k)
    q = np.ldexp(1.0, np.maximum(e - 5, 0))
    return (np.ceil(k / q) * q).astype(np.int64)


def _grid_exponent(scale: np.ndarray) -> np.ndarray:
    """:func:`privagg.noise.grid.grid_exponent`, elementwise: the largest ``e`` with
    ``2^e <= scale·2⁻¹⁰``."""
    return (np.frexp(scale)[1] - 1 - GRID_BITS).astype(np.int64)


def _grid_up(v: np.ndarray) -> np.ndarray:
    """``2^{ceil(8·log2 v)/8}`` elementwise (mean.py ``_grid_up``), v > 0."""
    return np.exp2(np.ceil(8.0 * np.log2(v)) / 8.0)


def _two_sum_err(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s = fl(a + b)`` and the exact error ``(a + b) − s`` (Knuth's TwoSum; exact without
    overflow, which the callers exclude: ``|b| <= 2^63`` and finite ``a``)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _threshold(a: np.ndarray, r: np.ndarray, *, up: bool, out: np.ndarray | None = None
               ) -> np.ndarray:
    """The search key of one end of ``[a − r, a + r]`` (:func:`friend_counts_1d`), in place:
    ``t = fl(a ± r)`` and its exact error ``e`` (:func:`_two_sum_err`, with ``fl(−r − bb) =
    −fl(r + bb)``); up: ``nextafter(t, +inf)`` where ``e >= 0``; down: where ``e > 0``."""
    t = np.add(a, r, out=out) if up else np.subtract(a, r, out=out)
    bb = t - a
    err = t - bb
    np.subtract(a, err, out=err)
    if up:
        np.subtract(r, bb, out=bb)
    else:
        np.add(r, bb, out=bb)
        np.negative(bb, out=bb)
    err += bb
    mask = np.greater_equal(err, 0.0) if up else np.greater(err, 0.0)
    del bb, err
    np.copyto(t, np.nextafter(t, np.inf), where=mask)
    return t


def _complex_keys(seg: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``seg + i·values`` as complex128, built part by part (``1j·v`` would turn ``0·inf`` into
    NaN): numpy orders complex numbers lexicographically (real part, then imaginary part), so a
    searchsorted on these keys is a binary search by (segment, value), exactly."""
    k = np.empty(values.shape, dtype=np.complex128)
    k.real = seg
    k.imag = values
    return k


def friend_counts_1d(sv: np.ndarray, seg: np.ndarray, start: np.ndarray, end: np.ndarray,
                     radius: np.ndarray) -> np.ndarray:
    """Friend counts (self included) for the exact predicate ``|a − b| <= r`` (real numbers).

    ``sv``: values sorted ascending within each segment; item ``i`` belongs to the segment
    ``[start[seg[i]], end[seg[i]])`` with radius ``radius[seg[i]]`` (finite, ``<= 2^62``); the
    segments are contiguous and in order (``seg`` ascending, ``start``/``end`` its offsets). The
    friends of ``a`` are the values in the real interval ``[a − r, a + r]``: with ``t = fl(a − r)``
    and its exact error ``e = (a − r) − t``, the values ``b >= a − r`` are ``b > t``, plus ``b = t``
    iff ``e <= 0`` (no float lies strictly between ``t`` and ``a − r``); likewise on the right.
    ``b <= t`` is ``b < nextafter(t, +inf)`` (``b`` finite), so both ends are one searchsorted
    (``side="left"``) over the (segment, value) keys; the items of earlier segments cancel in
    the difference.
    """
    r = radius[seg]
    # t_u = fl(a + r), e_u = (a + r) − t_u (TwoSum), counted: b <= a + r
    t = _threshold(sv, r, up=True)
    keys = _complex_keys(seg, sv)
    q = keys.copy()
    q.imag = t
    upto = np.searchsorted(keys, q, side="left")
    # t_l = fl(a − r), e_l = (a − r) − t_l, excluded: b < a − r
    q.imag = _threshold(sv, r, up=False, out=t)
    below = np.searchsorted(keys, q, side="left")
    upto -= below
    return upto.astype(np.int64, copy=False)


def _sum_sensitivity(clip_r: np.ndarray, e_s: np.ndarray, e_g: np.ndarray) -> np.ndarray:
    """Integer ℓ1 sensitivity (grid ``2^e_g`` units) of a group's released clipped sum: one row
    adds one term of ``|rint(clip(x − ĉ, ±R)/2^e_s)| <= R/2^e_s + 1/2`` (units ``2^e_s``), and the
    exact rounding to the coarser grid moves each side by at most 1/2: ``(R + 2^e_s/2)/2^e_g + 1``,
    rounded up by :func:`_quantize_up` (docs/proofs/aggregate_mean.md §7)."""
    return _quantize_up((clip_r + np.ldexp(0.5, e_s)) / np.ldexp(1.0, e_g) * _SAFETY + 1.0)


def _noisy_clipped_sums(dev: np.ndarray, grp: np.ndarray, off: np.ndarray, clip_r: np.ndarray,
                        ok: np.ndarray, eps_sum: Fraction, draws: _Draws
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_noisy_range_sums` with the symmetric range ``[−R, R]`` and one ε for all groups."""
    return _noisy_range_sums(dev, grp, off, clip_r, clip_r, ok, (eps_sum,),
                             np.zeros(clip_r.shape, dtype=np.int64), draws)


def _noisy_range_sums(dev: np.ndarray, grp: np.ndarray, off: np.ndarray, r_lo: np.ndarray,
                      r_hi: np.ndarray, ok: np.ndarray, eps_sums: tuple, which: np.ndarray,
                      draws: _Draws, scratch: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``Σ clip(x − ĉ, −R_lo, R_hi)`` per group released on the grid with discrete Laplace noise
    (``eps_sums[which_g]``-DP for group g, sensitivity ``R = max(R_lo, R_hi)``;
    docs/proofs/aggregate_mean.md §7). ``dev = x − ĉ[group]`` (may be ±inf; overwritten);
    ``scratch``: a float64 buffer of its shape to overwrite (else one is allocated). Returns (released sums, integer sensitivities, term and release grid exponents)."""
    clip_r, e_s = range_grid(r_lo, r_hi)
    s_h = _exact_group_sums(range_terms(dev, grp, r_lo, r_hi, e_s, scratch), off)  # units 2^e_s
    return _release_range_sums(s_h, clip_r, e_s, ok, eps_sums, which, draws)


def range_grid(r_lo: np.ndarray, r_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, e_s)`` per group: the range sum's sensitivity before rounding ``R = max(R_lo, R_hi)``
    and its term exponent (``R < 2^(e_s + TERM_BITS)``; public)."""
    clip_r = np.maximum(r_lo, r_hi)
    e_s = np.frexp(clip_r)[1] - TERM_BITS  # R < 2^(e_s + TERM_BITS)
    return clip_r, e_s


def range_terms(dev: np.ndarray, grp: np.ndarray, r_lo: np.ndarray, r_hi: np.ndarray,
                e_s: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """The int64 terms ``rint(clip(dev, −R_lo[g], R_hi[g])·2^−e_s[g])`` of each row (``dev`` =
    ``x − c[g]``, overwritten; ``|term| <= 2^30``), in ``scratch``'s memory (a float64 buffer of
    ``dev``'s shape, else one allocated): a function of the row and public values, the same in
    every engine (summed per group exactly: :func:`_exact_group_sums`)."""
    # per-row values a[grp] gathered into one reused buffer (grp is sorted: sequential reads)
    buf = np.empty(dev.shape, dtype=np.float64) if scratch is None else scratch
    np.minimum(dev, np.take(r_hi, grp, out=buf), out=dev)
    np.maximum(dev, np.take(-r_lo, grp, out=buf), out=dev)
    ibuf = buf.view(np.int64)
    np.ldexp(dev, np.take((-e_s).astype(np.int64), grp, out=ibuf), out=dev)
    np.rint(dev, out=dev)
    np.copyto(ibuf, dev, casting="unsafe")  # = astype(int64): |term| <= 2^30
    return ibuf


def _release_range_sums(s_h: np.ndarray, clip_r: np.ndarray, e_s: np.ndarray, ok: np.ndarray,
                        eps_sums: tuple, which: np.ndarray, draws: _Draws
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The exact sums ``s_h`` (units ``2^e_s``) rounded to the release grid, with their noise
    (:func:`_noisy_range_sums`' returns)."""
    eps_f = np.array([_float_down(e) for e in eps_sums])[which]
    e_g = np.maximum(_grid_exponent(np.minimum(clip_r * _SAFETY / eps_f,
                                               clip_r * _SAFETY)), e_s)
    shift = (e_g - e_s).astype(np.int64)  # >= 0: round s_h / 2^shift to an integer, exactly
    half_unit = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
    s_g = np.right_shift(s_h + half_unit, shift)
    sens = np.where(ok, _sum_sensitivity(clip_r, e_s, e_g), 1)
    z_s = draws.dlap_scaled("sum", sens, eps_sums, which)
    return np.ldexp((s_g + z_s).astype(np.float64), e_g), sens, e_s, e_g


def recentre_shift(r_lo: np.ndarray, r_hi: np.ndarray, eps_sum: np.ndarray, count_scale: float
                   ) -> np.ndarray:
    """The signed shift ``s`` of the clipped sum's center from ``ĉ`` toward the longer side of the
    clipping range ``[ĉ − R_lo, ĉ + R_hi]`` (docs/proofs/aggregate_mean.md §7; public: a function
    of released values and public scales). The range is unchanged; the sum's sensitivity becomes
    ``max(R_lo + s, R_hi − s)`` (``L − |s|``, ``L`` the longer side) while ``mean = ĉ + s + S/n̂``
    weighs the count noise by ``|x̄ − ĉ − s|``. Taking ``x̄ ≈ ĉ``, the two variances
    ``2((L − |s|)/ε_sum)² + 2(s·b)²`` (``b`` the count's discrete Laplace scale, per row) are least
    at ``|s| = L/(1 + (b·ε_sum)²)``, capped at the midpoint ``(R_hi − R_lo)/2`` (past it the other
    side becomes the longer). With the query's ``count()`` feeding the mean (``b`` about
    ``1/ε_sum``) this is the midpoint on every skewed group; with the mean's own count (ε/40,
    ``b·ε_sum`` = ε_sum/ε_n about 8 … 25 over the plans) at most about 2 % of ``L``."""
    r_lo = np.asarray(r_lo, dtype=np.float64)
    r_hi = np.asarray(r_hi, dtype=np.float64)
    longer = np.maximum(r_lo, r_hi)
    with np.errstate(over="ignore", invalid="ignore"):
        best = longer / (1.0 + (count_scale * np.asarray(eps_sum, dtype=np.float64)) ** 2)
        half = np.abs(r_hi - r_lo) / 2.0
        s = np.minimum(best, half)
    s = np.where(np.isfinite(s), s, 0.0)
    return np.where(r_hi >= r_lo, s, -s)


def side_penalty(eps_quantile: Fraction) -> int:
    """The public integer penalty ``λ`` per quarter-octave of the side radius in the utility
    ``−T_j − λ·level_j`` (docs/proofs/aggregate_mean.md §1.5): ``⌈SIDE_PENALTY·2/ε_q⌉`` rows,
    a multiple of the selection noise scale, so that the noisy maximum lands within a few
    edges of the best trade-off instead of anywhere on the plateau of empty edges."""
    return max(1, math.ceil(SIDE_PENALTY * 2 / eps_quantile))


#: Octave bins per group of :func:`octave_bins` (levels 0 … FLOOR_OCTAVES, and beyond).
OCTAVE_WIDTH = FLOOR_OCTAVES + 2


def _octave_counts(dev: np.ndarray, inv_upper: np.ndarray, grp: np.ndarray,
                   n_groups: int) -> np.ndarray:
    """``C[g, k] = #{rows of g with fl(|dev|·inv_upper) <= 2^k}``, ``k = 0 … FLOOR_OCTAVES``
    (the octave level ``⌈log2 u⌉`` from ``frexp``, exact; ``u = ∞`` beyond every edge): one
    level per row, a function of the row and public values. ``inv_upper`` (per row) is
    overwritten."""
    t = octave_bins(dev, inv_upper, grp)
    return octave_cumulative(np.bincount(t, minlength=n_groups * OCTAVE_WIDTH), n_groups)


def octave_cumulative(hist: np.ndarray, n_groups: int) -> np.ndarray:
    """:func:`_octave_counts` from the flat histogram of :func:`octave_bins` (additive: the sum
    of the histograms of any split of the rows)."""
    hist = hist.reshape(n_groups, OCTAVE_WIDTH)
    return np.cumsum(hist[:, :-1], axis=1)


def octave_bins(dev: np.ndarray, inv_upper: np.ndarray, grp: np.ndarray) -> np.ndarray:
    """The flat bin ``g·OCTAVE_WIDTH + level`` of each row (int64, in ``inv_upper``'s memory,
    overwritten), ``level = clip(⌈log2 fl(|dev|·inv_upper)⌉, 0, FLOOR_OCTAVES + 1)``."""
    u = np.multiply(np.abs(dev), inv_upper, out=inv_upper)  # >= 0 (+0.0 for ±0), or +inf
    # ⌈log2 u⌉ from the bits: for u > 0 the biased exponent of (bits − 1) is ⌈log2 u⌉ + 1022
    # (an exact power 2^k drops to the exponent below with a full mantissa; subnormals and 0
    # come out below 0, +inf at 1024: both clipped, as frexp's level would be)
    t = u.view(np.int64)
    t -= 1
    t >>= 52
    t -= 1022
    np.clip(t, 0, FLOOR_OCTAVES + 1, out=t)
    t += grp * OCTAVE_WIDTH
    return t


def floor_caps(eps_floors: tuple, which: np.ndarray) -> np.ndarray:
    """The cap ``K`` of each group's plan (:func:`~privagg.mechanisms.mean.floor_cap`; public)."""
    return np.array([floor_cap(e) for e in eps_floors], dtype=np.int64)[which]


def spread_floor(dev: np.ndarray, grp: np.ndarray, upper: np.ndarray, n_low: np.ndarray,
                 eps_floors: tuple, which: np.ndarray, draws: _Draws) -> np.ndarray:
    """The spread floor's released octave ``k̂`` per group (docs/proofs/aggregate_mean.md §1.9):
    report-noisy-max with ``DLap(4/ε_f)`` (``ε_f = eps_floors[which_g]``) of
    :func:`floor_utility` over the counts of :func:`_octave_counts`; ``U' = U·2^k̂``.
    ``dev = x − ĉ[grp]`` (not modified), ``upper`` the public ``U`` and ``n_low`` per group."""
    counts = _octave_counts(dev, np.take(1.0 / upper, grp), grp, upper.size)
    return floor_pick(counts, n_low, eps_floors, which, draws)


def floor_pick(counts: np.ndarray, n_low: np.ndarray, eps_floors: tuple, which: np.ndarray,
               draws: _Draws) -> np.ndarray:
    """:func:`spread_floor`'s report-noisy-max over the octave counts of
    :func:`_octave_counts` (G, FLOOR_OCTAVES + 1)."""
    caps = floor_caps(eps_floors, which)
    noisy = floor_utility(counts, n_low, caps) + draws.dlap_by(
        "floor", tuple(4 / e for e in eps_floors), which, FLOOR_OCTAVES + 1)
    return np.argmax(noisy, axis=1)


def side_bins(dev: np.ndarray, grp: np.ndarray, inv_upper: np.ndarray, top_level: int) -> np.ndarray:
    """The flat bin ``(2g + side)·nb + lb`` of each row for the per-side clipping range (int64,
    in ``inv_upper``'s memory, overwritten; ``nb`` = :func:`side_width`): ``lb`` the clipped
    grid level of :func:`_row_bins`, side 0 for ``dev >= 0`` (the upper side), 1 below."""
    nb = side_width(top_level)
    hidx = _row_bins(dev, inv_upper, top_level)
    np.add(hidx, nb, out=hidx, where=dev < 0)
    hidx += grp * (2 * nb)
    return hidx


def side_width(top_level: int) -> int:
    """Levels per side and group of :func:`side_bins` (public)."""
    return top_level - _LEVEL_LOW + 3


def _row_bins(dev: np.ndarray, inv_upper: np.ndarray, top_level: int) -> np.ndarray:
    """``clip(grid_levels(fl(|dev|·inv_upper)²), L − 1, top + 1) − (L − 1)`` (``L``:
    ``_LEVEL_LOW``), int64, in ``inv_upper``'s memory (overwritten; float64 of ``dev``'s
    shape), bit for bit :func:`grid_levels`."""
    u = np.multiply(dev, inv_upper, out=inv_upper)  # = ±fl(|dev|·inv_upper), squared next
    u *= u
    t = u.view(np.int64)
    t -= 1
    high = (t & _MANTISSA) >= _SQRT2_F
    t >>= 52
    t *= 2
    t -= 2045
    t += high
    del high
    np.clip(t, _LEVEL_LOW - 1, top_level + 1, out=t)
    t -= _LEVEL_LOW - 1
    return t


def _ordered_bits(v: np.ndarray) -> np.ndarray:
    """uint64 keys of float64 values in their total order (IEEE totalOrder for non-NaN:
    −0.0 before +0.0): the sign bit set for positives, every bit flipped for negatives."""
    b = np.ascontiguousarray(v).view(np.uint64)
    mask = (b >> np.uint64(63)) * np.uint64(0x7FFFFFFFFFFFFFFF)
    mask |= np.uint64(0x8000000000000000)
    mask ^= b
    return mask


def _from_ordered_bits(u: np.ndarray) -> np.ndarray:
    """The float64 values of :func:`_ordered_bits` keys (its inverse), in place."""
    mask = (u >> np.uint64(63)) ^ np.uint64(1)
    mask *= np.uint64(0x7FFFFFFFFFFFFFFF)
    mask |= np.uint64(0x8000000000000000)
    u ^= mask
    return u.view(np.float64)


def _group_value_sort(v: np.ndarray, g: np.ndarray, n_groups: int, gdt: Any) -> np.ndarray:
    """``v`` sorted by (group, :func:`_ordered_bits`) (``g`` the group of each item): one
    ``np.sort`` of packed uint64 keys ``group | top bits of the value key | index`` (much faster
    than an argsort), then the runs of equal (group, top bits) sorted by their low bits (one
    more ``np.sort`` of ``run | low bits``). Exact: the same sequence as a lexicographic sort."""
    m = v.size
    u = _ordered_bits(v)
    gb = max(int(n_groups - 1).bit_length(), 1)
    ib = max(int(m - 1).bit_length(), 1)
    shift = gb + ib
    if m == 0 or shift + ib > 64:  # too many bits: an argsort and a stable group sort
        order = np.argsort(u)
        order = order[np.argsort(g[order].astype(gdt), kind="stable")]
        return v[order]
    key = u >> np.uint64(shift)
    key <<= np.uint64(ib)
    key |= np.arange(m, dtype=np.uint64)
    key |= g.astype(np.uint64) << np.uint64(64 - gb)
    key.sort()
    top = key >> np.uint64(ib)  # group | top bits of u
    key &= np.uint64((1 << ib) - 1)
    us = u[key.view(np.int64)]
    del key, u
    tie = top[1:] == top[:-1]
    del top
    if tie.any():
        first = np.concatenate([tie, [False]]) & ~np.concatenate([[False], tie])
        pos = np.flatnonzero(np.concatenate([tie, [False]]) | np.concatenate([[False], tie]))
        run = np.cumsum(first[pos], dtype=np.uint64)  # 1, 2, … per run (< 2^ib)
        low_mask = np.uint64((1 << shift) - 1)
        part = us[pos]
        k2 = part & low_mask
        k2 |= run << np.uint64(shift)
        k2.sort()
        k2 &= low_mask
        part &= ~low_mask
        part |= k2
        us[pos] = part
    return _from_ordered_bits(us)


def _run_positions(same: np.ndarray) -> np.ndarray:
    """int64: each item's position in its run, the runs given by ``same[i] = (i+1 ≡ i)``."""
    idx = np.arange(same.size + 1, dtype=np.int64)
    start = np.where(np.concatenate([[True], ~same]), idx, 0)
    np.maximum.accumulate(start, out=start)
    idx -= start
    return idx


def _group_hash_order(h: np.ndarray, g: np.ndarray, bits: np.ndarray, occ: np.ndarray | None,
                      n_groups: int, gdt: Any) -> np.ndarray:
    """The permutation sorting the items by (group, hash, bits, occ) (``occ`` None: all 0), a
    total order of distinct (group, bits, occ). One ``np.sort`` of packed uint64 keys
    ``group | top bits of the hash | index`` (much faster than an argsort), then the runs of
    equal (group, top bits) — rare: equal truncated keyed hashes — sorted by the full key."""
    m = h.size
    gb = max(int(n_groups - 1).bit_length(), 1)
    ib = max(int(m - 1).bit_length(), 1)
    shift = gb + ib
    if m == 0 or shift > 48:  # too few hash bits left: an argsort and a stable group sort
        ho = np.argsort(h)
        ho = ho[np.argsort(g[ho].astype(gdt), kind="stable")]
        shift = 0
    else:
        key = h >> np.uint64(shift)
        key <<= np.uint64(ib)
        key |= np.arange(m, dtype=np.uint64)
        key |= g.astype(np.uint64) << np.uint64(64 - gb)
        key.sort()
        key &= np.uint64((1 << ib) - 1)
        ho = key.view(np.int64)
    hs, gs = h[ho], g[ho]
    if shift:
        top = hs >> np.uint64(shift)
        tie = (top[1:] == top[:-1]) & (gs[1:] == gs[:-1])
    else:
        tie = (hs[1:] == hs[:-1]) & (gs[1:] == gs[:-1])
    if tie.any():
        pos = np.flatnonzero(np.concatenate([tie, [False]]) | np.concatenate([[False], tie]))
        rows = ho[pos]
        occ_r = np.zeros(rows.size, dtype=np.int64) if occ is None else occ[rows]
        ho[pos] = rows[np.lexsort([occ_r, bits[rows], hs[pos], gs[pos]])]
    return ho


def _pair_bin_counts(hv: np.ndarray, hg: np.ndarray, n_groups: int, n_r: int) -> np.ndarray:
    """``bincount(g·(n_r + 1) + b)`` over the consecutive pairs of one group in the order
    ``hv`` (groups ``hg``, contiguous): ``b = clip(grid_levels(d²) − j_0, 0, n_r)``, the least
    ``j`` with ``|d| <= r_j`` (``n_r`` beyond), ``d`` the pair's difference (finite values, so
    ``d²`` is never NaN), computed in place (bit for bit :func:`grid_levels`)."""
    same = hg[1:] == hg[:-1]
    d = hv[1:] - hv[:-1]
    d *= d  # >= +0.0
    t = d.view(np.int64)
    t -= 1
    level = t >> 52
    level *= 2
    level -= 2045 + int(RADIUS_EXPONENTS[0])
    t &= _MANTISSA
    level += t >= _SQRT2_F
    del d, t
    np.clip(level, 0, n_r, out=level)
    level += hg[1:] * (n_r + 1)
    return np.bincount(level[same], minlength=n_groups * (n_r + 1))


def _segments(sorted_group: np.ndarray, n_groups: int) -> np.ndarray:
    return np.searchsorted(sorted_group, np.arange(n_groups + 1, dtype=np.int64)).astype(np.int64)


def _exact_group_sums(terms: np.ndarray, off: np.ndarray) -> np.ndarray:
    """``Σ terms`` per segment, exact (int64 terms; a wrapping cumsum's differences are exact
    modulo 2⁶⁴, hence exact when each segment's sum fits int64)."""
    terms = terms.astype(np.int64, copy=False)
    sums = np.zeros(off.size - 1, dtype=np.int64)
    full = np.flatnonzero(off[1:] > off[:-1])
    if full.size:  # reduceat over the non-empty segments only: strictly increasing starts < n
        sums[full] = np.add.reduceat(terms, off[:-1][full])  # wraps modulo 2⁶⁴
    return sums


@dataclass(frozen=True)
class SmallBudget:
    """The public shares of the small-group plan (§8), from ``ε'_g`` and ``N_low``."""

    eps_count2: Fraction  #: the second count of each small group
    eps_cell: Fraction  #: the pooled cell (exponential mechanism)
    eps_spread: Fraction  #: the pooled centred spread (exponential mechanism)
    eps_clip: Fraction  #: the pooled clipping range, both sides together (disjoint rows)
    eps_sum: Fraction  #: each small group's clipped sum
    eps_levels: Fraction = Fraction(0)  #: the pooled cell's refinement levels, all together (§8 step 2b)
    eps_spread2: Fraction = Fraction(0)  #: the pooled spread around the refined center (step 2b)
    eps_spread3: Fraction = Fraction(0)  #: a partial step 2b's third spread (its far branch)
    floored: bool = False  #: step 2b's shares are :func:`refine_floor`'s (public)

    @property
    def total(self) -> Fraction:
        return (self.eps_count2 + self.eps_cell + self.eps_spread + self.eps_clip + self.eps_sum
                + self.eps_levels + self.eps_spread2 + self.eps_spread3)


def small_count_share(fp: FriendlyMeansPlan) -> Fraction:
    """``ε_2 = SMALL_COUNT_SHARE·(ε'_g − ε_n)``: the second count's ε (public)."""
    return (fp.epsilon / fp.steps - fp.group.eps_count) * SMALL_COUNT_SHARE


#: Step 2b of the small-group plan (§8; public): refine the pooled cell and measure a second
#: pooled spread around its center. Without it, groups far from 0 relative to their spread
#: (10⁶ ± 10, years 2007–2009) were released hundreds to thousands of sd off: the pooled spread
#: around the octave cell's midpoint was that midpoint's offset from the rows, and so was the
#: clipping range (docs/utility/aggregate.md, twelfth stop).
SMALL_REFINE = True
#: Its levels' ε (all together) is ``min(REFINE_LEVELS·e, REFINE_CAP_LEVELS·ε_r)``, the second
#: spread's ``min(REFINE_SPREAD·e, REFINE_CAP_SPREAD·ε_r)``, both taken from the sums (``e`` the
#: cell's share). Half the caps left N(10⁶, 10²) groups of 300 rows 1.1 sd off (worst group,
#: median of 10 seeds, ε = 1/3) against 0.24.
REFINE_LEVELS = Fraction(1)
REFINE_SPREAD = Fraction(1, 2)
REFINE_CAP_LEVELS = Fraction(1, 15)
REFINE_CAP_SPREAD = Fraction(1, 30)
#: The refined center and second spread are used only where ``REFINE_USE·s2 <= s`` (the first
#: spread was mostly the offset); elsewhere (lognormal, exponential, N(50, 10²)) the first pair
#: clipped less of the right tail.
REFINE_USE = 4
#: Step 2b's second spread draws from the grid's values up to ``SPREAD2_TOP·s`` only (``s`` the
#: released first spread): every candidate above ``s/REFINE_USE`` has the same outcome (``c1``,
#: ``s`` kept), and at the floor's ε (8 pooled rows' worth) the grid's long upper tail drew one
#: in 7.1 % of draws around 2008.5 for 500 integers 2007–2009 (``s`` = 1024) — 0.94 % with the
#: bound (tests/aggregate/test_small_plan_refine.py::test_spread2_top_rate).
SPREAD2_TOP = 2
#: The floor's most levels (``refine_floor``): three where the half share affords them (five
#: groups of 100 rows of N(10⁶, 10²) in the four-metric query: two levels leave a subcell 512
#: wide, median worst group 3.47 sd; fifteenth stop).
REFINE_FLOOR_LEVELS = 3
#: Levels beyond ``levels_needed(b − a, s/32)``: ``s`` is mostly the offset on far data, so that
#: target left a cell about as wide as the offset (N(10⁶, 10²), 300 rows: 1.55 sd → 0.24 with one more).
REFINE_EXTRA = 1
#: Each level of step 2b gets at least ``REFINE_ROWS/N_low`` of ε (public): below, a level's pick
#: is close to uniform over the 33 subcells (penguins' three species, 342 pooled rows: 5.1 at the
#: full L levels; the refined center and spread were then random, and a tiny second spread let the
#: refined pair in: body mass 0.021 → 0.059 relative error). Where ``e_lv·N_low`` affords fewer than
#: the ``L`` levels wanted, the step runs the ``⌊e_lv·N_low/REFINE_ROWS⌋`` it affords (none: the
#: sums keep the ε), behind the gate below.
REFINE_ROWS = 8
#: The gate of a partial step 2b (public: released values): after its first level, the step goes
#: on only where that level's subcell center ``c'`` lies at least ``REFINE_GATE·s`` from ``c1``
#: (far data: the rows sit about ``s`` from ``c1``, on one side); elsewhere it stops and the sums
#: get the unspent levels' and second spread's ε. Far groups of 100 rows (500 pooled; `count()` and
#: `mean(x)` at ε = 1) were released hundreds of sd off before the partial step (N(10⁶, 10²): 501 sd
#: median, years 2007–2009: 11.3; after: 0.54, 0.11; benchmarks/aggregate_far.py); without the gate
#: near data paid for levels they did not use (Weight_in_lbs by origin, cars: relative error 0.032 →
#: 0.062, and a tiny second spread clipped whole groups to a point).
REFINE_GATE = 0.5
#: The partial step runs only with at least this many affordable levels (public): with one, the
#: gate's level is all of it and near tables paid it (cars, penguins, diabetes, stocks: relative
#: error +8 to +23 %, 60 runs); with two, the benchmark's real tables' medians are unchanged.
REFINE_PARTIAL_MIN = 2
#: The floor of step 2b's shares (public; fourteenth stop): where the caps ``ε_r/15``, ``ε_r/30``
#: afford fewer than ``REFINE_PARTIAL_MIN`` levels but the cell's share ``e`` affords them, the
#: levels get ``REFINE_PARTIAL_MIN·REFINE_ROWS/N_low`` and the second spread ``REFINE_ROWS/N_low``,
#: provided the levels and the far branch's two spreads take at most this fraction of the sums'
#: share. Without it, far columns in groups of about 100 rows in a four-metric query at ε = 1 were
#: released sd's off (vega cars' Year by Origin: 3.6 sd, now 0.22; 30 runs). Without the share limit
#: penguins' year by island (25.5 sd, outside it) came to 0.43, but near tables that pass the gate
#: paid up to a third more error (penguins' body mass by species: ×1.35, 200 runs).
REFINE_FLOOR_SHARE = Fraction(1, 2)


def small_budget(fp: FriendlyMeansPlan, n_low: int, *, external: bool = False, refine: bool = False,
                 levels: int = 2) -> SmallBudget:
    """The shares of §8 (public: ``ε'_g = fp.epsilon/N``, the count's ``ε_n`` and the pooled
    lower bound ``n_low``): with ``ε_r = ε'_g − ε_n``, the second count ``ε_r/6``, the cell and
    the spread ``e = min(ε_r/5, SMALL_STEP_ROWS/max(n_low, 1))`` each, the clip range ``e/2``,
    the sums the rest (``>= ε_r/3``); the total is exactly ``ε_r``, so ``ε_n + total = ε'_g``.

    ``external``: the counts are the query's released ``count()`` pair (§8.1): no count of the
    mean's own and no second count, ``ε_r = ε'_g``, the sums get ``ε_r − 5e/2 >= ε_r/2``.

    ``refine`` (step 2b runs; public: the released cell and spread): the levels get
    ``min(REFINE_LEVELS·e, REFINE_CAP_LEVELS·ε_r)`` and the second spread ``min(REFINE_SPREAD·e,
    REFINE_CAP_SPREAD·ε_r)``, both from the sums (at least ``ε_r/3 − ε_r/10`` left; ``ε_r/5``
    after a partial step's third spread), or the partial step's minimum where those caps afford
    fewer levels (:func:`refine_floor` for the ``levels`` step 2b wants: at least half the sums'
    share left after the third)."""
    if external:
        rest = fp.epsilon / fp.steps
        e_c2 = Fraction(0)
    else:
        rest = fp.epsilon / fp.steps - fp.group.eps_count
        e_c2 = small_count_share(fp)
    e = min(rest * SMALL_STEP_CAP, Fraction(SMALL_STEP_ROWS, max(int(n_low), 1)))
    sums = rest - e_c2 - e * Fraction(5, 2)
    if refine:
        capped = min(e * REFINE_LEVELS, rest * REFINE_CAP_LEVELS)
        e_lv, e_s2 = refine_floor(capped, min(e * REFINE_SPREAD, rest * REFINE_CAP_SPREAD), e, sums, n_low,
                                  levels)
        return SmallBudget(e_c2, e, e, e / 2, sums - e_lv - e_s2, e_lv, e_s2, floored=e_lv != capped)
    return SmallBudget(e_c2, e, e, e / 2, sums)


def refine_floor(e_lv: Fraction, e_s2: Fraction, e: Fraction, sums: Fraction, n_low: int,
                 levels: int = 2) -> tuple[Fraction, Fraction]:
    """Step 2b's shares ``(e_lv, e_s2)`` after the floor (public): the capped ones, unless they
    afford fewer than ``REFINE_PARTIAL_MIN`` levels at ``REFINE_ROWS/N_low`` each; then, for the
    most levels ``k`` from ``min(REFINE_FLOOR_LEVELS, levels)`` (``levels``: what step 2b wants, at
    least ``REFINE_PARTIAL_MIN``) down to ``REFINE_PARTIAL_MIN`` with ``lv = k·REFINE_ROWS/N_low <=
    e·REFINE_LEVELS`` and ``lv + 2·s2 <= REFINE_FLOOR_SHARE·sums`` (``s2 = max(e_s2,
    REFINE_ROWS/N_low)``; ``sums`` the sums' share without step 2b), ``(lv, s2)``."""
    n = int(n_low)
    if n <= 0 or e_lv >= Fraction(REFINE_PARTIAL_MIN * REFINE_ROWS, n):
        return e_lv, e_s2
    s2 = max(e_s2, Fraction(REFINE_ROWS, n))
    for k in range(min(REFINE_FLOOR_LEVELS, max(int(levels), REFINE_PARTIAL_MIN)), REFINE_PARTIAL_MIN - 1, -1):
        lv = Fraction(k * REFINE_ROWS, n)
        if lv <= e * REFINE_LEVELS and lv + 2 * s2 <= REFINE_FLOOR_SHARE * sums:
            return lv, s2
    return e_lv, e_s2


def refine_levels_affordable(bud: SmallBudget, n_low: int) -> int:
    """``⌊e_lv·max(N_low, 0)/REFINE_ROWS⌋`` (public): how many levels step 2b's ``e_lv`` affords
    at no less than ``REFINE_ROWS/N_low`` each."""
    return int(bud.eps_levels * max(int(n_low), 0) / Fraction(REFINE_ROWS))


def gated_budget(bud: SmallBudget, e_level: Fraction, *, spread2: bool = False) -> SmallBudget:
    """A partial step 2b stopped after one level of ``e_level`` (public): by its gate (the
    second spread not drawn: its ε goes to the sums too) or, ``spread2``, by the second spread's
    test (drawn and spent); the other levels' ε goes to the sums. The total is unchanged."""
    back = bud.eps_levels - e_level + (0 if spread2 else bud.eps_spread2)
    return dataclasses.replace(bud, eps_levels=e_level, eps_spread2=bud.eps_spread2 if spread2 else Fraction(0),
                               eps_sum=bud.eps_sum + back)


def far_budget(bud: SmallBudget) -> SmallBudget:
    """A partial step 2b whose second spread found far data (public): a third spread at the
    second's ε, from the sums; the total is unchanged."""
    return dataclasses.replace(bud, eps_spread3=bud.eps_spread2, eps_sum=bud.eps_sum - bud.eps_spread2)


def combined_count(n_hat: np.ndarray, n2: np.ndarray, e_n: Fraction, e_2: Fraction
                   ) -> tuple[np.ndarray, float]:
    """``ñ = (ε_n²·n̂ + ε_2²·n̂_2)/(ε_n² + ε_2²)`` (inverse-variance weights of the two released
    counts; post-processing) and its noise variance bound ``2/(ε_n² + ε_2²)``."""
    w1, w2 = float(e_n) ** 2, float(e_2) ** 2
    return (w1 * n_hat + w2 * n2) / (w1 + w2), 2.0 / (w1 + w2)


def far_scale(s: float, c1: float, s2: float, c_s2: float, s3: float, c2: float) -> float:
    """The far branch's clipping scale around ``c2`` (§8 step 2b): the least of three released
    bounds on the median distance to ``c2`` — ``s3`` (drawn around it), ``s + |c1 − c2|`` and
    ``s2 + |c_s2 − c2|`` (the spreads drawn around ``c1`` and ``c_s2``, moved by the triangle
    inequality; post-processing). The third caps a third spread drawn too wide (integers
    2007–2009, 100 rows: ``s3`` = 3,444, ``s2 + |c_s2 − c2|`` = 19.8)."""
    return min(s3, s + abs(c1 - c2), s2 + abs(c_s2 - c2))


#: §8 step 2's candidates beyond the point-cell partition (public; eighteenth stop, 2026-12-07): the
#: subcells of each octave cell ``±[2^e, 2^{e+1})`` with ``e`` in SUBCELL_OCTAVES and outside
#: ``0 … INT_E_MAX`` (those octaves hold the point cells 1, 3, 5 … 15 of small integers and 0/1
#: atoms, whose release is tuned on the point-cell partition): the SUBCELL_BRANCH dyadic subcells
#: ``A + [j, j + 1)·w`` and the SUBCELL_BRANCH − 1 shifted ones ``A + [j + 1/2, j + 3/2)·w``
#: (``w = (B − A)/SUBCELL_BRANCH``), so that two rows of the octave within ``w/2`` share one.
#: Without them a column far from 0 relative to its spread (years 2007–2009: the octave
#: [1024, 2048), 500 times the rows' width) was located only by step 2b, which the four-metric
#: query cannot afford at a few hundred pooled rows: penguins' year by sex released 22 sd off
#: (median of 10 runs; docs/utility/aggregate.md, eighteenth stop).
SMALL_SUBCELLS = True
SUBCELL_BRANCH = 32
SUBCELL_OCTAVES = (-40, 64)
#: An eligible octave cell keeps SUBCELL_ALPHA of its base measure; its 2·SUBCELL_BRANCH − 1
#: subcells share the rest equally, so each octave's total weight (and the choice between
#: octaves) is unchanged. A subcell that holds the rows its octave holds scores as the octave
#: does and weighs ``(1 − α)/(63·α)`` ≈ 8 times as much (far data); one holding part of them
#: loses ``e/2`` to ``e`` nats per row outside it (near data keep the octave, or take the subcell
#: of their median). Measured on the 231 group-by pairs of the packaged tables (10 runs each; geometric
#: mean of the per-pair error ratios to the plan without subcells; pairs above 0.3 sd, of 24):
#: 1/32 0.982 (19; of the five year columns one located), 1/128 0.955 (23; three), 1/512 0.934
#: (21; five), 1/4096 0.936 (22; five, more near pairs worse) — docs/utility/aggregate.md.
SUBCELL_ALPHA = Fraction(1, 512)


def pooled_cells(alpha: Any = SUBCELL_ALPHA) -> tuple[np.ndarray, ...]:
    """§8 step 2's public candidates ``(lo, hi, log_prior, home, a, b)``: first
    :func:`~.mean_small.point_cells` ``(CELL_E_MIN)`` in its order (``home`` its own index), then
    (unless ``alpha`` is None) the subcells of the eligible octave cells (SUBCELL_OCTAVES; ``home``
    the octave cell's index, ``[lo, hi) = [a, b)`` the subcell, exact dyadic edges).
    ``log_prior``: the point cells' :func:`~.mean_small.point_cell_log_prior`, an eligible octave
    cell's plus ``ln alpha``, each of its subcells the octave's plus ``ln((1 − alpha)/(2·SUBCELL_BRANCH
    − 1))``. Read-only arrays, cached per ``alpha`` and the module's SUBCELL_BRANCH and
    SUBCELL_OCTAVES (a variant setting them is not served a stale family)."""
    return _pooled_cells(alpha, int(SUBCELL_BRANCH), tuple(SUBCELL_OCTAVES))


@functools.lru_cache(maxsize=4)
def _pooled_cells(alpha: Any, m: int, octaves: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """:func:`pooled_cells` for the branch ``m`` and the octave range ``octaves``."""
    from .mean_small import CELL_E_MIN, INT_E_MAX, octave_cells, point_cell_log_prior, point_cells

    lo, hi, oct_, point, geo_a, geo_b = point_cells(CELL_E_MIN)
    lp = point_cell_log_prior(oct_, point, geo_a, CELL_E_MIN)
    n_oct = octave_cells(CELL_E_MIN)[0].size  # the octave cells' first pieces come first
    idx = np.arange(lo.size)
    e_lo, e_hi = octaves
    ok = ((idx < n_oct) & (idx > 0) & np.isfinite(geo_b - geo_a) & (oct_ >= e_lo) & (oct_ <= e_hi)
          & ~((oct_ >= 0) & (oct_ <= INT_E_MAX)))
    home = np.flatnonzero(ok) if alpha is not None else np.zeros(0, dtype=np.int64)
    steps = np.concatenate([np.arange(m, dtype=np.float64), np.arange(m - 1, dtype=np.float64) + 0.5])
    a0, w = geo_a[home][:, None], ((geo_b - geo_a)[home] / m)[:, None]
    sub_a = (a0 + steps[None, :] * w).ravel()  # exact: w a power of 2, steps of few bits
    sub_b = (a0 + (steps[None, :] + 1.0) * w).ravel()
    lp_oct = lp.copy()
    if home.size:
        lp_oct[home] += math.log(alpha)
    lp_sub = np.repeat(lp[home], steps.size) + (math.log((1 - alpha) / steps.size) if home.size else 0.0)
    out = (np.concatenate([lo, sub_a]), np.concatenate([hi, sub_b]), np.concatenate([lp_oct, lp_sub]),
           np.concatenate([idx, np.repeat(home, steps.size)]), np.concatenate([geo_a, sub_a]),
           np.concatenate([geo_b, sub_b]))
    for v in out:
        v.setflags(write=False)
    return out


def pooled_low(n_tilde: np.ndarray, small: np.ndarray, var: float) -> int:
    """``N_low = ⌊Σ_small ñ_g − 2·√(G_s·var)⌋`` (public): a lower bound on the pooled rows of
    the small groups (about 2 standard deviations of the counts' noise)."""
    g_s = int(np.count_nonzero(small))
    return int(math.floor(float(n_tilde[small].sum()) - 2.0 * math.sqrt(g_s * var)))


def side_utilities(xs: np.ndarray, c1: float, cand: np.ndarray) -> np.ndarray:
    """(2, K) int64: ``−#{x > c1 + R_i}`` (upper side) and ``−#{x < c1 − R_i}`` (lower side)
    over the candidate radii ``R_i`` (``xs`` sorted). Each row is monotone with sensitivity 1
    (adding a row moves every entry of one row by 0 or −1), and the two rows read disjoint
    rows (``x > c1`` and ``x < c1``): §8."""
    n = xs.size
    with np.errstate(over="ignore", invalid="ignore"):
        o_hi = n - np.searchsorted(xs, c1 + cand, side="right")
        o_lo = np.searchsorted(xs, c1 - cand, side="left")
    return -np.stack([o_hi, o_lo]).astype(np.int64)


def _pooled_spread(xs: np.ndarray, c: float, draws: _Draws, name: str, eps: Fraction,
                   edge: float | None = None, top: float | None = None) -> float:
    """Steps 3 and 2b of §8: the pooled centred spread around the public ``c`` (the mass utility
    around the untied median of ``|x − c|`` over :func:`~.mean_small.positive_grid`, base measure
    ``spread_log_prior`` of ``c``'s octave; ``xs`` sorted), the exponential mechanism at ``eps``.
    ``edge``: the refined cell's left edge, whose rows count as tied (``edge_tied_counts``).
    ``top``: a public (released) largest candidate — the grid's values above it are not drawn."""
    from .mean_small import (
        _octave,
        base_measure,
        centred_spread_mass_utility,
        edge_tied_counts,
        positive_grid,
        spread_log_prior,
        spread_upper_edges,
    )

    grid = positive_grid()
    with np.errstate(over="ignore", invalid="ignore"):
        lo = c - grid
        below_lo = np.searchsorted(xs, lo, side="left")
        # upper edges at least nextafter(c): the rows equal to c are tied (c + 2⁻⁹⁰⁰ rounds to c)
        below_hi = np.searchsorted(xs, spread_upper_edges(c, grid), side="left")
        if edge is not None:
            at = np.searchsorted(xs, [edge, np.nextafter(edge, np.inf)], side="left")
            below = edge_tied_counts(np.concatenate([below_lo, below_hi, at]), lo, edge)
            below_lo, below_hi = below[: grid.size], below[grid.size:]
    util = centred_spread_mass_utility(below_hi, below_lo, int(xs.size))[None, :]
    mu = base_measure(spread_log_prior(_octave(np.array([c]))))
    m = grid.size if top is None else max(int(np.searchsorted(grid, top, side="right")), 1)
    return float(grid[int(draws.em(name, util[:, :m], mu[:, :m], eps)[0])])


def _small_means(x: np.ndarray, grp: np.ndarray, sizes: np.ndarray, n_hat: np.ndarray,
                 small: np.ndarray, fp: FriendlyMeansPlan, draws: _Draws,
                 n_scale: Fraction | None = None, medians: Callable | None = None) -> dict[str, Any]:
    """The small-group plan (docs/proofs/aggregate_mean.md §8) for the groups ``small`` (a public
    function of ``n̂``): loops only over the steps (and the two sides), never over groups.
    ``n_scale``: ``n̂`` is the query's released ``count()`` pair's present-row count with
    discrete Laplace scale ``n_scale`` (§8.1): no second count, ``ñ = n̂``.
    ``medians``: called once with the small groups' released ranges ``(m − R, m + R)`` (NaN
    where ⊥) after step 3, it returns released per-group medians (NaN where none); the small
    groups with one take their sums around them (§8.3)."""
    from .mean_small import (
        CELL_E_MIN,
        COORD_LEVEL_DIV,
        COORD_LEVELS,
        base_measure,
        cell_floor,
        cell_mass_utility,
        levels_needed,
        point_cells,
        subcells,
    )

    n_groups = sizes.size
    e_n = fp.group.eps_count
    e_2 = small_count_share(fp)
    if n_scale is None:
        # 1. a second count per group (parallel), combined with n̂
        n2 = sizes + draws.dlap("count2", 1 / e_2, n_groups)
        n_t, var = combined_count(n_hat, n2, e_n, e_2)
    else:  # the released count() pair's p̃ (§8.1): post-processing
        n_t, var = np.asarray(n_hat, dtype=np.float64), 2.0 * float(n_scale) ** 2
    n_low = pooled_low(n_t, small, var)  # public
    bud = small_budget(fp, n_low, external=n_scale is not None)
    sum_rule_eps = bud.eps_sum  # the two-pass rule's ε: the sums' without step 2b (public)
    g_s = int(np.count_nonzero(small))
    rows = small[grp]  # x may hold only the small groups' rows (the subsample's: rate 1)
    xg, gg = x[rows], grp[rows]  # the small groups' rows, still sorted by group
    xs = np.sort(xg)  # pooled, ascending
    # 2. the pooled cell of a median over the point cells and the octave cells' subcells (cell
    #    mass utility: monotone, moves 0/−1/−2, weights exp(e·u/2)); a point cell's center is the
    #    point itself, a subcell's its midpoint; k: the point cell, or the octave cell refined
    point = point_cells(CELL_E_MIN)[3]
    lo, hi, log_prior, home, geo_a, geo_b = pooled_cells(SUBCELL_ALPHA if SMALL_SUBCELLS else None)
    util = cell_mass_utility(xs, lo, hi, cell_floor(n_low))[None, :]
    pick = int(draws.em("small_cell", util, base_measure(log_prior), bud.eps_cell)[0])
    k = int(home[pick])
    a, b = float(geo_a[pick]), float(geo_b[pick])
    with np.errstate(over="ignore", invalid="ignore"):
        if math.isfinite(b - a):
            c1 = a + (b - a) / 2
        else:  # one of the two cells beyond ±2^1023: its finite edge
            c1 = a if math.isfinite(a) else b
    # 3. the pooled centred spread (mass utility around the untied median of |x − c1|)
    s = _pooled_spread(xs, c1, draws, "small_spread", bud.eps_spread)
    # 2b. refinement of the pooled cell (to s/32, one level more) and a second spread around its
    #     center, used where the first spread was mostly c1's offset (§8 step 2b); where fewer
    #     levels are affordable (at least REFINE_PARTIAL_MIN), those, behind the gate and the
    #     second spread's test, with a third spread in the far branch
    levels, partial = 0, False
    if SMALL_REFINE and k != 0 and not bool(point[k]) and math.isfinite(b - a):
        with np.errstate(over="ignore", invalid="ignore"):
            levels = min(int(levels_needed(np.array([b - a]), np.array([s / COORD_LEVEL_DIV]))[0]) + REFINE_EXTRA,
                         COORD_LEVELS)
        refined_bud = small_budget(fp, n_low, external=n_scale is not None, refine=True, levels=levels)
        affordable = refine_levels_affordable(refined_bud, n_low)
        # public: too few rows for all of them; or the floor's shares for three or more levels,
        # which near data (most of them want three) should stop at the gate
        if affordable < levels or (refined_bud.floored and levels > REFINE_PARTIAL_MIN):
            partial = affordable >= REFINE_PARTIAL_MIN
            levels = affordable if partial else 0  # none: the sums keep the ε
    if levels > 0:
        bud = refined_bud
        e_lv = bud.eps_levels / levels
        for i in range(levels):  # at most COORD_LEVELS
            sub_lo, sub_hi = subcells(a, b)
            kk = int(draws.em(f"small_level{i}", cell_mass_utility(xs, sub_lo, sub_hi)[None, :],
                              np.ones(sub_lo.size, np.int64), e_lv)[0])
            a, b = float(sub_lo[kk]), float(sub_hi[kk])
            c2 = a + (b - a) / 2
            if partial and i == 0:
                if abs(c2 - c1) < REFINE_GATE * s:  # public: near data
                    bud, levels = gated_budget(bud, e_lv), 0
                    break
                # the second spread right after the gate, around the first level's center: far
                # data go on; the others stop here and the sums get the other levels' ε
                s2 = _pooled_spread(xs, c2, draws, "small_spread2", bud.eps_spread2, edge=a,
                                    top=SPREAD2_TOP * s)
                if s2 * REFINE_USE > s:  # public
                    bud, levels = gated_budget(bud, e_lv, spread2=True), 0
                    break
                c_first = c2  # the center s2 was drawn around
    if levels > 0 and partial:  # far (public): a third spread around the refined center
        bud = far_budget(bud)
        # drawn up to the other two bounds' least (public): a larger draw would be replaced by it
        cap = min(s + abs(c1 - c2), s2 + abs(c_first - c2))
        s3 = _pooled_spread(xs, c2, draws, "small_spread3", bud.eps_spread3, edge=a, top=cap)
        s, c1 = far_scale(s, c1, s2, c_first, s3, c2), c2
    elif levels > 0:
        s2 = _pooled_spread(xs, c2, draws, "small_spread2", bud.eps_spread2, edge=a, top=SPREAD2_TOP * s)
        if s2 * REFINE_USE <= s:  # public: the first spread was mostly c1's offset (far data)
            s, c1 = min(s2, s + abs(c1 - c2)), c2
    # 4. the clipping range per side: R = K·s, K from SIDE_KS_POOLED; utility −#{rows beyond}
    #    (monotone, Δ = 1, weights exp(ε·u)); the two sides read disjoint rows
    ks = np.asarray(SIDE_KS_POOLED, dtype=np.float64)
    cand = _grid_up(ks * s)
    cost = -float(bud.eps_clip) * SIDE_COST * max(g_s, 1) * ks / float(bud.eps_sum)
    pick = draws.em("small_clip", side_utilities(xs, c1, cand), base_measure(cost),
                    2 * bud.eps_clip)
    r_hi, r_lo = float(cand[int(pick[0])]), float(cand[int(pick[1])])
    with np.errstate(over="ignore", invalid="ignore"):
        m = float(_finite(np.array(c1 + (r_hi - r_lo) / 2))[()])
        rad = float(min(_grid_up(np.array((r_hi + r_lo) / 2))[()], 2.0**1000))
    # 5. each small group's clipped sum around m (discrete Laplace on its grid, ε_sum); the
    #    groups of two_pass_groups (ñ·ε_sum >= TWO_PASS_ROWS) spend ε_sum in two passes (§8.2)
    ok = small & (n_t * _SAFETY >= fp.small_floor)  # ñ >= floor, up to ñ's float rounding
    seg = _segments(gg, n_groups)
    center = np.full(n_groups, m)
    rr = np.full(n_groups, rad)
    win_low, win_high = _finite(center - rr), _finite(center + rr)
    # §8.3: the groups with a released median take their sums around it (public: released values)
    fm = np.zeros(n_groups, dtype=bool)
    centred = fm
    if medians is not None:
        med = np.asarray(medians(np.where(ok, win_low, np.nan), np.where(ok, win_high, np.nan)),
                         dtype=np.float64)
        # guard 1: §8.2's groups keep their two passes (their first means center them already)
        fm = median_groups(ok & ~two_pass_groups(n_t, ok, sum_rule_eps), med, rad)
    e_sums: tuple = (bud.eps_sum, bud.eps_sum * TWO_PASS_FIRST)
    if fm.any():
        c_m, r_m, e_med = _median_range(xg, gg, med, fm, bud.eps_sum, s, draws)
        if r_m[0] < rad:  # guard 2 (public): else step 4's pooled range is the narrower (at ε_f)
            center, rr, centred = np.where(fm, c_m, center), np.where(fm, r_m, rr), fm
        e_sums += (e_med,)
    two = two_pass_groups(n_t, ok & ~fm, sum_rule_eps)  # no group loses its second pass to step 2b
    which = np.where(fm, 2, two.astype(np.int64))
    n_pos = np.maximum(n_t, 1.0)
    total, sens, e_s, e_g = _noisy_range_sums(xg - center[gg], gg, seg, rr, rr, ok, e_sums, which,
                                              draws)
    mean = _finite(center + total / n_pos)
    if two.any():
        unit = min(s, TWO_PASS_UNIT * rad)  # public: released spread and radius
        center, rr, e_two, which, t2, s2, es2, eg2 = _second_pass(
            xg, gg, seg, mean, center, rr, unit, two, n_t, bud.eps_sum, draws)
        mean = np.where(two, _finite(center + t2 / n_pos), mean)
        sens, e_s, e_g = np.where(two, s2, sens), np.where(two, es2, e_s), np.where(two, eg2, e_g)
        if fm.any():  # the median-centred groups' ε after the second pass's three
            e_two, which = e_two + (e_sums[2],), np.where(fm, 3, which)
        e_sums = e_two
    g_s_grid = np.ldexp(1.0, e_g)
    t_q = np.zeros(n_groups)
    n_e = len(e_sums)
    key = sens * n_e + which
    for kk in np.unique(key):  # few distinct (sensitivity, ε index) pairs, not one per group
        sv, k = divmod(int(kk), n_e)
        t_q[key == kk] = _dlap_two_sided(float(Fraction(sv) / e_sums[k]), 0.9 * BETA)
    if n_scale is None:
        w1, w2 = float(e_n) ** 2, float(e_2) ** 2
        k_c = (w1 * _dlap_two_sided(float(1 / e_n), 0.05 * BETA)
               + w2 * _dlap_two_sided(float(1 / e_2), 0.05 * BETA)) / (w1 + w2)
    else:
        k_c = _dlap_two_sided(float(n_scale), 0.1 * BETA)
    half = noise_half_width(mean, center, rr, n_pos, t_q * g_s_grid, k_c,
                            np.ldexp(0.5, e_s) + 8.0 * _U * rr, g_s_grid)
    return {"ok": ok, "value": mean, "low": _finite(mean - half), "high": _finite(mean + half),
            "center": center, "radius": rr, "n_tilde": n_t, "budget": bud, "two_pass": two,
            "clip_low": _finite(center - rr), "clip_high": _finite(center + rr),
            "window_low": win_low, "window_high": win_high, "median_centred": centred}


#: §8.3 (the sums around the query's released medians): the share of ``ε_sum`` of the pooled range
#: of the deviations ``x − med_g``; the sums get the rest (5/6). A pooled spread of the deviations
#: first (ε_sum/6 more, the range in its units) lost on the sweep (in a first version of the plan,
#: without the two guards of ``_small_means``: geometric mean of the per-pair ratios to the pooled
#: sums 0.977 against 0.883 without it; interval coverage 0.768 against 0.869): on atoms and at a
#: few hundred pooled rows its draw was tiny or random (docs/utility/aggregate.md, twentieth stop).
MEDIAN_CLIP = Fraction(1, 6)


def median_shares(eps_sum: Fraction) -> tuple[Fraction, Fraction]:
    """``(ε_c, ε_f)`` of §8.3 (public): ``ε_sum/6`` for the range, the rest for the sums."""
    e_cl = eps_sum * MEDIAN_CLIP
    return e_cl, eps_sum - e_cl


#: §8.3 runs only where the released medians spread over more than ``MEDIAN_SWITCH·R`` (``R`` step
#: 4's pooled radius; public), i.e. with 0 wherever two medians differ: on the sweep's 231 pairs
#: (10 runs; the first version of the plan) the geometric mean of the per-pair ratios to the pooled
#: sums was 0.880 at 0, 0.895 at 1/16, 0.917 at 1/8, 0.939 at 1/4 (docs/utility/aggregate.md,
#: twentieth stop).
MEDIAN_SWITCH = 0.0


def median_groups(ok: np.ndarray, med: np.ndarray, rad: float = 0.0) -> np.ndarray:
    """The groups of §8.3 (public: released values): ``ok`` with a released median, none unless
    those medians spread over more than ``MEDIAN_SWITCH·rad`` (``rad`` step 4's pooled radius):
    with one location, step 4's pooled range is centred on it."""
    fm = ok & np.isfinite(med)
    if not fm.any() or float(np.max(med[fm])) - float(np.min(med[fm])) <= MEDIAN_SWITCH * rad:
        fm[:] = False
    return fm


def _median_range(xg: np.ndarray, gg: np.ndarray, med: np.ndarray, fm: np.ndarray,
                  eps_sum: Fraction, s: float, draws: _Draws
                  ) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """§8.3 step a for the groups ``fm`` (public) around their released medians ``med``: per side
    a radius ``grid_up(K·s)`` of the deviations ``d = x − med_g``, ``K`` in SIDE_KS_POOLED (``s`` step
    2's released spread; step 3's side utilities and base measure, at ``ε_c`` and the sums'
    ``ε_f``). Returns each group's center ``med_g + (R_hi − R_lo)/2`` (others: NaN), the radius
    ``grid_up((R_hi + R_lo)/2)`` per group and ``ε_f``."""
    from .mean_small import base_measure

    e_cl, e_fin = median_shares(eps_sum)
    rows = fm[gg]
    with np.errstate(over="ignore", invalid="ignore"):
        dev = xg[rows] - med[gg[rows]]  # a function of the row and a released value
        ks = np.asarray(SIDE_KS_POOLED, dtype=np.float64)
        cand = _grid_up(ks * s)
        cost = -float(e_cl) * SIDE_COST * int(np.count_nonzero(fm)) * ks / float(e_fin)
        pick = draws.em("small_med_clip", side_utilities(np.sort(dev), 0.0, cand), base_measure(cost),
                        2 * e_cl)
        r_hi, r_lo = float(cand[int(pick[0])]), float(cand[int(pick[1])])
        center = np.where(fm, _finite(med + (r_hi - r_lo) / 2), np.nan)
        rad = float(min(_grid_up(np.array((r_hi + r_lo) / 2))[()], 2.0**1000))
    return center, np.full(med.shape, rad), e_fin


def two_pass_groups(n_tilde: np.ndarray, ok: np.ndarray, eps_sum: Fraction) -> np.ndarray:
    """The small groups of §8.2 (public: released counts and shares): ``ñ_g·ε_sum >=
    TWO_PASS_ROWS``, none unless they pool ``Σ ñ_g·TWO_PASS_CLIP·ε_sum >= SMALL_STEP_ROWS/2``."""
    two = ok & (n_tilde * float(eps_sum) >= TWO_PASS_ROWS)
    if float(n_tilde[two].sum()) * float(eps_sum * TWO_PASS_CLIP) < SMALL_STEP_ROWS / 2:
        two[:] = False
    return two


def scale_levels(dev: np.ndarray, unit: float) -> np.ndarray:
    """The level ``ℓ = ⌈log2(|dev|/unit)⌉`` of each deviation (``|dev| <= unit·2^ℓ``, exact on
    the float ``|dev|/unit`` by ``frexp``), clipped to ``[−F − 1, F + 1]`` (``F`` =
    :data:`SCALE_OCTAVES`; 0 and underflow at ``−F − 1``, ``inf`` at ``F + 1``); a function of the
    row and the public ``unit`` alone."""
    with np.errstate(over="ignore", invalid="ignore"):
        a = np.abs(dev) / unit
    m, e = np.frexp(a)  # a = m·2^e, m in [1/2, 1); a = 0: (0, 0); inf: (inf, 0)
    lev = np.where(m == 0.5, e - 1, e).astype(np.int64)
    lev = np.where(a == 0, -SCALE_OCTAVES - 1, lev)
    lev = np.where(np.isinf(a), SCALE_OCTAVES + 1, lev)
    return np.clip(lev, -SCALE_OCTAVES - 1, SCALE_OCTAVES + 1)


def scale_utility(levels: np.ndarray, grp: np.ndarray, n_groups: int) -> np.ndarray:
    """§8.2 b0's utility per group (rows: groups) over the candidates ``k = −F … F``: with
    ``C_k = #{ℓ <= k}`` (:func:`scale_levels`) and ``Z = #{ℓ <= −F − 1}``, ``u_k = −max(2·(n_g −
    C_k), 2·(C_{k−1} − Z))`` (``C_{−F−1} = Z``): twice the larger of the rows beyond the
    candidate and the rows between the bottom and the candidate below it, the mass utility of a
    median distance (:func:`~privagg.mechanisms.mean_small.centred_spread_mass_utility` at octave
    steps). Adding a row of group g moves ``n_g − C_k`` and ``C_{k−1} − Z`` by 0 or 1 each, so
    every ``u_k`` of g by 0, −1 or −2 and no other group's: sensitivity 2, parallel over groups."""
    f = SCALE_OCTAVES
    w = 2 * f + 3  # level −F − 1 … F + 1
    hist = np.bincount(grp * w + (levels + f + 1), minlength=n_groups * w).reshape(n_groups, w)
    c = np.cumsum(hist, axis=1)
    n_g, z = c[:, -1:], c[:, :1]
    cand = c[:, 1 : w - 1]  # C_k, k = −F … F
    inner = np.concatenate([z, cand[:, :-1]], axis=1)  # C_{k−1}
    return -np.maximum(2 * (n_g - cand), 2 * (inner - z))


def scale_offsets(e_s: Fraction) -> np.ndarray:
    """The public offsets ``−SCALE_PENALTY·(4/ε_s)·|k|`` of §8.2 b0 over ``k = −F … F``."""
    k = np.abs(np.arange(-SCALE_OCTAVES, SCALE_OCTAVES + 1, dtype=np.float64))
    return -SCALE_PENALTY * (4.0 / float(e_s)) * k


def snap_scales(k: np.ndarray, two: np.ndarray) -> np.ndarray:
    """Post-processing of the released picks ``k`` of the groups ``two``: a pick within
    :data:`SCALE_DEAD_ZONE` octaves of their lower median takes the median (groups on one
    scale then share one unit, as before the per-group scale); 0 for the other groups."""
    out = np.zeros(k.shape, dtype=np.int64)
    if two.any():
        ref = _lower_median(k[two])
        out = np.where(two, np.where(np.abs(k - ref) <= SCALE_DEAD_ZONE, ref, k), 0)
    return out


def _lower_median(v: np.ndarray) -> int:
    """The lower median of a non-empty integer vector."""
    v = np.sort(v)
    return int(v[(v.size - 1) // 2])


def scale_picks(dev: np.ndarray, grp: np.ndarray, two: np.ndarray, unit: float, e_s: Fraction,
                draws: _Draws) -> np.ndarray:
    """§8.2 b0's released picks: per group of ``two`` the report-noisy-max of
    :func:`scale_utility` plus :func:`scale_offsets` with ``DLap(4/ε_s)`` per candidate
    (sensitivity 2: ``ε_s``-DP per group, the spread floor's argument, parallel over groups;
    docs/proofs/aggregate_mean.md §8.2), 0 for the other groups. ``dev``, ``grp``: the rows of
    the two-pass groups, their deviations from the public first means."""
    n_groups = two.size
    if not two.any():
        return np.zeros(n_groups, dtype=np.int64)
    util = scale_utility(scale_levels(dev, unit), grp, n_groups)
    # one row of draws per group (the others' discarded), as every per-group draw here
    noisy = util + scale_offsets(e_s)[None, :] + draws.dlap("two_scale", 4 / e_s, util.shape)
    return np.where(two, np.argmax(noisy, axis=1) - SCALE_OCTAVES, 0)


def group_scales(dev: np.ndarray, grp: np.ndarray, two: np.ndarray, unit: float, e_s: Fraction,
                 draws: _Draws) -> np.ndarray:
    """Each group's scale exponent ``k_g`` (its scale is ``unit·2^k_g``): :func:`scale_picks`,
    then :func:`snap_scales`."""
    return snap_scales(scale_picks(dev, grp, two, unit, e_s, draws), two)


def scale_groups(two: np.ndarray, n_tilde: np.ndarray, e_scale: Fraction) -> np.ndarray:
    """The two-pass groups that run §8.2 b0 (public): ``ñ_g·ε_s >= SCALE_ROWS``."""
    return two & (np.asarray(n_tilde, dtype=np.float64) * float(e_scale) >= SCALE_ROWS)


def pass_scales(dev: np.ndarray, grp: np.ndarray, two: np.ndarray, n_tilde: np.ndarray,
                unit: float, e_scale: Fraction, draws: _Draws) -> tuple[np.ndarray, np.ndarray]:
    """§8.2 b0's scale ``w_g = unit·2^{k_g}`` per group (public) and the groups that ran the
    step (:func:`scale_groups`): their picks from :func:`group_scales`, the other groups of
    ``two`` the lower median of those picks (0 when none ran), the rest 0."""
    scaled = scale_groups(two, n_tilde, e_scale)
    k = group_scales(dev, grp, scaled, unit, e_scale, draws)
    if scaled.any():  # post-processing of released picks
        k = np.where(two & ~scaled, _lower_median(k[scaled]), k)
    return np.ldexp(unit, k), scaled


def _second_pass(xg: np.ndarray, gg: np.ndarray, seg: np.ndarray, first: np.ndarray,
                 center: np.ndarray, rr: np.ndarray, s: float, two: np.ndarray,
                 n_tilde: np.ndarray, eps_sum: Fraction, draws: _Draws) -> tuple:
    """§8.2 for the groups ``two`` (public), whose first pass released ``first`` at
    ``TWO_PASS_FIRST·ε_sum``: each group's scale ``w_g = s·2^{k_g}`` (``s`` the caller's public
    unit ``min(spread, TWO_PASS_UNIT·R)``; ``k_g`` from :func:`group_scales` at
    ``ε_s = TWO_PASS_SCALE·ε_sum`` for the groups of :func:`scale_groups`, the others take their
    median pick), a clipping range per side in units of ``w_g``, pooled over the groups ``two``
    (the side utilities of ``(x − first[g])/w_g`` around 0 over the multiples K in SIDE_KS;
    ``TWO_PASS_CLIP·ε_sum``), then each group's clipped sum around ``first[g] + w_g·(K_hi −
    K_lo)/2`` with the radius ``grid_up(w_g·(K_hi + K_lo)/2)`` at the rest of its ``ε_sum``.
    Returns the new (center, radius, ε tuple, ε index, sums, sensitivities, exponents) per group
    (the other groups' entries of center and radius unchanged, their ε index 0)."""
    from .mean_small import base_measure

    e_clip = eps_sum * TWO_PASS_CLIP
    e_scale = eps_sum * TWO_PASS_SCALE
    e_two = eps_sum * (1 - TWO_PASS_FIRST - TWO_PASS_CLIP)  # without the scale step
    g_two = int(np.count_nonzero(two))
    rows = two[gg]
    grow = gg[rows]
    dev = xg[rows] - first[grow]  # deviations from a public per-group value
    w, scaled = pass_scales(dev, grow, two, n_tilde, s, e_scale, draws)
    with np.errstate(over="ignore", invalid="ignore"):
        ds = np.sort(dev / w[grow])
    ks = np.asarray(SIDE_KS, dtype=np.float64)
    e_fin = e_two - e_scale if scaled.any() else e_two  # the scaled groups' second pass
    cost = -float(e_clip) * SIDE_COST * g_two * ks / float(e_fin)
    pick = draws.em("small_clip_2", side_utilities(ds, 0.0, ks), base_measure(cost),
                    2 * e_clip)
    k_hi, k_lo = float(ks[int(pick[0])]), float(ks[int(pick[1])])
    with np.errstate(over="ignore", invalid="ignore"):
        c2 = _finite(first + w * ((k_hi - k_lo) / 2))
        rad2 = np.minimum(_grid_up(w * ((k_hi + k_lo) / 2)), 2.0**1000)
    c2 = np.where(two, c2, center)
    rr2 = np.where(two, rad2, rr)
    which = np.where(scaled, 2, two.astype(np.int64))
    e_sums = (eps_sum, e_two, e_two - e_scale)
    # the first pass drew every group's noise at index 0 or 1; the second pass releases only
    # the groups ``two`` (the others get sensitivity 1 and their draw is discarded)
    total, sens, e_s, e_g = _noisy_range_sums(xg - c2[gg], gg, seg, rr2, rr2, two, e_sums,
                                              which, draws)
    return c2, rr2, e_sums, which, total, sens, e_s, e_g


@quiet_numerics
def friendly_means(gv: Any, *, epsilon: Any, delta: Any,
                   contribution: Contribution = Contribution(), rng: np.random.Generator,
                   n_hat: Any = None, n_scale: Any = None, medians: Callable | None = None
                   ) -> MetricResult:
    """The mean of every group, with no bounds: 1-D FriendlyCore locate + clipped sum per group.

    Parameters
    ----------
    gv : GroupedValues or KeptRows
        The bounded rows of the column (finite floats), sorted by group id, or an engine's kept
        rows (Spark: :class:`~privagg.mechanisms.grouped.KeptRows`).
    epsilon, delta : Fraction (or float)
        This metric's budget; ``delta > 0`` (the core-size bound fails with probability δ).
    contribution : Contribution
        ``max_groups`` ℓ0, ``max_rows`` ℓ∞, ``replace``.
    rng : numpy.random.Generator
        Already resolved by the caller.
    n_hat, n_scale : array and Fraction, optional (together)
        Released noisy counts of each group's rows *in this column* (``p_g + DLap(n_scale)``:
        the query's ``count()`` pair, :func:`privagg.mechanisms.aggregate.aggregate`): used
        instead of the mean's own count (step 1, not drawn), and the small-group plan drops its
        second count (docs/proofs/aggregate_mean.md §8.1; post-processing of a release).
    medians : callable, optional
        ``medians(n_hat, low, high)`` → per-group medians of the column released by another
        mechanism (NaN where none), called once, after the small-group plan's range is drawn and
        before its sums, with the released counts and each group's range (NaN where ⊥): the
        small groups with a median take their sums around it (§8.3; ``extra["median_centred"]``,
        and ``extra["window_low"]``/``["window_high"]`` the ranges it was given). Not called
        without small groups.

    Returns
    -------
    MetricResult
        ``value``: the mean per group (NaN where ⊥); ``ok``/``reason``: ⊥ when the small-group
        plan's combined count is below its floor, or the noisy core is too small and the group
        below the fallback's ``n̂ − t_T >= FALLBACK_CAPS·K`` (or its floor found no scale);
        a group with a too small core above it releases around the center 0
        (``extra["core_fallback"]``). ``low``/``high``: a
        noise-only interval holding with probability >= 0.95 per group: it covers the group's
        *clipped* mean ``θ_g = (1/n_g)·Σ clip(x, ĉ_g − R_lo, ĉ_g + R_hi)`` (the final sum's noise, the
        count noise, the rounding), **not** the clipping bias ``θ_g − x̄_g`` (``extra["clip_low"]``,
        ``extra["clip_high"]``: the clipping range ``[ĉ − R_lo, ĉ + R_hi]``) nor the sampling error. ``extra``: ``n_hat``
        (noisy counts), ``clip_radius`` (the sum's sensitivity before rounding: ``max(R_lo + s,
        R_hi − s)``), ``center`` (the sum's center ``ĉ_g + s_g``), ``radius`` (``r_g``),
        ``clip_low``/``clip_high``, ``m_hat`` (noisy core sizes), ``small_plan``,
        ``core_fallback`` (step 5 around 0), all public.

    Privacy
    -------
    Add/remove one row: every group runs its own (ε'_g, δ'_g)-DP mechanism on its own rows
    (``docs/proofs/aggregate_mean.md``; ``(ε'_g, δ'_g)`` the largest over the plans, one chosen
    per group from its released ``n̂``: adaptive composition, §1.7), so the release is
    (ε'_g, δ'_g)-DP (parallel composition).
    A neighbour that changes ``k_g`` rows of group g, ``Σ k_g <= N``, ``k_g <= K``
    (:class:`FriendlyMeansPlan`), gets
    ``ε = N·ε'_g``, ``δ = N·e^{(K−1)ε'_g}·δ'_g`` (group privacy within a group, basic composition
    over groups): ``MetricResult.epsilon/delta``, at most the given (ε, δ).
    """
    where = "friendly_means"
    fp = friendly_means_plan(epsilon, delta, contribution, where=where)
    if (n_hat is None) != (n_scale is None):
        raise fail(where, "n_hat", "given together with n_scale", n_hat)
    if n_scale is not None:
        n_scale = _frac(n_scale)
        if n_scale <= 0:
            raise fail(where, "n_scale", "a number > 0", n_scale)
        n_hat = np.asarray(n_hat, dtype=np.float64)
        if n_hat.shape != (int(gv.n_groups),) or not np.all(np.isfinite(n_hat)):
            raise fail(where, "n_hat", "finite noisy counts, one per group", f"shape {n_hat.shape}")
    return _friendly_means(gv, fp, _Draws(rng), n_hat, n_scale, medians)


class _LocalRows:
    """The :class:`~privagg.mechanisms.grouped.KeptRows` of rows held in numpy
    (:class:`~privagg.mechanisms.grouped.GroupedValues`): the per-row functions of this module
    over all rows at once, with one reused buffer of ``x − ĉ[g]`` for the spread floor, the side
    histogram and the range sums (the sums consume it)."""

    def __init__(self, gv: GroupedValues) -> None:
        self.n_groups = int(gv.n_groups)
        self.x = np.asarray(gv.values, dtype=np.float64)
        self.grp = np.asarray(gv.group, dtype=np.int64)
        self.off = _segments(self.grp, self.n_groups)
        self._dev: np.ndarray | None = None
        self._center: np.ndarray | None = None
        self._scratch: np.ndarray | None = None

    def present_counts(self) -> np.ndarray:
        return np.diff(self.off)

    def subsample(self, rate: np.ndarray, draws: _Draws) -> tuple[np.ndarray, np.ndarray]:
        take = draws.uniform("subsample", self.grp) < np.repeat(rate, np.diff(self.off))  # = rate[grp]
        return self.x[take], self.grp[take]  # the group ids stay sorted (take keeps the order)

    def _deviations(self, center: np.ndarray) -> np.ndarray:
        if self._dev is None or self._center is not center:
            dev = np.take(center, self.grp)
            np.subtract(self.x, dev, out=dev)  # x − ĉ[g]; may be ±inf for far rows
            self._dev, self._center = dev, center
        return self._dev

    def octave_counts(self, center: np.ndarray, upper: np.ndarray) -> np.ndarray:
        return _octave_counts(self._deviations(center), np.take(1.0 / upper, self.grp), self.grp,
                              self.n_groups)

    def side_histogram(self, center: np.ndarray, upper: np.ndarray, top_level: int) -> np.ndarray:
        scratch = np.take(1.0 / upper, self.grp)
        hidx = side_bins(self._deviations(center), self.grp, scratch, top_level)
        self._scratch = scratch  # hidx's memory: reused by the range sums
        return np.bincount(hidx, minlength=2 * self.n_groups * side_width(top_level))

    def range_sums(self, center: np.ndarray, shift: np.ndarray, r_lo: np.ndarray, r_hi: np.ndarray,
                   e_s: np.ndarray) -> np.ndarray:
        dev = self._deviations(center)
        self._dev = self._center = None  # consumed
        dev -= np.take(shift, self.grp)
        terms = range_terms(dev, self.grp, r_lo, r_hi, e_s, scratch=self._scratch)
        self._scratch = None
        return _exact_group_sums(terms, self.off)


def _friendly_means(gv: Any, fp: FriendlyMeansPlan, draws: _Draws,
                    n_hat: np.ndarray | None = None, n_scale: Fraction | None = None,
                    medians: Callable | None = None) -> MetricResult:
    plan = fp.group  # the count share is the same in every plan
    plans = fp.plans
    n_groups = int(gv.n_groups)
    rows = _LocalRows(gv) if isinstance(gv, GroupedValues) else gv  # else a KeptRows (Spark)
    sizes = rows.present_counts()
    nan = np.full(n_groups, np.nan)

    # 1. count (or the query's released count() pair's p̃: §8.1, post-processing)
    if n_hat is None:
        n_scale = None
        n_hat = sizes + draws.dlap("count", 1 / plan.eps_count, n_groups)
    else:
        n_hat = np.rint(np.asarray(n_hat, dtype=np.float64)).astype(np.int64)
    live = n_hat >= 1
    n_pos = np.maximum(n_hat, 1).astype(np.float64)
    # the plan of each group: a public function of its released n̂ (§1.7)
    which = fp.choose(n_hat)
    m_loc = np.asarray(fp.m_locates, dtype=np.int64)[which]
    shift = np.array([p.core_count_shift for p in plans], dtype=np.int64)[which]

    # 2. Poisson subsample of public rate min(1, m_locate / n̂); rate 1 (every row) in the groups
    # of the small-group plan, which reads all their rows (public: a function of n̂)
    small = fp.small(n_hat)
    rate = np.where(small, 1.0, np.where(live, np.minimum(1.0, m_loc / n_pos), 0.0))
    sub_v, sub_g = rows.subsample(rate, draws)  # sub_g is sorted
    gdt = np.int16 if n_groups < 2**15 else np.int32 if n_groups < 2**31 else np.int64
    # sorted by (group, value bits in their total order): −0.0 before +0.0, which no later
    # step tells apart; the group ids of a group-sorted array are already in place
    sv, sg = _group_value_sort(sub_v, sub_g, n_groups, gdt), sub_g
    del sub_v
    in_small = small[sg]
    x_small, g_small = sv[in_small], sg[in_small]  # all the rows of the small groups (rate 1)
    del in_small
    soff = _segments(sg, n_groups)
    m_sub = np.diff(soff)

    # 3. radius: report-noisy-max of the consecutive-pair counts in a keyed random order
    bits = np.ascontiguousarray(sv).view(np.uint64)[:, None]
    keys = draws.keys("order")
    # the occurrence index j of each copy among the group's identical values (hashed with it,
    # else copies are neighbours in the order and the consecutive differences 0): the copies of
    # a (group, bits) are one run of the (group, bits)-sorted values, so j is the position in
    # its run (which copy gets which j does not matter: they are identical)
    rep = (bits[1:, 0] == bits[:-1, 0]) & (sg[1:] == sg[:-1])
    occ = _run_positions(rep) if rep.any() else None
    h = row_hash(bits, keys, occ)
    # sorted by (group, hash), ties (equal hashes of distinct (bits, j) in a group) by value
    # bits, then j: a total order of the (group, bits, j), which are distinct
    ho = _group_hash_order(h, sg, bits[:, 0], occ, n_groups, gdt)
    hv, hg = sv[ho], sg[ho]
    del ho, h, occ
    n_r = RADIUS_EXPONENTS.size
    counts = _pair_bin_counts(hv, hg, n_groups, n_r)
    del hv, hg
    counts = np.cumsum(counts.reshape(n_groups, n_r + 1), axis=1)[:, :n_r]
    # the utility's target ⌊(m_pub − 1)/2⌋ from a public lower bound on the rows taken: with
    # m_pub above the true count the plateau of too-large radii comes closer to the target
    m_pub = np.maximum(np.minimum(n_hat - fp.target_tail, m_loc), 1)
    m_gate = np.minimum(n_hat - fp.count_tail, m_loc)
    noisy = pair_utility(counts, m_pub) + draws.dlap_by(
        "radius", tuple(4 / p.eps_select for p in plans), which, n_r)
    radius = np.exp2(RADIUS_EXPONENTS[np.argmax(noisy, axis=1)] / 4.0) * pair_factor(1)

    # 4. locate: BasicFilter with |a − b| <= r, noisy core size, core average on a grid
    friends = friend_counts_1d(sv, sg, soff[:-1], soff[1:], radius)
    num, den = keep_probabilities(friends, alpha=0, sizes=m_sub[sg])
    core = draws.bernoulli("filter", num, den, sg)
    m_core = np.bincount(sg[core], minlength=n_groups)
    m_hat = m_core + draws.dlap_by("core_count", tuple(1 / p.eps_core_count for p in plans),
                                   which)
    m_low = m_hat - shift
    m_sel = np.asarray(fp.m_selects, dtype=np.int64)[which]
    enough = live & (m_gate >= m_sel)  # public (n̂): too few rows for the radius selection → ⊥
    ok = enough & (m_low >= M_MIN)
    ml = np.maximum(m_low, 1).astype(np.float64)
    eps_cms = tuple(p.eps_core_mean for p in plans)
    eps_cm_lo = np.array([_float_down(e) for e in eps_cms])[which]
    sens_m = 2.0 * radius / ml * _SAFETY
    e_c = _grid_exponent(np.minimum(sens_m / eps_cm_lo, sens_m))
    g_c = np.ldexp(1.0, e_c)
    e_t = np.frexp(2.0 * radius)[1] - TERM_BITS  # term grid 2^e_t, 2r < 2^(e_t + TERM_BITS)
    cidx = np.flatnonzero(core)
    cg = sg[cidx]
    first = np.searchsorted(cg, np.arange(n_groups))
    has = m_core > 0
    anchor = np.zeros(n_groups)
    anchor[has] = sv[cidx[first[has]]]  # the least core value of the group
    y = sv[cidx] - anchor[cg]  # |y| <= 2r: core values are pairwise within 2r
    terms = np.rint(np.ldexp(y, -e_t[cg])).astype(np.int64)
    tsum = _exact_group_sums(terms, _segments(cg, n_groups))
    big = np.abs(anchor) >= np.ldexp(1.0, e_c + 53)  # anchor already a multiple of g
    f = np.where(big, 0.0, np.ldexp(anchor, -e_c))
    ka = np.rint(f)
    frac = f - ka
    a_grid = np.where(big, anchor, np.ldexp(ka, e_c))
    v = np.ldexp(tsum.astype(np.float64), e_t - e_c) / np.maximum(m_core, 1)
    k_off = np.where(has, np.rint(frac + v), 0.0).astype(np.int64)
    spread_g = 2.0 * radius / g_c
    lam = 0.5 + (_U * 2.0 * radius + np.ldexp(0.5, e_t)) / g_c + 5 * _U * (spread_g + 1.0)
    sens_cg = _quantize_up((spread_g / ml + 2.0 * lam) * _SAFETY + 2.0**-20)
    sens_cg = np.where(ok, sens_cg, 1)
    z_c = draws.dlap_scaled("core_mean", sens_cg, eps_cms, which)
    center = _finite(a_grid + np.ldexp((k_off + z_c).astype(np.float64), e_c))
    center = np.where(ok, center, 0.0)
    t_c = sens_cg.astype(np.float64) / np.array([float(e) for e in eps_cms])[which] * g_c
    bound = t_c * (math.sqrt(2.0) + 2.0 * math.log(1.0 / BETA_LOCATE))

    # a group whose core is ⊥ runs step 5 around the public center 0 from U = 2⁻⁶⁰ (§1.8)
    # (only with n̂ − t_T >= FALLBACK_CAPS·K: enough rows for the floor to find a scale)
    eps_floors = tuple(p.eps_sum * SHARE_FLOOR for p in plans)
    caps = floor_caps(eps_floors, which)
    n_low = np.maximum(n_hat - fp.target_tail, 0)
    core_bot = enough & ~ok
    fallback = core_bot & (n_low >= FALLBACK_CAPS * caps)
    center = np.where(fallback, 0.0, center)
    upper = np.where(ok, _grid_up(np.where(ok, radius + bound, 1.0)), FALLBACK_UNIT)
    ok = ok | fallback

    # 5a. the spread floor (§1.9): on tied data (a 0/1 column) the core is one atom and U its
    # tiny scale; the floor lifts U to an octave of the rows beyond it, on all the group's rows
    k_floor = floor_pick(rows.octave_counts(center, upper), n_low, eps_floors, which, draws)
    upper = np.ldexp(upper, np.where(ok, k_floor, 0))
    # a fallback group whose floor stayed at 2⁻⁶⁰ found no scale at this ε: ⊥, not a mean of 0
    unscaled = fallback & (k_floor == 0)
    ok &= ~unscaled

    # 5. estimate: a clipping range per side of ĉ, each by report-noisy-max over the edges
    a_top = np.maximum(0, np.ceil(np.log2(TOP_FACTOR * np.sqrt(n_pos)))).astype(np.int64)
    top_level = 4 * int(a_top.max(initial=0))
    width = 2 * a_top + QUANTILE_GRID + 1  # edges per group: U·2^{k/2}, k = 2A … 1; U·2^{−j/4}
    j_max = int(width.max(initial=1))
    nb = side_width(top_level)
    # bin index (2g + side)·nb + lb, lb the clipped grid level (:func:`grid_levels`, in place)
    # of fl(u)², u = |dev|/U: level <= k iff fl(u)² <= 2^{k/2}, i.e. about u <= 2^{k/4};
    # side 0: x >= ĉ (the upper side), 1: x < ĉ (:func:`side_bins`)
    hist = rows.side_histogram(center, upper, top_level).reshape(n_groups, 2, nb)
    suffix = np.cumsum(hist[:, :, ::-1], axis=2)[:, :, ::-1]  # suffix[g, s, i] = #{bin >= i}
    jj = np.arange(j_max)[None, :]
    two_a = 2 * a_top[:, None]
    edge_level = np.where(jj <= two_a, 4 * a_top[:, None] - 2 * jj, two_a - jj)
    valid = jj < width[:, None]
    col = np.clip(edge_level + 1 - (_LEVEL_LOW - 1), 0, nb - 1)
    lam = side_penalty(plan.eps_quantile)
    r_side = []
    for s_i, name in ((0, "quantile_hi"), (1, "quantile_lo")):
        beyond = np.take_along_axis(suffix[:, s_i, :], col, axis=1)  # T_j: rows beyond edge j
        util = -beyond - lam * (edge_level - _LEVEL_LOW)  # integers; sensitivity 1 in T_j
        noisy = util + draws.dlap(name, 2 / plan.eps_quantile, (n_groups, j_max))
        noisy = np.where(valid, noisy, np.iinfo(np.int64).min)
        j_sel = np.argmax(noisy, axis=1)
        level_sel = np.take_along_axis(edge_level, j_sel[:, None], axis=1)[:, 0]
        r_side.append(np.where(ok, upper * np.exp2(level_sel / 4.0), 1.0))
    r_hi, r_lo = r_side

    eps_sums = tuple(p.eps_sum * (1 - SHARE_FLOOR) for p in plans)  # SHARE_FLOOR: the floor
    # the sum's center moves toward the longer side (§7: sensitivity max(R_lo + s, R_hi − s)
    # against the count noise's weight |x̄ − ĉ − s|; public)
    eps_f = np.array([_float_down(e) for e in eps_sums])[which]
    s_up = recentre_shift(r_lo, r_hi, eps_f, float(1 / plan.eps_count if n_scale is None else n_scale))
    s_up = np.where(ok, s_up, 0.0)
    c_hat = center
    center = _finite(center + s_up)
    r_lo, r_hi = r_lo + s_up, r_hi - s_up
    clip_r, e_s = range_grid(r_lo, r_hi)
    s_h = rows.range_sums(c_hat, s_up, r_lo, r_hi, e_s)  # Σ terms of x − ĉ − s, units 2^e_s
    total, sens_sg, e_s, e_g = _release_range_sums(s_h, clip_r, e_s, ok, eps_sums, which, draws)
    g_s = np.ldexp(1.0, e_g)
    mean = _finite(center + total / n_pos)

    # the noise-only interval (docs/proofs/mean.md §8, per group)
    t_q = np.zeros(n_groups)
    key = sens_sg * len(plans) + which
    for kk in np.unique(key):
        sel = key == kk
        s_i, k_i = divmod(int(kk), len(plans))
        t_q[sel] = _dlap_two_sided(float(Fraction(s_i) / eps_sums[k_i]), 0.9 * BETA)
    k_c = _dlap_two_sided(float(1 / plan.eps_count if n_scale is None else n_scale), 0.1 * BETA)
    half = noise_half_width(mean, center, clip_r, n_pos, t_q * g_s, k_c,
                            np.ldexp(0.5, e_s) + 8.0 * _U * clip_r, g_s)
    reason = np.full(n_groups, None, dtype=object)
    for i, nd in enumerate(fp.needs):
        reason[core_bot & ~fallback & (which == i)] = (
            f"group too small for the unbounded mean at this ε: noisy core size below "
            f"{nd} (the locate step needs about {nd} agreeing rows)")
    for i, p in enumerate(plans):
        reason[unscaled & (which == i)] = (
            f"group too small for the unbounded mean at this ε: no value or cluster held by most "
            f"of its rows, and its spread not found (the spread step needs about "
            f"{floor_cap(p.eps_sum * SHARE_FLOOR)} rows away from 0)")
    reason[live & ~enough] = (
        f"group too small for the unbounded mean at this ε: noisy count n̂ below "
        f"{fp.m_selects[0] + fp.count_tail} (the radius selection needs about "
        f"{fp.m_selects[0]} rows)")
    reason[~live] = ("group too small for the unbounded mean at this ε: noisy count n̂ < 1")
    low, high = _finite(mean - half), _finite(mean + half)
    c_low, c_high = _finite(center - r_lo), _finite(center + r_hi)
    fc = ok.copy()
    two_pass = np.zeros(n_groups, dtype=bool)
    centred = np.zeros(n_groups, dtype=bool)
    # the small-group plan (§8) for the groups whose n̂ is below plan 0's radius selection
    # (drawn after every FriendlyCore draw: the other groups' releases are unchanged)
    extra: dict[str, Any] = {}
    if small.any():
        hook = None
        if medians is not None:
            fc_low, fc_high = np.where(ok, c_low, nan), np.where(ok, c_high, nan)

            def hook(s_low: np.ndarray, s_high: np.ndarray) -> np.ndarray:
                return medians(n_hat.astype(np.float64), np.where(small, s_low, fc_low),
                               np.where(small, s_high, fc_high))
        sm = _small_means(x_small, g_small, sizes, n_hat, small, fp, draws, n_scale, hook)
        s_ok = sm["ok"]
        mean = np.where(small, sm["value"], mean)
        low = np.where(small, sm["low"], low)
        high = np.where(small, sm["high"], high)
        center = np.where(small, sm["center"], center)
        clip_r = np.where(small, sm["radius"], clip_r)
        c_low = np.where(small, sm["clip_low"], c_low)
        c_high = np.where(small, sm["clip_high"], c_high)
        if medians is not None:
            extra = {"window_low": np.where(small, sm["window_low"], c_low),
                     "window_high": np.where(small, sm["window_high"], c_high)}
        ok = np.where(small, s_ok, ok)
        two_pass = small & sm["two_pass"]
        centred = small & sm["median_centred"]
        reason[small] = None
        reason[small & ~s_ok] = (
            f"group too small for the unbounded mean at this ε: combined noisy count below "
            f"{fp.small_floor} (SMALL_MIN_ROWS/ε per group)")
    return MetricResult(
        value=np.where(ok, mean, nan),
        low=np.where(ok, low, nan),
        high=np.where(ok, high, nan),
        ok=ok,
        reason=reason,
        epsilon=_float_up(fp.epsilon),
        delta=_float_up(fp.delta),
        extra={"n_hat": n_hat.astype(np.float64),
               "clip_radius": np.where(ok, clip_r, nan),
               "center": np.where(ok, center, nan),
               "radius": np.where(live & ~small, radius, nan),
               "clip_low": np.where(ok, c_low, nan),
               "clip_high": np.where(ok, c_high, nan),
               "m_hat": np.where(live & ~small, m_hat.astype(np.float64), nan),
               "small_plan": small & ok,
               "two_pass": two_pass & ok,
               "core_fallback": fallback & ~small & ok,
               **({} if medians is None else {"median_centred": centred & ok}),
               **{k: np.where(ok, v, nan) for k, v in extra.items()}},
    )
