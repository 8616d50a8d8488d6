"""Exactness of the clamped sums (the float-sum traps of Casacuberta et al. 2022): the integer
sums equal an independent exact-rational computation, whatever the order, the magnitudes and the
number of rows, and the releases are bit-identical under reordering with the same seed."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.noise.grid as grid_mod
from privagg.mechanisms import grouped_bounded as gb
from privagg.mechanisms.grouped import Contribution, GroupedValues

SEED = 20240613


def _h(lo: float, hi: float) -> Fraction:
    b = max(abs(Fraction(lo)), abs(Fraction(hi)))
    e = 0
    while Fraction(2) ** e <= b:
        e += 1
    while Fraction(2) ** (e - 1) > b:
        e -= 1
    return Fraction(2) ** (e - 38)


def _ref_sums(groups, values, lo, hi, g):
    """Σ round(clamp(x)/h) per group, in Python rationals (round: half to even)."""
    h = _h(lo, hi)
    out = [0] * g
    for gg, v in zip(np.asarray(groups).tolist(), np.asarray(values).tolist()):
        out[gg] += round(Fraction(min(max(v, lo), hi)) / h)
    return out


def _sorted_gv(groups, values, g):
    order = np.argsort(groups, kind="stable")
    return GroupedValues(np.asarray(groups, np.int64)[order], np.asarray(values, np.float64)[order], g)


def _sums(gv, lo, hi):
    return gb.group_integer_sums(gv.group, gb.clamped_terms(gv.values, lo, hi), gv.n_groups).tolist()


def _release(fn, gv, lo, hi, c=Contribution(2, 3)):
    r = fn(gv, lower=lo, upper=hi, epsilon=Fraction(1), contribution=c,
           rng=np.random.default_rng(SEED))
    return r.value.tobytes(), r.low.tobytes(), r.high.tobytes()


def _adversarial(rng, lo, hi, n):
    """Values at, just inside and beyond the bounds, tiny ones, huge ones and ties of the grid."""
    h = float(_h(lo, hi))
    pool = np.array([lo, hi, math.nextafter(lo, math.inf), math.nextafter(hi, -math.inf),
                     math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf),
                     1e308, -1e308, 5e-324, -5e-324, 2.0**-1000, 0.0, -0.0,
                     0.5 * h, 1.5 * h, -2.5 * h, lo + 0.5 * h, hi - 0.5 * h,
                     math.nextafter(0.5 * h, 0.0), math.nextafter(0.5 * h, 1.0)])
    v = np.concatenate([pool, rng.uniform(lo - 1, hi + 1, n - pool.size)])
    return v


@pytest.mark.parametrize("bounds", [(-1.0, 3.0), (0.1, 0.2), (-1e250, 1e250), (-3e-310, 1e-309)])
def test_integer_sums_match_exact_rationals(bounds):
    """Bounds, beyond, subnormals, ±0, exact ties k·h ± h/2 and their neighbours: the integer
    sums equal Σ round(clamp(x)/h) computed in Fractions."""
    print(f"seed={SEED}")
    lo, hi = bounds
    rng = np.random.default_rng(SEED)
    n, g = 600, 5
    values = _adversarial(rng, lo, hi, n)
    groups = rng.integers(0, g, n)
    gv = _sorted_gv(groups, values, g)
    assert _sums(gv, lo, hi) == _ref_sums(gv.group, gv.values, lo, hi, g), f"seed={SEED}"


def test_permuting_rows_gives_identical_sums_and_releases():
    """Rows of each group in another order: identical integer sums and bit-identical releases
    of sums and means with the same seed (a float sum in that order differs: shown)."""
    print(f"seed={SEED}")
    lo, hi = -1.0, 3.0
    rng = np.random.default_rng(SEED)
    n, g = 20000, 7
    values = np.concatenate([_adversarial(rng, lo, hi, n - 10000),
                             np.full(5000, 2.0**-60), np.full(5000, 1.0 + 2.0**-52)])
    groups = rng.integers(0, g, n)
    a = _sorted_gv(groups, values, g)
    perm = rng.permutation(n)
    b = _sorted_gv(groups[perm], values[perm], g)
    assert not np.array_equal(a.values, b.values)
    assert _sums(a, lo, hi) == _sums(b, lo, hi) == _ref_sums(a.group, a.values, lo, hi, g)
    for fn in (gb.clamped_sums, gb.bounded_means):
        assert _release(fn, a, lo, hi) == _release(fn, b, lo, hi), f"{fn.__name__} seed={SEED}"
    # the trap the test guards against: the naive float sum of the clamped values is order-dependent
    ca, cb = np.clip(a.values, lo, hi), np.clip(b.values, lo, hi)
    naive_a = [sum(ca[a.group == k].tolist()) for k in range(g)]
    naive_b = [sum(cb[b.group == k].tolist()) for k in range(g)]
    assert naive_a != naive_b


def test_million_tiny_values():
    """10^6 values far below the grid step (and some at it): the sum is the exact count of the
    rounded terms, identical in any order; a naive float sum of them would add ~10^6·2^-60."""
    print(f"seed={SEED}")
    lo, hi = 0.0, 1.0
    rng = np.random.default_rng(SEED)
    n = 10**6
    h = float(_h(lo, hi))
    values = np.where(rng.random(n) < 0.5, 2.0**-60, 0.5 * h * 3)  # 1.5h rounds (half even) to 2
    values[:3] = [0.5 * h, 2.5 * h, math.nextafter(0.5 * h, 1.0)]  # ties to even: 0, 2; just above: 1
    gv = GroupedValues(np.zeros(n, np.int64), values, 1)
    want = 2 * int(np.count_nonzero(values[3:] == 1.5 * h)) + 0 + 2 + 1
    assert _sums(gv, lo, hi) == [want]
    rev = GroupedValues(np.zeros(n, np.int64), values[::-1].copy(), 1)
    assert _release(gb.clamped_sums, gv, lo, hi) == _release(gb.clamped_sums, rev, lo, hi)


def test_blocks_accumulate_beyond_int64(monkeypatch):
    """Block sums are added as Python integers: with 1-row blocks of terms 2^62 the total 2^64
    (beyond int64) is exact; so the sum is exact for any number of rows."""
    monkeypatch.setattr(gb, "CHUNK_ROWS", 1)
    terms = np.full(4, 2**62, dtype=np.int64)
    out = gb.group_integer_sums(np.array([0, 0, 0, 0]), terms, 2)
    assert out.tolist() == [2**64, 0]


def test_blocks_and_empty_groups(monkeypatch):
    """Several blocks, groups spanning blocks, empty groups at the start, middle and end."""
    monkeypatch.setattr(gb, "CHUNK_ROWS", 7)
    rng = np.random.default_rng(SEED)
    groups = np.sort(rng.choice([1, 2, 4, 5], 101))
    terms = rng.integers(-2**40, 2**40, 101)
    out = gb.group_integer_sums(groups, terms, 7)
    want = [int(sum(int(t) for t, gg in zip(terms, groups) if gg == k)) for k in range(7)]
    assert out.tolist() == want


def test_sensitivity_bound_holds_for_adversarial_rows():
    """Adding any one row (at, near or beyond a bound, tiny, huge) changes its group's integer
    sum by at most the plan's row bound M = max(|K_lo|, |K_hi|), and M is attained at a bound."""
    lo, hi = -1.0, 3.0
    plan = gb.sum_plan(lower=lo, upper=hi, epsilon=1, contribution=Contribution())
    rng = np.random.default_rng(SEED)
    base = _sorted_gv(rng.integers(0, 3, 50), rng.uniform(-2, 4, 50), 3)
    s0 = _sums(base, lo, hi)
    changes = []
    for v in _adversarial(rng, lo, hi, 40):
        gv = _sorted_gv(np.append(base.group, 1), np.append(base.values, v), 3)
        s1 = _sums(gv, lo, hi)
        assert s1[0] == s0[0] and s1[2] == s0[2]
        changes.append(abs(s1[1] - s0[1]))
    assert max(changes) == plan.row_bound


def test_release_is_on_the_grid_and_reorder_invariant_at_scale():
    """A larger run (2·10^5 rows, 50 groups): released sums are exact multiples of 2^e, and the
    bit-identical release holds after a full shuffle and re-sort."""
    rng = np.random.default_rng(SEED)
    n, g = 200_000, 50
    groups = rng.integers(0, g, n)
    values = rng.standard_cauchy(n) * 10
    a = _sorted_gv(groups, values, g)
    perm = rng.permutation(n)
    b = _sorted_gv(groups[perm], values[perm], g)
    ra = gb.clamped_sums(a, lower=-5, upper=5, epsilon=1, contribution=Contribution(),
                         rng=np.random.default_rng(SEED))
    rb = gb.clamped_sums(b, lower=-5, upper=5, epsilon=1, contribution=Contribution(),
                         rng=np.random.default_rng(SEED))
    assert ra.value.tobytes() == rb.value.tobytes()
    e = gb.sum_plan(lower=-5, upper=5, epsilon=1, contribution=Contribution()).exponent
    k = np.ldexp(ra.value, -e)
    assert np.array_equal(k, np.rint(k))


def test_release_uses_exact_sums_not_float_sums(monkeypatch):
    """With the noise removed, the released sum is the rescaled exact integer sum: for 10^5 rows
    of 0.1 + tiny values it is exactly round(Σk/2^s)·g."""
    monkeypatch.setattr(grid_mod, "_laplace_flat", lambda scale, n, gen: np.zeros(n, np.int64))
    lo, hi = 0.0, 1.0
    n = 100_000
    values = np.full(n, 0.1)
    values[::2] = 0.1 + 2.0**-50
    p = gb.sum_plan(lower=lo, upper=hi, epsilon=1, contribution=Contribution())
    r = gb.clamped_sums(GroupedValues(np.zeros(n, np.int64), values, 1), lower=lo, upper=hi,
                        epsilon=1, contribution=Contribution(), rng=np.random.default_rng(0))
    total = sum(_ref_sums(np.zeros(n, int), values, lo, hi, 1))
    s = p.exponent - p.term_exponent
    assert Fraction(r.value[0]) == math.floor(Fraction(total, 2**s) + Fraction(1, 2)) * Fraction(2) ** p.exponent
