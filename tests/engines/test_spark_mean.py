"""``private_mean`` on a Spark DataFrame (local mode): the rows, sums and histograms of the Spark
engine are the local ones bit for bit, the seeded release is the local code's, the subsample is
drawn in the tasks with the local law, sums are exact beyond 2^63, errors come before any job.

One SparkSession for all Spark tests (tests/engines/conftest.py). Statistical test: fixed seed
(printed), false-failure rate ≤ 1e-3, with a negative control.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from click.testing import CliRunner  # noqa: E402

from privagg.accounting import Ledger  # noqa: E402
from privagg.cli.main import cli  # noqa: E402
from privagg.engines import spark as se  # noqa: E402
from privagg.engines import spark_points as sp  # noqa: E402
from privagg.engines.duckdb_numeric import read_numeric_columns  # noqa: E402
from privagg.errors import ParameterError  # noqa: E402
from privagg.mechanisms import mean as M  # noqa: E402
from privagg.mechanisms.kmeans import private_kmeans  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

BIG = 1.7e308


@pytest.fixture(scope="module")
def numeric_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ints (with 2^53 + 1, which rounds), doubles with NaN, ±inf, NULL and values near the float max."""
    rng = np.random.default_rng(11)
    m = 3000
    a = rng.integers(-1000, 1000, size=m)
    a[:3] = [2**53 + 1, -(2**62), 2**62 + 12345]
    b = rng.normal(5.0, 3.0, size=m)
    b[3:9] = [np.nan, np.inf, -np.inf, BIG, -BIG, 1e300]
    c = rng.standard_cauchy(size=m) * 100
    table = pa.table({"a": pa.array(a, mask=np.arange(m) == 10), "b": pa.array(b),
                      "c": pa.array(c, mask=np.arange(m) == 11), "s": pa.array(["x"] * m)})
    path = tmp_path_factory.mktemp("spark-mean") / "numeric.parquet"
    pq.write_table(table, path, row_group_size=700)
    return path


def _local(path: Path, cols: list[str]) -> M.ArrayPoints:
    return M.ArrayPoints(M._check_points("private_mean", read_numeric_columns(path, cols)))


@np.errstate(all="ignore")  # the local functions overflow to inf near the float max (as in the mechanism)
def test_exact_sums_and_counts_identical_to_numpy_and_duckdb(spark, numeric_file: Path) -> None:
    cols = ["a", "b", "c"]
    duck = _local(numeric_file, cols)
    arrays = pq.read_table(numeric_file).select(cols).to_pandas().to_numpy(dtype=np.float64, na_value=np.nan)
    numpy_src = M.ArrayPoints(M._check_points("private_mean", arrays))
    df = spark.read.parquet(str(numeric_file)).repartition(3)
    with sp.points_of("private_mean", df, cols, None, 1, 1, lambda: None) as (src, _, _):
        assert src.count() == duck.count() == numpy_src.count() == 3000 - 5  # NaN, ±inf, 2 NULL rows
        cases = [(np.array([0.0, 5.0, 0.0]), 40.0), (np.array([3.0, -2.0, 1.0]), 2.5**40),
                 (np.array([1.0, -BIG, 2.0]), 1e-3)]
        for center, radius in cases:
            e = M._sum_exponent(radius)
            got = src.clipped_integer_sum(center, radius, e)
            assert got.tolist() == duck.clipped_integer_sum(center, radius, e).tolist()
            assert got.tolist() == numpy_src.clipped_integer_sum(center, radius, e).tolist()
        edges = M.clip_edges(40.0, 3000)
        assert src.distance_bins(cases[0][0], edges).tolist() == duck.distance_bins(cases[0][0], edges).tolist()
        keys = M.row_keys(3, np.random.default_rng(5))
        counts = src.scale_counts(keys)
        assert counts.tolist() == duck.scale_counts(keys).tolist() and counts.sum() > 0
        exps = np.array([3, -1, 0])
        assert (src.scaled(exps).clipped_integer_sum(cases[0][0], 64.0, M._sum_exponent(64.0)).tolist()
                == duck.scaled(exps).clipped_integer_sum(cases[0][0], 64.0, M._sum_exponent(64.0)).tolist())


def test_decimal_sums_exact_beyond_long(spark) -> None:
    """The partial sums are added as DECIMAL(38, 0): 8·2^62 + 3 = 2^65 + 3 exactly (a LONG sum fails
    under ANSI or wraps without it)."""
    from pyspark.sql.types import DecimalType, StructField, StructType

    from decimal import Decimal

    rows = [(Decimal(2**62), Decimal(-(2**62) + i)) for i in range(8)]
    partials = spark.createDataFrame(rows, StructType([StructField("s0", DecimalType(38, 0)),
                                                       StructField("s1", DecimalType(38, 0))]))
    source = sp.SparkPoints(partials, 2, 0, se.TaskRandomness(), "private_mean")
    assert source.decimal_sums(partials, ["s0", "s1"]).tolist() == [2**65, -(2**65) + 28]


@np.errstate(all="ignore")
def test_far_rows_near_the_float_max(spark) -> None:
    """Rows at ±1.7e308 around a far center: finite, exact terms, the same as numpy (no overflow)."""
    x = np.array([[BIG, -BIG], [-BIG, BIG], [BIG, BIG], [1e308, 0.0]] * 50)
    df = spark.createDataFrame(x.tolist(), "a double, b double")
    with sp.points_of("private_mean", df, None, None, 1, 1, lambda: None) as (src, _, _):
        for center, radius in [(np.array([BIG, BIG]), 8.0), (np.array([-BIG, 0.0]), 2.0**1020)]:
            e = M._sum_exponent(radius)
            got = src.clipped_integer_sum(center, radius, e)
            assert got.tolist() == M.ArrayPoints(x).clipped_integer_sum(center, radius, e).tolist()
            assert all(abs(v) <= 200 * 2**38 for v in got)


def test_seeded_release_is_the_local_code(spark, numeric_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same seed → the Spark release equals the local mechanism run on the same rows, with the
    subsample the tasks drew and the driver's generator: every other step is the local code.
    Negative control: another driver stream gives another release."""
    rng = np.random.default_rng(21)
    # n̂·ε >= COORD_SAMPLE·d: the FriendlyCore plan
    # (the coordinate plan: test_seeded_coordinate_release_is_the_local_code)
    x = rng.normal([10.0, -3.0], [1.0, 50.0], size=(6000, 2))
    df = spark.createDataFrame(x.tolist(), "u double, v double").repartition(3)
    drawn: list[np.ndarray] = []
    real = sp.SparkPoints.poisson_sample
    monkeypatch.setattr(sp.SparkPoints, "poisson_sample",
                        lambda self, q, gen: drawn.append(real(self, q, gen)) or drawn[-1])
    got = M.private_mean(df, epsilon=1.0, delta=1e-6, rng=123, m_locate=1000)
    assert got.ok and got.scales is not None and len(drawn) == 1  # the scale step ran, on Spark
    assert 700 < drawn[0].shape[0] < 1300  # q = 1000/n̂
    assert got.clip_rule != "coordinate"

    class Recorded(M.ArrayPoints):
        def poisson_sample(self, rate: float, gen: np.random.Generator) -> np.ndarray:
            return self._sample  # what the Spark tasks drew

        def scaled(self, exponents: np.ndarray) -> Recorded:
            out = Recorded(M._finite(np.ldexp(self.x, -exponents)))
            out._sample = self._sample
            return out

    def local(seed: int) -> M.MeanRelease:
        src = Recorded(x)
        src._sample = drawn[0]
        _, gen, secure = se.task_randomness(seed, "private_mean")
        return M._private_mean(src, 1.0, 1e-6, None, 0.0, (gen, secure), "auto", None, 1000)  # the default calibration

    want = local(123)
    for name in ("ok", "n_hat", "radius", "clip_radius", "outside", "clip_rule", "epsilon", "delta"):
        assert getattr(got, name) == getattr(want, name), name
    for name in ("mean", "center", "scales"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert not np.array_equal(local(124).mean, got.mean)


def test_subsample_law_and_independent_partition_streams(spark) -> None:
    """Each of 4 partitions holds the same 5000 rows: the seeded tasks keep different rows (one
    stream per partition), each partition's kept count is Binomial(5000, q) (|z| <= 3.7 each,
    false failure < 1e-3 in all). Negative control: one seed for every partition keeps the same rows."""
    seed = 2024
    print(f"seed={seed}")
    base = np.arange(5000, dtype=np.float64)
    rdd = spark.sparkContext.parallelize([(float(v),) for v in base], 1)
    df = spark.createDataFrame(rdd.union(rdd).union(rdd).union(rdd), "a double")
    assert df.rdd.getNumPartitions() == 4
    q = 0.1
    randomness, gen, _ = se.task_randomness(seed, "test")

    def kept_sets(r: se.TaskRandomness) -> list[np.ndarray]:
        with sp.points_of("private_mean", df, None, None, 1, 1, lambda: None) as (src, _, _):
            src.randomness = r
            sample = src.poisson_sample(q, gen)[:, 0]
        # the partitions come back in order, each in increasing a: split where a decreases
        cuts = np.flatnonzero(np.diff(sample) < 0) + 1
        return np.split(sample, cuts)

    sets = kept_sets(randomness)
    assert len(sets) == 4
    sd = np.sqrt(5000 * q * (1 - q))
    assert all(abs(s.size - 5000 * q) <= 3.7 * sd for s in sets), [s.size for s in sets]
    assert all(not np.array_equal(sets[i], sets[j]) for i in range(4) for j in range(i))

    class OneSeed(se.TaskRandomness):
        def generator(self, partition: int) -> np.random.Generator:
            return super().generator(0)

    same = kept_sets(OneSeed(randomness.entropy, randomness.spawn_key))
    assert all(np.array_equal(same[0], s) for s in same[1:])  # the control fails the test above


def test_parameter_errors_before_any_spark_job(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType

    secret = 918273.5
    bad = F.udf(lambda v: (_ for _ in ()).throw(ValueError(f"value {v}")) if v == secret else v, DoubleType())
    df = spark.createDataFrame([(1.0, "x"), (secret, "y")], "a double, s string").withColumn("a", bad("a"))
    ledger = tmp_path / "l.db"
    Ledger.create(ledger, epsilon=10, delta=1e-3).close()
    sc = spark.sparkContext
    sc.setJobGroup("privagg-mean-errors", "errors", interruptOnCancel=False)
    cases = [
        (dict(epsilon=0.0, delta=1e-6, columns=["a"]), "epsilon"),
        (dict(epsilon=1.0, delta=2.0, columns=["a"]), "delta"),
        (dict(epsilon=1.0, delta=1e-6, radius=-1.0, columns=["a"]), "radius"),
        (dict(epsilon=1.0, delta=1e-6, calibration="x", columns=["a"]), "calibration"),
        (dict(epsilon=1.0, delta=1e-6, m_locate=3, columns=["a"]), "m_locate"),
        (dict(epsilon=1.0, delta=1e-6, columns=["s"]), "'s' of type string"),
        (dict(epsilon=1.0, delta=1e-6), "'s' of type string"),  # default: every column
        (dict(epsilon=1.0, delta=1e-6, columns=["a", "a"]), "columns"),
        (dict(epsilon=1.0, delta=1e-6, columns=["nope"]), "columns"),
        (dict(epsilon=1.0, delta=1e-6, columns=["a"], units="nope"), "units"),  # no such column
        (dict(epsilon=1.0, delta=1e-6, columns=["a"], units=3), "units"),  # not a column name
        (dict(epsilon=1.0, delta=1e-6, columns=["a", "s"], units="s"), "columns"),  # the unit is no point column
        (dict(epsilon=1.0, delta=1e-6, columns=["a"], max_rows_per_unit=2), "max_rows_per_unit"),
        (dict(epsilon=1.0, delta=1e-6, columns=["a"], rng="seed"), "rng"),
    ]
    with Ledger(ledger) as book:
        for kwargs, text in cases:
            with pytest.raises(ParameterError, match=text.replace("(", r"\(")) as info:
                M.private_mean(df, ledger=book, **kwargs)
            assert str(secret) not in str(info.value)
        with pytest.raises(ParameterError, match="Spark DataFrame"):
            M.private_mean(np.zeros((3, 2)), epsilon=1.0, delta=1e-6, columns=["a"])
        with pytest.raises(ParameterError, match="radius"):  # sample and aggregate: checked before any job
            private_kmeans(df, 2, epsilon=1.0, delta=1e-6, columns=["a"], radius=-1.0)
        assert sc.statusTracker().getJobIdsForGroup("privagg-mean-errors") == []
        # a DataFrame Spark cannot evaluate: job 1 fails before the charge; Spark's text (the value) is not shown
        with pytest.raises(ParameterError, match="Spark failed") as info:
            M.private_mean(df, columns=["a"], epsilon=1.0, delta=1e-6, ledger=book)
        assert str(secret) not in str(info.value) and "918273" not in str(info.value)
        assert len(book.charges()) == 0
    sc.setJobGroup("other", "other")


def test_cli_mean_engine_spark(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    x = rng.normal([100.0, -20.0], 2.0, size=(3000, 2))
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "name": ["n"] * 3000}), path)
    runner = CliRunner()
    base = ["mean", str(path), "--columns", "a,b", "--epsilon", "1", "--delta", "1e-6", "--json"]
    out = {}
    ledger = tmp_path / "b.db"
    Ledger.create(ledger, epsilon=10, delta=1e-4).close()
    for engine in ("duckdb", "spark"):
        res = runner.invoke(cli, [*base, "--engine", engine, "--ledger", str(ledger)])
        assert res.exit_code == 0, res.output
        out[engine] = json.loads(res.stdout)
    with Ledger(ledger) as opened:
        charges = opened.charges()
    assert len(charges) == 2 and out["spark"]["charged"] == out["duckdb"]["charged"]
    assert out["spark"].keys() == out["duckdb"].keys()
    assert out["spark"]["ok"] and np.allclose(out["spark"]["mean"], [100.0, -20.0], atol=0.5)
    assert out["spark"]["epsilon"] == out["duckdb"]["epsilon"]
    for extra, name in [(["--privacy-unit", "nope"], "privacy-unit"), (["--columns", "a,name"], "columns"),
                        (["--max-rows-per-unit", "2"], "max_rows_per_unit"),
                        (["--spark-conf", "novalue"], "spark-conf")]:
        res = runner.invoke(cli, [*base, "--engine", "spark", "--ledger", str(ledger), *extra])
        assert res.exit_code != 0 and name in res.output, res.output
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2  # the errors charged nothing
    res = runner.invoke(cli, [*base, "--spark-master", "local[1]"])
    assert res.exit_code != 0 and "with --engine spark only" in res.output


def test_scale_counts_identical_to_numpy_on_duplicated_rows(spark) -> None:
    """Many copies (integers 0..3, copies spread over partitions), ±0.0 (distinct bits: Spark
    would equate them in a grouping on the doubles) and a duplicate-free control: the occurrence
    index and the order are the local ones, so the scale counts are equal; before the fix the
    local counts were those of copies side by side (most differences 0)."""
    rng = np.random.default_rng(23)
    x = rng.integers(0, 4, size=(1500, 2)).astype(float)
    x[:40] = [[0.0, -0.0]] * 20 + [[-0.0, 0.0]] * 20
    x = x[rng.permutation(x.shape[0])]
    y = rng.normal(size=(400, 2))
    for rows in (x, y):
        df = spark.createDataFrame([tuple(map(float, r)) for r in rows], ["a", "b"]).repartition(4)
        keys = M.row_keys(2, np.random.default_rng(5))
        with sp.points_of("private_mean", df, ["a", "b"], None, 1, 1, lambda: None) as (src, _, _):
            got = src.scale_counts(keys)
        local = M.ArrayPoints(rows).scale_counts(keys)
        assert got.tolist() == local.tolist()
    tied = M.ArrayPoints(x).scale_counts(keys)[:, 0]  # k = −50: only the zero differences
    assert (tied < 0.4 * x.shape[0]).all(), tied  # ~1/4 of the pairs per column; before the fix ~98 %


@np.errstate(all="ignore")
def test_coordinate_plan_accesses_identical_to_numpy(spark, numeric_file: Path) -> None:
    """The data accesses of the small-sample coordinate plan (mean_small.coordinate_mean) on Spark
    return the local integers: counts below public edges (octave
    cells with ±∞ and ±0 edges, subcells, duplicates, edges at the data), one column's exact
    clipped sums, the count outside a box; rows with NaN, ±inf, NULL dropped, 1.7e308, 2^62,
    three partitions (and the ±1.7e308 rows of test_far_rows_near_the_float_max)."""
    from privagg.mechanisms import mean_small as S

    cols = ["a", "b", "c"]
    local = _local(numeric_file, cols)
    far = np.array([[BIG, -BIG], [-BIG, BIG], [BIG, BIG], [1e308, 0.0], [0.0, -0.0]] * 40)
    lo, hi, _ = S.octave_cells(-3)
    octave = np.concatenate([lo, hi])
    data_edges = np.sort(local.x[:50, 1])
    edges = [octave, np.concatenate([data_edges, data_edges[::-1], [-0.0, 0.0, np.inf, -np.inf]]),
             np.zeros(0)]
    df = spark.read.parquet(str(numeric_file)).repartition(3)
    far_df = spark.createDataFrame(far.tolist(), "u double, v double").repartition(3)
    with (sp.points_of("private_mean", df, cols, None, 1, 1, lambda: None) as (src, _, _),
          sp.points_of("private_mean", far_df, None, None, 1, 1, lambda: None) as (far_src, _, _)):
        below = src.below_counts(edges)
        want = local.below_counts(edges)
        assert [b.tolist() for b in below] == [w.tolist() for w in want]
        assert below[1][-2:].tolist() == [local.count(), 0] and below[2].size == 0
        assert want[0].tolist() == np.searchsorted(np.sort(local.x[:, 0]), octave, side="left").tolist()
        for j, (center, radius) in enumerate([(3.0, 2.0**40), (5.0, 40.0), (-BIG, 1e-3)]):
            e = M._sum_exponent(radius)
            c = np.array([center])
            assert src.column(j).d == 1
            assert (src.column(j).clipped_integer_sum(c, radius, e).tolist()
                    == M._clipped_integer_sum(local.x[:, j : j + 1], c, radius, e).tolist())
        for center, radii in [(np.array([0.0, 5.0, 0.0]), np.array([500.0, 6.0, 100.0])),
                              (np.array([0.0, BIG, 0.0]), np.array([2.0**62, BIG, 1e300]))]:
            n_out = src.outside_count(center, radii)
            assert n_out == local.outside_count(center, radii) and 0 < n_out < local.count()
        far_local = M.ArrayPoints(far)
        far_edges = [np.array([-BIG, -1e308, 0.0, BIG, np.inf]), np.array([-0.0, BIG])]
        assert ([b.tolist() for b in far_src.below_counts(far_edges)]
                == [b.tolist() for b in far_local.below_counts(far_edges)])
        for j in range(2):
            c = np.array([-BIG])
            assert (far_src.column(j).clipped_integer_sum(c, 8.0, M._sum_exponent(8.0)).tolist()
                    == far_local.column(j).clipped_integer_sum(c, 8.0, M._sum_exponent(8.0)).tolist())
        box = (np.array([BIG, 0.0]), np.array([1e308, 1e308]))
        assert far_src.outside_count(*box) == far_local.outside_count(*box) > 0


@pytest.mark.parametrize("d", [2, 1])
def test_seeded_coordinate_release_is_the_local_code(spark, d) -> None:
    """d = 2, n = 2000, ε = 1 (n̂·ε < COORD_SAMPLE·d), and d = 1, n = 5000 (0/1 with 5 % ones;
    n̂·ε < COORD_SAMPLE_1D): the Spark release is the small-sample
    coordinate plan with the local release for the same seed (the plan draws no task randomness:
    the driver's generator only; before the fix Spark ran the FriendlyCore plan). Negative
    control: another seed gives another release."""
    rng = np.random.default_rng(31)
    if d == 2:
        x = rng.normal([10.0, -3.0], [1.0, 50.0], size=(2000, 2))
        df = spark.createDataFrame(x.tolist(), "u double, v double").repartition(3)
    else:
        x = (rng.random((5000, 1)) < 0.05).astype(np.float64)
        df = spark.createDataFrame(x.tolist(), "u double").repartition(3)
    got = M.private_mean(df, epsilon=1.0, delta=1e-6, rng=123)

    def local(seed: int) -> M.MeanRelease:
        _, gen, secure = se.task_randomness(seed, "private_mean")
        return M._private_mean(M.ArrayPoints(x), 1.0, 1e-6, None, 0.0, (gen, secure), "auto", None, 1000)  # the default calibration

    want = local(123)
    assert got.ok and got.clip_rule == want.clip_rule == "coordinate"
    for name in ("ok", "n_hat", "radius", "clip_radius", "outside", "outside_sd", "clip_rule", "epsilon", "delta"):
        assert getattr(got, name) == getattr(want, name), name
    assert all(np.array_equal(g, w) for g, w in zip(got.noise, want.noise, strict=True))
    for name in ("mean", "center", "scales"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    if d == 2:
        assert np.allclose(got.mean, [10.0, -3.0], atol=[0.5, 20.0])
    else:  # the FriendlyCore plan released about 0 here (docs/utility/mean.md, the d = 1 gate)
        assert abs(got.mean[0] - x.mean()) < 0.02
    other = local(124)
    assert not np.array_equal(other.mean, got.mean)
