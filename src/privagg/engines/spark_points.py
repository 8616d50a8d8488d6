"""Spark engine for means (``pip install 'privagg[spark]'``): the numeric rows of a Spark DataFrame
as a :class:`~privagg.engines.base.PointSource` for :func:`privagg.private_mean`.

The mechanism is :mod:`privagg.mechanisms.mean`'s, unchanged: every calibration, threshold and
accounting step (the noisy count, radius selection, FriendlyCore locate, the refinement and final
sums, the clipping radius) runs on the driver, in the local code. Spark only counts, samples,
clips and sums:

* **Rows.** ``data.select(CAST(col AS DOUBLE) …)`` for ``columns`` (default: every column; each
  of a numeric Spark type — byte, short, int, long, float, double, decimal — else an error naming
  the column and its type, which are schema), rows with a NULL, NaN or infinite entry dropped
  (the mechanism's declared policy), persisted on the executors (memory, then disk) and counted:
  job 1, **before the ledger is charged** (a DataFrame that Spark cannot evaluate charges nothing).
  For means the persisted rows are **packed**: one binary value per block of consecutive rows
  (their float64 bytes, at most 1 MiB a block and at most 2³¹ − 1 bytes per Arrow batch of
  ``maxRecordsPerBatch`` blocks, :func:`block_values`; the rows keep their partition and order), so that each
  later pass hands a task its rows as a few buffers instead of d Arrow columns converted from
  Spark's rows (k-means keeps the d columns).
* **Sums and histograms: exact, the local arithmetic.** Each task applies the local functions
  (:func:`~privagg.mechanisms.mean._clipped_integer_sum`, :func:`~privagg.mechanisms.mean._distance_bins`)
  to its Arrow batches (``mapInArrow``) and returns one row of partial results; Spark adds them
  (``SUM`` over DECIMAL(38, 0) for the clipped integer sums: exact, never a wrapped long; each
  term is at most ``2^SUM_BITS + √d/2`` in grid units, so any n < 10²⁶ rows fits). The per-row
  float arithmetic is numpy's, so Spark, numpy and DuckDB (which reads files into numpy) give the
  same integers for the same rows; only the totals reach the driver.
* **Per-column scales** (when the mechanism runs that step): each row's occurrence index among
  identical rows (``row_number()`` over a window partitioned by the exact bits of its columns,
  never by the doubles: Spark equates −0.0 with 0.0 and NaNs), the keyed hash of (row, index)
  (keys drawn on the driver, :func:`~privagg.mechanisms.mean.row_keys`) computed in the tasks, and
  the local order on (hash, bits of each column, index) without a global sort: each row goes to
  the partition of its hash bucket (the top :data:`BUCKET_BITS` bits of the hash: a range of the
  order) and is sorted there (``sortWithinPartitions``), so the order is the buckets' runs in
  bucket order — exactly the local order, with no range-partition sampling job (which computed
  the keyed rows twice). Per bucket the local :func:`~privagg.mechanisms.mean.sorted_scale_counts`
  of its consecutive pairs; the driver adds the counts and the pairs across bucket boundaries, for
  which it receives the first and last row of each non-empty bucket (at most 2·2^BUCKET_BITS = 128 rows).
* **Locate subsample.** Poisson at the public rate ``q = min(1, m_locate/n̂)``: each task keeps
  each row with probability q, drawing from its own generator (fresh OS entropy, or in seeded
  mode the partition's child of the seed: :class:`~privagg.engines.spark.TaskRandomness`; the
  stage is marked non-deterministic) — the same law as the local ``gen.random(n) < q``; the kept
  rows (about ``m_locate``, thousands) are collected to the driver once.

* **Small-sample coordinate plan** (:mod:`privagg.mechanisms.mean_small`; the plan choice is
  the local one, n̂, ε and d only): per-column counts below public edges (per task a histogram of
  ``searchsorted(edges, x, "right")`` over the sorted distinct edges, added by Spark:
  ``posexplode``, ``SUM``); one column's exact clipped sum (``column(j)``, the clipped-sum job
  above with d = 1); the count outside the box. No task randomness: the seeded release is the local one.

What the driver sees: n, the totals above, the subsample and the bucket-boundary rows of the
scale step (as the local engines, the driver is trusted with the subsample). Executors see their
rows, the released centers and radii, and the hash keys. Errors name only the schema and the
Spark configuration, never a value (Spark's messages are not shown).

User level (``units=`` a column name): the rows are first reduced to one vector per unit, in
Spark (:mod:`privagg.engines.spark_units`), and those vectors are the rows above; the secret is the
driver generator's first draw, as locally. :func:`privagg.private_kmeans` reads the same
rows through :class:`privagg.engines.spark_kmeans.SparkKMeansPoints` (the coreset strategy) and :class:`privagg.engines.spark_aggregate_kmeans.SparkAggregatePoints` (sample and aggregate).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._validate import fail
from .base import PointSource
from .spark import (
    TaskRandomness,
    _import_spark,
    describe_column,
    _quoted,
    _Quiet,
    _spark_errors,
    _spark_failure,
    collect_or_fail,
    is_spark_dataframe,
    task_randomness,
)

__all__ = ["SparkPoints", "describe_columns", "point_columns", "points_of"]

_NUMERIC = {"ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType", "DecimalType"}
_FLIP = np.uint64(1 << 63)
#: the keyed order's rows go to 2^BUCKET_BITS hash buckets (ranges of the hash), each sorted in one
#: partition: the driver receives the first and last row of each non-empty bucket
BUCKET_BITS = 6


def describe_columns(data: Any, columns: Any, *, where: str) -> list[str]:
    """The numeric ``columns`` of a Spark DataFrame (schema only; default: every column).

    Raises
    ------
    ParameterError
        Not a Spark DataFrame; ``columns`` not distinct non-empty names of the DataFrame; a
        column of a non-numeric type (the message names the column and its type).
    """
    _import_spark(where)
    if not is_spark_dataframe(data):
        raise fail(where, "points", "a Spark DataFrame", f"<{type(data).__module__}.{type(data).__qualname__}>")
    fields = {f.name: f.dataType for f in data.schema.fields}
    if columns is None:
        cols = list(fields)
    elif isinstance(columns, str):
        cols = [columns]
    else:
        try:
            cols = list(columns)
        except TypeError:
            raise fail(where, "columns", "a list of column names", columns) from None
    rule = "one or more distinct column names of the DataFrame"
    if not cols or not all(isinstance(c, str) and c for c in cols) or len(set(cols)) != len(cols):
        raise fail(where, "columns", rule, cols)
    for c in cols:
        if c not in fields:
            names = ", ".join(repr(f) for f in list(fields)[:12])
            if len(fields) > 12:
                names += f", ... ({len(fields)} columns)"
            raise fail(where, "columns", f"columns of the DataFrame ({names})", c)
        if type(fields[c]).__name__ not in _NUMERIC:
            raise fail(where, "columns", "numeric columns (integer, float, double or decimal)",
                       f"{c!r} of type {fields[c].simpleString()}")
    return cols


def point_columns(data: Any, columns: Any, units: Any, *, where: str) -> list[str]:
    """:func:`describe_columns`; with ``units`` (a column name) the default is every column but
    the unit column, and the unit column is not a point column."""
    if units is not None:
        if not isinstance(units, str) or not units:
            raise fail(where, "units", "a column name of the Spark DataFrame", "<not a column name>")
        if columns is None and is_spark_dataframe(data):
            columns = [f.name for f in data.schema.fields if f.name != units]
    cols = describe_columns(data, columns, where=where)
    if units is not None and units in cols:
        raise fail(where, "columns", "point columns other than the unit column", units)
    return cols


def _rows(batch: Any, d: int, exponents: np.ndarray | None) -> np.ndarray:
    """An Arrow batch of d double columns as a C-contiguous float64 (m, d) array, scaled."""
    x = np.empty((batch.num_rows, d), dtype=np.float64)
    for j in range(d):
        x[:, j] = batch.column(j).to_numpy(zero_copy_only=False)
    if exponents is not None:
        from ..mechanisms.mean import _finite

        with np.errstate(all="ignore"):
            x = _finite(np.ldexp(x, -exponents))
    return x


#: values (doubles) per block of the packed rows: blocks of at most about 1 MiB
BLOCK_VALUES = 1 << 17
#: The most bytes of the blocks of one Arrow batch a task reads: Spark's BinaryType is an Arrow
#: binary array with 32-bit offsets, so a batch of blocks must stay below 2³¹ bytes
#: (:func:`block_values`).
BATCH_BYTES_MAX = 2**31 - 1


def block_values(d: int, records_per_batch: int) -> int:
    """Values per block (:func:`_pack`) for rows of ``d`` doubles when Spark sends a task Arrow
    batches of ``records_per_batch`` rows (``spark.sql.execution.arrow.maxRecordsPerBatch``, public
    configuration): at most :data:`BLOCK_VALUES`, and at most :data:`BATCH_BYTES_MAX` bytes per
    batch of blocks (at the default 10,000 records: 26,843 values, 210 KiB a block); at least one
    row a block, so with rows wider than the bound, or with ``records_per_batch <= 0`` (Spark:
    no record limit; the blocks stay at BLOCK_VALUES), no bound is guaranteed here. The
    block size changes neither the rows nor their order: the release is the same."""
    cap = BLOCK_VALUES if records_per_batch <= 0 else min(BLOCK_VALUES, BATCH_BYTES_MAX // (8 * records_per_batch))
    return max(int(d), cap)


def _records_per_batch(frame: Any) -> int:
    """``spark.sql.execution.arrow.maxRecordsPerBatch`` of the frame's session (Spark's default 10,000)."""
    value = frame.sparkSession.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000")
    try:
        return int(value)
    except (TypeError, ValueError):  # Spark itself rejects such a value when a job runs
        return 10000


def _pack(d: int, values: int = BLOCK_VALUES) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task function packing Arrow batches of d double columns into blocks of ``values``
    doubles (:func:`block_values`): one row per block of consecutive rows, ``x`` its (m, d)
    float64 values (C order, little-endian bytes), ``m`` its number of rows; the rows keep
    their order."""
    step = max(1, values // d)

    def pack(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            x = _rows(batch, d, None).astype("<f8", copy=False)
            starts = range(0, x.shape[0], step)  # over blocks of the batch, not rows
            yield pa.RecordBatch.from_arrays(
                [pa.array([x[i : i + step].tobytes() for i in starts], type=pa.binary()),
                 pa.array([min(step, x.shape[0] - i) for i in starts], type=pa.int64())], names=["x", "m"])

    return pack


def _arrays(batches: Iterator[Any], d: int, exponents: np.ndarray | None, packed: int = 0,
            select: tuple[int, ...] | None = None) -> Iterator[np.ndarray]:
    """The rows of each Arrow batch as a C-contiguous float64 (m, d) array, scaled. ``packed``:
    0 for batches of d double columns, else the width of the blocks of a packed frame
    (:func:`_pack`), of which the columns ``select`` are read (all when None)."""
    for batch in batches:
        if not packed:
            yield _rows(batch, d, exponents)
            continue
        blocks = batch.column(0)  # consecutive blocks: their bytes are the rows, in order
        otype = np.int64 if blocks.type.equals(_large_binary()) else np.int32
        _, offsets_buf, data = blocks.buffers()
        if len(blocks) == 0 or data is None:
            x = np.zeros((0, packed), dtype=np.float64)
        else:
            offsets = np.frombuffer(offsets_buf, dtype=otype)[blocks.offset : blocks.offset + len(blocks) + 1]
            raw = np.frombuffer(data, dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
            x = raw.view("<f8").reshape(-1, packed)
        x = np.ascontiguousarray(x if select is None else x[:, list(select)], dtype=np.float64)
        if exponents is not None:
            from ..mechanisms.mean import _finite

            with np.errstate(all="ignore"):
                x = _finite(np.ldexp(x, -exponents))
        yield x


def _large_binary() -> Any:
    import pyarrow as pa

    return pa.large_binary()


def _long(values: np.ndarray) -> Any:
    """An Arrow int64 array of ``values``."""
    import pyarrow as pa

    return pa.array(np.asarray(values, dtype=np.int64), type=pa.int64())


def _map(frame: Any, function: Callable[..., Any], schema: Any, *, nondeterministic: bool = False) -> Any:
    """``frame.mapInArrow(function, schema)``, the function marked non-deterministic if asked (the
    optimizer then never duplicates or reorders it; as :func:`privagg.engines.spark.noised`)."""
    if not nondeterministic:
        with _Quiet():
            return frame.mapInArrow(function, schema)
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.util import PythonEvalType

    jdf = getattr(frame, "_jdf", None)
    if jdf is None:  # Spark Connect  # pragma: no cover
        return frame.mapInArrow(function, schema)
    with _Quiet():
        udf = pandas_udf(function, returnType=schema,  # type: ignore[call-overload]
                         functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF).asNondeterministic()
        column = udf(*[frame[c] for c in frame.columns])
    return SparkDataFrame(jdf.mapInArrow(column._jc, False, None), frame.sparkSession)


class SparkPoints(PointSource):
    """The finite rows of ``d`` numeric columns of a Spark DataFrame (persisted; module docstring)."""

    name = "spark"

    def __init__(self, frame: Any, d: int, n: int, randomness: TaskRandomness, where: str,
                 exponents: np.ndarray | None = None, *, packed: int = 0,
                 select: tuple[int, ...] | None = None) -> None:
        # persisted, finite: c0 … c{d−1} (DOUBLE), or packed blocks of `packed` columns (_pack), of
        # which the columns `select` are the rows (all when None)
        self.frame = frame
        self.d = int(d)
        self.n = int(n)
        self.randomness = randomness
        self.where = where
        self.exponents = exponents
        self.packed = int(packed)
        self.select = select

    def _reader(self, scaled: bool = True) -> Callable[[Iterator[Any]], Iterator[np.ndarray]]:
        """The task function reading a task's rows as arrays, batch by batch (:func:`_arrays`;
        it holds only the layout, never the DataFrame, so it ships to the tasks)."""
        d, exps, packed, select = self.d, self.exponents if scaled else None, self.packed, self.select
        return lambda batches: _arrays(batches, d, exps, packed, select)

    def _names(self) -> list[str]:
        return [f"c{j}" for j in range(self.d)]

    def _collect(self, frame: Any) -> Any:
        return collect_or_fail(frame, self.where)

    def count(self) -> int:
        return self.n

    def scaled(self, exponents: np.ndarray) -> SparkPoints:
        exps = np.asarray(exponents, dtype=np.int64)
        if self.exponents is not None:  # pragma: no cover - the mechanism scales once
            raise AssertionError("SparkPoints.scaled: already scaled")
        return SparkPoints(self.frame, self.d, self.n, self.randomness, self.where, exps, packed=self.packed,
                           select=self.select)

    def poisson_sample(self, rate: float, gen: np.random.Generator) -> np.ndarray:
        """Each row with probability ``rate``, drawn in the tasks (``gen`` is not used: the
        tasks' streams, :class:`~privagg.engines.spark.TaskRandomness`, have the same law)."""
        import pyarrow as pa
        from pyspark.sql.types import DoubleType, StructField, StructType

        d, randomness, q, names = self.d, self.randomness, float(rate), self._names()
        rows_of = self._reader()

        def sample(batches: Iterator[Any]) -> Iterator[Any]:
            from pyspark import TaskContext

            task_gen = randomness.generator(TaskContext.get().partitionId())
            for x in rows_of(batches):
                kept = x[task_gen.random(x.shape[0]) < q]
                yield pa.RecordBatch.from_arrays([pa.array(kept[:, j]) for j in range(d)], names=names)

        schema = StructType([StructField(c, DoubleType(), False) for c in names])
        table = self._collect(_map(self.frame, sample, schema, nondeterministic=True))  # once
        out = np.empty((table.num_rows, d), dtype=np.float64)
        for j, c in enumerate(names):
            out[:, j] = table.column(c).to_numpy()
        return out

    def clipped_integer_sum(self, center: np.ndarray, radius: float, exponent: int) -> np.ndarray:
        """The exact integer sum: per task the local function, partial sums as DECIMAL(38, 0)
        added by Spark (requires ``radius/2^exponent <= 2^SUM_BITS``, the mechanism's grid)."""
        import pyarrow as pa
        from pyspark.sql.types import DecimalType, StructField, StructType

        from ..mechanisms.mean import SUM_BITS

        if not (np.ldexp(float(radius), -int(exponent)) <= 2.0 ** SUM_BITS):
            raise fail(self.where, "exponent", f"a grid with radius/2^exponent <= 2^{SUM_BITS}", exponent)
        d, names, rows_of = self.d, [f"s{j}" for j in range(self.d)], self._reader()
        c = np.array(center, dtype=np.float64)
        r, e = float(radius), int(exponent)

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.mean import _clipped_integer_sum

            total = [0] * d
            for x in rows_of(batches):
                with np.errstate(all="ignore"):
                    s = _clipped_integer_sum(x, c, r, e)
                total = [a + int(b) for a, b in zip(total, s)]
            yield pa.RecordBatch.from_arrays([pa.array([v], type=pa.decimal128(38, 0)) for v in total],
                                             names=names)

        schema = StructType([StructField(n, DecimalType(38, 0), False) for n in names])
        return self.decimal_sums(_map(self.frame, partial, schema), names)

    def decimal_sums(self, partials: Any, names: list[str]) -> np.ndarray:
        """Σ of DECIMAL(38, 0) columns of ``partials`` in Spark, as Python integers: exact (a sum
        beyond 10^38 fails loudly, never wraps; a LONG sum would wrap or fail beyond 2^63)."""
        from pyspark.sql import functions as F

        sums = partials.agg(*[F.sum(F.col(n).cast("decimal(38,0)")).alias(n) for n in names])
        return exact_totals(self._collect(sums), names)

    def distance_bins(self, center: np.ndarray, edges: np.ndarray) -> np.ndarray:
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        rows_of = self._reader()
        c, e = np.array(center, dtype=np.float64), np.array(edges, dtype=np.float64)
        names = [f"b{j}" for j in range(e.size + 1)]

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.mean import _distance_bins

            total = np.zeros(e.size + 1, dtype=np.int64)
            for x in rows_of(batches):
                with np.errstate(all="ignore"):
                    total += _distance_bins(x, c, e)
            yield pa.RecordBatch.from_arrays([pa.array([int(v)], type=pa.int64()) for v in total], names=names)

        schema = StructType([StructField(n, LongType(), False) for n in names])
        table = self._collect(_map(self.frame, partial, schema).agg(*[F.sum(n).alias(n) for n in names]))
        return np.array([table.column(n)[0].as_py() or 0 for n in names], dtype=np.int64)

    def scale_counts(self, keys: np.ndarray) -> np.ndarray:
        from ..mechanisms.mean import SCALE_EXPONENTS, sorted_scale_counts

        return self._ordered_pair_counts(keys, sorted_scale_counts, SCALE_EXPONENTS.size)

    def _ordered_pair_counts(self, keys: np.ndarray, sorted_counts: Callable[[np.ndarray], np.ndarray],
                             width: int) -> np.ndarray:
        """``sorted_counts`` (a sum over consecutive pairs: (d, width) int64) of the rows in the
        keyed order of ``keys``: per hash bucket (a range of the hash: rows sent to their bucket's
        partition, sorted there; no global sort), plus the pairs across bucket boundaries."""
        import pyarrow as pa
        from pyspark.sql.types import ArrayType, DoubleType, LongType, StructField, StructType

        if self.exponents is not None:  # pragma: no cover - scales are computed on the raw rows
            raise AssertionError("SparkPoints: pair counts on scaled rows")
        d, ks = self.d, np.array(keys, dtype=np.uint64)
        order_names = ["h"] + [f"o{j}" for j in range(d)] + ["j"]
        bit_names = [f"b{j}" for j in range(d)]
        shift, rows_of = np.uint64(64 - BUCKET_BITS), self._reader(scaled=False)

        def raw_bits(batches: Iterator[Any]) -> Iterator[Any]:
            for x in rows_of(batches):  # the exact bits (as int64): Spark would equate -0.0, 0.0 and NaNs
                bits = x.view(np.int64)
                yield pa.RecordBatch.from_arrays([pa.array(bits[:, j]) for j in range(d)], names=bit_names)

        def keyed(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.mean import row_hash

            for batch in batches:
                bits = np.empty((batch.num_rows, d), dtype=np.int64)
                for j in range(d):
                    bits[:, j] = batch.column(j).to_numpy()
                ub = bits.view(np.uint64)
                occ = batch.column(d).to_numpy().astype(np.int64)
                with np.errstate(all="ignore"):
                    h = row_hash(ub, ks, occ)
                cols = [h] + [ub[:, j] for j in range(d)]  # unsigned order as signed: flip the sign bit
                yield pa.RecordBatch.from_arrays([pa.array((h >> shift).astype(np.int64))]
                                                 + [pa.array((v ^ _FLIP).view(np.int64)) for v in cols]
                                                 + [pa.array(occ)], names=["bucket"] + order_names)

        def pairs(batches: Iterator[Any]) -> Iterator[Any]:
            counts_of = sorted_counts
            total = np.zeros((d, width), dtype=np.int64)
            buckets: list[int] = []
            firsts: list[np.ndarray] = []
            lasts: list[np.ndarray] = []
            for batch in batches:  # sorted by the hash: each bucket's rows are one run, in order
                if batch.num_rows == 0:
                    continue
                bucket = batch.column(0).to_numpy()
                bits = np.empty((batch.num_rows, d), dtype=np.int64)
                for j in range(d):
                    bits[:, j] = batch.column(j + 2).to_numpy()
                x = np.ascontiguousarray((bits.view(np.uint64) ^ _FLIP).view(np.float64))
                cuts = np.flatnonzero(bucket[1:] != bucket[:-1]) + 1
                for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [x.shape[0]]])):  # buckets
                    run = x[lo:hi]
                    if buckets and buckets[-1] == int(bucket[lo]):  # the bucket goes on from the last batch
                        total += counts_of(np.vstack([lasts[-1][None, :], run]))
                        lasts[-1] = run[-1].copy()
                    else:
                        total += counts_of(run)
                        buckets.append(int(bucket[lo]))
                        firsts.append(run[0].copy())
                        lasts.append(run[-1].copy())
            if buckets:
                yield pa.RecordBatch.from_arrays(
                    [pa.array([total.ravel().tolist()], type=pa.list_(pa.int64())),
                     pa.array([buckets], type=pa.list_(pa.int64())),
                     pa.array([np.concatenate(firsts).tolist()], type=pa.list_(pa.float64())),
                     pa.array([np.concatenate(lasts).tolist()], type=pa.list_(pa.float64()))],
                    names=["counts", "buckets", "first", "last"])

        key_schema = StructType([StructField(n, LongType(), False) for n in ["bucket"] + order_names])
        out_schema = StructType([StructField("counts", ArrayType(LongType(), False), False),
                                 StructField("buckets", ArrayType(LongType(), False), False),
                                 StructField("first", ArrayType(DoubleType(), False), False),
                                 StructField("last", ArrayType(DoubleType(), False), False)])
        # the occurrence index j of each copy among identical rows (by the exact bits)
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        bits_schema = StructType([StructField(n, LongType(), False) for n in bit_names])
        copies = Window.partitionBy(*bit_names).orderBy(*bit_names)
        indexed = _map(self.frame, raw_bits, bits_schema).withColumn(
            "occ", (F.row_number().over(copies) - 1).cast("long"))
        # each row to the partition of its bucket (the top BUCKET_BITS bits of the hash: a range of
        # the order), sorted there by the order's key: the order is the buckets' runs, in bucket order
        ordered = _map(indexed, keyed, key_schema).repartition("bucket").sortWithinPartitions(*order_names)
        table = self._collect(_map(ordered, pairs, out_schema))
        total = np.zeros((d, width), dtype=np.int64)
        bucket_ids, first_rows, last_rows = [], [], []
        for row in table.to_pylist():  # one row per non-empty partition
            total += np.asarray(row["counts"], dtype=np.int64).reshape(d, width)
            bucket_ids.extend(row["buckets"])
            first_rows.append(np.asarray(row["first"], dtype=np.float64).reshape(-1, d))
            last_rows.append(np.asarray(row["last"], dtype=np.float64).reshape(-1, d))
        if bucket_ids:
            at = np.argsort(np.asarray(bucket_ids, dtype=np.int64), kind="stable")  # buckets are distinct
            first, last = np.concatenate(first_rows)[at], np.concatenate(last_rows)[at]
            for i in range(1, at.size):  # the pair across the boundary of two consecutive non-empty buckets
                total += sorted_counts(np.array([last[i - 1], first[i]], dtype=np.float64))
        return total

    def below_counts(self, edges: list[np.ndarray]) -> list[np.ndarray]:
        """Per task and column a histogram of ``searchsorted(E_j, x_j, "right")`` over the sorted
        distinct edges ``E_j`` (``#{x < E_ji}`` is its cumulative count at ``i``), added by Spark
        (``posexplode``, ``SUM``); the driver reads each edge's count off the cumulated totals."""
        import pyarrow as pa
        from pyspark.sql.types import ArrayType, LongType, StructField, StructType

        d, rows_of = self.d, self._reader()
        uniq = [np.unique(np.asarray(e, dtype=np.float64)) for e in edges]  # sorted, distinct
        sizes = [u.size + 1 for u in uniq]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            total = np.zeros(int(starts[-1]), dtype=np.int64)
            for x in rows_of(batches):
                for j in range(d):  # over columns
                    b = np.searchsorted(uniq[j], x[:, j], side="right")  # #{E_j <= x}
                    total[starts[j] : starts[j + 1]] += np.bincount(b, minlength=sizes[j])
            yield pa.RecordBatch.from_arrays([pa.array([total.tolist()], type=pa.list_(pa.int64()))], names=["h"])

        schema = StructType([StructField("h", ArrayType(LongType(), False), False)])
        hist = self._summed_arrays(_map(self.frame, partial, schema), int(starts[-1]))
        out = []
        for j, e in enumerate(edges):  # over columns
            cum = np.cumsum(hist[starts[j] : starts[j + 1]])  # cum[i] = #{x < E_ji}
            at = np.searchsorted(uniq[j], np.asarray(e, dtype=np.float64), side="left")
            out.append(cum[at].astype(np.int64) if len(e) else np.zeros(0, dtype=np.int64))
        return out

    def _summed_arrays(self, partials: Any, size: int) -> np.ndarray:
        """Σ over rows of the LONG array column ``h`` (length ``size``) of ``partials``, in Spark."""
        from pyspark.sql import functions as F

        table = self._collect(partials.select(F.posexplode("h").alias("i", "v"))
                              .groupBy("i").agg(F.sum("v").alias("v")))
        out = np.zeros(size, dtype=np.int64)
        if table.num_rows:
            out[table.column("i").to_numpy()] = table.column("v").to_numpy()
        return out

    def column(self, j: int) -> SparkPoints:
        from pyspark.sql import functions as F

        exps = None if self.exponents is None else self.exponents[j : j + 1]
        if self.packed:  # the same packed frame, one of its columns read
            col = int(j) if self.select is None else self.select[int(j)]
            return SparkPoints(self.frame, 1, self.n, self.randomness, self.where, exps, packed=self.packed,
                               select=(col,))
        return SparkPoints(self.frame.select(F.col(f"c{int(j)}").alias("c0")), 1, self.n, self.randomness,
                           self.where, exps)

    def outside_count(self, center: np.ndarray, radii: np.ndarray) -> int:
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        rows_of = self._reader()
        c, r = np.array(center, dtype=np.float64), np.array(radii, dtype=np.float64)

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            total = 0
            for x in rows_of(batches):
                with np.errstate(all="ignore"):
                    total += int((np.abs(x - c) > r).any(axis=1).sum())
            yield pa.RecordBatch.from_arrays([pa.array([total], type=pa.int64())], names=["o"])

        schema = StructType([StructField("o", LongType(), False)])
        table = self._collect(_map(self.frame, partial, schema).agg(F.sum("o").alias("o")))
        return int(table.column("o")[0].as_py() or 0)


def exact_totals(table: Any, names: list[str]) -> np.ndarray:
    """The one row of DECIMAL(38, 0) sums as an object array of Python integers (0 for no rows)."""
    out = np.empty(len(names), dtype=object)
    out[:] = [int(table.column(n)[0].as_py() or 0) for n in names]
    return out


@contextlib.contextmanager
def points_of(where: str, data: Any, columns: Any, units: Any, max_rows_per_unit: Any, rng: Any,
              check: Callable[[], None]) -> Iterator[tuple[SparkPoints, np.random.Generator, bool]]:
    """Validate (schema, then ``check()`` for the mechanism's parameters, then ``rng``), persist
    and count the finite rows (job 1, before any charge), and yield ``(source, driver generator,
    secure)``; the rows are unpersisted on exit."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from .unit_rows import check_max_rows

    cols = point_columns(data, columns, units, where=where)
    unit = None if units is None else describe_column(data, units, where=where, name="units")
    k = check_max_rows(where, units, max_rows_per_unit)
    check()
    randomness, gen, secure = task_randomness(rng, where)
    if unit is not None:  # user level: one vector per unit, in Spark (the secret: the generator's first draw)
        from .base import draw_secret
        from .spark_units import unit_vector_frame

        data, cols = unit_vector_frame(data, cols, unit, k, draw_secret(gen)), [f"c{j}" for j in range(len(cols))]
    values = [F.col(_quoted(c)).cast("double") for c in cols]
    finite = None
    for v in values:
        ok = v.isNotNull() & ~F.isnan(v) & (F.abs(v) < F.lit(float("inf")))
        finite = ok if finite is None else finite & ok
    frame = data.select(*[v.alias(f"c{j}") for j, v in enumerate(values)]).where(finite)
    # means: the rows packed into blocks (one binary value per block of consecutive rows, _pack), so
    # that each pass sends a task its rows as a few buffers rather than d Arrow columns built from
    # Spark's rows; k-means reads the columns (spark_kmeans, spark_aggregate_kmeans)
    packed = len(cols) if where == "private_mean" else 0
    if packed:
        from pyspark.sql.types import BinaryType, LongType, StructField, StructType

        values_per_block = block_values(packed, _records_per_batch(frame))
        frame = _map(frame, _pack(packed, values_per_block), StructType([StructField("x", BinaryType(), False),
                                                       StructField("m", LongType(), False)]))
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with _Quiet():
            try:
                n = int(frame.agg(F.sum("m")).collect()[0][0] or 0) if packed else int(frame.count())
            except _spark_errors() as exc:
                raise _spark_failure(where, exc) from None
        yield SparkPoints(frame, len(cols), n, randomness, where, packed=packed), gen, secure
    finally:
        frame.unpersist()
