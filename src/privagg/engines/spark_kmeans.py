"""Spark engine for k-means (``pip install 'privagg[spark]'``): the numeric rows of a Spark
DataFrame as a :class:`~privagg.engines.base.KMeansSource` for the coreset strategy of
:func:`privagg.private_kmeans`.

The mechanism is :mod:`privagg.mechanisms.kmeans`'s, unchanged: the noisy count, the random
projection, shift and hash multipliers, the noisy binary search and report-noisy-max of the cell
side, the noise and threshold of the stable cell histogram, k-means on the released cells, the
anchor's noise and threshold, the clipping radii and the noise of the three Lloyd steps all run on
the driver, in the local code. Spark only counts and sums, exactly, with the local per-row
arithmetic (each task applies :mod:`privagg.mechanisms.kmeans`'s functions to its Arrow batches,
``mapInArrow``, and returns partial counts; Spark adds them with ``groupBy``):

* **Rows**: as for means (:func:`privagg.engines.spark_points.points_of`): the finite rows of the
  numeric ``columns``, persisted on the executors and counted before the ledger is charged.
* **Cell scores** (the side search, 10 jobs, and the pick, 1 job for its whole window): per task
  the hashed cell of each row (:func:`~privagg.mechanisms.kmeans.cell_hashes`) and its local
  counts; ``groupBy(level, hash)`` adds them, then per level ``Σ max(c − T, 0)`` and ``#{c >= T}``
  are computed in Spark: two integers per level reach the driver.
* **Cells** (the coreset): ``groupBy`` of the integer cell coordinates adds the tasks' counts;
  the occupied cells and their exact counts are collected to the driver, which draws the stable
  histogram's noise and threshold (as the local engines do) in the local order.
* **Anchor** (``d > D_CORE`` only): ``groupBy(column, bin)`` of the per-column bins, collected.
* **Lloyd steps**: per task the labels (nearest public center), the cluster sizes and the exact
  clipped integer sums (:func:`~privagg.mechanisms.kmeans.cluster_integer_sums`); Spark adds the
  sums per (cluster, column) as DECIMAL(38, 0): exact, never a wrapped long. k·(d + 1) integers
  reach the driver.

No step draws randomness in the tasks, so with the same seed the release is exactly the one of
the local code on the same rows (tested). What the driver sees: n, the cell scores, the occupied
grid cells with their exact counts (for the coreset and, projected, the per-column bins), and
the per-cluster sizes and sums. Executors see their rows and the public projection, shifts,
sides, centers and radii. Errors name only the schema and the Spark configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import KMeansSource
from .spark_points import SparkPoints, _map, _rows

__all__ = ["SparkKMeansPoints"]


def _long(values: np.ndarray) -> Any:
    import pyarrow as pa

    return pa.array(np.asarray(values, dtype=np.int64), type=pa.int64())


class SparkKMeansPoints(SparkPoints, KMeansSource):
    """The persisted finite rows of a Spark DataFrame, for the coreset strategy (module docstring)."""

    @classmethod
    def of(cls, source: SparkPoints) -> SparkKMeansPoints:
        return cls(source.frame, source.d, source.n, source.randomness, source.where, source.exponents)

    def cell_scores(self, proj: np.ndarray | None, shift: np.ndarray, sides: np.ndarray, mult: np.ndarray,
                    threshold: int) -> tuple[np.ndarray, np.ndarray]:
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegerType, LongType, StructField, StructType

        d, exps, t = self.d, self.exponents, int(threshold)
        p = None if proj is None else np.array(proj, dtype=np.float64)
        sh, ws, mu = np.array(shift, dtype=np.float64), [float(w) for w in sides], np.array(mult, dtype=np.uint64)

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.kmeans import _cell_coordinates, cell_hashes, coreset_space

            for batch in batches:
                with np.errstate(all="ignore"):
                    y = coreset_space(_rows(batch, d, exps), p)
                    for i, w in enumerate(ws):
                        h, c = np.unique(cell_hashes(*_cell_coordinates(y, sh, w), mu), return_counts=True)
                        yield pa.RecordBatch.from_arrays(
                            [pa.array(np.full(h.size, i, dtype=np.int32)), _long(h.view(np.int64)), _long(c)],
                            names=["l", "h", "c"])

        schema = StructType([StructField("l", IntegerType(), False), StructField("h", LongType(), False),
                             StructField("c", LongType(), False)])
        cells = _map(self.frame, partial, schema).groupBy("l", "h").agg(F.sum("c").alias("c"))
        per_level = cells.groupBy("l").agg(
            F.sum(F.greatest(F.col("c") - F.lit(t), F.lit(0))).alias("excess"),
            F.sum((F.col("c") >= F.lit(t)).cast("long")).alias("heavy"))
        table = self._collect(per_level)
        excess = np.zeros(len(ws), dtype=np.int64)
        heavy = np.zeros(len(ws), dtype=np.int64)
        levels = table.column("l").to_numpy()
        excess[levels] = table.column("excess").to_numpy()
        heavy[levels] = table.column("heavy").to_numpy()
        return excess, heavy

    def cell_counts(self, proj: np.ndarray | None, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        d, exps, w = self.d, self.exponents, float(side)
        p = None if proj is None else np.array(proj, dtype=np.float64)
        sh = np.array(shift, dtype=np.float64)
        dc = d if p is None else p.shape[1]
        names = [f"z{j}" for j in range(dc)]

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.kmeans import _cell_coordinates, coreset_space

            for batch in batches:
                with np.errstate(all="ignore"):
                    z, ok = _cell_coordinates(coreset_space(_rows(batch, d, exps), p), sh, w)
                cells, c = np.unique(z[ok].astype(np.int64), axis=0, return_counts=True)
                cells = cells.reshape(-1, dc)
                yield pa.RecordBatch.from_arrays([_long(cells[:, j]) for j in range(dc)] + [_long(c)],
                                                 names=[*names, "c"])

        schema = StructType([StructField(n, LongType(), False) for n in [*names, "c"]])
        table = self._collect(_map(self.frame, partial, schema).groupBy(*names).agg(F.sum("c").alias("c")))
        z = np.empty((table.num_rows, dc), dtype=np.float64)
        for j, n in enumerate(names):
            z[:, j] = table.column(n).to_numpy()  # |z| < 2^52: exact as float64
        counts = table.column("c").to_numpy().astype(np.int64)
        order = np.lexsort(z.T[::-1])  # the local order
        return z[order], counts[order]

    def column_cell_counts(self, width: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegerType, LongType, StructField, StructType

        d, exps, wd, uu = self.d, self.exponents, float(width), np.array(u, dtype=np.float64)

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.kmeans import column_bins

            for batch in batches:
                with np.errstate(all="ignore"):
                    z = column_bins(_rows(batch, d, exps), wd, uu).astype(np.int64)  # |z| <= 2^52
                for j in range(d):  # columns (public), not rows
                    v, c = np.unique(z[:, j], return_counts=True)
                    yield pa.RecordBatch.from_arrays([pa.array(np.full(v.size, j, dtype=np.int32)), _long(v),
                                                      _long(c)], names=["j", "v", "c"])

        schema = StructType([StructField("j", IntegerType(), False), StructField("v", LongType(), False),
                             StructField("c", LongType(), False)])
        table = self._collect(_map(self.frame, partial, schema).groupBy("j", "v").agg(F.sum("c").alias("c")))
        col = table.column("j").to_numpy().astype(np.int64)
        vals = table.column("v").to_numpy().astype(np.float64)
        counts = table.column("c").to_numpy().astype(np.int64)
        order = np.lexsort((vals, col))
        return col[order], vals[order], counts[order]

    def cluster_sums(self, proj: np.ndarray | None, label_centers: np.ndarray, refs: np.ndarray,
                     radii: np.ndarray, exponent: int) -> tuple[np.ndarray, np.ndarray]:
        """Per task the local :func:`~privagg.mechanisms.kmeans.cluster_sums`; Spark adds the
        partial sums per (cluster, column) as DECIMAL(38, 0), the sizes in column ``d``."""
        import pyarrow as pa
        from pyspark.sql import functions as F
        from pyspark.sql.types import DecimalType, IntegerType, StructField, StructType

        from ..mechanisms.mean import SUM_BITS

        if not int(exponent) >= -SUM_BITS:  # pragma: no cover - the mechanism's grid
            raise AssertionError("SparkKMeansPoints.cluster_sums: exponent below -SUM_BITS")
        d, exps, e = self.d, self.exponents, int(exponent)
        p = None if proj is None else np.array(proj, dtype=np.float64)
        lc, rf, rd = (np.array(a, dtype=np.float64) for a in (label_centers, refs, radii))
        k = rf.shape[0]

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from privagg.mechanisms.kmeans import cluster_sums

            total = np.zeros((k, d + 1), dtype=np.int64).astype(object)
            for batch in batches:
                with np.errstate(all="ignore"):
                    sizes, sums = cluster_sums(_rows(batch, d, exps), p, lc, rf, rd, e)
                total[:, :d] += sums
                total[:, d] += sizes.astype(object)
            c, j = np.nonzero(total != 0)
            yield pa.RecordBatch.from_arrays(
                [pa.array(c.astype(np.int32)), pa.array(j.astype(np.int32)),
                 pa.array([int(v) for v in total[c, j]], type=pa.decimal128(38, 0))], names=["c", "j", "s"])

        schema = StructType([StructField("c", IntegerType(), False), StructField("j", IntegerType(), False),
                             StructField("s", DecimalType(38, 0), False)])
        sums = _map(self.frame, partial, schema).groupBy("c", "j").agg(
            F.sum(F.col("s").cast("decimal(38,0)")).alias("s"))
        table = self._collect(sums)
        out = np.zeros((k, d + 1), dtype=np.int64).astype(object)
        for row in table.to_pylist():  # at most k·(d + 1) totals, not rows
            out[row["c"], row["j"]] = int(row["s"])
        return out[:, d].astype(np.int64), out[:, :d]
