"""DuckDBEngine.bounded_counts for ℓ0 > 1 or ℓ∞ > 1: the window plan (``lag(π, ℓ0) OVER
(PARTITION BY unit ORDER BY π) IS NULL`` over the (unit, key) pairs) keeps exactly the pairs of
the rule in :mod:`privagg.engines.base` (the same counts as NumpyEngine and as a brute-force
reference), and, unlike the top-n aggregate it replaced, it spills to disk under a small memory
limit."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privagg.engines import duckdb as dd
from privagg.engines.base import Bounding
from privagg.engines.duckdb_bounding import DuckDBEngine
from privagg.engines.numpy_engine import NumpyEngine, pair_priorities, value_hashes


def _as_dict(bc) -> tuple[dict, int]:
    return dict(zip(bc.key_counts.keys.tolist(), bc.key_counts.counts.tolist(), strict=True)), bc.other


def _reference(units: list, keys: list, l0: int, linf: int, secret: int, keep_other: bool) -> tuple[dict, int]:
    """The bounding rule written out pair by pair (small data only): per unit, the ℓ0 pairs of
    smallest π(u, k), each contributing min(rows, ℓ∞); None is the missing unit / other key."""
    rows = Counter((u, k) for u, k in zip(units, keys, strict=True) if keep_other or k is not None)
    pairs = list(rows)

    def hashes(values: list) -> np.ndarray:  # DuckDB's hash of each BIGINT, hash(NULL) for None
        h = value_hashes(np.array([0 if v is None else v for v in values], dtype=np.int64))
        return np.where([v is None for v in values], h[-1], h[:-1])

    hu, hk = hashes([u for u, _ in pairs]), hashes([k for _, k in pairs])
    prio = pair_priorities(hu, hk, secret)
    by_unit: dict = defaultdict(list)
    for (u, k), p in zip(pairs, prio.tolist(), strict=True):
        by_unit[u].append((p, k))
    out: Counter = Counter()
    for u, items in by_unit.items():
        for _, k in sorted(items)[:l0]:
            out[k] += min(rows[(u, k)], linf)
    other = out.pop(None, 0)
    return dict(out), other


@pytest.mark.parametrize(("l0", "linf"), [(1, 2), (2, 1), (3, 2), (5, 3)])
@pytest.mark.parametrize("keep_other", [False, True])
def test_window_plan_keeps_the_l0_smallest_priorities(tmp_path: Path, l0: int, linf: int, keep_other: bool) -> None:
    """Units with fewer, exactly and more keys than ℓ0, repeated rows (ℓ∞), a NULL unit and
    NULL keys ("other" with keep_other): DuckDB = NumpyEngine = the pair-by-pair reference.
    A plan that kept other pairs (ORDER BY π DESC, an offset of ℓ0 − 1, ranks over all units)
    changes these counts: units hold up to 8 keys of 40, with ℓ0 ∈ {1, 2, 3, 5}."""
    rng = np.random.default_rng(20250602)
    units: list = []
    keys: list = []
    for u in range(60):
        n_keys = 1 + u % 8  # 1..8 distinct keys
        for k in rng.choice(40, size=n_keys, replace=False).tolist():
            reps = 1 + int(rng.integers(0, 4))  # 1..4 rows of the pair
            units += [u] * reps
            keys += [k] * reps
    units += [None, None, None, 7, 7, None]  # the missing unit is one unit
    keys += [3, 5, None, None, None, 11]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"u": pa.array(units, pa.int64()), "k": pa.array(keys, pa.int64())}), path)
    engine = DuckDBEngine(dd.describe_column(path, "k"), dd.describe_column(path, "u"))
    secret = 0x9E3779B97F4A7C15
    got = _as_dict(engine.bounded_counts(Bounding(l0, linf, secret), keep_other=keep_other))
    ref = _as_dict(NumpyEngine(np.array(keys, dtype=object), np.array(units, dtype=object))
                   .bounded_counts(Bounding(l0, linf, secret), keep_other=keep_other))
    assert got == ref
    assert got == _reference(units, keys, l0, linf, secret, keep_other)
    assert sum(got[0].values()) + got[1] <= 61 * l0 * linf  # 61 units, at most ℓ0·ℓ∞ each


def test_bounded_counts_spill_under_a_small_memory_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """3·10^5 rows, 6·10^4 units with 5 keys each, under a 40 MB limit and 2 threads: the
    window plan spills and its counts equal NumpyEngine's. The top-n plan (``min_by({k, c}, π,
    ℓ0)``, commit 83876dc) ran out of memory here (a ParameterError), even at 96 MB."""
    path = tmp_path / "ratings.parquet"
    con = duckdb.connect()
    con.sql("COPY (SELECT i % 60000 AS u, (i * 7919) % 100003 AS k FROM range(300000) t(i)) TO $p (FORMAT parquet)",
            params={"p": str(path)})
    table = pq.read_table(path)
    con.close()
    real_connect = dd._connect

    def connect(memory_limit, temp_directory):  # the limit is per connection; pin the threads
        c = real_connect(memory_limit, temp_directory)
        c.sql("SET threads = 2")
        return c

    monkeypatch.setattr(dd, "_connect", connect)
    engine = DuckDBEngine(dd.describe_column(path, "k"), dd.describe_column(path, "u"), memory_limit="40MB")
    got = engine.bounded_counts(Bounding(3, 2, 12345))
    ref = NumpyEngine(table["k"].to_numpy(), table["u"].to_numpy()).bounded_counts(Bounding(3, 2, 12345))
    assert np.array_equal(got.key_counts.keys, ref.key_counts.keys)
    assert np.array_equal(got.key_counts.counts, ref.key_counts.counts)
    assert got.key_counts.n == ref.key_counts.n > 0
