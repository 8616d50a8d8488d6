"""``privagg histogram`` end to end on CSV and Parquet: JSON, table, plot, ledger, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli
from privagg.mechanisms import histogram as H

# 40 × "a", 30 × "b", 1 × "c", 5 × missing: T = 28 at ε = 1, δ = 1e-6 keeps a and b (without noise).
KEYS = ["a"] * 40 + ["b"] * 30 + ["c"] + [None] * 5
API_FIELDS = {"mechanism", "epsilon", "delta", "neighbors", "threshold", "keys", "counts", "frequencies", "error_bound"}


@pytest.fixture
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero noise, to check the counting path exactly (the noise itself is tested in tests/mechanisms)."""
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))


@pytest.fixture(params=["csv", "parquet"])
def data_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "csv":
        path = tmp_path / "visits.csv"
        lines = ["id,code"] + [f"{i},{'' if k is None else k}" for i, k in enumerate(KEYS)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path = tmp_path / "visits.parquet"
        pq.write_table(pa.table({"id": np.arange(len(KEYS)), "code": pa.array(KEYS, pa.string())}), path)
    return path


def invoke(*args: str | Path):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_stable_json_on_csv_and_parquet(no_noise: None, data_file: Path) -> None:
    result = invoke("histogram", data_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert API_FIELDS <= set(out)
    assert out["mechanism"] == "stable_histogram" and out["threshold"] == 28 and out["n"] == len(KEYS)
    assert out["keys"] == ["a", "b"] and out["counts"] == [40, 30]
    assert out["frequencies"] == pytest.approx([40 / 76, 30 / 76])
    assert out["epsilon"] == 1.0 and out["delta"] == 1e-6 and out["neighbors"] == "replace"
    assert out["secure"] is True and 0 < out["error_bound"] < 1
    assert result.stderr == ""


def test_laplace_with_domain_file_on_csv_and_parquet(no_noise: None, data_file: Path, tmp_path: Path) -> None:
    domain = tmp_path / "codes.txt"
    domain.write_text("code\nc\nz\na\nb\n", encoding="utf-8")  # header line = column name: skipped
    result = invoke("histogram", data_file, "--column", "code", "--epsilon", "0.5", "--domain", domain, "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["mechanism"] == "laplace_histogram" and out["delta"] == 0.0 and out["threshold"] is None
    assert out["keys"] == ["c", "z", "a", "b"] and out["counts"] == [1, 0, 40, 30]
    assert out["scale"] == 4.0  # 2/ε, replace-one


def test_integer_parquet_keys_and_domain_cast(no_noise: None, tmp_path: Path) -> None:
    path = tmp_path / "ages.parquet"
    pq.write_table(pa.table({"age": pa.array([30] * 5 + [7] * 2, pa.int64())}), path)
    domain = tmp_path / "ages.txt"
    domain.write_text("007\n30\n99\n", encoding="utf-8")
    result = invoke("histogram", path, "--column", "age", "--epsilon", "1", "--domain", domain, "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["keys"] == [7, 30, 99] and out["counts"] == [2, 5, 0]  # JSON numbers, cast in DuckDB


def test_noisy_release_is_consistent(data_file: Path) -> None:
    """With the real (secure) noise: only present keys, counts ≥ T, frequencies = counts / n."""
    result = invoke("histogram", data_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out["keys"]) <= {"a", "b", "c"}
    assert all(c >= 28 for c in out["counts"])
    assert out["frequencies"] == pytest.approx([c / len(KEYS) for c in out["counts"]])


def test_table_output_with_cap_and_plot(no_noise: None, tmp_path: Path) -> None:
    path = tmp_path / "many.parquet"
    keys = np.repeat(np.array([f"k{i:02d}" for i in range(40)]), np.arange(100, 140))
    pq.write_table(pa.table({"k": keys}), path)
    png = tmp_path / "out.png"
    result = invoke(
        "histogram", path, "--column", "k", "--epsilon", "1", "--delta", "1e-6", "--rows", "5", "--plot", png
    )
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    expected_lines = ("stable_histogram", "ε = 1, δ = 1e-06", "noisy count ≥ 28", "error bound (β = 0.05)", "secure")
    for expected in expected_lines:
        assert expected in text
    assert "k39" in text and "k00" not in text  # sorted by count, 5 rows shown
    assert "35 more keys" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ledger_is_charged_and_refuses_when_exhausted(no_noise: None, data_file: Path, tmp_path: Path) -> None:
    ledger_path = tmp_path / "budget.db"
    Ledger.create(ledger_path, epsilon=1.5, delta=1e-5).close()
    args = (
        "histogram", data_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json",
        "--ledger", ledger_path,
    )
    first = invoke(*args)
    assert first.exit_code == 0, first.stderr
    second = invoke(*args)
    assert second.exit_code == 3
    assert second.stdout == ""  # nothing released
    assert second.stderr.startswith("privagg: error: ") and second.stderr.count("\n") == 1
    with Ledger(ledger_path) as ledger:
        assert len(ledger.charges()) == 1


def test_empty_data_replace_is_an_error_add_remove_is_a_valid_empty_release(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("code\n", encoding="utf-8")
    base = ("histogram", path, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json")
    replace = invoke(*base)
    assert replace.exit_code == 2 and replace.stdout == ""
    assert replace.stderr.startswith("privagg: error: stable_histogram: ")
    added = invoke(*base, "--neighbors", "add_remove")
    assert added.exit_code == 0, added.stderr
    out = json.loads(added.stdout)
    assert out["keys"] == [] and out["counts"] == [] and out["n"] is None and out["neighbors"] == "add_remove"


def test_python_dash_m_exit_codes_and_no_traceback(data_file: Path) -> None:
    """The real process: ``python -m privagg`` exits 0, 2 (bad input) with one line and no traceback."""
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    ok = subprocess.run(
        [sys.executable, "-m", "privagg", "histogram", str(data_file), "--column", "code", "--epsilon", "1",
         "--delta", "1e-6", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["mechanism"] == "stable_histogram"
    bad = subprocess.run(
        [sys.executable, "-m", "privagg", "histogram", str(data_file), "--column", "nope", "--epsilon", "1",
         "--delta", "1e-6"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("privagg: error: histogram: parameter 'column' must be a column of the file")


def test_temporal_keys_are_iso_strings_in_json(no_noise: None, tmp_path: Path) -> None:
    import datetime as dt

    path = tmp_path / "times.parquet"
    stamps = [dt.datetime(2024, 1, 1, 12)] * 30 + [dt.datetime(2024, 1, 2)] * 2
    columns = {"ts": pa.array(stamps, pa.timestamp("ns")), "day": pa.array([s.date() for s in stamps])}
    pq.write_table(pa.table(columns), path)
    for column, expected in (("ts", "2024-01-01T12:00:00"), ("day", "2024-01-01")):
        result = invoke("histogram", path, "--column", column, "--epsilon", "1", "--delta", "1e-6", "--json")
        assert result.exit_code == 0, result.stderr
        keys = json.loads(result.stdout)["keys"]
        assert len(keys) == 1 and keys[0].startswith(expected)


def test_date_domain_aligns_with_date_keys(no_noise: None, tmp_path: Path) -> None:
    import datetime as dt

    path = tmp_path / "days.parquet"
    pq.write_table(pa.table({"day": pa.array([dt.date(2024, 1, 1)] * 3 + [dt.date(2024, 3, 1)])}), path)
    domain = tmp_path / "days.txt"
    domain.write_text("2024-03-01\n2024-01-01\n2024-01-02\n", encoding="utf-8")
    result = invoke("histogram", path, "--column", "day", "--epsilon", "1", "--domain", domain, "--json")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["keys"] == ["2024-03-01", "2024-01-01", "2024-01-02"] and out["counts"] == [1, 3, 0]
