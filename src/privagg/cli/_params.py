"""Parsing of numeric command-line options.

Options arrive as text and are validated by the same functions as the Python API
(:mod:`privagg._validate`), so ``--epsilon abc``, ``--epsilon nan`` and ``--epsilon -1`` give the
very message ``stable_histogram(..., epsilon=...)`` would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from .. import _validate

__all__ = ["as_number", "columns_option", "csv_dialect", "csv_options", "number_option", "radius_option"]

_F = TypeVar("_F", bound=Callable[..., Any])


def as_number(text: str) -> float | str:
    """``float(text)`` when the text is a number (``"nan"`` and ``"inf"`` included), else the text.

    The text is returned unchanged otherwise, so that the validator reports the value as typed.
    """
    try:
        return float(text)
    except ValueError:
        return text


def number_option(
    where: str, name: str, text: str, check: Callable[..., float] = _validate.check_epsilon
) -> float:
    """Validate a numeric option with one of :mod:`privagg._validate`'s checks."""
    return check(where, as_number(text), name)


def radius_option(where: str, text: str | None) -> float | None:
    """``--radius``: absent → None (chosen privately), else a finite positive number."""
    if text is None:
        return None
    return number_option(where, "radius", text,
                         lambda w, value, name: _validate.check_finite_positive(w, name, value))


def columns_option(where: str, text: str) -> list[str]:
    """``--columns A,B,...``: distinct, non-empty column names."""
    cols = [c.strip() for c in text.split(",")]
    if not cols or any(not c for c in cols) or len(set(cols)) != len(cols):
        raise _validate.fail(where, "columns", "a comma-separated list of distinct column names", text)
    return cols


def csv_dialect(command: _F) -> _F:
    """The ``--delimiter``, ``--encoding`` and ``--quote`` options of a command that reads a CSV file."""
    command = click.option(
        "--quote", default='"', show_default=True, metavar="CHAR|none",
        help="CSV quote character; 'none' reads every line as one record (files written without "
             "quoting, where a stray quote must not join lines; ignored for Parquet).",
    )(command)
    command = click.option(
        "--encoding", default="utf-8", show_default=True, metavar="utf-8|utf-16|latin-1",
        help="CSV text encoding (ignored for Parquet).",
    )(command)
    return click.option(
        "--delimiter", default=",", show_default=True, metavar="CHAR",
        help="CSV field delimiter, one character ('\\t' for a tab; ignored for Parquet).",
    )(command)


def csv_options(where: str, delimiter: str, encoding: str, quote: str = '"') -> Any:
    """``--delimiter``/``--encoding``/``--quote`` as a validated :class:`~privagg.engines.duckdb.CsvOptions`."""
    from ..engines.duckdb import CsvOptions, check_csv_options

    delimiter = "\t" if delimiter in ("\\t", "tab") else delimiter
    quote = "" if quote.lower() == "none" else quote
    return check_csv_options(where, CsvOptions(delimiter=delimiter, encoding=encoding, quote=quote))
