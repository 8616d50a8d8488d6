"""Spark engine (``pip install 'privagg[spark]'``): the histograms of a column of a Spark DataFrame.

The same releases as the local engines, with the same core: Spark only counts; every
calibration, threshold and accounting step is :mod:`privagg.mechanisms.histogram`'s.

Counting. ``df.select(key).groupBy("key").count()`` in Spark, key canonicalised as in
:mod:`privagg.engines.counting` (the one key equality of every engine): FLOAT/DOUBLE keys have
−0.0 → +0.0 and NaN → NULL; NULL keys are missing: counted in n, never a key. Keys of the
native types (boolean, integers, float, double, string, date) keep their type; other scalar
types (decimal, timestamp, intervals, …) are keyed by their exact text (``CAST AS STRING``, as
the DuckDB engine does); binary, array, map and struct columns are refused. n is counted in
Spark too (the sum of the grouped counts, NULL group included).

Stable histogram: noise where the data is. The grouped counts are persisted on the executors
(memory, then disk) and n is computed from them (job 1, before the ledger is charged: a
DataFrame that cannot be evaluated is an error that charges nothing). After the charge, one
``mapInArrow`` stage (job 2), whose Python function is marked non-deterministic
(``asNondeterministic()``, so that the optimizer never duplicates or reorders it), applies
:func:`~privagg.mechanisms.histogram.stable_noise_threshold` — the exact discrete Laplace sampler
of :mod:`privagg.noise` — to each partition's (key, count) batches and returns only the kept
rows. **Raw counts never reach the driver**: it receives the released keys with their noisy
counts, and n (a public number under replace-one; under add/remove the driver adds the noise of
the total n̂, as for the local engines). We use ``mapInArrow`` rather than ``mapInPandas``: the
same grouped-map mechanism on Arrow batches, without a pandas conversion.

Randomness in the tasks. ``rng=None`` (or a :class:`~privagg.noise.rng.SecureGenerator`): every
task builds its own ``SecureGenerator`` (AES-CTR keyed from the executor's OS entropy); nothing
random is shipped from the driver. Seeded (an int, a ``SeedSequence`` or another ``Generator``;
``secure=False``, for tests): the root ``SeedSequence`` is split on the driver into a part for the
tasks and one for the driver (the noisy total), and partition p draws from the p-th child of the
tasks' part — exactly ``tasks.spawn(P)[p]``, built in the task as
``SeedSequence(entropy, spawn_key=(*tasks.spawn_key, p))`` — so no two partitions share a stream
(one seed is never broadcast to all). Seeded runs sort each partition by key first, so that a
rerun gives the same release for the same data and Spark configuration.

Materialised once. The kept rows are collected with one action (``toArrow``); the release is
built from that one result, and the noise stage's DataFrame is never evaluated again. A task
that fails or is retried (or speculatively duplicated) contributes only the output of the one
successful attempt that Spark hands to the collect, so no second, different release exists
anywhere: in secure mode a retry draws fresh noise (the law is the same), in seeded mode it
draws the same noise.

Laplace histogram. The public domain is a small DataFrame (cast to the key's type, exactly,
like the DuckDB engine's domain file), broadcast-joined to the grouped counts; one job returns
the count of each domain key and the count of all other records (outside the domain or
missing). Absent keys are filled with 0 and the noise is drawn on the driver by
:func:`~privagg.mechanisms.histogram.laplace_histogram_from_counts`: every domain key is
released anyway, so the driver sees the exact counts of the domain keys (as with DuckDB) and
nothing about other keys.

What is public: the DataFrame's schema (column names and types), the Spark configuration and
the number of partitions. Errors name those and never quote Spark's messages (which may hold
values of the data).

User level (``units=`` a column name of the same DataFrame; :class:`SparkEngine`). Each unit
keeps at most ℓ0 of its keys and at most ℓ∞ rows per key, as in every engine
(:mod:`privagg.engines.base`, docs/proofs/histograms.md §7), with the priority

    π(u, k) = xxhash64(s, u, k)      (Spark's xxhash64: k hashed with seed xxhash64(u, xxhash64(s)))

Spark cannot evaluate DuckDB's ``hash()``, so the kept subsets are **not bit-identical** with the
numpy/DuckDB engines' for the same secret; the **law is the same**: for a fresh secret s, each
unit keeps a (pseudo-)uniformly random subset of ℓ0 of its keys (all of them if it has ≤ ℓ0),
independently across units, and the kept set of a unit depends only on its own rows and on s
(adding or removing a unit changes no other unit's rows, for any s: the privacy proof's
property). When every unit has ≤ ℓ0 keys and ≤ ℓ∞ rows per key nothing is dropped and all
engines agree exactly. Plans: ℓ0 = ℓ∞ = 1: ``min_by(key, π)`` per unit, then a count per key
(one hash aggregate, no sort); otherwise ``least(count(*), ℓ∞)`` per (unit, key) pair,
``min_by(struct(key, c), π, ℓ0)`` per unit (Spark's top-ℓ0 aggregate, the equivalent of
``row_number() OVER (PARTITION BY unit ORDER BY π) ≤ ℓ0`` without a sort), then a sum per key.
The secret s is drawn from the release's generator (the CSPRNG unless seeded) and enters the
plan as a one-row DataFrame built from a Python list (a ``LogicalRDD``, broadcast-joined): it
is never a literal of the plan, so ``explain()``, the SQL tab of the UI and the event log do
not show it (executors compute π, so they hold it). privagg never logs a plan. The stable
histogram's bounded counts stay on the executors like the record-level counts (only n, the sum
of the bounded counts, and the released keys reach the driver).

Sums. :meth:`SparkEngine.clamp_sum` (floating point, as DuckDB's) and
:meth:`SparkEngine.clamp_sum_grid`: the exact sum of the clipped values' grid integers
(``rint(clip(x)/2^e)``) as a DECIMAL(38, 0) aggregate — exact, never a wrapped long.

Means: :mod:`privagg.engines.spark_points` (the numeric rows of a DataFrame as the mean's
:class:`~privagg.engines.base.PointSource`). Not yet: k-means on Spark.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import check_choice, check_epsilon, fail
from ..errors import ParameterError
from ..noise.rng import SecureGenerator, resolve_rng
from .base import BoundedCounts, Bounding, Engine, draw_secret
from .counting import Domain, KeyCounts, as_domain, sort_order

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from ..mechanisms.histogram import HistogramRelease, StableHistogramParams

__all__ = [
    "SparkColumn",
    "SparkEngine",
    "count_keys",
    "describe_column",
    "laplace_histogram",
    "spark_session",
    "stable_histogram",
]

_NATIVE = {"BooleanType", "ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType",
           "StringType", "DateType", "NullType"}
_REFUSED = {"BinaryType", "ArrayType", "MapType", "StructType", "VariantType"}
_FLOATS = {"FloatType", "DoubleType"}
_PANDAS_WARNING = "PySpark does not yet fully support pandas"


class _Quiet:
    def __enter__(self) -> None:
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)

    def __exit__(self, *exc: Any) -> None:
        self._w.__exit__(*exc)


def _import_spark(where: str) -> Any:
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import functions
    except ImportError:
        raise ParameterError(
            f"{where}: the Spark engine needs pyspark: pip install 'privagg[spark]'"
        ) from None
    return functions


def is_spark_dataframe(data: Any) -> bool:
    """True for a (classic or Spark Connect) PySpark DataFrame, without importing pyspark."""
    cls = type(data)
    return cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame"


def _spark_failure(where: str, exc: BaseException, parameter: str = "data") -> ParameterError:
    """Our message for a Spark failure: its error class only (Spark's text may quote data)."""
    condition = None
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if callable(getter):
        try:
            condition = getter()
        except Exception:  # pragma: no cover - defensive: the message is ours either way
            condition = None
    label = type(exc).__name__
    if isinstance(condition, str) and condition and all(ch.isalnum() or ch in "_." for ch in condition):
        label = condition
    return ParameterError(
        f"{where}: parameter {parameter!r} must be a Spark DataFrame that Spark can evaluate; Spark failed ({label})."
    )


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


# --------------------------------------------------------------------------------------------
# sessions (the CLI's)
# --------------------------------------------------------------------------------------------


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None, *,
                  app_name: str = "privagg") -> SparkSession:
    """A SparkSession for the command line: ``master`` and ``conf`` (``spark.*`` settings).

    Defaults that the caller's ``conf`` may override: no console progress bar and no web UI
    (nothing but the release on stdout), and, on a ``local`` master, this Python for the
    workers (``PYSPARK_PYTHON``, unless set or ``spark.pyspark.python`` is given), so that they
    import the same privagg.
    """
    import os
    import sys

    _import_spark("spark_session")
    from pyspark.sql import SparkSession

    settings = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}
    settings.update(conf or {})
    if master.startswith("local") and "spark.pyspark.python" not in settings:
        # PySpark takes the workers' Python from PYSPARK_PYTHON (default: "python3" on PATH)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _Quiet():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# --------------------------------------------------------------------------------------------
# the column
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparkColumn:
    """A key column of a Spark DataFrame and what is public about it (its name and Spark type)."""

    frame: Any  # pyspark.sql.DataFrame
    column: str
    spark_type: Any  # pyspark.sql.types.DataType of the column
    key_type: Any  # the type of the key as grouped (the column's, or StringType)

    @property
    def type_name(self) -> str:
        return type(self.spark_type).__name__


def describe_column(data: Any, column: Any, *, where: str = "spark", name: str = "column") -> SparkColumn:
    """Check that ``data`` is a Spark DataFrame with a scalar column ``column`` (schema only);
    ``name`` is the parameter named in errors (``"units"`` for the unit column).

    Raises
    ------
    ParameterError
        Not a Spark DataFrame, no such column (exact name), or a binary/nested column.
    """
    _import_spark(where)
    from pyspark.sql.types import StringType

    if not is_spark_dataframe(data):
        raise fail(where, "data", "a Spark DataFrame", f"<{type(data).__module__}.{type(data).__qualname__}>")
    if not isinstance(column, str) or not column:
        raise fail(where, name, "a non-empty column name of the Spark DataFrame", column)
    fields = {f.name: f.dataType for f in data.schema.fields}
    if column not in fields:
        names = ", ".join(repr(f) for f in list(fields)[:12])
        if len(fields) > 12:
            names += f", ... ({len(fields)} columns)"
        raise fail(where, name, f"a column of the DataFrame ({names})", column)
    spark_type = fields[column]
    type_name = type(spark_type).__name__
    if type_name in _REFUSED:
        raise fail(where, name, "a column of scalar keys (not binary, array, map, struct or variant)",
                   f"{column!r} of type {spark_type.simpleString()}")
    key_type = spark_type if type_name in _NATIVE else StringType()
    return SparkColumn(frame=data, column=column, spark_type=spark_type, key_type=key_type)


def _key(info: SparkColumn) -> Column:
    """The canonical key as a Spark expression (see the module docstring)."""
    from pyspark.sql import functions as F

    c = F.col(_quoted(info.column))
    if info.type_name in _FLOATS:
        zero = F.lit(0.0).cast(info.spark_type)
        return F.when(F.isnan(c), F.lit(None).cast(info.spark_type)).when(c == 0, zero).otherwise(c)
    if info.type_name not in _NATIVE:
        return c.cast("string")
    return c


def _quoted(name: str) -> str:
    """``name`` as a Spark column reference (backticks doubled), so no name is parsed as SQL."""
    return "`" + name.replace("`", "``") + "`"


def _grouped(info: SparkColumn) -> DataFrame:
    """(key, count) for every distinct key, the NULL (missing) key included."""
    from pyspark.sql import functions as F

    return info.frame.select(_key(info).alias("key")).groupBy("key").agg(F.count(F.lit(1)).alias("count"))


def _keys_to_numpy(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    import pyarrow as pa

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        return np.asarray(keys.to_pylist(), dtype=object)
    return keys.to_numpy(zero_copy_only=False)


def count_keys(data: Any, column: str, *, where: str = "count_keys") -> KeyCounts:
    """Record level: the count of every present key of ``column``, computed in Spark, all
    collected to the driver (for tests and small results; the histograms never do this)."""
    info = describe_column(data, column, where=where)
    with _Quiet():
        try:
            table = _grouped(info).toArrow()
        except _spark_errors() as exc:
            raise _spark_failure(where, exc) from None
    counts = table.column("count").to_numpy().astype(np.int64)
    keys = table.column("key")
    present = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    n = int(counts.sum())
    return KeyCounts(keys=_keys_to_numpy(keys.filter(present)), counts=counts[present], n=n)


def _priority(secret: Column, unit: Column, key: Column) -> Column:
    """π(u, k) = xxhash64(s, u, k): the bounding priority in Spark (NULL inputs are skipped by
    xxhash64, so the missing unit and the ``other`` pseudo-key get priorities too)."""
    from pyspark.sql import functions as F

    return F.xxhash64(secret, unit, key)


def _secret_frame(spark: SparkSession, secret: int) -> DataFrame:
    """A one-row DataFrame (column ``s``, the secret as a signed 64-bit integer), built from a
    Python list: a ``LogicalRDD`` whose value is in no plan string (unlike a literal)."""
    signed = secret - (1 << 64) if secret >= 1 << 63 else secret
    with _Quiet():
        return spark.createDataFrame([(signed,)], "s long")


class SparkEngine(Engine):
    """The engine interface (:mod:`privagg.engines.base`) for a key column of a Spark DataFrame
    and, at user level, a unit column ``units`` of the same DataFrame (module docstring)."""

    name = "spark"

    def __init__(self, data: Any, column: str, units: str | None = None, *, where: str = "spark") -> None:
        self.info = describe_column(data, column, where=where)
        self.unit_info = None if units is None else describe_column(data, units, where=where, name="units")
        self.where = where

    def count_keys(self) -> KeyCounts:
        return count_keys(self.info.frame, self.info.column, where=self.where)

    # ---- user level ------------------------------------------------------------------------

    def _source(self, domain: Domain | None, keep_other: bool) -> DataFrame:
        """(u, k): canonical unit and key of every row; with a domain, k is the key's index in
        it (NULL outside it); k NULL is the ``other`` pseudo-key, dropped unless ``keep_other``."""
        from pyspark.sql import functions as F

        if self.unit_info is None:
            raise ParameterError(f"{self.where}: a unit column (units=) is required at user level")
        frame = self.info.frame.select(_key(self.unit_info).alias("u"), _key(self.info).alias("k"))
        if domain is not None:
            frame = (frame.join(F.broadcast(self._domain_frame(domain).withColumnRenamed("key", "k")),
                                on="k", how="left")
                     .select("u", F.col("idx").alias("k")))
        return frame if keep_other else frame.where(F.col("k").isNotNull())

    def _domain_frame(self, domain: Domain) -> DataFrame:
        """(idx, key): the domain as a small DataFrame of the key's type (broadcast by joins)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        table = pa.table({"idx": pa.array(np.arange(domain.size, dtype=np.int64)),
                          "key": pa.array(_arrow_domain(domain.keys), type=to_arrow_type(self.info.key_type))})
        with _Quiet():
            return self.info.frame.sparkSession.createDataFrame(table)

    def kept_pairs(self, bounding: Bounding, *, domain: Domain | None = None, keep_other: bool = False) -> DataFrame:
        """(u, k, c): the (unit, key) pairs each unit keeps and their contributions c ≤ ℓ∞ (lazy)."""
        from pyspark.sql import functions as F

        l0, linf = bounding.max_keys_per_unit, bounding.max_rows_per_key
        source = self._source(domain, keep_other)
        secret = F.broadcast(_secret_frame(source.sparkSession, bounding.secret))
        prio = _priority(F.col("s"), F.col("u"), F.col("k"))
        if l0 == 1 and linf == 1 and not keep_other:  # one hash aggregate over the rows
            top = source.crossJoin(secret).groupBy("u").agg(F.min_by("k", prio).alias("k"))
            return top.select("u", "k", F.lit(1).cast("long").alias("c"))
        pairs = source.groupBy("u", "k").agg(F.least(F.count(F.lit(1)), F.lit(linf).cast("long")).alias("c"))
        pairs = pairs.crossJoin(secret)
        kc = F.struct("k", "c")
        if l0 == 1:
            top = pairs.groupBy("u").agg(F.min_by(kc, prio).alias("kc"))
        else:
            top = pairs.groupBy("u").agg(F.min_by(kc, prio, l0).alias("top")).select(
                "u", F.explode("top").alias("kc"))
        return top.select("u", "kc.k", "kc.c")

    def bounded_frame(self, bounding: Bounding, *, domain: Domain | None = None,
                      keep_other: bool = False) -> DataFrame:
        """(key, count): the bounded count of every key with a kept row (key NULL: ``other``;
        with a domain, key is the index in it). Lazy: nothing runs until an action."""
        from pyspark.sql import functions as F

        pairs = self.kept_pairs(bounding, domain=domain, keep_other=keep_other)
        return pairs.groupBy(F.col("k").alias("key")).agg(F.sum("c").cast("long").alias("count"))

    def _domain(self, domain: Any) -> Domain | None:
        return None if domain is None else spark_domain(self.info, domain, self.where)

    def bounded_counts(self, bounding: Bounding, *, domain: Any = None, keep_other: bool = False) -> BoundedCounts:
        dom = self._domain(domain)
        with _Quiet():
            try:
                table = self.bounded_frame(bounding, domain=dom, keep_other=keep_other).toArrow()
            except _spark_errors() as exc:
                raise _spark_failure(self.where, exc) from None
        counts = table.column("count").to_numpy().astype(np.int64)
        keys = table.column("key")
        present = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        other = int(counts[~present].sum())
        if dom is None:
            values = _keys_to_numpy(keys.filter(present))
        else:
            values = np.asarray(dom.keys)[keys.filter(present).to_numpy().astype(np.intp)]
        kept = counts[present]
        order = sort_order(values)  # a canonical order: noise is drawn key by key in this order
        return BoundedCounts(KeyCounts(keys=values[order], counts=kept[order], n=int(counts.sum())), other)

    def keys_per_unit(self, cap: int) -> np.ndarray:
        from pyspark.sql import functions as F

        per_unit = self._source(None, False).groupBy("u").agg(
            F.least(F.countDistinct("k"), F.lit(int(cap)).cast("long")).alias("j"))
        with _Quiet():
            try:
                table = per_unit.groupBy("j").agg(F.count(F.lit(1)).alias("units")).toArrow()
            except _spark_errors() as exc:
                raise _spark_failure(self.where, exc) from None
        out = np.zeros(cap + 1, dtype=np.int64)
        out[table.column("j").to_numpy().astype(np.intp)] = table.column("units").to_numpy()
        return out

    def _clamped(self, lower: float, upper: float) -> Column:
        """clip(value, lower, upper) as DOUBLE; NULL for NULL and NaN values (skipped by sums)."""
        from pyspark.sql import functions as F

        if self.info.type_name not in {"ByteType", "ShortType", "IntegerType", "LongType", "FloatType",
                                       "DoubleType", "DecimalType"}:
            raise fail(self.where, "column", "a numeric column", f"{self.info.column!r} of type "
                       f"{self.info.spark_type.simpleString()}")
        x = F.col(_quoted(self.info.column)).cast("double")
        x = F.when(F.isnan(x), F.lit(None).cast("double")).otherwise(x)
        return F.least(F.greatest(x, F.lit(float(lower))), F.lit(float(upper)))

    def _sum(self, column: Column) -> Any:
        from pyspark.sql import functions as F

        with _Quiet():
            try:
                return self.info.frame.select(F.sum(column).alias("s")).collect()[0]["s"]
            except _spark_errors() as exc:
                raise _spark_failure(self.where, exc) from None

    def clamp_sum(self, lower: float, upper: float) -> float:
        """Σ clip(value, lower, upper) over non-missing values, in floating point (as DuckDB)."""
        total = self._sum(self._clamped(lower, upper))
        return 0.0 if total is None else float(total)

    def clamp_sum_grid(self, lower: float, upper: float, exponent: int) -> int:
        """Σ rint(clip(value, lower, upper) / 2^exponent), exactly (a Python int): the grid
        integers of the clipped values (round half to even), summed as DECIMAL(38, 0) in Spark.

        Each term is below B = max(|lower|, |upper|)/2^e < 2^63 in magnitude (checked, public),
        so a DECIMAL(38, 0) sum is exact for any n < 10^19 rows: no long overflow, silent or not.
        """
        from pyspark.sql import functions as F

        bound = max(abs(float(lower)), abs(float(upper))) * 2.0 ** -int(exponent)
        if not (lower <= upper) or not math.isfinite(bound) or bound >= 2.0 ** 63:
            raise fail(self.where, "exponent", "a grid exponent with max(|lower|, |upper|) / 2^exponent < 2^63 "
                       "(and lower ≤ upper, finite)", exponent)
        scaled = self._clamped(lower, upper) * F.lit(2.0 ** -int(exponent))  # exact: a power of two
        # rint(·) < 2^63 in magnitude: exact as a long, then exact as DECIMAL(38, 0) (a direct
        # DOUBLE → DECIMAL cast goes through the double's shortest text and loses digits)
        total = self._sum(F.rint(scaled).cast("long").cast("decimal(38,0)"))
        return 0 if total is None else int(total)


# --------------------------------------------------------------------------------------------
# randomness of the tasks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRandomness:
    """How a task gets its generator: fresh OS entropy (``entropy is None``) or the partition's
    own child of a seed (``SeedSequence(entropy, spawn_key=(*spawn_key, partition))``)."""

    entropy: int | None = None
    spawn_key: tuple[int, ...] = ()

    @property
    def secure(self) -> bool:
        return self.entropy is None

    def generator(self, partition: int) -> np.random.Generator:
        if self.entropy is None:
            return SecureGenerator()
        seq = np.random.SeedSequence(self.entropy, spawn_key=(*self.spawn_key, int(partition)))
        return np.random.default_rng(seq)


def fail_once(fault: str | None, context: Any) -> None:
    """Tests only (``fault``: a folder, else nothing happens): the task's first attempt leaves a
    marker ``failed-<partition>`` in the folder and dies, so Spark retries it."""
    if fault is not None and context.attemptNumber() == 0:
        import os

        open(os.path.join(fault, f"failed-{context.partitionId()}"), "w").close()
        raise RuntimeError("privagg test: injected task failure")


def task_randomness(rng: Any, where: str) -> tuple[TaskRandomness, np.random.Generator, bool]:
    """(what the tasks use, the driver's generator, secure) for an ``rng`` argument."""
    gen, secure = resolve_rng(rng, where)  # validates rng
    if secure:
        return TaskRandomness(), gen, True
    if isinstance(rng, np.random.SeedSequence):
        root = rng
    elif isinstance(rng, np.random.Generator):
        root = np.random.SeedSequence([int(w) for w in rng.integers(0, 1 << 32, size=4, dtype=np.uint64)])
    else:
        root = np.random.SeedSequence(int(rng))
    tasks, driver = root.spawn(2)
    return TaskRandomness(int(tasks.entropy), tuple(tasks.spawn_key)), np.random.default_rng(driver), False


# --------------------------------------------------------------------------------------------
# the stable histogram
# --------------------------------------------------------------------------------------------


def _noise_function(params: StableHistogramParams, randomness: TaskRandomness,
                    fault: str | None = None) -> Any:
    """The function run in each task on Arrow batches of (key, count): noise, threshold, kept rows."""

    def noise(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        from privagg.mechanisms.histogram import stable_noise_threshold

        context = TaskContext.get()
        fail_once(fault, context)
        gen = randomness.generator(context.partitionId())
        for batch in batches:
            counts = batch.column(1).to_numpy(zero_copy_only=False)
            noisy, keep = stable_noise_threshold(params, counts, gen)
            mask = pa.array(keep)
            yield pa.RecordBatch.from_arrays(
                [batch.column(0).filter(mask), pa.array(noisy[keep], type=pa.int64())], names=["key", "count"]
            )

    return noise


def noised(counts: DataFrame, params: StableHistogramParams, randomness: TaskRandomness,
           *, fault: str | None = None) -> DataFrame:
    """The noise stage: kept (key, noisy count) rows of ``counts`` (present keys only), computed
    by a non-deterministic ``mapInArrow`` function in the tasks. Lazy: nothing runs until an
    action; each evaluation draws new noise, so the engine evaluates it exactly once."""
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.functions import pandas_udf
    from pyspark.sql.types import LongType, StructField, StructType
    from pyspark.util import PythonEvalType

    present = counts.where(F.col("key").isNotNull())
    if not randomness.secure:  # seeded: the same rows in the same order, hence the same release
        present = present.sortWithinPartitions("key")
    schema = StructType([StructField("key", present.schema["key"].dataType, True),
                         StructField("count", LongType(), False)])
    function = _noise_function(params, randomness, fault)
    jdf = getattr(present, "_jdf", None)
    if jdf is None:  # Spark Connect: no handle on the plan; mapInArrow as is  # pragma: no cover
        return present.mapInArrow(function, schema)
    with _Quiet():
        udf = pandas_udf(function, returnType=schema,  # type: ignore[call-overload]
                         functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF).asNondeterministic()
        column = udf(*[present[c] for c in present.columns])
    return SparkDataFrame(jdf.mapInArrow(column._jc, False, None), present.sparkSession)


def collect_or_fail(frame: Any, where: str, parameter: str = "data") -> Any:
    """``frame.toArrow()`` (Spark's console output silenced); a Spark failure becomes our
    ParameterError naming ``parameter`` with Spark's error class only (:func:`_spark_failure`)."""
    with _Quiet():
        try:
            return frame.toArrow()
        except _spark_errors() as exc:
            raise _spark_failure(where, exc, parameter) from None


def _collect(frame: DataFrame) -> pa.Table:
    """Evaluate ``frame`` once and bring its rows to the driver (the release's one materialisation)."""
    with _Quiet():
        return frame.toArrow()


def _persisted_counts(grouped: DataFrame, where: str) -> tuple[DataFrame, int]:
    """The (key, count) frame persisted on the executors, and n = Σ count (one job, before any
    charge): the grouped counts (record level) or the bounded counts (user level)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    counts = grouped.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with _Quiet():
            row = counts.agg(F.sum("count").cast("long").alias("n")).collect()[0]
    except _spark_errors() as exc:
        counts.unpersist()
        raise _spark_failure(where, exc) from None
    return counts, int(row["n"] or 0)


def stable_histogram(
    data: Any,
    *,
    column: str,
    epsilon: Any,
    delta: Any,
    neighbors: str = "replace",
    threshold: str = "tight",
    total_epsilon_share: Any = None,
    rng: Any = None,
    ledger: Any = None,
    units: str | None = None,
    max_keys_per_unit: int = 1,
    max_rows_per_key: int = 1,
    _fault: str | None = None,
) -> HistogramRelease:
    """:func:`privagg.mechanisms.histogram.stable_histogram` of ``data[column]``, noise in the cluster.

    Same parameters, guarantee and release as the local engines (see the module docstring for
    what runs where). ``units``: the unit column's name (user level, add/remove of one unit);
    the bounded counts stay on the executors. ``_fault`` (tests only): a directory; the first
    attempt of every noise task writes a marker file there and fails, so that Spark retries it.
    """
    from ..mechanisms.histogram import StableHistogramParams, _check_bounds, stable_histogram_from_draw

    where = "stable_histogram"
    bounds = _check_bounds(where, units, max_keys_per_unit, max_rows_per_key)
    params = StableHistogramParams.build(
        epsilon, delta, neighbors, threshold, total_epsilon_share=total_epsilon_share, where=where, bounds=bounds
    )
    randomness, gen, secure = task_randomness(rng, where)
    info = describe_column(data, column, where=where)
    if bounds is None:
        grouped = _grouped(info)
    else:  # the secret from the release's generator (the CSPRNG unless seeded), never shown
        engine = SparkEngine(data, column, units, where=where)
        grouped = engine.bounded_frame(Bounding(bounds[0], bounds[1], draw_secret(gen)))
    counts, n = _persisted_counts(grouped, where)
    try:
        def draw() -> tuple[np.ndarray, np.ndarray]:
            table = _collect(noised(counts, params, randomness, fault=_fault))  # the one evaluation
            return _keys_to_numpy(table.column("key")), table.column("count").to_numpy().astype(np.int64)

        return stable_histogram_from_draw(n, draw, params, rng=gen, secure=secure, ledger=ledger, unit=units)
    finally:
        counts.unpersist()


# --------------------------------------------------------------------------------------------
# the Laplace histogram
# --------------------------------------------------------------------------------------------


def spark_domain(info: SparkColumn, domain: Any, where: str) -> Domain:
    """The public domain cast exactly to the key's type (a key that does not cast exactly, or
    two keys that become equal, is an error naming the key: the domain is public)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    dom = as_domain(domain, where)
    target = to_arrow_type(info.key_type)
    keys = dom.keys
    try:
        if keys.dtype.kind == "O":
            source = pa.array(keys.tolist(), from_pandas=False)
        else:
            source = pa.array(keys)
        cast = source.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
            OverflowError):
        raise fail(where, "domain", f"a list of keys of the column's type {info.key_type.simpleString()}",
                   keys[:3].tolist()) from None
    values = _keys_to_numpy(cast)
    return as_domain(values, where)  # duplicates after the cast are an error here


def laplace_histogram(
    data: Any,
    *,
    column: str,
    epsilon: Any,
    domain: Any,
    neighbors: str = "replace",
    other: bool = False,
    rng: Any = None,
    ledger: Any = None,
    units: str | None = None,
    max_keys_per_unit: int = 1,
    max_rows_per_key: int = 1,
) -> HistogramRelease:
    """:func:`privagg.mechanisms.histogram.laplace_histogram` of ``data[column]``: counts of the
    domain keys by a broadcast join in Spark, noise on the driver (module docstring). ``units``:
    the unit column's name (user level: bounded counts of the domain keys and of ``other``)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from ..mechanisms.histogram import LaplaceHistogramParams, _check_bounds, _check_other, laplace_histogram_from_counts

    where = "laplace_histogram"
    check_epsilon(where, epsilon)
    check_choice(where, "neighbors", neighbors, ("replace", "add_remove"))
    bounds = _check_bounds(where, units, max_keys_per_unit, max_rows_per_key)
    as_domain(domain, where)
    with_other = _check_other(where, other)
    gen, _ = resolve_rng(rng, where)
    info = describe_column(data, column, where=where)
    dom = spark_domain(info, domain, where)
    if bounds is not None:
        LaplaceHistogramParams.build(epsilon, neighbors, dom.size + int(with_other), where=where, bounds=bounds)
        engine = SparkEngine(data, column, units, where=where)
        key_counts = engine.bounded_counts(Bounding(bounds[0], bounds[1], draw_secret(gen)), domain=dom,
                                           keep_other=with_other).key_counts
        return laplace_histogram_from_counts(
            key_counts, epsilon=epsilon, domain=dom, neighbors=neighbors, other=other, rng=gen, ledger=ledger,
            max_keys_per_unit=bounds[0], max_rows_per_key=bounds[1], unit=units)
    spark = info.frame.sparkSession
    from pyspark.sql.pandas.types import to_arrow_type

    table = pa.table({"idx": pa.array(np.arange(dom.size, dtype=np.int64)),
                      "key": pa.array(_arrow_domain(dom.keys), type=to_arrow_type(info.key_type))})
    with _Quiet():
        try:
            domain_frame = spark.createDataFrame(table)
            joined = (_grouped(info).join(F.broadcast(domain_frame), on="key", how="left")
                      .groupBy("idx").agg(F.sum("count").cast("long").alias("count")))
            result = joined.toArrow()
        except _spark_errors() as exc:
            raise _spark_failure(where, exc) from None
    idx = result.column("idx")
    counts = result.column("count").to_numpy().astype(np.int64)
    hit = np.asarray(idx.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    aligned = np.zeros(dom.size, dtype=np.int64)  # absent domain keys: 0
    aligned[idx.filter(pa.array(hit)).to_numpy().astype(np.intp)] = counts[hit]
    key_counts = KeyCounts(keys=dom.keys, counts=aligned, n=int(counts.sum()))
    return laplace_histogram_from_counts(key_counts, epsilon=epsilon, domain=dom, neighbors=neighbors,
                                         other=other, rng=rng, ledger=ledger)


def _arrow_domain(keys: np.ndarray) -> Any:
    return keys.tolist() if keys.dtype.kind == "O" else keys
