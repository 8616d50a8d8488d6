"""User-level means and k-means on a Spark DataFrame (local mode): one vector per unit computed in
Spark (:mod:`privagg.engines.spark_units`) — exactly the local vectors when k covers every row,
stable (adding a unit changes no other unit's vector), uniform over a unit's rows — and the
releases, CLI output and ledger fields of ``units=`` / ``--privacy-unit`` with ``--engine spark``.

One SparkSession for all Spark tests (tests/engines/conftest.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from click.testing import CliRunner  # noqa: E402

from privagg import private_kmeans, private_mean  # noqa: E402
from privagg.accounting import Ledger  # noqa: E402
from privagg.cli.main import cli  # noqa: E402
from privagg.engines import spark as se  # noqa: E402
from privagg.engines.spark_units import unit_vector_frame  # noqa: E402
from privagg.engines.unit_rows import unit_vectors  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _vectors(spark, units: list, x: np.ndarray, k: int, secret: int) -> Counter:
    cols = [f"x{j}" for j in range(x.shape[1])]
    df = spark.createDataFrame([(u, *map(float, r)) for u, r in zip(units, x)],
                               "u string, " + ", ".join(f"{c} double" for c in cols)).repartition(3)
    info = se.describe_column(df, "u", name="units")
    rows = unit_vector_frame(df, cols, info, k, secret).collect()
    return Counter(tuple(float(v) for v in r) for r in rows)


def test_unit_vectors_exact_stable_and_uniform(spark) -> None:
    """(a) k >= every unit's rows: the vectors are the local ones exactly (values on a coarse grid,
    so every summation order gives the same doubles); non-finite rows are dropped first; −0.0 and
    0.0 are one value. (b) Adding a unit with 50 rows adds one vector and changes no other (k = 1
    and 2, same secret). (c) Uniform: 4,000 units of rows {0, 1}, k = 1, secret 20261201: the
    kept fraction of 1 is within 4.5 sd of 1/2 (false failure ≈ 7·10⁻⁶); negative control: the
    deterministic smallest-row rule (fraction 0) fails the same check. (d) The secret appears in
    no plan string."""
    g = np.random.default_rng(3)
    n = 600
    units = [f"u{i}" for i in g.integers(0, 150, n)]
    x = g.integers(-8, 8, size=(n, 2)) / 4.0
    x[:3] = [[np.nan, 1.0], [np.inf, 0.0], [-0.0, 0.25]]
    got = _vectors(spark, units, x, 1000, 12345)
    want = unit_vectors(np.where(x == 0, 0.0, x), np.array(units, dtype=object), 1000, 12345)
    assert got == Counter(tuple(map(float, r)) for r in want) and sum(got.values()) == len(set(units[3:]) | {units[2]})
    # (b) stability
    extra_u = units + ["new"] * 50
    extra_x = np.concatenate([x, g.normal(size=(50, 2))])
    for k in (1, 2):
        before = _vectors(spark, units, x, k, 777)
        after = _vectors(spark, extra_u, extra_x, k, 777)
        assert sum((after - before).values()) == 1 and not (before - after)
    # (c) uniformity
    m = 4000
    pair_units = [f"p{i}" for i in range(m) for _ in range(2)]
    pair_x = np.tile([[0.0], [1.0]], (m, 1))
    kept = _vectors(spark, pair_units, pair_x, 1, 20261201)

    def uniform(ones: int) -> bool:
        return abs(ones / m - 0.5) <= 4.5 * np.sqrt(0.25 / m)

    assert sum(kept.values()) == m and uniform(kept[(1.0,)]), f"secret 20261201: {kept}"
    assert not uniform(0)  # negative control: always the smallest row
    # the secret is in no plan string (a broadcast one-row frame, not a literal)
    df = spark.createDataFrame([("a", 1.0)], "u string, x0 double")
    secret = 8_070_450_532_247_928_831
    frame = unit_vector_frame(df, ["x0"], se.describe_column(df, "u", name="units"), 2, secret)
    plans = frame._jdf.queryExecution().toString()
    assert "xxhash64" in plans and str(secret) not in plans and str(secret - (1 << 64)) not in plans


def test_mean_and_kmeans_with_units_on_spark(spark, tmp_path: Path) -> None:
    """``units=`` on a Spark DataFrame: the release is over one vector per unit (n̂ near the number
    of units, not rows) and says its unit and k (k-means too); the CLI with
    ``--privacy-unit --engine spark`` gives the DuckDB engine's JSON fields and ledger entry."""
    g = np.random.default_rng(11)
    n_units = 6000  # n̂·ε above the small-sample plan's 2500·d: the FriendlyCore plan, fewer Spark jobs
    per = g.integers(1, 6, n_units)
    u = np.repeat(np.arange(n_units), per)
    x = g.normal(50.0, 2.0, size=u.size)
    y = g.normal(-3.0, 1.0, size=u.size)
    df = spark.createDataFrame(pa.table({"who": u.astype(str), "x": x, "y": y}).to_pandas()).repartition(3)
    r = private_mean(df, columns=["x", "y"], units="who", max_rows_per_unit=2, epsilon=1.0, delta=1e-6, rng=5)
    assert r.ok and r.unit == "who" and r.max_rows_per_unit == 2
    assert abs(r.n_hat - n_units) < 100 and u.size > 1.5 * n_units
    assert np.allclose(r.mean, [50.0, -3.0], atol=0.5)
    from privagg.engines.spark_points import point_columns

    assert point_columns(df, None, "who", where="private_mean") == ["x", "y"]  # default: every column but the unit
    small = df.where("CAST(who AS INT) < 100")  # 100 units: k-means is ⊥ after its count (one job)
    km = private_kmeans(small, 2, columns=["x", "y"], units="who", max_rows_per_unit=3, epsilon=1.0, delta=1e-6,
                        rng=6)
    assert km.unit == "who" and km.max_rows_per_unit == 3 and not km.ok and "n̂ =" in km.reason

    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"who": u.astype(str), "x": x, "y": y}), path)
    ledger = tmp_path / "b.db"
    Ledger.create(ledger, epsilon=10, delta=1e-4).close()
    base = ["mean", str(path), "--columns", "x,y", "--epsilon", "1", "--delta", "1e-6", "--json",
            "--privacy-unit", "who", "--max-rows-per-unit", "2", "--ledger", str(ledger)]
    out = {}
    for engine in ("duckdb", "spark"):
        res = CliRunner().invoke(cli, [*base, "--engine", engine])
        assert res.exit_code == 0, res.output
        out[engine] = json.loads(res.stdout)
    assert out["spark"].keys() == out["duckdb"].keys()
    for field in ("privacy_unit", "max_rows_per_unit", "neighbors", "rows_dropped", "epsilon", "delta", "charged"):
        assert out["spark"][field] == out["duckdb"][field], field
    assert out["spark"]["privacy_unit"] == "who" and out["spark"]["max_rows_per_unit"] == 2
    with Ledger(ledger) as opened:
        charges = opened.charges()
    assert len(charges) == 2
