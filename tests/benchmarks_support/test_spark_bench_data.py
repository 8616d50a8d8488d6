"""The data of ``benchmarks/spark.py`` (no Spark here): without ``--units`` one key column, with it a
unit column in range whose rows per unit are skewed (low ids own more rows), so the user-level
section bounds real contributions. Deterministic assertions on 20,000 rows (the skew check's margin
is far beyond sampling noise: expected first-decile share 0.316 against the uniform 0.1)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load():  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location("bench_spark", BENCHMARKS / "spark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_write_data_with_and_without_units(tmp_path: Path) -> None:
    b = _load()
    plain, with_units = tmp_path / "a.parquet", tmp_path / "b.parquet"
    b.write_data(plain, 20_000, 100)
    b.write_data(with_units, 20_000, 100, units=1000)
    con = duckdb.connect()
    assert [c[0] for c in con.sql(f"DESCRIBE SELECT * FROM '{plain}'").fetchall()] == ["k"]
    n, lo, hi, first_decile = con.execute(
        f"SELECT count(*), min(u), max(u), avg((u < 100)::INT) FROM '{with_units}'").fetchall()[0]
    assert n == 20_000 and lo >= 0 and hi < 1000
    assert first_decile > 0.25  # skewed: uniform ids would give 0.1
