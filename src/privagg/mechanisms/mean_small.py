"""The small-sample coordinate-wise plan of :func:`privagg.private_mean` (issue 11, items 1, 2, 4).

Chosen from the released count (public, like every plan switch of ``private_mean``): when
``radius=None`` (any engine: in memory or Spark), ``d <=`` :data:`COORD_DMAX` and ``n̂·ε/d <``
:data:`COORD_SAMPLE_1D` (``d = 1``), :data:`COORD_SAMPLE` (``d = 2 <= COORD_NARROW_D``) or ``<``
:data:`COORD_WIDE_MAX` (``d >= 3``)
(:func:`plan_runs`; ⊥ below ``n̂ < max(COORD_MIN·d, COORD_MIN_COUNT)/ε``), and only when every
Laplace step gets at least :data:`STEP_EPS_MIN` (:func:`plan_possible`, ε >= about 2⁻³⁴). Proof:
docs/proofs/mean.md §11. Budget (:func:`coordinate_budget`, public: ε, δ, d and whether
``n̂·ε/d < COORD_LOW``): ε/20 for the count ``n̂`` (``mean._SHARE_COUNT``), ε/40 for a noisy count of the rows outside the
clipping box, ``ε_sel`` = :data:`COORD_SHARE_SELECT` of ε (:data:`COORD_SHARE_SELECT_LOW` below
COORD_LOW) for all the selections as ONE group of exponential mechanisms composed in zCDP
(``ρ = rho_for(ε_sel, δ/2)``, ``ρ/d`` per column split by :data:`COORD_SHARES`: the cell 2/5, four steps 3/20; an
exponential mechanism at ε is ε²/8-zCDP), and the rest, pure, for the d clipped sums. Per column ``j``:

1. an octave cell (location first): the exponential mechanism on :func:`cell_mass_utility_of_counts`
   (monotone: a row moves it by 0, −1 or −2, weights ``exp(ε·u/2)``: ε-bounded-range) over the
   public partition :func:`point_cells` ``(CELL_E_MIN)`` (all of the floats: the octave cells of
   :func:`octave_cells` with their left edges ``±2^e`` and the integers ±3, ±5 … ±15 split off as
   point cells), base measure :func:`point_cell_log_prior` (the cell around 0 weighs
   :data:`PRIOR_ZERO` flat cells, the points ±1 :data:`PRIOR_UNIT`, ±2 … ±15 :data:`PRIOR_INT`,
   the other points :data:`PRIOR_POINT`), a cell holding fewer
   than ``⌊n̂·CELL_FLOOR⌋`` rows losing what it lacks (:data:`CELL_FLOOR`); ``c1`` the midpoint
   of the dyadic cell (0 for the cell around 0, the point itself for a point cell);
2. a first spread ``s1``: the exponential mechanism on :func:`centred_spread_mass_utility`
   (monotone, as step 1's), around the untied median of ``|x − c1|`` over ``2^{k/4}``
   (2⁻⁹⁰⁰ … 2⁸⁰⁰), good within :data:`COORD_SPREAD_TOL` grid steps above the median; base
   measure :func:`spread_log_prior` (flat around 2⁰ and around ``c1``'s octave); for a column
   whose cell is the one around 0 or a point cell (no levels, no second spread follow) instead
   :func:`annulus_spread_utility` (monotone: weights ``exp(ε·u)``) at the three shares of steps
   2–4 (``e_s1_zero``), base measure also :func:`zero_spread_log_prior` (the annuli holding the
   point's distance to 0 weighted); in every spread step the intervals ``[c − g_k, c + g_k)`` end
   at least at ``nextafter(c, ∞)``, so the rows equal to ``c`` are tied for any ``c`` (for
   ``c ≠ 0``, ``c + 2⁻⁹⁰⁰`` rounds to ``c``: the set was empty);
3. ``L_j`` = :func:`levels_needed` ``(cell width, s1/COORD_LEVEL_DIV)`` refinement levels (public):
   each splits the cell into :data:`COORD_BRANCH` subcells (plus one on each side) and picks one
   (exponential mechanism, cell mass utility, ρ_levels/L_j each); the center is the last cell's midpoint;
4. for every column off the annulus path a second spread ``s2`` around the (refined) center
   (as step 2, its base measure flat around 2⁰ and the center's octave, the rows on the refined
   cell's left edge also tied: :func:`edge_tied_counts`); the
   spread used is ``min(s2, s1 + |c1 − center|)`` (post-processing: a wild draw of one spread
   step does not set the clip radius);
5. the clip multiple ``K_j`` from the public ladder :data:`COORD_CLIP_KS` (1.25 … 40): the
   exponential mechanism on :func:`clip_utility` (minus the rows beyond ``K_i·s_j``; monotone,
   Δ = 1: weights ``exp(ε·u)``), base measure :func:`clip_log_prior` (the public noise cost of
   the radius); then the sum of ``x_ij − c_j`` clipped to ``[−R_j, R_j]``, ``R_j = K_j·s_j`` on
   the radius grid, discrete Laplace on its grid (``_noisy_clipped_release`` with d = 1); mean
   ``c_j + sum_j/n̂``. (A fixed K = 7 clipped a 0/1 column at 7–16× its range: issue 11.) A
   column of the annulus path (cell around 0 or point cell) uses :data:`ZERO_CLIP_KS` (the grid
   points inside its annulus first) with the extra decay :data:`ZERO_CLIP_RATE`
   (:func:`clip_multiples`). 5b′: at ``d <=`` :data:`TWO_PASS_DMAX` a column of the annulus
   path spends ``ε_sum`` in two passes (:func:`two_pass_sum`): :data:`TWO_PASS_FIRST` of it around
   the atom as above, the rest around that release ``f'`` with the radius ``R + |f' − c|``
   (:func:`second_pass_range`: the second range covers the first), so the count's noise no longer
   enters the release times the offset ``|x̄ − c|``.

If some ``L_j > COORD_LEVELS`` or a refined cell stays wider than :data:`COORD_SWITCH_WIDTH`
second spreads (data far from 0 relative to their spread: 1e12 ± 1), and the FriendlyCore plan could
release at this n̂, the FriendlyCore plan runs with :func:`switch_budget` (the whole selection
group charged; basic composition; :func:`privagg.mechanisms.mean.mean_privacy_loss` takes the max
over branches). Otherwise, 4′: a refined cell wider than ``s2/CONT_RESOLVE`` (not resolved at the
data's spread: 1e6 ± 10, years 2007–2009) is refined further from ``s2`` and gets a third spread,
at the ε the switch would hand over (:func:`continuation_budget`; step 5's ε_clip was charged with
the selection group). The exponential mechanism (:func:`exponential_mechanism`) is sampled exactly
(integer base measure, certified enclosures of ``exp(−ε·g/2)``, a lazily extended uniform).
Vectorized over candidates (sorted column, ``searchsorted``); loops run over the d columns, the
distinct utility levels and the refinement levels only. Every data access is a
:class:`~privagg.engines.base.PointSource` method (``below_counts``,
``column(j).clipped_integer_sum``, ``outside_count``): exact integers, the same in every engine,
so the plan and its release law do not depend on where the rows live.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..noise.samplers import discrete_laplace

#: The coordinate plan runs when the released ``n̂·ε/d`` is below this (public; d <= COORD_NARROW_D).
COORD_SAMPLE = 2500
#: ... and for d = 1 below ``n̂·ε <`` this instead (public). Raised from 12,000 when the clip
#: ladder went on to 40 spreads (2026-12-03; before, at 3·10⁴ the coordinate plan was the worse
#: one: Exponential 2.39× → 6.50×, lognormal 2.90× → 8.23× the range oracle, FriendlyCore →
#: coordinate). Measured after (``benchmarks/mean_d1_gate.py --runs 20 --seed 20261302``, ε = 1,
#: median error over the range oracle's, FriendlyCore → coordinate, n = 1.5·10⁴ / 3·10⁴ / 10⁵):
#: Exponential(1) 5.02 / 3.33 / 1.77 → 0.68 / 0.37 / 0.22, lognormal(0, 1) 2.80 / 2.09 / 4.85 →
#: 0.71 / 0.86 / 1.67, Pareto(3) 2.11 / 3.29 / 2.27 → 0.99 / 1.64 / 1.75, 0/1 with 10 % ones
#: 0.63 / 0.51 / 0.86 → 1.03 / 0.73 / 0.93, N(0, 1) 0.15 / 0.23 / 0.32 → 0.33 / 0.51 / 0.27; but
#: lognormal(0, 1.5) 7.85 / 2.75 / 2.91 → 2.95 / 3.14 / 12.85: a fixed top multiple clips a fixed
#: share of a heavy tail, a bias that grows in standard errors with n (at ε = 100, n = 10⁴: 2.10 SE
#: against 0.02), so the gate stays below 10⁵: 2^15.
COORD_SAMPLE_1D = 32_768
#: Only for d <= this (public; measured up to d = 20: N(7, 1) and mixed units 1 … 1000 at
#: n = 1000, 3000, ε = 1, 0.98–1.98× the range oracle, where the isotropic FriendlyCore plans were
#: 0.16–0.27× on N(7, 1) but 23–61× on mixed units). Was 5, with a lower gate ``n̂·ε/d >= 150``
#: at d >= 3 (COORD_WIDE_MIN, removed): below it the FriendlyCore plans ran on columns in
#: different units, 10²–10⁴ SE off on the real tables (diabetes, cars, breast_cancer).
COORD_DMAX = 20
#: For d > COORD_NARROW_D the upper gate is COORD_WIDE_MAX instead of COORD_SAMPLE.
COORD_NARROW_D = 2
#: ... and below ``n̂·ε/d <`` this (public). Was 1500 (= mean.SCALE_MIN/mean.SHARE_SCALE, where the
#: FriendlyCore plan's scale step starts), chosen on isotropic data (the lattice {0..40}³ at
#: n = 6000: FriendlyCore 0.03–0.18 against 0.32–0.49). On tables that mix column types the
#: isotropic clip is set by the heaviest tail and the other columns pay its noise: measured
#: 2026-12-05 (16–20 runs, ε = 1, worst column over the range oracle, FriendlyCore → coordinate):
#: statsmodels' randhie (d = 10, n̂·ε/d ≈ 2019) 2.41 → 0.79; 0/1, 100·lognormal, N(50, 10),
#: Poisson(3) columns at d = 3 / 5, n·ε/d = 1500 (half the runs on each side of the old gate),
#: 3000, 6000: 11.86 / 32.16, 1.98 / 2.16, 1.99 / 3.11 → 0.73 / 0.81, 0.69 / 0.85, 0.70 / 0.80; with
#: the same four types cycled over d = 10 / 20 at 2000, 4000, 8000: 3.18–5.40 → 0.53–0.76 (probes).
#: ``benchmarks/mean_mixed_types.py`` (16 runs; docs/utility/mean.md "mixed column types"): the
#: former choice's worst cell 49.55, the shipped one's 2.40 (above the gate); the price on
#: homogeneous tables below it: 0/1 with 10 % ones at d = 3, 3000: 0.73 → 1.69, N(7, 1) at d = 10,
#: 3000: 0.25 → 0.57, Exp(1) 0.23 → 0.80. The coordinate plan grows with n·ε/d on heavy tails
#: (lognormal(0, 1.5), d = 20: 0.38 / 0.64 / 1.14 at 2000 / 4000 / 8000; d = 3, 12000: 2.18),
#: hence not higher. Isotropic Gaussian d = 10 against CoinPress (the utility grid, 20 runs):
#: n = 10⁴, ε = 2: 1.06; n = 10⁵, ε = 0.5: 1.30 (0.988 before; target 1.3, missed; 1.32 in the
#: runs of 2026-12-06, where FriendlyCore runs after the hand-over with the ε left; 1.22 / 1.26 at
#: seeds 5 / 6 after the eighth stop's mass utilities, 1.21 at seed 6 before them).
COORD_WIDE_MAX = 8192
#: Below ``n̂·ε/d <`` this the coordinate plan releases ⊥ (too few rows for any of its steps).
#: 20 until 2026-12-06: wine (178 rows, d = 10, ε = 1) released only when the count's noise put
#: n̂ above 200, and every such release had a column more than 10 standard deviations off (12 of
#: 60 runs; the octave cell at ``ε_cell·n̂/4 ≈ 2.8``); at 35, d = 10 needs 350 rows: breast_cancer's
#: 10 columns, subsamples without replacement, 30 seeds each, had such a column in 4 releases of
#: 30 at 300 rows, none at 350 and 400 (0 of 60 at 400 in the benchmark; at 40·d the 400-row cell
#: was ⊥ in 28 of 60 runs); d <= 5 keeps its floor (COORD_MIN_COUNT/ε = 200 rows at ε = 1).
COORD_MIN = 35
#: ... and below ``n̂·ε < COORD_MIN_COUNT`` (public): five scales of the count's noise when it
#: was DLap(40/ε) (ten of today's DLap(20/ε)). With the floor at COORD_MIN·d/ε alone, tiny
#: tables (n = 5 … 20) whose n̂ came out far too high released means 10+ standard deviations
#: off in most releases (the pair-count targets then lie beyond the data's pairs: a plateau);
#: P[n̂·ε >= 200 | n·ε <= 50] < 1.2 % (with DLap(40/ε)).
COORD_MIN_COUNT = 200
#: Share of ε of the noisy count of rows outside the clipping box.
COORD_SHARE_OUTSIDE = Fraction(1, 40)
#: Shares of each column's ρ/d: octave cell, first spread, all refinement levels, second spread,
#: clip multiple (step 5; until issue 11's bounded-column fix a quarter each of the first four;
#: fifths until 2026-12-06). A wrong octave cell is the one failure no later step repairs (a
#: column released 10³–10¹⁰ standard deviations off): on real columns at d = 5, n = 300, ε = 1
#: (breast_cancer, diabetes, wine; 30 seeds) fifths gave such a column in 6–9 releases of 30 even
#: with the spread bound of step 4, the cell at 2/5 (the others 3/20 each) in 0–1; at 1/3 (1/6
#: each) 0–1 as well, but 3 of 30 on further seeds where 2/5 had 0 (docs/proofs/mean.md §11).
#: Since the mass utilities (2026-12-06, eighth stop) fifths gave 1 of 30 on breast_cancer's five
#: columns at n = 300 (2/5: 0 of 30); the shares were kept.
COORD_SHARES = (Fraction(2, 5), Fraction(3, 20), Fraction(3, 20), Fraction(3, 20), Fraction(3, 20))
#: Share of ε of the selections (one ρ-zCDP group) and of δ for its conversion; below
#: ``n̂·ε/d < COORD_LOW`` (public) the selections get COORD_SHARE_SELECT_LOW (measured, 40 runs,
#: ε = 1, ratio to the range oracle: at n̂ε/d = 30 (d = 10, n = 300) 3/5 gave 1.4–1.7 against 3.0
#: for 1/2; from n̂ε/d = 60 on 1/2 was better in 7 of 9 cells, e.g. d = 3, n = 300: 0.82 vs 1.43).
COORD_SHARE_SELECT = Fraction(1, 2)
COORD_SHARE_SELECT_LOW = Fraction(3, 5)
COORD_LOW = 50
COORD_DELTA_SHARE = Fraction(1, 2)
#: Refinement until the cell is at most s1/COORD_LEVEL_DIV wide (s1 includes the first center's
#: offset from the data, so the refined cell must be far below it: 1 – 2 levels on N(7, 1), 2 on
#: 290 ± 5 and on 2000 ± 10).
COORD_LEVEL_DIV = 32.0
#: The plan switches when a refined cell stays wider than this many second spreads: for data much
#: narrower than the cell the second spread is the center's offset, at most half the cell (rounded
#: up on the grid, so the test often misses such cells: step 4′, CONT_RESOLVE, takes them).
COORD_SWITCH_WIDTH = 2.0
#: Step 4′ (the continuation): a refined cell wider than ``s2/CONT_RESOLVE`` is not resolved at
#: the data's spread. Far from 0 relative to their spread (1e6 ± 10, years 2007–2009) the levels,
#: counted from s1 (itself mostly c1's offset), stop at a cell far wider than the data, and the
#: second spread is then the center's offset (up to twice the cell's half-width on the grid): the
#: old switch test (a cell wider than COORD_SWITCH_WIDTH·s2) never fired there, and the release was
#: 10–15× the range oracle with half the runs wild (docs/utility/mean.md, twelfth stop).
CONT_RESOLVE = 4
#: The continuation's selections (more levels and a third spread of each unresolved column) as one
#: ρ-zCDP group: this share of the ε left (:func:`switch_budget`'s ε_rest), split by
#: :data:`CONT_SHARES` (levels, spread); the outside count gets COORD_SHARE_OUTSIDE of ε_rest and
#: the clipped sums the rest.
CONT_SHARE_SELECT = Fraction(1, 4)
CONT_SHARES = (Fraction(1, 2), Fraction(1, 2))
#: A spread candidate ``g_k`` is good when the untied median lies in ``(g_{k−1−tol}, g_k]``: the
#: released spread is at least the median and at most 2^{tol/4} times it.
COORD_SPREAD_TOL = 4
#: The octave cells of step 1 start at ``[−2^{CELL_E_MIN}, 2^{CELL_E_MIN})`` (around 0).
CELL_E_MIN = -1022
#: The largest clipping half-width in released spreads (``R_j = K·s_j``; ``s_j`` is 1 … 2^(5/4)
#: times the untied median distance to the center, about 0.67σ for Gaussian data). Until the
#: clip-multiple step a fixed K = 7 was the only one (measured then against K = 8 and 10 as a
#: fixed multiple); the ladder's top was 7 until 2026-12-03, when heavy tails at d = 1 (Pareto(3),
#: lognormal, n = 10⁴: hundreds of rows beyond 7 spreads, a bias that does not shrink with n)
#: lifted it to 40 (benchmarks/mean_clip_ladder.py).
COORD_K = 40.0
#: The public ladder of clip multiples of step 5 (``R_j = K_i·s_j``, one chosen per column by
#: the exponential mechanism on :func:`clip_utility`); its top is COORD_K. A fixed K = 7 was 7–16
#: times the range of a 0/1 column (``s_j`` about 1 there): 3.6–8.5× the range oracle (issue 11).
#: Above 7 the steps grow by about √2 (the base measure's cost keeps the large multiples rare
#: unless rows lie beyond the smaller ones).
COORD_CLIP_KS = (1.25, 2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 20.0, 28.0, 40.0)
#: The public cost of a clip multiple K in rows: ``COORD_CLIP_COST·K/ε_sum`` (about the noise of
#: the clipped sum, ``√2·K·s/ε_sum``, in units of the spread s, against one clipped row's bias,
#: about s): the base measure of step 5 is ``exp(−ε_clip·COORD_CLIP_COST·K/(2·ε_sum))``.
COORD_CLIP_COST = 1.4
#: Step 5's ladder for a column in the annulus path (its cell is the one around 0 or a point cell;
#: public): the grid points inside the released annulus ``[s·2^{−5/4}, s)``, ``s·2^{−j/4}`` for
#: j = 5 … 1, then 1 and COORD_CLIP_KS. There ``s`` is the outer edge of the annulus holding the
#: most untied rows (on a 0/1 column ``s ∈ (1, 2^{5/4}]``), so a radius inside it can clip nothing
#: (R = 1 on a 0/1 column); with COORD_CLIP_KS alone R was at least 1.25·s (issue 11: binary10
#: 3.7–4.1× the range oracle in docs/utility/mean_real.md).
ZERO_CLIP_KS = tuple(2.0 ** (-j / 4) for j in range(5, 0, -1)) + (1.0,) + COORD_CLIP_KS
#: ... and that path's extra base-measure decay ``exp(−ZERO_CLIP_RATE·K)`` (public). With tied data
#: every multiple that covers the untied atom clips nothing, the utility is flat there, and the
#: mechanism's temperature (1/ε_clip, about 12 rows at ε = 1, d = 1) spread the pick over the
#: ladder (median scale 3.36 on a 0/1 column with p = 0.1); 0, 0.25, 0.5 and 1 were measured
#: (benchmarks/mean_clip_ladder.py): above 0.25 a zero-inflated lognormal column lost more, at 0
#: the 0/1 columns with 30 % and 70 % ones.
ZERO_CLIP_RATE = 0.25
#: A column of the annulus path at ``d <= TWO_PASS_DMAX`` (public) spends its sum's ε in two
#: passes (step 5b′): ``TWO_PASS_FIRST·ε_sum`` around its atom ``c`` as before, then the rest
#: around that release ``f`` with the radius ``R + |f − c|``, whose range covers ``[c − R, c + R]``.
#: Around the atom the count's noise (ε/20) entered the release times the offset ``|x̄ − c|``
#: (binary50: 3.3–3.9× the range oracle at d = 1); around ``f`` the offset is the first pass's
#: error. At d >= 2 each column's ε_sum is smaller, the first pass noisier and the count a smaller
#: part of the error: two passes were worse there (0/1, 0/3, 0/7 and rating columns at d = 2–5,
#: n = 300–1000: 1.0–1.8× the one-pass error; docs/utility/mean.md, tenth stop).
TWO_PASS_DMAX = 1
#: The first pass's share of ``ε_sum`` (step 5b′; the second pass gets the rest). The first pass's
#: noise widens the second radius by about ``√2/(share·ε_sum·n)`` radii: 1/10 is near the best
#: of 1/20, 1/10 and 1/5 at n = 300–1000, ε = 1 (computed, docs/utility/mean.md, tenth stop).
TWO_PASS_FIRST = Fraction(1, 10)
#: Subcells per refinement level, and the most levels the plan runs before it switches to the
#: FriendlyCore plan (when that plan cannot release at n̂, it runs COORD_LEVELS levels instead).
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
#: Step 1's base measure gives the cell around 0 (``[−2^{CELL_E_MIN}, 2^{CELL_E_MIN})``) this many
#: flat cells' weight (issue 11, two-point columns): a column whose median is an atom at 0 (0/1,
#: counts, zero-inflated) has every tiny positive cell ``[2^e, 2^{e+1})``, e < 0, only the minority
#: count behind the cell at 0 (0.4·n for p = 0.3), and at weight 1 the ~22 flat cells' worth of
#: them took 13 of 30 picks at n = 300, d = 3 (ε_cell = 0.058): the zeros were then untied, the
#: spread collapsed to the offset and the ones were clipped. At 32 that is about 2 %.
PRIOR_ZERO = 32.0
#: Step 1's point cells (issue 11, an atom away from 0): each octave cell's finite left edge
#: ``±2^e`` is a candidate cell of its own, ``[2^e, nextafter(2^e))``, weighing this many times its
#: octave cell (which keeps the open rest ``(2^e, 2^{e+1})`` for its utility). A column whose median
#: is an atom at ``±2^e`` (0/1 with p = 0.7: the atom 1) then has exactly one cell of utility 0, the
#: point, and is treated as the cell around 0 (center the point, no levels, the annulus spread).
#: Before, the cell was ``[1, 2)``, refined to ``[1, 1 + 2⁻¹⁰)`` with the ones on its left edge,
#: and the second spread's margin was the zeros (90 rows at n = 300) at ``exp(ε·u/2)``: 4.8× the oracle.
PRIOR_POINT = 0.125
#: ... and the points ±1 (the atoms of 0/1 and ±1 columns and of counts) weigh this many flat cells.
PRIOR_UNIT = 32.0
#: Step 1's integer point cells: the integers inside the octaves ``±[2, 2^{INT_E_MAX + 1})`` that are
#: not their left edges (±3, ±5 … ±7, ±9 … ±15) are point cells too (:func:`integer_points`), and
#: every point ±2 … ±(2^{INT_E_MAX + 1} − 1) (the powers of two among them included) weighs
#: PRIOR_INT flat cells (public). Why: an atom holding the median at such an integer (a rating's
#: middle value, a count; 0/3 with 70 % threes) sat inside its octave cell, and its two spread steps
#: had only the other rows as evidence at ``exp(ε·u/2)``: wild (a column > 10× the range oracle's
#: median error) in 13–22 of 60 runs at d × n = 1 × 300 … 5 × 1000; at PRIOR_POINT = 1/8 the point 8
#: of a 0/8 column lost to the tiny cells between the atoms at d >= 3, n = 300 (17, 26 of 60).
#: Measured (benchmarks/mean_atoms_small_n.py, 60 runs; docs/utility/mean.md, eighth stop): 1/8, 1, 4,
#: 16 for every point (at 16 N(50, 10²) columns at d = 5, n = 300 went wild 1 → 14 of 60: far
#: points outweighed the data), then 4 and 8 for these small points only.
INT_E_MAX = 3
PRIOR_INT = 8.0
#: The annulus step's base measure decays as ``g^{−ZERO_SPREAD_DECAY}`` above 2⁰ (public): a
#: spread too small clips the few untied rows (bias at most their share), one too large inflates
#: the sum's noise without bound; with few untied rows (0/1, p = 0.05, n = 300: 15) the data
#: cannot decide and the flat measure gave 1.95–3.33× the oracle over three seeds, 1.26–2.02 at 0.25.
ZERO_SPREAD_DECAY = 0.25
#: ... and the annuli that hold the distance ``2^m`` from the released point to 0 (``m`` its
#: octave; the unit distance around 0 and around ±1: the ones of a 0/1 or count column) weigh this
#: many flat grid points each (public; as :data:`PRIOR_UNIT` in step 1). Why: at small n·ε/d the
#: few untied rows of an indicator cannot single out their annulus among the ~160 flat spreads:
#: 0/1 columns with 5 % / 10 % ones at n = 300, ε = 1 had a column more than 10× the range oracle's
#: median error (spread 10⁻⁷ … 10⁵: the ones clipped, or a clip radius of thousands) in 6 / 4 of 60
#: releases at d = 1, 17 / 14 at d = 3, 19 / 16 at d = 5; with the weight 32: 0 / 0, 4 / 1, 4 / 2
#: (docs/utility/mean.md, seventh stop; the price: zero-inflated lognormal columns, d = 1, n = 300,
#: median 1.25 → 1.99× the oracle over 200 runs).
ZERO_SPREAD_ATOM = 32.0
#: Step 1's occupancy floor: a cell (octave or point) holding fewer than ``τ = ⌊n̂·CELL_FLOOR⌋``
#: rows (public: the released count) gets the utility ``−(τ − rows)`` at most
#: (:func:`cell_utility_of_counts`, :func:`cell_floor`; 0 turns it off, the negative control of
#: ``tests/friendlycore/test_cell_floor.py``). Why: with the median between two atoms (0/1 or
#: 0/1000 at half and half) every empty cell between them — the tiny octaves next to 0, and the
#: point cells 1, 2, 4, … between 0 and 1000 — holds a median too; on the annulus path around an
#: empty point the zeros were as many untied rows as the far atom, the spread took the zeros'
#: distance and the far atom was clipped (0/1000: 52 of 100 releases off by more than 250).
CELL_FLOOR = Fraction(1, 8)

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


def centred_spread_utility(below_hi: np.ndarray, below_lo: np.ndarray, n: int) -> np.ndarray:
    """The spread steps' utility from ``C_k = #{c − g_k <= x < c + g_k}`` (``below_hi − below_lo``,
    :meth:`~privagg.engines.base.PointSource.below_counts` at the edges ``c ± g_k`` of the grid
    ``g``, nested in k): twice the interval utility of the median of the UNTIED distances to the
    released center ``c`` (``Z = C_0``: the rows within the grid's bottom 2⁻⁹⁰⁰ of ``c``, tied;
    :func:`centred_spread` ends every interval at least at ``nextafter(c, ∞)``, so Z >= #{x = c}),
    ``u_k = −max(0, n + Z − 2C_k, 2C_{k−1} − n − Z)`` (``C_{−1} := 0``, ``n`` the true count).
    Adding a row moves n by 1, Z by z, every C_k by c_k with ``z <= c_{k−1} <= c_k`` (tied ⇒ inside
    every interval), so each term by 1 + z − 2c_k, resp. 2c_{k−1} − 1 − z, both in {−1, 0, 1}:
    sensitivity 1 (docs/proofs/mean.md §11; the consecutive-pair utility it replaced needed 4)."""
    c = np.asarray(below_hi, dtype=np.int64) - np.asarray(below_lo, dtype=np.int64)
    t2 = np.int64(n) + c[..., :1]
    j = 1 + COORD_SPREAD_TOL
    below = np.zeros_like(c)  # C_{k−1−tol}, 0 below the grid (then 2·0 − n − Z < 0: never binds)
    below[..., j:] = c[..., :-j]
    return -np.maximum(np.maximum(t2 - 2 * c, 2 * below - t2), 0)


def centred_spread_mass_utility(below_hi: np.ndarray, below_lo: np.ndarray, n: int) -> np.ndarray:
    """Steps 2 and 4's utility off the annulus path: with ``C_k`` and ``Z = C_0`` as in
    :func:`centred_spread_utility`, ``u_k = −max(2·(n − C_k), 2·(C_{k−1−τ} − Z))`` (``C_{<0} :=
    Z``, τ = :data:`COORD_SPREAD_TOL`): twice the larger of the untied rows beyond ``g_k`` and the
    untied rows within ``g_{k−1−τ}``. Monotone: adding a row moves ``n − C_k`` by ``1 − c_k`` and
    ``C_{k−1−τ} − Z`` by ``c_{k−1−τ} − z``, both in {0, 1} (``z <= c_{k−1−τ} <= c_k``), so every
    ``u_k`` moves by 0, −1 or −2 and the weights ``exp(ε·u/2)`` (the sampler at ε) are
    ε-bounded-range. Off the good spreads it is :func:`centred_spread_utility` minus the untied
    count ``n − Z`` (the same weights up to a constant); on them (the untied median in
    ``(g_{k−1−τ}, g_k]``) it is ``>= −(n − Z)`` instead: the untied rows inside the band count
    for it, up to twice the margin in nats where they all lie there (a two-point column; data far
    from the first center ``c1``) (docs/proofs/mean.md §11)."""
    c = np.asarray(below_hi, dtype=np.int64) - np.asarray(below_lo, dtype=np.int64)
    z = c[..., :1]
    j = 1 + COORD_SPREAD_TOL
    inner = np.broadcast_to(z, c.shape).copy()  # C_{k−1−τ}, Z below the grid
    inner[..., j:] = c[..., :-j]
    return -np.maximum(2 * (np.int64(n) - c), 2 * (inner - z))


def annulus_spread_utility(below_hi: np.ndarray, below_lo: np.ndarray, n: int) -> np.ndarray:
    """The first spread's utility for a column whose released cell is the one around 0 (step 2,
    no refinement follows: its ρ share and the second spread's go to this step): with ``C_k`` and
    ``Z = C_0`` as in :func:`centred_spread_utility`, ``u_k = −(n − Z − (C_k − C_{k−1−τ}))``
    (``C_{<0} := Z``, τ = :data:`COORD_SPREAD_TOL`), minus the number of UNTIED rows outside the
    annulus ``g_{k−1−τ} <= |x − c| < g_k`` (a factor 2^{5/4} wide). Adding a tied row moves n, Z
    and every C by 1 (u unchanged); an untied row inside ``[c − g_{k−1−τ}, c + g_{k−1−τ})`` or
    outside ``[c − g_k, c + g_k)`` moves u_k by −1, one in the annulus by 0: every u_k moves by 0
    or −1 (monotone, sensitivity 1), so weights ``exp(ε·u)`` are ε-bounded-range (as
    :func:`clip_utility`; docs/proofs/mean.md §11). Its maximum is the annulus with the most
    untied rows: exactly ``[1, 2^{5/4})`` for a 0/1 column around 0, where the median utility's
    margin was the minority count at ``exp(ε·u/2)``; here it is the same count at ``exp(ε·u)``."""
    c = np.asarray(below_hi, dtype=np.int64) - np.asarray(below_lo, dtype=np.int64)
    z = c[..., :1]
    j = 1 + COORD_SPREAD_TOL
    inner = np.broadcast_to(z, c.shape).copy()  # C_{k−1−τ}, Z below the grid
    inner[..., j:] = c[..., :-j]
    return -(np.int64(n) - z - (c - inner))


def clip_outside_counts(below_lo: np.ndarray, below_hi_up: np.ndarray, n: int) -> np.ndarray:
    """``O_i = #{|x − c| > R_i}`` from ``#{x < c − R_i}`` and ``#{x < nextafter(c + R_i, ∞)}`` (=
    ``#{x <= c + R_i}``; :meth:`~privagg.engines.base.PointSource.below_counts`), n the true count."""
    return (np.int64(n) - np.asarray(below_hi_up, dtype=np.int64)) + np.asarray(below_lo, dtype=np.int64)


def clip_utility(outside: np.ndarray) -> np.ndarray:
    """Step 5's utility of the clip multiples ``K_i``: ``u_i = −O_i``, minus the number of rows
    the radius ``R_i = K_i·s`` would clip (:func:`clip_outside_counts`). Adding a row moves n by 1
    and each ``#{c − R_i <= x <= c + R_i}`` by 0 or 1, so each ``O_i`` by 0 or 1: sensitivity 1
    (docs/proofs/mean.md §11). It is monotone: on a neighbour every ``u_i`` moves the same way
    (all by 0 or −1 when a row is added), so the weights ``μ_i·exp(ε·u_i)`` (not ``exp(ε·u_i/2)``)
    give an ε-bounded-range mechanism: ``ln P(i|D)/P(i|D')`` varies over i by at most ε·1. The
    public cost of a larger radius is the base measure (:func:`clip_log_prior`)."""
    return -np.asarray(outside, dtype=np.int64)


def clip_log_prior(e_clip: Fraction, eps_sum: Fraction, ladder: tuple = COORD_CLIP_KS) -> np.ndarray:
    """``ln μ_i = −ε_clip·COORD_CLIP_COST·K_i/ε_sum`` over :data:`COORD_CLIP_KS` (public): with
    the weights ``exp(ε_clip·u_i)`` of step 5 (a monotone utility, :func:`clip_utility`), the
    exponential mechanism on ``−O_i − COORD_CLIP_COST·K_i/ε_sum`` (clipped rows against the
    clipped sum's noise in rows, both in units of the spread), the public part as base measure."""
    lam = COORD_CLIP_COST / float(eps_sum)
    return -float(e_clip) * lam * np.asarray(ladder, dtype=np.float64)


def clip_scales(spread: np.ndarray, ladder: tuple = COORD_CLIP_KS, lower: bool = False) -> np.ndarray:
    """The public products ``K_i·s_j`` (d, len(ladder)); with ``lower`` (the annulus path's
    :data:`ZERO_CLIP_KS`) lowered by 2⁻⁴⁰ (relative), so that ``2^{−j/4}·2^{k/4}`` (a grid point
    up to rounding) is not lifted to the next grid step by :func:`clip_candidates`."""
    low = 1.0 - 2.0**-40 if lower else 1.0
    return np.asarray(spread, dtype=np.float64)[:, None] * np.asarray(ladder, dtype=np.float64) * low


def clip_candidates(spread: np.ndarray, ladder: tuple = COORD_CLIP_KS, lower: bool = False) -> np.ndarray:
    """The public candidate radii ``_grid_up(K_i·s_j)`` (:func:`clip_scales`; d, len(ladder))."""
    return _radii_of(clip_scales(spread, ladder, lower))


def _radii_of(scales: np.ndarray) -> np.ndarray:
    """``_grid_up`` of every public scale (a 2-D array)."""
    from .mean import _grid_up

    return np.array([[_grid_up(v) for v in row] for row in np.asarray(scales).tolist()])


def _octave(v: np.ndarray) -> np.ndarray:
    """``⌊log2 |v|⌋`` (0 for v = 0), public post-processing of released values."""
    a = np.abs(np.asarray(v, dtype=np.float64))
    out = np.zeros(a.shape)
    nz = a > 0
    out[nz] = np.frexp(a[nz])[1] - 1
    return out


def cell_utility(sorted_col: np.ndarray, lo: np.ndarray, hi: np.ndarray, floor: int = 0) -> np.ndarray:
    """``u([a, b)) = −max(0, 2·#{x < a} − n, 2·#{x >= b} − n)`` for the cells ``[lo_k, hi_k)`` of
    one sorted column: 0 exactly when the cell holds a median, else minus the rank distance.
    Adding a row moves ``n`` by 1 and each count by at most 1, so each of the three terms by at
    most 1: sensitivity 1 (docs/proofs/mean.md §11). ``floor``: the occupancy floor of
    :func:`cell_utility_of_counts`."""
    n = sorted_col.size
    return cell_utility_of_counts(np.searchsorted(sorted_col, lo, side="left"),
                                  np.searchsorted(sorted_col, hi, side="left"), n, floor)


def cell_utility_of_counts(below_lo: np.ndarray, below_hi: np.ndarray, n: int, floor: int = 0) -> np.ndarray:
    """:func:`cell_utility` from the counts ``#{x < lo_k}``, ``#{x < hi_k}`` and ``n`` (as a
    :class:`~privagg.engines.base.PointSource` returns them, :meth:`~privagg.engines.base.PointSource.below_counts`).
    With a public ``floor`` τ > 0 a fourth term ``τ − #{x ∈ [lo_k, hi_k)}`` joins the maximum (a
    cell holding fewer than τ rows loses what it lacks; a row moves it by 0 or 1, so the
    sensitivity stays 1: step 1's occupancy floor, :data:`CELL_FLOOR`)."""
    below_lo = np.asarray(below_lo, dtype=np.int64)
    below_hi = np.asarray(below_hi, dtype=np.int64)
    above = n - below_hi
    u = np.maximum(0, np.maximum(2 * below_lo - n, 2 * above - n))
    if floor > 0:
        u = np.maximum(u, np.int64(floor) - (below_hi - below_lo))
    return -u


def cell_mass_utility(sorted_col: np.ndarray, lo: np.ndarray, hi: np.ndarray, floor: int = 0) -> np.ndarray:
    """:func:`cell_mass_utility_of_counts` on one sorted column."""
    return cell_mass_utility_of_counts(np.searchsorted(sorted_col, lo, side="left"),
                                       np.searchsorted(sorted_col, hi, side="left"), sorted_col.size, floor)


def cell_mass_utility_of_counts(below_lo: np.ndarray, below_hi: np.ndarray, n: int, floor: int = 0) -> np.ndarray:
    """Steps 1 and 3's utility: ``u([a, b)) = −max(2·#{x < a}, 2·#{x >= b}, n + τ − #{x ∈ [a, b)})``
    (τ = ``floor``, public; for τ = 0 the third term never binds). Monotone: adding a row moves the
    first two terms by 0 or 2 and the third by 0 or 1, so every ``u`` moves by 0, −1 or −2 and the
    weights ``exp(ε·u/2)`` (the sampler at ε) are ε-bounded-range (docs/proofs/mean.md §11). Off the
    cells that hold a median and at least τ rows it is :func:`cell_utility_of_counts` minus n (the
    same weights up to a constant); on them it is ``−max(2·#{x < a}, 2·#{x >= b}, …) >= −n`` instead
    of ``−n``: the rows a median cell holds count for it, up to twice the margin in nats where the
    median cell holds most rows (data far from 0 relative to its spread; an atom at the median)."""
    below_lo = np.asarray(below_lo, dtype=np.int64)
    below_hi = np.asarray(below_hi, dtype=np.int64)
    above = n - below_hi
    u = np.maximum(2 * below_lo, 2 * above)
    if floor > 0:
        u = np.maximum(u, np.int64(n + floor) - (below_hi - below_lo))
    return -u


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


@dataclass(frozen=True)
class CoordinateBudget:
    """The public budget of the plan at ``(ε, δ, d)`` (:func:`coordinate_budget`)."""

    eps_n: Fraction  #: the count (pure)
    eps_out: Fraction  #: the noisy count of rows outside the box (pure)
    eps_sel: Fraction  #: the selections as one group: (eps_sel, delta_sel)-DP via ρ-zCDP
    delta_sel: Fraction
    rho: Fraction  #: ρ = rho_for(eps_sel, delta_sel), split evenly over the d columns
    eps_sum: Fraction  #: each column's clipped sum (pure discrete Laplace)
    e_cell: Fraction  #: exponential-mechanism ε of the octave cell (per column)
    e_s1: Fraction  #: ... of the first spread
    rho_levels: Fraction  #: ρ of all refinement levels of a column together (split over L_j)
    e_s2: Fraction  #: ... of the second spread
    e_clip: Fraction  #: ... of the clip multiple (step 5)
    e_s1_zero: Fraction  #: ... of the first spread of a column whose cell is the one around 0
    #: (no levels and no second spread follow: their shares join the first spread's)

    def level_epsilon(self, levels: int) -> Fraction:
        """The exponential mechanism's ε of each of ``levels`` refinement levels."""
        return em_epsilon(self.rho_levels / max(int(levels), 1))


def em_epsilon(rho: Fraction) -> Fraction:
    """The largest float ε (as a Fraction) with ``ε²/8 <= ρ``: the exponential mechanism at ε is
    ``ε²/8``-zCDP (0 for ρ = 0)."""
    if rho <= 0:
        return Fraction(0)
    e = math.sqrt(8.0 * float(rho))
    while e > 0 and Fraction(e) ** 2 > 8 * rho:
        e = math.nextafter(e, 0.0)
    return Fraction(e)


def low_sample(n_hat: int, epsilon: Fraction, d: int) -> bool:
    """Whether the released ``n̂·ε/d < COORD_LOW`` (public): the selections' larger share."""
    return n_hat * epsilon < COORD_LOW * d


@functools.lru_cache(maxsize=256)
def _budget(epsilon: Fraction, delta: Fraction, d: int, low: bool, _key: tuple) -> CoordinateBudget:
    from .mean import _SHARE_COUNT, rho_for

    eps_n = epsilon * _SHARE_COUNT
    eps_out = epsilon * COORD_SHARE_OUTSIDE
    eps_sel = epsilon * (COORD_SHARE_SELECT_LOW if low else COORD_SHARE_SELECT)
    delta_sel = delta * COORD_DELTA_SHARE
    rho = rho_for(eps_sel, delta_sel)
    eps_sum = (epsilon - eps_n - eps_out - eps_sel) / d
    rho_j = rho / d
    a_cell, a_s1, a_lv, a_s2, a_clip = COORD_SHARES
    return CoordinateBudget(eps_n, eps_out, eps_sel, delta_sel, rho, eps_sum, em_epsilon(rho_j * a_cell),
                            em_epsilon(rho_j * a_s1), rho_j * a_lv, em_epsilon(rho_j * a_s2),
                            em_epsilon(rho_j * a_clip), em_epsilon(rho_j * (a_s1 + a_lv + a_s2)))


def coordinate_budget(epsilon: Any, delta: Any, d: int, low: bool = False) -> CoordinateBudget:
    """The plan's budget (public: ε, δ, d and :func:`low_sample`). ``ε_n = ε/20`` (count),
    ``ε_out = ε/40``, the selections (:data:`COORD_SHARE_SELECT` of ε, or
    :data:`COORD_SHARE_SELECT_LOW` when ``low``, with ``δ_sel = δ·COORD_DELTA_SHARE``) as one
    group of ρ-zCDP exponential mechanisms, ``ρ = rho_for(ε_sel, δ_sel)``, ``ρ/d`` per column split
    by :data:`COORD_SHARES` (cell, first spread, all levels, second spread, clip multiple); each column's clipped
    sum gets the pure ``(ε − ε_n − ε_out − ε_sel)/d``. docs/proofs/mean.md §11."""
    from .mean import _SHARE_COUNT, _frac

    return _budget(_frac(epsilon), _frac(delta), int(d), bool(low), (constants_key(), _SHARE_COUNT))


def coordinate_loss(epsilon: Any, delta: Any, low: bool = False) -> tuple[Fraction, Fraction]:
    """The (ε, δ) of the plan when it does not switch (independent of d): ``ε − ε_sel +
    zcdp_to_epsilon(ρ, δ_sel) <= ε`` and ``δ_sel``."""
    from .mean import _frac

    return _coordinate_loss(_frac(epsilon), _frac(delta), bool(low), constants_key())


def constants_key() -> tuple:
    """The module's public constants that the cached budget computations read (part of their
    cache keys, so a benchmark or test that sets one never meets a value computed before)."""
    return (COORD_SAMPLE, COORD_SAMPLE_1D, COORD_DMAX, COORD_NARROW_D, COORD_WIDE_MAX, COORD_MIN, COORD_MIN_COUNT,
            COORD_SHARE_OUTSIDE, COORD_SHARES, COORD_SHARE_SELECT, COORD_SHARE_SELECT_LOW, COORD_LOW,
            COORD_DELTA_SHARE, COORD_LEVELS, STEP_EPS_MIN, CONT_SHARE_SELECT, CONT_SHARES)


@functools.lru_cache(maxsize=256)
def _coordinate_loss(epsilon: Fraction, delta: Fraction, low: bool, _key: tuple) -> tuple[Fraction, Fraction]:
    from ..accounting import zcdp_to_epsilon

    b = coordinate_budget(epsilon, delta, 1, low)
    eps = b.eps_n + b.eps_out + b.eps_sum
    return eps + zcdp_to_epsilon(b.rho, b.delta_sel), b.delta_sel


def switch_budget(epsilon: Any, delta: Any, low: bool = False) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """``(ε_spent, δ_spent, ε_rest, δ_rest)`` when the plan switches to the FriendlyCore plan (after
    some of its selections; the whole selection group is charged): spent ``ε_n + zcdp_to_epsilon(ρ,
    δ_sel)``, ``δ_sel``; the FriendlyCore plan runs at ``(ε − ε_n − ε_sel, δ − δ_sel)``. Public:
    cached on the exact ``(ε, δ)``."""
    from .mean import _frac

    return _switch_budget(_frac(epsilon), _frac(delta), bool(low), constants_key())


@functools.lru_cache(maxsize=256)
def _switch_budget(eps: Fraction, dlt: Fraction, low: bool,
                   _key: tuple) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    from ..accounting import zcdp_to_epsilon

    b = coordinate_budget(eps, dlt, 1, low)
    return (b.eps_n + zcdp_to_epsilon(b.rho, b.delta_sel), b.delta_sel,
            eps - b.eps_n - b.eps_sel, dlt - b.delta_sel)


def continuation_budget(epsilon: Any, delta: Any, d: int, low: bool = False, k: int = 1) -> CoordinateBudget:
    """The budget of step 4′ (the continuation; public: ε, δ, d, :func:`low_sample` and the number
    ``k`` of unresolved columns): the ``(ε_rest, δ_rest)`` of :func:`switch_budget` (what the
    FriendlyCore plan would get), spent on the selections of the k unresolved columns
    (:data:`CONT_SHARE_SELECT` of ε_rest, ``δ_sel = δ_rest·COORD_DELTA_SHARE``, ``ρ = rho_for(ε_sel,
    δ_sel)``, ``ρ/k`` per column split by :data:`CONT_SHARES`: more levels, a third spread), the
    outside count (``ε_rest·COORD_SHARE_OUTSIDE``) and each column's clipped sum (the rest, ``/d``).
    The clip multiple keeps the plan's ``e_clip``: :func:`switch_budget`'s spent part already
    charges the whole selection group (step 5's share with it). No count, cell or first spread."""
    from .mean import _frac

    return _continuation_budget(_frac(epsilon), _frac(delta), int(d), bool(low), int(k), constants_key())


@functools.lru_cache(maxsize=256)
def _continuation_budget(epsilon: Fraction, delta: Fraction, d: int, low: bool, k: int,
                         _key: tuple) -> CoordinateBudget:
    from .mean import rho_for

    _, _, rest_e, rest_d = _switch_budget(epsilon, delta, low, _key)
    eps_out = rest_e * COORD_SHARE_OUTSIDE
    eps_sel = rest_e * CONT_SHARE_SELECT
    delta_sel = rest_d * COORD_DELTA_SHARE
    rho = rho_for(eps_sel, delta_sel)
    eps_sum = (rest_e - eps_out - eps_sel) / d
    rho_j = rho / max(k, 1)
    a_lv, a_s = CONT_SHARES
    zero = Fraction(0)
    return CoordinateBudget(zero, eps_out, eps_sel, delta_sel, rho, eps_sum, zero, zero, rho_j * a_lv,
                            em_epsilon(rho_j * a_s), _budget(epsilon, delta, d, low, _key).e_clip, zero)


def continuation_loss(epsilon: Any, delta: Any, low: bool = False) -> tuple[Fraction, Fraction]:
    """The (ε, δ) of the plan when it continues (step 4′; independent of d): :func:`switch_budget`'s
    spent part plus the continuation's ``ε_out + ε_sum + zcdp_to_epsilon(ρ, δ_sel)`` and ``δ_sel``
    (basic composition); at most what the switch to FriendlyCore is charged."""
    from ..accounting import zcdp_to_epsilon

    spent_e, spent_d, _, _ = switch_budget(epsilon, delta, low)
    b = continuation_budget(epsilon, delta, 1, low)
    return spent_e + b.eps_out + b.eps_sum + zcdp_to_epsilon(b.rho, b.delta_sel), spent_d + b.delta_sel


def switch_epsilon(epsilon: Fraction, delta: Any = Fraction(1, 10**6)) -> Fraction:
    """The least ε left for the FriendlyCore plan when the coordinate plan switches
    (:func:`switch_budget`, over both shares)."""
    return min(switch_budget(epsilon, delta, low)[2] for low in (False, True))


def smallest_step_epsilon(epsilon: Fraction) -> Fraction:
    """The smallest pure ε of the plan's Laplace steps at ``d = COORD_DMAX`` (the outside count and
    a clipped sum): a function of ε only (public)."""
    from .mean import _SHARE_COUNT

    top = max(COORD_SHARE_SELECT, COORD_SHARE_SELECT_LOW)
    eps_sum = epsilon * (1 - _SHARE_COUNT - COORD_SHARE_OUTSIDE - top) / max(COORD_DMAX, 1)
    return min(epsilon * COORD_SHARE_OUTSIDE, eps_sum)


def plan_runs(n_hat: int, epsilon: Fraction, d: int) -> bool:
    """Whether the released ``n̂`` selects the coordinate plan (public: n̂, ε, d only):
    ``d <= COORD_DMAX`` and ``n̂·ε < COORD_SAMPLE_1D`` (d = 1), ``n̂·ε < COORD_SAMPLE·d``
    (d = 2 <= COORD_NARROW_D) or ``n̂·ε <
    COORD_WIDE_MAX·d`` (d > COORD_NARROW_D); above, the FriendlyCore plans (with their per-column
    scale step) run; below ``max(COORD_MIN·d, COORD_MIN_COUNT)/ε`` the plan releases ⊥."""
    n_eps = n_hat * epsilon
    top = COORD_SAMPLE_1D if d == 1 else COORD_SAMPLE if d <= COORD_NARROW_D else COORD_WIDE_MAX
    return d <= COORD_DMAX and n_eps < top * d


def plan_possible(epsilon: Fraction, delta: Any = Fraction(1, 10**6)) -> bool:
    """Whether every Laplace step of the plan gets at least :data:`STEP_EPS_MIN` and every
    selection a positive ε (public: ε, δ only). Without the floor a tiny ε (about 2⁻³⁸ … 2⁻⁵⁸,
    where ``n̂ >= COORD_MIN·d/ε`` still happens through the count's noise) made the clipped sum
    raise ParameterError after the charge."""
    if smallest_step_epsilon(epsilon) < STEP_EPS_MIN:
        return False
    for low in (False, True):
        b = coordinate_budget(epsilon, delta, max(COORD_DMAX, 1), low)
        if not min(b.e_cell, b.e_s1, b.e_s2, b.e_clip, b.level_epsilon(COORD_LEVELS)) > 0:
            return False
        c = continuation_budget(epsilon, delta, max(COORD_DMAX, 1), low, max(COORD_DMAX, 1))  # step 4′
        if min(c.eps_out, c.eps_sum) < STEP_EPS_MIN or not min(c.e_s2, c.e_clip, c.level_epsilon(COORD_LEVELS)) > 0:
            return False
    return True


def spread_log_prior(anchor: np.ndarray) -> np.ndarray:
    """Offsets (``ln`` base measure) over the spread grid for each column: flat within
    :data:`PRIOR_FLAT` octaves of 2⁰ or of the column's public ``anchor`` octave (the larger of the
    two :func:`log_prior` values), (d, grid) float64."""
    octs = np.floor(GRID_K / 4.0)[None, :]
    a = np.asarray(anchor, dtype=np.float64)[:, None]
    return np.maximum(log_prior(octs, 0.0), log_prior(octs, a))


def point_cells(e_min: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step 1's public candidates ``(lo, hi, octave, point, a, b)``: the cells of
    :func:`octave_cells` ``(e_min)`` with each finite left edge ``v = lo`` (``±2^e``; not that of
    the cell around 0 nor of the cell below −2^1023) and each integer ``v`` inside the octaves
    ``±[2, 2^{INT_E_MAX + 1})`` (±3, ±5 … ±7, …: :func:`integer_points`) split off as a point cell
    ``[v, nextafter(v, ∞))`` (``point`` True), the rest of an octave cell kept as the open pieces
    between its points (a partition of the floats again). Order: the octave cells (each as its
    first piece, so the cell around 0 keeps index 0), then the points, then the further pieces.
    ``a, b``: the cells' geometry for the center and the refinement: the dyadic ``[lo, hi)`` of
    :func:`octave_cells` for every piece of an octave cell (its subcell edges stay dyadic),
    ``[v, v]`` for a point (width 0: no refinement)."""
    lo, hi, oct_ = octave_cells(e_min)
    split = np.isfinite(lo) & (lo != lo[0])  # not the cell around 0 (index 0), not [−∞, −2^1023)
    ints = integer_points()
    # the octave cell holding each integer point (lo <= v < hi; positive and negative octaves)
    home = np.argmax((lo[None, :] <= ints[:, None]) & (ints[:, None] < hi[None, :]), axis=1)
    v = np.concatenate([lo[split], ints])
    v_home = np.concatenate([np.flatnonzero(split), home])
    with np.errstate(over="ignore"):
        after = np.nextafter(v, np.inf)
        open_lo = np.where(split, np.nextafter(lo, np.inf), lo)
    # the first piece of each octave cell ends at its first interior integer (or at hi)
    first_hi = hi.copy()
    extra_lo, extra_hi, extra_home = [], [], []
    for c in np.unique(home).tolist():  # over the few octaves with interior integers (public)
        pts = np.sort(ints[home == c])
        first_hi[c] = pts[0]
        extra_lo.append(np.nextafter(pts, np.inf))
        extra_hi.append(np.concatenate([pts[1:], [hi[c]]]))
        extra_home.append(np.full(pts.size, c, dtype=np.int64))
    e_lo, e_hi = np.concatenate(extra_lo or [np.zeros(0)]), np.concatenate(extra_hi or [np.zeros(0)])
    e_home = np.concatenate(extra_home or [np.zeros(0, np.int64)])
    u_lo = np.concatenate([open_lo, v, e_lo])
    u_hi = np.concatenate([first_hi, after, e_hi])
    octs = np.concatenate([oct_, oct_[v_home], oct_[e_home]])
    point = np.concatenate([np.zeros(lo.size, bool), np.ones(v.size, bool), np.zeros(e_lo.size, bool)])
    a = np.concatenate([lo, v, lo[e_home]])
    b = np.concatenate([hi, v, hi[e_home]])
    return u_lo, u_hi, octs, point, a, b


def integer_points() -> np.ndarray:
    """The integers inside the octaves ``±[2^e, 2^{e+1})``, ``e = 1 … INT_E_MAX``, that are not
    their left edges (±3, ±5, ±6, ±7, …; public, float64): step 1's integer point cells."""
    pos = [float(v) for e in range(1, INT_E_MAX + 1) for v in range(2**e + 1, 2 ** (e + 1))]
    return np.array(pos + [-v for v in pos], dtype=np.float64)


def point_cell_log_prior(oct_: np.ndarray, point: np.ndarray, value: np.ndarray, e_min: int) -> np.ndarray:
    """:func:`cell_log_prior` over :func:`point_cells` (``value``: their ``a``): every piece of an
    octave cell at its octave cell's weight, the points ``±2^e`` at :data:`PRIOR_POINT` times it,
    the points ±1 at :data:`PRIOR_UNIT` flat cells, the integer points at :data:`PRIOR_INT` times
    their octave cell's weight (public)."""
    mag = np.abs(value)
    unit = point & (mag == 1.0)
    small = point & (mag >= 2.0) & (mag < 2.0 ** (INT_E_MAX + 1))  # ±2 … ±(2^{INT_E_MAX+1} − 1)
    w = np.where(unit, math.log(PRIOR_UNIT),
                 np.where(small, math.log(PRIOR_INT), np.where(point, math.log(PRIOR_POINT), 0.0)))
    return cell_log_prior(oct_, e_min) + w


def cell_log_prior(oct_: np.ndarray, e_min: int) -> np.ndarray:
    """Offsets over the octave cells: :func:`log_prior` centred at 2⁰, and the central cell
    ``[−2^{e_min}, 2^{e_min})`` (around 0, octave ``e_min − 1``) as if it were at octave 0, with
    :data:`PRIOR_ZERO` times a flat cell's weight (public)."""
    zero = oct_ == e_min - 1
    return log_prior(np.where(zero, 0.0, oct_), 0.0) + np.where(zero, math.log(PRIOR_ZERO), 0.0)


def cell_floor(n_hat: int) -> int:
    """``τ = ⌊n̂·CELL_FLOOR⌋`` (public), step 1's occupancy floor."""
    return int(math.floor(max(int(n_hat), 0) * CELL_FLOOR))


def edge_tied_counts(below: np.ndarray, lo_edges: np.ndarray, a: float) -> np.ndarray:
    """Step 4's counts with the rows equal to the refined cell's left edge ``a`` (public) counted as
    tied: from ``below`` = ``#{x < e}`` at ``[c − g, c + g, a, nextafter(a, ∞)]`` (``lo_edges`` =
    ``c − g`` as computed for them), ``#{x < c − g_k}`` lowered by ``E = #{x = a}`` where
    ``a < c − g_k`` (there ``a`` lies outside ``[c − g_k, c + g_k)``; ``a < c``), so that
    ``C'_k = C_k + E·[a < c − g_k] = #{x ∈ [c − g_k, c + g_k) ∪ {a}}``: nested in k, every row at
    ``a`` inside every set, each moved by 0 or 1 by a row: :func:`centred_spread_mass_utility`'s proof
    holds verbatim (docs/proofs/mean.md §11). Why: an atom at the median (0/1 with p = 0.7) falls on
    the dyadic edge ``a`` of its refined cell, at the offset w/2 from the midpoint center, and the
    untied median distance was that offset (the zeros clipped in 40 of 40 runs at n = 1000)."""
    g = (np.asarray(below).size - 2) // 2
    b = np.asarray(below, dtype=np.int64)
    eq = int(b[-1] - b[-2])
    lo = b[:g] - eq * (a < np.asarray(lo_edges)).astype(np.int64)
    return np.concatenate([lo, b[g : 2 * g]])


def zero_spread_log_prior(anchor: float = 0.0, distance: float = 0.0) -> np.ndarray:
    """The annulus step's extra ``ln`` base measure over the spread grid: ``−ZERO_SPREAD_DECAY·
    ln(g_k/2^m)`` above ``2^m``, 0 below, ``m = max(anchor, 0)`` (public: ``anchor`` the octave
    of the released point; 0 for the cell around 0 and the points ``±2^e``, e <= 0), plus
    ``ln ZERO_SPREAD_ATOM`` for the annuli ``[g_{k−1−τ}, g_k)`` (τ = :data:`COORD_SPREAD_TOL`)
    that hold ``t``, the distance from the released point to 0: ``t = |distance|`` (the point),
    or ``2^anchor`` when it is 0 (1 around 0). For ``t = 2^anchor``:
    ``4·anchor < k <= 4·anchor + 1 + τ``."""
    m = max(float(anchor), 0.0)
    t = abs(float(distance)) if distance != 0.0 else math.ldexp(1.0, int(anchor))
    grid = positive_grid()
    inner = np.exp2((GRID_K - 1 - COORD_SPREAD_TOL) / 4.0)
    atom = (inner <= t) & (t < grid)
    decay = -ZERO_SPREAD_DECAY * np.maximum(GRID_K / 4.0 - m, 0.0) * math.log(2.0)
    return decay + atom * math.log(ZERO_SPREAD_ATOM)


def spread_upper_edges(c: float, grid: np.ndarray) -> np.ndarray:
    """The spread steps' upper edges ``max(c + g_k, nextafter(c, ∞))`` (public; nondecreasing in
    k): every interval ``[c − g_k, ·)`` holds the rows equal to ``c``. With ``c + g_k`` alone, for
    ``c ≠ 0`` the bottom ``c + 2⁻⁹⁰⁰`` rounds to ``c``, ``C_0`` was empty and an atom on the
    center was untied (a point cell at 1 on a 0/1 column: spread 2⁻⁵², the zeros clipped)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.maximum(c + grid, np.nextafter(c, np.inf))


def centred_spread(source: Any, center: np.ndarray, n: int, eps: Fraction, anchor: np.ndarray,
                   gen: np.random.Generator, zero: np.ndarray | None = None,
                   eps_zero: Fraction | None = None, edge: np.ndarray | None = None,
                   only: np.ndarray | None = None) -> np.ndarray:
    """A spread step (docs/proofs/mean.md §11): per column, the exponential mechanism on the
    monotone :func:`centred_spread_mass_utility` around the released ``center`` over
    :func:`positive_grid`, base measure :func:`spread_log_prior` ``(anchor)``; one pass over the data. The columns of the
    public mask ``zero`` (released cell around 0 or a point cell; step 2 only) use
    :func:`annulus_spread_utility` instead, monotone: weights ``exp(eps_zero·u)`` (the sampler at
    ``2·eps_zero``), base measure also :func:`zero_spread_log_prior` ``(anchor)``, drawn after the
    others. The upper edges are ``max(c + g_k, nextafter(c, ∞))`` (public, monotone in k: the
    intervals stay nested and every one holds the rows equal to c). With ``edge`` (public, per column, NaN for none; step 4: the refined cell's left
    edge ``a``) the rows equal to ``a`` count as tied: ``C'_k = #{x ∈ [c − g_k, c + g_k) or x = a}``
    (:func:`edge_tied_counts`). With ``only`` (public mask; step 4′) the other columns are not
    read and no mechanism runs for them (their entries are ``g_0``, placeholders)."""
    grid = positive_grid()
    d = center.size
    zero = np.zeros(d, bool) if zero is None else np.asarray(zero, bool)
    edge = np.full(d, np.nan) if edge is None else np.asarray(edge, np.float64)
    run = np.ones(d, bool) if only is None else np.asarray(only, bool)
    has = np.isfinite(edge) & run
    with np.errstate(over="ignore", invalid="ignore"):
        edges = [np.concatenate([center[j] - grid, spread_upper_edges(center[j], grid)]
                                + ([[edge[j], np.nextafter(edge[j], np.inf)]] if has[j] else []))
                 if run[j] else np.zeros(0) for j in range(d)]  # over columns
    below = source.below_counts(edges)
    for j in np.flatnonzero(has).tolist():  # over columns
        below[j] = edge_tied_counts(below[j], edges[j][: grid.size], edge[j])
    lp = spread_log_prior(anchor)
    pick = np.zeros(d, dtype=np.int64)
    for mask, utility, e in ((~zero, centred_spread_mass_utility, eps), (zero, annulus_spread_utility, None)):
        idx = np.flatnonzero(mask & run)
        if idx.size == 0:
            continue
        util = np.stack([utility(below[j][grid.size:], below[j][: grid.size], n) for j in idx.tolist()])
        mu = base_measure(lp[idx] if e is not None else  # the annulus path: atom weight at |center|
                          lp[idx] + np.stack([zero_spread_log_prior(anchor[j], center[j]) for j in idx.tolist()]))
        pick[idx] = exponential_mechanism(util, mu, eps if e is not None else 2 * eps_zero, gen)
    return grid[pick]


def clip_multiples(source: Any, center: np.ndarray, spread: np.ndarray, zero: np.ndarray, n: int,
                   bud: CoordinateBudget, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 5: per column the clip multiple ``K_j``, its scale ``K_j·s_j`` (:func:`clip_scales`) and
    the radius ``R_j`` = ``_grid_up`` of the scale (:func:`clip_candidates`):
    the exponential mechanism on :func:`clip_utility` (monotone: weights ``exp(ε_clip·u)``, the
    sampler's ``exp(ε·u/2)`` at ``2·ε_clip``) over :data:`COORD_CLIP_KS`, or over
    :data:`ZERO_CLIP_KS` with the extra decay :data:`ZERO_CLIP_RATE` for the columns of the public
    mask ``zero`` (drawn after the others); base measure :func:`clip_log_prior`. One data pass per
    ladder."""
    multiple, scale, radii = np.empty(spread.size), np.empty(spread.size), np.empty(spread.size)
    for lower, ladder, extra in ((False, COORD_CLIP_KS, 0.0), (True, ZERO_CLIP_KS, ZERO_CLIP_RATE)):
        idx = np.flatnonzero(zero == lower)
        if idx.size == 0:
            continue
        scales = clip_scales(spread[idx], ladder, lower)
        cand = _radii_of(scales)
        edges = [np.zeros(0)] * spread.size
        with np.errstate(over="ignore", invalid="ignore"):
            for i, j in enumerate(idx.tolist()):  # over columns
                edges[j] = np.concatenate([center[j] - cand[i], np.nextafter(center[j] + cand[i], np.inf)])
        below = source.below_counts(edges)
        k_n = len(ladder)
        util = np.stack([clip_utility(clip_outside_counts(below[j][:k_n], below[j][k_n:], n))
                         for j in idx.tolist()])  # over columns
        prior = clip_log_prior(bud.e_clip, bud.eps_sum, ladder) - extra * np.asarray(ladder, dtype=np.float64)
        pick = exponential_mechanism(util, base_measure(prior), 2 * bud.e_clip, gen)
        multiple[idx] = np.asarray(ladder, dtype=np.float64)[pick]
        scale[idx] = scales[np.arange(idx.size), pick]
        radii[idx] = cand[np.arange(idx.size), pick]
    return multiple, scale, radii


def subcells(a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """One refinement level's candidates (public): the :data:`COORD_BRANCH` subcells of
    ``[a, b)`` and one more on each side, ``[a + (i − 1)·w, a + i·w)`` for ``i = 0 … 33``,
    ``w = (b − a)/COORD_BRANCH``: their lower and upper edges."""
    steps = np.arange(-1, COORD_BRANCH + 1, dtype=np.float64)
    w = (b - a) / COORD_BRANCH
    return a + steps[:-1] * w, a + steps[1:] * w


def refine_cells(source: Any, n: int, a: np.ndarray, b: np.ndarray, levels: np.ndarray, bud: CoordinateBudget,
                 gen: np.random.Generator) -> None:
    """Steps 3 and 4′: per column ``levels[j]`` refinement levels of the cell ``[a_j, b_j)`` (in
    place): :data:`COORD_BRANCH` subcells and one more on each side, the exponential mechanism on
    :func:`cell_mass_utility_of_counts` (uniform base measure) at ``bud.level_epsilon(levels[j])``
    each. One data pass per level."""
    d = a.size
    for j in range(d):  # over columns
        e_lv = bud.level_epsilon(int(levels[j]))
        for _ in range(int(levels[j])):  # at most COORD_LEVELS
            sub_lo, sub_hi = subcells(a[j], b[j])
            edges = [np.concatenate([sub_lo, sub_hi]) if i == j else np.zeros(0) for i in range(d)]
            bl = source.below_counts(edges)[j]
            util_j = cell_mass_utility_of_counts(bl[: sub_lo.size], bl[sub_lo.size :], n)
            k = exponential_mechanism(util_j[None, :], np.ones(1, np.int64), e_lv, gen)[0]
            a[j], b[j] = sub_lo[k], sub_hi[k]


def second_pass_range(first: float, center: float, radius: float) -> tuple[float, float]:
    """Step 5b′'s second center and radius (public: functions of released values): the first
    pass's release ``f`` clamped into ``[c − R, c + R]``, and ``_grid_up(R + |f − c|)`` (at most
    ``_grid_up(2R)``), so that the second range ``[f − R', f + R']`` covers the first
    ``[c − R, c + R]``: no row is clipped that the first pass kept (the clipping bias does not
    grow; docs/proofs/mean.md §11, step 5b′)."""
    from .mean import _grid_up

    f = min(max(first, center - radius), center + radius)
    # |f − c| <= R exactly; in floats f − c may exceed R by rounding (large |c|): capped at 2R
    return f, min(_grid_up(radius + abs(f - center)), _grid_up(2.0 * radius))


def two_pass_sum(column: Any, center: float, radius: float, n_hat: int, eps_sum: Fraction,
                 gen: np.random.Generator) -> tuple[float, float, float, Any]:
    """Step 5b′ on one column (a :class:`~privagg.engines.base.PointSource` with d = 1, or an
    (n, 1) array): the clipped sum around ``center`` with ``radius`` at ``TWO_PASS_FIRST·ε_sum``,
    ``f = center + S̃_1/n̂``; then around :func:`second_pass_range` ``(f, center, radius)`` at the
    rest of ``ε_sum`` (each pass ``_noisy_clipped_release``, discrete Laplace: ε_sum-DP in all,
    docs/proofs/mean.md §11). Returns (the release ``f' + S̃_2/n̂``, ``f'``, ``R'``, the second
    grid release)."""
    from .mean import _finite, _noisy_clipped_release

    eps_1 = eps_sum * TWO_PASS_FIRST
    rel = _noisy_clipped_release(column, np.array([center]), radius, eps_1, _LAPLACE, gen)
    first = float(_finite(center + rel.values[0] / n_hat))
    f, r2 = second_pass_range(first, center, radius)
    rel = _noisy_clipped_release(column, np.array([f]), r2, eps_sum - eps_1, _LAPLACE, gen)
    return float(_finite(f + rel.values[0] / n_hat)), f, r2, rel


def coordinate_mean(x: Any, n_hat: int, epsilon: Fraction, gen: np.random.Generator,
                    delta: Any = Fraction(1, 10**6), may_switch: bool = True) -> dict[str, Any] | None:
    """Steps 1–5 of the module docstring on the finite rows ``x`` (n, d) — an array or a
    :class:`~privagg.engines.base.PointSource` (every data access is one of its methods, so an
    engine returns the same integers and the release has the same law) — given the released
    ``n̂ >= 1``, with :func:`coordinate_budget` ``(ε, δ, d)``. Returns the released values (mean,
    center, spreads, radii, outside count, and the public noise description for the confidence
    intervals), or None when a coordinate needs more than :data:`COORD_LEVELS` refinement levels
    or its refined cell stays wider than :data:`COORD_SWITCH_WIDTH` second spreads (data far from
    0 relative to their spread: the caller then switches to the FriendlyCore plan with
    :func:`switch_budget`). With ``may_switch=False`` (public: the caller's choice from n̂, when
    the switched plan could not release) it never returns None: at most COORD_LEVELS levels. When
    it does not switch and a refined cell is wider than ``s2/CONT_RESOLVE``, step 4′ spends the ε
    the switch would hand over (:func:`continuation_budget`) on more levels and a third spread."""
    from .mean import _finite, _noisy_clipped_release, _source, _sum_exponent

    source = _source(x)
    n, d = source.count(), source.d
    low = low_sample(n_hat, epsilon, d)
    bud = coordinate_budget(epsilon, delta, d, low)
    # 1. octave cell of a median (cell mass utility, monotone), the same public partition for every
    #    column, with the point cells ±2^e and ±3 … ±15 (point_cells: an atom holding the median)
    lo, hi, oct_, is_point, geo_a, geo_b = point_cells(CELL_E_MIN)
    below = source.below_counts([np.concatenate([lo, hi])] * d)  # one pass, d columns
    tau = cell_floor(n_hat)  # public: the released count
    util = np.stack([cell_mass_utility_of_counts(b[: lo.size], b[lo.size :], n, tau) for b in below])
    pick = exponential_mechanism(util, base_measure(point_cell_log_prior(oct_, is_point, geo_a, CELL_E_MIN)),
                                 bud.e_cell, gen)
    # the cell around 0 or a point cell (public): L_j = 0 (width <= 2⁻¹⁰²¹), no second spread
    zero = (pick == 0) | is_point[pick]
    a, b = geo_a[pick].copy(), geo_b[pick].copy()
    with np.errstate(invalid="ignore", over="ignore"):
        wide = ~np.isfinite(b - a)  # the two cells beyond ±2^1023: their finite edge
        c1 = np.where(wide, np.where(np.isfinite(a), a, b), a + (b - a) / 2)
    # 2. first spread around the untied median of |x − c1| (mass utility), base measure around 2⁰
    #    and c1's octave
    #    (the cell around 0: the annulus utility, monotone, at the shares of s1, levels and s2)
    s1 = centred_spread(source, c1, n, bud.e_s1, _octave(c1), gen, zero, bud.e_s1_zero)
    with np.errstate(over="ignore"):
        levels = levels_needed(b - a, s1 / COORD_LEVEL_DIV)
    levels = np.where(zero, 0, levels)  # already 0 (width 2⁻¹⁰²¹ < s1/32): the budget relies on it
    if int(levels.max()) > COORD_LEVELS:
        if may_switch:
            return None
        levels = np.where(wide, 0, np.minimum(levels, COORD_LEVELS))  # an infinite cell is not split
    # 3. refinement: COORD_BRANCH subcells (and one more on each side) per level, to s1/32 wide
    refine_cells(source, n, a, b, levels, bud, gen)
    refined = levels > 0
    with np.errstate(invalid="ignore", over="ignore"):
        center = _finite(np.where(refined, a + (b - a) / 2, c1))
    # 4. second spread around the (refined) center, its base measure anchored at the center's
    #    octave. Every column off the annulus path gets its second spread (its share is in ρ_j
    #    whether or not it was refined), and the spread used is min(s2, s1 + |c1 − center|)
    #    (post-processing): the median distance to the center is at most the one to c1 plus the
    #    move, so a wild large draw of either step (a flat stretch of the base measure outweighs the data at small
    #    n·ε) no longer sets the clip radius unless both are wild (issue 11, real data at n = 300)
    spread = s1
    if (~zero).any():
        #    (rows on the refined cell's left edge a count as tied: an atom at the median)
        s2 = centred_spread(source, center, n, bud.e_s2, _octave(center), gen, edge=np.where(refined, a, np.nan))
        with np.errstate(over="ignore", invalid="ignore"):
            bound = s1 + np.abs(c1 - center)
            spread = np.where(zero, s1, np.minimum(s2, bound))
            unresolved = refined & ((b - a) > s2 / CONT_RESOLVE)
            if may_switch and bool(np.any(refined & ((b - a) > COORD_SWITCH_WIDTH * s2))):
                return None  # far from resolved, and FriendlyCore can release at this n̂: switch
        if unresolved.any():
            # 4′. the continuation (public: the released cells and s2): the ε left after the
            #     selection group (switch_budget's ε_rest), more levels from s2, a third spread
            bud = continuation_budget(epsilon, delta, d, low, int(unresolved.sum()))
            with np.errstate(over="ignore", invalid="ignore"):
                more = np.where(unresolved, np.minimum(levels_needed(b - a, s2 / COORD_LEVEL_DIV), COORD_LEVELS), 0)
            refine_cells(source, n, a, b, more, bud, gen)
            with np.errstate(invalid="ignore", over="ignore"):
                moved = _finite(np.where(unresolved, a + (b - a) / 2, center))
            s3 = centred_spread(source, moved, n, bud.e_s2, _octave(moved), gen, edge=np.where(unresolved, a, np.nan),
                                only=unresolved)  # budgeted for the k unresolved columns only
            with np.errstate(over="ignore", invalid="ignore"):
                spread = np.where(unresolved, np.minimum(s3, spread + np.abs(moved - center)), spread)
            center = moved
    # 5. the clip multiple per column: the exponential mechanism (Δ = 1) on −#{|x − c| > K_i·s}
    #    over the public ladder COORD_CLIP_KS (ZERO_CLIP_KS in the annulus path), base measure the
    #    public cost of the radius
    multiple, scale, radii = clip_multiples(source, center, spread, zero, n, bud, gen)  # R_j = _grid_up(scale_j)
    # 5b. clipped sums, one coordinate at a time (discrete Laplace, ε_sum-DP each); 5b′: at
    #     d <= TWO_PASS_DMAX a column of the annulus path in two passes, the second around the
    #     first's release with a radius whose range covers the first one
    two = zero & (d <= TWO_PASS_DMAX)
    mean = np.empty(d)
    params, steps_g = np.empty(d), np.empty(d)
    for j in range(d):  # over columns
        if two[j]:
            mean[j], center[j], radii[j], rel = two_pass_sum(source.column(j), float(center[j]),
                                                             float(radii[j]), n_hat, bud.eps_sum, gen)
            scale[j] = radii[j] * (1.0 - 2.0**-40)  # _grid_up(scale) = R': the released radius
            multiple[j] = scale[j] / spread[j]
        else:
            rel = _noisy_clipped_release(source.column(j), center[j : j + 1], float(radii[j]),
                                         bud.eps_sum, _LAPLACE, gen)
            mean[j] = _finite(center[j] + rel.values[0] / n_hat)
        params[j], steps_g[j] = float(rel.noise_grid), rel.step
    # noisy count of the rows beyond the box (any coordinate): sensitivity 1
    out_rows = source.outside_count(center, radii)
    outside = out_rows + int(discrete_laplace(1 / bud.eps_out, rng=gen))
    q = math.exp(-float(bud.eps_out))
    h = np.ldexp(1.0, [_sum_exponent(float(r)) for r in radii])
    return {"mean": mean, "center": center, "spread": spread, "radii": radii, "multiple": multiple,
            "clip_scale": scale,
            "outside": float(outside), "outside_sd": math.sqrt(2.0 * q) / (1.0 - q),
            "noise": ("laplace-coordinate", params, steps_g, None,
                      h / 2.0 + 8.0 * 2.0**-53 * radii, steps_g)}


# ------------------------------------------------------------------ the exponential mechanism
#: Precision (bits) of the first enclosures of the exponential mechanism's weights.
EM_PRECISION = 128


def base_measure(log_prior_values: np.ndarray) -> np.ndarray:
    """Public integer weights ``μ_k = max(1, ⌊2^30·exp(ln prior_k − max ln prior)⌋)`` from public
    log-prior values (float64): the exponential mechanism's base measure (int64, >= 1). Any
    data-independent μ gives the same privacy guarantee; integers make the sampler exact."""
    lp = np.asarray(log_prior_values, dtype=np.float64)
    lp = lp - lp.max(axis=-1, keepdims=True)
    return np.maximum(1, np.floor(np.exp2(30.0 + lp / math.log(2.0)))).astype(np.int64)


def _level_enclosures(levels: list[int], num: int, den: int, prec: int) -> list[tuple[int, int]]:
    """Enclosures of ``exp(−num·g/den)·2^prec`` for the ascending integers ``g`` of ``levels``
    (products of certified steps ``exp(−num·(g_i − g_{i−1})/den)``; each a valid enclosure)."""
    from ..noise._exact import exp_neg_fixed, mul_iv

    out, cache, cur, prev = [], {}, (1 << prec, 1 << prec), 0
    for g in levels:  # over the distinct utility levels (at most n + 1), not over records
        step = g - prev
        if step:
            if step not in cache:
                cache[step] = exp_neg_fixed(num * step, den, prec)
            cur = mul_iv(cur, cache[step], prec)
        out.append(cur)
        prev = g
    return out


class _LevelTable:
    """Exact draws of an index ``i`` with ``P(i) ∝ mass_i·exp(−num·levels_i/den)`` (``levels``
    ascending from 0, ``mass_i >= 1`` integers): inverse CDF against a lazily extended uniform
    ``U``, with certified enclosures of the cumulative weights (cached per precision); a decision
    is made only when the enclosures separate ``U·total`` from the cumulative sums, else the
    precision and the bits of ``U`` are doubled (docs/proofs/mean.md §11). At the first precision
    the levels whose weight is below ``2^−(prec+64)`` of the first level's enter as one bucket
    bounded by ``[0, 1]·2^−prec`` (a public speed-up: it only makes the enclosures wider)."""

    def __init__(self, mass: list[int], levels: list[int], num: int, den: int) -> None:
        self.mass, self.levels, self.num, self.den = mass, levels, num, den
        self.cut_g = math.ceil((EM_PRECISION + 64 + sum(mass).bit_length()) * math.log(2.0) * den / num) + 1
        self._cache: dict[int, tuple[list[int], list[int], int, int]] = {}

    def _cumulative(self, prec: int) -> tuple[list[int], list[int], int, int]:
        if prec not in self._cache:
            from ..noise._exact import ceil_div

            k = (len(self.levels) if prec > EM_PRECISION
                 else bisect.bisect_right(self.levels, self.cut_g))
            c_lo, c_hi, lo_acc, hi_acc = [], [], 0, 0
            for m, (lo, hi) in zip(self.mass[:k], _level_enclosures(self.levels[:k], self.num, self.den, prec)):
                lo_acc += m * lo  # over levels
                hi_acc += m * hi
                c_lo.append(lo_acc)
                c_hi.append(hi_acc)
            tail = sum(self.mass[k:])  # each weight <= 2^-(64 + bits(total mass)) · 2^prec
            t_hi = hi_acc + (ceil_div(tail << prec, 1 << (prec + 64)) + 1 if tail else 0)
            self._cache[prec] = (c_lo, c_hi, lo_acc, t_hi)
        return self._cache[prec]

    def draw(self, gen: np.random.Generator) -> int:
        from ..noise._tables import random_words

        prec, ubits = EM_PRECISION, EM_PRECISION + 64
        u = 0
        for w in random_words(gen, ubits // 64).tolist():
            u = (u << 64) | int(w)
        while True:
            c_lo, c_hi, t_lo, t_hi = self._cumulative(prec)
            # U·total·2^prec lies in [u·t_lo, (u + 1)·t_hi] / 2^ubits; C_j·2^prec in [c_lo_j, c_hi_j]
            x_lo, x_hi = u * t_lo, (u + 1) * t_hi
            j = bisect.bisect_right(c_hi, x_lo >> ubits)  # the first j with c_hi_j·2^ubits > x_lo
            if j < len(c_lo) and x_hi <= c_lo[j] << ubits:
                return j
            # undecided (or in the tail bucket): more precision, more bits of U, every level exact
            if prec >= (1 << 14):  # pragma: no cover - enclosures always separate (measure zero)
                raise ArithmeticError("exponential mechanism: enclosures did not separate")
            for w in random_words(gen, ubits // 64).tolist():
                u = (u << 64) | int(w)
            prec, ubits = 2 * prec, 2 * ubits


def exponential_mechanism(utility: np.ndarray, mu: np.ndarray, eps: Fraction,
                          gen: np.random.Generator, size: int | None = None) -> np.ndarray:
    """Per row of the integer ``utility`` (d, K) (sensitivity 1): an exact draw of ``k`` with
    ``P(k) ∝ μ_k·exp(ε·u_k/2)`` (``mu`` public int64 weights >= 1, broadcast to (d, K)); ``size``
    independent draws per row (shape (d, size)) when given (audits). ε-DP, and ``ε²/8``-zCDP per
    row: it is ε-bounded-range (Durfee & Rogers 2019; Cesar & Rogers 2021; docs/proofs/mean.md
    §11). The candidates are grouped by utility level (loops over rows, distinct levels and draws
    only, never over records)."""
    u = np.asarray(utility, dtype=np.int64)
    mu = np.broadcast_to(np.asarray(mu, dtype=np.int64), u.shape)
    num, den = eps.numerator, 2 * eps.denominator  # exp(ε·u/2) = exp(−num·g/den)·const
    draws = 1 if size is None else int(size)
    out = np.empty((u.shape[0], draws), dtype=np.int64)
    for r in range(u.shape[0]):  # over columns
        g = int(u[r].max()) - u[r]
        levels, inv = np.unique(g, return_inverse=True)
        mass = np.zeros(levels.size, dtype=np.int64)
        np.add.at(mass, inv, mu[r])
        table = _LevelTable(mass.tolist(), levels.tolist(), num, den)
        order = np.argsort(inv, kind="stable")  # candidates grouped by level, in index order
        cum = np.cumsum(mu[r][order])
        starts = np.concatenate([[0], np.cumsum(mass)[:-1]])
        for t in range(draws):  # one draw in production
            i = table.draw(gen)
            pick = int(starts[i]) + int(gen.integers(0, int(mass[i])))  # μ-weighted within level i
            out[r, t] = order[int(np.searchsorted(cum, pick, side="right"))]
    return out[:, 0] if size is None else out
