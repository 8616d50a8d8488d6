"""``private_kmeans`` on a Spark DataFrame (local mode): the coreset strategy's exact counts and
sums in Spark are the local ones bit for bit; the stable histograms' noise is drawn in the tasks
with the local law (tested), and apart from it the seeded release is the local code's (replay);
sums are DECIMAL; errors come before any Spark job and any charge (sample and aggregate:
tests/engines/test_spark_aggregate_kmeans.py).

One SparkSession for all Spark tests (tests/engines/conftest.py).
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
from privagg.engines.spark_kmeans import SparkKMeansPoints  # noqa: E402
from privagg.errors import ParameterError  # noqa: E402
from privagg.mechanisms import kmeans as K  # noqa: E402
from privagg.mechanisms import mean as M  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

BIG = 1.7e308


def mixture(n: int, d: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    truth = g.normal(0.0, 40.0, size=(3, d))
    return (truth[:, None, :] + g.normal(size=(3, n // 3, d))).reshape(-1, d)


@np.errstate(all="ignore")
def test_exact_counts_and_sums_identical_to_numpy(spark) -> None:
    """Every seam method on NaN/±inf/NULL rows, rows near the float max and 3 partitions: Spark
    returns exactly the numpy integers (and cells in the same order)."""
    g = np.random.default_rng(5)
    x = np.concatenate([g.normal(0.0, 3.0, size=(1500, 3)), g.normal(50.0, 1.0, size=(1500, 3))])
    x[:4] = [[BIG, -BIG, 0.0], [-BIG, BIG, BIG], [1e300, 2.0, -1e300], [0.0, -0.0, 0.0]]
    raw = x.copy()
    raw[4:8] = [[np.nan, 1.0, 1.0], [np.inf, 0.0, 0.0], [1.0, -np.inf, 1.0], [1.0, np.nan, 1.0]]  # row 7: NULL
    rows = [[None if (i == 7 and j == 1) else float(v) for j, v in enumerate(r)] for i, r in enumerate(raw)]
    df = spark.createDataFrame(rows, "a double, b double, c double").repartition(3)
    local = K.ArrayKMeansPoints(M._check_points("private_kmeans", raw))
    assert local.count() == 3000 - 4
    with sp.points_of("private_kmeans", df, None, None, 1, 1, lambda: None) as (src, _, _):
        spk = SparkKMeansPoints.of(src)
        assert spk.count() == local.count()
        proj = g.normal(0.0, 0.5, size=(3, 2))
        mult = g.integers(1, 2**63, size=3, dtype=np.uint64) | np.uint64(1)
        for p, shift, m in [(None, g.random(3), mult), (proj, g.random(2), mult[:2])]:
            sides = np.array([K._level_side(j) for j in (-8, 0, 9, 40)])
            got, want = spk.cell_scores(p, shift, sides, m, 5), local.cell_scores(p, shift, sides, m, 5)
            assert [a.tolist() for a in got] == [a.tolist() for a in want] and want[0].sum() > 0
            got_cells, got_counts = spk.cell_counts(p, shift, 0.5)
            cells, counts = local.cell_counts(p, shift, 0.5)
            assert np.array_equal(got_cells, cells) and got_counts.tolist() == counts.tolist()
            assert counts.sum() <= local.count() and cells.shape[0] > 10
        u = g.random(3)
        got = spk.column_cell_counts(2.0, u)
        want = local.column_cell_counts(2.0, u)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)) and want[2].sum() == 3 * local.count()
        refs = np.array([[0.0, 0.0, 0.0], [50.0, 50.0, 50.0], [BIG, BIG, BIG]])
        for p, lc, radii in [(None, refs, np.array([4.0, 2.0, 1.0])),
                             (proj, refs @ proj * 0.25, np.array([2.0**-30, 1e6, 2.0**1000]))]:
            sizes, sums = spk.cluster_sums(p, lc, refs, radii, -M.SUM_BITS)
            want_sizes, want_sums = local.cluster_sums(p, lc, refs, radii, -M.SUM_BITS)
            assert sizes.tolist() == want_sizes.tolist() and sums.tolist() == want_sums.tolist()
            assert sizes.sum() == local.count() and all(isinstance(v, int) for v in sums.ravel())


def test_seeded_release_is_the_local_code_but_the_task_noise(spark, monkeypatch) -> None:
    """Same seed → the Spark release equals the local coreset strategy on the same rows with the
    same driver generator, bit for bit, once the two stable histograms' outputs drawn in the
    tasks (kept cells, kept per-column bins) are replayed into the local code; the driver's
    generator never draws that noise. d = 12 > D_CORE: projected, so every seam method runs (the
    anchor, labels in both spaces). Negative controls: the local code drawing the noise itself
    (no replay), and another driver seed, give other releases."""
    d = 12
    x = mixture(6000, d, 30 + d)
    df = spark.createDataFrame(x.tolist(), ", ".join(f"c{j} double" for j in range(d))).repartition(3)
    recorded: list[tuple[str, tuple]] = []
    for name in ("noisy_cells", "noisy_column_cells"):
        method = getattr(SparkKMeansPoints, name)

        def spy(self, *args, _method=method, _name=name):
            out = _method(self, *args)
            recorded.append((_name, out))
            return out

        monkeypatch.setattr(SparkKMeansPoints, name, spy)
    got = K.private_kmeans(df, 3, epsilon=1.0, delta=1e-6, rng=99)
    assert [n for n, _ in recorded] == ["noisy_cells", "noisy_column_cells"]
    first = list(recorded)

    class Replay(K.ArrayKMeansPoints):
        def noisy_cells(self, *args):
            return dict(first)["noisy_cells"]

        def noisy_column_cells(self, *args):
            return dict(first)["noisy_column_cells"]

    def local(seed: int, source: type) -> K.KMeansRelease:
        _, gen, secure = se.task_randomness(seed, "private_kmeans")
        return K._private_kmeans_coreset(source(x), 3, 1.0, 1e-6, (gen, secure), None)

    want = local(99, Replay)
    assert got.ok and want.ok and got.strategy == "coreset"
    for name in ("n_hat", "cell_side", "coreset_size", "epsilon", "delta", "secure"):
        assert getattr(got, name) == getattr(want, name), name
    assert np.array_equal(got.centers, want.centers)
    assert not np.array_equal(local(99, K.ArrayKMeansPoints).centers, got.centers)
    assert not np.array_equal(local(100, Replay).centers, got.centers)


def _p_keep(scale: float, margin: int) -> float:
    """P[Z >= margin] for Z ~ DLap(scale), margin >= 1: q^margin/(1 + q), q = e^{−1/scale}."""
    q = np.exp(-1.0 / scale)
    return q**margin / (1 + q)


def test_noise_in_the_tasks_has_the_local_law(spark) -> None:
    """The coreset histogram's noise drawn in the tasks: 20,000 cells of exactly one row each
    (one Spark job, 4 partitions), scale 2, threshold 2, so a cell is kept iff Z >= 1 and its
    noisy count is 1 + Z. Seed 8675309 (printed in the assertion). The kept fraction is within
    4.5 sd of P[Z >= 1] = 0.3775 (false failure ≈ 7·10⁻⁶), and among kept cells the fraction with
    Z >= 2 within 4.5 sd of q = e^{−1/2}. Only kept cells come back (every returned count >= T).
    A second noise stage of the same source draws from new streams; a new source with the same
    seed reproduces the first.
    Negative control: the law at scale 1.6 (×0.8) is rejected by the same test (its kept
    fraction 0.3487 is 8.4 sd away)."""
    m = 20000
    x = np.column_stack([np.arange(m) + 0.5, np.full(m, 0.5)])
    df = spark.createDataFrame(x.tolist(), "a double, b double").repartition(4)
    with sp.points_of("private_kmeans", df, None, None, 1, 8675309, lambda: None) as (src, gen, _):
        spk = SparkKMeansPoints.of(src)
        state = gen.bit_generator.state
        cells, noisy = spk.noisy_cells(None, np.zeros(2), 1.0, 2, 2, gen)
        assert gen.bit_generator.state == state  # the driver's generator draws nothing
        exact_cells, exact = spk.cell_counts(None, np.zeros(2), 1.0)
        other = spk.noisy_cells(None, np.zeros(2), 1.0, 2, 2, gen)  # a second stage: new streams
        again = SparkKMeansPoints.of(src).noisy_cells(None, np.zeros(2), 1.0, 2, 2, gen)
    assert not np.array_equal(other[0], cells)
    assert np.array_equal(again[0], cells) and np.array_equal(again[1], noisy)  # seeded: reproducible
    assert exact.tolist() == [1] * m
    assert noisy.min() >= 2 and np.all(np.isin(cells[:, 0], exact_cells[:, 0]))
    assert np.array_equal(cells, cells[np.lexsort(cells.T[::-1])])

    def passes(scale: float) -> bool:
        p1 = _p_keep(scale, 1)
        kept = cells.shape[0] / m
        ok1 = abs(kept - p1) <= 4.5 * np.sqrt(p1 * (1 - p1) / m)
        q = np.exp(-1.0 / scale)
        deeper = float(np.mean(noisy >= 3))
        ok2 = abs(deeper - q) <= 4.5 * np.sqrt(q * (1 - q) / cells.shape[0])
        return bool(ok1 and ok2)

    assert passes(2.0), f"seed 8675309: kept {cells.shape[0]}/{m}"
    assert not passes(1.6), "negative control (scale ×0.8) not detected"


def test_parameter_errors_and_refusals_before_any_spark_job(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType

    secret = 918273.5
    bad = F.udf(lambda v: (_ for _ in ()).throw(ValueError(f"value {v}")) if v == secret else v, DoubleType())
    df = spark.createDataFrame([(1.0, 2.0, "x"), (secret, 1.0, "y")], "a double, b double, s string")
    df = df.withColumn("a", bad("a"))
    ledger = tmp_path / "l.db"
    Ledger.create(ledger, epsilon=10, delta=1e-3).close()
    sc = spark.sparkContext
    sc.setJobGroup("privagg-kmeans-errors", "errors", interruptOnCancel=False)
    ab = ["a", "b"]
    cases = [
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, radius=-1.0), "radius"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, parts=5), "parts"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, radius=1.0, strategy="coreset"), "strategy"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, strategy="fast"), "strategy"),
        (dict(k=0, epsilon=1.0, delta=1e-6, columns=ab), "'k'"),
        (dict(k=2, epsilon=0.0, delta=1e-6, columns=ab), "epsilon"),
        (dict(k=2, epsilon=1.0, delta=2.0, columns=ab), "delta"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, n_init=0), "n_init"),
        (dict(k=2, epsilon=1.0, delta=1e-6), "'s' of type string"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=["nope"]), "columns"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, units="nope"), "units"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, units=3), "units"),
        (dict(k=2, epsilon=1.0, delta=1e-6, columns=ab, rng="seed"), "rng"),
    ]
    with Ledger(ledger) as book:
        for kwargs, text in cases:
            k = kwargs.pop("k")
            with pytest.raises(ParameterError, match=text) as info:
                K.private_kmeans(df, k, ledger=book, **kwargs)
            assert str(secret) not in str(info.value)
        with pytest.raises(ParameterError, match="Spark DataFrame"):
            K.private_kmeans(np.zeros((3, 2)), 2, epsilon=1.0, delta=1e-6, columns=["a"])
        assert sc.statusTracker().getJobIdsForGroup("privagg-kmeans-errors") == []
        with pytest.raises(ParameterError, match="Spark failed") as info:  # job 1 fails before the charge
            K.private_kmeans(df, 2, columns=ab, epsilon=1.0, delta=1e-6, ledger=book)
        assert "918273" not in str(info.value)
        assert len(book.charges()) == 0
    sc.setJobGroup("other", "other")


def test_cli_kmeans_engine_spark(spark, tmp_path: Path) -> None:
    """Few rows (n̂ below the public floor: ⊥ after the count, one Spark job): the output, charge
    and errors of the Spark engine are those of DuckDB."""
    x = mixture(90, 2, 8)
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "name": ["n"] * x.shape[0]}), path)
    runner = CliRunner()
    base = ["kmeans", str(path), "--columns", "a,b", "--k", "3", "--epsilon", "1", "--delta", "1e-6", "--json"]
    ledger = tmp_path / "b.db"
    Ledger.create(ledger, epsilon=10, delta=1e-4).close()
    out = {}
    for engine in ("duckdb", "spark"):
        res = runner.invoke(cli, [*base, "--engine", engine, "--ledger", str(ledger)])
        assert res.exit_code == 0, res.output
        out[engine] = json.loads(res.stdout)
    assert out["spark"].keys() == out["duckdb"].keys() and out["spark"]["charged"] == out["duckdb"]["charged"]
    assert out["spark"]["strategy"] == "coreset" and not out["spark"]["ok"] and "n̂ =" in out["spark"]["reason"]
    assert out["spark"]["epsilon"] == out["duckdb"]["epsilon"]
    for extra, name in [(["--privacy-unit", "nope"], "privacy-unit"), (["--radius", "-2"], "radius"),
                        (["--columns", "a,name"], "columns"), (["--spark-conf", "novalue"], "spark-conf")]:
        res = runner.invoke(cli, [*base, "--engine", "spark", "--ledger", str(ledger), *extra])
        assert res.exit_code != 0 and name in res.output, res.output
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2  # the errors charged nothing
    res = runner.invoke(cli, [*base, "--spark-master", "local[1]"])
    assert res.exit_code != 0 and "with --engine spark only" in res.output
