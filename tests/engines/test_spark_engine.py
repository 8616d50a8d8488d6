"""The Spark engine (local mode): same counts as numpy and DuckDB, same released laws, noise in the
tasks (one stream per partition, non-deterministic stage, one materialisation), retries, errors.

One SparkSession for all Spark tests (tests/engines/conftest.py; ``local[2,2]``: 2 threads, a
failed task is retried once), 4 shuffle partitions, small data. Skipped without pyspark.

Statistical tests: fixed seeds (printed), each with false-failure rate ≤ 1e-3, each with a
negative control that the same test rejects.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from scipy import stats  # noqa: E402

from privagg.accounting import Ledger  # noqa: E402
from privagg.engines import counting  # noqa: E402
from privagg.engines import duckdb as duckdb_engine  # noqa: E402
from privagg.engines import spark as se  # noqa: E402
from privagg.errors import BudgetExceededError, ParameterError  # noqa: E402
from privagg.mechanisms import histogram as H  # noqa: E402
from privagg.noise.distributions import DiscreteLaplace  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

ALPHA = 1e-3


@pytest.fixture(scope="module")
def parquet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mixed columns with the canonicalisation cases: −0.0, NaN, NULL, repeated keys."""
    rng = np.random.default_rng(1)
    m = 3000
    ints = rng.integers(-5, 40, size=m)
    floats = rng.choice(np.array([0.0, -0.0, 1.5, np.nan, 2.0, -3.25]), size=m)
    strings = rng.choice(np.array(["a", "b", "é", "", "zz"], dtype=object), size=m)
    strings[rng.random(m) < 0.1] = None
    days = np.datetime64("2024-01-01") + rng.integers(0, 20, size=m).astype("timedelta64[D]")
    table = pa.table({
        "i": pa.array(ints, mask=rng.random(m) < 0.05),
        "f": pa.array(floats),  # NaN, not NULL
        "s": pa.array(strings.tolist(), type=pa.string()),
        "d": pa.array(days),
        "b": pa.array(rng.random(m) < 0.3),
    })
    path = tmp_path_factory.mktemp("spark") / "mixed.parquet"
    pq.write_table(table, path)
    return path


def _sorted(kc: counting.KeyCounts) -> tuple[list, list, int]:
    keys = np.asarray(kc.keys)
    order = counting.sort_order(keys)
    return keys[order].tolist(), np.asarray(kc.counts)[order].tolist(), kc.n


@pytest.mark.parametrize("column", ["i", "f", "s", "d", "b"])
def test_counts_identical_to_numpy_and_duckdb(spark, parquet_file: Path, column: str) -> None:
    df = spark.read.parquet(str(parquet_file))
    got = _sorted(se.count_keys(df, column))
    arrow = pq.read_table(parquet_file).column(column)
    assert got == _sorted(counting.count_keys(arrow))
    assert got == _sorted(duckdb_engine.count_file(parquet_file, column))
    if column == "f":  # −0.0 released as +0.0, NaN missing
        assert got[0] == [-3.25, 0.0, 1.5, 2.0] and all(math.copysign(1, k) > 0 for k in got[0] if k == 0)
        assert got[2] == 3000 and sum(got[1]) < 3000


def test_laplace_release_identical_to_local_engine(spark, parquet_file: Path) -> None:
    """Same counts (broadcast join, absent keys 0, the rest in `other`), same core, same seed → same release."""
    df = spark.read.parquet(str(parquet_file))
    arrow = pq.read_table(parquet_file).column("s")
    domain = ["a", "b", "é", "never seen"]
    for neighbors in ("replace", "add_remove"):
        local = H.laplace_histogram(arrow, epsilon=1.0, domain=domain, other=True, neighbors=neighbors, rng=7)
        spark_release = H.laplace_histogram(df, column="s", epsilon=1.0, domain=domain, other=True,
                                            neighbors=neighbors, rng=7)
        assert spark_release.keys.tolist() == local.keys.tolist()
        assert spark_release.counts.tolist() == local.counts.tolist()
        assert spark_release.other_count == local.other_count and spark_release.n == local.n
    # an int domain cast exactly to a DOUBLE column; a non-integral key for an int column is refused
    f = H.laplace_histogram(df, column="f", epsilon=1.0, domain=[0, 2], rng=1)
    assert f.keys.tolist() == [0.0, 2.0]
    with pytest.raises(ParameterError, match="domain"):
        H.laplace_histogram(df, column="i", epsilon=1.0, domain=[1.5, 2], rng=1)


def test_stable_counts_and_n(spark, parquet_file: Path) -> None:
    """n is Spark's count; released keys are present keys, sorted, within the noise's 1e-9 tail."""
    df = spark.read.parquet(str(parquet_file))
    release = H.stable_histogram(df, column="i", epsilon=1.0, delta=1e-6, rng=3)
    exact = dict(zip(*_sorted(counting.count_keys(pq.read_table(parquet_file).column("i")))[:2], strict=True))
    assert release.n == 3000 and release.secure is False
    # released keys are present keys, sorted; noisy counts within the 1e-9 tail of the noise
    assert release.keys.tolist() == sorted(release.keys.tolist())
    bound = DiscreteLaplace(release.params.scale).abs_quantile(1e-9)
    for key, count in zip(release.keys.tolist(), release.counts.tolist(), strict=True):
        assert abs(count - exact[key]) <= bound and count >= release.threshold


def test_released_law_rate_and_noise(spark) -> None:
    """20000 keys of count 1: released with probability P[Z ≥ T − 1] exactly; 4000 keys of count 40:
    noisy − 40 follows DL(t). Seed printed; negative controls: T off by one, t·1.3."""
    from pyspark.sql import functions as F

    seed = 20240501
    print(f"seed={seed}")
    ones, heavy, c = 20000, 4000, 40
    df = spark.range(ones + heavy * c, numPartitions=4).select(
        F.when(F.col("id") < ones, F.col("id")).otherwise(ones + (F.col("id") - ones) % heavy).alias("k"))
    release = H.stable_histogram(df, column="k", epsilon=1.0, delta=0.1, rng=seed)
    params = release.params
    keys, counts = release.keys, release.counts
    released_ones = int((keys < ones).sum())
    p = params.release_probability
    assert stats.binomtest(released_ones, ones, p).pvalue > ALPHA
    # negative control: the law of a threshold one higher is rejected
    p_wrong = DiscreteLaplace(params.scale).sf(params.threshold)
    assert stats.binomtest(released_ones, ones, p_wrong).pvalue < ALPHA
    noise = counts[keys >= ones] - c
    assert noise.size >= heavy - 5  # P[40 + Z < T] is ~1e-4 per key

    def chi2_pvalue(scale: float) -> float:
        law = DiscreteLaplace(scale)
        edges = np.arange(-8, 9)
        observed = np.array([(noise < -8).sum()] + [(noise == z).sum() for z in edges] + [(noise > 8).sum()])
        pmf = np.array([law.pmf(int(z)) for z in edges])
        expected = np.concatenate([[law.sf(9)], pmf, [law.sf(9)]]) * noise.size  # symmetric tails
        return stats.chisquare(observed, expected / expected.sum() * observed.sum()).pvalue

    from fractions import Fraction

    assert chi2_pvalue(params.scale) > ALPHA
    assert chi2_pvalue(params.scale * Fraction(13, 10)) < ALPHA  # negative control


def test_randomized_boundary_rate_in_the_tasks(spark) -> None:
    """threshold="randomized" in the cluster: 20000 count-1 keys released at p_b (the boundary coin
    is drawn in the tasks); negative control: the tight rule's rate is rejected. Seed printed."""
    from pyspark.sql import functions as F

    seed = 20261203
    print(f"seed={seed}")
    ones = 20000
    df = spark.range(ones, numPartitions=4).select(F.col("id").alias("k"))
    release = H.stable_histogram(df, column="k", epsilon=1.0, delta=0.1, rng=seed, threshold="randomized")
    params = release.params
    assert params.threshold_rule == "randomized" and 0 < params.boundary_probability < 1
    hits = len(release.keys)
    assert stats.binomtest(hits, ones, params.release_probability).pvalue > ALPHA
    tight = DiscreteLaplace(params.scale).sf(params.threshold - 1)
    assert stats.binomtest(hits, ones, tight).pvalue < ALPHA
    assert int(np.min(release.counts)) >= params.threshold - 1


def test_partitions_draw_independent_streams(spark) -> None:
    """Four partitions with identical counts (500 keys of count 100 each): no two get the same noise.
    Negative control: the same stream twice does give identical noise (the comparison can fail)."""
    from pyspark.sql import functions as F

    params = H.StableHistogramParams.build(1.0, 0.1)
    counts = spark.range(2000, numPartitions=4).select(F.col("id").alias("key"), F.lit(100).cast("long").alias("count"))
    for rng in (11, None):
        randomness, _, _ = se.task_randomness(rng, "test")
        table = se.noised(counts, params, randomness).toArrow()
        keys = table.column("key").to_numpy()
        noise = table.column("count").to_numpy() - 100
        order = np.argsort(keys)
        assert keys[order].tolist() == list(range(2000))  # all kept (T ≪ 100)
        blocks = noise[order].reshape(4, 500)
        for a in range(4):
            for b in range(a + 1, 4):
                assert not np.array_equal(blocks[a], blocks[b])
    # the seeded generator of partition p is exactly SeedSequence.spawn's p-th child
    randomness, _, _ = se.task_randomness(11, "test")
    parent = np.random.SeedSequence(randomness.entropy, spawn_key=randomness.spawn_key)
    children = parent.spawn(4)
    for p in range(4):
        assert randomness.generator(p).integers(0, 1 << 62, 4).tolist() == \
            np.random.default_rng(children[p]).integers(0, 1 << 62, 4).tolist()
    # negative control: one partition twice with the same stream → identical noise
    one = counts.coalesce(1)
    first = se.noised(one, params, randomness).toArrow().column("count").to_numpy()
    again = se.noised(one, params, randomness).toArrow().column("count").to_numpy()
    assert np.array_equal(first, again)


def test_noise_stage_is_nondeterministic(spark) -> None:
    counts = spark.range(10).selectExpr("id AS key", "CAST(1 AS BIGINT) AS count")
    randomness, _, _ = se.task_randomness(None, "test")
    stage = se.noised(counts, H.StableHistogramParams.build(1.0, 1e-6), randomness)
    assert stage._jdf.queryExecution().analyzed().deterministic() is False
    # control: the same function through the plain API is taken as deterministic
    plain = counts.mapInArrow(lambda it: it, counts.schema)
    assert plain._jdf.queryExecution().analyzed().deterministic() is True


def test_materialised_once_and_recomputation_differs(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """The release is the one collected table; re-evaluating the stage would give another draw."""
    seen: list = []
    real = se._collect

    def spy(frame):
        table = real(frame)
        seen.append((frame, table))
        return table

    monkeypatch.setattr(se, "_collect", spy)
    df = spark.range(4000, numPartitions=2).selectExpr("id % 50 AS k")
    release = H.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6)
    assert len(seen) == 1 and release.secure
    frame, table = seen[0]
    order = np.argsort(table.column("key").to_numpy())
    assert release.keys.tolist() == table.column("key").to_numpy()[order].tolist()
    assert release.counts.tolist() == table.column("count").to_numpy()[order].tolist()
    again = real(frame)  # forced recomputation: fresh noise, never what was released
    assert sorted(again.column("count").to_pylist()) != sorted(table.column("count").to_pylist())


def test_retried_tasks_do_not_change_the_release(spark, tmp_path: Path) -> None:
    """Every noise task fails on its first attempt and is retried: the (seeded) release is the one
    a run without failures gives; the markers show that the failures happened."""
    df = spark.range(6000, numPartitions=3).selectExpr("id % 300 AS k")
    clean = se.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6, rng=5)
    retried = se.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6, rng=5, _fault=str(tmp_path))
    assert list(tmp_path.glob("failed-*"))
    assert retried.keys.tolist() == clean.keys.tolist() and retried.counts.tolist() == clean.counts.tolist()
    other_seed = se.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6, rng=6)
    assert other_seed.counts.tolist() != clean.counts.tolist()  # control: the comparison can fail


def test_ledger_charged_before_noise_and_errors_charge_nothing(spark, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import functions as F

    calls: list = []
    real = se._collect
    monkeypatch.setattr(se, "_collect", lambda frame: calls.append(1) or real(frame))
    path = tmp_path / "b.db"
    Ledger.create(path, epsilon=1.5, delta=1e-5).close()
    df = spark.range(300).selectExpr("CAST(id % 3 AS STRING) AS s")
    with Ledger(path) as ledger:
        H.stable_histogram(df, column="s", epsilon=1.0, delta=1e-6, ledger=ledger)
        assert len(calls) == 1 and len(ledger.charges()) == 1
        with pytest.raises(BudgetExceededError):
            H.stable_histogram(df, column="s", epsilon=1.0, delta=1e-6, ledger=ledger)
        assert len(calls) == 1  # refused before any noise was drawn
        bad = df.select(F.col("s").cast("int").alias("x")).select(
            F.when(F.col("x") == 1, F.lit("secret-value").cast("int")).otherwise(F.col("x")).alias("x"))
        with pytest.raises(ParameterError) as info:
            H.stable_histogram(bad, column="x", epsilon=0.1, delta=1e-6, ledger=ledger)
        assert "secret-value" not in str(info.value) and "Spark failed" in str(info.value)
        assert len(ledger.charges()) == 1


def test_schema_errors(spark) -> None:
    df = spark.createDataFrame([(1, b"x", [1])], "k long, blob binary, arr array<int>")
    with pytest.raises(ParameterError, match="column of the DataFrame"):
        H.stable_histogram(df, column="nope", epsilon=1.0, delta=1e-6)
    for col in ("blob", "arr"):
        with pytest.raises(ParameterError, match="scalar keys"):
            H.stable_histogram(df, column=col, epsilon=1.0, delta=1e-6)
    with pytest.raises(ParameterError, match="column"):
        H.stable_histogram([1, 2], column="k", epsilon=1.0, delta=1e-6)
    empty = df.where("k < 0")
    with pytest.raises(ParameterError, match="non-empty"):
        H.stable_histogram(empty, column="k", epsilon=1.0, delta=1e-6)
    r = H.stable_histogram(empty, column="k", epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=0)
    assert r.keys.size == 0 and r.noisy_total is not None


def test_date_and_decimal_keys(spark) -> None:
    df = spark.createDataFrame([(datetime.date(2024, 1, 2), 1)] * 60, "d date, x int").selectExpr(
        "d", "CAST(1.50 AS DECIMAL(4,2)) AS dec")
    r = H.stable_histogram(df, column="d", epsilon=1.0, delta=1e-6, rng=0)
    assert r.keys.tolist() == [datetime.date(2024, 1, 2)] or r.keys.astype(str).tolist() == ["2024-01-02"]
    r = H.stable_histogram(df, column="dec", epsilon=1.0, delta=1e-6, rng=0)
    assert r.keys.tolist() == ["1.50"]  # exact text, as the DuckDB engine


# --------------------------------------------------------------------------------------------
# the command line: privagg histogram --engine spark
# --------------------------------------------------------------------------------------------


def _cli(*args: object):
    from click.testing import CliRunner

    from privagg.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def visits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    keys = ["a"] * 400 + ["b"] * 300 + ["c"] + [None] * 5
    path = tmp_path_factory.mktemp("cli") / "visits.parquet"
    pq.write_table(pa.table({"code": pa.array(keys, pa.string())}), path)
    return path


def test_cli_spark_same_output_and_ledger_as_duckdb(spark, visits: Path, tmp_path: Path) -> None:
    import json

    ledger = tmp_path / "b.db"
    Ledger.create(ledger, epsilon=10, delta=1e-4).close()
    common = ("histogram", visits, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json",
              "--ledger", ledger)
    duck = _cli(*common)
    sp = _cli(*common, "--engine", "spark", "--spark-conf", "spark.sql.shuffle.partitions=3")
    assert duck.exit_code == 0 and sp.exit_code == 0, sp.stderr
    a, b = json.loads(duck.stdout), json.loads(sp.stdout)
    assert set(a) == set(b) and a["keys"] == b["keys"] == ["a", "b"] and a["n"] == b["n"] == 706
    assert b["secure"] is True and b["threshold"] == a["threshold"] and b["charged"] == a["charged"]
    with Ledger(ledger) as opened:
        charges = opened.charges()
    assert len(charges) == 2
    table = _cli("histogram", visits, "--column", "code", "--epsilon", "1", "--domain",
                 _domain_file(tmp_path), "--engine", "spark", "--ledger", ledger)
    assert table.exit_code == 0, table.stderr
    assert "charged ε=1" in table.stderr and "zz" in table.stdout


def _domain_file(tmp_path: Path) -> Path:
    path = tmp_path / "domain.txt"
    path.write_text("code\na\nb\nzz\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("extra, name", [
    (("--engine", "spark", "--spark-conf", "novalue"), "spark-conf"),
    (("--spark-master", "local[2]"), "spark-master"),
    (("--engine", "spark", "--column", "nope"), "column"),
    (("--engine", "flink"), "engine"),
])
def test_cli_spark_errors_charge_nothing(spark, visits: Path, tmp_path: Path, extra: tuple, name: str) -> None:
    ledger = tmp_path / "b.db"
    Ledger.create(ledger, epsilon=10, delta=1e-4).close()
    args = ["histogram", visits, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--ledger", ledger]
    if "--column" in extra:
        args = args[:2] + args[4:]
    result = _cli(*args, *extra)
    assert result.exit_code == 2 and f"'{name}'" in result.stderr
    with Ledger(ledger) as opened:
        assert opened.charges() == []


def test_cli_spark_refuses_csv(spark, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("code\na\n", encoding="utf-8")
    result = _cli("histogram", path, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--engine", "spark")
    assert result.exit_code == 2 and "Parquet" in result.stderr
