"""``privagg aggregate FILE --by COL[,COL] --count --sum COL:LO:HI ...``: private group-by aggregates.

A thin layer over :func:`privagg.aggregate` (``mechanisms/aggregate.py``). Order of work, so that
errors come early and only from public inputs: the options (numbers, metric specs, weights) and the
``--plot`` target → the file's schema (every named column must exist) → the ``--domain`` file
(cast to the ``--by`` columns' types) → the ``--where`` filter (:func:`privagg.engines.where.check_where`,
bound to the schema) → the ledger → :func:`privagg.aggregate` (which validates everything again,
then charges the ledger once for the total (ε, δ) before any noise) → output: the table or
``--json``, the line ``charged ε=…, δ=…; left ε=…, δ=…``, then the plot.

Column names inside option values. ``--by`` separates names with ``,``; the metric options
separate their fields with ``:`` (``--sum COL:LO:HI``); ``--weights`` is ``NAME=W,...``. A name that
contains ``,``, ``:``, ``=`` or ``\\`` writes it as ``\\,``, ``\\:``, ``\\=``, ``\\\\`` (a backslash
escapes the next character; quote the option for the shell: ``--sum 'price\\:eur:0:100'``).

``--domain FILE``: a CSV file (UTF-8, comma, ``"`` quotes as in RFC 4180) whose header row names
the ``--by`` columns (each once, in any order, no other column) and whose every other row is one
key (a tuple with several ``--by`` columns). Fields are cast to the data columns' types as the
histogram's domain is (``"007"`` is 7 for an integer Parquet column, ``"007"`` for a CSV column);
an empty field, a field that does not cast, a row of the wrong width and a repeated key are errors
(the domain is public, so they are shown). Every domain key is released, in the file's order.
"""

from __future__ import annotations

import csv as csv_module
import io
import math
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click
import numpy as np

from .. import _validate
from ..accounting import Ledger
from ..accounting._exact import as_float
from ..engines import duckdb as duckdb_engine
from ..engines.where import check_where
from ..errors import ParameterError
from ..mechanisms._aggregate_plot import MAX_PLOT_GROUPS
from . import _guard
from ._output import literal_text, plot_target, save_figure
from ._params import as_number, csv_dialect, csv_options, number_option
from ._render import ROWS_DROPPED_TEXT, dumps, format_float, plain_console, unit_text, visible

__all__ = ["MAX_PLOT_GROUPS", "aggregate", "split_escaped"]

WHERE = "aggregate"
_MAX_BOUND = 1 << 20


def _api() -> Any:
    """The Python API (the one seam of this module: tests put a fake here)."""
    from ..mechanisms import aggregate as api

    return api


# ------------------------------------------------------------------------------------------------
# Option parsing (text only; the file is not opened here)
# ------------------------------------------------------------------------------------------------


def split_escaped(text: str, sep: str) -> list[str]:
    """``text`` split at unescaped ``sep``; ``\\x`` stands for ``x`` (so ``\\,`` is a comma).

    Raises ValueError on a trailing lone backslash."""
    parts, current, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise ValueError("trailing backslash")
            current.append(text[i + 1])
            i += 2
            continue
        if c == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current))
    return parts


def _fields(option: str, spec: str, counts: Sequence[int], form: str) -> list[str]:
    rule = f"{form} (a ':' or '\\' in the column name written as '\\:' or '\\\\')"
    try:
        parts = split_escaped(spec, ":")
    except ValueError:
        raise _validate.fail(WHERE, option, rule, spec) from None
    if len(parts) not in counts or not parts[0]:
        raise _validate.fail(WHERE, option, rule, spec)
    return parts


def _finite(option: str, spec: str, text: str, what: str) -> float:
    value = as_number(text.strip())
    if isinstance(value, str) or not math.isfinite(value):
        raise _validate.fail(WHERE, option, f"a spec whose {what} is a finite number", spec)
    return float(value)


def _bounds(option: str, spec: str, lo: str, hi: str) -> tuple[float, float]:
    low, high = _finite(option, spec, lo, "lower bound"), _finite(option, spec, hi, "upper bound")
    if not low < high:
        raise _validate.fail(WHERE, option, "a spec with bounds LO < HI", spec)
    return low, high


def parse_metrics(count: bool, sums: Sequence[str], means: Sequence[str],
                  quantiles: Sequence[str]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """The metrics as ``(kind, column, keywords)``, in the order count, sums, means, quantiles."""
    out: list[tuple[str, str | None, dict[str, Any]]] = [("count", None, {})] if count else []
    for spec in sums:
        col, lo, hi = _fields("sum", spec, (3,), "COL:LO:HI")
        out.append(("sum", col, {"bounds": _bounds("sum", spec, lo, hi)}))
    for spec in means:
        parts = _fields("mean", spec, (1, 3), "COL or COL:LO:HI")
        bounds = None if len(parts) == 1 else _bounds("mean", spec, parts[1], parts[2])
        out.append(("mean", parts[0], {"bounds": bounds}))
    for spec in quantiles:
        parts = _fields("quantile", spec, (2, 4), "COL:Q or COL:Q:LO:HI")
        q = _finite("quantile", spec, parts[1], "Q")
        if not 0.0 <= q <= 1.0:
            raise _validate.fail(WHERE, "quantile", "a spec whose Q is in [0, 1]", spec)
        bounds = None if len(parts) == 2 else _bounds("quantile", spec, parts[2], parts[3])
        out.append(("quantile", parts[0], {"q": q, "bounds": bounds}))
    if not out:
        raise _validate.fail(WHERE, "metrics", "at least one of --count, --sum, --mean, --quantile", None)
    return out


def parse_by(text: str) -> list[str]:
    rule = "a comma-separated list of distinct column names (a ',' or '\\' in a name written as '\\,' or '\\\\')"
    try:
        cols = split_escaped(text, ",")
    except ValueError:
        raise _validate.fail(WHERE, "by", rule, text) from None
    if any(not c for c in cols) or len(set(cols)) != len(cols):
        raise _validate.fail(WHERE, "by", rule, text)
    return cols


def parse_weights(text: str | None) -> dict[str, float] | None:
    """``NAME=W,...`` → ``{NAME: W}`` (W a finite number > 0; names checked by aggregate)."""
    if text is None:
        return None
    rule = "a list NAME=W,... of distinct step names and weights > 0 (',', '=' or '\\' in a name as '\\,', '\\=', '\\\\')"
    out: dict[str, float] = {}
    # Split at ',' keeping escapes, so that an escaped '=' survives for the inner split.
    for raw in _raw_split(text, ","):
        try:
            parts = split_escaped(raw, "=")
        except ValueError:
            raise _validate.fail(WHERE, "weights", rule, text) from None
        if len(parts) != 2 or not parts[0] or parts[0] in out:
            raise _validate.fail(WHERE, "weights", rule, text)
        value = as_number(parts[1].strip())
        if isinstance(value, str) or not math.isfinite(value) or not value > 0:
            raise _validate.fail(WHERE, "weights", rule, text)
        out[parts[0]] = float(value)
    return out


def _raw_split(text: str, sep: str) -> list[str]:
    """``text`` split at unescaped ``sep``, escapes kept (for a second, inner split)."""
    parts, start, i = [], 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _bound_option(name: str, text: str, unit: str | None) -> int:
    try:
        value = int(text.strip())
    except (ValueError, AttributeError):
        raise _validate.fail(WHERE, name, f"an integer in [1, {_MAX_BOUND}]", text) from None
    value = _validate.check_positive_int(WHERE, name, value, maximum=_MAX_BOUND)
    if unit is None and value != 1:
        raise _validate.fail(WHERE, name, "left at 1 without --privacy-unit", value)
    return value


def _seed(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.strip())
    except (ValueError, AttributeError):
        raise _validate.fail(WHERE, "seed", "an integer >= 0", text) from None
    return _validate.check_positive_int(WHERE, "seed", value, minimum=0)


# ------------------------------------------------------------------------------------------------
# Schema and domain (public)
# ------------------------------------------------------------------------------------------------


def _schema(file: Path, csv: Any) -> dict[str, str]:
    """Column name → DuckDB type (CSV: the header, every column VARCHAR; Parquet: DESCRIBE)."""
    fmt = duckdb_engine.detect_format(file, WHERE)
    if file.stat().st_size == 0:
        raise duckdb_engine._unparsable(WHERE, file, fmt)
    if fmt == "csv":
        return dict.fromkeys(duckdb_engine.read_csv_header(file, csv, WHERE), "VARCHAR")
    import duckdb

    con = duckdb_engine._connect(duckdb_engine.DEFAULT_MEMORY_LIMIT, None)
    try:
        rows = con.sql(f"DESCRIBE SELECT * FROM {duckdb_engine._source(fmt)}", params={"path": str(file)}).fetchall()
    except duckdb.Error:
        raise duckdb_engine._unparsable(WHERE, file, fmt) from None
    finally:
        con.close()
    return {str(r[0]): str(r[1]) for r in rows}


def _check_column(option: str, name: str, schema: dict[str, str]) -> None:
    if name not in schema:
        names = ", ".join(repr(n) for n in list(schema)[:12]) + (f", ... ({len(schema)} columns)" if len(schema) > 12 else "")
        raise _validate.fail(WHERE, option, f"a column of the file ({names})", name)


def load_domain(path: Path, by: list[str], schema: dict[str, str]) -> list[Any]:
    """The keys of a ``--domain`` CSV file, cast to the ``--by`` columns' types (see the module
    docstring): a list of values (one ``--by`` column) or of tuples."""
    rule = "a readable UTF-8 CSV file whose header row names the --by columns"
    try:
        text = path.read_text(encoding="utf-8-sig")
        rows = list(csv_module.reader(io.StringIO(text, newline=""), strict=True))
    except (OSError, UnicodeDecodeError, csv_module.Error):
        raise ParameterError(f"{WHERE}: parameter 'domain' must be {rule}; got {str(path)!r}.") from None
    rows = [r for r in rows if r != []]
    if not rows or sorted(rows[0]) != sorted(by) or len(rows[0]) != len(by):
        got = rows[0] if rows else []
        raise _validate.fail(WHERE, "domain", f"{rule} ({', '.join(map(repr, by))}), each once", got)
    header, body = rows[0], rows[1:]
    if not body:
        raise ParameterError(f"{WHERE}: parameter 'domain' must be a file with at least one key; got {str(path)!r}.")
    for row in body:
        if len(row) != len(by):
            raise _validate.fail(WHERE, "domain", f"a CSV file whose rows have {len(by)} field(s)", row)
        if any(field == "" for field in row):
            raise _validate.fail(WHERE, "domain", "a list of keys without empty fields (missing keys are never released)", row)
    columns = []
    for name in by:
        j = header.index(name)
        columns.append(_cast_keys([row[j] for row in body], schema[name]))
    keys = list(zip(*columns)) if len(by) > 1 else columns[0]
    seen: set[Any] = set()
    for key in keys:
        if key in seen:
            raise _validate.fail(WHERE, "domain", "a list of distinct keys", key)
        seen.add(key)
    return keys


def _cast_keys(texts: list[str], duckdb_type: str) -> list[Any]:
    """Text keys cast to ``duckdb_type`` in DuckDB, as the histogram's domain is."""
    import duckdb

    if not duckdb_engine._TYPE_NAME.fullmatch(duckdb_type):
        raise _validate.fail(WHERE, "by", "a column of a type the domain can be cast to", duckdb_type)
    key = duckdb_engine._key_sql(f"TRY_CAST(text AS {duckdb_type})", duckdb_type)
    sql = (f"SELECT {key} AS key FROM (SELECT unnest($t) AS text, generate_subscripts($t, 1) AS i) ORDER BY i")
    con = duckdb_engine._connect(duckdb_engine.DEFAULT_MEMORY_LIMIT, None)
    try:
        cast = con.sql(sql, params={"t": texts}).fetchnumpy()["key"]
    except duckdb.Error:
        raise _validate.fail(WHERE, "by", "a column of a type the domain can be cast to", duckdb_type) from None
    finally:
        con.close()
    bad = np.ma.getmaskarray(cast)
    if bad.any():
        raise _validate.fail(WHERE, "domain", f"a list of keys of the column's type {duckdb_type}",
                             texts[int(np.argmax(bad))])
    return duckdb_engine._key_dtype(np.ma.getdata(cast), duckdb_type).tolist()


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--by", required=True, metavar="COL[,COL]", help="Group-by column(s), comma-separated ('\\,' for a comma in a name).")
@click.option("--count", "count", is_flag=True, help="Rows per group (distinct units with --privacy-unit).")
@click.option("--sum", "sums", multiple=True, metavar="COL:LO:HI", help="Sum of COL clamped to [LO, HI] (repeatable).")
@click.option("--mean", "means", multiple=True, metavar="COL[:LO:HI]",
              help="Mean of COL: clamped to [LO, HI], or without bounds a FriendlyCore mean (repeatable; needs --delta).")
@click.option("--quantile", "quantiles", multiple=True, metavar="COL:Q[:LO:HI]",
              help="The Q-quantile of COL, within [LO, HI] if given (repeatable).")
@click.option("--where", "where_sql", default=None, metavar="SQL",
              help="Public row filter: a SQL boolean expression over the file's columns (a row whose evaluation fails is "
                   "dropped). CSV columns are text: CAST them to compare numbers, e.g. "
                   "--where \"TRY_CAST(age AS DOUBLE) >= 18\" (plain 'age >= 18' is refused for a CSV file).")
@click.option("--domain", type=click.Path(dir_okay=False, path_type=Path),
              help="Public keys: a CSV file with the --by columns as header, one key per row. Absent → keys selected privately (needs --delta).")
@click.option("--privacy-unit", "privacy_unit", default=None, metavar="COL",
              help="Protect the unit of this column (a person: all its rows) instead of one row.")
@click.option("--max-groups-per-unit", "max_groups", default="1", show_default=True, metavar="K",
              help="With --privacy-unit: groups one unit may contribute to.")
@click.option("--max-rows-per-group", "max_rows", default="1", show_default=True, metavar="M",
              help="With --privacy-unit: rows one unit may contribute to one group.")
@click.option("--epsilon", required=True, metavar="E", help="Privacy parameter ε > 0 (split across selection and metrics).")
@click.option("--delta", default=None, metavar="D", help="δ in [0, 1) [default: 0]; > 0 needed without --domain or with an unbounded --mean.")
@click.option("--weights", default=None, metavar="NAME=W,...",
              help="Budget weights per step (selection, count, sum_<col>, mean_<col>, q<q>_<col>) [default: 3/2 for a quantile, 2 for a mean without bounds, 1 for the others].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for machines).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), metavar="OUT.png",
              help="Write a bar chart per metric with its intervals.")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=Path), help="Charge this privacy ledger.")
@click.option("--seed", default=None, metavar="N", help="Seeded, NOT secure randomness (for tests and demos).")
@click.option("--rows", default=30, show_default=True, type=click.IntRange(min=1), help="Table rows shown.")
@click.option("--engine", default="duckdb", show_default=True, metavar="duckdb|spark",
              help="Where the rows are counted, bounded, clamped and summed: DuckDB (default) or Apache Spark "
                   "(pip install 'privagg[spark]'; Parquet; no --where).")
@click.option("--spark-master", metavar="URL", help="Spark master with --engine spark [default: local[*]].")
@click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
@csv_dialect
def aggregate(
    file: Path,
    by: str,
    count: bool,
    sums: tuple[str, ...],
    means: tuple[str, ...],
    quantiles: tuple[str, ...],
    where_sql: str | None,
    domain: Path | None,
    privacy_unit: str | None,
    max_groups: str,
    max_rows: str,
    epsilon: str,
    delta: str | None,
    weights: str | None,
    as_json: bool,
    plot: Path | None,
    ledger: Path | None,
    seed: str | None,
    rows: int,
    engine: str,
    spark_master: str | None,
    spark_conf: tuple[str, ...],
    delimiter: str,
    encoding: str,
    quote: str,
) -> None:
    """Differentially private aggregates per group of FILE (CSV with a header row, or Parquet).

    One (ε, δ) for the whole release, split across the key selection (without --domain) and the
    metrics; the split is printed. Rows with a missing or non-numeric value in a metric's column
    are dropped for that metric; rows with a missing --by key are dropped.
    """
    by_cols = parse_by(by)
    metrics = parse_metrics(count, sums, means, quantiles)
    eps = number_option(WHERE, "epsilon", epsilon)
    dlt = 0.0 if delta is None else _delta(delta)
    l0 = _bound_option("max_groups_per_unit", max_groups, privacy_unit)
    linf = _bound_option("max_rows_per_group", max_rows, privacy_unit)
    weight_map = parse_weights(weights)
    rng = _seed(seed)
    csv = csv_options(WHERE, delimiter, encoding, quote)
    if plot is not None:
        plot = plot_target(WHERE, "plot", plot)
    from . import _spark

    conf = _spark.engine_conf(WHERE, engine, spark_master, spark_conf)
    if engine == "spark":
        if where_sql is not None:  # checked as DuckDB SQL, which Spark SQL reads differently
            raise _validate.fail(WHERE, "where", "given with --engine duckdb only (filter the Parquet data in "
                                 "Spark first)", where_sql)
        if csv != duckdb_engine.CsvOptions():
            raise _validate.fail(WHERE, "delimiter", "left at its default with --engine spark (Parquet only)",
                                 delimiter)
    with ExitStack() as stack:
        frame = None
        if engine == "spark":  # Spark started and the schema read before anything is charged
            frame = _spark.spark_frame(stack, file, WHERE, spark_master, conf)
            schema = spark_schema(frame)
        else:
            schema = _schema(file, csv)
        release = _aggregate(stack, file, frame, schema, by_cols, metrics, where_sql, domain, privacy_unit,
                             l0, linf, eps, dlt, weight_map, rng, csv, ledger, engine)
    _show(release, file=file, as_json=as_json, rows=rows, plot=plot, privacy_unit=privacy_unit)


def spark_schema(frame: Any) -> dict[str, str]:
    """Column name → the DuckDB type name of a Spark column's type (for the column checks and the
    domain's cast; a type without one is refused there, as with DuckDB)."""
    names = {"bigint": "BIGINT", "int": "INTEGER", "smallint": "SMALLINT", "tinyint": "TINYINT",
             "double": "DOUBLE", "float": "FLOAT", "string": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE"}
    out = {}
    for field in frame.schema.fields:
        simple = field.dataType.simpleString()
        out[field.name] = names.get(simple, simple.upper())
    return out


def _aggregate(stack: Any, file: Path, frame: Any, schema: dict[str, str], by_cols: list[str], metrics: Any,
               where_sql: str | None, domain: Path | None, privacy_unit: str | None, l0: int, linf: int,
               eps: Any, dlt: Any, weight_map: Any, rng: Any, csv: Any, ledger: Path | None, engine: str) -> Any:
    """Schema checks, the domain, the ledger (opened in ``stack``) and the release, in that order."""
    for name in by_cols:
        _check_column("by", name, schema)
    for kind, col, _ in metrics:
        if col is not None:
            _check_column(kind, col, schema)
    if privacy_unit is not None:
        _check_column("privacy_unit", privacy_unit, schema)
    keys = None if domain is None else load_domain(domain, by_cols, schema)
    check_where(where_sql, list(schema), where=WHERE, types=schema)

    api = _api()
    built = [_metric(api, kind, col, kw) for kind, col, kw in metrics]
    extra: dict[str, Any] = {}
    if csv != duckdb_engine.CsvOptions():
        extra["csv"] = csv  # a non-default dialect (aggregate's ``csv=`` keyword)
    opened = None if ledger is None else stack.enter_context(Ledger(ledger))
    context: dict[str, Any] = {"by": by_cols, "metrics": [_spec_text(m) for m in metrics]}
    if where_sql is not None:
        context["where"] = where_sql
    if privacy_unit is not None:
        context["privacy_unit"] = privacy_unit
    if engine == "spark":
        context["engine"] = "spark"
    charged = _guard.charging(opened, command="aggregate", file=str(file), **context)
    return api.aggregate(
        str(file) if frame is None else frame, by=by_cols if len(by_cols) > 1 else by_cols[0], metrics=built,
        epsilon=eps, delta=dlt, domain=keys, units=privacy_unit, max_groups_per_unit=l0,
        max_rows_per_group=linf, weights=weight_map, where=where_sql, rng=rng, ledger=charged, **extra,
    )


def _delta(text: str) -> float:
    value = as_number(text)
    if value == 0.0:
        return 0.0
    return _validate.check_delta(WHERE, value)


def _metric(api: Any, kind: str, col: str | None, kw: dict[str, Any]) -> Any:
    if kind == "count":
        return api.count()
    if kind == "sum":
        return api.sum(col, bounds=kw["bounds"])
    if kind == "mean":
        return api.mean(col, bounds=kw["bounds"])
    return api.quantile(col, kw["q"], bounds=kw["bounds"])


def _spec_text(metric: tuple[str, str | None, dict[str, Any]]) -> str:
    kind, col, kw = metric
    if kind == "count":
        return "count"
    parts = [kind, str(col)] + ([repr(kw["q"])] if kind == "quantile" else [])
    if kw.get("bounds") is not None:
        parts += [repr(b) for b in kw["bounds"]]
    return ":".join(parts)


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def _show(release: Any, *, file: Path, as_json: bool, rows: int, plot: Path | None,
          privacy_unit: str | None = None) -> None:
    """The release (JSON or table), the charge line, then the plot. ``--json`` adds the
    histogram's unit keys: ``privacy_unit`` (the column, or null) and ``rows_dropped``."""
    if as_json:
        unit = {"privacy_unit": privacy_unit, "rows_dropped": None if privacy_unit is None else "not released"}
        sys.stdout.write(dumps({**release.to_dict(), **unit, **_guard.charge_fields()}, finite=True) + "\n")
    else:
        _print_table(release, file=file, rows=rows, privacy_unit=privacy_unit)
        line = _guard.charge_line()
        if line is not None:
            click.echo(line, err=True)
    if plot is not None:
        with literal_text():
            figure = plot_figure(release)
        save_figure(figure, plot, dpi=120)
        if not as_json:
            click.echo(f"wrote {visible(plot)}", err=True)


def _text(value: Any) -> str:
    if isinstance(value, bytes):  # a binary key: undecodable bytes become surrogates, shown as \udcXX
        return value.decode("utf-8", errors="surrogateescape")
    return value if isinstance(value, str) else str(value)


def _cell(value: Any, low: Any, high: Any, ok: Any) -> str:
    if ok is False or (isinstance(value, float) and not math.isfinite(value)):
        return "⊥"
    text = format_float(float(value), 6)
    if low is None or high is None or not (math.isfinite(float(low)) and math.isfinite(float(high))):
        return text
    return f"{text} [{format_float(float(low), 4)}, {format_float(float(high), 4)}]"


def _range(low: Any, high: Any, ok: Any) -> str:
    """``[low, high]``, or ``⊥`` for a ⊥ group (its range is NaN)."""
    if ok is False or not (math.isfinite(float(low)) and math.isfinite(float(high))):
        return "⊥"
    return f"[{format_float(float(low), 4)}, {format_float(float(high), 4)}]"


def _print_table(release: Any, *, file: Path, rows: int, privacy_unit: str | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    console = plain_console()
    by = list(release.by) if not isinstance(release.by, str) else [release.by]
    groups = release.groups
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    pure = float(release.delta) == 0
    header.add_row("mechanism", "aggregate")
    header.add_row("guarantee", f"ε = {format_float(as_float(release.epsilon))}"
                   + (" (pure DP)" if pure else f", δ = {format_float(as_float(release.delta))}"))
    neighbors = getattr(release, "neighbors", None)
    if neighbors is not None:
        header.add_row("neighbours", str(neighbors))
    header.add_row("budget split", "; ".join(
        f"{visible(step)} ε={format_float(as_float(e))}" + ("" if not d else f", δ={format_float(as_float(d))}")
        for step, (e, d) in release.split.items()))
    selection = getattr(release, "selection", None)
    if selection is not None:
        header.add_row("keys", "public domain" if selection == "domain" else f"selected privately ({visible(selection)})")
    header.add_row("privacy unit", unit_text(privacy_unit if getattr(release, "unit", False) else None))
    if getattr(release, "unit", False):
        header.add_row("bounding", f"≤ {release.max_groups_per_unit} groups per unit, "
                       f"≤ {release.max_rows_per_group} rows per group")
        header.add_row("rows dropped", ROWS_DROPPED_TEXT)
    header.add_row("groups released", f"{len(groups):,}")
    header.add_row("randomness", "secure (AES-CTR CSPRNG)" if release.secure else "NOT secure (seeded generator)")
    console.print(header)

    n = min(rows, len(groups))
    table = Table(title=Text(visible(f"{file.name} · by {', '.join(by)}")), show_lines=False)
    for name in by:
        table.add_column(Text(visible(name)))
    names = list(release.metrics)
    from ..mechanisms._aggregate_plot import interval_kind

    kinds = {name: interval_kind(release, name) for name in names}
    clipped = [name for name in names if name + "_clip_low" in groups]  # unbounded means
    for name in names:
        label = " [grid cell]" if kinds[name] == "grid_cell" else " [95% noise]"
        table.add_column(Text(visible(name) + label), justify="right")
        if name in clipped:
            table.add_column(Text(visible(name) + " clipped to"), justify="right")
    cells = []
    for name in names:
        values = groups[name].iloc[:n].tolist()
        lows = groups[name + "_low"].iloc[:n].tolist() if name + "_low" in groups else [None] * n
        highs = groups[name + "_high"].iloc[:n].tolist() if name + "_high" in groups else [None] * n
        oks = groups[name + "_ok"].iloc[:n].tolist() if name + "_ok" in groups else [True] * n
        cells.append([_cell(v, lo, hi, bool(ok)) for v, lo, hi, ok in zip(values, lows, highs, oks)])
        if name in clipped:
            lows = groups[name + "_clip_low"].iloc[:n].tolist()
            highs = groups[name + "_clip_high"].iloc[:n].tolist()
            cells.append([_range(lo, hi, bool(ok)) for lo, hi, ok in zip(lows, highs, oks)])
    key_cols = [[visible(_text(v)) for v in groups[c].iloc[:n].tolist()] for c in by]
    for i in range(n):
        table.add_row(*[Text(col[i]) for col in key_cols], *[Text(col[i]) for col in cells])
    console.print(table)
    if len(groups) > n:
        console.print(Text(f"… {len(groups) - n:,} more groups (use --json for all, --rows to show more)"))
    elif len(groups) == 0:
        console.print(Text("no group was released"))
    notes = []
    if any(k == "noise95" for k in kinds.values()):
        notes.append("[95% noise]: holds the value without noise with probability ≥ 95% per group "
                     "(noise only: not clamping bias or sampling error)")
    if clipped:
        notes.append("clipped to: the range each group's unbounded mean clamped its values to (chosen "
                     "privately); the interval covers the mean of the clamped values, so a group whose "
                     "rows lie beyond the range is released biased toward it")
    if any(k == "grid_cell" for k in kinds.values()):
        notes.append("[grid cell]: the quantile's neighbouring candidates (its resolution), not a "
                     "confidence interval")
    for name in names:  # an unbounded quantile without a released count cannot mark small groups ⊥
        need = (getattr(release, "extra", None) or {}).get(name, {}).get("rows_needed")
        if need is not None and len(need) and "count" not in names:
            notes.append(f"{name}: a group with fewer than about {int(need[0]):,} rows may be released far "
                         "from its data (add --count: such groups are then marked ⊥, or released over the "
                         "clipping range of an unbounded --mean of the same column)")
    for note in notes:
        console.print(Text(visible(note)))
    for name in names:  # why groups are ⊥ (public sentences)
        if name + "_reason" in groups:
            reasons = groups[name + "_reason"].dropna().unique().tolist()
            for reason in reasons[:5]:
                console.print(Text(f"⊥ in {visible(name)}: {visible(reason)}"))


def plot_figure(release: Any) -> Any:
    """The release's figure (:func:`privagg.mechanisms._aggregate_plot.figure`, shared with
    :meth:`privagg.AggregateRelease.plot`)."""
    from ..mechanisms._aggregate_plot import figure

    return figure(release)
