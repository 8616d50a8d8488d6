"""The rows of a column kept in Spark: :class:`SparkRows`, the
:class:`~privagg.mechanisms.grouped.KeptRows` of :func:`privagg.aggregate`'s ``mean(col)`` (no
bounds) and ``quantile(col, q)`` on a Spark DataFrame.

:func:`~privagg.mechanisms.grouped_mean.friendly_means` and
:func:`~privagg.mechanisms.grouped_quantile.quantiles` run on the driver, unchanged; they read the
rows only through the five methods below, each one Spark job over the persisted ``(i, v)`` rows
(``i`` the candidate group id, ``v`` the finite values of the column, persisted on the executors
before the ledger is charged). Each task applies the local per-row function of
:mod:`privagg.mechanisms.grouped_mean` or ``grouped_quantile`` to its Arrow batches (``mapInArrow``) and returns sparse
partial counts or exact partial sums; Spark adds them (``groupBy``; sums as DECIMAL(38, 0), never a
wrapped long). So what reaches the driver is, per call:

* ``octave_counts``: the spread floor's octave histogram, at most ``G·(FLOOR_OCTAVES + 2)`` counts;
* ``side_histogram``: the per-side histogram of the clipping range, ``2·G·nb`` counts;
* ``range_sums``: ``G`` exact integers (the clipped sums before noise);
* ``bin_counts`` (the quantile, :mod:`privagg.mechanisms.grouped_quantile`): the counts of each
  group's rows per candidate cell of its public grid (at most ``2^16 + 1`` cells per group),
  one job per stage (with bounds, per distinct grid size: at most 7); the noise and the
  report-noisy-max then run on the driver, as locally;
* ``subsample``: the locate subsample, **raw values on the driver**, as with the local engines —
  each row kept with the public probability ``min(1, m_locate/n̂_g)``, so about ``m_locate`` rows
  per large group (a public function of the plan), whatever the group's size; and every row of
  the groups of the small-group plan (public: those whose released ``n̂`` is below plan 0's
  radius selection, a few thousand rows each at most), which the mechanism reads whole.

The same integers as numpy for the same inputs (the per-row functions are the local ones and
integer addition does not depend on the split; tested). The subsample draws in the tasks, one
uniform per row from the task's own stream (:class:`~privagg.engines.spark.TaskRandomness`: fresh
OS entropy; seeded mode: the partition's child of a seed drawn from the release's generator, the
partition's rows put in a canonical order in the task first), marked non-deterministic and collected once: the local law,
not the local subsample bit for bit. The executors see their rows and the public per-group arrays
(rates, centers, scales, clipping ranges). These jobs run **after** the ledger is charged (the
mechanism's steps depend on its own releases), as for :func:`privagg.private_mean` on Spark: a
Spark failure then (a lost cluster) is reported by its error class and the charge stands.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..mechanisms.grouped import ColumnSums
from .spark import TaskRandomness, collect_or_fail
from .spark_points import _arrays, _long, _map, _pack, _records_per_batch, block_values

__all__ = ["SparkRows", "packed_rows"]

#: Low bits of the exact sums' two parts (:func:`_group_sums`).
_LOW_BITS = 15


def packed_rows(frame: Any) -> Any:
    """The lazy frame of ``frame``'s ``(i, v)`` rows (long group id, finite double) packed in
    binary blocks of consecutive rows (:func:`privagg.engines.spark_points._pack`, two float64
    per row: an id below 2^53 is exact), which a pass reads as buffers, not as Spark rows
    converted to Arrow (measured: a pass over 2·10^7 packed rows 1.0 s, over the rows 3.3 s)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    rows = frame.select(F.col("i").cast("double").alias("i"), F.col("v"))
    schema = StructType([StructField("x", BinaryType(), False), StructField("m", LongType(), False)])
    return _map(rows, _pack(2, block_values(2, _records_per_batch(frame))), schema)


def _group_rows(batches: Iterator[Any], remap: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(group ids, values) of each Arrow batch of packed ``(i, v)`` blocks; ``remap`` (candidate
    id → released id, −1: not released) applied and the dropped groups' rows removed."""
    for x in _arrays(batches, 2, None, packed=2):
        i = x[:, 0].astype(np.int64)
        v = np.ascontiguousarray(x[:, 1])
        if remap is not None:
            i = remap[i]
            kept = i >= 0
            i, v = i[kept], v[kept]
        if i.size:
            yield i, v


def _counts(bins: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The non-zero (bin, count) of ``bins`` (``bincount`` when the batch is large against the
    number of bins, else ``unique``: no sort of a large batch, no large array for a small one)."""
    if bins.size * 8 >= size and size <= 1 << 24:
        c = np.bincount(bins, minlength=size)
        j = np.flatnonzero(c)
        return j, c[j]
    return np.unique(bins, return_counts=True)


def _group_sums(terms: np.ndarray, g: np.ndarray, n_groups: int) -> np.ndarray:
    """Exact int64 ``Σ terms`` per group, unsorted rows: ``t = h·2^15 + l`` (``0 <= l < 2^15``, so
    ``|h| <= 2^15`` for ``|t| <= 2^30``), each part summed by ``bincount`` in float64, where
    every partial sum is an integer below ``2^15·len(t) < 2^53`` (fewer than 2^38 rows): exact in
    any order."""
    if not terms.size < 2**38:  # pragma: no cover - a batch of 2^38 rows
        raise AssertionError("_group_sums: batch too large for exact float64 part sums")
    low = np.bincount(g, weights=(terms & ((1 << _LOW_BITS) - 1)).astype(np.float64), minlength=n_groups)
    high = np.bincount(g, weights=(terms >> _LOW_BITS).astype(np.float64), minlength=n_groups)
    return high.astype(np.int64) * (1 << _LOW_BITS) + low.astype(np.int64)


class SparkRows:
    """The persisted finite ``(i, v)`` rows of one column of the candidate groups, packed
    (:func:`packed_rows`; module docstring). ``sums``: the column's present counts (and clamped
    sums for any bounded metric of the same column), computed by the engine before the charge."""

    def __init__(self, frame: Any, sums: ColumnSums, caller: str, remap: np.ndarray | None = None) -> None:
        self.frame, self.sums, self.caller, self.remap = frame, sums, caller, remap
        self.n_groups = int(sums.n_groups)
        self._fault: str | None = None  # tests: a folder; each subsample task then dies once

    def close(self) -> None:
        """Free the persisted rows (the caller's last read is done)."""
        try:
            self.frame.unpersist()
        except Exception:  # pragma: no cover - a stopped session: nothing to free
            pass

    # -- what the bounded metrics and the counts read ---------------------------------------
    def present_counts(self) -> np.ndarray:
        return self.sums.present_counts()

    def integer_sums(self, lower: float, upper: float) -> np.ndarray:
        return self.sums.integer_sums(lower, upper)

    def restrict(self, keep: np.ndarray) -> SparkRows:
        """The groups where ``keep`` (bool (G,)) holds, renumbered in the same order (driver only:
        the tasks apply the map)."""
        keep = np.asarray(keep, dtype=bool)
        new = np.where(keep, np.cumsum(keep) - 1, -1).astype(np.int64)
        remap = new if self.remap is None else np.where(self.remap >= 0, new[np.maximum(self.remap, 0)], -1)
        return SparkRows(self.frame, self.sums.restrict(keep), self.caller, remap)

    # -- jobs ------------------------------------------------------------------------------
    def _collect(self, frame: Any) -> Any:
        return collect_or_fail(frame, self.caller, "table")

    def _sparse_counts(self, flat: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
        """The non-zero counts of the flat bins in ``[0, size)`` that ``flat(g, v)`` returns for
        each batch (a bin below 0 drops the row), added over all rows: (bins ascending, counts).
        One job: per task sparse counts (:func:`_counts`), added by Spark."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        remap = self.remap

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            for g, v in _group_rows(batches, remap):
                with np.errstate(all="ignore"):
                    f = flat(g, v)
                f = f[f >= 0]
                if f.size:
                    j, c = _counts(f, size)
                    yield pa.RecordBatch.from_arrays([_long(j), _long(c)], names=["j", "c"])

        schema = StructType([StructField("j", LongType(), False), StructField("c", LongType(), False)])
        table = self._collect(_map(self.frame, partial, schema).groupBy("j").agg(F.sum("c").alias("c")))
        bins = table.column("j").to_numpy().astype(np.int64)
        order = np.argsort(bins, kind="stable")
        return bins[order], table.column("c").to_numpy().astype(np.int64)[order]

    def _bin_counts(self, flat: Any, size: int) -> np.ndarray:
        """:meth:`_sparse_counts` as a dense int64 (size,) array."""
        out = np.zeros(size, dtype=np.int64)
        bins, counts = self._sparse_counts(flat, size)
        out[bins] = counts
        return out

    def octave_counts(self, center: np.ndarray, upper: np.ndarray) -> np.ndarray:
        from ..mechanisms.grouped_mean import OCTAVE_WIDTH, octave_cumulative

        c, inv = np.array(center, dtype=np.float64), 1.0 / np.array(upper, dtype=np.float64)

        def bins(g: np.ndarray, v: np.ndarray) -> np.ndarray:
            from privagg.mechanisms.grouped_mean import octave_bins

            return octave_bins(v - np.take(c, g), np.take(inv, g), g)

        return octave_cumulative(self._bin_counts(bins, self.n_groups * OCTAVE_WIDTH), self.n_groups)

    def side_histogram(self, center: np.ndarray, upper: np.ndarray, top_level: int) -> np.ndarray:
        from ..mechanisms.grouped_mean import side_width

        c, inv, top = np.array(center, dtype=np.float64), 1.0 / np.array(upper, dtype=np.float64), int(top_level)

        def bins(g: np.ndarray, v: np.ndarray) -> np.ndarray:
            from privagg.mechanisms.grouped_mean import side_bins

            return side_bins(v - np.take(c, g), g, np.take(inv, g), top)

        return self._bin_counts(bins, 2 * self.n_groups * side_width(top))

    def range_sums(self, center: np.ndarray, shift: np.ndarray, r_lo: np.ndarray, r_hi: np.ndarray,
                   e_s: np.ndarray) -> np.ndarray:
        """Per task the exact int64 sums of the local terms (a task's rows are far fewer than the
        2³³ that could overflow them); Spark adds the tasks' sums as DECIMAL(38, 0)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        c, s = np.array(center, dtype=np.float64), np.array(shift, dtype=np.float64)
        lo, hi = np.array(r_lo, dtype=np.float64), np.array(r_hi, dtype=np.float64)
        es, remap, n_groups = np.array(e_s, dtype=np.int64), self.remap, self.n_groups

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            from privagg.engines.spark_rows import _group_sums
            from privagg.mechanisms.grouped_mean import range_terms

            total = np.zeros(n_groups, dtype=np.int64)
            for g, v in _group_rows(batches, remap):
                with np.errstate(all="ignore"):
                    dev = v - np.take(c, g)
                    dev -= np.take(s, g)
                    total += _group_sums(range_terms(dev, g, lo, hi, es), g, n_groups)
            j = np.flatnonzero(total)
            yield pa.RecordBatch.from_arrays([_long(j), _long(total[j])], names=["j", "s"])

        schema = StructType([StructField("j", LongType(), False), StructField("s", LongType(), False)])
        sums = _map(self.frame, partial, schema).groupBy("j").agg(
            F.sum(F.col("s").cast("decimal(38,0)")).alias("s"))
        table = self._collect(sums)
        out = np.zeros(n_groups, dtype=np.int64)
        for j, v in zip(table.column("j").to_pylist(), table.column("s").to_pylist(), strict=True):  # G at most
            out[j] = int(v)  # |Σ| < 2^63 for fewer than 2^33 rows per group (TERM_BITS)
        return out

    def bin_counts(self, groups: np.ndarray | None, bins: Any, width: int,
                   chunks: list[tuple[int, int]]) -> Iterator[np.ndarray]:
        """The quantile's counts (:func:`privagg.mechanisms.grouped_quantile.local_bin_counts`):
        one job for all chunks — per task the sparse counts of the flat ``j·width + bins(v, j)``
        (``j`` the row's position in ``groups``), added by Spark —, then each chunk's dense
        ``(c1 − c0, width)`` counts on the driver. At most ``min(rows, len(groups)·width)`` counts
        reach the driver (the candidate grids are public, at most 2^16 + 1 per group)."""
        n_stage = self.n_groups if groups is None else int(np.asarray(groups).size)
        pos = None
        if groups is not None:
            pos = np.full(self.n_groups, -1, dtype=np.int64)
            pos[np.asarray(groups, dtype=np.int64)] = np.arange(n_stage)
        w = int(width)

        def flat_bins(g: np.ndarray, v: np.ndarray) -> np.ndarray:
            if pos is None:
                return g * w + bins(v, g)
            j = np.take(pos, g)
            keep = j >= 0
            out = np.full(g.size, -1, dtype=np.int64)
            out[keep] = j[keep] * w + bins(v[keep], j[keep])
            return out

        flat, counts = self._sparse_counts(flat_bins, n_stage * w)
        for c0, c1 in chunks:
            a, b = np.searchsorted(flat, [c0 * w, c1 * w])
            dense = np.zeros((c1 - c0) * w, dtype=np.int64)
            dense[flat[a:b] - c0 * w] = counts[a:b]
            yield dense.reshape(c1 - c0, w)

    def subsample(self, rate: np.ndarray, draws: Any) -> tuple[np.ndarray, np.ndarray]:
        """One uniform per row from the task's stream; the kept ``(v, g)`` collected once."""
        import pyarrow as pa

        entropy = draws.entropy("subsample")
        randomness = TaskRandomness(entropy, ())
        q, remap, fault = np.array(rate, dtype=np.float64), self.remap, self._fault

        def partial(batches: Iterator[Any]) -> Iterator[Any]:
            from pyspark import TaskContext

            from privagg.engines.spark import fail_once

            context = TaskContext.get()
            fail_once(fault, context)
            gen = randomness.generator(context.partitionId())
            parts: Any = _group_rows(batches, remap)
            if not randomness.secure:  # seeded: the partition's rows in a canonical order first
                from privagg.mechanisms.grouped_mean import _ordered_bits

                got = list(parts)
                g = np.concatenate([p[0] for p in got]) if got else np.zeros(0, dtype=np.int64)
                v = np.concatenate([p[1] for p in got]) if got else np.zeros(0)
                order = np.lexsort((_ordered_bits(v), g))
                parts = [(g[order], v[order])]
            for g, v in parts:
                kept = gen.random(g.size) < np.take(q, g)
                yield pa.RecordBatch.from_arrays([_long(g[kept]), pa.array(v[kept])], names=["g", "v"])

        from pyspark.sql.types import DoubleType, LongType, StructField, StructType

        schema = StructType([StructField("g", LongType(), False), StructField("v", DoubleType(), False)])
        table = self._collect(_map(self.frame, partial, schema, nondeterministic=True))  # once
        g = table.column("g").to_numpy().astype(np.int64)
        v = table.column("v").to_numpy().astype(np.float64)
        order = np.argsort(g, kind="stable")
        return v[order], g[order]

