"""DuckDB engine: read numeric columns of a CSV or Parquet file as a float64 matrix.

For ``privagg mean`` / ``kmeans``: ``SELECT TRY_CAST(a AS DOUBLE), … FROM read_csv/read_parquet``
(``trim`` first for CSV; optionally ``WHERE`` a filter), fetched as numpy. What is public: the path, the format, the
schema (for CSV: the header line and the dialect, :class:`~privagg.engines.duckdb.CsvOptions`).
Values are data: a CSV field that is empty or not a number, and a Parquet NULL, become NaN (the
mechanisms drop rows with a non-finite entry; nothing here raises because of a value). A
malformed CSV record (see :mod:`privagg.engines.duckdb`) is a row of NaN: appended at the end,
and kept by a ``where`` filter exactly when the filter keeps a row of NULLs.
A Parquet column whose *type* is not numeric is refused (its type is schema, hence public); CSV
is read as text, so there every column is accepted and non-numbers become NaN.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from .._validate import fail
from .duckdb import (
    DEFAULT_MEMORY_LIMIT,
    CsvOptions,
    _connect,
    _count_rejects,
    _params,
    _source,
    _unparsable,
    describe_column,
    quote_identifier,
)

__all__ = ["numeric_select", "read_numeric_columns"]

_NUMERIC_TYPE = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT"
    r"|FLOAT|DOUBLE|REAL|DECIMAL(\(\d+, ?\d+\))?)$"
)


def numeric_select(path: str | Path, cols: Sequence[str], *, caller: str, csv: Any = None
                   ) -> tuple[list[Any], str]:
    """Check ``cols`` (distinct; numeric types for Parquet, whose schema is public) and return their
    :class:`~privagg.engines.duckdb.FileColumn` s and the SELECT list ``CAST(col AS DOUBLE) AS c0, …``
    (CSV: ``TRY_CAST(trim(col) …)``, so a non-number is NULL, never an error)."""
    if not cols or len(set(cols)) != len(cols):
        raise fail(caller, "columns", "one or more distinct column names", ",".join(map(str, cols)))
    infos = [describe_column(path, c, where=caller, csv=csv) for c in cols]
    fmt = infos[0].format
    if fmt == "parquet":
        for info in infos:
            if not _NUMERIC_TYPE.match(info.duckdb_type):
                rule = "a numeric column (integer, float or decimal)"
                raise fail(caller, "columns", rule, f"{info.column!r} of type {info.duckdb_type}")
    # CSV: trim() keeps DuckDB from pushing the cast into the reader, whose sniffer would then
    # raise (quoting a line of data) on the first non-number instead of yielding NULL.
    template = "TRY_CAST(trim({}) AS DOUBLE)" if fmt == "csv" else "CAST({} AS DOUBLE)"
    select = ", ".join(template.format(quote_identifier(c)) + f" AS c{i}" for i, c in enumerate(cols))
    return infos, select


def read_numeric_columns(
    path: str | Path,
    columns: Sequence[str],
    where: str | None = None,
    *,
    caller: str = "read_numeric_columns",
    csv: CsvOptions | None = None,
) -> np.ndarray:
    """The given columns of a CSV or Parquet file as a float64 array of shape (n, len(columns)).

    Parameters
    ----------
    path : str or Path
        CSV with a header row, or Parquet.
    columns : sequence of str
        Column names (exact, distinct, at least one).
    where : str, optional
        A SQL boolean expression over the file's columns to filter rows (public query text,
        run by DuckDB; an invalid one is a ParameterError).
    caller : str
        Name used in error messages.
    csv : CsvOptions, optional
        The CSV dialect (default: comma, UTF-8, ``"`` quotes); ignored for Parquet.

    Returns
    -------
    numpy.ndarray of float64, shape (n, k)
        NaN where a value is missing or (CSV) not a number; a row of NaN per malformed CSV
        record.

    Raises
    ------
    ParameterError
        Missing/unreadable/malformed file, missing or duplicate column, non-numeric Parquet
        column type, invalid ``where``. Never because of a value.
    """
    cols = list(columns) if not isinstance(columns, str) else [columns]
    infos, select = numeric_select(path, cols, caller=caller, csv=csv)
    fmt = infos[0].format
    sql = f"SELECT {select} FROM {_source(fmt)}"
    if where is not None:
        if not isinstance(where, str) or not where.strip():
            raise fail(caller, "where", "a non-empty SQL boolean expression", where)
        sql += f" WHERE ({where})"
    con = _connect(DEFAULT_MEMORY_LIMIT, None)
    try:
        try:
            result = con.sql(sql, params=_params(infos[0])).fetchnumpy()
            rejected = _count_rejects(con) if fmt == "csv" else 0
            if rejected and where is not None:
                # A malformed record is a row of NULLs: kept iff the filter keeps such a row.
                nulls = ", ".join(f"CAST(NULL AS VARCHAR) AS {quote_identifier(c)}" for c in infos[0].header)
                kept = con.sql(f"SELECT count(*) FROM (SELECT {nulls}) WHERE ({where})").fetchall()[0][0]
                rejected *= int(kept)
        except (duckdb.BinderException, duckdb.ParserException, duckdb.ConversionException):
            if where is not None:
                raise fail(caller, "where", "a valid SQL boolean expression over the file's columns",
                           where) from None
            raise _unparsable(caller, Path(path), fmt) from None
        except duckdb.Error:
            raise _unparsable(caller, Path(path), fmt) from None
    finally:
        con.close()
    rows = len(next(iter(result.values()))) if result else 0
    out = np.full((rows + rejected, len(cols)), np.nan, dtype=np.float64)
    for i in range(len(cols)):
        col = result[f"c{i}"]
        out[:rows, i] = np.ma.filled(np.ma.asarray(col, dtype=np.float64), np.nan)
    return out
