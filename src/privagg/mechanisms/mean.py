"""``private_mean``: a DP mean with no prior on where the data lie (FriendlyCore locate + clipped sum).

Algorithm (proof: ``docs/proofs/mean.md``). Non-finite rows are removed first (a declared,
1-stable policy: adding or removing one row changes the finite rows by at most one row). Then,
with public shares of the budget:

1. **Count.** ``n̂ = n + Z``, ``Z`` discrete Laplace of scale ``1/ε_n`` (ε_n-DP).
1b. **Per-column scales** (only ``radius=None``, d >= 2 and ``n̂·ε/(10d) >= SCALE_MIN``, public).
   Per column, report-noisy-max (ε/(10d) each) of the power of two ``2^k`` whose cell
   ``(2^{k−1}, 2^k]`` holds (in rank) the median of the untied absolute differences of consecutive
   rows in a random order, or their 7/8 quantile when ``n̂·ε/(10d) >= SCALE_TAIL_MIN``
   (:func:`untied_scale_utility`, :func:`scale_rank`); the rest runs on
   ``x_j/s_j`` and the release is scaled back, so each column's error follows its own spread
   (:attr:`MeanRelease.scales`; docs/proofs/mean.md §2b).
2. **Radius** (only when ``radius=None``). AboveThreshold over the public grid
   ``r_j = 2^{j/4}`` (``j = −40 … 160``: 2⁻¹⁰ to 2⁴⁰) on a further Poisson subsample of the
   subsample of step 3, of public rate ``min(1, M_RADIUS/min(n̂, m_locate))``
   (:func:`~privagg.friendlycore.radius.radius_sample_size`); see
   :mod:`privagg.friendlycore.radius`. Small samples (released ``n̂·ε <`` :data:`PAIR_RADIUS`,
   ``d <=`` :data:`PAIR_RADIUS_DIM`):
   ``(2 + 1/d)`` times a report-noisy-max median of the distances of consecutive rows in a
   random order, on the same grid (never ⊥; docs/proofs/mean.md §4b).
3. **Locate.** (End-to-end share ε/5; ε/10 with the large-sample shares, :func:`large_sample`,
   where its need fits twice into ``min(n̂, m_locate)``: the sums get the rest.)
   A Poisson subsample ``S`` of rate ``q = min(1, m_locate / n̂)`` (data-independent
   given the released ``n̂``), then FriendlyCore with ``ball(r)``: BasicFilter, and friendly
   averaging of the core ``C``: ``m̂ = |C| + DLap(1/ε_c)``, ``m_low = m̂ − k`` with
   ``P[DLap > k] <= δ_c``; ⊥ when ``m_low < M_MIN``; else ``ĉ = avg(C)`` released on a grid with
   ℓ2 sensitivity ``2r/m_low`` (discrete Gaussian, ρ_m-zCDP, or discrete Laplace with ℓ1
   sensitivity ``√d·2r/m_low``); the average is taken relative to a core point and rounded to
   the grid exactly, without a clip, so the center is found wherever the data lie. The friendly
   guarantee ``(ε_c + ε_m, δ_c + δ_m)`` becomes an end-to-end one by the conversion theorem
   (:func:`privagg.end_to_end_budget`).
4. **Estimate.** With the public bound ``b`` (a 1 − 10⁻³ quantile of the locate noise norm),
   up to three CoinPress-style refinement steps (Biswas et al. 2020): the sum of every finite row
   clipped to ``B(c, r + b)`` is released with discrete Gaussian (ρ-zCDP) or Laplace noise,
   ``c ← c + sum/n̂``, and ``b`` shrinks to the new public noise bound. The number of steps and
   their share are chosen from public values (:func:`estimate_schedule`). With ``radius=None``
   an ε_f-DP spread floor (:func:`spread_floor_pick`; ε_f = ε/20, or ε/5 when the released
   radius is the bottom of its grid) may first lift ``U`` to the octave of the rows beyond it (a
   core of tied values; elsewhere the octaves above :data:`FLOOR_FREE` carry a public penalty,
   :func:`floor_offsets`). Then an ε_q-DP noisy histogram of the distances ``‖x_i − c‖`` over the public grid :func:`clip_edges` (from
   ``U·4√n̂`` down to ``U·2⁻⁶``, ``U = r + b``) gives the final clipping radius ``R``: the least
   edge whose noisy tail (:func:`noisy_tails`: the histogram summed from the top, combined with
   ``n̂`` minus its sum from the bottom) leaves about ``τ = O(√d/ε)`` rows outside (the tail rule: the clipping bias vanishes as
   n·ε grows, docs/proofs/mean.md §8), or, when a mass of rows lies beyond the top edge, the
   median distance (robust rule, :data:`CLIP_TAIL`). The final clipped sum gives
   ``mean = c + sum/n̂``; ⊥ if ``n̂ < 1``. The release carries ``n̂``, ``R``, the noisy count of
   rows outside and :meth:`MeanRelease.confidence_intervals` (noise only).

The steps compose sequentially (adaptive composition; the Gaussian sums in ρ, converted once with
Canonne–Kamath–Steinke): the release is ``(ε_n + ε_sel + ε_loc + ε_f + ε_q + ε_sum, δ_loc + δ_sum)``-DP
under add/remove neighbours, at most the requested (ε, δ). :func:`mean_plan` computes every
scale from public inputs only.
"""

from __future__ import annotations

import functools
import math
import statistics
import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from .._validate import (
    check_beta,
    check_choice,
    check_delta,
    check_epsilon,
    check_finite_positive,
    check_positive_int,
    fail,
    quiet_numerics,
    real_array,
)
from ..accounting import PrivacyLoss, zcdp_to_epsilon
from ..noise.grid import (
    _sqrt_up,
    gaussian_exponent,
    grid_gaussian_integers,
    grid_integers,
    grid_laplace_integers,
    laplace_exponent,
    rounding_error,
)
from ..noise.rng import resolve_rng
from ..noise.samplers import discrete_laplace
from ..friendlycore.conversion import end_to_end_budget, friendly_budget
from ..friendlycore.filter import alpha_fraction, core_mask
from ..friendlycore.predicates import ball
from ..engines.base import PointSource
from . import mean_small
from .mean_small import coordinate_mean

__all__ = ["CALIBRATIONS", "MeanPlan", "MeanRelease", "estimate_schedule", "mean_plan", "mean_privacy_loss",
           "resolve_calibration",
           "private_mean", "rho_for"]

#: The calibrations of :func:`private_mean`: ``"auto"`` (the default) is resolved to one of the
#: others from public values only (:func:`resolve_calibration`); a plan has a concrete one.
CALIBRATIONS = ("auto", "gaussian", "laplace", "zcdp")
PLAN_CALIBRATIONS = ("gaussian", "laplace", "zcdp")
#: ``"auto"`` picks Laplace only where its final-sum noise sd is at most this fraction of the
#: Gaussian one (a clear win: near the crossover, d = 10 at ε = 0.5 … 2, the measured errors of
#: the two went either way, docs/utility/mean.md).
AUTO_MARGIN = Fraction(3, 4)
#: Public floor on the noisy lower bound of the core size; below it the release is ⊥.
M_MIN = 10
#: Default size of the locate subsample (friend counting is O(m²d)).
M_LOCATE = 8000
#: Failure probability of the public bound on the locate noise norm that sets R.
BETA_LOCATE = 1e-3
# Budget shares (public constants, tuned with benchmarks/mean_tuning.py).
_SHARE_COUNT = Fraction(1, 20)
_SHARE_SELECT = Fraction(1, 10)
_SHARE_LOCATE = Fraction(1, 5)
_SHARE_LOCATE_DELTA = Fraction(1, 2)
_SHARE_FRIENDLY_COUNT = Fraction(1, 4)
_SHARE_QUANTILE = Fraction(1, 10)
#: The spread floor before the final clipping radius (``radius=None``, not the small-sample
#: plan; docs/proofs/mean.md §8c): its pure share of ε, taken from the final sum.
_SHARE_FLOOR = Fraction(1, 20)
#: ... when the released friendship radius is the bottom of its grid (public: the core's scale is
#: below the grid, e.g. one atom of tied values, and the floor decides whether the other rows are
#: clipped): this share instead, also from the sums. At ε/20 (cap K = 561 rows at ε = 1) a 0/1
#: column with 2 % or 3 % ones at n = 12000 / 15000 released its atom (71–150× the range oracle,
#: 12 runs each, with the former floor and tails); now 0.38–1.63× (benchmarks/mean_floor_tails.py).
_SHARE_FLOOR_TIED = Fraction(1, 5)
#: The floor's candidates ``U·2^k``, ``k = 0 … FLOOR_OCTAVES`` (public).
FLOOR_OCTAVES = 120
#: The floor's cap ``K`` (:func:`floor_cap`) keeps a group of rows all within ``U`` at
#: candidate 0 with probability at least ``1 − FLOOR_BETA``.
FLOOR_BETA = 1e-4
#: The floor's public penalty per octave above :data:`FLOOR_FREE`, in units of its noise scale
#: ``4/ε_f``, where the core is not one atom (the released radius above the bottom of its grid;
#: public): ``−FLOOR_PENALTY·max(0, k − FLOOR_FREE)`` scales (:func:`floor_offsets`). Why: on
#: continuous data every octave above the rows' reach has the same utility (all rows within),
#: candidate 0 or 1 leads that plateau by ``2K`` only, and one of its ~119 noises beats it with
#: probability about ``β_K/2``: N(0, 1), n = 1000, ε = 100 released 9.8·10²³ (U·2¹⁰²; docs/utility/
#: mean.md, sixth stop). A tied core (the radius at its grid's bottom: a 0/1 column) keeps no
#: penalty, its minority may sit many octaves up (and the aggregate's floor none: its noisy-max
#: radius does not mark tied groups, docs/proofs/aggregate_mean.md §1.9).
FLOOR_PENALTY = Fraction(1, 2)
#: ... and the octaves ``k <= FLOOR_FREE`` carry none: the clipping edges reach 6 octaves below
#: ``U·2^k̂`` (:func:`clip_edges`: ``QUANTILE_GRID/QUANTILE_OCTAVE``), so an overshoot of a few
#: octaves is harmless, and a heavy tail's lift by an octave or two stays free.
FLOOR_FREE = 4
#: Small samples: when the released ``n̂·ε`` is below this (public) the shares after the count
#: switch to the small-sample ones (radius selection and locate get more, the sums less).
SMALL_SAMPLE = 750
_SMALL_SHARE_SELECT = Fraction(1, 5)
_SMALL_SHARE_LOCATE = Fraction(1, 3)
_SMALL_SHARE_FRIENDLY_COUNT = Fraction(1, 2)
#: Large samples (docs/proofs/mean.md §0 and §7, "Large samples"): where the locate step's need at
#: the large shares fits LARGE_FIT times into the rows it counts (public: ``LARGE_FIT·(M_MIN + k)
#: <= min(n̂, m_locate)``, ``k`` the large plan's core-count shift; not in the small-sample range)
#: the locate step gets ε/10 instead of ε/5 and the sums the rest: its accuracy is set by its
#: (capped) subsample, not by n̂, while the sums' noise over n̂ is what is left at large n̂·ε.
#: ``LARGE_FIT = 0``: never (a control). Only with the radius chosen privately: with a given radius
#: the core can be a small part of the subsample (t₃ data, d = 100, n = 10⁴ with the Gaussian
#: benchmark's radius: ⊥ in 19 of 20 runs at ε/10). The distance histogram keeps ε/10: at ε/20 a
#: 0/1 column with 2.5 % ones at n = 12,000 lost its minority in 19 of 24 runs (0 of 24 at ε/10).
#: ``benchmarks/utility.py`` (20 runs, private r / CoinPress): heavy_tails d = 10, n = 10⁵, ε = 1
#: 1.28 → 1.13; n = 10⁴ (the coordinate plan's hand-over) 1.51 → 1.42.
LARGE_SHARE_LOCATE = Fraction(1, 10)
LARGE_FIT = 2
#: Per-column scales (``radius=None``, d >= 2): the scale step's share of ε (split evenly over
#: the d columns), taken from the sums. It runs only when the released ``n̂·ε·SHARE_SCALE/d >=
#: SCALE_MIN`` (public): below, the scales would be noise and the mean stays isotropic.
SHARE_SCALE = Fraction(1, 10)
SCALE_MIN = 150
#: The rank among the UNTIED consecutive differences that a column's scale targets (public, a
#: function of the released ``L = n̂·ε·SHARE_SCALE/d``, :func:`scale_rank`): the median below
#: ``L < SCALE_TAIL_MIN``, from there ``1 − 2^−j`` with ``j = 3 + ⌊log2(L/SCALE_TAIL_MIN)⌋`` (7/8,
#: 15/16, …, at most ``1 − 2^−SCALE_TAIL_JMAX``): the target keeps about ``100/ε_col`` untied
#: pairs above it, so the rank goes into the tail as n̂·ε grows, and the margin of the pick (below)
#: is at least 25 noise scales at every step. With median scales the
#: isotropic clip is set by the column whose tail reaches farthest in units of its scale, and the
#: other columns pay its noise: ``benchmarks/mean_mixed_types.py`` (16 runs, ε = 1, worst column
#: over the range oracle, FriendlyCore plan, median → 7/8 rank, n·ε/d = 12000): a 0/1 (20 % ones),
#: 100·lognormal(0, 1), N(50, 10), Poisson(3) table at d = 3 / 10: 2.86 / 7.29 → 1.29 / 2.40; the
#: same types in another order at d = 10: 4.31 → 1.86; homogeneous columns: N(7, 1) 0.22 / 0.30 →
#: 0.18 / 0.25, Exp(1) 0.53 / 0.33 → 0.71 / 0.22, lognormal(0, 1.5) 0.65 / 0.13 → 0.44 / 0.23, 0/1
#: 0.63 / 0.67 → 0.63 / 0.65 (d = 3 / 10). A fixed 7/8 was not enough as n grew (probe, 12 runs,
#: d = 10, n·ε/d = 24000, 7/8 → 15/16): the same 0/1 + lognormal table 4.51 → 1.14, the other order
#: 1.59 → 1.53; N(7, 1) 0.27 → 0.29, Exp(1) 0.30 → 0.24, 0/1 0.74 → 0.77, lognormal(0, 1.5) 0.40 → 0.31.
#: Why not below: the rank distance from the tail's cell to every cell above it is only
#: ``(1 − q)(m − Z)``, so the pick needs ``(1 − q)·L/4`` noise scales where the median has ``L/8``:
#: at 7/8 and ``L = 800`` that is 25 scales (the median's 18.75 at SCALE_MIN), and the public
#: prior's pull on a column of values 2^±50 stays below half the margin. At L = 150 and 202 the
#: 7/8 rank picked 2+ octaves off for 1–10 % of the columns (2000 draws each), at 800 for none.
SCALE_TAIL_MIN = 800
SCALE_TAIL_JMAX = 12
#: Small samples, radius: when the released ``n̂·ε < PAIR_RADIUS`` the friendship radius is
#: ``pair_factor(d)`` times a private median of the distances of consecutive rows in a random
#: order (report-noisy-max, never ⊥) instead of AboveThreshold, whose query noise crosses the
#: threshold at some tiny radius in a third to half of the runs at n = 300 (then too few friends).
PAIR_RADIUS = 5000
#: ... and only for ``d <= PAIR_RADIUS_DIM`` (at d = 100, n = 1000 with 5 % far contamination
#: the pair rule gave errors of 2·10³ against 2.7 for AboveThreshold: not validated beyond).
PAIR_RADIUS_DIM = 5
#: Candidate per-column scales ``2^k``, ``k`` in this range (public): exact power-of-two scaling.
SCALE_EXPONENTS = np.arange(-50, 71)
#: Refinement schedules tried (public choice): numbers of refinement steps and the share of the
#: estimate budget (ρ, or ε for Laplace) that they take together, split evenly.
REFINE_STEPS = (0, 1, 2, 3)
REFINE_SHARES = (Fraction(1, 8), Fraction(1, 4), Fraction(3, 8), Fraction(1, 2))
#: Robust fallback (far mass, below): the final clipping radius is the least grid radius whose
#: noisy tail count is, with a margin of two noise standard deviations, at most this fraction of n̂.
CLIP_TAIL = Fraction(1, 2)
#: Grid of candidate final clipping radii below ``U``: ``U·2^{-j/QUANTILE_OCTAVE}``,
#: ``j = 1 … QUANTILE_GRID``; above ``U``: ``U·2^{k/QUANTILE_ABOVE}`` up to the top edge
#: ``T = U·2^A``, ``A = ceil(log2(TOP_FACTOR·√n̂))`` (so the grid reaches a multiple of ``√n̂``
#: times U: for finite-variance data the expected count beyond it vanishes, docs/proofs/mean.md §8).
QUANTILE_OCTAVE = 4
QUANTILE_GRID = 24
QUANTILE_ABOVE = 2
TOP_FACTOR = 4
#: Tail rule: the final clipping radius is the least edge whose noisy count beyond it is at most
#: ``τ + TAIL_SD·sd`` (sd: public noise sd of that tail count), ``τ = max(TAIL_MIN, √d·σ_1)`` with
#: ``σ_1`` the final sum's noise sd per coordinate in units of its radius (so the clipping bias,
#: at most τ·excess/n, and the noise, ≈ √d·σ_1·R/n, are balanced).
TAIL_MIN = 1
TAIL_SD = 3
#: ... when only the top edge passes, it is the choice if the next edge fails clearly, ``T̃_1 >
#: τ + TAIL_TOP_SD·sd_1`` (mass just below the top: a 0/1 column's minority at n = 3·10⁴, ε = 1
#: whose distance 1 fell between the top two edges), else the robust rule (the noisy tails over
#: empty top bins are a random walk that can stay above the tail bound).
TAIL_TOP_SD = 6
#: Far mass: if the noisy count beyond the top edge exceeds ``max(TAIL_FAR, τ) + 3·sd``, the
#: robust fallback (median-distance clip, :data:`CLIP_TAIL`) is used instead of the tail rule.
TAIL_FAR = 4
_ROWS = 1 << 14  # rows per block of the clipped sum
_SAFETY = 1.0 + 2.0**-40  # float-computed noise scales (grid exponent choice) carry this factor
_U = Fraction(1, 2**53)  # unit roundoff of float64
#: Largest end-to-end ε' given to one FriendlyCore step (public; see capped_friendly_budget).
FRIENDLY_EPS_MAX = Fraction(64)
#: Smallest ε accepted by private_mean and private_kmeans (documented limit).
EPS_MIN = Fraction(2) ** -100
#: Smallest δ accepted by private_mean and private_kmeans: below it the friendly δ of the
#: conversion theorem (about δ/4 at small ε) is no longer a normal float64 (documented limit).
DELTA_MIN = Fraction(2) ** -900
#: Clipped-sum terms are rounded to the grid ``2^(E − SUM_BITS)`` of their radius ``R <= 2^E``
#: (so ``|term/step| <= 2^SUM_BITS``) and summed exactly in integers.
SUM_BITS = 38
_SUM_ROWS = 1 << 14  # 2^14 terms of at most 2^38 + 1: partial sums < 2^53, exact in float64
#: Rounding error (grid units) of a released clipped sum: one rounding of an exact integer.
SUM_ROUNDING = rounding_error(2 * _U)


def _frac(x: Any) -> Fraction:
    """``x`` exactly; for a float, the smaller of its value and its shortest decimal reading
    (what a :class:`~privagg.accounting.Ledger` records), so a charge never exceeds it."""
    if isinstance(x, float):
        return min(Fraction(x), Fraction(repr(x)))
    return Fraction(x)


def _float_down(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def _float_up(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def rho_for(epsilon: Any, delta: Any) -> Fraction:
    """The largest ρ (within 2⁻³⁰ relative) with ``zcdp_to_epsilon(ρ, δ) <= ε`` (never above).

    Bisection on the accounting module's rigorous conversion (48 linear steps on ``[0, ε]``,
    then, only where they leave more than 2⁻³⁰ relative, i.e. tiny ε, geometric steps from
    the simple-bound solution), so the returned ρ is certified:
    ``zcdp_to_epsilon(rho_for(ε, δ), δ) <= ε`` exactly.
    """
    eps, dlt = _frac(epsilon), _frac(delta)
    lo_f, hi_f = 0.0, float(eps)  # the invariant: ρ = lo_f is certified (ρ = 0 trivially)
    for _ in range(48):
        mid = (lo_f + hi_f) / 2
        if zcdp_to_epsilon(Fraction(mid), dlt) <= eps:
            lo_f = mid
        else:
            hi_f = mid
    if hi_f - lo_f > lo_f * 2.0**-30:
        # Tiny ε: the linear steps cannot resolve ρ ≈ ε²/(4 ln(1/δ)) (it stayed 0 at ε = 1e-12,
        # δ = 1e-18). Geometric bisection from the certified simple-bound solution
        # ρ_s = (√(L + ε) − √L)², L = ln(1/δ) (ρ_s + 2√(ρ_s L) = ε, and CKS <= simple).
        big_l = math.log(dlt.denominator) - math.log(dlt.numerator)
        rho_s = (float(eps) / (math.sqrt(big_l + float(eps)) + math.sqrt(big_l))) ** 2
        while rho_s > 0 and zcdp_to_epsilon(Fraction(rho_s), dlt) > eps:
            rho_s *= 1.0 - 2.0**-30  # pragma: no cover - float rounding of ρ_s
        lo_f = max(lo_f, rho_s)
        for _ in range(60):
            if not (lo_f > 0 and hi_f - lo_f > lo_f * 2.0**-41):
                break
            mid = math.sqrt(lo_f) * math.sqrt(hi_f)
            if zcdp_to_epsilon(Fraction(mid), dlt) <= eps:
                lo_f = mid
            else:
                hi_f = mid
    lo = Fraction(lo_f)
    if lo > 0 and zcdp_to_epsilon(lo, dlt) > eps:  # pragma: no cover - bisection invariant
        raise AssertionError("rho_for: bisection invariant broken")
    return lo


#: Smallest ε accepted by private_mean and private_kmeans (:func:`check_epsilon_floor`): at
#: ε >= 2⁻⁴⁰ the count's discrete Laplace scale 40/ε stays below ``MAX_NOISE_SCALE = 2^50``
#: (docs/proofs/noise.md §7.3); at 4bd1e9f ε down to 2⁻¹⁰⁰ was accepted and the noise could wrap.
EPS_FLOOR = Fraction(2) ** -40


def check_epsilon_floor(where: str, epsilon: Any) -> Fraction:
    """ε as validated by :func:`~privagg._validate.check_epsilon`, and at least 2⁻⁴⁰ ≈ 9.1e-13
    (:data:`EPS_FLOOR`): below it the count noise (scale 40/ε) would exceed the int64 samplers'
    bound ``MAX_NOISE_SCALE = 2^50`` (and every release is ⊥ with overwhelming probability)."""
    if check_epsilon(where, epsilon) < 2.0**-40:
        raise fail(where, "epsilon", "a finite number >= 2**-40", epsilon)
    return _frac(epsilon)


def check_delta_floor(where: str, delta: Any) -> Fraction:
    """δ as validated by :func:`~privagg._validate.check_delta`, and at least :data:`DELTA_MIN`."""
    if check_delta(where, delta) < 2.0**-900:
        raise fail(where, "delta", "a number in [2**-900, 1)", delta)
    return _frac(delta)


def capped_friendly_budget(eps_target: Fraction, delta_of: Any,
                           alpha: Any = 0) -> tuple[Fraction, Fraction]:
    """The friendly budget ``(ε_f, δ_f)`` of a FriendlyCore step whose end-to-end target is
    ``(ε', delta_of(ε'))``, with ``ε' = min(eps_target, FRIENDLY_EPS_MAX)``, halved (public, at
    most 60 times) while the friendly ``δ_f`` would fall below ``2⁻¹⁰⁰⁰``.

    Why a cap: ``ε_f = ln(1 + ε'/L)`` grows only logarithmically in ``ε'``, while
    ``δ_f = δ'(e^{ε_f} − 1)/(e^{ε'} − 1)`` falls like ``e^{−ε'}`` and underflows float64 beyond
    ``ε' ≈ 700`` (``math domain error`` at ε = 5000 before). Spending less than the share is
    always allowed: the step's guarantee is that of its calibrated noise, and the mechanisms
    give the rest to later steps (private_mean) or leave it unspent (private_kmeans). With
    ``δ >= DELTA_MIN`` the halving always ends with ``δ_f >= 2⁻¹⁰⁰⁰``.
    """
    e = min(eps_target, FRIENDLY_EPS_MAX)
    for _ in range(60):
        ef, df = friendly_budget(_float_down(e), _float_down(delta_of(e)), alpha=alpha)
        if df >= 2.0**-1000 and ef > 0:
            return Fraction(ef), Fraction(df)
        e /= 2
    raise AssertionError("capped_friendly_budget: δ below DELTA_MIN")  # pragma: no cover


@functools.lru_cache(maxsize=256)
def dlap_tail_shift(scale: Fraction, delta: Fraction) -> int:
    """The least integer ``k >= 0`` with ``exp(−k/t) <= δ``; then ``P[Z > k] < δ`` for
    ``Z ~ DLap(t)`` (``P[Z >= k+1] = e^{−(k+1)/t}/(1 + e^{−1/t})``)."""
    with mpmath.workdps(50):
        t = mpmath.mpf(scale.numerator) / scale.denominator
        d = mpmath.mpf(delta.numerator) / delta.denominator
        k = max(0, int(mpmath.ceil(t * mpmath.log(1 / d))))
        while mpmath.exp(-mpmath.mpf(k) / t) > d:  # pragma: no cover - guard against rounding
            k += 1
    return k


@dataclass(frozen=True)
class MeanPlan:
    """Every public scale of :func:`private_mean`, computed without data.

    Attributes
    ----------
    calibration : str
    alpha : Fraction
        BasicFilter's α exactly as given (a float's exact value); the filter rounds it down
        itself (:func:`~privagg.friendlycore.filter.alpha_fraction`).
    small : bool
        Small-sample shares (chosen when the released ``n̂·ε < SMALL_SAMPLE``).
    eps_count : Fraction
        ε of the noisy count ``n̂`` (discrete Laplace scale ``1/eps_count``).
    eps_select, delta_select : Fraction
        Radius selection (0 when the radius is given).
    eps_friendly, delta_friendly : Fraction
        The locate step's friendly budget (the friendly algorithm's guarantee).
    eps_core_count, delta_core_count : Fraction
        Friendly count part (discrete Laplace scale ``1/eps_core_count``; tail ``delta``).
    eps_core_mean, delta_core_mean : Fraction
        Friendly mean part; ``rho_core_mean`` its ρ for Gaussian calibrations (else None).
    eps_locate, delta_locate : Fraction
        End-to-end guarantee of the locate step (conversion theorem).
    eps_sum, delta_sum : Fraction
        The clipped-sum releases together (refinement steps and the final sum); ``rho_sum`` their
        total ρ for Gaussian calibrations (else None), split between the steps by
        :func:`estimate_schedule`.
    eps_quantile : Fraction
        The noisy histogram of distances that sets the final clipping radius (discrete Laplace
        scale ``1/eps_quantile`` per bin).
    eps_scale : Fraction
        The per-column scale step (0 when it does not run): ``eps_scale/d`` per column.
    eps_floor : Fraction
        The spread floor (0 when it does not run).
    large : bool
        Large-sample shares (:func:`large_sample`: the locate step's ε/10 instead of ε/5).
    """

    calibration: str
    alpha: Fraction
    small: bool
    eps_count: Fraction
    eps_select: Fraction
    delta_select: Fraction
    eps_friendly: Fraction
    delta_friendly: Fraction
    eps_core_count: Fraction
    delta_core_count: Fraction
    eps_core_mean: Fraction
    delta_core_mean: Fraction
    rho_core_mean: Fraction | None
    eps_locate: Fraction
    delta_locate: Fraction
    eps_sum: Fraction
    delta_sum: Fraction
    rho_sum: Fraction | None
    eps_quantile: Fraction
    eps_scale: Fraction = Fraction(0)
    eps_floor: Fraction = Fraction(0)
    large: bool = False

    @property
    def gaussian(self) -> bool:
        return self.calibration != "laplace"

    @property
    def core_count_shift(self) -> int:
        """``k``: ``m_low = m̂ − k`` with ``P[DLap(1/eps_core_count) > k] < delta_core_count``."""
        return dlap_tail_shift(1 / self.eps_core_count, self.delta_core_count)

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """The end-to-end (ε, δ) by basic composition of the steps."""
        eps = (self.eps_count + self.eps_select + self.eps_locate + self.eps_quantile
               + self.eps_scale + self.eps_floor + self.eps_sum)
        dlt = self.delta_select + self.delta_locate + self.delta_sum
        return PrivacyLoss.approx(eps, dlt)

    def public_parameters(self) -> dict[str, Any]:
        """JSON-ready public parameters (for the ledger)."""
        return {"calibration": self.calibration, "alpha": float(self.alpha),
                "eps_count": float(self.eps_count), "eps_select": float(self.eps_select),
                "eps_locate": float(self.eps_locate), "eps_quantile": float(self.eps_quantile),
                "eps_sum": float(self.eps_sum), "eps_scale": float(self.eps_scale),
                "eps_floor": float(self.eps_floor)}


def mean_plan(
    epsilon: Any,
    delta: Any,
    *,
    calibration: str = "gaussian",
    alpha: Any = 0.0,
    select_radius: bool = False,
    small: bool = False,
    scale: bool = False,
    tied: bool = False,
    large: bool = False,
    where: str = "private_mean",
    count_share: Any = None,
) -> MeanPlan:
    """Split (ε, δ) between the steps of :func:`private_mean` and calibrate each (public only).

    Shares: ε_n = ε/20; ε_sel = ε/10 when the radius is chosen privately (δ_sel = 0); the locate
    step gets the end-to-end (ε/5, δ/2) (δ for ``"laplace"``), turned into a friendly budget by
    :func:`privagg.friendly_budget` and split 1/4 : 3/4 between count and mean (δ half each for
    Gaussian; the locate ε is capped at :data:`FRIENDLY_EPS_MAX`, :func:`capped_friendly_budget`,
    and what the cap leaves goes to the sums); the distance histogram gets ε/10; the clipped sums get the rest, (ε − the others,
    δ/2), as ρ-zCDP certified by :func:`rho_for` (Gaussian) or as pure ε (Laplace), split between
    the refinement steps and the final sum by :func:`estimate_schedule`. Every returned guarantee
    is the exact one of the calibrated noise, never above its share. ``small=True``: the
    small-sample shares (ε_sel = ε/5, locate ε/3, friendly count 1/2 of the friendly ε), which
    :func:`private_mean` uses when the released ``n̂·ε < SMALL_SAMPLE``. ``scale=True`` (only
    with ``select_radius``): the per-column scale step gets ε·:data:`SHARE_SCALE`, from the sums.
    ``tied=True``: the spread floor gets ε·:data:`_SHARE_FLOOR_TIED` instead of ε/20, from the sums
    (:func:`private_mean` when the released radius is the bottom of its grid; §8c).
    ``large=True`` (not with ``small``): the large-sample shares (locate target ε/10; the sums get
    what it leaves), which :func:`private_mean` uses when :func:`large_sample`.
    ``count_share``: the count's share of ε instead of ε/20 (a public Fraction in (0, 1/4]; the
    grouped mean keeps its ε_g/40, :data:`privagg.mechanisms.grouped_mean.SHARE_COUNT`).
    """
    eps = check_epsilon_floor(where, epsilon)
    dlt = check_delta_floor(where, delta)
    check_choice(where, "calibration", calibration, PLAN_CALIBRATIONS)
    alpha_fraction(alpha, where)
    share = _SHARE_COUNT if count_share is None else Fraction(count_share)
    if not 0 < share <= Fraction(1, 4):  # pragma: no cover - a module constant, never user input
        raise fail(where, "count_share", "a fraction in (0, 1/4]", count_share)
    if small and large:  # pragma: no cover - callers choose one
        raise fail(where, "large", "not with small", large)
    return _plan(eps, dlt, calibration, Fraction(alpha), bool(select_radius), bool(small),
                 bool(scale) and bool(select_radius), share, _constants_key(), bool(tied), bool(large))


def resolve_calibration(calibration: str, epsilon: Any, delta: Any, d: int, *, select_radius: bool = True,
                        alpha: Any = 0.0, where: str = "private_mean") -> str:
    """The concrete calibration of :func:`private_mean` (public: the arguments only, no data).

    ``"auto"`` (the default) is ``"laplace"`` when the final clipped sum's per-coordinate noise sd
    over its clipping radius is at most :data:`AUTO_MARGIN` times that of Gaussian noise, each
    from its own plan (:func:`mean_plan` at (ε, δ), the radius selected or not, neither the
    small-sample nor the scale shares): ``√(2d)/ε_sum^L <= μ/√(2ρ_sum^G)``, i.e.
    ``4d·ρ_sum^G <= μ²·(ε_sum^L)²`` (exact rationals; docs/proofs/mean.md §13). The ℓ1
    sensitivity of a sum clipped to an ℓ2 ball grows like √d, the ℓ2 one does not, and a pure-ε
    part costs ε where a Gaussian one needs ρ ≈ ε²/(4 ln(1/δ)): Laplace wins at small d and at
    large ε (at δ = 1e-6, radius selected: d <= 4 at ε = 0.1, 5 at ε = 1, 7 at ε = 10, 18 at
    ε = 100). Any other value is returned
    unchanged (``"zcdp"`` is ``"gaussian"``'s synonym)."""
    check_choice(where, "calibration", calibration, CALIBRATIONS)
    if calibration != "auto":
        return calibration
    eps, dlt = _frac(check_epsilon_floor(where, epsilon)), _frac(check_delta_floor(where, delta))
    alpha_fraction(alpha, where)  # validates; the plans take Fraction(alpha), as in mean_plan
    return _resolve_auto(eps, dlt, int(d), bool(select_radius), Fraction(alpha), where, _constants_key())


@functools.lru_cache(maxsize=256)
def _resolve_auto(eps: Fraction, dlt: Fraction, d: int, select_radius: bool, alpha: Fraction, where: str,
                  _key: tuple) -> str:
    gauss = mean_plan(eps, dlt, calibration="gaussian", alpha=alpha, select_radius=select_radius, where=where)
    lap = mean_plan(eps, dlt, calibration="laplace", alpha=alpha, select_radius=select_radius, where=where)
    return "laplace" if 4 * d * gauss.rho_sum <= AUTO_MARGIN**2 * lap.eps_sum**2 else "gaussian"


def mean_privacy_loss(epsilon: Any, delta: Any, *, calibration: str = "gaussian", alpha: Any = 0.0,
                      select_radius: bool = False, where: str = "private_mean") -> PrivacyLoss:
    """The guarantee of :func:`private_mean`: the largest (ε, δ) of its plans (the plan is
    chosen from the released ``n̂``; adaptive composition bounds each branch by its plan).
    ``calibration`` is a concrete one: for ``private_mean``'s default ``"auto"`` pass
    ``resolve_calibration("auto", ε, δ, d, select_radius=…)``."""
    # validated first (in the order mean_plan checks them), then the cached public computation
    eps, dlt = check_epsilon_floor(where, epsilon), check_delta_floor(where, delta)
    check_choice(where, "calibration", calibration, PLAN_CALIBRATIONS)
    alpha_fraction(alpha, where)
    return _mean_privacy_loss(eps, dlt, calibration, Fraction(alpha), bool(select_radius), where,
                              _constants_key())


def _constants_key() -> tuple:
    """The public module constants the cached losses read (in their cache keys: a test or
    benchmark that sets one gets a fresh value)."""
    return (_SHARE_COUNT, _SHARE_SELECT, _SHARE_LOCATE, _SHARE_LOCATE_DELTA, _SHARE_FRIENDLY_COUNT,
            _SHARE_QUANTILE, _SMALL_SHARE_SELECT, _SMALL_SHARE_LOCATE, _SMALL_SHARE_FRIENDLY_COUNT,
            SHARE_SCALE, FRIENDLY_EPS_MAX, EPS_MIN, _SHARE_FLOOR, _SHARE_FLOOR_TIED,
            LARGE_SHARE_LOCATE, mean_small.constants_key())


@functools.lru_cache(maxsize=64)
def _mean_privacy_loss(epsilon: Fraction, delta: Fraction, calibration: str, alpha: Fraction,
                       select_radius: bool, where: str, _key: tuple) -> PrivacyLoss:
    """:func:`mean_privacy_loss` of validated, exact parameters (public only: cached; ``_frac``
    and ``Fraction`` are the identity on them, so the value is that of the raw parameters)."""
    plans = _friendly_losses(epsilon, delta, calibration, alpha, select_radius, where)
    if select_radius and coordinate_plan_possible(epsilon, delta):  # the coordinate plan (§11)
        for low in (False, True):  # the selections' share: a function of the released n̂
            plans.append(PrivacyLoss.approx(*mean_small.coordinate_loss(epsilon, delta, low)))  # no switch
            plans.append(PrivacyLoss.approx(*mean_small.continuation_loss(epsilon, delta, low)))  # step 4′
            spent_e, spent_d, rest_e, rest_d = mean_small.switch_budget(epsilon, delta, low)
            plans += [PrivacyLoss.approx(spent_e + p.epsilon, spent_d + p.delta)  # switched (basic composition)
                      for p in _friendly_losses(rest_e, rest_d, calibration, alpha, True, where)]
    return PrivacyLoss.approx(max(p.epsilon for p in plans), max(p.delta for p in plans))


def _friendly_losses(epsilon: Any, delta: Any, calibration: str, alpha: Any, select_radius: bool,
                     where: str) -> list[PrivacyLoss]:
    """The losses of the FriendlyCore plans (default or small-sample shares, the large-sample ones
    when the radius is selected, scale step or not, the floor's tied share or not)."""
    shares = ((False, False), (True, False)) + (((False, True),) if select_radius else ())
    return [mean_plan(epsilon, delta, calibration=calibration, alpha=alpha, select_radius=select_radius,
                      small=small, large=large, scale=scale, tied=tied, where=where).privacy_loss
            for small, large in shares for scale in (False, True) for tied in (False, True)]


@functools.lru_cache(maxsize=64)
def _friendly_loss(epsilon: Fraction, delta: Fraction, calibration: str, alpha: Fraction,
                   select_radius: bool, where: str, _key: tuple) -> PrivacyLoss:
    """The largest (ε, δ) of the FriendlyCore plans at validated, exact parameters (cached)."""
    losses = _friendly_losses(epsilon, delta, calibration, alpha, select_radius, where)
    return PrivacyLoss.approx(max(p.epsilon for p in losses), max(p.delta for p in losses))


def coordinate_plan_possible(epsilon: Any, delta: Any) -> bool:
    """Whether the small-sample coordinate plan (§11) is among the plans (public: ε, δ only; its
    switch to FriendlyCore needs the left ε above the floor, each of its Laplace steps at least
    ``mean_small.STEP_EPS_MIN`` and its selections a positive ρ)."""
    eps = _frac(epsilon)
    return (mean_small.COORD_SAMPLE > 0 and mean_small.switch_epsilon(eps, delta) >= EPS_MIN
            and mean_small.plan_possible(eps, delta))


@functools.lru_cache(maxsize=64)
def _plan(eps: Fraction, dlt: Fraction, calibration: str, alpha: Fraction, select_radius: bool,
          small: bool, scale: bool, count_share: Fraction, _key: tuple, tied: bool = False,
          large: bool = False) -> MeanPlan:
    """:func:`mean_plan` of validated, exact parameters (cached; ``_key`` is :func:`_constants_key`,
    so a test or benchmark that sets a share never meets a plan computed before)."""
    gaussian = calibration != "laplace"
    eps_count = eps * count_share
    share_select = _SMALL_SHARE_SELECT if small else _SHARE_SELECT
    eps_select = eps * share_select if select_radius else Fraction(0)
    locate_target = eps * (_SMALL_SHARE_LOCATE if small else LARGE_SHARE_LOCATE if large else _SHARE_LOCATE)
    locate_delta_target = dlt * _SHARE_LOCATE_DELTA if gaussian else dlt
    ef, df = capped_friendly_budget(locate_target, lambda e: locate_delta_target, alpha)
    e_cc = ef * (_SMALL_SHARE_FRIENDLY_COUNT if small else _SHARE_FRIENDLY_COUNT)
    e_cm = ef - e_cc
    if gaussian:
        d_cc = df / 2
        d_cm = df - d_cc
        rho_cm = rho_for(e_cm, d_cm)
        e_cm = zcdp_to_epsilon(rho_cm, d_cm)
    else:
        d_cc, d_cm, rho_cm = df, Fraction(0), None
    e_loc, d_loc = end_to_end_budget(_float_up(e_cc + e_cm), _float_up(d_cc + d_cm), alpha=alpha)
    e_loc, d_loc = Fraction(e_loc), Fraction(d_loc)
    eps_quantile = eps * _SHARE_QUANTILE
    eps_scale = eps * SHARE_SCALE if scale else Fraction(0)
    eps_floor = (eps * (_SHARE_FLOOR_TIED if tied else _SHARE_FLOOR) if select_radius and not small
                 else Fraction(0))
    eps_sum = eps - eps_count - eps_select - e_loc - eps_quantile - eps_scale - eps_floor
    if gaussian:
        delta_sum = dlt - d_loc
        rho_sum = rho_for(eps_sum, delta_sum)
        eps_sum = zcdp_to_epsilon(rho_sum, delta_sum)
    else:
        delta_sum, rho_sum = Fraction(0), None
    return MeanPlan(calibration, alpha, small, eps_count, eps_select, Fraction(0), ef, df,
                    e_cc, d_cc, e_cm, d_cm, rho_cm, e_loc, d_loc, eps_sum, delta_sum, rho_sum,
                    eps_quantile, eps_scale, eps_floor, large)


def large_sample(n_hat: int, m_locate: int, epsilon: Any, delta: Any, *, calibration: str, alpha: Any,
                 select_radius: bool, scale: bool, where: str = "private_mean") -> bool:
    """Whether :func:`private_mean` takes the large-sample shares (public: the released ``n̂``,
    ``m_locate``, ε, δ and the plan's flags): the radius chosen privately (AboveThreshold targets a
    core of 3/4 of the subsample, ``1 − GAMMA``, the pair radius is ``2 + 1/d`` times the median
    distance of consecutive rows; a given radius may befriend far fewer rows), not in
    the small-sample range, and the large plan's locate need ``M_MIN + k`` (``k`` its core-count
    shift) fits :data:`LARGE_FIT` times into ``min(n̂, m_locate)``, the rows the locate step counts
    (docs/proofs/mean.md §7, "Large samples")."""
    if LARGE_FIT <= 0 or not select_radius or n_hat * _frac(epsilon) < SMALL_SAMPLE:
        return False
    plan = mean_plan(epsilon, delta, calibration=calibration, alpha=alpha, select_radius=select_radius,
                     scale=scale, large=True, where=where)
    return LARGE_FIT * (M_MIN + plan.core_count_shift) <= min(n_hat, m_locate)


@dataclass(frozen=True)
class MeanRelease:
    """A private mean (or ⊥).

    Attributes
    ----------
    ok : bool
        False when the mechanism output ⊥ (a normal DP output: too few points agree).
    mean : numpy.ndarray of float64, shape (d,), or None
    epsilon, delta : float
        The end-to-end guarantee (add/remove neighbours), at most the requested budget.
    radius : float or None
        The friendship radius used (given, or privately selected; None if selection failed);
        the coordinate plan (``clip_rule == "coordinate"``): 1 (in units of ``scales``).
    secure : bool
        Noise drawn from the secure generator.
    privacy_loss : PrivacyLoss
        ``PrivacyLoss.approx(epsilon, delta)`` (what a ledger is charged).
    calibration : str
    clip_radius : float or None
        The clipping radius R of the final sum (public given the earlier releases; None on ⊥).
        The coordinate plan: 1, in units of ``scales`` (coordinate j is clipped to
        ``|x_j − center_j| <= R_j``, ``R_j`` = ``scales[j]`` rounded up to the radius grid; there
        ``scales[j] = K_j·s_j``, the released spread times the released clip multiple, §11).
    center : numpy.ndarray or None
        The released center ĉ of the final clipping ball (None on ⊥).
    reason : str or None
        Why the output is ⊥ (None when ``ok``), built from public parameters and values the
        mechanism released anyway (the noisy count ``n̂``, the noisy core size ``m̂``): e.g.
        ``"about 0 numeric rows (noisy count n̂ = -2 < 1)"`` for a column without numbers.
    n_hat : int or None
        The released noisy count of finite rows (None only before it was drawn: never).
    outside : float or None
        The released noisy count of rows beyond the final clipping ball (``‖x − center‖ >
        clip_radius``), post-processing of the distance histogram; ``outside_sd`` is its public
        noise standard deviation. Rows beyond the ball are pulled onto it: the clipping bias of
        coordinate j is at most ``(that count) × (their mean excess distance) / n``. The
        coordinate plan: the rows beyond the box (any coordinate beyond its ``R_j``).
    clip_rule : str or None
        ``"tail"`` (the radius leaves about τ rows outside), ``"robust"`` (a mass of rows far
        beyond the located cluster: median-distance clip, biased by design towards the cluster)
        or ``"coordinate"`` (the small-sample coordinate plan, :mod:`privagg.mechanisms.mean_small`,
        docs/proofs/mean.md §11: a box of ``scales[j]`` per coordinate).
    scales : numpy.ndarray or None
        The released per-column scales ``s_j`` (powers of two), when the per-column scale step
        ran (``radius=None``, d >= 2, ``n̂·ε/(10d) >= SCALE_MIN = 150``): the mean was computed on
        ``x_j/s_j`` and scaled back, so ``radius`` and ``clip_radius`` are in those standardized
        units (the clipping region is the ellipsoid ``‖(x − center)/s‖ <= clip_radius``). The
        coordinate plan (``clip_rule == "coordinate"``): the released clip half-widths
        ``K_j·s_j`` (a spread on the grid ``2^{k/4}`` times a multiple of the public ladder
        ``mean_small.COORD_CLIP_KS``; not powers of two), one per coordinate, d >= 1; the clipping
        region is the box above. None otherwise (one isotropic ball in the data's units).
    unit : str or None
        User level (``units`` given; docs/proofs/mean.md §10): the privacy unit — a Series'
        name, else ``"units"`` (the CLI: the ``--privacy-unit`` column) — whose rows were reduced
        to one vector, so every count, sum and interval is about one vector per unit. None at
        record level: the unit is one row.
    max_rows_per_unit : int or None
        User level: k, a unit's vector is the average of up to k of its rows (1: one sampled
        row); None at record level.
    neighbors : str
        ``"add_remove"``: one row — or, at user level, one unit with all its rows — added or
        removed.
    """

    ok: bool
    mean: np.ndarray | None
    epsilon: float
    delta: float
    radius: float | None
    secure: bool
    privacy_loss: PrivacyLoss
    calibration: str
    clip_radius: float | None = None
    center: np.ndarray | None = None
    reason: str | None = None
    n_hat: int | None = None
    outside: float | None = None
    outside_sd: float | None = None
    clip_rule: str | None = None
    noise: tuple | None = field(default=None, repr=False, compare=False)
    scales: np.ndarray | None = None
    unit: str | None = None
    max_rows_per_unit: int | None = None
    neighbors: str = "add_remove"

    @property
    def rows_dropped(self) -> str | None:
        """User level: ``"not released"`` — how many rows the reduction to one vector per unit
        left out is not released (it would cost budget); None at record level (no bounding)."""
        return None if self.unit is None else "not released"

    def confidence_intervals(self, beta: Any = 0.05) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-coordinate intervals ``(low, high)``, each holding with probability ``>= 1 − β``
        over the noise of the final release (None for ⊥).

        What is covered: ``θ_j = center_j + (1/n)·Σ_i clip(x_i − center, clip_radius)_j``, the
        mean of the rows (finite rows, n of them) pulled into the released final clipping ball,
        given everything released before the final sum. It covers the final sum's noise (exact
        law: discrete Gaussian of parameter σ², or discrete Laplace, on its public grid), the
        count noise in ``n̂`` (β/10 of β, exact discrete Laplace tail) and the rounding. It
        does **not** cover the clipping bias ``θ − x̄``: rows beyond the ball (``outside``
        tells about how many) pull the mean towards the center by at most (their number) ×
        (their mean excess distance) / n per coordinate. Coverage is per coordinate, not
        simultaneous.
        """
        beta = check_beta("MeanRelease.confidence_intervals", beta)
        if not self.ok or self.noise is None or self.mean is None or self.center is None:
            return None
        kind, param, step, count_scale, rnd_per_row, rnd_fixed = self.noise
        if kind == "laplace-coordinate":  # per coordinate, in the data's units (§11)
            t = np.array([_noise_quantile("laplace", p, 0.9 * beta) for p in param]) * step
            k_c = _dlap_two_sided(count_scale, 0.1 * beta)
            half = noise_half_width(self.mean, self.center, np.array([_grid_up(self.clip_radius * v) for v in self.scales.tolist()]),
                                    float(self.n_hat), t, k_c, rnd_per_row, rnd_fixed)
            return _finite(self.mean - half), _finite(self.mean + half)
        sc = 1.0 if self.scales is None else self.scales  # powers of two: exact
        mean, center = self.mean / sc, self.center / sc  # the standardized release
        t = _noise_quantile(kind, param, 0.9 * beta) * step  # |Z_j| <= t w.p. >= 1 − 0.9β
        k_c = _dlap_two_sided(count_scale, 0.1 * beta)  # |n̂ − n| <= k_c w.p. >= 1 − 0.1β
        half = noise_half_width(mean, center, float(self.clip_radius), float(self.n_hat), t, k_c,
                                rnd_per_row, rnd_fixed)
        return _finite((mean - half) * sc), _finite((mean + half) * sc)


def noise_half_width(mean: Any, center: Any, clip_radius: Any, n_hat: Any, t: Any, k_c: Any,
                     rnd_per_row: Any, rnd_fixed: Any) -> np.ndarray:
    """Half-width of :meth:`MeanRelease.confidence_intervals` (docs/proofs/mean.md §8),
    elementwise (numpy broadcasting): ``t`` the final noise quantile, ``k_c`` the count noise
    quantile, rounding ``(n̂ + k_c)·rnd_per_row + rnd_fixed``, all in the data's units."""
    n_hat = np.asarray(n_hat, dtype=np.float64)
    rnd = (n_hat + k_c) * rnd_per_row + rnd_fixed
    off = np.abs(mean - center) * n_hat
    s_over_n = np.minimum(clip_radius, (off + t + rnd) / np.maximum(n_hat - k_c, 1.0))
    half = (t + rnd) / n_hat + s_over_n * k_c / n_hat
    half = half + 4.0 * 2.0**-53 * (np.abs(mean) + np.abs(center))
    return half * (1.0 + 2.0**-40)


def _noise_quantile(kind: str, param: float, beta: float) -> float:
    """The least integer ``t`` (grid units) with ``P[|Z| > t] <= β`` for one coordinate of the
    final noise: discrete Gaussian with parameter ``σ² = param`` (exact sums of the law for
    ``σ <= 2000``; beyond, the normal tail with the half-step correction, whose relative error
    is ``O(1/σ²)``), or discrete Laplace of scale ``param``."""
    if kind == "laplace":
        return float(_dlap_two_sided(param, beta))
    sigma = math.sqrt(param)
    if sigma <= 2000.0:
        k = np.arange(0, math.ceil(40.0 * sigma) + 2, dtype=np.float64)
        w = np.exp(-(k * k) / (2.0 * param))
        total = w[0] + 2.0 * w[1:].sum()
        tail = 2.0 * (w.sum() - np.cumsum(w)) / total  # tail[t] = P[|Z| > t]
        return float(np.argmax(tail <= beta))
    z = statistics.NormalDist().inv_cdf(1.0 - beta / 2.0)
    return float(math.ceil(sigma * z - 0.5))


def _dlap_two_sided(scale: float, beta: float) -> int:
    """The least integer ``k >= 0`` with ``P[|Z| > k] = 2e^{−(k+1)/t}/(1 + e^{−1/t}) <= β`` for
    ``Z ~ DLap(t)``."""
    t = float(scale)
    k = max(0, math.ceil(t * math.log(2.0 / (beta * (1.0 + math.exp(-1.0 / t)))) - 1.0))
    while k > 0 and 2.0 * math.exp(-k / t) / (1.0 + math.exp(-1.0 / t)) <= beta:
        k -= 1  # pragma: no cover - float rounding of the closed form
    while 2.0 * math.exp(-(k + 1) / t) / (1.0 + math.exp(-1.0 / t)) > beta:
        k += 1  # pragma: no cover
    return k


_FMAX = float(np.finfo(np.float64).max)


def _finite(v: np.ndarray, inplace: bool = False) -> np.ndarray:
    """A released vector clamped into the float range (post-processing): a release beyond
    ±1.8e308 (data there, plus noise) becomes ±max instead of ±inf, so later steps and JSON
    output never meet an infinity. ``inplace``: ``v`` (a float64 array) itself is overwritten."""
    if inplace:
        np.nan_to_num(v, copy=False, nan=0.0)
        return np.clip(v, -_FMAX, _FMAX, out=v)
    return np.clip(np.nan_to_num(np.asarray(v, dtype=np.float64), nan=0.0), -_FMAX, _FMAX)


def _check_points(where: str, points: Any) -> np.ndarray:
    """Numeric rows as float64 (:func:`privagg._validate.real_array`: an entry that is not a real
    number, or beyond the float range, becomes non-finite), non-finite rows dropped (declared,
    1-stable policy). Errors only for the shape or a non-numeric array dtype."""
    x = real_array(where, points, 2)
    finite = np.isfinite(x).all(axis=1)
    return x if finite.all() else x[finite]  # declared policy: non-finite rows are dropped


def _check_radius(where: str, radius: Any) -> float | None:
    if radius is None:
        return None
    r = check_finite_positive(where, "radius", radius)
    if not 2.0**-450 <= r <= 2.0**500:
        raise fail(where, "radius", "a number in [2**-450, 2**500]", radius)
    return r


def _check_m_locate(where: str, m: Any) -> int:
    return check_positive_int(where, "m_locate", m, 50, 4096 * 4)


def private_mean(
    points: Any,
    *,
    epsilon: Any,
    delta: Any,
    radius: Any = None,
    alpha: Any = 0.0,
    rng: Any = None,
    calibration: str = "auto",
    ledger: Any = None,
    m_locate: int = M_LOCATE,
    units: Any = None,
    max_rows_per_unit: int = 1,
    columns: Any = None,
) -> MeanRelease:
    """Differentially private mean of points in ℝ^d, with no prior bound on where they lie.

    FriendlyCore locates a rough private center on a subsample; the mean is the center plus a
    noisy sum of all points clipped to a ball around it, over a noisy count, after a few
    refinement steps and with a privately chosen clipping radius (module docstring).

    Small samples (``radius=None``, d <= 20, released ``n̂·ε < 32768`` at d = 1,
    ``n̂·ε/d < 2500`` at d = 2, ``n̂·ε/d < 8192`` at d >= 3; also on Spark;
    :func:`privagg.mechanisms.mean_small.plan_runs`): the
    coordinate plan instead (:mod:`privagg.mechanisms.mean_small`, docs/proofs/mean.md §11;
    ``clip_rule == "coordinate"``): per coordinate a private spread, a private cell holding the
    median, and a clipped sum (pure ε-DP); ⊥ below ``n̂ < max(35·d, 200)/ε``; when the data sit too far
    from the origin relative to their spread it switches to the FriendlyCore plan with the ε
    left (the guarantee is the largest over all branches).

    Parameters
    ----------
    points : array_like, shape (n, d)
        Real numbers. Rows with a NaN or infinite entry are dropped (data, not errors); in a
        list (or object array) an entry that is not a real number (a string, None) counts as
        missing and one beyond the float range (``10**400``) as infinite, so their rows are
        dropped too, as in a CSV file. Or a Spark DataFrame (``pip install 'privagg[spark]'``)
        with ``columns``: counted, sampled, clipped and summed in Spark, the same release
        (:mod:`privagg.engines.spark_points`; with ``units`` a unit column's name, one vector
        per unit is computed in Spark first: :mod:`privagg.engines.spark_units`).
    epsilon : float
        ε in [2⁻⁴⁰, ∞) (end to end; below 2⁻⁴⁰ ≈ 9.1e-13: ParameterError, before any charge). Any larger ε works; one FriendlyCore step uses at most ε' = 64
        (:data:`FRIENDLY_EPS_MAX`), the sums get the rest.
    delta : float
        δ in [2⁻⁹⁰⁰, 1) (end to end; also needed by ``"laplace"``: the core-size bound fails with
        probability δ). Below 2⁻⁹⁰⁰ ≈ 1.2e-271 the conversion theorem's friendly δ is no longer
        a normal float64: ParameterError.
    radius : float, optional
        Friendship radius r (ℓ2): the mean is accurate when most points are within r of each
        other. ``None``: chosen privately on the grid ``2^{j/4}``, ``j = −40 … 160`` (ε/10 of
        the budget), after per-column scales (another ε/10, d >= 2, when ``n̂·ε/(10d) >= 150``),
        so columns in different units each get an error in their own units. A given radius is
        one ball in the data's units (no scales).
    alpha : float
        BasicFilter's α in [0, 1/2).
    rng : None, int, SeedSequence or Generator
        ``None``: the secure generator.
    calibration : {"auto", "gaussian", "laplace", "zcdp"}
        ``"gaussian"`` and ``"zcdp"`` (synonyms): discrete Gaussian noise for the vector
        releases, calibrated in ρ and converted to (ε, δ) (CKS); ``"laplace"``: discrete Laplace
        noise everywhere (ε-DP parts; the only δ is the core-size tail). ``"auto"`` (default):
        Laplace where it gives the final sum clearly less noise per coordinate at this (ε, δ, d)
        (sd at most :data:`AUTO_MARGIN` of the Gaussian's), else Gaussian
        (:func:`resolve_calibration`; public, so free): Laplace at small d or large ε. The
        release's ``calibration`` says which ran.
    ledger : privagg.accounting.Ledger, optional
        Charged ``release.privacy_loss`` after validation, before any noise is drawn.
    m_locate : int
        Expected size of the locate subsample, 50 to 16384.
    units : array-like, optional
        The privacy unit of each row (aligned with ``points``). Given: user level — the rows
        become one vector per unit (:mod:`privagg.engines.unit_rows`) and the guarantee is
        for adding/removing one unit with all its rows (proof: docs/proofs/mean.md §10).
    max_rows_per_unit : int
        k >= 1 (only with ``units``): a unit's vector is the average of k of its rows sampled
        uniformly without replacement (all rows if fewer); 1 (default): one sampled row.
    columns : list of str, optional
        With a Spark DataFrame only: its numeric columns to use (default: every column).

    Returns
    -------
    MeanRelease
        ``ok=False, mean=None`` is ⊥ (too few points agree, or too few points); ``reason``
        says which, from released values only.

    Raises
    ------
    ParameterError
        Bad shape or dtype of ``points`` (public), ε, δ, radius, α, calibration, m_locate, rng.
        Never because of a value in the data.
    BudgetExceededError
        From ``ledger``; nothing is released.

    Privacy
    -------
    Add/remove neighbours. (ε', δ')-DP with ε' = ε_n + ε_sel + ε_locate + ε_q + ε_f + ε_sum <= ε and
    δ' = δ_sel + δ_locate + δ_sum <= δ, the largest over the plans (:func:`mean_privacy_loss`:
    the small-sample plan is used when the released ``n̂·ε < SMALL_SAMPLE``, the large-sample
    shares when :func:`large_sample`, the coordinate plan and its switch as above; proof
    ``docs/proofs/mean.md``). Public:
    d, ε, δ, the radius (when given), α, m_locate, the calibration.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(100.0, 1.0, size=(5000, 3))
    >>> rel = private_mean(x, epsilon=1.0, delta=1e-6, radius=6.0, rng=1)
    >>> rel.ok, bool(np.abs(rel.mean - 100.0).max() < 0.5)
    (True, True)
    """
    from ..engines.spark import is_spark_dataframe

    if is_spark_dataframe(points):  # the Spark engine (privagg[spark]): the same core, below
        from ..engines import spark_points

        check = functools.partial(_check_mean_parameters, epsilon, delta, radius, alpha, calibration, m_locate)
        with spark_points.points_of("private_mean", points, columns, units, max_rows_per_unit, rng,
                                    check) as (source, gen, secure):
            release = _private_mean(source, epsilon, delta, radius, alpha, (gen, secure), calibration, ledger,
                                    m_locate)
        return _with_unit(release, units, max_rows_per_unit)
    if columns is not None:
        raise fail("private_mean", "columns", "None unless points is a Spark DataFrame (choose the columns of an "
                   "array by indexing it)", columns)
    from ..engines.unit_rows import bound_points  # user level: one vector per unit

    points, rng = bound_points("private_mean", points, units, max_rows_per_unit, rng)
    release = _private_mean(ArrayPoints(_check_points("private_mean", points)), epsilon, delta, radius, alpha,
                            rng, calibration, ledger, m_locate)
    return _with_unit(release, units, max_rows_per_unit)


def _with_unit(release: Any, units: Any, max_rows_per_unit: Any) -> Any:
    """``release`` (a MeanRelease or KMeansRelease) saying its privacy unit when ``units`` was
    given (a column name, a Series' name, else ``"units"``) and k = ``max_rows_per_unit``
    (already validated); unchanged at record level. Cannot fail (called after the charge)."""
    if units is None:
        return release
    import dataclasses

    name = units if isinstance(units, str) else getattr(units, "name", None)
    name = name if isinstance(name, str) and name else "units"
    return dataclasses.replace(release, unit=name, max_rows_per_unit=int(max_rows_per_unit))


def _check_mean_parameters(epsilon: Any, delta: Any, radius: Any, alpha: Any, calibration: str,
                           m_locate: Any) -> None:
    """Every parameter check of :func:`_private_mean` that needs no data (for engines that must
    check them before their first job)."""
    where = "private_mean"
    r = _check_radius(where, radius)
    _check_m_locate(where, m_locate)
    check_choice(where, "calibration", calibration, CALIBRATIONS)
    for cal in (("gaussian", "laplace") if calibration == "auto" else (calibration,)):  # either may run
        mean_plan(epsilon, delta, calibration=cal, alpha=alpha, select_radius=r is None, where=where)


class ArrayPoints(PointSource):
    """In memory: the finite float64 rows ``x`` (n, d) (arrays, and files read by DuckDB)."""

    name = "numpy"

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.d = int(x.shape[1])

    def count(self) -> int:
        return int(self.x.shape[0])

    def scale_counts(self, keys: np.ndarray) -> np.ndarray:
        return scale_counts(self.x, _keyed_row_order(self.x, keys))

    def scaled(self, exponents: np.ndarray) -> ArrayPoints:
        # x·2^{−k} as a product with the float 2^{−k} (|k| <= 70, exact): IEEE multiplication and
        # ldexp (scaleB) both round the exact x·2^{−k} correctly, so the bits are ldexp's, faster
        scale = np.ldexp(1.0, -np.asarray(exponents, dtype=np.int64))
        return ArrayPoints(_finite(self.x * scale, inplace=True))  # a new array

    def poisson_sample(self, rate: float, gen: np.random.Generator) -> np.ndarray:
        return self.x[gen.random(self.x.shape[0]) < rate]

    def clipped_integer_sum(self, center: np.ndarray, radius: float, exponent: int) -> np.ndarray:
        return _clipped_integer_sum(self.x, center, radius, exponent)

    def distance_bins(self, center: np.ndarray, edges: np.ndarray) -> np.ndarray:
        return _distance_bins(self.x, center, edges)

    def _sorted_column(self, j: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_sorted", {})
        if j not in cache:
            cache[j] = np.sort(self.x[:, j])
        return cache[j]

    def below_counts(self, edges: list[np.ndarray]) -> list[np.ndarray]:
        return [np.searchsorted(self._sorted_column(j), np.asarray(e, dtype=np.float64), side="left")
                .astype(np.int64) if len(e) else np.zeros(0, dtype=np.int64) for j, e in enumerate(edges)]

    def column(self, j: int) -> ArrayPoints:
        return ArrayPoints(self.x[:, j : j + 1])

    def outside_count(self, center: np.ndarray, radii: np.ndarray) -> int:
        if self.x.shape[0] == 0:
            return 0
        with np.errstate(all="ignore"):
            return int((np.abs(self.x - center) > radii).any(axis=1).sum())


def _source(x: Any) -> PointSource:
    return x if isinstance(x, PointSource) else ArrayPoints(x)


@quiet_numerics
def _private_mean(source: PointSource, epsilon: Any, delta: Any, radius: Any, alpha: Any, rng: Any,
                  calibration: str, ledger: Any, m_locate: Any, coordinate: bool = True) -> MeanRelease:
    """The mechanism on a :class:`~privagg.engines.base.PointSource` (finite rows); ``rng`` is an
    ``rng`` argument or an engine's resolved ``(generator, secure)`` pair."""
    where = "private_mean"
    r = _check_radius(where, radius)
    m_loc = _check_m_locate(where, m_locate)
    calibration = resolve_calibration(calibration, epsilon, delta, source.d, select_radius=r is None,
                                      alpha=alpha, where=where)  # public: ε, δ, d, the radius given or not
    plan = mean_plan(epsilon, delta, calibration=calibration, alpha=alpha,
                     select_radius=r is None, where=where)
    gen, secure = rng if isinstance(rng, tuple) else resolve_rng(rng, where)
    coord = coordinate and r is None and coordinate_plan_possible(epsilon, delta)  # every engine (§11)
    if coordinate:
        loss = mean_privacy_loss(epsilon, delta, calibration=calibration, alpha=alpha,
                                 select_radius=r is None, where=where)
    else:  # the FriendlyCore plans alone (the coordinate plan's switch, §11)
        loss = _friendly_loss(_frac(epsilon), _frac(delta), calibration, Fraction(alpha), r is None, where,
                              _constants_key())
    d = source.d
    n = source.count()  # before the charge: an engine that cannot evaluate its data charges nothing
    eps_out, delta_out = float(loss.epsilon), float(loss.delta)

    def bottom(used_radius: float | None, reason: str) -> MeanRelease:
        return MeanRelease(False, None, eps_out, delta_out, used_radius, secure, loss, calibration,
                           reason=reason, n_hat=n_hat, scales=scales)

    if ledger is not None:
        ledger.charge(loss, mechanism=where, parameters={**plan.public_parameters(),
                      "radius": r, "m_locate": m_loc, "d": int(d)})
    n_hat, scales = None, None
    # 1. count
    n_hat = n + int(discrete_laplace(1 / plan.eps_count, rng=gen))
    if n_hat < 1:
        return bottom(r, f"about 0 numeric rows (noisy count n̂ = {n_hat} < 1)")
    if coord and mean_small.plan_runs(n_hat, _frac(epsilon), d):
        # the small-sample coordinate plan (public: n̂, ε, d; docs/proofs/mean.md §11)
        need = max(mean_small.COORD_MIN * d, mean_small.COORD_MIN_COUNT) / _frac(epsilon)
        if n_hat < need:
            return bottom(r, f"noisy count n̂ = {n_hat} is below the {math.ceil(need)} rows "
                             f"(max({mean_small.COORD_MIN}·d, {mean_small.COORD_MIN_COUNT})/ε) the "
                             "small-sample plan needs")
        _, _, rest_e, rest_d = mean_small.switch_budget(
            epsilon, delta, mean_small.low_sample(n_hat, _frac(epsilon), d))
        # switch only where the switched plan's locate step can release at this n̂ (public)
        fc_need = M_MIN + mean_plan(rest_e, rest_d, calibration=calibration, alpha=alpha,
                                    select_radius=True, small=True, where=where).core_count_shift
        out = coordinate_mean(source, n_hat, _frac(epsilon), gen, delta,
                              may_switch=min(n_hat, m_loc) >= fc_need)
        if out is None:  # a chosen cell too wide for its spread: FriendlyCore with the budget left (§11)
            rel = _private_mean(source, rest_e, rest_d, None, alpha, (gen, secure), calibration, None,
                                m_locate, coordinate=False)
            return dataclasses.replace(rel, epsilon=eps_out, delta=delta_out, privacy_loss=loss)
        noise = out["noise"][:3] + (float(1 / plan.eps_count),) + out["noise"][4:]
        return MeanRelease(True, out["mean"], eps_out, delta_out, 1.0, secure, loss, calibration,
                           1.0, out["center"], None, n_hat, out["outside"], out["outside_sd"],
                           "coordinate", noise, out["clip_scale"])
    small = n_hat * _frac(epsilon) < SMALL_SAMPLE  # public: functions of the released n̂
    scale = r is None and d >= 2 and n_hat * _frac(epsilon) * SHARE_SCALE / d >= SCALE_MIN
    large = large_sample(n_hat, m_loc, epsilon, delta, calibration=calibration, alpha=alpha,
                         select_radius=r is None, scale=scale, where=where)
    if small or scale or large:
        plan = mean_plan(epsilon, delta, calibration=calibration, alpha=alpha,
                         select_radius=r is None, small=small, scale=scale, large=large, where=where)
    # 1b. per-column scales: the rest runs on x_j / s_j (exact power-of-two scaling)
    k_scale = _column_scales(source, n_hat, plan.eps_scale / d, gen) if scale else np.zeros(d, np.int64)
    if scale:
        source = source.scaled(k_scale)
        scales = np.ldexp(1.0, k_scale)
    # Poisson subsample of public rate (given n̂): used by locate (and, subsampled, by the radius).
    q = min(1.0, m_loc / n_hat)
    sub = source.poisson_sample(q, gen)
    data = source.x if isinstance(source, ArrayPoints) else source  # the array itself in memory
    # 2. radius
    from ..friendlycore.radius import grid_radii

    r_bottom = None  # the least radius the selection can release (None: the radius was given)
    if r is None and d <= PAIR_RADIUS_DIM and n_hat * _frac(epsilon) < PAIR_RADIUS:
        r = _pair_radius(sub, min(n_hat, m_loc), plan.eps_select, gen)
        r_bottom = float(grid_radii()[0]) * pair_factor(d)
    elif r is None:
        from ..friendlycore.radius import radius_rate, radius_subsample, select_radius

        # on a further Poisson subsample of public rate (docs/proofs/mean.md §4): AboveThreshold
        # needs only about M_RADIUS rows; coins drawn only when the rate is below 1
        rate = radius_rate(plan.eps_select, alpha, min(n_hat, m_loc))
        r = select_radius(radius_subsample(sub, rate, gen), epsilon=plan.eps_select, alpha=alpha, rng=gen)
        if r is None:
            return bottom(None, "no grid radius 2^(j/4), j = -40…160, gathers most points "
                                f"(noisy count n̂ = {n_hat})")
        r_bottom = float(grid_radii()[0])
    if plan.eps_floor > 0 and r <= r_bottom:
        # the released radius is the bottom of its grid: the core's scale is below it (one atom of
        # tied values?), the floor gets its larger share from the sums (public: r; §8c)
        plan = mean_plan(epsilon, delta, calibration=calibration, alpha=alpha, select_radius=True,
                         small=small, scale=scale, tied=True, large=large, where=where)
    # 3. locate
    center, bound, m_hat = _locate(sub, r, plan, gen)
    if center is None:
        need = M_MIN + plan.core_count_shift  # public: a function of ε, δ and the plan
        if min(n_hat, m_loc) < need:
            return bottom(r, f"noisy count n̂ = {n_hat} is below the {need} rows the locate step "
                             f"needs at this ε and δ (noisy core size m̂ = {m_hat}, needs m̂ >= {need})")
        return bottom(r, f"too few points agree on a location (noisy core size m̂ = {m_hat}, "
                         f"needs m̂ >= {need}; noisy count n̂ = {n_hat})")
    # 4. estimate: refinement steps, then the final sum with a clipping radius from a tail count
    *refine, last = estimate_schedule(plan, n_hat, r, bound, d)
    for part in refine:
        step_r = _grid_up(r + bound)
        center = _finite(center + _noisy_clipped_sum(data, center, step_r, part, plan, gen) / n_hat)
        bound = _next_bound(step_r, bound, part, plan, n_hat, d)
    upper = _grid_up(r + bound)
    if plan.eps_floor > 0:  # the spread floor (§8c): U·2^k̂, k̂ = 0 unless the core was one atom
        tied = r <= r_bottom  # public: the released radius (the floor runs only when it was selected)
        upper = math.ldexp(upper, spread_floor_pick(data, center, upper, plan, gen, tied))
    choice = _quantile_radius(data, center, upper, n_hat, plan.eps_quantile, gen,
                              tail_target(plan, last, d, n_hat), plan.eps_count)
    big_r = choice.radius
    rel = _noisy_clipped_release(data, center, big_r, last, plan, gen)
    mean = _finite(center + rel.values / n_hat)
    h = 2.0 ** _sum_exponent(big_r)
    noise = ("gaussian" if plan.gaussian else "laplace", float(rel.noise_grid), rel.step,
             float(1 / plan.eps_count), h / 2.0 + 8.0 * 2.0**-53 * big_r, rel.step)
    if scale:  # back to the data's units (post-processing)
        mean, center = _finite(np.ldexp(mean, k_scale)), _finite(np.ldexp(center, k_scale))
    return MeanRelease(True, mean, eps_out, delta_out, r, secure, loss, calibration, big_r,
                       center, None, n_hat, choice.outside, choice.outside_sd, choice.rule, noise,
                       scales)


def _row_order(x: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """A random total order of the rows that is a function of each row, its occurrence index
    among identical rows and public randomness: rows sorted by a keyed 64-bit hash of
    ``(bits, j)`` (key drawn from ``gen``; :func:`occurrence_index`), ties by the bits, then ``j``.
    Adding a row inserts it at one place of the others' order (also a copy of a row already
    there: it is the new item ``(z, m_z)``); identical rows are interchangeable."""
    return _keyed_row_order(x, row_keys(x.shape[1], gen))


def row_keys(d: int, gen: np.random.Generator) -> np.ndarray:
    """The (2, d) odd 64-bit keys of :func:`_row_order`'s hash, drawn from ``gen``."""
    return gen.integers(0, 2**63, size=(2, d), dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def row_hash(x: np.ndarray, keys: np.ndarray, occ: np.ndarray | None = None) -> np.ndarray:
    """The keyed 64-bit hash (uint64) of each row's bits and occurrence index ``occ`` (``j``,
    :func:`occurrence_index`; None: all 0): a function of ``(row, j)`` and the keys.
    ``x``: (n, d) float64 rows, or their bits already viewed as uint64. ``h(row, 0)`` is the
    hash of the row alone (the hash before occurrence indices, so duplicate-free data keep their
    releases); for ``j >= 1`` the row's hash and ``j·k`` (``k = keys[0, 0]``, odd: injective in
    ``j``) go through a second keyed finalizer (splitmix64's)."""
    n, d = x.shape
    bits = x if x.dtype == np.uint64 else np.ascontiguousarray(x).view(np.uint64)
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(d):  # over columns (d), not rows
            h = (h ^ (bits[:, j] * keys[0, j])) * keys[1, j]
            h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
        if occ is not None:
            occ = np.asarray(occ).astype(np.uint64)
            more = np.flatnonzero(occ)
            if more.size:
                h[more] = _occurrence_mix(h[more], occ[more], keys)
    return h


def _occurrence_mix(h: np.ndarray, occ: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The hash of copy ``j >= 1``: splitmix64's finalizer of ``(h ⊕ j·k0)·k1`` (odd keys)."""
    with np.errstate(over="ignore"):
        z = (h ^ (occ * keys[0, 0])) * keys[1, -1]
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def occurrence_index(cols: list[np.ndarray]) -> np.ndarray:
    """``j`` (int64) of each row: the number of rows before it (by index) with identical key
    columns (``cols``: equal-length integer arrays, e.g. the bits of each column), so 0 for the
    first copy, 1 for the second, …; the multiset of ``(row, j)`` is a function of the multiset of
    rows, and adding a copy of ``z`` adds exactly ``(z, m_z)``. Vectorized: a stable lexsort, then
    the position in the run of equal keys."""
    n = cols[0].shape[0] if cols else 0
    occ = np.zeros(n, dtype=np.int64)
    if n < 2:
        return occ
    order = np.lexsort(cols[::-1]) if len(cols) > 1 else np.argsort(cols[0], kind="stable")
    same = np.ones(n - 1, dtype=bool)
    for c in cols:
        cs = c[order]
        same &= cs[1:] == cs[:-1]
    return _runs_to_occurrence(same, order, occ)


def _runs_to_occurrence(same: np.ndarray, order: np.ndarray, occ: np.ndarray) -> np.ndarray:
    """``occ[order[i]]`` = i − (start of i's run), the runs given by ``same[i] = (i+1 ≡ i)``."""
    idx = np.arange(order.size)
    start = np.maximum.accumulate(np.where(np.concatenate([[True], ~same]), idx, 0))
    occ[order] = idx - start
    return occ


def _hash_order(h: np.ndarray, ties: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``np.lexsort(ties[::-1] + [h])`` (sort by ``h``, ties by ``ties[0]``, ``ties[1]``, …, then
    index) computed as a sort of ``h`` and a lexsort, by ``h``, the ties and the index, of only the
    rows whose hash is not unique (the same permutation: distinct hashes have one order, and the
    lexsort's last key, the index, fixes the rest); and the positions of those rows."""
    order = np.argsort(h)  # not stable (several times faster): ties are ordered below
    hs = h[order]
    tie = hs[1:] == hs[:-1]
    pos = np.zeros(0, dtype=np.int64)
    if tie.any():
        pos = np.flatnonzero(np.concatenate([tie, [False]]) | np.concatenate([[False], tie]))
        rows = order[pos]  # runs of equal hash, each run in some order
        # by hash, then the ties, then the index: the stable sort's order, whatever the first sort
        sub = np.lexsort([rows] + [t[rows] for t in ties[::-1]] + [hs[pos]])
        order[pos] = rows[sub]
    return order, pos


def _keyed_row_order(x: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Rows sorted by :func:`row_hash` of ``(row, j)`` (``j`` the occurrence index), ties by the
    bits of columns 0, 1, … (as unsigned), then ``j``, ties of all of them (never: ``(row, j)`` is
    unique) by index. Identical rows have equal ``h(row, 0)``, so ``j`` is computed from the runs
    of equal hash of a first pass only: for duplicate-free data the first pass is the order
    (``h(row, 0)`` is the old hash: the same order and releases as before)."""
    d = x.shape[1]
    bits = np.ascontiguousarray(x).view(np.uint64)
    cols = [bits[:, j] for j in range(d)]
    h = row_hash(bits, keys)
    order, pos = _hash_order(h, cols)
    if pos.size == 0:
        return order
    # after the first pass, identical rows are consecutive within the runs of equal hash
    rows = order[pos]
    same = np.ones(pos.size - 1, dtype=bool)
    for c in cols:
        cs = c[rows]
        same &= cs[1:] == cs[:-1]
    same &= pos[1:] == pos[:-1] + 1
    occ = _runs_to_occurrence(same, rows, np.zeros(x.shape[0], dtype=np.int64))
    if not occ.any():
        return order
    return _hash_order(row_hash(bits, keys, occ), cols + [occ])[0]


def scale_counts(x: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``C[j, k] = #{i : |x_{o(i+1), j} − x_{o(i), j}| <= 2^{SCALE_EXPONENTS[k]}}`` over the
    ``n − 1`` consecutive pairs of the row order ``o`` (exact comparison via
    :func:`~privagg.friendlycore.radius.grid_levels`). Adding a row removes one pair and adds
    two: every count moves by at most 2 (docs/proofs/mean.md §2b)."""
    return sorted_scale_counts(np.take(x, order, axis=0))  # (np.take: a faster row gather)


def sorted_scale_counts(xs: np.ndarray) -> np.ndarray:
    """:func:`scale_counts` of rows already in their order (the pairs ``xs[i], xs[i+1]``): a sum
    over pairs, so the counts of consecutive runs of the order add up (plus their boundary pairs)."""
    from ..friendlycore.radius import grid_levels

    n, d = xs.shape
    out = np.zeros((d, SCALE_EXPONENTS.size), dtype=np.int64)
    if n < 2:
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.ascontiguousarray(np.abs(xs[1:] - xs[:-1]).T)  # (d, n − 1), may be inf
    # #{level <= 2k}: a histogram of the levels clipped to [2k_0 − 1, 2k_1 + 1], cumulated
    low, high = 2 * int(SCALE_EXPONENTS[0]) - 1, 2 * int(SCALE_EXPONENTS[-1]) + 1
    at = 2 * SCALE_EXPONENTS - low
    for j in range(d):  # over columns
        lv = np.clip(grid_levels(diff[j]), low, high) - low
        out[j] = np.cumsum(np.bincount(lv, minlength=high - low + 1))[at]
    return out


def _column_scales(source: Any, n_hat: int, eps_col: Fraction,
                   gen: np.random.Generator) -> np.ndarray:
    """Per column, the exponent ``k`` of the power-of-two scale ``2^k`` whose cell
    ``(2^{k−1}, 2^k]`` holds (in rank) the ``q = a/b`` quantile (:func:`scale_rank`: the median,
    about 0.95σ for Gaussian data, or 7/8, about 2.2σ) of the untied absolute differences of
    consecutive rows in a random order: report-noisy-max of :func:`untied_scale_utility`
    (sensitivity ``2b``) with discrete Laplace noise of scale ``4b/eps_col`` and the public prior
    :func:`scale_log_prior` in units of that scale, ``eps_col``-DP per column; then
    :func:`tied_column_fallback`."""
    return tied_column_fallback(_column_scale_picks(source, n_hat, eps_col, gen))


def _column_scale_picks(source: Any, n_hat: int, eps_col: Fraction,
                        gen: np.random.Generator) -> np.ndarray:
    """The released report-noisy-max picks of :func:`_column_scales`, before the fallback."""
    rank = scale_rank(n_hat, eps_col)
    counts = _source(source).scale_counts(row_keys(_source(source).d, gen))
    utility = untied_scale_utility(counts, n_hat, rank)
    noise = 4 * rank.denominator / eps_col  # twice the sensitivity 2b
    offsets = float(noise) * scale_log_prior(SCALE_EXPONENTS)
    noisy = utility + discrete_laplace(noise, size=utility.shape, rng=gen)
    return SCALE_EXPONENTS[np.argmax(noisy + offsets, axis=1)].astype(np.int64)


def scale_rank(n_hat: int, eps_col: Fraction) -> Fraction:
    """The rank ``q`` the scale step targets among the untied consecutive differences (public: n̂,
    ε, d): the median below ``L = n̂·eps_col < SCALE_TAIL_MIN``, else ``1 − 2^−j`` for the largest
    ``j <= SCALE_TAIL_JMAX`` with ``L >= SCALE_TAIL_MIN·2^(j−3)`` (exact: rationals)."""
    level = Fraction(n_hat) * eps_col
    if level < SCALE_TAIL_MIN:
        return Fraction(1, 2)
    j = 3
    while j < SCALE_TAIL_JMAX and level >= SCALE_TAIL_MIN * 2 ** (j - 2):
        j += 1
    return 1 - Fraction(1, 2**j)


def untied_scale_utility(counts: np.ndarray, n_hat: int, rank: Fraction = Fraction(1, 2)) -> np.ndarray:
    """``b`` times the interval utility of the ``rank = a/b`` quantile of the UNTIED consecutive
    differences: ``Z = C_0`` (the pairs within ``2^{SCALE_EXPONENTS[0]}``: tied, e.g. equal values
    of a binary or integer column), target ``Z + (a/b)(m − Z)`` with ``m = n̂ − 1``, so
    ``u_k = −max(0, am + (b − a)Z − bC_k, bC_{k−1} − am − (b − a)Z)`` (``C_{−1} := 0``; at the
    median ``b = 2``: ``−max(0, m + Z − 2C_k, 2C_{k−1} − m − Z)``). Each pair adds ``a`` (tied),
    ``b`` (untied, within ``2^k``) or 0 to ``bC_k − (b − a)Z``; one row added or removed takes one
    pair and gives two (or the reverse), so every ``u_k`` moves by at most ``2b``
    (docs/proofs/mean.md §2b): the noise-to-sensitivity ratio of the plain median's utility
    (sensitivity 2) at ``b/2`` times its scale. Int64, shape of ``counts``."""
    a, b = rank.numerator, rank.denominator
    c = np.asarray(counts, dtype=np.int64)
    m = np.int64(int(n_hat) - 1)
    tb = a * m + (b - a) * c[..., :1]  # (d, 1): b times the target
    below = np.zeros_like(c)
    below[..., 1:] = c[..., :-1]
    return -np.maximum(np.maximum(tb - b * c, b * below - tb), 0)


def scale_log_prior(k: np.ndarray) -> np.ndarray:
    """A public, data-independent log prior over the scale exponents, ``−6·ln(1 + |k|/4)``: added to
    the noisy utilities as offsets (report-noisy-max of ``u + offset`` is report-noisy-max of a
    utility of the same sensitivity), it decides only where the utilities are flat (a column with
    few untied pairs) and keeps such a column near its own units instead of at a random octave."""
    return -6.0 * np.log1p(np.abs(np.asarray(k, dtype=np.float64)) / 4.0)


def tied_column_fallback(picks: np.ndarray) -> np.ndarray:
    """Post-processing of the released picks (docs/proofs/mean.md §2b): a column whose pick is the
    grid's bottom cell (its median consecutive difference is 0: a binary or near-constant column,
    more than half of its pairs tied) carries no usable scale, and standardizing it by ``2^−50``
    would blow it up; it takes the median of the other columns' picks (rounded down), or 0 (its
    own units) when every column is at the bottom."""
    picks = np.asarray(picks, dtype=np.int64).copy()
    bottom = picks == SCALE_EXPONENTS[0]
    if bottom.any():
        rest = picks[~bottom]
        picks[bottom] = int(np.floor(np.median(rest))) if rest.size else 0
    return picks


def pair_factor(d: int) -> float:
    """The public multiple of the median pair distance used as the friendship radius: ``2 + 1/d``
    (for Gaussian data the pair distances concentrate as d grows; at d = 1, 3× the median
    ``0.95σ`` keeps about 96 % of the pairs friends)."""
    return 2.0 + 1.0 / d


def pair_counts(sub: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``C_j = #{i : ‖x_{o(i+1)} − x_{o(i)}‖² <= r_j²}`` over the consecutive pairs of the order,
    for the radius grid ``r_j = 2^{j/4}`` (exact comparison of the float squared distance, a
    function of the pair alone, with ``2^{j/2}``). Adding a row moves each count by at most 2."""
    from ..friendlycore.radius import GRID_EXPONENTS, grid_levels

    if sub.shape[0] < 2:
        return np.zeros(GRID_EXPONENTS.size, dtype=np.int64)
    xs = sub[order]
    with np.errstate(over="ignore", invalid="ignore"):
        y = xs[1:] - xs[:-1]
        sq = np.nan_to_num(np.einsum("ij,ij->i", y, y), nan=np.inf)
    lv = np.sort(grid_levels(sq))
    return np.searchsorted(lv, GRID_EXPONENTS, side="right").astype(np.int64)


def _pair_radius(sub: np.ndarray, m_pub: int, eps_sel: Fraction, gen: np.random.Generator) -> float:
    """``pair_factor(d)·r_ĵ``: report-noisy-max of :func:`pair_utility` (the interval utility of
    the median, ``t = ⌊(m_pub − 1)/2⌋``) over the radius grid (:func:`pair_counts`; sensitivity 2, discrete Laplace of scale ``4/ε_sel``;
    ``m_pub = min(n̂, m_locate)`` public): ε_sel-DP (docs/proofs/mean.md §4b)."""
    from ..friendlycore.radius import grid_radii

    counts = pair_counts(sub, _row_order(sub, gen))
    utility = pair_utility(counts, m_pub)
    noisy = utility + discrete_laplace(4 / eps_sel, size=utility.shape, rng=gen)
    return float(grid_radii()[int(np.argmax(noisy))]) * pair_factor(sub.shape[1])


def interval_utility(counts: np.ndarray, target: Any) -> np.ndarray:
    """The interval (cell) utility of the ``target``-th smallest of the values behind the
    cumulative ``counts`` ``C_k = #{v <= g_k}`` (nondecreasing along the last axis, a public grid
    ``g``): ``u_k = −max(0, t − C_k, C_{k−1} − t)`` with ``C_{−1} := 0`` (the grid's first cell is
    ``(−∞, g_0]``; beyond the last, ``t > C_{L−1}``, the last cell is the nearest). 0 exactly for
    the cells ``(g_{k−1}, g_k]`` where the counts reach ``t`` (``C_{k−1} <= t <= C_k``: they hold
    the ``t``-th smallest value, or border it), else minus the rank distance to them:
    a plateau of equal counts (ties, e.g. many differences exactly 0) no longer comes nearer to
    ``t`` than the cell where the counts cross it (``−|C_k − t|`` did). Sensitivity 2 when each
    ``C_k`` moves by at most 2 and ``t`` is public (each of the three terms moves by at most 2;
    docs/proofs/mean.md §2b). ``counts`` of shape ``(..., L)``, ``target`` an int or an array of
    shape ``(...)``; int64 out."""
    c = np.asarray(counts, dtype=np.int64)
    t = np.asarray(target, dtype=np.int64)[..., None]
    below = np.zeros_like(c)
    below[..., 1:] = c[..., :-1]  # C_{k−1}, C_{−1} = 0
    return -np.maximum(np.maximum(t - c, below - t), 0)


def pair_utility(counts: np.ndarray, m_pub: Any) -> np.ndarray:
    """:func:`interval_utility` of the median consecutive-pair count, ``t = ⌊(m_pub − 1)/2⌋``
    (sensitivity 2 when each ``C_j`` moves by at most 2); ``counts`` of shape ``(..., L)`` and
    ``m_pub`` an int or an array of shape ``(...)``."""
    return interval_utility(counts, (np.asarray(m_pub, dtype=np.int64) - 1) // 2)


def _grid_up(v: float) -> float:
    """``2^{k/8}`` for the least integer ``k`` with ``2^{k/8} >= v`` (up to float rounding): clip
    radii on a public grid repeat across calls, so the exact samplers' cached tables are reused."""
    if not 2.0**-1000 < v < 2.0**1000:  # beyond the grid (never for valid inputs): keep v
        return v
    return 2.0 ** (math.ceil(8.0 * math.log2(v)) / 8.0)


def _noise_norm(big_r: float, part: Fraction, plan: MeanPlan, d: int) -> float:
    """A public 1 − β_locate bound on the ℓ2 norm of one clipped sum's noise (clip radius R)."""
    if plan.gaussian:
        sigma = big_r / math.sqrt(2.0 * float(part))
        return sigma * (math.sqrt(d) + math.sqrt(2.0 * math.log(1.0 / BETA_LOCATE)))
    scale = math.sqrt(d) * big_r / float(part)
    return scale * (math.sqrt(2.0 * d) + 2.0 * math.log(1.0 / BETA_LOCATE))


def _next_bound(big_r: float, bound: float, part: Fraction, plan: MeanPlan, n_hat: int,
                d: int) -> float:
    """Public bound on the error of a refined center: sum noise, and the old error scaled by the
    relative count noise (``c' − x̄ = (x̄ − c)(n/n̂ − 1) + Z/n̂`` when nothing is clipped)."""
    k_n = dlap_tail_shift(1 / plan.eps_count, Fraction(1, 1000))
    return (_noise_norm(big_r, part, plan, d) + bound * k_n) / n_hat


def estimate_schedule(
    plan: MeanPlan, n_hat: int, r: float, bound: float, d: int
) -> tuple[Fraction, ...]:
    """Budgets of the refinement steps and of the final sum (last), from public inputs only.

    Each part is a ρ (Gaussian calibrations) or an ε (Laplace); they sum exactly to
    ``plan.rho_sum`` or ``plan.eps_sum``. Among ``t`` in :data:`REFINE_STEPS` steps sharing a
    fraction in :data:`REFINE_SHARES` evenly, the schedule with the least predicted final error
    (noise-norm bound at clip radius ``r + bound_t``, plus the count term) is chosen; ties keep
    the earlier (fewer steps).
    """
    total = plan.rho_sum if plan.gaussian else plan.eps_sum
    k_n = dlap_tail_shift(1 / plan.eps_count, Fraction(1, 1000))
    best: tuple[float, tuple[Fraction, ...]] | None = None
    for steps in REFINE_STEPS:
        for share in REFINE_SHARES if steps else (Fraction(0),):
            parts = (total * share / steps,) * steps + (total * (1 - share),) if steps else (total,)
            b = bound
            for part in parts[:-1]:
                b = _next_bound(r + b, b, part, plan, n_hat, d)
            score = (_noise_norm(r + b, parts[-1], plan, d) + b * k_n) / n_hat
            if best is None or score < best[0]:
                best = (score, parts)
    assert best is not None and sum(best[1]) == total
    return best[1]


def _noisy_clipped_release(x: np.ndarray, center: np.ndarray, big_r: float, part: Fraction,
                           plan: MeanPlan, gen: np.random.Generator) -> Any:
    """``Σ clip(x_i − ĉ)`` on the grid: ρ = ``part``-zCDP (discrete Gaussian) or ``part``-DP
    (discrete Laplace). The sum is exact up to one final rounding (:func:`_clipped_sum`), so in
    grid units one row moves it by at most ``(R + √d·h/2)/g + 2·SUM_ROUNDING·√d`` (ℓ2) or
    ``(√d·R + d·h/2)/g + 2·SUM_ROUNDING·d`` (ℓ1); the grid exponent is chosen as before."""
    d = _source(x).d
    total = _clipped_sum(x, center, big_r)
    h = Fraction(2) ** _sum_exponent(big_r)
    root_d = _sqrt_up(d)
    if plan.gaussian:
        sigma = big_r / math.sqrt(2.0 * float(part)) * _SAFETY
        e = gaussian_exponent(big_r, sigma, d)
        g = Fraction(2) ** e
        sens = (Fraction(big_r) + root_d * h / 2) / g + 2 * SUM_ROUNDING * root_d
        return grid_gaussian_integers(grid_integers(total, exponent=e), exponent=e,
                                      l2_sensitivity_grid=sens, rho=part, rng=gen)
    e = laplace_exponent(math.sqrt(d) * big_r * _SAFETY, _float_down(part), d)
    g = Fraction(2) ** e
    sens1 = (root_d * Fraction(big_r) + d * h / 2) / g + 2 * SUM_ROUNDING * d
    return grid_laplace_integers(grid_integers(total, exponent=e), exponent=e,
                                 l1_sensitivity_grid=sens1, epsilon=part, rng=gen)


def _noisy_clipped_sum(x: np.ndarray, center: np.ndarray, big_r: float, part: Fraction,
                       plan: MeanPlan, gen: np.random.Generator) -> np.ndarray:
    """The released values of :func:`_noisy_clipped_release` (the grid release's ``values``)."""
    return _noisy_clipped_release(x, center, big_r, part, plan, gen).values


def clip_edges(upper: float, n_hat: int) -> np.ndarray:
    """The public candidate clipping radii, descending: ``T·2^{-k/QUANTILE_ABOVE}`` from the top
    ``T = U·2^A`` (``A = max(0, ceil(log2(TOP_FACTOR·√n̂)))``) down to ``U``, then
    ``U·2^{-j/QUANTILE_OCTAVE}``, ``j = 1 … QUANTILE_GRID``. A function of ``U`` and ``n̂`` only."""
    a = max(0, math.ceil(math.log2(TOP_FACTOR * math.sqrt(max(n_hat, 1)))))
    above = upper * 2.0 ** (np.arange(a * QUANTILE_ABOVE, 0, -1) / QUANTILE_ABOVE)
    below = upper * 2.0 ** (-np.arange(0, QUANTILE_GRID + 1) / QUANTILE_OCTAVE)
    return np.concatenate([above, below])


def _distance_bins(x: np.ndarray, center: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Histogram of ``u_i = ‖x_i − ĉ‖`` over the public descending ``edges`` ``e_0 > … > e_J``:
    bin 0 is ``u > e_0``, bin ``j`` is ``e_j < u <= e_{j−1}``, bin ``J + 1`` is ``u <= e_J``.
    Every row lands in exactly one bin (one integer index per row, a function of the row and
    public values; float rounding only moves rows near an edge), so adding a row changes one
    count by one. ``u = ∞`` (overflowing squared norm) lands in bin 0."""
    asc = np.ascontiguousarray(edges[::-1])
    counts = np.zeros(edges.size + 1, dtype=np.int64)
    for start in range(0, x.shape[0], _ROWS):
        y = x[start : start + _ROWS] - center
        u = np.sqrt(np.einsum("ij,ij->i", y, y))
        below = np.searchsorted(asc, u, side="left")  # #{edges < u}
        counts += np.bincount(edges.size - below, minlength=edges.size + 1)
    return counts


def floor_cap(eps_floor: Fraction) -> int:
    """The public cap ``K = ⌈2·ln((FLOOR_OCTAVES + 1)/FLOOR_BETA)/ε_f⌉`` rows of the spread floor's
    target (docs/proofs/mean.md §8c): when every row is within ``U`` candidate 0 then leads every
    other by ``2K`` in the twice-utility, i.e. by ``ln((F + 1)/β)`` noise scales ``4/ε_f``."""
    return math.ceil(2.0 * math.log((FLOOR_OCTAVES + 1) / FLOOR_BETA) / float(eps_floor))


def floor_utility(counts: np.ndarray, n_low: Any, cap: Any) -> np.ndarray:
    """Twice the interval utility of the spread floor (docs/proofs/mean.md §8c), one row per
    release: ``counts[g, k] = C_k`` the rows within ``U·2^k`` of ĉ (``k = 0 … F``, ``Z = C_0`` the
    rows within ``U``: the core's scale), target ``t2 = min(n_low + Z, 2·(n_low − K))`` (the
    median of the rows beyond ``U``, capped ``K`` rows below ``n_low``), utility
    ``u_k = −max(0, t2 − 2C_k, 2C_{k−1} − t2)`` with ``C_{−1} := 0``. Adding a row moves each
    ``u_k`` by at most 2 (§8c) when ``n_low`` is public or the true count of the rows behind
    ``counts`` (:func:`spread_floor_pick`). ``n_low``, ``cap``: per row (or one int). Int64,
    shape of ``counts``."""
    c = np.asarray(counts, dtype=np.int64)
    n_low = np.broadcast_to(np.asarray(n_low, dtype=np.int64), c.shape[:1])[:, None]
    cap = np.broadcast_to(np.asarray(cap, dtype=np.int64), c.shape[:1])[:, None]
    t2 = np.minimum(n_low + c[:, :1], 2 * (n_low - cap))
    below = np.zeros_like(c)
    below[:, 1:] = c[:, :-1]
    return -np.maximum(np.maximum(t2 - 2 * c, 2 * below - t2), 0)


def floor_edges(upper: float) -> np.ndarray:
    """The floor's candidates as descending edges ``U·2^k``, ``k = F … 0`` (public)."""
    return np.ldexp(upper, np.arange(FLOOR_OCTAVES, -1, -1))


def floor_offsets(eps_floor: Any, tied: bool) -> np.ndarray:
    """The floor's public offsets over ``k = 0 … FLOOR_OCTAVES``, in the twice-utility's units:
    ``−FLOOR_PENALTY·(4/ε_f)·max(0, k − FLOOR_FREE)``, or 0 when ``tied``. Public offsets leave
    the report-noisy-max's sensitivity as it is (docs/proofs/mean.md §8c)."""
    k = np.maximum(np.arange(FLOOR_OCTAVES + 1, dtype=np.float64) - FLOOR_FREE, 0.0)
    if tied:
        return np.zeros_like(k)
    return -float(FLOOR_PENALTY) * (4.0 / float(eps_floor)) * k


def spread_floor_pick(x: Any, center: np.ndarray, upper: float, plan: MeanPlan,
                      gen: np.random.Generator, tied: bool = True) -> int:
    """The spread floor's released octave ``k̂`` (docs/proofs/mean.md §8c), ``plan.eps_floor``-DP:
    report-noisy-max with ``DLap(4/ε_f)`` of :func:`floor_utility` over the counts of rows within
    ``U·2^k`` of ĉ (``distance_bins`` of the engine: one bin per row), relative to the true count
    ``n`` (each ``u_k`` still moves by at most 2; before, the public ``n̂`` less the count noise's
    5 % tail, 60 rows at ε = 1, which the minority then had to exceed too), ``K`` public. On a column whose core is one atom of tied values (a 0/1 column with a 10 %
    minority) ``U`` is the atom's scale and the clipping edges ``U … U·2^A`` never reach the other
    values (the robust rule then clipped them all); the floor lifts ``U`` to their octave.
    ``tied`` (public: the released radius at the bottom of its grid): without it the candidates
    carry :func:`floor_offsets`."""
    bins = _source(x).distance_bins(center, floor_edges(upper))  # bin F + 1: within U
    within = np.cumsum(bins[::-1])[: FLOOR_OCTAVES + 1]  # C_k = #{u <= U·2^k}
    n = int(bins.sum())  # the true count (every row in one bin): u_k still moves by at most 2
    util = floor_utility(within[None, :], n, floor_cap(plan.eps_floor))[0]
    noisy = util + floor_offsets(plan.eps_floor, tied) + discrete_laplace(
        4 / plan.eps_floor, size=util.shape, rng=gen)
    return int(np.argmax(noisy))


def tail_target(plan: MeanPlan, last: Fraction, d: int, n_hat: int) -> float:
    """``τ = max(TAIL_MIN, √d·σ_1)``, at most ``n̂/2``: ``σ_1 = 1/√(2ρ)`` (Gaussian; the final
    sum's per-coordinate noise sd over its radius) or ``√2·√d/ε`` (Laplace). Public."""
    if plan.gaussian:
        s1 = 1.0 / math.sqrt(2.0 * float(last))
    else:
        s1 = math.sqrt(2.0 * d) / float(last)
    return min(max(float(TAIL_MIN), math.sqrt(d) * s1), max(float(TAIL_MIN), n_hat / 2.0))


@dataclass(frozen=True)
class ClipChoice:
    """The released choice of the final clipping radius (post-processing of one noisy histogram).

    radius : float
    outside : float
        The noisy count of rows beyond ``radius`` (the released histogram's tail there).
    outside_sd : float
        Public noise standard deviation of ``outside``.
    rule : str
        ``"tail"`` (at most about τ rows beyond) or ``"robust"`` (far mass beyond the top edge:
        the median-distance clip).
    """

    radius: float
    outside: float
    outside_sd: float
    rule: str


def _far_threshold(tau: float, sd0: float) -> float:
    """Far mass when the noisy count beyond the top edge exceeds ``max(TAIL_FAR, τ) + 3·sd_0``."""
    return np.maximum(float(TAIL_FAR), tau) + 3.0 * sd0  # elementwise for an array τ


def _quantile_radius(x: np.ndarray, center: np.ndarray, upper: float, n_hat: int,
                     eps_q: Fraction, gen: np.random.Generator, tau: float = float(TAIL_MIN),
                     eps_count: Fraction | None = None) -> ClipChoice:
    """The final clipping radius: an ε_q-DP noisy histogram of distances to ĉ over
    :func:`clip_edges` (one row changes one bin by one; discrete Laplace per bin), then, as
    post-processing with ``T̃_j`` the noisy count beyond ``e_j`` and ``sd_j`` its public sd
    (:func:`noisy_tails`: the histogram summed from the top, combined with ``n̂`` minus the sum
    from the bottom when ``n̂ = n + DLap(1/eps_count)``; ``eps_count=None``: from the top only):

    * far mass, ``T̃_0 > max(TAIL_FAR, τ) + 3·sd_0``: the robust rule, the least edge (scanning
      down, stopping at the first failure) with ``T̃_j + 2·sd_j <= CLIP_TAIL·n̂``;
    * else the tail rule: the least edge with ``T̃_j <= τ + TAIL_SD·sd_j`` (the last one passing,
      not the first failure); when no edge below the top passes (the noisy tails over the empty
      top bins are a random walk that can stay above the bound: about 0.5 % of runs with
      ``TAIL_SD = 2``), the robust rule instead of the top edge — unless the next edge fails
      clearly, ``T̃_1 > τ + TAIL_TOP_SD·sd_1`` (a mass just below the top edge): then the top edge.
    """
    edges = clip_edges(upper, n_hat)
    noisy = _source(x).distance_bins(center, edges) + discrete_laplace(1 / eps_q, size=edges.size + 1,
                                                                 rng=gen)
    tails, sd = noisy_tails(noisy, n_hat, eps_q, eps_count)  # tails[j] ≈ #{u > e_j}
    jj, robust = tail_rule(tails[None, :], sd, np.array([tau]), np.array([float(n_hat)]),
                           np.ones((1, edges.size), dtype=bool))
    j, rule = int(jj[0]), "robust" if robust[0] else "tail"
    return ClipChoice(float(edges[j]), float(tails[j]), float(sd[j]), rule)


def dlap_variance(eps: Fraction) -> float:
    """The variance ``2q/(1 − q)²``, ``q = e^{−ε}``, of ``DLap(1/ε)`` (public)."""
    q = math.exp(-float(eps))
    return 2.0 * q / (1.0 - q) ** 2


def noisy_tails(noisy: np.ndarray, n_hat: int, eps_q: Fraction,
                eps_count: Fraction | None) -> tuple[np.ndarray, np.ndarray]:
    """The noisy tails ``T̃_j ≈ #{u > e_j}`` of a released distance histogram and their public
    sds (post-processing; docs/proofs/mean.md §6). ``noisy``: the ``J + 2`` noisy bins (bin 0
    beyond the top edge, bin ``J + 1`` within the lowest), each ``b_k + DLap(1/ε_q)``. Two
    independent unbiased estimates of ``T_j = Σ_{k <= j} b_k``: from the top, ``A_j = Σ_{k <= j}
    h̃_k`` (variance ``(j + 1)·v``), and, when ``n̂ = n + DLap(1/eps_count)`` (every row is in one
    bin, so ``n = Σ_k b_k``), from the bottom, ``B_j = n̂ − Σ_{k > j} h̃_k`` (variance ``w + (J +
    1 − j)·v``). ``T̃_j`` is their inverse-variance average, variance ``1/(1/var A + 1/var B)``:
    from the top alone the sd grows like ``√j`` and at the lowest edges passed a 0/1 column's
    minority (300 rows at n = 3·10⁴, ε = 1: ``3·sd ≈ 285``) as noise. ``eps_count=None``: ``A``
    alone (``n̂`` not a noisy count)."""
    size = noisy.size - 1
    v = dlap_variance(eps_q)
    top = np.cumsum(noisy[:size]).astype(np.float64)
    var_top = np.arange(1, size + 1) * v
    if eps_count is None:
        return top, np.sqrt(var_top)
    bottom = float(n_hat) - (float(np.sum(noisy)) - top)
    var_bottom = dlap_variance(eps_count) + np.arange(size, 0, -1) * v
    var = 1.0 / (1.0 / var_top + 1.0 / var_bottom)
    return (top / var_top + bottom / var_bottom) * var, np.sqrt(var)


def tail_rule(tails: np.ndarray, sd: np.ndarray, tau: np.ndarray, n_hat: np.ndarray,
              valid: np.ndarray, tail_sd: float = TAIL_SD) -> tuple[np.ndarray, np.ndarray]:
    """The clipping-radius rule of :func:`_quantile_radius`, vectorized over rows (one row per
    histogram; post-processing of released noisy tails only).

    ``tails[g, j]``: the noisy count beyond the ``j``-th edge (descending, ``j = 0`` the top);
    ``sd[j]`` its public sd; ``tau[g]``, ``n_hat[g]`` public; ``valid[g, j]``: the edge exists
    for row ``g`` (a prefix of each row: rows may have different numbers of edges); ``tail_sd``
    the margin of the tail rule in sds (default :data:`TAIL_SD`). Returns the
    chosen edge index per row and whether the robust rule chose it."""
    width = tails.shape[1]
    n_valid = valid.sum(axis=1)
    rob_ok = (tails + 2.0 * sd <= float(CLIP_TAIL) * n_hat[:, None]) & valid
    j_rob = np.where(rob_ok.all(axis=1), width - 1, np.argmin(rob_ok, axis=1) - 1)
    j_rob = np.minimum(j_rob, n_valid - 1)
    tail_ok = (tails <= tau[:, None] + tail_sd * sd) & valid
    j_tail = np.where(tail_ok.any(axis=1), width - 1 - np.argmax(tail_ok[:, ::-1], axis=1), 0)
    far = tails[:, 0] > _far_threshold(tau, float(sd[0]))
    if width > 1:  # only the top passes: take it when the next edge fails clearly
        top = (tails[:, 1] > tau + TAIL_TOP_SD * float(sd[1])) & valid[:, 1]
    else:
        top = np.zeros(tails.shape[0], dtype=bool)
    robust = far | ((j_tail == 0) & ~top)
    return np.maximum(np.where(robust, j_rob, j_tail), 0), robust


def _clip_margin(d: int) -> float:
    """``μ_d``: terms are scaled into the ball of radius ``R(1 − μ_d)``, which absorbs the float
    error of the norm and of the scaling (relative ``<= (d + 6)·2⁻⁵³``): ``2⁻³⁰`` for
    ``d <= 2²⁰``, ``(d + 8)·2⁻⁵²`` beyond."""
    return max(2.0**-30, (d + 8) * 2.0**-52)


def _sum_exponent(big_r: float) -> int:
    """``E − SUM_BITS`` for the least ``E`` with ``R < 2^E``: the term grid of a clipped sum."""
    return math.frexp(big_r)[1] - SUM_BITS


def _clipped_integer_sum(x: np.ndarray, center: np.ndarray, big_r: float, exponent: int,
                         unit: float = 1.0) -> np.ndarray:
    """``Σ_i rint(w_i)``, exactly, as Python integers (object array of shape ``(d,)``), where
    ``w_i = clip(x_i − c, R)/unit/2^exponent`` is computed in floats.

    Each ``w_i`` has ℓ2 norm ``<= R/(unit·2^exponent)`` (the clip radius is ``R(1 − μ_d)``,
    :func:`_clip_margin`), so each rounded term ``rint(w_i)`` is an integer vector of norm
    ``<= R/(unit·2^exponent) + √d/2``. A row whose squared distance overflows (farther than
    about 1e154 from ``c``, up to ±1.8e308 against −1.8e308) is clipped like any other, on the
    ball's boundary: its direction is taken from ``z = x/4 − c/4`` (no overflow) scaled by its
    largest entry, so the term is finite and never NaN. The caller keeps ``R/(unit·2^exponent) <=
    2^SUM_BITS``: blocks of ``2^14`` rounded terms then sum exactly in float64, and blocks are
    added as Python integers (no overflow for any n; docs/proofs/mean.md §6).
    """
    d = x.shape[1]
    keep = big_r * (1.0 - _clip_margin(d))
    total = np.zeros(d, dtype=np.int64).astype(object)
    with np.errstate(all="ignore"):
        for start in range(0, x.shape[0], _SUM_ROWS):
            y = x[start : start + _SUM_ROWS] - center
            norms = np.sqrt(np.einsum("ij,ij->i", y, y))
            far = ~np.isfinite(norms)
            if far.any():  # the squared norm overflows: the unit direction, scaled, times keep
                y[far] = _far_terms(x[start : start + _SUM_ROWS][far], center, keep)
                norms[far] = keep  # factor 1: the term already has norm keep·(1 ± (d + 6)u)
            factor = np.minimum(1.0, keep / np.maximum(norms, np.finfo(float).tiny))
            y *= np.ldexp(factor / unit, -exponent)[:, None]
            np.rint(y, out=y)
            # integer-valued partial sums below 2^53: exact in any order (a BLAS product too)
            total += (np.ones(y.shape[0]) @ y).astype(np.int64).astype(object)
    return total


def _far_terms(rows: np.ndarray, center: np.ndarray, keep: float) -> np.ndarray:
    """``keep·(x − c)/‖x − c‖`` for rows whose ``‖x − c‖²`` overflows: ``z = x/4 − c/4`` (exact
    scaling, no overflow), divided by its largest ``|z_k|`` (> 0), normalized. Relative error of
    the norm ``<= (d + 6)u``, within the clip margin :func:`_clip_margin`."""
    z = rows * 0.25 - center * 0.25
    z /= np.abs(z).max(axis=1, keepdims=True)
    z *= (keep / np.sqrt(np.einsum("ij,ij->i", z, z)))[:, None]
    return z


def _clipped_sum(x: np.ndarray, center: np.ndarray, big_r: float) -> np.ndarray:
    """``Σ_i clip(x_i − ĉ, R)``: every term rounded to the public grid ``h = 2^(E − 38)``
    (``R < 2^E``), summed exactly, and the exact sum returned as the nearest float64 (relative
    error ``<= 2⁻⁵²``; ``±inf`` only beyond the float range). Adding a row adds one rounded term,
    of ℓ2 norm ``<= R + √d·h/2``."""
    e = _sum_exponent(big_r)
    exact = _source(x).clipped_integer_sum(center, big_r, e)
    with np.errstate(over="ignore"):
        return np.ldexp(exact.astype(np.float64), e)


def _ball_slack(d: int) -> Fraction:
    """``κ_d = 1 + (d + 4)·2⁻⁵³``: two points that ``ball(r)`` calls friends are within
    ``κ_d·r`` (float decision ``sqdist <= fl(r²)``, docs/proofs/mean.md §5)."""
    return 1 + (d + 4) * _U


def _faithful_mean(points: np.ndarray) -> np.ndarray:
    """Column means of an ``(m, D)`` float array with relative error ``<= 3u + 2u²`` (u = 2⁻⁵³)
    plus an absolute ``m·2⁻¹⁰⁷⁰``, at every magnitude: the exact column sums (``math.fsum`` of
    the values scaled by ``2^-s``, ``2^s > 2m``, so no intermediate overflow) rounded once, then
    divided by ``m``. A naive float mean errs by up to ``m·u·max|x|``, far more than the
    sensitivity of the average when the points lie far from the origin."""
    m = points.shape[0]
    s = m.bit_length() + 1
    sums = np.array([math.fsum(col) for col in np.ldexp(points, -s).T.tolist()])
    return np.ldexp(sums / m, s)


def _anchored_mean(points: np.ndarray) -> np.ndarray:
    """The column means of an ``(m, D)`` float array (``m >= 1``) taken relative to its first row
    ``c0``, as exact rationals: ``c0_j + v_j`` with ``v = _faithful_mean(fl(x_i − c0))``
    (object array of :class:`~fractions.Fraction`, shape ``(D,)``).

    If every ``|x_ij − c0_j| <= S``, each coordinate is within ``5u·S + 2⁻¹⁰⁰⁷`` of the exact
    mean (u = 2⁻⁵³): the error is relative to the *spread*, not to the magnitude, so no clip
    bound is needed (docs/proofs/mean.md §5). A difference that overflows (never for ``S`` below
    the float range) is read as ``±`` the largest float, so the result is always finite.
    """
    c0 = points[0]
    with np.errstate(over="ignore"):
        y = np.nan_to_num(points - c0)
    v = _faithful_mean(y)
    out = np.empty(points.shape[1], dtype=object)
    out[:] = [Fraction(a) + Fraction(b) for a, b in zip(c0.tolist(), v.tolist())]
    return out


def anchored_rounding(spread: Fraction, exponent: int) -> Fraction:
    """``λ = 1/2 + (5u·S + 2⁻¹⁰⁰⁷)/2^exponent``: grid units between a coordinate of
    :func:`_exact_grid` ``(_anchored_mean(x))`` and the exact mean over ``2^exponent``, when every
    ``|x_ij − x_0j| <= S`` (exact rational; docs/proofs/mean.md §5 (iii))."""
    return Fraction(1, 2) + (5 * _U * spread + Fraction(1, 2**1007)) / Fraction(2) ** exponent


def _exact_grid(values: np.ndarray, exponent: int) -> np.ndarray:
    """``round(a_j / 2^exponent)`` for each (exact, or float) ``a_j``, as an object array of
    Python integers: rounded exactly once, never clipped."""
    g = Fraction(2) ** exponent
    out = np.empty(len(values), dtype=object)
    out[:] = [round(Fraction(a) / g) for a in values]
    return out


def _locate(
    sub: np.ndarray, r: float, plan: MeanPlan, gen: np.random.Generator
) -> tuple[np.ndarray | None, float, int]:
    """FriendlyCore on the subsample: (ĉ, public noise-norm bound, m̂), ĉ None for ⊥."""
    d = sub.shape[1]
    pred = ball(r)
    mask = core_mask(sub, pred, plan.alpha, gen) if sub.shape[0] else np.zeros(0, bool)
    core = sub[mask]
    core = core[gen.permutation(core.shape[0])]  # a multiset: float summation order is random
    m_hat = core.shape[0] + int(discrete_laplace(1 / plan.eps_core_count, rng=gen))
    m_low = m_hat - plan.core_count_shift
    if m_low < M_MIN:
        return None, math.nan, m_hat
    avg = _anchored_mean(core) if core.shape[0] else np.zeros(d)
    # The exponent is chosen from public values exactly as before; the sensitivity in grid units
    # is that of the exact average (2κ_d·r/m_low) plus the rounding of the computed one, whose
    # error is relative to the core's spread 2κ_d·r (every point is within it of the anchor).
    sens = 2.0 * r / m_low * _SAFETY
    spread = 2 * Fraction(r) * _ball_slack(d)
    exact_sens = spread / m_low
    root_d = _sqrt_up(d)
    tail = math.sqrt(2.0 * math.log(1.0 / BETA_LOCATE))
    if plan.gaussian:
        sigma = sens / math.sqrt(2.0 * float(plan.rho_core_mean)) * _SAFETY
        e = gaussian_exponent(sens, sigma, d)
        lam = anchored_rounding(spread, e)
        sens_g = exact_sens / Fraction(2) ** e + 2 * lam * root_d
        rel = grid_gaussian_integers(_exact_grid(avg, e), exponent=e, bound=math.inf,
                                     l2_sensitivity_grid=sens_g, rho=plan.rho_core_mean, rng=gen)
        sd = math.sqrt(float(rel.noise_grid)) * rel.step
        bound = sd * (math.sqrt(d) + tail)
    else:
        e = laplace_exponent(math.sqrt(d) * sens, _float_down(plan.eps_core_mean), d)
        lam = anchored_rounding(spread, e)
        sens1 = root_d * exact_sens / Fraction(2) ** e + 2 * lam * d
        rel = grid_laplace_integers(_exact_grid(avg, e), exponent=e, bound=math.inf,
                                    l1_sensitivity_grid=sens1, epsilon=plan.eps_core_mean,
                                    rng=gen)
        b = float(rel.noise_grid) * rel.step  # Laplace scale per coordinate
        bound = b * (math.sqrt(2.0 * d) + 2.0 * math.log(1.0 / BETA_LOCATE))
    return _finite(rel.values), bound, m_hat
