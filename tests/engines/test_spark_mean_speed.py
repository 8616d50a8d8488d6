"""The Spark mean's speed work changes no release: the seeded releases are those of the code before
it (2dd438f), the keyed order of the scale step is built from hash buckets without a global sort
(one job fewer: no range-partition sampling), and the mean's rows, packed into blocks on the
executors, read back bit for bit. Local mode, one SparkSession (tests/engines/conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspark")

from privagg.engines import spark_points as sp  # noqa: E402
from privagg.mechanisms import mean as M  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _frame(spark, x: np.ndarray, slices: int):
    """The rows of ``x`` in ``slices`` partitions, in order (columns c0, c1, …)."""
    rdd = spark.sparkContext.parallelize([tuple(map(float, r)) for r in x], slices)
    return spark.createDataFrame(rdd, ", ".join(f"c{j} double" for j in range(x.shape[1])))


def _data() -> np.ndarray:
    rng = np.random.default_rng(41)
    x = rng.normal([10.0, -3.0], [1.0, 50.0], size=(6000, 2))
    x[:300] = x[300:600]  # copies: occurrence indices in the scale step
    x[600:620] = [[0.0, -0.0]] * 10 + [[-0.0, 0.0]] * 10
    return x


def test_seeded_release_unchanged(spark) -> None:
    """Same data, partitions and seed → bit for bit the releases printed by the code before the
    speed work (2dd438f; the mean re-pinned at the spread floor, docs/proofs/mean.md §8c, a new
    ε/20 step; n̂, radius and clip radius unchanged; again at the default calibration "auto",
    Laplace here, and the count's share ε/20, mean.md §13: n̂ 6004 → 6002, clip radius 2.59 →
    2.83, radius unchanged): the FriendlyCore plan with the scale step (copies and ±0.0 rows), so every
    pass (scale counts, subsample, clipped sums, distance histogram). The coordinate plan draws no
    task randomness: its seeded release is the local one (test_spark_mean.py)."""
    x = _data()
    df = _frame(spark, x, 5)
    cases = [
        (dict(rng=123, m_locate=1000), 6002, 2.8284271247461903, 2.82842712474619,
         ["0x1.3f7b48cc0ca01p+3", "-0x1.893d919d8ee3ap+1"], [1.0, 64.0]),
    ]
    for kw, n_hat, radius, clip, mean, scales in cases:
        got = M.private_mean(df, epsilon=1.0, delta=1e-6, **kw)
        assert got.ok and got.n_hat == n_hat and got.radius == radius and got.clip_radius == clip, kw
        assert [float(v).hex() for v in got.mean] == mean, kw
        assert (None if got.scales is None else got.scales.tolist()) == scales, kw


def test_keyed_order_without_a_global_sort(spark) -> None:
    """The scale counts in the keyed order equal the local ones (copies, ±0.0, 5 partitions; 1, 2
    and 3 rows: most hash buckets empty), in 3 Spark jobs: before, the global ``orderBy`` ran 4 (its
    range partitioner samples the keyed rows in a job of its own, computing them twice)."""
    x = _data()
    keys = M.row_keys(2, np.random.default_rng(5))
    sc = spark.sparkContext
    for rows in (x, x[:1], x[600:602], x[:3]):
        df = _frame(spark, rows, 5 if rows.shape[0] > 5 else 1)
        with sp.points_of("private_mean", df, None, None, 1, 1, lambda: None) as (src, _, _):
            group = f"privagg-test-keyed-{rows.shape[0]}"
            sc.setJobGroup(group, "scale counts")
            try:
                got = src.scale_counts(keys)
            finally:
                sc.setJobGroup("privagg-tests", "tests")
        assert got.tolist() == M.ArrayPoints(rows).scale_counts(keys).tolist()
        if rows.shape[0] == x.shape[0]:
            assert got.sum() > 0
            assert len(sc.statusTracker().getJobIdsForGroup(group)) <= 3


def test_packed_rows_read_back_exactly(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mean's persisted rows are blocks of packed float64 rows (2 rows a block here, several
    blocks per Arrow batch); every pass reads them back bit for bit and in order: −0.0, the least
    subnormal, 2^53 + 1 (rounded on the cast), ±1.7e308; one column (``column(j)``) and the scaled
    rows too. k-means keeps the columns (it reads them with its own functions)."""
    monkeypatch.setattr(sp, "BLOCK_VALUES", 7)  # 7 // 3 = 2 rows a block
    rng = np.random.default_rng(3)
    x = rng.normal(size=(101, 3))
    x[:5] = [[-0.0, 5e-324, 2.0**53 + 1], [1.7e308, -1.7e308, 0.0], [-0.0, -0.0, -0.0],
             [1e-300, -1e-310, 3.0], [1.7e308, 1.7e308, 1.7e308]]
    df = _frame(spark, x, 3)
    with sp.points_of("private_mean", df, None, None, 1, 1, lambda: None) as (src, _, _):
        assert src.packed == 3 and src.frame.columns == ["x", "m"] and src.count() == 101
        got = src.poisson_sample(1.0, None)  # every row, the partitions in order
        assert got.tobytes() == x.tobytes()
        assert src.column(2).poisson_sample(1.0, None).tobytes() == np.ascontiguousarray(x[:, 2:3]).tobytes()
        exps = np.array([1, -3, 0])
        with np.errstate(over="ignore"):  # 1.7e308·2^3: the local code's overflow, clamped by _finite
            want = M._finite(np.ldexp(x, -exps))
        assert src.scaled(exps).poisson_sample(1.0, None).tobytes() == want.tobytes()
        assert src.scaled(exps).column(1).poisson_sample(1.0, None).tobytes() == \
            np.ascontiguousarray(want[:, 1:2]).tobytes()
    with sp.points_of("private_kmeans", df, None, None, 1, 1, lambda: None) as (km, _, _):
        assert km.packed == 0 and km.frame.columns == ["c0", "c1", "c2"]


def test_block_size_known_answers() -> None:
    """A batch of ``maxRecordsPerBatch`` blocks stays below 2³¹ bytes (32-bit Arrow offsets)."""
    assert sp.block_values(10, 10000) == (2**31 - 1) // 80000 == 26843
    assert sp.block_values(3, 1000) == sp.BLOCK_VALUES == 1 << 17  # 1 MiB blocks fit 1000 a batch
    assert sp.block_values(3, 0) == sp.block_values(3, -1) == sp.BLOCK_VALUES  # unlimited records
    assert sp.block_values(50, 10**9) == 50  # at least one row a block
    for d, r in [(1, 1), (7, 2047), (10, 10000), (100, 16384), (3, 123457)]:
        assert 8 * sp.block_values(d, r) * r <= sp.BATCH_BYTES_MAX or sp.block_values(d, r) == d


def test_blocks_follow_the_sessions_batch_records(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blocks are sized from the session's ``spark.sql.execution.arrow.maxRecordsPerBatch``: with
    4 records a batch and a 100-byte batch limit, blocks of 100 // 32 = 3 → max(3, 3) values (one row
    of 3) are written, a batch of blocks holds <= 100 bytes, and the rows read back bit for bit."""
    monkeypatch.setattr(sp, "BATCH_BYTES_MAX", 100)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(37, 3))
    df = _frame(spark, x, 2)
    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "4")
    try:
        with sp.points_of("private_mean", df, None, None, 1, 1, lambda: None) as (src, _, _):
            sizes = [len(r["x"]) for r in src.frame.select("x").collect()]
            assert max(sizes) * 4 <= 100 and len(sizes) == 37
            assert src.poisson_sample(1.0, None).tobytes() == x.tobytes()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)
