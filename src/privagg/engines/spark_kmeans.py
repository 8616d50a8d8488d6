"""Spark engine for k-means (``pip install 'privagg[spark]'``): the numeric rows of a Spark
DataFrame as a :class:`~privagg.engines.base.KMeansSource` for the coreset strategy of
:func:`privagg.private_kmeans`.

The mechanism is :mod:`privagg.mechanisms.kmeans`'s, unchanged: the noisy count, the random
projection, shift and hash multipliers, the noisy binary search and report-noisy-max of the cell
side, k-means on the released cells, the clipping radii and the noise of the Lloyd steps all run
on the driver, in the local code. Spark counts and sums, exactly, with the local per-row
arithmetic (each task applies :mod:`privagg.mechanisms.kmeans`'s functions to its Arrow batches,
``mapInArrow``, and returns partial counts; Spark adds them with ``groupBy``), and draws the noise
of the two stable histograms (the coreset's cells and the anchor's bins) in the tasks:

* **Rows**: as for means (:func:`privagg.engines.spark_points.points_of`): the finite rows of the
  numeric ``columns``, persisted on the executors and counted before the ledger is charged.
* **Cell scores** (the side search, 10 jobs, and the pick, 1 job for its whole window): per task
  the hashed cell of each row (:func:`~privagg.mechanisms.kmeans.cell_hashes`) and its local
  counts; ``groupBy(level, hash)`` adds them, then per level ``Σ max(c − T, 0)`` and ``#{c >= T}``
  are computed in Spark: two integers per level reach the driver.
* **Cells** (the coreset): ``groupBy`` of the integer cell coordinates adds the tasks' counts; a
  second, non-deterministic ``mapInArrow`` stage adds ``DLap(1/ε_core)`` to each cell's count
  from the task's own stream and keeps the cells with ``>= T`` (the local law: independent noise
  per occupied cell, the same threshold); the result is collected once, so **only the kept cells
  and their noisy counts reach the driver** — never an exact count or an unreleased cell.
* **Anchor** (``d > D_CORE`` only): the same for the per-column bins (``groupBy(column, bin)``,
  discrete Gaussian noise and the anchor threshold in the tasks).
* **Lloyd steps**: per task the labels (nearest public center), the cluster sizes and the exact
  clipped integer sums (:func:`~privagg.mechanisms.kmeans.cluster_integer_sums`); Spark adds the
  sums per (cluster, column) as DECIMAL(38, 0): exact, never a wrapped long. k·(d + 1) integers
  reach the driver.

Task streams (:class:`~privagg.engines.spark.TaskRandomness`): fresh OS entropy per task; in
seeded mode (tests, simulation) the child ``(…, stage, partition)`` of the seed, one per noise
stage and partition, never one stream shared. So a seeded Spark release is reproducible and has
the local law, but is not the local release bit for bit: everything except these two noise
stages is (tested by replaying the Spark stages' outputs into the local code). A retried task
draws afresh; only the one collected result is ever seen. What the driver sees: n, the cell
scores, the kept cells with their noisy counts, the kept per-column bins with theirs, and the
per-cluster sizes and sums. Executors see their rows, the exact counts of the cells, and the
public projection, shifts, sides, centers and radii. Errors name only the schema and the Spark
configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import KMeansSource
from .spark import TaskRandomness
from .spark_points import SparkPoints, _long, _map, _rows

__all__ = ["SparkKMeansPoints"]


#: Spawn-key tags of the two noise stages: their task streams are children of the release's
#: task randomness that no other stage uses (:func:`_stage_randomness`).
_CELLS_STAGE = 1 << 20
_COLUMN_CELLS_STAGE = (1 << 20) + 1


def _stage_randomness(randomness: TaskRandomness, stage: int, call: int) -> TaskRandomness:
    """The task randomness of one noise stage: fresh OS entropy (secure), or in seeded mode the
    children ``(*spawn_key, stage, call, partition)`` of the seed (``call``: how many noise stages
    this source ran before), distinct from every other stage's (the subsample's are
    ``(*spawn_key, partition)``) and from every other partition's."""
    if randomness.secure:
        return randomness
    return TaskRandomness(randomness.entropy, (*randomness.spawn_key, int(stage), int(call)))


def _laplace_noise(scale: Any) -> Any:
    from fractions import Fraction

    s = Fraction(scale)

    def draw(size: int, gen: np.random.Generator) -> np.ndarray:
        from privagg.noise.samplers import discrete_laplace

        return discrete_laplace(s, size=size, rng=gen)

    return draw


def _gaussian_noise(variance: Any) -> Any:
    from fractions import Fraction

    v = Fraction(variance)

    def draw(size: int, gen: np.random.Generator) -> np.ndarray:
        from privagg.noise.samplers import discrete_gaussian

        return discrete_gaussian(v, size=size, rng=gen)

    return draw


def _noised(counts: Any, names: list[str], draw: Any, threshold: int, randomness: TaskRandomness) -> Any:
    """The noise stage of a stable histogram over the frame ``counts`` of (names…, exact count c):
    per task ``c + noise`` from the task's own stream, the rows with ``>= threshold`` kept
    (a non-deterministic ``mapInArrow``: lazy, evaluated once by the caller's collect). Seeded
    mode sorts each partition by the cell first, so the same seed gives the same release."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StructField, StructType

    if not randomness.secure:
        counts = counts.sortWithinPartitions(*names)
    schema = StructType([*[counts.schema[n] for n in names], StructField("c", LongType(), False)])

    def noise(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        gen = randomness.generator(TaskContext.get().partitionId())
        for batch in batches:
            c = batch.column(len(names)).to_numpy(zero_copy_only=False).astype(np.int64)
            noisy = c + draw(c.size, gen)
            mask = pa.array(noisy >= threshold)
            yield pa.RecordBatch.from_arrays([batch.column(i).filter(mask) for i in range(len(names))]
                                             + [_long(noisy[noisy >= threshold])], names=[*names, "c"])

    return _map(counts, noise, schema, nondeterministic=True)


def _sorted_cells(table: Any, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(cells (float64 (m, dc)), counts (int64)) of a collected cell table, in the local order."""
    z = np.empty((table.num_rows, len(names)), dtype=np.float64)
    for j, n in enumerate(names):
        z[:, j] = table.column(n).to_numpy()  # |z| < 2^52: exact as float64
    counts = table.column("c").to_numpy().astype(np.int64)
    order = np.lexsort(z.T[::-1])  # the local order
    return z[order], counts[order]


def _sorted_column_cells(table: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(column, bin, count) of a collected per-column bin table, sorted by (column, bin)."""
    col = table.column("j").to_numpy().astype(np.int64)
    vals = table.column("v").to_numpy().astype(np.float64)
    counts = table.column("c").to_numpy().astype(np.int64)
    order = np.lexsort((vals, col))
    return col[order], vals[order], counts[order]


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

    def _stage(self, tag: int) -> TaskRandomness:
        """The task streams of this source's next noise stage (never those of an earlier one)."""
        call = getattr(self, "_noise_calls", 0)
        self._noise_calls = call + 1
        return _stage_randomness(self.randomness, tag, call)

    def _cells(self, proj: np.ndarray | None, shift: np.ndarray, side: float) -> tuple[Any, list[str]]:
        """The lazy frame of (cell coordinates z0…, exact count c), one row per occupied cell."""
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
        return _map(self.frame, partial, schema).groupBy(*names).agg(F.sum("c").alias("c")), names

    def cell_counts(self, proj: np.ndarray | None, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
        cells, names = self._cells(proj, shift, side)
        return _sorted_cells(self._collect(cells), names)

    def noisy_cells(self, proj: np.ndarray | None, shift: np.ndarray, side: float, scale: Any,
                    threshold: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Noise and threshold in the tasks (``gen`` is not used: each task draws ``DLap(scale)``
        per cell from its own stream, :func:`_stage_randomness`); one evaluation, collected once;
        only the kept cells and their noisy counts reach the driver."""
        cells, names = self._cells(proj, shift, side)
        noisy = _noised(cells, names, _laplace_noise(scale), int(threshold),
                        self._stage(_CELLS_STAGE))
        return _sorted_cells(self._collect(noisy), names)

    def _column_cells(self, width: float, u: np.ndarray) -> Any:
        """The lazy frame of (column j, bin v, exact count c), one row per occupied bin."""
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
        return _map(self.frame, partial, schema).groupBy("j", "v").agg(F.sum("c").alias("c"))

    def column_cell_counts(self, width: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _sorted_column_cells(self._collect(self._column_cells(width, u)))

    def noisy_column_cells(self, width: float, u: np.ndarray, variance: Any, threshold: int,
                           gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`noisy_cells`, with discrete Gaussian noise of ``variance`` in the tasks."""
        noisy = _noised(self._column_cells(width, u), ["j", "v"], _gaussian_noise(variance), int(threshold),
                        self._stage(_COLUMN_CELLS_STAGE))
        return _sorted_column_cells(self._collect(noisy))

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
