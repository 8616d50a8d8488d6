"""Spark engine for k-means by sample and aggregate (``radius=``/``parts=`` or
``strategy="aggregate"`` of :func:`privagg.private_kmeans`; ``pip install 'privagg[spark]'``).

The mechanism is :mod:`privagg.mechanisms.kmeans`'s (``_private_kmeans_aggregate``), unchanged:
the noisy count, the number of parts ``t``, the radius selection, FriendlyCore on the tuples of
centers, the aligned average and its noise, and the noise of the Lloyd steps all run on the
driver, in the local code. Spark does the parts and their k-means, and the Lloyd steps' exact
counts and sums:

* **Rows**: as for the coreset strategy (:func:`privagg.engines.spark_points.points_of`): the
  finite rows, persisted on the executors and counted before the ledger is charged.
* **Parts** (one job, collected once): the driver draws a 128-bit secret ``s`` and the ``t``
  per-part k-means++ seeds from the release's generator (in that order). The row at position
  ``i`` of partition ``q`` gets the part ``L = G(s, q)[i]``, the ``i``-th draw of
  ``integers(0, t)`` from the AES-128-CTR generator keyed with ``blake2b(q, key=s)``
  (``mapInArrow``). Given ``s`` uniform and secret, the labels are i.i.d. uniform on ``[0, t)``
  and independent of the rows (a row's label depends on its position only, never on a value),
  the law of the local ``_part_tuples`` (a shuffle, then i.i.d. uniform labels); so adding or
  removing one row changes one part and no other, hence one tuple. The labels are a
  deterministic function of ``s`` and the persisted partition, so a retried task relabels its
  rows identically (fresh draws could put one row in two parts). Then ``groupBy(part)`` and a
  grouped map (``applyInArrow``): per part the rows are put in a canonical order (their float64
  bit patterns, lexicographically), permuted by the generator keyed with ``blake2b(t + p, key=s)``
  (a uniform order given the part's rows: the local law, whatever order Spark delivers), and
  k-means++ (scikit-learn, ``n_init``, the part's seed) gives its ``k`` centers; a part with
  fewer than ``k`` rows, or whose k-means fails, gives the ⊥ tuple (NaN, the local rule). The
  grouped map is deterministic given ``s`` and the seeds (no fresh randomness: not marked
  non-deterministic, and a retry recomputes the same tuple). **Only the ``t·k`` centers
  (``t·k·d`` numbers) reach the driver**; empty parts are absent and are ⊥ there.
* **Lloyd steps** (``LLOYD_STEPS`` jobs of two kinds): per task the local exact
  ``(cluster, distance bin)`` histogram (:func:`~privagg.mechanisms.kmeans.lloyd_histogram`)
  and the exact clipped integer sums (:meth:`SparkKMeansPoints.cluster_sums`), added by Spark;
  the driver adds the noise (the local code).

So a seeded Spark release has the local law but is not the local release bit for bit (the
parts differ); once the collected tuples are given to the local code, the rest is (tested by
replay). What the driver sees: n, the per-part centers, and per Lloyd step the exact
``k × HIST_BINS`` histogram and the per-cluster sums (as the local driver). Executors see their
rows, ``s``, the seeds and the public centers. Errors name only the schema and the Spark
configuration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .spark_kmeans import SparkKMeansPoints, _long
from .spark_points import SparkPoints, _map, _rows

__all__ = ["SparkAggregatePoints", "keyed_generator"]


def keyed_generator(secret: int, index: int) -> np.random.Generator:
    """The AES-128-CTR generator keyed with ``blake2b(index, key=secret)`` (128-bit): a function
    of the secret and a public index only (partitions ``0 …``, parts ``t + p``)."""
    from randomgen import AESCounter

    key = hashlib.blake2b(int(index).to_bytes(8, "little", signed=False),
                          key=int(secret).to_bytes(16, "little"), digest_size=16).digest()
    return np.random.Generator(AESCounter(key=int.from_bytes(key, "little")))


def draw_part_secret(gen: np.random.Generator) -> int:
    """The 128-bit secret of one release's part assignment, from its generator (two draws)."""
    lo, hi = (int(v) for v in gen.integers(0, 1 << 64, size=2, dtype=np.uint64, endpoint=False))
    return lo | (hi << 64)


def part_centers(x: np.ndarray, k: int, seed: int, n_init: int, order: np.random.Generator) -> np.ndarray:
    """The ``(k, d)`` k-means++ centers of one part's rows ``x`` (any order): canonical order
    (bit patterns), a uniform permutation from ``order``, then scikit-learn with ``seed``;
    all-NaN (⊥) with fewer than ``k`` rows or when k-means fails (as the local ``_part_tuples``)."""
    import warnings

    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    n, d = x.shape
    out = np.full((k, d), np.nan)
    if n < k:
        return out
    bits = np.ascontiguousarray(x).view(np.int64)
    rows = x[np.lexsort(bits.T[::-1])][order.permutation(n)]
    with warnings.catch_warnings(), threadpool_limits(1), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # fewer distinct points than k: duplicate centers
        try:
            out[:] = KMeans(k, init="k-means++", n_init=n_init, random_state=int(seed)).fit(rows).cluster_centers_
        except (ValueError, ArithmeticError):  # e.g. rows near ±1.8e308: the ⊥ tuple
            out[:] = np.nan
    return out


class SparkAggregatePoints(SparkKMeansPoints):
    """The persisted finite rows of a Spark DataFrame, for sample and aggregate (module docstring)."""

    @classmethod
    def of(cls, source: SparkPoints) -> SparkAggregatePoints:
        return cls(source.frame, source.d, source.n, source.randomness, source.where, source.exponents)

    def labelled(self, secret: int, t: int) -> Any:
        """The lazy frame of the rows ``c0 …`` with their part ``part`` (INT, in ``[0, t)``)."""
        import pyarrow as pa
        from pyspark.sql.types import IntegerType, StructField, StructType

        s, tt = int(secret), int(t)
        frame = self.frame
        schema = StructType([*frame.schema.fields, StructField("part", IntegerType(), False)])

        def label(batches: Iterator[Any]) -> Iterator[Any]:
            from pyspark import TaskContext

            from privagg.engines.spark_aggregate_kmeans import keyed_generator

            gen = keyed_generator(s, TaskContext.get().partitionId())
            for batch in batches:
                part = gen.integers(0, tt, size=batch.num_rows).astype(np.int32)
                yield pa.RecordBatch.from_arrays([*batch.columns, pa.array(part, type=pa.int32())],
                                                 names=[*batch.schema.names, "part"])

        return _map(frame, label, schema)

    def part_tuples(self, k: int, t: int, gen: np.random.Generator, n_init: int) -> np.ndarray:
        """The ``(t, k, d)`` per-part k-means++ centers (module docstring): one Spark job; only the
        centers come back."""
        import pyarrow as pa
        from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType

        secret = draw_part_secret(gen)
        seeds = [int(v) for v in gen.integers(0, 2**31 - 1, size=int(t))]
        d, kk, tt, ni = self.d, int(k), int(t), int(n_init)
        names = [f"c{j}" for j in range(d)]

        def centers(table: Any) -> Any:
            from privagg.engines.spark_aggregate_kmeans import keyed_generator, part_centers

            p = int(table.column("part")[0].as_py())
            x = np.empty((table.num_rows, d), dtype=np.float64)
            for j, n in enumerate(names):
                x[:, j] = table.column(n).to_numpy()
            c = part_centers(x, kk, seeds[p], ni, keyed_generator(secret, tt + p))
            return pa.table([pa.array(np.full(kk, p, dtype=np.int32)), pa.array(np.arange(kk, dtype=np.int32)),
                             *[pa.array(c[:, j]) for j in range(d)]], names=["part", "i", *names])

        schema = StructType([StructField("part", IntegerType(), False), StructField("i", IntegerType(), False),
                             *[StructField(n, DoubleType(), True) for n in names]])
        frame = self.labelled(secret, tt).groupBy("part").applyInArrow(centers, schema)
        table = self._collect(frame)
        out = np.full((tt, kk, d), np.nan)
        part = table.column("part").to_numpy().astype(np.int64)
        i = table.column("i").to_numpy().astype(np.int64)
        for j, n in enumerate(names):  # columns (public), not rows
            out[part, i, j] = table.column(n).to_numpy(zero_copy_only=False).astype(np.float64)
        return out

    def lloyd_histogram(self, centers: np.ndarray, r_max: float) -> np.ndarray:
        """The exact ``(k, HIST_BINS)`` histogram of :func:`~privagg.mechanisms.kmeans.lloyd_histogram`:
        per task on its batches, added by Spark (int64; at most ``k·HIST_BINS`` totals come back)."""
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegerType, LongType, StructField, StructType

        from ..mechanisms.kmeans import HIST_BINS

        d, exps, rm = self.d, self.exponents, float(r_max)
        cs = np.array(centers, dtype=np.float64)
        k = cs.shape[0]

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.kmeans import lloyd_histogram

            total = np.zeros(k * HIST_BINS, dtype=np.int64)
            for batch in batches:
                with np.errstate(all="ignore"):
                    total += lloyd_histogram(_rows(batch, d, exps), cs, rm).reshape(-1)
            cell = np.flatnonzero(total)
            yield pa.RecordBatch.from_arrays([pa.array(cell.astype(np.int32)), _long(total[cell])], names=["b", "c"])

        schema = StructType([StructField("b", IntegerType(), False), StructField("c", LongType(), False)])
        table = self._collect(_map(self.frame, partial, schema).groupBy("b").agg(F.sum("c").alias("c")))
        out = np.zeros(k * HIST_BINS, dtype=np.int64)
        out[table.column("b").to_numpy().astype(np.int64)] = table.column("c").to_numpy().astype(np.int64)
        return out.reshape(k, HIST_BINS)
