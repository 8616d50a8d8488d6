"""``privagg aggregate FILE --engine spark`` (issue 14 item 6): the same JSON release as
``--engine duckdb`` for the same seed and domain (record level), one ledger charge each, and the
Spark-only refusals (``--where``, a CSV dialect, ``--spark-master`` without ``--engine spark``, a
bad ``--spark-conf``) before anything is charged, with exit code 2 and no traceback.

One SparkSession for all Spark tests (tests/engines/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

pytest.importorskip("pyspark")

from privagg.accounting import Ledger  # noqa: E402
from privagg.cli.main import cli  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def test_cli_aggregate_engine_spark(spark, tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    n = 3000
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"ward": rng.choice(["A", "B", "C"], n), "age": rng.integers(18, 90, n).astype(float),
                             "cost": rng.lognormal(3.0, 1.0, n)}), path)
    dom = tmp_path / "dom.csv"
    dom.write_text("ward\nA\nB\nC\nZ\n", encoding="utf-8")
    ledger = tmp_path / "l.db"
    Ledger.create(ledger, epsilon=20, delta=1e-4).close()
    runner = CliRunner()
    base = ["aggregate", str(path), "--by", "ward", "--count", "--sum", "cost:0:200", "--mean", "age:0:120",
            "--quantile", "age:0.5:0:120", "--domain", str(dom), "--epsilon", "2", "--delta", "1e-6",
            "--seed", "5", "--json", "--ledger", str(ledger)]
    out = {}
    for engine in ("duckdb", "spark"):
        res = runner.invoke(cli, [*base, "--engine", engine])
        assert res.exit_code == 0, res.output
        out[engine] = json.loads(res.stdout)
    left = [o.pop("budget_left") for o in (out["duckdb"], out["spark"])]
    assert left[0]["epsilon"] == 18.0 and left[1]["epsilon"] == 16.0  # one charge of 2 each
    assert out["spark"] == out["duckdb"]  # keys, values, intervals, split, guarantee
    assert [g["ward"] for g in out["spark"]["groups"]] == ["A", "B", "C", "Z"]
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2
    refused = [(["--engine", "spark", "--where", "age > 30"], "where"),
               (["--engine", "spark", "--delimiter", ";"], "delimiter"),
               (["--engine", "spark", "--spark-conf", "novalue"], "spark-conf"),
               (["--engine", "spark", "--by", "nope"], "by"),
               (["--spark-master", "local[1]"], "with --engine spark only")]
    for extra, name in refused:
        res = runner.invoke(cli, [*base, *extra])
        assert res.exit_code == 2 and name in res.output and "Traceback" not in res.output, (extra, res.output)
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2  # the refusals charged nothing


def test_cli_aggregate_engine_spark_unbounded_mean_and_quantile(spark, tmp_path: Path) -> None:
    """``--mean COL`` without bounds and ``--quantile COL:Q`` without bounds on Spark (the rows stay
    on the executors): exit 0, one charge, every domain group present; the count (drawn first)
    equals the DuckDB release for the same seed; the mean and the median are released near the
    truth (the mean's subsample is drawn in Spark's tasks, so it and the draws after it are not the
    DuckDB release's). Control: the DuckDB and Spark means differ (other subsample draws)."""
    rng = np.random.default_rng(13)
    n = 6000
    path = tmp_path / "v.parquet"
    ward = rng.choice(["A", "B"], n)
    age = np.where(ward == "A", rng.normal(40.0, 8.0, n), rng.normal(60.0, 8.0, n))
    pq.write_table(pa.table({"ward": ward, "age": age}), path)
    dom = tmp_path / "dom.csv"
    dom.write_text("ward\nA\nB\n", encoding="utf-8")
    ledger = tmp_path / "l.db"
    Ledger.create(ledger, epsilon=20, delta=1e-4).close()
    base = ["aggregate", str(path), "--by", "ward", "--count", "--mean", "age", "--quantile", "age:0.5",
            "--domain", str(dom), "--epsilon", "4", "--delta", "1e-6", "--seed", "5", "--json", "--ledger", str(ledger)]
    out = {}
    for engine in ("duckdb", "spark"):
        res = CliRunner().invoke(cli, [*base, "--engine", engine])
        assert res.exit_code == 0, res.output
        out[engine] = json.loads(res.stdout)
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2
    groups = {e: {g["ward"]: g for g in out[e]["groups"]} for e in out}
    assert sorted(groups["spark"]) == ["A", "B"]
    for w in ("A", "B"):
        s, d, rows = groups["spark"][w], groups["duckdb"][w], age[ward == w]
        assert s["count"] == d["count"]
        assert abs(s["mean_age"] - rows.mean()) < 1.0, (w, s["mean_age"], rows.mean())
        assert abs(s["q0.5_age"] - np.median(rows)) < 1.0, (w, s["q0.5_age"], np.median(rows))
        assert s["mean_age"] != d["mean_age"]  # control: the subsample was drawn in Spark
