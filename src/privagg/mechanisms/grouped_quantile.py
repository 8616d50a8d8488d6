"""Per-group quantiles: report-noisy-max over public grids, pure ε-DP (docs/proofs/aggregate_quantile.md).

For each released group ``g`` with rows ``x_1 … x_n`` and a public candidate ``t``, let
``c(t) = #{i : x_i <= t}`` and ``c⁻(t) = #{i : x_i < t}``. With ``q = a/b`` (a rational,
:func:`rational_q`), the integer utility

    U(t) = −dist(a·n, [b·c⁻(t), b·c(t)])      (= −|b·c(t) − a·n| where no row equals t)

is 0 exactly where ``t`` is a q-quantile — also on an atom: the median of a 0/1 column with 70 %
zeros is the candidate 0, not any candidate of ``[0, 1)`` (:func:`_point_utility`; the rows equal to
a candidate are counted in slots of their own, :func:`dyadic_slots`). Adding or removing one row
moves ``U`` by at most ``max(a, b − a)``; the candidate is ``argmax_t U(t) + ν_t`` (first
maximum), ``ν_t ~ DLap(2Δ/ε)`` i.i.d. (report-noisy-max, docs/proofs/mean.md §2b). Counts for all
groups and candidates are one ``bincount`` of a per-row bin index (a ``G × K`` matrix, groups processed in chunks of at most
:data:`CELLS_PER_CHUNK` matrix cells); there is no Python loop per group or per row.

Grids (all candidates are exactly representable floats, so ``x <= t`` is an exact comparison):

- ``bounds=(lo, hi)``: ONE stage at the full ε: the point among the dyadic grid of ``[lo, hi]``
  with at most ``2^bits_g`` candidates (:func:`dyadic_grid`): ``bits_g`` from the group's
  RELEASED noisy count when the query has one (:func:`grid_bits`: ``2^10`` for small groups,
  up to ``2^16`` for large ones; post-processing of that release), else ``BOUNDED_BITS = 14``
  for every group. The two-stage plan before it
  (a cell of 16 at ε/4, then a window of 3 cells at 3ε/4) spent a quarter of the budget finding
  a cell and let ~10^4 points of the window compete at 3ε/4: on groups of 50–250 rows its error
  was 2–3× that of one stage at ε (docs/proofs/aggregate_quantile.md §6, "one stage"). Rows
  outside ``[lo, hi]`` count as below / above every candidate, exactly as if clamped to it.
- ``bounds=None``: stage 1 (3ε/8) chooses a *cell* ``(C[k − 1], C[k]]`` of the public signed
  octave grid ``C = {0} ∪ {±2^j : −40 <= j <= 64}`` (:func:`geometric_grid`; a value below
  ``−2^64`` acts as if clamped to it, one above ``2^64`` counts above every candidate) with
  the cell utility ``−dist(a·n, [b·c(C[k−1]), b·c(C[k])])``
  (0 for the cell holding the quantile even when all rows lie in one cell; the point utility is
  flat there, which made the old quarter-octave point search uniform over its 835 candidates on
  small or narrow groups), stage 2 (5ε/8) on the dyadic grid of at most ``2^UNBOUNDED_BITS``
  candidates of that cell, by the same cell utility over its cells ``(t_{i−1}, t_i]``, released at
  ``t_i`` (within a step or two of the quantile even where the data are narrower than a step:
  N(10⁶, 10²), whose release by the point utility was uniform over the octave). When the query
  gives a released window per group (``windows``: the clipping range of the query's unbounded mean
  of the same column; post-processing of that metric's release), every group with a usable one is
  released instead from ONE stage at the full ε over it — the bounded mechanism with those
  bounds: no ε on finding a cell, and a grid fitted to the group (the octave search's step, 2^-12
  of an octave, is 128 at 10⁶). Without a window a group whose released count is below
  :func:`rows_needed` is ⊥.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import fail
from ..noise.samplers import discrete_laplace
from .grouped import Contribution, GroupedValues, MetricResult

__all__ = [
    "BOUNDED_BITS",
    "GRID_BITS_MAX",
    "GRID_BITS_MIN",
    "GRID_RHO",
    "UNBOUNDED_BITS",
    "dyadic_grid",
    "geometric_grid",
    "grid_bits",
    "quantile_sensitivity",
    "quantiles",
    "rational_q",
    "rows_needed",
    "stage_scales",
]

#: Bounded: one stage (the full ε) over the dyadic grid of [lo, hi] with at most ``2^BOUNDED_BITS``
#: candidates when no released group count is given (docs/proofs/aggregate_quantile.md §5).
BOUNDED_BITS = 14
#: Bounded with a released (public) noisy group count ``n̂_g`` (:func:`grid_bits`): at most
#: ``2^bits_g`` candidates, ``bits_g = clip(ceil(log2(GRID_RHO·n̂_g·ε_g·b/(2Δ))), GRID_BITS_MIN,
#: GRID_BITS_MAX)``: about ``GRID_RHO`` grid points per rank-noise width and released row.
GRID_RHO = 32
GRID_BITS_MIN, GRID_BITS_MAX = 10, 16
#: Without bounds: stage 1 (share :data:`COARSE_SHARE`) chooses a *cell* of the octave grid
#: (:func:`geometric_grid`, cell utility), stage 2 the point among at most ``2^UNBOUNDED_BITS``
#: dyadic candidates of that cell.
COARSE_SHARE = Fraction(3, 8)
UNBOUNDED_BITS = 12
#: Octaves: the geometric grid's magnitudes are ``2^j``, ``J_MIN <= j <= J_MAX``.
J_MIN, J_MAX = -40, 64
#: Largest denominator of q (larger ones are approximated, :func:`rational_q`).
Q_MAX_DENOMINATOR = 2**20
#: Matrix cells (groups × candidates) per chunk of groups: bounds memory, not a loop per group.
CELLS_PER_CHUNK = 1 << 22

#: Without bounds and with a released noisy count ``n̂_g`` (``count()`` of the same query): a group
#: is ⊥ when ``n̂_g < rows_needed(...)`` (:func:`rows_needed`), the size below which stage 1 picks
#: an octave cell holding none of the group's rows with probability above this (union bound).
FAR_BETA = 0.1

#: Per-group noise scales above this are refused (ParameterError): keeps every noisy utility
#: far inside int64 (docs/proofs/aggregate_quantile.md §5).
MAX_SCALE = Fraction(2**50)



def rational_q(q: Any, where: str = "quantile") -> tuple[int, int]:
    """``(a, b)`` with ``q = a/b`` in lowest terms, ``0 <= a <= b``, ``b <= 2^20``.

    A float is read as its shortest decimal representation (``0.9 → 9/10``, ``0.5 → 1/2``,
    ``0.999 → 999/1000``); an int or Fraction exactly. If the denominator then exceeds
    ``Q_MAX_DENOMINATOR = 2^20``, the nearest fraction with a denominator at most ``2^20`` is used
    (``Fraction.limit_denominator``; ``|q − a/b| <= 2^-21``, and ``< 2^-40`` for every float whose
    shortest decimal has at most 6 digits after the point it is exact). ``q`` must lie in [0, 1].
    """
    if isinstance(q, bool) or not isinstance(q, (int, float, Fraction, np.integer, np.floating)):
        raise fail(where, "q", "a number in [0, 1]", q)
    if isinstance(q, (float, np.floating)):
        if not math.isfinite(float(q)):
            raise fail(where, "q", "a number in [0, 1]", q)
        f = Fraction(repr(float(q)))
    else:
        f = Fraction(q)
    if not 0 <= f <= 1:
        raise fail(where, "q", "a number in [0, 1]", q)
    if f.denominator > Q_MAX_DENOMINATOR:
        f = f.limit_denominator(Q_MAX_DENOMINATOR)
    return f.numerator, f.denominator


def quantile_sensitivity(a: int, b: int, contribution: Contribution) -> int:
    """Δ of the point utility ``U = −dist(a·n, [b·c⁻, b·c])`` (and of the cell utility) in one group
    for one add/remove neighbour step of one unit: ``max_rows · max(a, b − a)`` (each of its up to
    ``max_rows`` rows moves ``b·c⁻ − a·n`` and ``b·c − a·n`` by ``b − a`` or by ``−a``). Replacement
    and ``max_groups`` are handled by composition in :func:`quantiles`
    (docs/proofs/aggregate_quantile.md §2–3)."""
    return int(contribution.max_rows) * max(a, b - a)


def grid_bits(n_hat: Any, a: int, b: int, epsilon: Any, contribution: Contribution) -> np.ndarray:
    """Per-group bits of the bounded grid from PUBLIC values only: the released noisy group counts
    ``n_hat`` (G,), q = a/b, the metric's ε and the contribution bounds (docs/proofs/aggregate_quantile.md §4).

    The report-noisy-max's rank noise is about ``2Δ/(ε_g·b)`` rows (Δ from
    :func:`quantile_sensitivity`, ε_g as in :func:`stage_scales`), independent of n; a group's
    grid resolution in rows is about ``n·(hi − lo)/(K·spread)``. ``K ≈ GRID_RHO·n̂·ε_g·b/(2Δ)``
    keeps the resolution below the rank noise for data spread down to ``(hi − lo)/GRID_RHO``:
    ``bits_g`` is the least integer with ``2^bits_g >= GRID_RHO·max(n̂_g, 1)·ε_g·b/(2Δ)`` (the
    product in float64, capped at ``2^GRID_BITS_MAX`` first), clipped to
    ``[GRID_BITS_MIN, GRID_BITS_MAX]``. Small groups get ``2^10`` candidates (no accuracy lost:
    below the rank noise the grid size does not matter), groups of 10^4 rows at ε = 1 get ``2^16``.
    """
    eps_g = Fraction(epsilon) / (int(contribution.max_groups) * (2 if contribution.replace else 1))  # as stage_scales
    delta_u = quantile_sensitivity(a, b, contribution)
    cap = Fraction(2**GRID_BITS_MAX)
    per_row = float(min(GRID_RHO * b * eps_g / (2 * delta_u), cap))  # Δ >= 1
    n = np.maximum(np.asarray(n_hat, dtype=np.float64), 1.0)
    target = np.minimum(n * per_row, float(cap))
    mant, expo = np.frexp(target)  # target = mant·2^expo, mant in [1/2, 1) (0 for target 0)
    bits = np.where(mant == 0.5, expo - 1, expo).astype(np.int64)
    return np.clip(bits, GRID_BITS_MIN, GRID_BITS_MAX)


def geometric_grid() -> np.ndarray:
    """The sorted public stage-1 candidates without bounds: ``0`` and ``±2^j``,
    ``J_MIN <= j <= J_MAX`` (211 exact floats)."""
    pos = np.ldexp(1.0, np.arange(J_MIN, J_MAX + 1))
    return np.concatenate([-pos[::-1], [0.0], pos])


def dyadic_grid(lo: float, hi: float, bits: int) -> tuple[int, int, int]:
    """``(e, m0, k)``: the candidates ``(m0 + i)·2^e``, ``0 <= i < k``, are every multiple of
    ``2^e`` in ``[lo, hi]`` (``lo <= hi`` finite floats), for the least ``e`` with
    ``hi − lo < 2^{e + bits}`` that is at least the float spacing at ``max(|lo|, |hi|)`` (so
    each candidate is an exact float and ``|m| < 2^53``). ``1 <= k <= 2^bits``. Exact (Fractions)."""
    flo, fhi = Fraction(lo), Fraction(hi)
    width = fhi - flo
    big = max(abs(lo), abs(hi))
    e_ulp = max(math.frexp(big)[1] - 53, -1074)
    if width > 0:
        e_w = math.frexp(float(width / 2))[1] + 1  # width < 2^{e_w}; exact via Fraction
        while Fraction(2) ** (e_w - 1) > width:
            e_w -= 1  # pragma: no cover - float(width/2) rounded up across a power of two
        while Fraction(2) ** e_w <= width:
            e_w += 1  # pragma: no cover
        e = max(e_w - bits, e_ulp)
    else:
        e = e_ulp
    step = Fraction(2) ** e
    m0 = math.ceil(flo / step)
    m1 = math.floor(fhi / step)
    return e, m0, m1 - m0 + 1


def _dyadic_windows(lo: np.ndarray, hi: np.ndarray, bits: int) -> tuple[np.ndarray, ...]:
    """:func:`dyadic_grid` for arrays of windows with ``lo <= hi`` and ``|lo|, |hi| <= 2^65``
    (vectorized; exact: ``frexp``/``ldexp``/``ceil`` are exact on these floats)."""
    width = hi - lo  # monotone rounding: fl(width) < 2^E iff the true width < 2^E
    _, e_w = np.frexp(width)
    _, e_big = np.frexp(np.maximum(np.abs(lo), np.abs(hi)))
    e_ulp = np.maximum(e_big.astype(np.int64) - 53, -1074)
    # width 0 (lo == hi): the float spacing at lo, of which lo is a multiple (one candidate);
    # width > 0: width >= 2^{e_w − 1} >= 2^e, so [lo, hi] holds a multiple of 2^e (k >= 1).
    e = np.where(width > 0, np.maximum(e_w.astype(np.int64) - bits, e_ulp), e_ulp)
    m0 = np.ceil(np.ldexp(lo, -e))
    m1 = np.floor(np.ldexp(hi, -e))
    return e, m0, (m1 - m0 + 1).astype(np.int64)


def _check_bounds(bounds: Any) -> tuple[float, float] | None:
    if bounds is None:
        return None
    rule = "None or a pair (lo, hi) of finite numbers with lo <= hi"
    try:
        lo, hi = bounds
        lo_f, hi_f = float(lo), float(hi)
    except (TypeError, ValueError):
        raise fail("quantile", "bounds", rule, bounds) from None
    if isinstance(lo, bool) or isinstance(hi, bool) or not (math.isfinite(lo_f) and math.isfinite(hi_f)) or lo_f > hi_f:
        raise fail("quantile", "bounds", rule, bounds)
    return lo_f, hi_f


def _group_chunks(n_groups: int, k: int) -> list[tuple[int, int]]:
    step = max(1, CELLS_PER_CHUNK // max(k + 1, 1))
    return [(s, min(s + step, n_groups)) for s in range(0, n_groups, step)]


def _point_utility(below: np.ndarray, cum: np.ndarray, n: np.ndarray, a: int, b: int) -> np.ndarray:
    """``U[g, k] = −dist(a·n[g], [b·c⁻[g, k], b·c[g, k]])`` with ``c⁻ = #{x < t_k}`` (``below``) and
    ``c = #{x <= t_k}`` (``cum``): 0 iff ``t_k`` is a q-quantile, also on an atom (int64; |values|
    <= 2^20·n, far inside int64). Without a row equal to ``t_k`` it is ``−|b·c − a·n|``."""
    an = a * n[:, None]
    return -np.maximum(np.maximum(b * below - an, an - b * cum), 0)


def _noisy_argmax(util: np.ndarray, k_valid: np.ndarray | None, scale: Fraction,
                  rng: np.random.Generator) -> np.ndarray:
    """Row-wise first maximum of ``util + DLap(scale)`` (i.i.d.), over the first ``k_valid[g]``
    columns (all columns when None). Noise is drawn for every cell (public shape)."""
    noisy = util + discrete_laplace(scale, size=util.shape, rng=rng)
    if k_valid is not None:
        cols = np.arange(util.shape[1])
        noisy[cols[None, :] >= k_valid[:, None]] = np.iinfo(np.int64).min
    return np.argmax(noisy, axis=1)  # numpy's argmax returns the first maximum


def shared_bins(x: np.ndarray, j: np.ndarray, cands: np.ndarray) -> np.ndarray:
    """The bin of each row for one sorted candidate list (any group ``j``): the number of
    candidates below ``x``, so ``x <= cands[i]`` iff ``i >= bin`` (in ``[0, K]``)."""
    return np.searchsorted(cands, x, side="left")


def dyadic_bins(x: np.ndarray, j: np.ndarray, e: np.ndarray, m0: np.ndarray, k: int) -> np.ndarray:
    """The bin of each row on its group's dyadic grid ``(m0[j] + i)·2^{e[j]}`` (``j`` the row's
    position in the stage's groups): ``clip(ceil(x·2^{−e[j]}) − m0[j], 0, k)``, so
    ``x <= (m0 + i)·2^e`` iff ``i >= bin``.

    ``x <= m·2^e`` iff ``ceil(x·2^{−e}) <= m``: ``ldexp`` is exact (a positive ``x`` whose scaled
    value underflows is given ``ceil = 1``, its true value), ``ceil`` is exact, and the bin
    ``clip(ceil − m0, 0, k)`` is exact after clipping (|m0| < 2^53; a rounded difference is beyond
    the clip range, by monotone rounding)."""
    with np.errstate(over="ignore", under="ignore"):  # ±inf / 0 are handled: no data-dependent warning
        y = np.ceil(np.ldexp(x, -e[j]))
    y = np.where((x > 0) & (y < 1), 1.0, y)
    return np.clip(y - m0[j], 0, k).astype(np.int64)


def dyadic_slots(x: np.ndarray, j: np.ndarray, e: np.ndarray, m0: np.ndarray, k: int) -> np.ndarray:
    """The slot of each row on its group's dyadic grid ``t_i = (m0[j] + i)·2^{e[j]}``: ``2·i + 1``
    where ``x == t_i`` (``0 <= i < k``), else ``2·i`` for the bin ``i`` of :func:`dyadic_bins` (``x``
    below ``t_i`` and above ``t_{i−1}``; ``2k`` above every candidate), so that ``#{x < t_i}`` counts
    the slots ``<= 2i`` and ``#{x <= t_i}`` those ``<= 2i + 1`` (:func:`_slot_counts`).

    ``x == m·2^e`` iff ``x·2^{−e}`` is the integer ``m``: ``ldexp`` is exact for a normal result;
    a scaled value that underflows to ±0 for ``x != 0`` (or overflows to ±inf) is not on the grid."""
    with np.errstate(over="ignore", under="ignore"):  # ±inf / 0 are handled: no data-dependent warning
        s = np.ldexp(x, -e[j])
    y = np.ceil(s)
    tie = (s == y) & ((s != 0) | (x == 0))
    y = np.where((x > 0) & (y < 1), 1.0, y) - m0[j]
    tie &= (y >= 0) & (y < k)
    return 2 * np.clip(y, 0, k).astype(np.int64) + tie


def _slot_counts(flat: np.ndarray, n_groups: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(c⁻, c)``, each ``(n_groups, k)``: ``#{x < t_i}`` and ``#{x <= t_i}`` from the flat
    ``g·(2k + 1) + slot`` counts of :func:`dyadic_slots`."""
    cum = np.cumsum(flat.reshape(n_groups, 2 * k + 1), axis=1)
    return cum[:, 0 : 2 * k : 2], cum[:, 1 : 2 * k : 2]


def _cumulative(flat: np.ndarray, n_groups: int, k: int) -> np.ndarray:
    """``c[g, i]``, ``i < k``: the counts of bins ``<= i`` from the flat ``g·(k + 1) + bin`` counts."""
    return np.cumsum(flat.reshape(n_groups, k + 1), axis=1)[:, :k]


def _counts_shared(x: np.ndarray, gid: np.ndarray, g0: int, g1: int, cands: np.ndarray) -> np.ndarray:
    """``c[g, k] = #{rows of group g0 + g with x <= cands[k]}`` for one sorted candidate list."""
    k = cands.size
    r = gid - g0
    flat = np.bincount(r * (k + 1) + shared_bins(x, r, cands), minlength=(g1 - g0) * (k + 1))
    return _cumulative(flat, g1 - g0, k)


def _counts_dyadic(x: np.ndarray, gid: np.ndarray, g0: int, g1: int, e: np.ndarray,
                   m0: np.ndarray, k: int) -> np.ndarray:
    """``c[g, i] = #{rows of group g with x <= (m0[g] + i)·2^{e[g]}}``, ``i < k``
    (:func:`dyadic_bins`)."""
    r = gid - g0
    flat = np.bincount(r * (k + 1) + dyadic_bins(x, r, e, m0, k), minlength=(g1 - g0) * (k + 1))
    return _cumulative(flat, g1 - g0, k)


def _counts_dyadic_pair(x: np.ndarray, gid: np.ndarray, g0: int, g1: int, e: np.ndarray,
                        m0: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(#{x < t}, #{x <= t})`` per group of ``g0 … g1 − 1`` and candidate ``t = (m0[g] + i)·2^{e[g]}``,
    ``i < k`` (:func:`dyadic_slots`)."""
    r = gid - g0
    width = 2 * k + 1
    flat = np.bincount(r * width + dyadic_slots(x, r, e, m0, k), minlength=(g1 - g0) * width)
    return _slot_counts(flat, g1 - g0, k)


def local_bin_counts(gv: GroupedValues, groups: np.ndarray | None, bins: Callable[..., np.ndarray],
                     width: int, chunks: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    """:meth:`~privagg.mechanisms.grouped.KeptRows.bin_counts` of rows held in numpy: per chunk
    one ``bincount`` of the flat ``(j − c0)·width + bins(x, j)`` over the chunk's rows (a slice:
    the rows are sorted by group; ``groups`` given, the rows of those groups renumbered
    ``0 … len(groups) − 1`` first)."""
    x, gid, offsets = np.asarray(gv.values, dtype=np.float64), np.asarray(gv.group, dtype=np.int64), gv.offsets
    if groups is not None:
        local = np.full(int(gv.n_groups), -1, dtype=np.int64)
        local[groups] = np.arange(groups.size)
        mask = local[gid] >= 0
        x, gid = x[mask], local[gid[mask]]
        sizes = np.diff(offsets)[groups]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    for c0, c1 in chunks:
        lo, hi = offsets[c0], offsets[c1]
        j = gid[lo:hi]
        flat = np.bincount((j - c0) * width + bins(x[lo:hi], j), minlength=(c1 - c0) * width)
        yield flat.reshape(c1 - c0, width)


def _bin_counts(rows: Any, groups: np.ndarray | None, bins: Callable[..., np.ndarray], width: int,
                chunks: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    if isinstance(rows, GroupedValues):
        return local_bin_counts(rows, groups, bins, width, chunks)
    return rows.bin_counts(groups, bins, width, chunks)  # an engine that keeps the rows (Spark)


def stage_scales(a: int, b: int, epsilon: Any, contribution: Contribution, *,
                 bounded: bool) -> tuple[Fraction, ...]:
    """The discrete Laplace scales ``2Δ/ε_stage`` of the stages (docs/proofs/aggregate_quantile.md
    §2–4): ``ε_g = ε/(ℓ0·r)`` per group (``r = 2`` for replace); with bounds ONE stage at ``ε_g``
    (a 1-tuple), without bounds two, ``ε_g`` split :data:`COARSE_SHARE` ``: 1 −`` it; ``Δ`` from
    :func:`quantile_sensitivity`. ParameterError when a scale exceeds :data:`MAX_SCALE`."""
    eps = Fraction(epsilon)
    if eps <= 0:
        raise fail("quantile", "epsilon", "> 0", epsilon)
    groups_per_unit = int(contribution.max_groups) * (2 if contribution.replace else 1)
    eps_g = eps / groups_per_unit
    delta_u = quantile_sensitivity(a, b, contribution)
    shares = (Fraction(1),) if bounded else (COARSE_SHARE, 1 - COARSE_SHARE)
    scales = tuple(Fraction(2 * delta_u) / (eps_g * share) for share in shares)
    if max(scales) > MAX_SCALE:
        raise fail("quantile", "epsilon", f"large enough that 2·Δ/ε_stage <= 2^50 (Δ = {delta_u}, "
                   f"{groups_per_unit} group(s) per unit)", epsilon)
    return scales


def _cell_utility(cum: np.ndarray, n: np.ndarray, a: int, b: int) -> np.ndarray:
    """Cell utility ``U[g, i] = −dist(a·n, [b·c_{i−1}, b·c_i])`` of the cell ``(t_{i−1}, t_i]``
    (``c_{−1} = 0``: cell 0 is ``(−∞, t_0]``); 0 iff the cell holds the q-quantile. Sensitivity
    ``Δ`` like the point utility (docs/proofs/aggregate_quantile.md §2)."""
    an = a * n[:, None]
    prev = np.zeros_like(cum)
    prev[:, 1:] = cum[:, :-1]
    return -np.maximum(np.maximum(b * prev - an, an - b * cum), 0)


def _dyadic_stage(rows: Any, groups: np.ndarray | None, sizes: np.ndarray,
                  e_arr: np.ndarray, m0_arr: np.ndarray, k_arr: np.ndarray, a: int, b: int,
                  scale: Fraction, rng: np.random.Generator, cells: bool = False) -> np.ndarray:
    """One report-noisy-max per group of ``groups`` (all when None; ``sizes``, ``e_arr`` … per
    group of the stage) over its dyadic grid ``(m0[g] + i)·2^{e[g]}``, ``i < k[g]`` (point
    utility, or with ``cells`` the cell utility of :func:`_cell_utility`)."""
    G = e_arr.size
    kmax = int(k_arr.max()) if G else 1
    pick = np.zeros(G, dtype=np.int64)
    if cells:
        chunks = _group_chunks(G, kmax)
        bins = functools.partial(dyadic_bins, e=e_arr, m0=m0_arr, k=kmax)
        width = kmax + 1
    else:  # points: rows equal to a candidate in slots of their own (c⁻ and c)
        chunks = _group_chunks(G, 2 * kmax)
        bins = functools.partial(dyadic_slots, e=e_arr, m0=m0_arr, k=kmax)
        width = 2 * kmax + 1
    for (g0, g1), flat in zip(chunks, _bin_counts(rows, groups, bins, width, chunks), strict=True):
        if cells:
            util = _cell_utility(_cumulative(flat, g1 - g0, kmax), sizes[g0:g1], a, b)
        else:
            util = _point_utility(*_slot_counts(flat, g1 - g0, kmax), sizes[g0:g1], a, b)
        pick[g0:g1] = _noisy_argmax(util, k_arr[g0:g1], scale, rng)
    return pick


def quantiles(gv: GroupedValues, q: float, *, bounds: tuple[float, float] | None,
              epsilon: Fraction, contribution: Contribution, rng: np.random.Generator,
              n_hat: np.ndarray | None = None,
              windows: tuple[np.ndarray, np.ndarray] | None = None) -> MetricResult:
    """The ``q``-quantile of each group's rows, pure ``epsilon``-DP over all groups.

    Parameters
    ----------
    gv : GroupedValues or KeptRows
        The bounded rows of the released groups (sorted by group), or an engine's kept rows
        (Spark): read only through per-row bin counts (:func:`local_bin_counts`).
    q : float
        In [0, 1], converted to ``a/b`` by :func:`rational_q` (``0.9 → 9/10``).
    bounds : (lo, hi) or None
        Public range of the candidates. Rows outside it act as if clamped to it. None: the
        search over ``±2^64`` (module docstring); rows below ``−2^64`` act as clamped to it, rows
        above ``2^64`` count above every candidate.
    epsilon : Fraction
        The budget of this metric; each group's selection gets ``ε_g = ε / (ℓ0·r)`` with
        ``ℓ0 = max_groups`` and ``r = 2`` for ``replace`` (else 1): with bounds one stage at
        ``ε_g``, without bounds split over two stages (:func:`stage_scales`); a stage's noise has scale
        ``2Δ/ε_stage`` with ``Δ = max_rows·max(a, b − a)`` (docs/proofs/aggregate_quantile.md).
    contribution : Contribution
    rng : numpy Generator
    n_hat : array (G,) or None
        With bounds: an already RELEASED noisy count of each group (public, e.g. ``count()`` of the
        same query); it chooses each group's grid size (:func:`grid_bits`: post-processing of a
        release, no budget). None: ``2^BOUNDED_BITS`` candidates for every group. Without
        bounds it decides ⊥: a group with ``n̂ < rows_needed(q, epsilon, contribution)``
        (:func:`rows_needed`) is ⊥ (value, low, high NaN; ``reason`` says why), since below that
        size stage 1 may pick an octave cell that holds none of its rows (post-processing; the
        draws are the same). None: nothing is ⊥.
    windows : (lo, hi) arrays (G,) or None
        Without bounds and with ``n_hat``: per-group ranges that are RELEASED values (public), in
        :func:`~privagg.mechanisms.aggregate.aggregate` the clipping range of the query's unbounded
        mean of the same column. A group whose window is finite with ``lo <= hi`` and
        ``|lo|, |hi| <= 2^64`` is released from one stage at the full ``ε_g`` over the window's
        dyadic grid (:func:`grid_bits` from ``n̂``; rows outside act as clamped to it, as with
        ``bounds``), whatever its size; the two stages run only when some group has no such window,
        and their draws for the others are discarded, never released
        (docs/proofs/aggregate_quantile.md §5c). ``extra["window"]`` marks those groups.

    Returns
    -------
    MetricResult
        ``value``: the chosen candidate (an exact float of the final grid, in ``[lo, hi]`` with
        bounds). ⊥ only without bounds and with ``n_hat`` (above); otherwise an empty group (size 0
        after bounding) gets a candidate drawn by the same mechanism on zero rows (the first
        maximum of pure noise), a valid release that says nothing about the data. ``low`` / ``high``: with bounds the neighbouring candidates of
        the released one (its grid cell, clipped to the grid); without bounds the window the final
        stage searched (the octave cell chosen by stage 1). ``low <= value <= high`` always. They
        are NOT a confidence interval of the true quantile and do not bound the noise.
        ``extra``: ``"rank_error"`` (per group, public): with probability ≥ 95 %, the released
        value's rank ``c(value) = #{x <= value}`` is within ``rank_error`` rows (plus the final
        grid's resolution) of ``q·n`` — ``2·T/b`` summed over the stages, ``T`` the bound on the
        largest ``|ν|`` of that stage's draws at level 95 % (one stage) or 97.5 % (each of two);
        a group with ``n`` not well above ``rank_error/min(q, 1 − q)`` may be released
        anywhere in the range (or, without bounds, far from its data); ``"step"``: the final
        grid's spacing; without bounds ``"rows_needed"`` (:func:`rows_needed`, public, the
        ⊥ rule's size). ``epsilon``: the guarantee (= the ``epsilon`` given), ``delta`` 0.
    """
    a, b = rational_q(q)
    box = _check_bounds(bounds)
    scales = stage_scales(a, b, epsilon, contribution, bounded=box is not None)
    G = int(gv.n_groups)
    sizes = np.asarray(gv.present_counts(), dtype=np.int64)

    if box is not None:  # one stage over a dyadic grid of [lo, hi] (its size: public, per group)
        if n_hat is None:
            bits_g = np.full(G, BOUNDED_BITS, dtype=np.int64)
        else:
            n_hat = np.asarray(n_hat, dtype=np.float64)
            if n_hat.shape != (G,):
                raise ValueError(f"n_hat must have shape ({G},), not {n_hat.shape}")
            bits_g = grid_bits(n_hat, a, b, epsilon, contribution)
        e_arr = np.zeros(G, dtype=np.int64)
        m0_arr = np.zeros(G)
        k_arr = np.zeros(G, dtype=np.int64)
        pick = np.zeros(G, dtype=np.int64)
        for bits in np.unique(bits_g).tolist():  # at most GRID_BITS_MAX − GRID_BITS_MIN + 1 sizes
            e, m0, k = dyadic_grid(box[0], box[1], int(bits))
            sel = np.flatnonzero(bits_g == bits)
            e_arr[sel], m0_arr[sel], k_arr[sel] = e, float(m0), k
            if sel.size == G:
                pick = _dyadic_stage(gv, None, sizes, e_arr, m0_arr, k_arr, a, b, scales[0], rng)
                break
            pick[sel] = _dyadic_stage(gv, sel, sizes[sel], e_arr[sel], m0_arr[sel], k_arr[sel], a, b,
                                      scales[0], rng)
        value, w_lo, w_hi, step_out = _grid_cell(m0_arr, pick, k_arr, e_arr)
        rank_error = np.zeros(G)
        for k in np.unique(k_arr).tolist():  # per grid size (public)
            rank_error[k_arr == k] = 2.0 * _max_abs_noise_bound(scales[0], int(k), 0.05) / b
    else:
        # a group with a usable released window (public: the query's unbounded mean's release) is
        # released from ONE stage over it at the full ε_g below (§5c); the two stages run only
        # when some group has none (their draws for the others are discarded)
        use = _window_groups(windows, G) if n_hat is not None else np.zeros(G, dtype=bool)
        if use.all():
            value, w_lo, w_hi, step_out = (np.full(G, np.nan) for _ in range(4))
            rank_error = np.zeros(G)
        else:
            value, w_lo, w_hi, step_out, rank_error = _two_stages(gv, sizes, a, b, scales, rng)
    ok = np.ones(G, dtype=bool)
    reason = np.full(G, None, dtype=object)
    rank_error = np.broadcast_to(rank_error, (G,)).astype(np.float64)
    extra = {"rank_error": rank_error, "step": step_out}
    if box is None:
        need = rows_needed(q, epsilon, contribution)
        extra["rows_needed"] = np.full(G, float(need))
        if n_hat is not None:  # a released count (public): ⊥ below the stage-1 rule (post-processing)
            n_hat = np.asarray(n_hat, dtype=np.float64)
            if n_hat.shape != (G,):
                raise ValueError(f"n_hat must have shape ({G},), not {n_hat.shape}")
            ok = n_hat >= need
            if use.any():  # one stage over the released window at the full ε_g (§5c)
                _window_stage(gv, np.flatnonzero(use), sizes, n_hat, windows, a, b, epsilon, contribution, rng,
                              value, w_lo, w_hi, step_out, rank_error)
                extra["step"] = step_out
                ok = ok | use
            extra["window"] = use
            reason[~ok] = (f"group too small for the unbounded quantile at this ε: noisy count n̂ below "
                           f"{need} (below it the octave search may land where the group has no row)")
            nan = np.float64(np.nan)
            value, w_lo, w_hi = (np.where(ok, v, nan) for v in (value, w_lo, w_hi))
    return MetricResult(
        value=value, low=w_lo, high=w_hi, ok=ok, reason=reason, epsilon=float(epsilon), delta=0.0,
        extra=extra,
    )


def _two_stages(gv: Any, sizes: np.ndarray, a: int, b: int, scales: tuple[Fraction, ...],
                rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Without bounds: stage 1, the cell utility over the octave grid's cells; stage 2, the cell
    utility over the cells ``(t_{i−1}, t_i]`` of the dyadic grid of the chosen closed octave cell,
    released at ``t_i`` — every group. ``(value, low, high, step, rank_error)``, low/high the
    chosen octave cell."""
    G = sizes.size
    cands = geometric_grid()
    first_k = cands.size
    choice = np.empty(G, dtype=np.int64)
    chunks = _group_chunks(G, first_k)
    bins = functools.partial(shared_bins, cands=cands)
    for (g0, g1), flat in zip(chunks, _bin_counts(gv, None, bins, first_k + 1, chunks), strict=True):
        util = _cell_utility(_cumulative(flat, g1 - g0, first_k), sizes[g0:g1], a, b)
        choice[g0:g1] = _noisy_argmax(util, None, scales[0], rng)
    # the chosen cell (C[k − 1], C[k]]; cell 0 is (−∞, C[0]] → the point C[0]
    w_lo = cands[np.maximum(choice - 1, 0)]
    w_hi = cands[choice]
    e_arr, m0_arr, k_arr = _dyadic_windows(w_lo, w_hi, UNBOUNDED_BITS)
    # stage 2 by cells (t_{i−1}, t_i] too, released at t_i: data narrower than the grid's step
    # (2^-12 of an octave: 128 at 10⁶) lie in one cell, which scores 0, where every point scored
    # −a·n or −(b − a)·n and the pick was uniform over the octave
    pick = _dyadic_stage(gv, None, sizes, e_arr, m0_arr, k_arr, a, b, scales[-1], rng, cells=True)
    last_k = int(k_arr.max()) if G else 1
    rank_error = np.full(G, (2.0 * _max_abs_noise_bound(scales[0], first_k, 0.025)
                             + 2.0 * _max_abs_noise_bound(scales[-1], last_k, 0.025)) / b)
    return np.ldexp(m0_arr + pick, e_arr), w_lo, w_hi, np.ldexp(1.0, e_arr), rank_error


def _grid_cell(m0: np.ndarray, pick: np.ndarray, k: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """The released candidate ``(m0 + pick)·2^e`` of a dyadic grid of ``k`` points, its neighbouring
    candidates (the grid cell, clipped to the grid) and the spacing ``2^e``."""
    return (np.ldexp(m0 + pick, e), np.ldexp(m0 + np.maximum(pick - 1, 0), e),
            np.ldexp(m0 + np.minimum(pick + 1, k - 1), e), np.ldexp(1.0, e))


def _window_groups(windows: tuple[np.ndarray, np.ndarray] | None, G: int) -> np.ndarray:
    """The groups whose released window is usable (public): finite, ``lo <= hi``, both within
    ``±2^64`` (the unbounded search's range)."""
    if windows is None:
        return np.zeros(G, dtype=bool)
    lo, hi = (np.asarray(w, dtype=np.float64) for w in windows)
    if lo.shape != (G,) or hi.shape != (G,):
        raise ValueError(f"windows must be two arrays of shape ({G},)")
    with np.errstate(invalid="ignore"):
        fine = np.isfinite(lo) & np.isfinite(hi) & (lo <= hi) & (np.abs(lo) <= 2.0**64) & (np.abs(hi) <= 2.0**64)
    return fine


def _window_stage(rows: Any, sel: np.ndarray, sizes: np.ndarray, n_hat: np.ndarray,
                  windows: tuple[np.ndarray, np.ndarray], a: int, b: int, epsilon: Any,
                  contribution: Contribution, rng: np.random.Generator, value: np.ndarray,
                  w_lo: np.ndarray, w_hi: np.ndarray, step: np.ndarray, rank_error: np.ndarray) -> None:
    """The groups ``sel`` from one stage at the full ``ε_g`` (the bounded scale) over the dyadic
    grid of their released windows, ``2^bits`` candidates from :func:`grid_bits` (``n̂``); fills
    ``value``, the grid cell ``w_lo``/``w_hi``, ``step`` and the bounded ``rank_error`` (at the
    largest grid of each size class) in place; loops over the grid sizes only."""
    scale = stage_scales(a, b, epsilon, contribution, bounded=True)[0]
    lo, hi = (np.asarray(w, dtype=np.float64)[sel] for w in windows)
    bits_s = grid_bits(n_hat[sel], a, b, epsilon, contribution)
    for bits in np.unique(bits_s).tolist():  # at most GRID_BITS_MAX − GRID_BITS_MIN + 1 sizes
        i = np.flatnonzero(bits_s == bits)
        g = sel[i]
        e, m0, k = _dyadic_windows(lo[i], hi[i], int(bits))
        pick = _dyadic_stage(rows, g, sizes[g], e, m0, k, a, b, scale, rng)
        value[g], w_lo[g], w_hi[g], step[g] = _grid_cell(m0, pick, k, e)
        # the bounded rank_error at the class's largest grid (k varies with each window's width: a
        # union bound over more candidates is still a bound, and no loop over groups)
        rank_error[g] = 2.0 * _max_abs_noise_bound(scale, int(k.max()), 0.05) / b


def _max_abs_noise_bound(scale: Fraction, k: int, beta: float) -> int:
    """The least ``T`` with ``k·P[|Z| > T] <= β`` for ``Z ~ DLap(scale)`` (union bound), so
    ``P[max of k draws |Z| > T] <= β``. ``P[|Z| > T] = 2e^{−(T+1)/s}/(1 + e^{−1/s})``."""
    s = float(scale)
    target = beta / k
    t = max(0, math.ceil(s * math.log(2.0 / (target * (1.0 + math.exp(-1.0 / s)))) - 1.0))
    while t > 0 and 2.0 * math.exp(-t / s) / (1.0 + math.exp(-1.0 / s)) <= target:
        t -= 1  # pragma: no cover - rounding of the closed form
    while 2.0 * math.exp(-(t + 1) / s) / (1.0 + math.exp(-1.0 / s)) > target:
        t += 1  # pragma: no cover
    return t


def _difference_tail(scale: Fraction, m: int) -> float:
    """``P[ν' − ν >= m]`` for ``ν, ν'`` i.i.d. ``DLap(scale)`` and an integer ``m >= 1``.

    With ``p = e^{−1/scale}`` and ``c = (1 − p)/(1 + p)``, ``P[D = d] = c²·p^d·(d + (1 + p²)/(1 − p²))``
    for ``d >= 0`` (the sum over ``ν`` of ``P[ν]·P[ν + d]``, split at ``ν < −d``, ``−d <= ν < 0``,
    ``ν >= 0``); summed from ``d = m``: ``c²·p^m·(m/(1 − p) + p/(1 − p)² + (1 + p²)/((1 − p²)(1 − p)))``."""
    s = float(scale)
    p = math.exp(-1.0 / s)
    om = -math.expm1(-1.0 / s)  # 1 − p, exact-ish for large scales
    c = om / (1.0 + p)
    tail = c * c * math.exp(-m / s) * (m / om + p / (om * om) + (1.0 + p * p) / (om * (1.0 + p) * om))
    return min(1.0, tail)


def rows_needed(q: Any, epsilon: Any, contribution: Contribution, beta: float = FAR_BETA) -> int:
    """The least group size ``N`` at which the unbounded search's stage 1 picks an octave cell
    holding none of the group's rows with probability at most ``beta`` (public; docs/proofs/aggregate_quantile.md §5b).

    A cell with no row has every row on one side: its utility is ``−a·n`` or ``−(b − a)·n``,
    at most ``−min(a, b − a)·n`` (``q = a/b``), while the cell holding the q-quantile scores 0;
    it wins only if its noise beats the true cell's by ``>= min(a, b − a)·n`` (ties go to the
    first cell). With ``K = 211`` cells, a union bound over the other ``K − 1``: the event has
    probability at most ``(K − 1)·P[ν' − ν >= min(a, b − a)·n]`` (:func:`_difference_tail`, the
    stage-1 scale of :func:`stage_scales`). ``N`` is the least ``n`` making that ``<= beta``.
    ``q = 0`` or ``1``: every row is on one side of some cell of utility 0, so ``N = 1``."""
    a, b = rational_q(q)
    gap = min(a, b - a)
    if gap == 0:
        return 1
    scale = stage_scales(a, b, epsilon, contribution, bounded=False)[0]
    others = geometric_grid().size - 1
    lo, hi = 1, 1
    while others * _difference_tail(scale, hi * gap) > beta:
        lo, hi = hi, 2 * hi
    while lo < hi:  # least n with others·tail(n·gap) <= beta (the tail decreases in n)
        mid = (lo + hi) // 2
        if others * _difference_tail(scale, mid * gap) <= beta:
            hi = mid
        else:
            lo = mid + 1
    return hi
