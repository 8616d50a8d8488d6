"""friend_counts: every path equals a naive reference of the documented decision.

The reference decides each ordered pair (i, j) separately with the direct formula
``squared_distance(x_i, x_j) <= fl(r*r)`` (no blocking, no screening), so it is independent of
the kernels' block structure, screening margin and tree.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privagg
from privagg.errors import ParameterError
from privagg.friendlycore import ball, friend_counts, kernel
from privagg.friendlycore.predicates import squared_distance

SEED = 20260430
METHODS = ("gemm", "tree", "generic")


def naive_counts(x: np.ndarray, r: float) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    r2 = r * r
    return np.array(
        [(squared_distance(x[i][None, :], x) <= r2).sum() for i in range(len(x))]
    )


def exact_counts(x: np.ndarray, r: float) -> np.ndarray:
    """Exact real-arithmetic decision (valid where the data make float sums exact)."""
    from fractions import Fraction

    xf = [[Fraction(float(v)) for v in row] for row in x]
    rr = Fraction(r) ** 2
    out = []
    for a in xf:
        out.append(sum(sum((p - q) ** 2 for p, q in zip(a, b)) <= rr for b in xf))
    return np.array(out)


@pytest.mark.parametrize(
    "n, d, r",
    [(1000, 2, 0.3), (777, 1, 0.1), (1500, 3, 0.6), (900, 8, 2.0), (600, 50, 9.5)],
)
def test_all_paths_equal_naive_on_random_data(n, d, r):
    print(f"seed={SEED}")
    rng = np.random.default_rng([SEED, n, d])
    x = rng.normal(size=(n, d))
    ref = naive_counts(x, r)
    assert ref.min() < ref.max(), "degenerate test data"
    for method in METHODS:
        for block in (64, 333, 2048):
            got = friend_counts(x, ball(r), method=method, block_size=block)
            assert got.dtype == np.int64
            assert np.array_equal(got, ref), (method, block, f"seed={SEED}")


def test_block_size_and_threads_do_not_change_counts():
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(4999, 4))  # n not a multiple of any block size used
    ref = friend_counts(x, ball(1.0), method="gemm", block_size=4096, n_threads=1)
    got = friend_counts(x[:120], ball(1.0), method="gemm", block_size=1, n_threads=2)
    assert np.array_equal(got, naive_counts(x[:120], 1.0))
    for block in (97, 1024, 4096):
        for threads in (1, 2, 3):
            got = friend_counts(
                x, ball(1.0), method="gemm", block_size=block, n_threads=threads
            )
            assert np.array_equal(got, ref), (block, threads)
    for threads in (1, 2):
        assert np.array_equal(
            friend_counts(x, ball(1.0), method="tree", n_threads=threads), ref
        )


def _boundary_points(rng: np.random.Generator, n: int, d: int, offset: float, r: float):
    """Pairs at distance r in exact arithmetic (integer 3-4-5 steps) far from the origin,
    plus points at r(1 ± a few ulps) along random directions."""
    base = offset + rng.integers(0, 3, size=(n, d)).astype(float)
    steps = np.zeros((n, d))
    cols = rng.integers(0, d - 1, size=n) if d > 1 else np.zeros(n, dtype=int)
    if d > 1:
        steps[np.arange(n), cols] = 3.0 * r / 5.0
        steps[np.arange(n), cols + 1] = 4.0 * r / 5.0
    else:
        steps[:, 0] = r
    u = rng.normal(size=(n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    wobble = base + u * r * (1.0 + rng.integers(-4, 5, size=(n, 1)) * 2.0**-52)
    return np.concatenate([base, base + steps, wobble])


@pytest.mark.parametrize(
    "d, offset", [(1, 1e6), (2, 0.0), (2, 3e7), (5, 1e5), (40, 1e4)]
)
@pytest.mark.parametrize("far_first", [False, True])
def test_pairs_exactly_at_radius(d, offset, far_first):
    """``far_first``: a first row 10⁶ away, so the rows the products see (shifted by the first
    row) are large with full mantissas and the expansion is inexact at the boundary pairs."""
    rng = np.random.default_rng([SEED, d])
    r = 5.0
    x = _far_first(_boundary_points(rng, 400, d, offset, r)) if far_first else _boundary_points(
        rng, 400, d, offset, r)
    ref = naive_counts(x, r)
    for method in METHODS:
        assert np.array_equal(
            friend_counts(x, ball(r), method=method, block_size=256), ref
        ), method


def test_boundary_decision_is_exact_where_floats_are_exact():
    # Small integers: every float operation of the direct formula is exact.
    rng = np.random.default_rng(SEED)
    x = rng.integers(-4, 5, size=(150, 3)).astype(float)
    assert np.array_equal(naive_counts(x, 3.0), exact_counts(x, 3.0))
    for method in METHODS:
        assert np.array_equal(
            friend_counts(x, ball(3.0), method=method), exact_counts(x, 3.0)
        )


def _far_first(x: np.ndarray) -> np.ndarray:
    far = x[:1] + 0.1
    far[0, 0] += 1e6
    return np.concatenate([far, x])


def test_negative_control_without_screening_margin(monkeypatch):
    """The screening margin matters: with it set to 0 the plain expansion misjudges pairs near r
    when the (shifted) rows are far from the origin, and the test above (same data) would fail."""
    rng = np.random.default_rng([SEED, 2])
    x = _far_first(_boundary_points(rng, 400, 2, 3e7, 5.0))
    ref = naive_counts(x, 5.0)
    monkeypatch.setattr(kernel, "_MARGIN", 0.0)
    broken = friend_counts(x, ball(5.0), method="gemm", block_size=256)
    assert not np.array_equal(broken, ref)


def test_duplicates_and_constant_data():
    rng = np.random.default_rng(SEED)
    x = np.repeat(rng.normal(size=(30, 3)), 40, axis=0)
    ref = naive_counts(x, 0.5)
    for method in METHODS:
        assert np.array_equal(
            friend_counts(x, ball(0.5), method=method, block_size=100), ref
        )
    same = np.full((5000, 2), 7.25)
    for method in ("gemm", "tree"):
        assert np.array_equal(
            friend_counts(same, ball(1e-3), method=method), np.full(5000, 5000)
        )


def test_high_dimension_d1000():
    """Reference: scipy's cdist, valid because no pair lies within 1e-9 (relative) of r."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(2500, 1000))
    r = float(np.sqrt(2 * 1000) * 0.97)
    sq = cdist(x, x, "sqeuclidean")
    assert np.abs(sq / (r * r) - 1.0).min() > 1e-9
    ref = (sq <= r * r).sum(axis=1)
    assert 1 < ref.mean() < 2499
    assert np.array_equal(friend_counts(x, ball(r), block_size=1024), ref)


def test_large_n_gemm_and_tree_agree():
    """n = 20 000 (the size where a single large product crashed OpenBLAS here)."""
    rng = np.random.default_rng(SEED)
    centers = rng.uniform(0, 20, size=(8, 3))
    x = centers[rng.integers(0, 8, size=20_000)] + rng.normal(size=(20_000, 3))
    gemm = friend_counts(x, ball(1.5), method="gemm")
    tree = friend_counts(x, ball(1.5), method="tree")
    assert np.array_equal(gemm, tree)
    sample = rng.choice(20_000, size=200, replace=False)
    for i in sample:
        assert gemm[i] == (squared_distance(x[i][None, :], x) <= 1.5 * 1.5).sum()


def test_custom_callable_counts_each_unordered_pair_once():
    calls = []

    def f(a, b):
        calls.append(1)
        return abs(float(a[0]) - float(b[0])) <= 1.0

    x = np.array([[0.0], [0.5], [1.5], [3.0], [3.0]])
    assert friend_counts(x, f).tolist() == [2, 3, 2, 2, 2]
    assert len(calls) == 5 * 4 // 2
    rng = np.random.default_rng(SEED)
    y = rng.normal(size=(300, 2))
    assert np.array_equal(
        friend_counts(y, lambda a, b: bool(np.sum((a - b) ** 2) <= 1.0)),
        friend_counts(y, ball(1.0)),
    )


def test_public_names_and_validation():
    assert privagg.friend_counts is friend_counts
    assert privagg.predicates.ball(2.0) == ball(2.0)
    assert friend_counts(np.zeros((0, 3)), ball(1.0)).shape == (0,)
    with pytest.raises(ParameterError, match="'points'"):
        friend_counts(np.zeros(5), ball(1.0))
    with pytest.raises(ParameterError, match="'radius'"):
        ball(-1.0)
    with pytest.raises(ParameterError, match="'block_size'"):
        friend_counts(np.zeros((3, 2)), ball(1.0), block_size=5000)
    with pytest.raises(ParameterError, match="'method'"):
        friend_counts(np.zeros((3, 2)), lambda a, b: True, method="gemm")
    with pytest.raises(ParameterError, match="'predicate'"):
        friend_counts(np.zeros((3, 2)), 3.0)


@settings(max_examples=60, deadline=None)
@given(
    data=st.integers(1, 120).flatmap(
        lambda n: st.tuples(
            st.integers(1, 6).flatmap(
                lambda d: st.lists(
                    st.lists(st.integers(-6, 6), min_size=d, max_size=d),
                    min_size=n,
                    max_size=n,
                )
            ),
            st.sampled_from([0.37, 1.0, 2.0, 5.0]),
            st.sampled_from([0.5, 1.0, 1e6 + 0.25]),
        )
    )
)
def test_property_paths_agree_on_small_grids(data):
    """Grid data (many exact ties at distance r) scaled and shifted far from the origin."""
    rows, r, scale = data
    x = np.array(rows, dtype=float) * 0.5 + scale
    ref = naive_counts(x, r)
    for method in METHODS:
        assert np.array_equal(
            friend_counts(x, ball(r), method=method, block_size=17), ref
        )


@pytest.mark.parametrize("method", ["gemm", "tree", "generic"])
def test_non_finite_rows_are_friends_of_each_other_only(method):
    """Non-finite rows are data: no error; they form one class ⊥ (predicates module)."""
    pts = np.array([[0.0, 0.0], [np.nan, 1.0], [0.5, 0.0], [np.inf, 0.0], [9.0, 9.0], [-np.inf, np.nan]])
    expected = [2, 3, 2, 3, 1, 3]
    if method == "generic":
        pred = ball(1.0)
        got = friend_counts(pts, lambda x, y: bool(pred.pairs(x[None], y[None])[0]))
    else:
        got = friend_counts(pts, ball(1.0), method=method)
    assert got.tolist() == expected
    # the same counts as the finite rows alone, plus the size of the ⊥ class
    finite = np.isfinite(pts).all(axis=1)
    assert got[finite].tolist() == friend_counts(pts[finite], ball(1.0)).tolist()
