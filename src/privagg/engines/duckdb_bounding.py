"""The DuckDB engine behind :class:`privagg.engines.base.Engine`: a key column (and a unit column)
of one CSV or Parquet file, bounded and counted inside DuckDB (out of core).

User level (:meth:`DuckDBEngine.bounded_counts`), with π(u, k) the priority of
:mod:`privagg.engines.base` and the secret bound as a query parameter (never in the SQL text):

- ℓ0 = 1, ℓ∞ = 1 (the default): ``arg_min(key, π)`` per unit — one hash aggregate over the
  rows, then a count per key (no sort, no window);
- otherwise: ``least(count(*), ℓ∞)`` per (unit, key) pair, then the pairs whose π is among the
  ℓ0 smallest of their unit: ``lag(π, ℓ0) OVER (PARTITION BY unit ORDER BY π) IS NULL`` (fewer
  than ℓ0 pairs of the unit before it; π is never NULL), then a sum per key. The window is
  hash-partitioned by unit and sorts each partition; it spills to disk. It replaced DuckDB's
  top-n aggregate ``min_by({key, c}, π, ℓ0)`` (the same kept set), whose per-group heap of
  structs cost ~3× the plain ``COUNT(DISTINCT unit) GROUP BY key`` (benchmarks/user_level.py (a)).
  One query shape for every data set and every ℓ0 > 1 or ℓ∞ > 1.

Missing keys (NULL, a NUL byte in a CSV field, float NaN) and, with a domain, keys outside it
are the ``other`` pseudo-key (NULL): dropped before bounding, or bounded like a key when
``keep_other``. A NULL unit is one unit. Malformed CSV records (skipped by DuckDB's lenient
reader, see :mod:`privagg.engines.duckdb`) belong to no unit and contribute nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import duckdb
import numpy as np

from .._validate import fail
from . import duckdb as dd
from .base import PRIORITY_SQL, BoundedCounts, Bounding, Engine
from .counting import KeyCounts, sort_order

__all__ = ["DuckDBEngine"]


class DuckDBEngine(Engine):
    """Key column ``key`` (and unit column ``unit``) of one file, as checked by
    :func:`privagg.engines.duckdb.describe_column` (both from the same file)."""

    name = "duckdb"

    def __init__(
        self,
        key: dd.FileColumn,
        unit: dd.FileColumn | None = None,
        *,
        memory_limit: str = dd.DEFAULT_MEMORY_LIMIT,
        progress: dd.ProgressCallback | None = None,
        where: str = "count_file",
    ) -> None:
        self.key, self.unit = key, unit
        self.memory_limit, self.progress, self.where = memory_limit, progress, where

    def _expr(self, info: dd.FileColumn) -> str:
        column = dd.quote_identifier(info.column)
        return dd._csv_key_sql(column) if info.format == "csv" else dd._key_sql(column, info.duckdb_type)

    def _run(self, sql: str, params: dict[str, Any]) -> dict[str, np.ndarray]:
        temp_directory = tempfile.mkdtemp(prefix="privagg-duckdb-")
        try:
            try:
                con = dd._connect(self.memory_limit, temp_directory)
            except duckdb.Error:
                raise fail(self.where, "memory_limit", "a DuckDB memory size such as '1GB'", self.memory_limit) from None
            try:
                with dd._progress_poller(con, self.progress):
                    return con.execute(sql, {**dd._params(self.key), **params}).fetchnumpy()
            except duckdb.OutOfMemoryException:
                rule = "large enough for DuckDB to count the file (it ran out of memory)"
                raise fail(self.where, "memory_limit", rule, self.memory_limit) from None
            except duckdb.Error:
                raise dd._unparsable(self.where, self.key.path, self.key.format) from None
            finally:
                con.close()
        finally:
            shutil.rmtree(temp_directory, ignore_errors=True)

    def count_keys(self) -> KeyCounts:
        return dd.count_column(self.key, progress=self.progress, memory_limit=self.memory_limit, where=self.where)

    def _unit_expr(self) -> str:
        if self.unit is None:
            raise ValueError("DuckDBEngine: a unit column is required at user level")
        return self._expr(self.unit)

    def bounded_counts(self, bounding: Bounding, *, domain: Any = None, keep_other: bool = False) -> BoundedCounts:
        key, unit = self._expr(self.key), self._unit_expr()
        params: dict[str, Any] = {"secret": bounding.secret}
        if domain is not None:
            params["domain"] = np.asarray(domain).tolist()
            key = f"CASE WHEN {key} IN (SELECT unnest($domain)) THEN {key} END"
        where = "" if keep_other else "WHERE k IS NOT NULL"
        source = f"(SELECT {unit} AS u, {key} AS k FROM {dd._source(self.key.format)}) {where}"
        prio = PRIORITY_SQL.format(unit="u", key="k")
        l0, linf = bounding.max_keys_per_unit, bounding.max_rows_per_key
        if l0 == 1 and linf == 1 and not keep_other:  # arg_min skips NULL keys: "other" needs the window
            sql = (f"SELECT k AS key, count(*) AS count FROM "
                   f"(SELECT arg_min(k, {prio}) AS k FROM {source} GROUP BY u) GROUP BY ALL")
        else:
            params.update(l0=l0, linf=linf)
            # π once per pair, after the pair aggregate; a pair is kept when fewer than ℓ0 pairs
            # of its unit come before it in π order (ties of π: the window's order, per unit).
            pairs = f"(SELECT u, k, least(count(*), $linf) AS c, {prio} AS p FROM {source} GROUP BY u, k)"
            kept = f"(SELECT k, c FROM {pairs} QUALIFY lag(p, $l0) OVER (PARTITION BY u ORDER BY p) IS NULL)"
            sql = f"SELECT k AS key, sum(c)::BIGINT AS count FROM {kept} GROUP BY ALL"
        result = self._run(sql, params)
        keys, counts = result["key"], np.ma.getdata(result["count"]).astype(np.int64, copy=False)
        missing = np.ma.getmaskarray(keys)
        other = int(counts[missing].sum())
        kc = dd._key_counts({"key": keys, "count": counts}, self.key.duckdb_type)
        order = sort_order(kc.keys)  # a canonical order: noise is drawn key by key in this order
        return BoundedCounts(KeyCounts(keys=kc.keys[order], counts=kc.counts[order], n=int(counts.sum())), other)

    def keys_per_unit(self, cap: int) -> np.ndarray:
        key, unit = self._expr(self.key), self._unit_expr()
        sql = (f"SELECT least(count(DISTINCT k), $cap) AS j FROM "
               f"(SELECT {unit} AS u, {key} AS k FROM {dd._source(self.key.format)}) WHERE k IS NOT NULL "
               "GROUP BY u")
        sql = f"SELECT j, count(*)::BIGINT AS units FROM ({sql}) GROUP BY j"
        result = self._run(sql, {"cap": int(cap)})
        out = np.zeros(cap + 1, dtype=np.int64)
        out[np.ma.getdata(result["j"]).astype(np.int64)] = np.ma.getdata(result["units"])
        return out

    def clamp_sum(self, lower: float, upper: float) -> float:
        column = dd.quote_identifier(self.key.column)
        value = f"TRY_CAST({column} AS DOUBLE)"
        sql = (f"SELECT coalesce(sum(least(greatest({value}, $lo), $hi)), 0)::DOUBLE AS s "
               f"FROM {dd._source(self.key.format)} WHERE NOT isnan({value})")
        return float(self._run(sql, {"lo": float(lower), "hi": float(upper)})["s"][0])
