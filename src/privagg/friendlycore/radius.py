"""Private choice of the friendship radius: AboveThreshold over a public geometric grid.

Grid ``r_j = 2^{j/4}``, ``j = −40 … 160`` (2⁻¹⁰ to 2⁴⁰, ratio 2^{1/4} ≈ 1.19). For a dataset
``S`` of ``m`` points and each radius, ``Q(r) = Σ_i p_i(r)`` is the expected BasicFilter core
size (keep probabilities of ``α``). The query is the integer

    g(r) = floor(Q(r) − (1 − γ)·m),   γ = 1/4,

and the release is the first ``r_j`` whose noisy ``g`` reaches a noisy threshold 0
(AboveThreshold, Dwork & Roth 2014, Thm 3.23, with exact discrete Laplace noise: threshold scale
``2Δ/ε``, query scale ``4Δ/ε``), or None (⊥) if none does.

Sensitivity (``docs/proofs/mean.md`` §4). Friendship here is ``sqdist(x, y) <= r²`` with the
direct formula's squared distance (a function of the pair alone), credited to both points
(exactly symmetric; self counted without evaluation) — the only properties the movement bound of
BasicFilter needs.
Adding a point moves ``Q`` by at most ``L = 2(1 − α)/(1 − 2α) + α`` and ``(1 − γ)m`` by at most
1, so ``|g − g'| < L + 2``, i.e. ``|g − g'| <= Δ = ceil(L) + 1`` (integers).
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Any

import numpy as np

from ..noise.samplers import discrete_laplace
from .conversion import movement_bound
from .filter import alpha_fraction
from .kernel import _map, _shell_blocks
from .predicates import squared_distance

__all__ = ["C_RADIUS", "GAMMA", "GRID_EXPONENTS", "M_RADIUS_MIN", "above_threshold", "grid_levels",
           "grid_radii", "radius_queries", "radius_rate", "radius_sample_size", "radius_subsample", "select_radius"]

#: Grid ``r_j = 2^{j/4}`` for these ``j`` (public).
GRID_EXPONENTS = np.arange(-40, 161)
#: The target fraction of the subsample in the expected core is ``1 − GAMMA``. (1/4, not 1/10:
#: with a fraction c of far outliers an inlier has at most (1 − c)m friends, so p <= 1 − 2c and
#: Q <= (1 − c)(1 − 2c)m = 0.855m at c = 5%; 1/10 is then met only by radii that befriend them.)
GAMMA = Fraction(1, 4)
_BLOCK = 512
#: Rows of the radius step (:func:`radius_sample_size`): ``max(M_RADIUS_MIN, ceil(C_RADIUS·Δ/ε))``.
#: Below the data's scale every query is ``g = −(1 − γ)m`` (each point is only its own friend,
#: p = 0), and AboveThreshold stops there only if ``ν − T̃ >= (1 − γ)m`` (``ν ~ DLap(4Δ/ε)``,
#: ``T̃ ~ DLap(2Δ/ε)``), which has probability ``<= e^{−(1 − γ)mε/(4Δ)}``; over the 201 radii
#: the premature stop has probability ``<= β = 10⁻⁶`` once ``m >= (16/3)·ln(201/β)·Δ/ε
#: = 102·Δ/ε``. ``C_RADIUS = 128`` is that times 1.25, so that the (binomial) size of the sample
#: may fall 20 % below its mean (probability ``< e^{−0.02·M_RADIUS_MIN} = e^{−40}``).
C_RADIUS = 128
#: Floor of the radius step's expected size (the spread of the core fraction it measures,
#: about ``1/√m``, stays ≲ 2 %).
M_RADIUS_MIN = 2000
#: floor((√2 − 1)·2^52): a float ``2^E·(1 + F/2^52)`` is ``<= 2^{E + 1/2}`` iff ``F <= _SQRT2_F``.
_SQRT2_F = math.isqrt(2**105) - 2**52
_MANTISSA = (1 << 52) - 1
_U = 2.0**-53


def grid_radii() -> np.ndarray:
    """The public candidate radii ``2^{j/4}``."""
    return np.exp2(GRID_EXPONENTS / 4.0)


def grid_levels(v: np.ndarray) -> np.ndarray:
    """``ceil(2·log2 v)`` for floats ``v >= 0``, exactly, from the bits (int64; very negative at 0).

    A float ``v = 2^E·(1 + F/2^52) > 0`` has level ``2E`` if ``F = 0``, ``2E + 1`` if its mantissa
    is at most ``√2`` (``F <= floor((√2 − 1)·2^52)``: exact, √2 is irrational), else ``2E + 2``;
    so ``level(v) <= j`` iff ``v <= 2^{j/2} = r_j²`` (exact real comparison, no log rounding).
    With ``t = bits(v) − 1`` the three cases are ``2·(t >> 52) − 2045 + [t & (2^52−1) >= floor((√2 − 1)·2^52)]``.
    """
    t = np.abs(v).view(np.int64) - 1
    level = (t >> 52) * 2 - 2045
    level += (t & _MANTISSA) >= _SQRT2_F
    return level


def _upper_edges() -> np.ndarray:
    """``T[b]``: the largest float ``<= r_b² = 2^{j_b/2}`` for every bin ``b < len(grid)``, and
    ``+inf`` for the last bin, so a float ``v >= 0`` has bin ``<= b`` iff ``v <= T[b]``. Even
    ``j``: the power of two itself; odd ``j = 2q + 1``: ``floor(√2·2⁵²)·2^{q−52}`` (exact: √2 is
    irrational, and ``floor(√2·2⁵²) = isqrt(2¹⁰⁵)`` has 53 bits)."""
    out = [math.ldexp(1.0, j // 2) if j % 2 == 0 else math.ldexp(float(math.isqrt(2**105)), (j - 1) // 2 - 52)
           for j in GRID_EXPONENTS.tolist()]
    return np.array(out + [math.inf])


_UPPER = _upper_edges()
_TINY = 5e-324  # the least positive float: below every grid radius (bin 0)


def _bins_inplace(v: np.ndarray) -> np.ndarray:
    """The grid bin ``clip(grid_levels(v) − j_0, 0, len(grid))`` of floats ``v >= 2⁻¹⁰⁷⁴`` (or
    ``+inf``), computed in place on ``v``'s bits (``v`` is overwritten; returned as its int64
    view). The same bit formula as :func:`grid_levels` (``v > 0``, so no ``abs``)."""
    t = v.view(np.int64)
    t -= 1
    frac_ok = (t & _MANTISSA) >= _SQRT2_F
    t >>= 52
    t *= 2
    t += frac_ok
    t -= 2045 + int(GRID_EXPONENTS[0])
    np.clip(t, 0, GRID_EXPONENTS.size, out=t)
    return t


def _pair_bins(x: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``counts[i, b]``: how many other points fall in distance bin ``b`` of point ``i``.

    Bin ``b`` of a pair is the least grid index with ``sqdist(x, y) <= r_b²`` (``sqdist`` the direct
    formula :func:`~privagg.friendlycore.predicates.squared_distance`, a function of the pair
    alone), or ``len(grid)`` beyond the largest radius; one value per unordered pair, credited to
    both points. The rows are cut into the kernel's shells at the largest grid radius
    (:func:`~privagg.friendlycore.kernel._shell_blocks`): block pairs farther apart than it
    are credited to bin ``len(grid)`` unseen, so a far row costs no pair work. The other block
    pairs use blocked matrix products on rows shifted by a local anchor (the first row of the
    pair) and the proven margin of the kernel's screening (``docs/proofs/mean.md`` §4): with
    ``e = fl(s_i + s_j) − 2G_ij`` and ``μ = c·fl(s_i + s_j)`` the direct value lies in
    ``[fl(e − μ), fl(e + μ)]``; the pair gets the bin ``b`` of the lower end unless the upper end
    exceeds the bin's upper edge (``fl(e + μ) > T[b]``, :func:`_upper_edges`), and then it is
    recomputed with the direct formula itself; a block pair outside the proof's range (shifted
    ``s > 2⁹⁰⁰``) is binned directly. So every pair gets exactly the bin of the direct formula,
    whatever the blocking, the BLAS or the thread count (``None``: one per CPU). The direct formula is symmetric
    (``fl(a − b)² = fl(b − a)²``), so a diagonal block's bin matrix is symmetric and its row sums
    credit both ends of each pair.
    """
    m, d = x.shape
    k = GRID_EXPONENTS.size
    width = k + 1
    if m == 0:
        return np.zeros((0, width), dtype=np.int64)
    order, xs, bounds, last = _shell_blocks(x, float(grid_radii()[-1]), _BLOCK)
    c = 16.0 * (d + 4) * _U
    offset = -int(GRID_EXPONENTS[0])

    def bins_of(sq: np.ndarray) -> np.ndarray:
        return np.clip(grid_levels(sq) + offset, 0, k)

    def work(bi: int, bj: int) -> tuple:
        i0, i1, j0, j1 = bounds[bi], bounds[bi + 1], bounds[bj], bounds[bj + 1]
        ni, nj, same = i1 - i0, j1 - j0, bi == bj
        anchor = xs[i0]
        yi = xs[i0:i1] - anchor
        yj = yi if same else xs[j0:j1] - anchor
        si = np.einsum("ij,ij->i", yi, yi)
        sj = si if same else np.einsum("ij,ij->i", yj, yj)
        if not max(si.max(), sj.max()) <= 2.0**900:  # outside the proof's range: directly
            b = bins_of(squared_distance(xs[i0:i1, None, :], xs[None, j0:j1, :]))
        else:
            e = yi @ yj.T
            e *= -2.0
            s = np.add.outer(si, sj)
            e += s  # fl(s_i + s_j) − 2G, the kernel's expansion
            s *= c  # the margin μ
            lo = e - s
            s += e  # fl(e + μ)
            np.maximum(lo, _TINY, out=lo)
            b = _bins_inplace(lo)  # bin of max(fl(e − μ), 0)
            band = s > _UPPER[b]
            if band.any():
                pi, pj = np.nonzero(band)
                b[pi, pj] = bins_of(squared_distance(xs[pi + i0], xs[pj + j0]))
        if same:
            b.flat[:: ni + 1] = width  # self pairs are not counted here
        else:
            cells = b + np.arange(nj) * (width + 1)
            cols = np.bincount(cells.ravel(), minlength=nj * (width + 1)).reshape(nj, width + 1)
        b += (np.arange(ni) * (width + 1))[:, None]
        rows = np.bincount(b.ravel(), minlength=ni * (width + 1)).reshape(ni, width + 1)
        return i0, i1, j0, j1, rows, None if same else cols

    nb = bounds.size - 1
    tasks = [(bi, bj) for bi in range(nb) for bj in range(bi, int(last[bi]) + 1)]
    counts = np.zeros((m, width + 1), dtype=np.int64)
    threads = (os.cpu_count() or 1) if threads is None else threads  # the counts do not depend on it
    for i0, i1, j0, j1, rows, cols in _map(work, tasks, threads):
        counts[i0:i1] += rows
        if cols is not None:
            counts[j0:j1] += cols
    # Skipped block pairs (I, J > last[I]): beyond the largest grid radius, bin k.
    sizes = np.diff(bounds)
    after = m - bounds[last + 1]  # rows of the blocks skipped by block I
    before = np.zeros(nb + 1, dtype=np.int64)  # rows of earlier blocks that skip block J
    np.add.at(before, last + 1, sizes)
    before = np.cumsum(before)[:nb]
    counts[:, k] += np.repeat(after + before, sizes)
    out = np.empty((m, width), dtype=np.int64)
    out[order] = counts[:, :width]
    return out


def radius_queries(x: np.ndarray, *, alpha: Any = 0.0) -> list[int]:
    """The exact integer queries ``g(r_j)`` for every grid radius (not private on their own)."""
    m = x.shape[0]
    k = GRID_EXPONENTS.size
    if m == 0:
        return [0] * k
    frac = alpha_fraction(alpha, "select_radius")
    a, b = frac.numerator, frac.denominator
    with np.errstate(all="ignore"):
        num = np.cumsum(_pair_bins(x), axis=1, out=None)  # c_i(r_j) − 1 (self not counted)
    den = (b - 2 * a) * m
    # p_i = num/den (BasicFilter): num = clip((2c_i − m)·b, 0, den), c_i = 1 + cumsum, in place
    num *= 2 * b
    num += (2 - m) * b
    np.maximum(num, 0, out=num)
    np.minimum(num, den, out=num)
    sums = num.sum(axis=0)[:k]
    target = (1 - GAMMA) * m
    return [math.floor(Fraction(int(s), den) - target) for s in sums]


def above_threshold(queries: np.ndarray, *, sensitivity: int, epsilon: Fraction,
                    rng: np.random.Generator, trials: int | None = None) -> np.ndarray | int:
    """AboveThreshold (Dwork & Roth 2014, Thm 3.23) with exact discrete Laplace noise.

    The index of the first query with ``q_j + Lap(4Δ/ε) >= Lap(2Δ/ε)`` (one noisy threshold per
    run), or ``len(queries)`` when none passes: ε-DP when every query moves by at most
    ``Δ = sensitivity`` between neighbours. ``trials`` runs it that many times independently on
    the same queries (for audits) and returns an array of indices.
    """
    q = np.asarray(queries, dtype=np.int64)
    shape = () if trials is None else (int(trials),)
    threshold = discrete_laplace(Fraction(2 * sensitivity) / epsilon, size=shape, rng=rng)
    noise = discrete_laplace(Fraction(4 * sensitivity) / epsilon, size=shape + q.shape, rng=rng)
    above = (q + noise) >= np.asarray(threshold)[..., None]
    first = np.where(above.any(axis=-1), np.argmax(above, axis=-1), q.size)
    return int(first) if trials is None else first


def radius_sample_size(epsilon: Any, alpha: Any = 0.0) -> int:
    """``M_RADIUS = max(M_RADIUS_MIN, ceil(C_RADIUS·Δ/ε))``, ``Δ = ceil(L(α)) + 1``: the expected
    number of rows AboveThreshold needs so that a premature stop (below the data's scale) has
    probability ``<= 10⁻⁶`` (:data:`C_RADIUS`). Public: a function of ε and α alone."""
    delta_q = math.ceil(movement_bound(alpha)) + 1
    return max(M_RADIUS_MIN, math.ceil(C_RADIUS * delta_q / Fraction(epsilon)))


def radius_rate(epsilon: Any, alpha: Any, m_pub: int) -> float:
    """The public rate ``min(1, M_RADIUS/m_pub)`` of the radius step's Poisson subsample of a
    sample whose expected size is ``m_pub`` (``min(n̂, m_locate)`` in ``private_mean``)."""
    m = radius_sample_size(epsilon, alpha)
    return 1.0 if m >= m_pub else m / m_pub


def radius_subsample(x: np.ndarray, rate: float, gen: np.random.Generator) -> np.ndarray:
    """Each row of ``x`` independently with the public probability ``rate`` (coins
    ``gen.random() < rate``, independent of the values); ``x`` itself, drawing nothing, when
    ``rate >= 1``. Adding a row to ``x`` adds at most that row to the result (same coins for the
    others), so an ε-DP step on the result is ε-DP on ``x`` (``docs/proofs/mean.md`` §4)."""
    return x if rate >= 1.0 else x[gen.random(x.shape[0]) < rate]


def select_radius(x: np.ndarray, *, epsilon: Fraction, alpha: Any = 0.0, rng: np.random.Generator) -> float | None:
    """AboveThreshold over the grid: ε-DP under add/remove of one row of ``x`` (module docstring).

    Returns the chosen radius, or None when no grid radius passes (⊥).
    """
    delta_q = math.ceil(movement_bound(alpha)) + 1
    j = above_threshold(np.asarray(radius_queries(x, alpha=alpha)), sensitivity=delta_q,
                        epsilon=epsilon, rng=rng)
    return None if j == GRID_EXPONENTS.size else float(grid_radii()[j])
