"""``where=`` / ``--where`` (engines/where.py): a whitelisted, rebuilt, run-time-safe row filter."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from privagg import ParameterError
from privagg.engines import duckdb as duckdb_engine
from privagg.engines.where import MAX_CHARS, MAX_DEPTH, check_where

COLUMNS = ["k", "age", "v", "c d", 'x"y', "when"]

ACCEPTED = [
    "age = '30'",
    "CAST(age AS INTEGER) > 3 AND k = 'x'",
    "k IN ('a', 'b') OR k NOT IN ('c')",
    "TRY_CAST(v AS DOUBLE) BETWEEN -1.5 AND 1e3",
    "CAST(v AS DOUBLE) NOT BETWEEN 0 AND .5",
    "NOT k IS NULL",
    "age IS NOT NULL",
    "k LIKE 'x%' OR k NOT LIKE '_y' OR k ILIKE 'Z%' OR k NOT ILIKE 'q' OR k LIKE 'a!%' ESCAPE '!'",
    "lower(trim(k)) = 'x' AND length(k) < 10 AND starts_with(k, 'x')",
    "abs(CAST(v AS DOUBLE)) + 2 * 3 - 4 / 2 % 3 >= round(1.5)",
    "age::DECIMAL(10, 2) > 1",
    '"c d" = \'it\'\'s\'',
    '"x""y" IS NULL',
    '"when" = \'now\'',
    "k || '--' = 'x--'",
    "CASE WHEN k = 'x' THEN true ELSE false END",
    "coalesce(k, age) = '1'",
    "k IS DISTINCT FROM age",
    "k = 'back\\slash'",
    "k = 'semi;colon /* not a comment */ -- nor this'",
    "-CAST(v AS INTEGER) < 0",
    "true",
]

REJECTED = [
    # (expression, a piece of the rule in the message)
    ("1=1; DROP TABLE t", "no ';'"),
    ("k = 'x'; SELECT 1", "no ';'"),
    ("k = 'x' -- and more", "without comments"),
    ("k = 'x' /* hidden */ OR true", "without comments"),
    ("k = 'x' LIMIT 0", "no GROUP BY, ORDER BY, LIMIT"),
    ("k = 'x' GROUP BY k", "no GROUP BY, ORDER BY, LIMIT"),
    ("k = 'x' UNION SELECT 1", "no GROUP BY, ORDER BY, LIMIT"),
    ("k = 'x' ORDER BY k", "no GROUP BY, ORDER BY, LIMIT"),
    ("k IN (SELECT 1)", "without subqueries"),
    ("EXISTS (SELECT * FROM t)", "without subqueries"),
    ("k = (SELECT max(k) FROM t)", "without subqueries"),
    ("k > ALL (SELECT 1)", "without subqueries"),
    ("k = ANY([1, 2])", "without subqueries"),
    ("(SELECT count(*) FROM read_csv('/etc/passwd')) > 0", "without subqueries"),
    ("read_csv('/etc/passwd') IS NULL", "without table functions or file readers"),
    ("read_text('/etc/passwd') IS NULL", "without table functions or file readers"),
    ("getenv('HOME') = k", "scalar functions"),
    ("current_setting('memory_limit') = k", "scalar functions"),
    ("random() > 0.5", "scalar functions"),
    ("sum(CAST(v AS INTEGER)) > 1", "scalar functions"),
    ("count(*) > 1", "scalar functions"),
    ("count(*) OVER () > 1", "without window functions"),
    ("nope = 1", "there is no column 'nope'"),
    ("K = 'x'", "there is no column 'K'"),
    ("t.k = 'x'", "plain names"),
    ("k = ?", "without parameters"),
    ("k = $1", "without parameters"),
    ("#1 = 'x'", "naming columns"),
    ("columns(*) = 'x'", "without * or COLUMNS"),
    ("main.lower(k) = 'x'", "qualified"),
    ("lower(k := age) = 'x'", "positional arguments"),
    ("k IN (age)", "constants only"),
    ("x'00' = k", "constants are numbers, strings"),
    ("k::VARCHAR[] = ['x']", "casting only to the types"),
    ("k::my_type = 'x'", "casting only to the types"),
    ("'x' COLLATE nocase = k", "without COLLATE"),
    ("k = 'x')", "could not be parsed"),
    ("k = 'x", "could not be parsed"),
    ("", "non-empty"),
    ("   ", "non-empty"),
    ("k = 'a\x00b'", "without control characters"),
    ("k = '\x1b[2J'", "without control characters"),
]


@pytest.mark.parametrize("expr", ACCEPTED)
def test_accepted_expressions_are_rebuilt_and_wrapped(expr: str) -> None:
    sql = check_where(expr, COLUMNS, where="aggregate")
    assert sql.startswith("coalesce(TRY(CAST((") and sql.endswith(") AS BOOLEAN)), false)")
    # The rebuilt SQL is a fixed point: checking it again gives itself, wrapped once more.
    inner = sql[len("coalesce(TRY(CAST(("):-len(") AS BOOLEAN)), false)")]
    assert check_where(inner, COLUMNS, where="aggregate") == sql


@pytest.mark.parametrize("expr, rule", REJECTED)
def test_rejected_expressions_name_the_parameter_and_the_rule(expr: str, rule: str) -> None:
    with pytest.raises(ParameterError) as info:
        check_where(expr, COLUMNS, where="aggregate")
    msg = str(info.value)
    assert msg.startswith("aggregate: parameter 'where' must be "), msg
    assert rule in msg, msg
    assert "\n" not in msg and "\x00" not in msg and "\x1b" not in msg  # the expression is escaped


def test_none_is_no_filter_and_non_strings_are_refused() -> None:
    assert check_where(None, COLUMNS, where="aggregate") is None
    with pytest.raises(ParameterError, match="parameter 'where' must be a non-empty SQL boolean expression"):
        check_where(3, COLUMNS, where="aggregate")  # type: ignore[arg-type]


def test_length_and_depth_limits() -> None:
    with pytest.raises(ParameterError, match=f"at most {MAX_CHARS:,} characters"):
        check_where("k = '" + "x" * MAX_CHARS + "'", COLUMNS, where="aggregate")
    deep = "NOT " * (MAX_DEPTH + 1) + "true"
    with pytest.raises(ParameterError, match=f"nested at most {MAX_DEPTH} levels"):
        check_where(deep, COLUMNS, where="aggregate")
    check_where("NOT " * (MAX_DEPTH - 2) + "true", COLUMNS, where="aggregate")


def test_user_text_never_reaches_the_sql() -> None:
    """Identifiers are re-quoted, strings re-quoted, spacing and comments-looking text inside
    strings stay inside one literal: the rebuilt SQL has exactly one statement, the same tree."""
    sql = check_where("\"x\"\"y\" = 'a'' OR 1=1 --'", COLUMNS, where="aggregate")
    assert '"x""y"' in sql and "'a'' OR 1=1 --'" in sql
    con = duckdb.connect()
    con.execute('CREATE TABLE t AS SELECT * FROM (VALUES (\'a\'\' OR 1=1 --\'), (\'b\')) v("x""y")')
    assert con.execute(f"SELECT count(*) FROM t WHERE {sql}").fetchone()[0] == 1


def test_bind_errors_with_types_are_parameter_errors() -> None:
    types = dict.fromkeys(COLUMNS, "VARCHAR")
    assert check_where("CAST(age AS INTEGER) > 3", COLUMNS, where="aggregate", types=types)
    with pytest.raises(ParameterError, match="can bind to the file's column types"):
        check_where("age > 3", COLUMNS, where="aggregate", types=types)  # VARCHAR vs integer
    with pytest.raises(ParameterError, match="a SQL boolean expression \\(it is of type VARCHAR\\)"):
        check_where("age", COLUMNS, where="aggregate", types=types)
    with pytest.raises(ParameterError, match="columns of scalar types"):
        check_where("age IS NULL", COLUMNS, where="aggregate", types={"age": "STRUCT(a INTEGER)"})
    # Without types these are left to the engine's bind (public too).
    assert check_where("age > 3", COLUMNS, where="aggregate")


def _kept(path: Path, sql: str) -> list[tuple[str, str]]:
    info = duckdb_engine.describe_column(path, "k")
    con = duckdb_engine._connect("256MB", None)
    try:
        return sorted(con.sql(f"SELECT k, age FROM {duckdb_engine._source('csv')} WHERE coalesce(({sql}), false)",
                              params=duckdb_engine._params(info)).fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("expr", [
    "CAST(age AS INTEGER) > 1",                      # 'abc' and an overflowing number fail the cast
    "CAST(age AS INTEGER) * 1000 > 1",               # overflow after the cast
    "CAST(age AS BIGINT) + 9223372036854775000 > 0",  # BIGINT overflow
    "age::DATE IS NULL OR k <> 'zz'",  # the whole expression fails, whatever the OR
])
def test_a_row_whose_evaluation_fails_is_dropped_not_an_error(tmp_path: Path, expr: str) -> None:
    clean = tmp_path / "clean.csv"
    clean.write_text("k,age\nx,30\ny,40\n", encoding="utf-8")
    hostile = tmp_path / "hostile.csv"
    hostile.write_text("k,age\nx,30\nbad,abc\ny,40\nhuge,99999999999999999999\n", encoding="utf-8")
    sql = check_where(expr, ["k", "age"], where="aggregate", types={"k": "VARCHAR", "age": "VARCHAR"})
    # Without the wrapper DuckDB raises on the hostile file (a record would decide the exit code).
    info = duckdb_engine.describe_column(hostile, "k")
    con = duckdb_engine._connect("256MB", None)
    with pytest.raises(duckdb.ConversionException):
        con.sql(f"SELECT count(*) FROM {duckdb_engine._source('csv')} WHERE {expr}",
                params=duckdb_engine._params(info)).fetchall()
    con.close()
    kept_hostile = _kept(hostile, sql)
    assert all(k not in ("bad", "huge") for k, _ in kept_hostile)
    assert kept_hostile == [r for r in _kept(clean, sql)]  # the hostile rows were simply dropped
