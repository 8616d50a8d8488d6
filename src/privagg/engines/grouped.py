"""The engine of :func:`privagg.aggregate`: a table read once by DuckDB, its groups, their bounded
counts and the bounded rows of each numeric column, all before any noise is drawn.

Inputs. A CSV or Parquet path (read exactly as :mod:`privagg.engines.duckdb` reads files: the
schema from the CSV header only, the same lenient reader, dialect and invalid-UTF-8 rules — a
malformed record has NULL keys and is dropped), a pandas or polars DataFrame, a pyarrow Table or a
DuckDB relation (registered in a private DuckDB connection). Every input then goes through the
same SQL, so the same data and the same seed give the same release whatever the container.
A Spark DataFrame is handed to :mod:`privagg.engines.spark_grouped` (the same steps in Spark).

What is public: the schema (column names and DuckDB types), the parameters, the domain. Messages
name columns and types, never a value.

Steps (:meth:`GroupedTable.prepare`), each one DuckDB statement, no Python loop over rows or groups:

1. **materialize** the needed columns once into a temporary table ``t``: the key of every ``by``
   column (canonical: −0.0 is 0.0, NaN and a NUL byte in a CSV field are NULL), the unit, and each
   metric column as DOUBLE (CSV: ``TRY_CAST(trim(x))``, a non-number is NULL), filtered by
   ``WHERE coalesce((<where>), false)`` (the SQL of :func:`privagg.engines.where.check_where`) and
   by "no key is NULL" (declared, 1-stable: rows with a NULL key are dropped);
2. **groups**: with a public domain, the domain's keys cast to the key types, numbered in the
   domain's order (rows with other keys drop out at the join: 1-stable); without, the distinct keys
   (``GROUP BY``), numbered in DuckDB's ``ORDER BY`` of the key columns (a canonical order, never
   record order);
3. **bounding** (units only). Every (unit, group) pair present gets the priority of
   :data:`privagg.engines.base.PRIORITY_SQL`, ``π(u, k) = hash(hash(s, hash(u), hash(k)))`` (k: the
   tuple of key columns); each unit keeps its ``max_groups`` pairs of smallest priority
   (ℓ0 = 1: ``arg_min``, one hash aggregate; ℓ0 > 1: a window over the pairs, ties broken by k). A kept pair with at most
   ``max_rows`` rows keeps them all; in the others the rows are ranked by
   ``π(u, k, x) = hash(hash(s', hash(u), hash(k), hash(x)))``, x the row's own metric values (ties
   broken by x itself), and the ``max_rows`` smallest are kept (``arg_min``; for ℓ∞ > 1 a window
   over the rows of those pairs only). Identical rows have identical priorities and are
   interchangeable. A unit's kept rows are a function of its own
   rows and of the secrets only: adding or removing a unit changes no other unit's kept rows, for
   every secret (docs/proofs/aggregate.md §3). A NULL unit is one unit;
4. **counts** per group: bounded rows (record level: rows) and distinct units (record level: rows);
5. **values**: for a column that only bounded sums and means read (``prepare(sums=…)``), one
   ``GROUP BY i`` gives its present counts and exact clamped integer sums per group
   (:meth:`GroupedTable._column_sums`, a :class:`~privagg.mechanisms.grouped.ColumnSums`: the
   clamping and summing happen in DuckDB, the values are not fetched); for the other columns (a
   quantile's, an unbounded mean's) one fetch of (group, v…) for the bounded rows, ordered by the
   group id only (``ORDER BY i``: a sort on one integer key), then per metric column the rows with
   a finite value. Inside a group the rows are in no particular order (DuckDB's, which may vary
   between runs): a metric whose random draws depend on row order must sort its group's values itself.

Everything that reads data runs here, before the ledger is charged; afterwards only numpy
(:meth:`Candidates.restrict`) and noise remain.
"""

from __future__ import annotations

import math
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from .._validate import fail
from ..errors import ParameterError
from . import duckdb as dd
from .base import PRIORITY_SQL
from ..mechanisms.grouped import ColumnSums, GroupedValues

__all__ = ["Candidates", "GroupedTable", "TABLE_RULE", "open_table"]

TABLE_RULE = ("a CSV/Parquet path, a pandas or polars DataFrame, a pyarrow Table or a DuckDB relation")
_NUMERIC_TYPE = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT"
    r"|FLOAT|DOUBLE|REAL|DECIMAL(\(\d+, ?\d+\))?)$"
)
_UNIT_COLUMN = "__privagg_unit__"


#: The engines sum the clamped terms (|k| < 2^39) as two long sums, of ``k >> SPLIT_BITS`` and of
#: ``k & (2^SPLIT_BITS − 1)``: neither overflows a 64-bit integer below 2^43 rows.
SPLIT_BITS = 20


def power_steps(k: int) -> list[float]:
    """Normal powers of two whose product is ``2^k`` (each in ``2^−1022 … 2^1023``): the engines
    scale a clamped value by ``2^−e`` through them, so every product is exact unless the term
    rounds to 0 anyway (a ``2^k`` beyond the double range would be 0 or ∞)."""
    out = []
    while k:
        step = max(-1022, min(1023, k))
        out.append(math.ldexp(1.0, step))
        k -= step
    return out


def split_sums(idx: np.ndarray, high: np.ndarray, low: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact per-group sums (object array of Python ints, shape (G,)) from the two part sums of
    :data:`SPLIT_BITS` at the group ids ``idx`` (absent groups: 0): ``high·2^SPLIT_BITS + low``."""
    parts = []
    for part_sums in (high, low):
        part = np.zeros(n_groups, dtype=np.int64)
        part[np.asarray(idx, dtype=np.int64)] = np.asarray(part_sums).astype(np.int64, copy=False)
        parts.append(part.astype(object))
    return parts[0] * (1 << SPLIT_BITS) + parts[1]


@dataclass(frozen=True, eq=False)
class Candidates:
    """The groups that may be released, in their canonical (or domain) order, before selection.

    Attributes
    ----------
    keys : list of numpy.ndarray
        One array per ``by`` column (C candidates each). With a domain: its keys, in its order.
    rows : numpy.ndarray
        int64 (C,): bounded rows per group (record level: rows) — what ``count()`` counts.
    units : numpy.ndarray
        int64 (C,): distinct units per group after bounding (record level: rows) — what the key
        selection counts.
    values : dict
        Column name → :class:`~privagg.mechanisms.grouped.GroupedValues` over the C candidates
        (the rows' values), or :class:`~privagg.mechanisms.grouped.ColumnSums` (the exact
        per-group present counts and clamped integer sums only) where the engine computed them
        where the rows live and the query needs nothing else of the column (DuckDB, Spark).
    """

    keys: list[np.ndarray]
    rows: np.ndarray
    units: np.ndarray
    values: dict[str, GroupedValues | ColumnSums]

    @property
    def size(self) -> int:
        return int(self.rows.shape[0])

    def restrict(self, keep: np.ndarray) -> Candidates:
        """The candidates where ``keep`` (bool, (C,)) holds, renumbered 0 … G − 1 in the same order
        (numpy only: it cannot fail on data)."""
        keep = np.asarray(keep, dtype=bool)
        g = int(keep.sum())
        values = {}
        ids: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}  # columns often share one group array
        for name, gv in self.values.items():
            if not isinstance(gv, GroupedValues):  # per-group aggregates, or rows kept by the engine
                values[name] = gv.restrict(keep)
                continue
            key = id(gv.group)
            if key not in ids:
                # gv.group is sorted: the kept rows are whole segments, renumbered by a repeat
                if g == keep.size:
                    ids[key] = (gv.group, None)
                else:
                    sizes = np.diff(gv.offsets)
                    ids[key] = (np.repeat(np.arange(g, dtype=np.int64), sizes[keep]), np.repeat(keep, sizes))
            group, sel = ids[key]
            values[name] = GroupedValues(group=group, values=gv.values if sel is None else gv.values[sel],
                                         n_groups=g)
        return Candidates(keys=[k[keep] for k in self.keys], rows=self.rows[keep], units=self.units[keep],
                          values=values)


@dataclass(frozen=True)
class _Source:
    """A readable table: its FROM clause and parameters, its schema, how to register it."""

    sql: str
    params: dict[str, Any]
    types: dict[str, str]
    label: str  # "csv", "parquet", or "table"
    path: Path | None = None
    obj: Any = None  # registered as "src" (in-memory inputs)


def _module(x: Any) -> str:
    return type(x).__module__.split(".")[0]


def _describe_file(path: Any, caller: str, csv: Any) -> _Source:
    p = Path(path)
    options = dd.check_csv_options(caller, csv)
    fmt = dd.detect_format(p, caller)
    if p.stat().st_size == 0:
        raise dd._unparsable(caller, p, fmt)
    if fmt == "csv":
        header = dd.read_csv_header(p, options, caller)
        info = dd.FileColumn(path=p, format=fmt, column=header[0], duckdb_type="VARCHAR", csv=options, header=header)
        return _Source(dd._source(fmt), dd._params(info), dict.fromkeys(header, "VARCHAR"), "csv", p)
    con = dd._connect(dd.DEFAULT_MEMORY_LIMIT, None)
    try:
        schema = con.sql(f"DESCRIBE SELECT * FROM {dd._source(fmt)}", params={"path": str(p)}).fetchall()
    except duckdb.Error:
        raise dd._unparsable(caller, p, fmt) from None
    finally:
        con.close()
    return _Source(dd._source(fmt), {"path": str(p)}, {r[0]: str(r[1]) for r in schema}, "parquet", p)


def _describe_memory(table: Any, caller: str, units: Any) -> _Source:
    """pandas / polars / pyarrow / DuckDB relation → an object DuckDB can scan, and its schema."""
    mod = _module(table)
    pa = sys.modules.get("pyarrow")
    obj: Any
    if mod == "pandas" and type(table).__name__ == "DataFrame":
        obj = table
    elif mod == "polars" and type(table).__name__ == "DataFrame":
        obj = table.to_arrow()
    elif pa is not None and isinstance(table, pa.Table):
        obj = table
    elif mod == "duckdb" and type(table).__name__ == "DuckDBPyRelation":
        obj = table
    else:
        raise fail(caller, "table", TABLE_RULE, f"<{type(table).__module__}.{type(table).__qualname__}>")
    if units is not None and not isinstance(units, str):
        if mod == "duckdb":
            raise fail(caller, "units", "a column name for a DuckDB relation (its row order is not defined)",
                       "an array")
        obj = _with_unit_array(obj, units, caller)
    if mod == "duckdb":
        types = {str(c): str(t) for c, t in zip(obj.columns, obj.types, strict=True)}
    else:
        con = duckdb.connect(":memory:")
        try:
            con.register("src", obj)
            types = {r[0]: str(r[1]) for r in con.sql("DESCRIBE SELECT * FROM src").fetchall()}
        except duckdb.Error:
            raise fail(caller, "table", TABLE_RULE + " with columns DuckDB can read",
                       f"<{type(table).__module__}.{type(table).__qualname__}>") from None
        finally:
            con.close()
    return _Source("src", {}, types, "table", None, obj)


def _with_unit_array(obj: Any, units: Any, caller: str) -> Any:
    """An in-memory table with the unit array appended as the column ``__privagg_unit__``."""
    import pyarrow as pa

    table = pa.Table.from_pandas(obj, preserve_index=False) if _module(obj) == "pandas" else obj
    if _UNIT_COLUMN in table.column_names:
        raise fail(caller, "table", f"a table without a column named {_UNIT_COLUMN!r}", _UNIT_COLUMN)
    try:
        if _module(units) == "polars":
            arr = units.to_arrow()
        elif _module(units) == "pandas":
            arr = pa.Array.from_pandas(units)
        else:
            arr = pa.array(units if not isinstance(units, np.ndarray) or units.ndim == 1 else units.tolist())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        raise fail(caller, "units", "a column name or a 1-D array of one scalar type", "an array") from None
    if len(arr) != table.num_rows:
        # lengths are not shown: under add/remove n is private
        raise fail(caller, "units", "a column name or an array aligned with the table's rows", "another length")
    return table.append_column(_UNIT_COLUMN, arr)


def _key_expr(column: str, duckdb_type: str, label: str) -> str:
    """A ``by`` column as a canonical key: floats −0.0 → 0.0 and NaN → NULL; CSV: NUL byte → NULL;
    non-native types as their exact text (as :mod:`privagg.engines.duckdb` keys them)."""
    expr = column
    if label == "csv":
        return dd._csv_key_sql(expr)
    if duckdb_type in dd._FLOAT_TYPES:
        expr = f"CASE WHEN isnan({expr}) THEN NULL ELSE {expr} END"
    return dd._key_sql(expr, duckdb_type)


def _value_expr(column: str, label: str) -> str:
    return f"TRY_CAST(trim({column}) AS DOUBLE)" if label == "csv" else f"CAST({column} AS DOUBLE)"


def duplicate_domain_key(caller: str, domain: Any, i: int) -> ParameterError:
    """The error for a domain whose key ``i`` repeats an earlier one (after the cast): the
    domain is public, so its key may be shown."""
    key = tuple(col[i] for col in domain)
    return fail(caller, "domain", "distinct keys (after the cast to the columns' types)",
                key if len(key) > 1 else key[0])


def domain_columns(domain: Any) -> list[np.ndarray]:
    """The domain's key columns as object arrays (the values exactly as the user gave them)."""
    out = []
    for col in domain:
        arr = np.empty(len(col), dtype=object)
        arr[:] = list(col)
        out.append(arr)
    return out


class GroupedTable:
    """One table opened for :func:`privagg.aggregate` (schema checked; nothing read yet).

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, source: _Source, by: list[str], unit: str | None, columns: list[str], where_sql: str | None,
                 caller: str, memory_limit: str) -> None:
        self._src, self.by, self.unit, self.columns = source, by, unit, columns
        self._where, self._caller, self._memory_limit = where_sql, caller, memory_limit
        self._tmp: str | None = None
        self._con: duckdb.DuckDBPyConnection | None = None
        self._size: int | None = None  # C, the number of candidate groups

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> GroupedTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._tmp = tempfile.mkdtemp(prefix="privagg-duckdb-")
            try:
                self._con = dd._connect(self._memory_limit, self._tmp)
            except duckdb.Error:
                raise fail(self._caller, "memory_limit", "a DuckDB memory size such as '1GB'",
                           self._memory_limit) from None
            if self._src.obj is not None:
                obj = self._src.obj
                if _module(obj) == "duckdb":
                    obj = obj.to_arrow_reader()
                self._con.register("src", obj)
        return self._con

    def _run(self, sql: str, params: dict[str, Any] | None = None, fetch: bool = False) -> Any:
        con = self._connection()
        try:
            result = con.execute(sql, params or {})
            return result.fetchnumpy() if fetch else None
        except duckdb.OutOfMemoryException:
            rule = "large enough for DuckDB to aggregate the table (it ran out of memory)"
            raise fail(self._caller, "memory_limit", rule, self._memory_limit) from None
        except duckdb.Error:
            if self._src.path is not None:
                raise dd._unparsable(self._caller, self._src.path, self._src.label) from None  # type: ignore[arg-type]
            raise fail(self._caller, "table", TABLE_RULE + " that DuckDB can read", "a table it could not read") from None

    # -- the work ----------------------------------------------------------------------------
    def key_types(self) -> list[str]:
        """The DuckDB types of the ``by`` columns as keyed (CSV: VARCHAR; non-native types: VARCHAR)."""
        out = []
        for c in self.by:
            t = self._src.types[c]
            out.append("VARCHAR" if self._src.label == "csv" or (t not in dd._NATIVE_TYPES) else t)
        return out

    def prepare(self, *, domain: list[list[Any]] | None = None, max_groups: int = 1, max_rows: int = 1,
                secrets: tuple[int, int] = (0, 0), sums: Any = None, kept_rows: Any = None) -> Candidates:
        """Materialize, group, bound, count and fetch (module docstring, steps 1–5).

        Parameters
        ----------
        domain : list of lists, optional
            One list per ``by`` column (the public keys, aligned: key j is the tuple of entry j of
            each list). Cast to the key types in DuckDB; a key that cannot be cast, and two keys
            equal after the cast, are a ParameterError naming ``domain`` (public values shown).
        max_groups, max_rows : int
            ℓ0 and ℓ∞ (units only; must be 1 without a unit column).
        secrets : (int, int)
            The two 64-bit secrets of the bounding (pair priorities, row priorities); never shown.
        sums : dict, optional
            {column: [(lo, hi), …]}: columns whose metrics read only present counts and clamped
            integer sums: computed in DuckDB (:meth:`_column_sums`), their values not fetched.
        kept_rows : dict, optional
            Columns that unbounded means or quantiles read (``aggregate._kept_rows``): fetched here like the
            other columns (an engine that keeps rows where they live serves them as
            :class:`~privagg.mechanisms.grouped.KeptRows`: Spark).
        """
        q = dd.quote_identifier
        src, label = self._src, self._src.label
        keys = [f"k{i}" for i in range(len(self.by))]
        vals = [f"v{j}" for j in range(len(self.columns))]
        select = [f"{_key_expr(q(c), src.types[c], label)} AS {k}" for c, k in zip(self.by, keys, strict=True)]
        if self.unit is not None:
            ut = src.types[self.unit]
            select.append(f"{_key_expr(q(self.unit), ut, label)} AS u")
        select += [f"{_value_expr(q(c), label)} AS {v}" for c, v in zip(self.columns, vals, strict=True)]
        where = " AND ".join(f"{k} IS NOT NULL" for k in keys)
        inner = f"SELECT {', '.join(select)} FROM {src.sql}"
        if self._where is not None:
            inner += f" WHERE coalesce(({self._where}), false)"
        self._run(f"CREATE TEMP TABLE t AS SELECT * FROM ({inner}) WHERE {where}", src.params)
        kl = ", ".join(keys)
        using = f"USING ({kl})"
        dom_keys = self._domain_table(domain, keys) if domain is not None else None
        if self.unit is None:
            if domain is None:
                self._run(f"CREATE TEMP TABLE grp AS SELECT (row_number() OVER (ORDER BY {kl}) - 1)::BIGINT AS i, "
                          f"{kl}, count(*)::BIGINT AS n FROM t GROUP BY {kl}")
                counts = self._run("SELECT i, n FROM grp ORDER BY i", fetch=True)
            else:
                counts = self._run(f"SELECT i, count(*)::BIGINT AS n FROM t JOIN grp {using} GROUP BY i", fetch=True)
            rows_src = f"(SELECT g.i, {', '.join('t.' + v for v in vals)} FROM t JOIN grp g {using})"
            n_rows = n_units = self._dense(counts, "n")
        else:
            rows_src, n_rows, n_units = self._bound(keys, vals, domain, max_groups, max_rows, secrets)
        key_arrays = self._fetch_keys(keys) if dom_keys is None else dom_keys
        n_groups = int(n_rows.shape[0])
        values: dict[str, GroupedValues | ColumnSums] = {}
        sums = dict(sums or {})
        raw = [(c, v) for c, v in zip(self.columns, vals, strict=True) if c not in sums]
        agg = [(c, v) for c, v in zip(self.columns, vals, strict=True) if c in sums]
        if agg:
            values.update(self._column_sums(rows_src, agg, sums, n_groups))
        if raw:  # one fetch of (i, v0, v1, …) ordered by the group id i (DuckDB's parallel sort on i)
            res = self._run(f"SELECT i, {', '.join(v for _, v in raw)} FROM {rows_src} ORDER BY i", fetch=True)
            group = np.ma.getdata(res["i"]).astype(np.int64, copy=False)
            for c, v in raw:
                col = res[v]
                col = col.astype(np.float64).filled(np.nan) if np.ma.isMaskedArray(col) else col
                x = np.asarray(col, dtype=np.float64)
                finite = np.isfinite(x)
                if finite.all():  # no copies (the columns share the group array)
                    values[c] = GroupedValues(group=group, values=x, n_groups=n_groups)
                else:
                    values[c] = GroupedValues(group=group[finite], values=x[finite], n_groups=n_groups)
        return Candidates(keys=key_arrays, rows=n_rows, units=n_units, values=values)

    def _column_sums(self, rows_src: str, agg: list[tuple[str, str]], sums: dict[str, Any],
                     n_groups: int) -> dict[str, ColumnSums]:
        """One ``GROUP BY i`` for the columns ``agg``: per group the count of finite values and, per
        bounds ``(lo, hi)``, the exact ``Σ clamped_terms`` of :mod:`~privagg.mechanisms.grouped_bounded`
        (``y = clamp(x, lo, hi)·2^−e``, scaled by normal powers of two: exact for every term that does
        not round to 0; rounded half to even with ``floor`` and the exact ``y − floor(y)``), summed as
        two BIGINT sums of ``k >> 20`` and ``k & (2^20 − 1)`` (no overflow below 2^43 rows) and
        recombined as Python integers: the integers numpy computes from the fetched values, without
        fetching them."""
        from ..mechanisms.grouped_bounded import _term_exponent

        params: dict[str, float] = {}

        def const(x: float) -> str:  # a DOUBLE parameter: exact (a literal would parse as DECIMAL)
            name = f"c{len(params)}"
            params[name] = float(x)
            return f"${name}::DOUBLE"

        def scaled(expr: str, k: int) -> str:
            for step in power_steps(k):
                expr = f"({expr} * {const(step)})"
            return expr

        exprs, names = [], []
        for c, v in agg:
            exprs.append(f"count({v}) FILTER (WHERE isfinite({v}))::BIGINT AS p_{v}")
            for j, (lo, hi) in enumerate(dict.fromkeys((float(a), float(b)) for a, b in sums[c])):
                y = scaled(f"greatest(least({v}, {const(hi)}), {const(lo)})", -_term_exponent(lo, hi))
                fl = f"floor({y})"
                k = (f"({fl}::BIGINT + CASE WHEN {y} - {fl} > 0.5 OR ({y} - {fl} = 0.5 AND "
                     f"({fl}::BIGINT & 1) = 1) THEN 1 ELSE 0 END)")
                exprs.append(f"coalesce(sum({k} >> {SPLIT_BITS}) FILTER (WHERE isfinite({v})), 0)::BIGINT AS h_{v}_{j}")
                exprs.append(f"coalesce(sum({k} & {(1 << SPLIT_BITS) - 1}) FILTER (WHERE isfinite({v})), 0)::BIGINT "
                             f"AS l_{v}_{j}")
                names.append((c, v, j, (lo, hi)))
        res = self._run(f"SELECT i, {', '.join(exprs)} FROM {rows_src} GROUP BY i", params, fetch=True)
        idx = np.ma.getdata(res["i"]).astype(np.int64, copy=False)
        out: dict[str, ColumnSums] = {}
        for c, v in agg:
            present = np.zeros(n_groups, dtype=np.int64)
            present[idx] = np.ma.getdata(res[f"p_{v}"]).astype(np.int64, copy=False)
            out[c] = ColumnSums(present=present, sums={}, n_groups=n_groups)
        for c, v, j, bounds in names:
            out[c].sums[bounds] = split_sums(idx, np.ma.getdata(res[f"h_{v}_{j}"]),
                                             np.ma.getdata(res[f"l_{v}_{j}"]), n_groups)
        return out

    def _dense(self, result: dict[str, np.ndarray], name: str) -> np.ndarray:
        """Counts per candidate 0 … C − 1 from fetched (i, count) pairs (absent: 0)."""
        if self._size is None:
            self._size = int(self._run("SELECT count(*)::BIGINT AS c FROM grp", fetch=True)["c"][0])
        out = np.zeros(self._size, dtype=np.int64)
        out[np.ma.getdata(result["i"]).astype(np.int64)] = np.ma.getdata(result[name]).astype(np.int64)
        return out

    def _bound(self, keys: list[str], vals: list[str], domain: Any, l0: int, linf: int,
               secrets: tuple[int, int]) -> tuple[str, np.ndarray, np.ndarray]:
        """Steps 3–4 with units: kept pairs ``kp`` and kept rows ``kr``; (rows source, rows, units)."""
        kl = ", ".join(keys)
        base = "t" if domain is None else f"(SELECT t.* FROM t JOIN grp USING ({kl}))"
        # π(u, k) of PRIORITY_SQL with k the tuple of key columns (hash is variadic in DuckDB)
        pair_prio = PRIORITY_SQL.replace("$secret", "$s1").format(unit="u", key=kl)
        self._run(f"CREATE TEMP TABLE pairs AS SELECT u, {kl}, count(*)::BIGINT AS r FROM {base} GROUP BY u, {kl}")
        fields = "{" + ", ".join(f"'{k}': {k}" for k in keys) + ", 'r': r}"
        if l0 == 1:  # one hash aggregate, no sort
            order = "{" + f"'p': {pair_prio}, " + ", ".join(f"'{k}': {k}" for k in keys) + "}"  # ties: by k
            top, params = f"SELECT u, arg_min({fields}, {order}) AS x FROM pairs GROUP BY u", {}
        else:  # a window over the pairs (spills to disk; DuckDB's top-n min_by does not)
            top = (f"SELECT u, {fields} AS x FROM pairs QUALIFY row_number() OVER "
                   f"(PARTITION BY u ORDER BY {pair_prio}, {kl}) <= $l0")
            params = {"l0": int(l0)}
        picked = ", ".join(f"x.{k} AS {k}" for k in keys)
        self._run(f"CREATE TEMP TABLE kp AS SELECT u, {picked}, x.r AS r_all, least(x.r, $linf)::BIGINT AS r "
                  f"FROM ({top})", {**params, "s1": int(secrets[0]), "linf": int(linf)})
        self._run("DROP TABLE pairs")
        if domain is None:
            self._run(f"CREATE TEMP TABLE grp AS SELECT (row_number() OVER (ORDER BY {kl}) - 1)::BIGINT AS i, "
                      f"{kl}, sum(r)::BIGINT AS n, count(*)::BIGINT AS m FROM kp GROUP BY {kl}")
            counts = self._run("SELECT i, n, m FROM grp", fetch=True)
        else:
            counts = self._run(f"SELECT i, sum(r)::BIGINT AS n, count(*)::BIGINT AS m FROM kp JOIN grp USING ({kl}) "
                               "GROUP BY i", fetch=True)
        n_rows, n_units = self._dense(counts, "n"), self._dense(counts, "m")
        if vals:
            # The rows of the kept pairs (a NULL unit is one unit: IS NOT DISTINCT FROM). Pairs with at
            # most ℓ∞ rows keep them all; in the others, the ℓ∞ rows of smallest row priority
            # π(u, k, x), ties (identical rows, or a 64-bit collision) broken by the values themselves.
            on = " AND ".join([f"t.u IS NOT DISTINCT FROM kp.u"] + [f"t.{k} = kp.{k}" for k in keys])
            tv = ", ".join(f"t.{v}" for v in vals)
            vl = ", ".join(vals)
            row_prio = f"hash(hash($s2::UBIGINT, hash(u), hash({kl}), hash({vl})))"
            tk = f"(SELECT t.u, {', '.join('t.' + k for k in keys)}, {tv}, kp.r_all FROM t JOIN kp ON {on})"
            whole = f"SELECT {kl}, {vl} FROM tk WHERE r_all <= $linf"
            if linf == 1:
                struct = "{" + ", ".join(f"'{c}': {c}" for c in keys + vals) + "}"
                prio = "{" + f"'p': {row_prio}, " + ", ".join(f"'{v}': {v}" for v in vals) + "}"
                ranked = (f"SELECT unnest(arg_min({struct}, {prio})) FROM tk WHERE r_all > $linf "
                          f"GROUP BY u, {kl}")
            else:
                ranked = (f"SELECT {kl}, {vl} FROM tk WHERE r_all > $linf QUALIFY row_number() OVER "
                          f"(PARTITION BY u, {kl} ORDER BY {row_prio}, {vl}) <= $linf")
            self._run(f"CREATE TEMP TABLE kr AS WITH tk AS {tk} SELECT g.i, {', '.join('b.' + v for v in vals)} "
                      f"FROM ({whole} UNION ALL {ranked}) b JOIN grp g USING ({kl})",
                      {"s2": int(secrets[1]), "linf": int(linf)})
        return "kr", n_rows, n_units

    def _domain_table(self, domain: list[list[Any]], keys: list[str]) -> list[np.ndarray]:
        """The table ``grp(i, k…)`` of the domain's keys cast to the key types (i = position)."""
        import pyarrow as pa

        caller = self._caller
        try:
            arrays = [pa.array(list(col)) for col in domain]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
            raise fail(caller, "domain", "keys of one scalar type per 'by' column", "keys of mixed types") from None
        table = pa.table({f"d{j}": a for j, a in enumerate(arrays)} | {"i": pa.array(np.arange(len(domain[0])))})
        con = self._connection()
        con.register("dom_src", table)
        casts = []
        for j, (c, k) in enumerate(zip(self.by, keys, strict=True)):
            t = self._src.types[c]
            target = "VARCHAR" if self._src.label == "csv" else t
            if not dd._TYPE_NAME.fullmatch(target):
                raise fail(caller, "by", "columns of a type a domain can be cast to", f"{c!r} of type {t}")
            expr = f"TRY_CAST(d{j} AS {target})"
            casts.append(f"{_key_expr(expr, target, self._src.label)} AS {k}")
        try:
            con.execute(f"CREATE TEMP TABLE grp AS SELECT i::BIGINT AS i, {', '.join(casts)} FROM dom_src")
            bad = con.execute("SELECT min(i) FROM grp WHERE " + " OR ".join(f"{k} IS NULL" for k in keys)).fetchall()
            dup = con.execute(f"SELECT min(i), count(*) FROM grp GROUP BY {', '.join(keys)} HAVING count(*) > 1 "
                              "ORDER BY 1 LIMIT 1").fetchall()
        except duckdb.Error:
            raise fail(caller, "domain", "keys castable to the 'by' columns' types", "keys it could not cast") from None
        finally:
            con.unregister("dom_src")
        if bad[0][0] is not None:
            i = int(bad[0][0])
            key = tuple(col[i] for col in domain)
            raise fail(caller, "domain", "keys of the 'by' columns' types "
                       f"({', '.join(self._src.types[c] for c in self.by)})", key if len(key) > 1 else key[0])
        if dup:
            raise duplicate_domain_key(caller, domain, int(dup[0][0]))
        self._size = len(domain[0])
        return domain_columns(domain)

    def _fetch_keys(self, keys: list[str]) -> list[np.ndarray]:
        res = self._run(f"SELECT {', '.join(keys)} FROM grp ORDER BY i", fetch=True)
        out = []
        for c, k in zip(self.by, keys, strict=True):
            arr = np.ma.getdata(res[k])
            out.append(dd._key_dtype(arr, self._src.types[c]))
        return out


def open_table(table: Any, *, by: Sequence[str], units: Any, columns: Sequence[str], where: str | None,
               caller: str = "aggregate", csv: Any = None,
               memory_limit: str = dd.DEFAULT_MEMORY_LIMIT) -> GroupedTable:
    """Check the table's schema (public) and return it opened (nothing read yet).

    ``by``: the key columns (distinct, existing, scalar types); ``units``: None, a column name, or
    (in-memory tables) an array aligned with the rows; ``columns``: the metric columns (existing;
    numeric types — CSV columns are text and always accepted, a non-number being a missing value);
    ``where``: a filter expression, checked by :func:`privagg.engines.where.check_where`.

    Raises
    ------
    ParameterError
        Naming ``table``, ``by``, ``units``, ``metrics`` or ``where``; never a value of the data.
    """
    if type(table).__module__.startswith("pyspark.sql") and type(table).__name__ == "DataFrame":  # issue 14
        from .spark_grouped import open_spark_table

        return open_spark_table(table, by=by, units=units, columns=columns, where=where,  # type: ignore[return-value]
                                caller=caller)
    if isinstance(table, (str, Path)):
        if units is not None and not isinstance(units, str):
            raise fail(caller, "units", "a column name for a file (an array cannot be aligned with its records)",
                       "an array")
        src = _describe_file(table, caller, csv)
    else:
        if csv is not None:
            raise fail(caller, "csv", "None for an in-memory table (a CSV dialect is for a CSV file)",
                       type(csv).__name__)
        src = _describe_memory(table, caller, units)
    names = list(src.types)
    shown = ", ".join(repr(n) for n in names[:12]) + (f", ... ({len(names)} columns)" if len(names) > 12 else "")

    def column(name: str, param: str) -> str:
        if not isinstance(name, str) or name not in src.types:
            raise fail(caller, param, f"a column of the table ({shown})", name)
        if dd._NESTED_TYPE.search(src.types[name]):
            raise fail(caller, param, "a column of scalar values (not a LIST, STRUCT, MAP or UNION)",
                       f"{name!r} of type {src.types[name]}")
        return name

    for c in by:
        column(c, "by")
    unit = None
    if units is not None:
        unit = column(units, "units") if isinstance(units, str) else _UNIT_COLUMN
    for c in columns:
        column(c, "metrics")
        if src.label != "csv" and not _NUMERIC_TYPE.match(src.types[c]):
            raise fail(caller, "metrics", "numeric columns (integer, float or decimal)",
                       f"{c!r} of type {src.types[c]}")
    from .where import check_where

    visible = [n for n in names if n != _UNIT_COLUMN]
    # bound to the schema now: a type error (a CSV text column compared with a number) is a
    # ParameterError naming 'where' here, not a failed read later
    # (an ENUM column — a pandas categorical — binds as the VARCHAR it compares like)
    bind_types = {n: "VARCHAR" if src.types[n].startswith("ENUM(") else src.types[n] for n in visible}
    where_sql = check_where(where, visible, where=caller, types=bind_types)
    return GroupedTable(src, list(by), unit, list(columns), where_sql, caller, memory_limit)

