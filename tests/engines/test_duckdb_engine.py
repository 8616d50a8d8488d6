"""The DuckDB engine: counts of CSV and Parquet files, schema errors, domain files, spilling."""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privagg import ParameterError
from privagg.engines import duckdb as engine

SECRET = "SECRET-record-91c2"


def _as_dict(kc) -> dict:
    return dict(zip(kc.keys.tolist(), kc.counts.tolist()))


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------- counting


def test_csv_counts_keys_as_text_and_missing_keys_only_in_n(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", "code,x\n007,1\nA01,2\n007,3\n,4\n7,5\n")
    kc = engine.count_file(path, "code")
    assert _as_dict(kc) == {"007": 2, "A01": 1, "7": 1}  # "007" and "7" stay distinct strings
    assert kc.n == 5  # the empty (NULL) key counts in n only
    assert kc.counts.dtype == np.int64


def test_parquet_keeps_types_and_drops_null_and_nan_keys(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(
        pa.table({"i": pa.array([3, 1, 3, None, 3], pa.int64()), "f": [1.5, 2.0, 1.5, None, math.nan]}), path
    )
    ints = engine.count_file(path, "i")
    assert ints.keys.dtype == np.int64
    assert _as_dict(ints) == {3: 3, 1: 1} and ints.n == 5
    floats = engine.count_file(path, "f")
    assert _as_dict(floats) == {1.5: 2, 2.0: 1} and floats.n == 5


def test_format_is_detected_from_magic_bytes_without_suffix(tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": ["a", "b", "a"]}), tmp_path / "data.bin")
    write_csv(tmp_path / "data.dat", "k\na\nb\na\n")
    assert engine.detect_format(tmp_path / "data.bin") == "parquet"
    assert engine.detect_format(tmp_path / "data.dat") == "csv"
    assert _as_dict(engine.count_file(tmp_path / "data.bin", "k")) == {"a": 2, "b": 1}
    assert _as_dict(engine.count_file(tmp_path / "data.dat", "k")) == {"a": 2, "b": 1}


def test_identifiers_and_paths_cannot_inject_sql(tmp_path: Path) -> None:
    odd = 'we"ird; DROP TABLE x; --'
    folder = tmp_path / "it's a folder"
    folder.mkdir()
    path = folder / "d.parquet"
    pq.write_table(pa.table({odd: ["a", "a", "b"], "other": [1, 2, 3]}), path)
    assert engine.quote_identifier(odd) == '"we""ird; DROP TABLE x; --"'
    assert _as_dict(engine.count_file(path, odd)) == {"a": 2, "b": 1}
    with pytest.raises(ParameterError, match="parameter 'column' must be a column of the file"):
        engine.count_file(path, 'other" FROM read_csv(\'/etc/passwd\') --')


def test_group_by_spills_to_disk_under_a_small_memory_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """10^6 distinct keys under a 64 MB limit: the limit is set on the connection, DuckDB spills
    (files appear in the private temporary folder, which is removed afterwards) and the counts
    are exact."""
    path = tmp_path / "many.parquet"
    con = duckdb.connect()
    con.sql(
        "COPY (SELECT 'key-' || (i % 1000000)::VARCHAR AS k FROM range(2000000) t(i)) TO $p (FORMAT parquet)",
        params={"p": str(path)},
    )
    con.close()
    seen: dict[str, object] = {"spilled": 0}
    real_connect = engine._connect
    done = threading.Event()

    def connect(memory_limit, temp_directory):
        c = real_connect(memory_limit, temp_directory)
        seen["limit"] = c.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
        seen["folder"] = temp_directory
        return c

    def watch() -> None:  # DuckDB deletes its spill files when the query ends: look meanwhile
        while not done.is_set():
            folder = seen.get("folder")
            if folder is not None and os.path.isdir(str(folder)):
                count = sum(len(files) for _, _, files in os.walk(str(folder)))
                seen["spilled"] = max(int(seen["spilled"]), count)
            done.wait(0.005)

    monkeypatch.setattr(engine, "_connect", connect)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        kc = engine.count_file(path, "k", memory_limit="64MB")
    finally:
        done.set()
        watcher.join()
    assert kc.n == 2_000_000 and len(kc.keys) == 1_000_000
    assert np.all(kc.counts == 2)
    assert seen["limit"] in ("61.0 MiB", "64.0 MB", "61.0MiB"), seen["limit"]
    assert int(seen["spilled"]) > 0, "no spill file was seen under the 64 MB limit"
    assert not os.path.exists(str(seen["folder"]))  # the private folder is removed afterwards


def test_progress_poller_reports_percentages_during_a_query() -> None:
    con = duckdb.connect()
    seen: list[float] = []
    with engine._progress_poller(con, seen.append, interval=0.01):
        con.sql("SELECT sum(i) FROM range(300000000) t(i)").fetchall()
    assert seen, "no progress was reported during a query of ~0.5 s"
    assert all(0.0 <= v <= 100.0 for v in seen)


def test_count_file_accepts_a_progress_callback(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", "k\na\nb\n")
    seen: list[float] = []
    kc = engine.count_file(path, "k", progress=seen.append)
    assert kc.n == 2 and all(0.0 <= v <= 100.0 for v in seen)


# ------------------------------------------------------------------------------ bad files


def test_missing_column_names_the_column_and_the_schema(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", f"code,x\n{SECRET},1\n")
    with pytest.raises(ParameterError) as info:
        engine.count_file(path, "Code", where="histogram")
    msg = str(info.value)
    assert msg.startswith("histogram: parameter 'column' must be a column of the file ('code', 'x'); got 'Code'.")
    assert SECRET not in msg


@pytest.mark.parametrize(
    "name, content",
    [
        # malformed data rows are records with a missing key (test_csv_robustness.py); a
        # malformed *header* (public schema) is an error that names the file only
        ("bytes.csv", b"code,x" + SECRET.encode() + b"\xff\xfe\nA,1\n"),
        ("quote.csv", f'code,"x{SECRET}\nA,1\n'),
        ("repeated.csv", f"code,{SECRET},{SECRET}\nA,1,2\n"),
        ("empty_name.csv", f"code,,{SECRET}\nA,1,2\n"),
        ("blank_first_line.csv", f"\ncode,x\n{SECRET},1\n"),
        ("fake.parquet", f"code\n{SECRET}\n"),
        ("empty.csv", ""),
    ],
)
def test_malformed_files_give_our_message_without_data(tmp_path: Path, name: str, content: str | bytes) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ParameterError) as info:
        engine.count_file(path, "code", where="histogram")
    msg = str(info.value)
    assert msg.startswith("histogram: parameter 'file' must be a ")
    assert "could not be parsed" in msg and str(path) in msg
    assert SECRET not in msg and "\n" not in msg


@pytest.mark.parametrize("make", [lambda p: p / "missing.csv", lambda p: p])
def test_missing_file_or_directory(tmp_path: Path, make) -> None:
    with pytest.raises(ParameterError, match="parameter 'file' must be an existing, readable CSV or Parquet file"):
        engine.count_file(make(tmp_path), "code")


def test_empty_column_name_is_refused(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", "code\na\n")
    with pytest.raises(ParameterError, match="parameter 'column' must be a non-empty column name"):
        engine.count_file(path, "")


# ------------------------------------------------------------------------------ domain files


def test_domain_is_cast_in_duckdb_in_file_order(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "dom.txt", "age\n30\n007\n\n-1\n")
    keys = engine.load_domain(path, "BIGINT", header="age")
    assert keys.dtype == np.int64 and keys.tolist() == [30, 7, -1]
    text = engine.load_domain(path, "VARCHAR")  # CSV data is text: no header given, nothing skipped
    assert text.tolist() == ["age", "30", "007", "-1"]


@pytest.mark.parametrize(
    "content, duckdb_type, expected",
    [
        ("1\nabc\n", "BIGINT", "must be a list of keys of the column's type BIGINT; got 'abc'."),
        ("7\n07\n", "BIGINT", "must be a list of distinct keys; got 1 repeated key(s), e.g. 7."),
        ("a\nb\na\n", "VARCHAR", "must be a list of distinct keys; got 1 repeated key(s), e.g. 'a'."),
        ("\n\n", "VARCHAR", "must be a file with at least one key"),
    ],
)
def test_bad_domains(tmp_path: Path, content: str, duckdb_type: str, expected: str) -> None:
    path = write_csv(tmp_path / "dom.txt", content)
    with pytest.raises(ParameterError) as info:
        engine.load_domain(path, duckdb_type)
    assert str(info.value).startswith("laplace_histogram: parameter 'domain' ")
    assert expected in str(info.value)


def test_domain_type_names_are_checked_before_reaching_sql(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "dom.txt", "1\n")
    with pytest.raises(ParameterError, match="parameter 'column' must be a column of a type"):
        engine.load_domain(path, "BIGINT); DROP TABLE t; --")


def test_describe_column_reports_format_and_type(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"d": pa.array([1, 2], pa.int32())}), path)
    info = engine.describe_column(path, "d")
    assert (info.format, info.column, info.duckdb_type) == ("parquet", "d", "INTEGER")


def test_bad_memory_limit_is_a_parameter_error(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", "k\na\n")
    with pytest.raises(ParameterError, match="parameter 'memory_limit' must be a DuckDB memory size"):
        engine.count_file(path, "k", memory_limit="lots")


def test_key_types_round_trip_with_their_domains(tmp_path: Path) -> None:
    """Dates stay days, decimals are keyed by their exact text, and domains match the data's keys."""
    import datetime as dt
    import decimal

    path = tmp_path / "types.parquet"
    day = [dt.date(2024, 1, 1)] * 3 + [dt.date(2024, 2, 29)]
    dec = [decimal.Decimal("1.50")] * 3 + [decimal.Decimal("0.10")]
    pq.write_table(pa.table({"day": pa.array(day, pa.date32()), "dec": pa.array(dec, pa.decimal128(5, 2))}), path)
    days = engine.count_file(path, "day")
    assert days.keys.dtype == np.dtype("datetime64[D]")
    assert _as_dict(days) == {dt.date(2024, 1, 1): 3, dt.date(2024, 2, 29): 1}
    decs = engine.count_file(path, "dec")
    assert _as_dict(decs) == {"1.50": 3, "0.10": 1}
    domain = write_csv(tmp_path / "dom.txt", "2024-02-29\n2024-01-01\n2023-12-31\n")
    expected = [dt.date(2024, 2, 29), dt.date(2024, 1, 1), dt.date(2023, 12, 31)]
    assert engine.load_domain(domain, "DATE").tolist() == expected
    domain = write_csv(tmp_path / "dom2.txt", "1.5\n0.1\n")
    assert engine.load_domain(domain, "DECIMAL(5,2)").tolist() == ["1.50", "0.10"]


def test_nested_columns_are_refused_by_type(tmp_path: Path) -> None:
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"tags": pa.array([[SECRET], ["b"]])}), path)
    with pytest.raises(ParameterError) as info:
        engine.count_file(path, "tags")
    assert "parameter 'column' must be a column of scalar keys" in str(info.value)
    assert SECRET not in str(info.value)
