"""User-level means and k-means on Spark: one vector per privacy unit, computed in the cluster.

The rule is :mod:`privagg.engines.unit_rows`'s (docs/proofs/mean.md §9, kmeans.md §9): rows with a
non-finite entry are dropped first; each remaining row x of unit u gets the priority

    π(u, x) = xxhash64(s, u, x_1, …, x_d)

(Spark's 64-bit hash; s the release's 64-bit secret, drawn from its generator on the driver and
sent to the tasks as a broadcast one-row DataFrame, never as a literal, so no plan shows it; the
unit is the canonical key of :func:`privagg.engines.spark._key`, so −0.0 and 0.0, and every NaN,
are one unit; −0.0 values are hashed as 0.0); a unit keeps its ``k = max_rows_per_unit`` rows of
smallest (π, x) — a ``row_number()`` window partitioned by the unit — and its vector is their
average, summed in that order. A unit's vector is a function of its own rows and of s only, so
adding or removing a unit adds or removes exactly one vector and changes no other: the
record-level mechanism then runs, unchanged, on the vectors. The law is the local one (k of the
unit's rows chosen uniformly at random); the hash is Spark's, not DuckDB's, so the rows kept are
not those of the local engines for the same seed (tested: stability, uniformity, and the
vectors themselves whenever k covers every row of every unit).
"""

from __future__ import annotations

from typing import Any

__all__ = ["unit_vector_frame"]


def unit_vector_frame(data: Any, cols: list[str], unit: Any, k: int, secret: int) -> Any:
    """The lazy Spark DataFrame of one vector per unit, columns ``c0 … c{d−1}`` (DOUBLE), from the
    numeric ``cols`` of ``data`` and its unit column ``unit`` (a :class:`~privagg.engines.spark.SparkColumn`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from .spark import _key, _quoted, _secret_frame

    names = [f"c{j}" for j in range(len(cols))]
    values = [F.col(_quoted(c)).cast("double") for c in cols]
    finite = None
    for v in values:
        ok = v.isNotNull() & ~F.isnan(v) & (F.abs(v) < F.lit(float("inf")))
        finite = ok if finite is None else finite & ok
    rows = data.select(_key(unit).alias("u"), *[v.alias(n) for v, n in zip(values, names)]).where(finite)
    rows = rows.select("u", *[F.when(F.col(n) == 0.0, F.lit(0.0)).otherwise(F.col(n)).alias(n) for n in names])
    # the secret as a broadcast one-row frame, never a literal (no plan string shows it: spark._secret_frame)
    rows = rows.crossJoin(F.broadcast(_secret_frame(data.sparkSession, int(secret))))
    rows = rows.select("u", *names, F.xxhash64(F.col("s"), F.col("u"), *[F.col(n) for n in names]).alias("p"))
    rank = F.row_number().over(Window.partitionBy("u").orderBy("p", *names))
    kept = rows.withColumn("r", rank).where(F.col("r") <= F.lit(int(k)))
    if k == 1:
        return kept.select(*names)
    # the average of the kept rows, summed in (π, x) order: sorted per unit, then a sequential fold
    grouped = kept.groupBy("u").agg(F.array_sort(F.collect_list(F.struct("p", *names))).alias("a"))
    size = F.size("a").cast("double")
    return grouped.select(*[(F.aggregate("a", F.lit(0.0), _adder(n)) / size).alias(n) for n in names])


def _adder(name: str) -> Any:
    """The fold step ``acc + x.name`` (a two-argument function: Spark counts the arguments)."""
    return lambda acc, x: acc + x[name]
