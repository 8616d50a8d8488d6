"""BasicFilter: P1 (complete), P2 (friendly union), P3 (stability) and the movement bound L.

Probabilities are checked exactly with fractions against the formula written independently
here: p = clip((c − n/2) / ((1/2 − α) n), 0, 1).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import privagg
from privagg.errors import ParameterError
from privagg.friendlycore import ball, basic_filter, friend_counts, keep_probabilities
from privagg.friendlycore.filter import alpha_fraction
from privagg.testing.stats import binomial_two_sided_p

SEED = 7_2026
ALPHAS = (0.0, 0.1, Fraction(1, 4), 0.4, 0.49)


def p_exact(c: int, n: int, alpha: Fraction) -> Fraction:
    v = (Fraction(c) - Fraction(n, 2)) / ((Fraction(1, 2) - alpha) * n)
    return min(Fraction(1), max(Fraction(0), v))


def probs(points, predicate, alpha) -> list[Fraction]:
    num, den = keep_probabilities(friend_counts(points, predicate), alpha=alpha)
    return [Fraction(int(a), int(b)) for a, b in zip(num, den)]


class Graph:
    """A custom predicate from a symmetric 0/1 matrix over item ids (items are [[id]])."""

    def __init__(self, adj: np.ndarray) -> None:
        self.adj = adj

    def __call__(self, a, b) -> bool:
        return bool(self.adj[int(a[0]), int(b[0])])


def random_graph(rng, size: int, density: float) -> np.ndarray:
    upper = np.triu(rng.random((size, size)) < density, 1)
    adj = upper | upper.T
    np.fill_diagonal(adj, True)
    return adj


# --------------------------------------------------------------------------- exact formula
@pytest.mark.parametrize("alpha", ALPHAS)
def test_keep_probabilities_match_formula(alpha):
    a = alpha_fraction(alpha)
    assert a <= Fraction(alpha) and Fraction(alpha) - a < Fraction(1, 2**20)
    for n in (1, 2, 3, 10, 11, 1000):
        counts = np.resize(np.unique(np.linspace(1, n, 60).astype(np.int64)), n)
        num, den = keep_probabilities(counts, alpha=alpha)
        assert num.shape == den.shape == (n,)
        for c, u, v in zip(counts, num, den):
            assert Fraction(int(u), int(v)) == p_exact(int(c), n, a)
            assert Fraction(int(u), int(v)) <= p_exact(int(c), n, Fraction(alpha))


def test_keep_probabilities_exact_with_large_products():
    """n is the length of the counts array, so n = 10**9 cannot be checked without a 10**9
    array; what large n would stress is the size of the integers (2c − n)·b and (b − 2a)·n.
    α = 0.1 − 2**-30 is rounded down to 104857/2**20 (the nearest small fraction, 1/10, is above
    it), so b = 2**20, and n = 200 001 makes the products about 2**38: float32 arithmetic or an
    int32 intermediate loses exactness here, while the small cases above stay exact under both."""
    n = 200_001
    alpha = 0.1 - 2.0**-30
    a = alpha_fraction(alpha)
    assert a.denominator == 2**20
    distinct = np.unique(np.linspace(1, n, 400).astype(np.int64))
    counts = np.resize(distinct, n)
    num, den = keep_probabilities(counts, alpha=alpha)
    assert num.dtype == den.dtype == np.int64
    for i in range(len(distinct)):
        assert Fraction(int(num[i]), int(den[i])) == p_exact(int(counts[i]), n, a), int(counts[i])


def test_alpha_rounding_never_increases_keep_probability():
    rng = np.random.default_rng(SEED)
    for alpha in list(rng.uniform(0, 0.5, 200)) + [0.1, 0.3, 1 / 3, 0.25, 0.5 - 2**-40]:
        a = alpha_fraction(float(alpha))
        assert 0 <= a <= Fraction(float(alpha))
        assert p_exact(70, 100, a) <= p_exact(70, 100, Fraction(float(alpha)))
    assert alpha_fraction(0.1) == Fraction(1, 10)
    for bad in (-0.1, 0.5, 1.0, float("nan"), "0.1", True):
        with pytest.raises(ParameterError, match="'alpha'"):
            alpha_fraction(bad)


# --------------------------------------------------------------------------- P1
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("shape", [(1, 1), (2, 1), (50, 1), (200, 3), (120, 10)])
def test_p1_complete_input_is_kept_entirely(alpha, shape):
    rng = np.random.default_rng([SEED, *shape])
    n, d = shape
    r = 2.0
    u = rng.normal(size=(n, d))
    u /= max(1.0, float(np.linalg.norm(u, axis=1).max()))
    x = (
        5.0 + u * (r / 2.0) * 0.999
    )  # inside a ball of radius r/2: diameter < r, f-complete
    assert np.all(friend_counts(x, ball(r)) == n)
    assert all(p == 1 for p in probs(x, ball(r), alpha))
    assert basic_filter(x, predicate=ball(r), alpha=alpha, rng=SEED).all()
    same = np.zeros((n, d))
    assert basic_filter(
        same, predicate=ball(1e-9), alpha=alpha
    ).all()  # secure rng path


def test_p1_negative_control_incomplete_input_loses_points():
    x = np.array([[0.0], [0.0], [0.0], [10.0]])
    mask = basic_filter(x, predicate=ball(1.0), rng=SEED)
    assert not mask[3]


# --------------------------------------------------------------------------- P2
def support_union(items, z, predicate, alpha):
    """Elements of D' (D followed by z) that either run can keep."""
    d_probs = probs(items, predicate, alpha)
    dz = np.concatenate([items, z[None, :]])
    dz_probs = probs(dz, predicate, alpha)
    keep = [
        i
        for i in range(len(dz))
        if dz_probs[i] > 0 or (i < len(items) and d_probs[i] > 0)
    ]
    return dz, keep


def friendly_within(dz, keep, f) -> bool:
    """Every pair of kept elements has a common friend among D' (witness in D')."""
    for i in keep:
        for j in keep:
            if not any(f(dz[i], dz[w]) and f(dz[w], dz[j]) for w in range(len(dz))):
                return False
    return True


@pytest.mark.parametrize("alpha", (0.0, 0.1, 0.3))
def test_p2_random_graphs(alpha):
    print(f"seed={SEED}")
    rng = np.random.default_rng([SEED, int(alpha * 10)])
    checked = 0
    for trial in range(150):
        size = int(rng.integers(2, 13))
        adj = random_graph(rng, size, float(rng.uniform(0.2, 0.9)))
        f = Graph(adj)
        items = np.arange(size - 1, dtype=float)[:, None]
        dz, keep = support_union(items, np.array([size - 1.0]), f, alpha)
        assert friendly_within(dz, keep, f), (trial, f"seed={SEED}")
        checked += len(keep) > 1
    assert checked > 50


@pytest.mark.parametrize("k", (1, 2, 3, 5, 8))
def test_p2_adversarial_half_friendly_z(k):
    """A: k points at 0, B: k points at 2 (r = 1), z = 1 is a friend of both groups. Each group
    has exactly n/2 friends in D and more than half in D'. The union is friendly (witness z)."""
    items = np.array([[0.0]] * k + [[2.0]] * k)
    z = np.array([1.0])
    f = ball(1.0)
    dz, keep = support_union(items, z, f, 0.0)
    assert len(keep) == 2 * k + 1  # everything can be kept in D'
    pairs = lambda a, b: bool(f.pairs(a[None, :], b[None, :])[0])
    assert friendly_within(dz, keep, pairs)


def test_p2_negative_control_threshold_minus_one():
    """Two groups 3 apart (r = 1), each with exactly n/2 friends: the library keeps neither
    (p = 0 for every point, checked on its own output), while the off-by-one rule c >= n/2
    (threshold − 1) would keep both and the union would not be friendly (no midpoint witness)."""
    items = np.array([[0.0]] * 3 + [[3.0]] * 3)
    n = len(items)
    counts = friend_counts(items, ball(1.0))
    assert counts.tolist() == [3] * n and 2 * counts[0] == n  # exactly half: the boundary
    p = probs(items, ball(1.0), 0.0)
    assert p == [0] * n  # a list comparison: fails if any point could be kept
    assert not basic_filter(items, predicate=ball(1.0), alpha=0.0, rng=SEED).any()
    # Why keeping them would be wrong: any two kept points must have a common friend.
    broken_keep = [i for i in range(n) if 2 * counts[i] >= n]
    dists = [abs(items[i, 0] - items[j, 0]) for i in broken_keep for j in broken_keep]
    assert max(dists) > 2.0


# --------------------------------------------------------------------------- P3 and L
def movement(items, z, predicate, alpha):
    p = probs(items, predicate, alpha)
    q = probs(np.concatenate([items, z[None, :]]), predicate, alpha)
    per_index = [abs(a - b) for a, b in zip(p, q[:-1])]
    return per_index, q[-1]


def check_bounds(per_index, p_z, n, alpha):
    a = Fraction(alpha)
    beta = Fraction(1, 2) - a
    assert max(per_index, default=0) <= (1 - a) / (beta * (n + 1))
    assert sum(per_index) <= 2 / (1 - 2 * a)
    assert sum(per_index) + p_z <= 2 * (1 - a) / (1 - 2 * a) + a


@pytest.mark.parametrize(
    "alpha", (0.0, Fraction(1, 10), Fraction(1, 4), Fraction(2, 5))
)
def test_p3_random_pairs(alpha):
    rng = np.random.default_rng([SEED, 3])
    for _ in range(80):
        size = int(rng.integers(2, 16))
        f = Graph(random_graph(rng, size, float(rng.uniform(0.3, 1.0))))
        items = np.arange(size - 1, dtype=float)[:, None]
        per, pz = movement(items, np.array([size - 1.0]), f, alpha)
        check_bounds(per, pz, size - 1, alpha)
    for _ in range(20):
        x = rng.normal(size=(int(rng.integers(5, 60)), 2))
        z = rng.normal(size=2) * float(rng.choice([0.1, 1.0, 5.0]))
        per, pz = movement(x, z, ball(1.5), alpha)
        check_bounds(per, pz, len(x), alpha)


@pytest.mark.parametrize("n", (4, 10, 50, 400))
def test_p3_tight_cases(n):
    """Complete D, z friend of nobody: Σ = 2n/(n+1) exactly (→ 2/(1 − 2α) at α = 0).
    Two cliques of n/2 with z friend of all: total movement n/(n+1) + 1 (→ L = 2)."""
    x = np.zeros((n, 1))
    per, pz = movement(x, np.array([100.0]), ball(1.0), 0.0)
    assert sum(per) == Fraction(2 * n, n + 1) and pz == 0
    check_bounds(per, pz, n, 0)
    x = np.array([[0.0]] * (n // 2) + [[4.0]] * (n // 2))
    per, pz = movement(x, np.array([2.0]), ball(2.0), 0.0)
    assert pz == 1 and sum(per) == Fraction(n, n + 1)
    check_bounds(per, pz, n, 0)


@pytest.mark.parametrize(
    "alpha", (0, Fraction(1, 10), Fraction(1, 4), Fraction(2, 5), Fraction(49, 100))
)
def test_movement_bound_exhaustive_over_counts(alpha):
    """Every (n, c_i, b_i) and every number m of z's friends: per-index bounds and
    max_c Σ_i |p_i − p'_i| + p'_z <= L, approaching L for large n (so L is the tight constant)."""
    a = Fraction(alpha)
    beta = Fraction(1, 2) - a
    big_l = 2 * (1 - a) / (1 - 2 * a) + a
    best = Fraction(0)
    for n in list(range(1, 41)) + [200, 1000]:
        worst = {}
        for b in (0, 1):
            moves = [
                abs(p_exact(c, n, a) - p_exact(c + b, n + 1, a))
                for c in range(1, n + 1)
            ]
            worst[b] = max(moves)
        assert worst[0] <= (1 - a) / (beta * (n + 1))
        assert worst[1] <= 1 / (2 * beta * (n + 1))
        for m in range(n + 1):
            total = (n - m) * worst[0] + m * worst[1] + p_exact(1 + m, n + 1, a)
            assert total <= big_l, (n, m)
            best = max(best, total)
    assert best > big_l - 5 / (beta * 1001)  # the gap closes like 1/(βn)


# --------------------------------------------------------------------------- randomness
def _harness(mask_fn, x, p, trials=4000, level=1e-6):
    """Reject if any item's keep frequency is off its p (two-sided binomial, Bonferroni)."""
    gen = np.random.default_rng(SEED)
    hits = np.zeros(len(x), dtype=np.int64)
    for _ in range(trials):
        hits += mask_fn(x, gen)
    pvals = [
        binomial_two_sided_p(int(h), trials, float(q))
        if 0 < q < 1
        else float(h == trials * q)
        for h, q in zip(hits, p)
    ]
    return min(pvals) * len(x) > level


def test_filter_keeps_with_probability_p_and_harness_rejects_broken_filter():
    """False-failure rate <= 1e-6 (Bonferroni over items). Negative control: a filter that
    uses α = 0.25 while α = 0 is claimed is rejected by the same harness."""
    print(f"seed={SEED}")
    x = np.array([[0.0]] * 6 + [[0.9]] * 3 + [[1.8]] * 2 + [[5.0]])
    p = [float(q) for q in probs(x, ball(1.0), 0.0)]
    assert sum(0 < q < 1 for q in p) >= 3
    good = lambda pts, g: basic_filter(pts, predicate=ball(1.0), alpha=0.0, rng=g)
    broken = lambda pts, g: basic_filter(pts, predicate=ball(1.0), alpha=0.25, rng=g)
    assert _harness(good, x, p), f"seed={SEED}"
    assert not _harness(broken, x, p), f"seed={SEED}"


def test_public_names():
    assert privagg.basic_filter is basic_filter
    with pytest.raises(ParameterError, match="'predicate'"):
        basic_filter(np.zeros((2, 2)), predicate=None)
    with pytest.raises(ParameterError, match="'rng'"):
        basic_filter(np.zeros((2, 2)), predicate=ball(1.0), rng=-1)
