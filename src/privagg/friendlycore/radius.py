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
from fractions import Fraction
from typing import Any

import numpy as np

from ..noise.samplers import discrete_laplace
from .conversion import movement_bound
from .filter import alpha_fraction
from .kernel import _map
from .predicates import squared_distance

__all__ = ["GAMMA", "GRID_EXPONENTS", "above_threshold", "grid_levels", "grid_radii", "radius_queries",
           "select_radius"]

#: Grid ``r_j = 2^{j/4}`` for these ``j`` (public).
GRID_EXPONENTS = np.arange(-40, 161)
#: The target fraction of the subsample in the expected core is ``1 − GAMMA``. (1/4, not 1/10:
#: with a fraction c of far outliers an inlier has at most (1 − c)m friends, so p <= 1 − 2c and
#: Q <= (1 − c)(1 − 2c)m = 0.855m at c = 5%; 1/10 is then met only by radii that befriend them.)
GAMMA = Fraction(1, 4)
_BLOCK = 512
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


def _pair_bins(x: np.ndarray, threads: int = 2) -> np.ndarray:
    """``counts[i, b]``: how many other points fall in distance bin ``b`` of point ``i``.

    Bin ``b`` of a pair is the least grid index with ``sqdist(x, y) <= r_b²`` (``sqdist`` the direct
    formula :func:`~privagg.friendlycore.predicates.squared_distance`, a function of the pair
    alone), or ``len(grid)`` beyond the largest radius; one value per unordered pair, credited to
    both points. Computed with blocked matrix products on rows shifted by ``x[0]`` and the proven
    margin of the kernel's screening (``docs/proofs/mean.md`` §4): a pair whose margin interval
    straddles a grid boundary is recomputed with the direct formula itself.
    """
    m, d = x.shape
    k = GRID_EXPONENTS.size
    width = k + 2  # bins 0..k, and k+1 for pairs not counted (j <= i)
    y = x - x[0]
    s = np.einsum("ij,ij->i", y, y)
    if m and s.max() > 2.0**900:  # outside the screening proof's range: every pair directly
        y, s = None, None
    c = 16.0 * (d + 4) * _U
    offset = -int(GRID_EXPONENTS[0])

    def bins_of(sq: np.ndarray) -> np.ndarray:
        return np.clip(grid_levels(sq) + offset, 0, k)

    def work(start: int) -> np.ndarray:
        stop = min(start + _BLOCK, m)
        if y is None:
            b = bins_of(squared_distance(x[start:stop, None, :], x[None, start:, :]))
        else:
            e = s[start:stop, None] + s[None, start:] - 2.0 * (y[start:stop] @ y[start:].T)
            margin = c * (s[start:stop, None] + s[None, start:])
            b = bins_of(np.maximum(e - margin, 0.0))
            band = b != bins_of(e + margin)
            if band.any():
                bi, bj = np.nonzero(band)
                b[bi, bj] = bins_of(squared_distance(x[bi + start], x[bj + start]))
        diag = b[:, : stop - start]
        diag[np.tril_indices(stop - start)] = k + 1  # keep each unordered pair i < j once
        counts = np.bincount((np.arange(start, stop)[:, None] * width + b).ravel(),
                             minlength=m * width)
        counts += np.bincount((np.arange(start, m)[None, :] * width + b).ravel(), minlength=m * width)
        return counts

    counts = np.zeros(m * width, dtype=np.int64)
    for part in _map(work, [(start,) for start in range(0, m, _BLOCK)], threads):
        counts += part
    return counts.reshape(m, width)[:, : k + 1]


def radius_queries(x: np.ndarray, *, alpha: Any = 0.0) -> list[int]:
    """The exact integer queries ``g(r_j)`` for every grid radius (not private on their own)."""
    m = x.shape[0]
    k = GRID_EXPONENTS.size
    if m == 0:
        return [0] * k
    frac = alpha_fraction(alpha, "select_radius")
    a, b = frac.numerator, frac.denominator
    friends = 1 + np.cumsum(_pair_bins(x), axis=1)[:, :k]  # c_i(r_j), self included
    den = (b - 2 * a) * m
    num = np.clip((2 * friends - m) * b, 0, den)  # p_i = num/den (BasicFilter)
    sums = num.sum(axis=0)
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


def select_radius(x: np.ndarray, *, epsilon: Fraction, alpha: Any = 0.0, rng: np.random.Generator) -> float | None:
    """AboveThreshold over the grid: ε-DP under add/remove of one row of ``x`` (module docstring).

    Returns the chosen radius, or None when no grid radius passes (⊥).
    """
    delta_q = math.ceil(movement_bound(alpha)) + 1
    j = above_threshold(np.asarray(radius_queries(x, alpha=alpha)), sensitivity=delta_q,
                        epsilon=epsilon, rng=rng)
    return None if j == GRID_EXPONENTS.size else float(grid_radii()[j])
