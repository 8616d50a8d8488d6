"""Issue 13 speed-ups without a change of result: the engine's candidates avoid copies of the
value columns (shared group array; restrict by whole segments), equal to the plain reference."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privagg.engines.grouped import Candidates, open_table
from privagg.mechanisms.grouped import GroupedValues

SEED = 7


def _reference_restrict(cand, keep):
    """The restrict of 4bd1e9f: a gather of keep per row and of the new id per kept row."""
    new_id = np.cumsum(keep, dtype=np.int64) - 1
    out = {}
    for name, gv in cand.values.items():
        sel = keep[gv.group]
        out[name] = (new_id[gv.group[sel]], gv.values[sel])
    return out


def _candidates(rng):
    sizes = rng.integers(0, 50, size=30)
    sizes[[3, 17]] = 0
    g = np.repeat(np.arange(sizes.size), sizes)
    x = rng.normal(size=g.size)
    y = rng.normal(size=g.size)
    fin = np.isfinite(y) & (rng.random(g.size) > 0.2)  # y: its own rows (a filtered group array)
    vals = {"x": GroupedValues(group=g, values=x, n_groups=sizes.size),
            "y": GroupedValues(group=g[fin], values=y[fin], n_groups=sizes.size)}
    return Candidates(keys=[np.arange(sizes.size)], rows=sizes.astype(np.int64),
                      units=sizes.astype(np.int64), values=vals)


def test_restrict_equals_the_gather_reference():
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    for _ in range(20):
        cand = _candidates(rng)
        keep = rng.random(cand.size) < rng.uniform(0, 1)
        want = _reference_restrict(cand, keep)
        got = cand.restrict(keep)
        assert got.size == int(keep.sum())
        for name, (grp, vals) in want.items():
            assert np.array_equal(got.values[name].group, grp)
            assert np.array_equal(got.values[name].values, vals)
            assert got.values[name].n_groups == int(keep.sum())


def test_restrict_keeping_every_group_copies_nothing():
    """Old code: a gather of every row (a copy of each column and its group ids)."""
    cand = _candidates(np.random.default_rng(SEED))
    got = cand.restrict(np.ones(cand.size, dtype=bool))
    for name, gv in cand.values.items():
        assert got.values[name].values is gv.values and got.values[name].group is gv.group


def test_prepare_shares_the_group_array_of_finite_columns():
    """Old code: every column got its own copy of the group ids and of its values."""
    rng = np.random.default_rng(SEED)
    n = 500
    df = pd.DataFrame({"k": rng.integers(0, 7, n), "a": rng.normal(size=n), "b": rng.normal(size=n),
                       "c": np.where(rng.random(n) < 0.1, np.nan, rng.normal(size=n))})
    with open_table(df, by=["k"], units=None, columns=["a", "b", "c"], where=None) as tab:
        cand = tab.prepare()
    va, vb, vc = (cand.values[c] for c in "abc")
    assert va.group is vb.group  # one array for the finite columns
    assert vc.group.size == int(np.isfinite(df["c"]).sum()) < n
    for gv, col in ((va, "a"), (vb, "b"), (vc, "c")):
        assert np.all(np.diff(gv.group) >= 0)
        for k in range(cand.size):  # each group's multiset of finite values
            key = cand.keys[0][k]
            want = df.loc[(df["k"] == key) & np.isfinite(df[col]), col].to_numpy()
            assert np.array_equal(np.sort(gv.values[gv.group == k]), np.sort(want))


def test_group_hash_order_is_the_lexicographic_order():
    """The packed np.sort (and its argsort fallback for many groups) gives exactly
    ``np.lexsort((occ, bits, h, g))``, with ties of the truncated and of the full hash."""
    import privagg.mechanisms.grouped_mean as gm

    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    for n_groups, m in ((5, 3000), (1, 200), (2**40, 1000)):  # the last: too few hash bits left
        g = np.sort(rng.integers(0, min(n_groups, 50), m))
        # few distinct hashes, some equal in their top bits only, some fully equal
        base = rng.integers(0, 2**64, 40, dtype=np.uint64)
        h = base[rng.integers(0, 40, m)] ^ rng.integers(0, 4, m).astype(np.uint64)
        bits = rng.integers(0, 3, m).astype(np.uint64)
        occ = rng.integers(0, 3, m)
        got = gm._group_hash_order(h, g, bits, occ, n_groups, np.int64)
        want = np.lexsort((occ, bits, h, g))
        key = np.stack([g, h.view(np.int64), bits.view(np.int64), occ])
        assert np.array_equal(key[:, got], key[:, want])


def test_group_value_sort_is_the_lexicographic_order():
    """The packed np.sort with its fix-up of truncated-key runs (and the argsort fallback for
    many groups) sorts by (group, value bits in total order): ±0.0, negatives, subnormals,
    duplicates and values equal in their top bits only."""
    import privagg.mechanisms.grouped_mean as gm

    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    for n_groups, m in ((7, 5000), (1, 300), (2**50, 2000)):  # the last: the argsort fallback
        g = np.sort(rng.integers(0, min(n_groups, 40), m))
        pool = np.concatenate([[0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308],
                               rng.normal(size=30), 1.0 + np.arange(20) * 2.0**-52])
        v = pool[rng.integers(0, pool.size, m)]
        ub = gm._ordered_bits(v)
        want = v[np.lexsort((ub, g))]
        got = gm._group_value_sort(v, g, n_groups, np.int64)
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
