"""The radius-selection bins: exact half-octave levels and the screened pair binning.

Deterministic known-answer tests (no false failures): ``grid_levels`` against exact rational
comparisons ``v² <= 2^j``, and ``_pair_bins`` against the direct formula
``squared_distance`` evaluated on every pair (including pairs placed exactly on grid
boundaries, and data far from the origin where the product expansion is inexact). The
negative control removes the screening margin and must disagree with the direct formula.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.friendlycore.radius as R
from privagg.friendlycore.predicates import squared_distance

SEED = 20261130


def exact_level(v: float) -> int:
    """Least j with v <= 2^{j/2}, i.e. v² <= 2^j, decided on rationals."""
    f = Fraction(v)
    j = math.floor(2 * math.log2(v)) - 3
    while not f * f <= Fraction(2) ** j:
        j += 1
    return j


def test_grid_levels_exact_at_and_around_every_boundary():
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    b = np.exp2(np.arange(-200, 200) / 2.0)
    v = np.concatenate([np.exp2(rng.uniform(-300, 300, 5000)), b, np.nextafter(b, 0.0),
                        np.nextafter(b, np.inf), [1.0, 2.0, 2.0**-1022, np.finfo(float).max]])
    got = R.grid_levels(v)
    want = np.array([exact_level(float(x)) for x in v])
    assert np.array_equal(got, want), f"seed={SEED}"
    # zero and subnormals fall below every grid radius (bin 0)
    assert (R.grid_levels(np.array([0.0, -0.0, 5e-324, 1e-310])) <= R.GRID_EXPONENTS[0]).all()


def direct_bins(x: np.ndarray) -> np.ndarray:
    m = x.shape[0]
    k = R.GRID_EXPONENTS.size
    out = np.zeros((m, k + 1), dtype=np.int64)
    i, j = np.triu_indices(m, 1)
    sq = squared_distance(x[i], x[j])
    lev = R.grid_levels(sq)  # validated against exact rationals above
    b = np.clip(lev - R.GRID_EXPONENTS[0], 0, k)
    np.add.at(out, (i, b), 1)
    np.add.at(out, (j, b), 1)
    return out


def lattice_with_far_point(offset: float) -> np.ndarray:
    """Points of {0..4}³ (+ offset): squared distances 1, 2, 4, 8, 16, 32 sit exactly on grid
    boundaries 2^{j/2}; first a point 10⁶ away, so the rows shifted by x[0] are large and the
    product expansion ``‖a‖² + ‖b‖² − 2a·b`` is inexact at those boundaries."""
    g = np.stack(np.meshgrid(*[np.arange(5.0)] * 3, indexing="ij"), -1).reshape(-1, 3)
    return np.concatenate([[[1e6 + 0.1, 0.3, 0.7]], g]) + offset


@pytest.mark.parametrize("offset", [0.0, 1e4, -3e9, 1e15])
def test_pair_bins_equal_direct_formula(offset):
    """Random pairs and pairs exactly on boundaries, near and far from the origin, several
    blocks (m > 512) and both thread counts."""
    rng = np.random.default_rng(SEED)
    x = np.concatenate([lattice_with_far_point(offset), rng.normal(size=(420, 3)) * 4.0 + offset])
    want = direct_bins(x)
    for threads in (1, 2):
        assert np.array_equal(R._pair_bins(x, threads=threads), want), f"seed={SEED} offset={offset}"


def test_negative_control_without_margin(monkeypatch):
    """With the screening margin set to 0 the product expansion bins some boundary pairs
    differently from the direct formula: the equality test above would catch it."""
    x = lattice_with_far_point(0.0)
    assert np.array_equal(R._pair_bins(x, threads=1), direct_bins(x))
    monkeypatch.setattr(R, "_U", 0.0)
    assert not np.array_equal(R._pair_bins(x, threads=1), direct_bins(x))
