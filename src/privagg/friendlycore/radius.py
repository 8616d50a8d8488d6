"""Private choice of the friendship radius: AboveThreshold over a public geometric grid.

Grid ``r_j = 2^{j/4}``, ``j = −40 … 160`` (2⁻¹⁰ to 2⁴⁰, ratio 2^{1/4} ≈ 1.19). For a dataset
``S`` of ``m`` points and each radius, ``Q(r) = Σ_i p_i(r)`` is the expected BasicFilter core
size (keep probabilities of ``α``). The query is the integer

    g(r) = floor(Q(r) − (1 − γ)·m),   γ = 1/4,

and the release is the first ``r_j`` whose noisy ``g`` reaches a noisy threshold 0
(AboveThreshold, Dwork & Roth 2014, Thm 3.23, with exact discrete Laplace noise: threshold scale
``2Δ/ε``, query scale ``4Δ/ε``), or None (⊥) if none does.

Sensitivity (``docs/proofs/mean.md``). Friendship here is ``dist²(x, y) <= r²`` with one
floating-point squared distance per unordered pair, credited to both points (exactly symmetric;
self counted without evaluation) — the only properties the movement bound of BasicFilter needs.
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

__all__ = ["GAMMA", "GRID_EXPONENTS", "grid_radii", "radius_queries", "select_radius"]

#: Grid ``r_j = 2^{j/4}`` for these ``j`` (public).
GRID_EXPONENTS = np.arange(-40, 161)
#: The target fraction of the subsample in the expected core is ``1 − GAMMA``. (1/4, not 1/10:
#: with a fraction c of far outliers an inlier has at most (1 − c)m friends, so p <= 1 − 2c and
#: Q <= (1 − c)(1 − 2c)m = 0.855m at c = 5%; 1/10 is then met only by radii that befriend them.)
GAMMA = Fraction(1, 4)
_BLOCK = 1024


def grid_radii() -> np.ndarray:
    """The public candidate radii ``2^{j/4}``."""
    return np.exp2(GRID_EXPONENTS / 4.0)


def _pair_bins(x: np.ndarray) -> np.ndarray:
    """``counts[i, b]``: how many other points fall in distance bin ``b`` of point ``i``.

    Bin ``b`` of a pair is the least grid index with ``dist² <= r_b²``, or ``len(grid)`` for
    pairs beyond the largest radius. One value per unordered pair, credited to both points.
    """
    m = x.shape[0]
    k = GRID_EXPONENTS.size
    width = k + 2  # bins 0..k, and k+1 for pairs not counted (j <= i)
    counts = np.zeros(m * width, dtype=np.int64)
    sq = np.einsum("ij,ij->i", x, x)
    for start in range(0, m, _BLOCK):
        stop = min(start + _BLOCK, m)
        d2 = sq[start:stop, None] + sq[None, start:] - 2.0 * (x[start:stop] @ x[start:].T)
        np.maximum(d2, 0.0, out=d2)
        with np.errstate(divide="ignore"):
            level = np.ceil(2.0 * np.log2(d2))  # r_j² = 2^{j/2} >= dist²  ⟺  j >= 2·log2(dist²)
        b = np.clip(level - GRID_EXPONENTS[0], 0, k).astype(np.int64)
        rows = np.arange(stop - start)[:, None]
        b[np.arange(b.shape[1])[None, :] <= rows] = k + 1  # keep each unordered pair i < j once
        i = np.arange(start, stop)[:, None] * width
        j = np.arange(start, m)[None, :] * width
        counts += np.bincount((i + b).ravel(), minlength=m * width)
        counts += np.bincount((j + b).ravel(), minlength=m * width)
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


def select_radius(x: np.ndarray, *, epsilon: Fraction, alpha: Any = 0.0, rng: np.random.Generator) -> float | None:
    """AboveThreshold over the grid: ε-DP under add/remove of one row of ``x`` (module docstring).

    Returns the chosen radius, or None when no grid radius passes (⊥).
    """
    delta_q = math.ceil(movement_bound(alpha)) + 1
    queries = np.asarray(radius_queries(x, alpha=alpha), dtype=np.int64)
    threshold = int(discrete_laplace(Fraction(2 * delta_q) / epsilon, rng=rng))
    noise = discrete_laplace(Fraction(4 * delta_q) / epsilon, size=queries.size, rng=rng)
    above = np.flatnonzero(queries + noise >= threshold)
    if above.size == 0:
        return None
    return float(grid_radii()[above[0]])
