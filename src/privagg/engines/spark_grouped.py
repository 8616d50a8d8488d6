"""The engine of :func:`privagg.aggregate` for a Spark DataFrame (``pip install 'privagg[spark]'``):
the same steps as :mod:`privagg.engines.grouped` (DuckDB), as Spark jobs, and the same
:class:`~privagg.engines.grouped.Candidates` for the driver's metrics.

:func:`privagg.engines.grouped.open_table` hands a Spark DataFrame to :func:`open_spark_table`;
everything after (budget split, selection, the metrics, the ledger) is the code the DuckDB path
runs, unchanged.

What is public: the DataFrame's schema (column names and Spark types), the parameters, the domain.
Messages name columns and types, never a value; a Spark failure is reported by its error class only
(Spark's own text may quote data).

Steps (:meth:`SparkGroupedTable.prepare`), as in the DuckDB engine:

1. **rows** ``t``: the canonical key of every ``by`` column (:func:`privagg.engines.spark._key`:
   −0.0 → 0.0 and NaN → NULL for floats; types other than boolean, integers, float, double,
   string and date keyed by their exact text), the unit (canonical the same way; a NULL unit is one
   unit), each metric column ``CAST AS DOUBLE``; rows with a NULL key are dropped. Persisted on the
   executors (memory, then disk): it is read more than once.
2. **groups**: with a public domain, the domain's keys cast exactly to the key types on the driver
   (pyarrow, ``safe=True``; a key that does not cast, or two keys equal after the cast, is a
   ParameterError naming ``domain``, raised before any Spark job), numbered in the domain's order and
   **broadcast-joined** (rows with other keys drop out: 1-stable); without, the distinct keys
   (``groupBy``), numbered by ``row_number() OVER (ORDER BY k0, k1, …)``: Spark's ascending order of
   the keys, the same canonical order as DuckDB's ``ORDER BY`` (binary order of strings, numeric
   order otherwise; no NULL key is left); their keys and counts are fetched in one job.
3. **bounding** (units only), with window functions ordered by keyed hashes: every present
   (unit, group) pair gets ``π(u, k) = xxhash64(s1, u, k0, k1, …)`` and each unit keeps the
   ``max_groups`` pairs of smallest (π, k) (``row_number() OVER (PARTITION BY u ORDER BY π, k)``);
   a kept pair with at most ``max_rows`` rows keeps them all, in the others the rows are ranked by
   ``xxhash64(s2, u, k…, v…)`` (the row's own metric values; ties broken by the values) and the
   ``max_rows`` smallest are kept. The secrets enter the plan as a one-row DataFrame (never a
   literal: :func:`privagg.engines.spark._secret_frame`). Spark cannot evaluate DuckDB's ``hash()``,
   so **the kept subsets differ from DuckDB's for the same secrets; the law is the same**: for fresh
   secrets each unit keeps a (pseudo-)uniformly random set of ``max_groups`` of its groups and, in
   each, of ``max_rows`` of its rows, and a unit's kept rows are a function of its own rows and of
   the secrets only — adding or removing a unit changes no other unit's kept rows, for every
   secret (the property docs/proofs/aggregate.md §3 uses). When no unit exceeds the bounds nothing
   is dropped and the two engines agree exactly.
4. **counts** per group (``groupBy``): bounded rows and distinct units (record level: rows); the
   candidates' counts reach the driver (as with DuckDB: the key selection and ``count()`` run there).
5. **values**: for a column that only bounded sums and means read (``prepare(sums=…)``, from
   :func:`privagg.mechanisms.aggregate._sums_only`), one ``groupBy`` of the bounded rows computes
   its present counts and exact clamped integer sums per group (:meth:`SparkGroupedTable._column_sums`;
   a :class:`~privagg.mechanisms.grouped.ColumnSums`): no value reaches the driver. For a column
   that unbounded means or quantiles read (``prepare(kept_rows=…)``, from
   :func:`privagg.mechanisms.aggregate._kept_rows`), the same aggregation gives its present counts
   (and the clamped sums of its bounded metrics), and its finite ``(group id, v)`` rows are
   persisted on the executors, packed: the metrics read them through
   :class:`~privagg.engines.spark_rows.SparkRows` (Spark aggregations of the local per-row
   functions — counts per public grid cell, exact clipped sums — and, for an unbounded mean, a
   Poisson locate subsample collected to the driver), after the charge. Without ``kept_rows``
   (the engine's earlier path, kept for comparison) the (group id, v…) rows of such columns are
   collected with one Arrow fetch and ordered by the group id there (numpy's stable radix sort on
   one integer), then per column the finite values. (With ``count()`` only, nothing but the
   counts is fetched.)

``where=`` is refused with a Spark DataFrame (a ParameterError before any job):
:func:`privagg.engines.where.check_where` rebuilds a **DuckDB** SQL expression, and Spark SQL gives
the same text other meanings (backslash escapes in strings, ``^``, ``//``, integer overflow and
division by zero, function names), so running it in Spark would not be the checked filter. Filter
the DataFrame with Spark itself (a public, row-wise filter is 1-stable) before calling.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validate import fail
from ..mechanisms.grouped import ColumnSums, GroupedValues
from .grouped import SPLIT_BITS, Candidates, domain_columns, duplicate_domain_key, power_steps, split_sums
from .spark_rows import SparkRows, packed_rows
from .spark import (
    _FLOATS,
    _REFUSED,
    SparkColumn,
    _import_spark,
    _key,
    _keys_to_numpy,
    _quoted,
    _Quiet,
    _secret_frame,
    collect_or_fail,
    describe_column,
)

__all__ = ["SparkGroupedTable", "open_spark_table"]

_NUMERIC = {"ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType"}


class SparkGroupedTable:
    """A Spark DataFrame opened for :func:`privagg.aggregate` (schema checked; nothing run yet).
    The interface of :class:`privagg.engines.grouped.GroupedTable`."""

    def __init__(self, frame: Any, by: list[SparkColumn], unit: SparkColumn | None, columns: list[str],
                 caller: str) -> None:
        self.frame, self.by_info, self.unit_info, self.columns, self._caller = frame, by, unit, columns, caller
        self.by = [c.column for c in by]
        self.unit = None if unit is None else unit.column
        self._persisted: list[Any] = []
        self._dom_size = 0
        self._keys: list[np.ndarray] = []

    def __enter__(self) -> SparkGroupedTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for frame in self._persisted:
            try:
                frame.unpersist()
            except Exception:  # pragma: no cover - a stopped session: nothing to free
                pass
        self._persisted = []

    def key_types(self) -> list[str]:
        """The Spark types of the ``by`` columns as keyed (non-native types: string)."""
        return [c.key_type.simpleString() for c in self.by_info]

    # -- helpers ---------------------------------------------------------------------------
    def _persist(self, frame: Any) -> Any:
        from pyspark import StorageLevel

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(frame)
        return frame

    def _collect(self, frame: Any) -> Any:
        return collect_or_fail(frame, self._caller, "table")

    def _domain_frame(self, domain: list[list[Any]], keys: list[str]) -> tuple[Any, list[np.ndarray]]:
        """(i, k0, …): the domain cast exactly to the key types (driver, pyarrow; no Spark job)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        caller = self._caller
        arrays = []
        for col, info in zip(domain, self.by_info, strict=True):
            target = to_arrow_type(info.key_type)
            try:
                source = pa.array(list(col))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
                    OverflowError):
                raise fail(caller, "domain", "keys of one scalar type per 'by' column", "keys of mixed types") from None
            try:
                cast = source.cast(target, safe=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
                    OverflowError):
                types = ", ".join(c.key_type.simpleString() for c in self.by_info)
                raise fail(caller, "domain", f"keys of the 'by' columns' types ({types})", "keys it could not cast") \
                    from None
            if info.type_name in _FLOATS:  # canonical like the column: −0.0 → 0.0 (NaN was refused)
                values = cast.to_numpy(zero_copy_only=False) + 0.0
                cast = pa.array(values, type=target)
            arrays.append(cast)
        table = pa.table({k: a for k, a in zip(keys, arrays, strict=True)}
                         | {"i": pa.array(np.arange(len(domain[0]), dtype=np.int64))})
        dup = table.group_by(keys).aggregate([("i", "min"), ("i", "count")])
        dup = dup.filter(pa.compute.greater(dup.column("i_count"), 1))
        if dup.num_rows:
            raise duplicate_domain_key(caller, domain, int(pa.compute.min(dup.column("i_min")).as_py()))
        out = domain_columns(domain)
        with _Quiet():
            frame = self.frame.sparkSession.createDataFrame(table)
        self._dom_size = len(domain[0])
        return frame, out

    # -- the work --------------------------------------------------------------------------
    def prepare(self, *, domain: list[list[Any]] | None = None, max_groups: int = 1, max_rows: int = 1,
                secrets: tuple[int, int] = (0, 0),
                sums: dict[str, Sequence[tuple[float, float]]] | None = None,
                kept_rows: dict[str, Sequence[tuple[float, float]]] | None = None) -> Candidates:
        """Rows, groups, bounding, counts and values (module docstring, steps 1–5). ``sums``:
        columns whose metrics read only present counts and clamped integer sums, with the bounds
        of each: computed in Spark (:meth:`_column_sums`), none of their values fetched.
        ``kept_rows``: columns that unbounded means or quantiles read, with the bounds of
        their bounded metrics: their rows are kept on the executors
        (:class:`~privagg.engines.spark_rows.SparkRows`), their present counts and clamped
        sums computed now."""
        from pyspark.sql import functions as F

        keys = [f"k{i}" for i in range(len(self.by))]
        vals = [f"v{j}" for j in range(len(self.columns))]
        dom_frame, dom_keys = self._domain_frame(domain, keys) if domain is not None else (None, None)
        select = [_key(info).alias(k) for info, k in zip(self.by_info, keys, strict=True)]
        if self.unit_info is not None:
            select.append(_key(self.unit_info).alias("u"))
        select += [F.col(_quoted(c)).cast("double").alias(v) for c, v in zip(self.columns, vals, strict=True)]
        present = None
        for k in keys:
            cond = F.col(k).isNotNull()
            present = cond if present is None else present & cond
        t = self.frame.select(*select).where(present)
        if dom_frame is not None:  # the broadcast join: rows with other keys drop out
            t = t.join(F.broadcast(dom_frame), on=keys, how="inner")
        t = self._persist(t)
        if self.unit_info is None:
            grouped = t.groupBy(*keys).agg(F.count(F.lit(1)).cast("long").alias("n"))
            grp, n_rows = self._groups(grouped, keys, dom_frame, ["n"])
            n_rows = n_rows[0]
            n_units = n_rows
            rows = None if not vals else (t.select("i", *vals) if dom_frame is not None else
                                          t.join(grp.select("i", *keys), on=keys).select("i", *vals))
        else:
            grp, rows, n_rows, n_units = self._bound(t, keys, vals, dom_frame, max_groups, max_rows, secrets)
        key_arrays = dom_keys if dom_keys is not None else self._keys
        n_groups = int(n_rows.shape[0])
        values: dict[str, GroupedValues | ColumnSums] = {}
        sums = dict(sums or {})
        kept = dict(kept_rows or {})
        sums.update(kept)
        raw = [(c, v) for c, v in zip(self.columns, vals, strict=True) if c not in sums]
        agg = [(c, v) for c, v in zip(self.columns, vals, strict=True) if c in sums]
        if raw and rows is not None:
            # one fetch; ordered by the group id here (a stable radix sort)
            res = self._collect(rows.select("i", *[v for _, v in raw]))
            group = res.column("i").to_numpy().astype(np.int64, copy=False)
            order = np.argsort(group, kind="stable")
            group = group[order]
            for c, v in raw:
                x = np.asarray(res.column(v).to_numpy(zero_copy_only=False), dtype=np.float64)[order]  # NULL → NaN
                finite = np.isfinite(x)
                values[c] = GroupedValues(group=group[finite], values=x[finite], n_groups=n_groups)
        if agg and rows is not None:
            from pyspark import StorageLevel

            values.update(self._column_sums(rows, agg, sums, n_groups))
            for c, v in agg:
                if c in kept:  # the finite rows, packed and persisted on the executors
                    x = F.col(v)
                    finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
                    # persisted beyond this table's close (not self._persist): the metrics read it
                    # after the charge, and SparkRows.close (aggregate, at the end) frees it
                    frame = packed_rows(rows.select("i", x.alias("v")).where(finite))
                    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
                    values[c] = SparkRows(frame, values[c], self._caller)
                    self._collect(frame.groupBy().count())  # materialized before the charge
        return Candidates(keys=key_arrays, rows=n_rows, units=n_units, values=values)

    def _column_sums(self, rows: Any, agg: list[tuple[str, str]], sums: dict[str, Sequence[tuple[float, float]]],
                     n_groups: int) -> dict[str, ColumnSums]:
        """One Spark aggregation (``groupBy(i)``) for the columns ``agg``: per group the count of
        finite values and, per bounds ``(lo, hi)``, ``Σ rint(clamp(x, lo, hi)·2^−e)`` over the finite
        values (``e`` = :func:`~privagg.mechanisms.grouped_bounded._term_exponent`) — the integers
        of ``clamped_terms`` exactly (Java's ``Math.rint`` rounds half
        to even like numpy's; the scaling by a power of two is exact for every term that does not round
        to 0), summed in two long parts (:data:`SPLIT_BITS`) and recombined as Python integers. Only
        the G groups' integers reach the driver."""
        import math

        from pyspark.sql import functions as F

        from ..mechanisms.grouped_bounded import _term_exponent

        def scaled(col: Any, k: int) -> Any:  # col·2^k, by normal powers of two only
            for step in power_steps(k):
                col = col * F.lit(step)
            return col

        exprs, names = [], []
        for c, v in agg:
            x = F.col(v)
            finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(math.inf))
            exprs.append(F.count(F.when(finite, F.lit(1))).cast("long").alias(f"p_{v}"))
            for j, (lo, hi) in enumerate(dict.fromkeys((float(a), float(b)) for a, b in sums[c])):
                term = F.rint(scaled(F.least(F.greatest(x, F.lit(lo)), F.lit(hi)), -_term_exponent(lo, hi)))
                term = F.when(finite, term.cast("long"))
                # term = high·2^20 + low (arithmetic shift, 0 <= low < 2^20): two long sums that
                # cannot overflow below 2^43 rows (|high| < 2^19), recombined exactly on the driver
                exprs.append(F.sum(F.shiftright(term, SPLIT_BITS)).alias(f"h_{v}_{j}"))
                exprs.append(F.sum(term.bitwiseAND(F.lit((1 << SPLIT_BITS) - 1))).alias(f"l_{v}_{j}"))
                names.append((c, v, j, (lo, hi)))
        res = self._collect(rows.groupBy("i").agg(*exprs))
        idx = res.column("i").to_numpy().astype(np.int64, copy=False)
        out: dict[str, ColumnSums] = {}
        for c, v in agg:
            present = np.zeros(n_groups, dtype=np.int64)
            present[idx] = res.column(f"p_{v}").to_numpy().astype(np.int64, copy=False)
            out[c] = ColumnSums(present=present, sums={}, n_groups=n_groups)
        for c, v, j, bounds in names:
            out[c].sums[bounds] = split_sums(idx, res.column(f"h_{v}_{j}").fill_null(0).to_numpy(),
                                             res.column(f"l_{v}_{j}").fill_null(0).to_numpy(), n_groups)
        return out

    def _groups(self, grouped: Any, keys: list[str], dom_frame: Any, counts: list[str]
                ) -> tuple[Any, list[np.ndarray]]:
        """The group table (i, k…) and the dense count arrays ``counts`` of ``grouped`` (k…, counts…)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if dom_frame is None:
            order = Window.orderBy(*[F.col(k).asc() for k in keys])
            grp = self._persist(grouped.withColumn("i", (F.row_number().over(order) - 1).cast("long")))
            table = self._collect(grp.select("i", *keys, *counts))  # in the order of i (one sorted partition)
            size = table.num_rows
            index = table.column("i").to_numpy().astype(np.intp)
            self._keys = [np.empty(0)] * len(keys)
            for k in keys:
                arr = _keys_to_numpy(table.column(k))
                out_k = arr.copy()
                out_k[index] = arr
                self._keys[keys.index(k)] = out_k
        else:
            grp = dom_frame
            table = self._collect(grouped.join(F.broadcast(dom_frame), on=keys).select("i", *counts))
            size = self._dom_size  # known on the driver
        idx = table.column("i").to_numpy().astype(np.intp)
        out = []
        for c in counts:
            arr = np.zeros(size, dtype=np.int64)
            arr[idx] = table.column(c).to_numpy().astype(np.int64)
            out.append(arr)
        return grp, out

    def _bound(self, t: Any, keys: list[str], vals: list[str], dom_frame: Any, l0: int, linf: int,
               secrets: tuple[int, int]) -> tuple[Any, Any, np.ndarray, np.ndarray]:
        """Steps 3–4 with units: (group table, rows (i, v…) or None, bounded rows, units)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark = t.sparkSession
        s1 = F.broadcast(_secret_frame(spark, secrets[0]).withColumnRenamed("s", "s1"))
        s2 = F.broadcast(_secret_frame(spark, secrets[1]).withColumnRenamed("s", "s2"))
        pairs = t.groupBy("u", *keys).agg(F.count(F.lit(1)).cast("long").alias("r_all")).crossJoin(s1)
        prio = F.xxhash64(F.col("s1"), F.col("u"), *[F.col(k) for k in keys])
        by_prio = Window.partitionBy("u").orderBy(prio, *[F.col(k) for k in keys])
        kp = (pairs.withColumn("rank", F.row_number().over(by_prio)).where(F.col("rank") <= F.lit(int(l0)))
              .select("u", *keys, "r_all", F.least(F.col("r_all"), F.lit(int(linf)).cast("long")).alias("r")))
        kp = self._persist(kp)
        grouped = kp.groupBy(*keys).agg(F.sum("r").cast("long").alias("n"), F.count(F.lit(1)).cast("long").alias("m"))
        grp, (n_rows, n_units) = self._groups(grouped, keys, dom_frame, ["n", "m"])
        if not vals:
            return grp, None, n_rows, n_units
        # the rows of the kept pairs (kp renamed: no self-join ambiguity; a NULL unit is one unit)
        kr = kp.select(F.col("u").alias("p_u"), *[F.col(k).alias("p_" + k) for k in keys], "r_all")
        cond = [F.col("u").eqNullSafe(F.col("p_u"))] + [F.col(k) == F.col("p_" + k) for k in keys]
        tk = t.join(kr, on=functools.reduce(lambda a, b: a & b, cond)).select("u", *keys, *vals, "r_all")
        whole = tk.where(F.col("r_all") <= F.lit(int(linf))).select(*keys, *vals)
        row_prio = F.xxhash64(F.col("s2"), F.col("u"), *[F.col(k) for k in keys], *[F.col(v) for v in vals])
        by_row = Window.partitionBy("u", *keys).orderBy(row_prio, *[F.col(v) for v in vals])
        ranked = (tk.where(F.col("r_all") > F.lit(int(linf))).crossJoin(s2)
                  .withColumn("rank", F.row_number().over(by_row)).where(F.col("rank") <= F.lit(int(linf)))
                  .select(*keys, *vals))
        rows = whole.unionByName(ranked).join(grp.select("i", *keys), on=keys).select("i", *vals)
        return grp, rows, n_rows, n_units


def open_spark_table(table: Any, *, by: Sequence[str], units: Any, columns: Sequence[str], where: str | None,
                     caller: str = "aggregate") -> SparkGroupedTable:
    """Check a Spark DataFrame's schema (public; no Spark job) and return it opened.

    The checks and messages of :func:`privagg.engines.grouped.open_table`; in addition ``units``
    must be a column name and ``where`` None (module docstring).
    """
    _import_spark(caller)
    fields = {f.name: f.dataType for f in table.schema.fields}
    names = list(fields)
    shown = ", ".join(repr(n) for n in names[:12]) + (f", ... ({len(names)} columns)" if len(names) > 12 else "")

    def column(name: Any, param: str) -> str:
        if not isinstance(name, str) or name not in fields:
            raise fail(caller, param, f"a column of the table ({shown})", name)
        if type(fields[name]).__name__ in _REFUSED:
            raise fail(caller, param, "a column of scalar values (not binary, array, map, struct or variant)",
                       f"{name!r} of type {fields[name].simpleString()}")
        return name

    by_info = [describe_column(table, column(c, "by"), where=caller, name="by") for c in by]
    unit_info = None
    if units is not None:
        if not isinstance(units, str):
            raise fail(caller, "units", "a column name for a Spark DataFrame (its row order is not defined)",
                       "an array")
        unit_info = describe_column(table, column(units, "units"), where=caller, name="units")
    for c in columns:
        column(c, "metrics")
        if type(fields[c]).__name__ not in _NUMERIC:
            raise fail(caller, "metrics", "numeric columns (integer, float or decimal)",
                       f"{c!r} of type {fields[c].simpleString()}")
    if where is not None:
        raise fail(caller, "where", "None for a Spark DataFrame (filter it in Spark first: the checked filter is "
                   "DuckDB SQL, which Spark SQL would read differently)", "a filter")
    return SparkGroupedTable(table, by_info, unit_info, list(columns), caller)
