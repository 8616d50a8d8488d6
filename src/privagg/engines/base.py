"""The engine interface: what a mechanism asks of the place where the data lives.

Mechanisms never branch on the engine: they call the methods of :class:`Engine`, implemented
for in-memory arrays (:class:`privagg.engines.numpy_engine.NumpyEngine`) and for CSV/Parquet
files read by DuckDB (:class:`privagg.engines.duckdb_bounding.DuckDBEngine`); a Spark engine
adds a third implementation of the same methods.

- :meth:`Engine.count_keys` — record level: the count of every present key (:class:`KeyCounts`).
- :meth:`Engine.bounded_counts` — user level: contribution bounding (each privacy unit keeps at
  most ℓ0 = ``max_keys_per_unit`` of its keys and at most ℓ∞ = ``max_rows_per_key`` rows per key),
  then the count of every key over the kept rows.
- :meth:`Engine.keys_per_unit` — user level: how many units hold 1, 2, …, cap distinct keys
  (input of the private choice of ℓ0, ``max_keys_per_unit="auto"``).
- :meth:`Engine.clamp_sum` — Σ clamp(value, lower, upper) over rows (building block of means).

Means read numeric rows through the smaller :class:`PointSource` seam (the finite rows of d
numeric columns): their count, a Poisson subsample collected to the driver, exact clipped
integer sums, a histogram of distances and the per-column scale counts; for the small-sample
coordinate plan also consecutive-pair counts, per-column counts below public edges, one column's
rows and the count outside a box. Implemented in memory
(:class:`privagg.mechanisms.mean.ArrayPoints`: arrays, and CSV/Parquet files read by DuckDB)
and in Spark (:class:`privagg.engines.spark_points.SparkPoints`); every calibration, threshold
and accounting step stays in :mod:`privagg.mechanisms.mean`.

k-means (the coreset strategy) reads the same rows through :class:`KMeansSource`, a
:class:`PointSource` with four more exact counts and sums over all rows: hashed grid-cell scores,
the occupied grid cells with their counts, per-column bin counts, and per-cluster sizes with exact
clipped integer sums (:class:`privagg.mechanisms.kmeans.ArrayKMeansPoints` in memory,
:class:`privagg.engines.spark_kmeans.SparkKMeansPoints` in Spark); every noise draw, threshold
and accounting step stays in :mod:`privagg.mechanisms.kmeans`.

Bounding rule (identical in every engine, docs/proofs/histograms.md §7). Each (unit, key) pair
present in the data gets the priority

    π(u, k) = hash(hash(s, hash(u), hash(k)))

where ``hash`` is DuckDB's 64-bit ``hash()`` (the numpy and DuckDB engines both evaluate it in
DuckDB, so they agree bit for bit; the Spark engine, which cannot compute DuckDB's hash, uses
``xxhash64(s, u, k)``: the same law — a uniformly random ℓ0-subset per unit, independent across
units — but other subsets for the same secret) and s is a 64-bit secret drawn from the release's generator (the CSPRNG unless a
seed is given) and never printed. A unit keeps its ℓ0 pairs of smallest priority; a kept pair
contributes min(rows, ℓ∞) to its key's count (rows of one (unit, key) pair are interchangeable
for a count, so which of them are kept does not matter). The kept set of a unit depends only on
its own rows and on s, so adding or removing a unit changes no other unit's kept rows (the
property the privacy proof needs; it holds for *any* s). The secret and the outer hash make the
choice among a unit's keys (pseudo-)uniformly random, which is what makes the bounding unbiased;
privacy does not depend on the hash's quality.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .counting import KeyCounts

__all__ = ["Bounding", "BoundedCounts", "Engine", "KMeansSource", "PointSource", "draw_secret", "PRIORITY_SQL"]

#: The priority of a (unit, key) pair, in DuckDB SQL ($secret is a UBIGINT parameter).
PRIORITY_SQL = "hash(hash($secret::UBIGINT, hash({unit}), hash({key})))"


def draw_secret(gen: np.random.Generator) -> int:
    """A fresh 64-bit secret for one release's bounding, from ``gen`` (the release's generator)."""
    return int(gen.integers(0, 1 << 64, dtype=np.uint64, endpoint=False))


@dataclass(frozen=True)
class Bounding:
    """Contribution bounds of one release (ℓ0, ℓ∞) and its secret (never shown).

    Attributes
    ----------
    max_keys_per_unit : int
        ℓ0 ≥ 1: keys a unit may contribute to.
    max_rows_per_key : int
        ℓ∞ ≥ 1: rows a unit may contribute to one key (1: counts are numbers of distinct units).
    secret : int
        In [0, 2^64): keys the random priorities. Excluded from ``repr``.
    """

    max_keys_per_unit: int
    max_rows_per_key: int
    secret: int = field(repr=False, default=0)

    @property
    def l1(self) -> int:
        """ℓ0·ℓ∞: the most one unit adds to the sum of all bounded counts."""
        return self.max_keys_per_unit * self.max_rows_per_key


@dataclass(frozen=True, eq=False)
class BoundedCounts:
    """The result of contribution bounding.

    Attributes
    ----------
    key_counts : KeyCounts
        The keys with at least one kept row and their bounded counts; ``n`` is the sum of all
        bounded counts, the ``other`` pseudo-key's included (private).
    other : int
        Bounded count of the ``other`` pseudo-key (rows whose key is missing or outside the
        domain), when it takes part in bounding (``keep_other=True``), else 0.
    """

    key_counts: KeyCounts
    other: int = 0


class Engine(ABC):
    """One data source (a key column, and a unit column when the release is at user level)."""

    #: Short name for messages and reports ("numpy", "duckdb").
    name: str = "engine"

    @abstractmethod
    def count_keys(self) -> KeyCounts:
        """Record level: the count of every present key; ``n`` = every record."""

    @abstractmethod
    def bounded_counts(
        self, bounding: Bounding, *, domain: Any = None, keep_other: bool = False
    ) -> BoundedCounts:
        """User level: bound each unit's contribution, then count the kept rows per key.

        Parameters
        ----------
        bounding : Bounding
        domain : array-like, optional
            A public domain (validated, canonical keys): keys outside it, and missing keys, are
            the ``other`` pseudo-key *before* bounding.
        keep_other : bool
            Whether the ``other`` pseudo-key takes part in bounding (it then uses one of the
            unit's ℓ0 keys and its bounded count is :attr:`BoundedCounts.other`); otherwise its
            rows are dropped before bounding.
        """

    @abstractmethod
    def keys_per_unit(self, cap: int) -> np.ndarray:
        """h[j] for j = 0..cap: the number of units with min(#distinct present keys, cap) = j."""

    @abstractmethod
    def clamp_sum(self, lower: float, upper: float) -> float:
        """Σ over rows of the key column's values clamped to [lower, upper] (numeric columns)."""


class PointSource(ABC):
    """The finite rows (n, d) of numeric data where they live, as :func:`privagg.private_mean`
    reads them. ``d`` is public; every result is private except where the mechanism releases a
    noisy function of it. Each method is a deterministic function of the rows (and of its public
    arguments), except :meth:`poisson_sample`; implementations must return the same integers for
    the same rows (the exact arithmetic is :mod:`privagg.mechanisms.mean`'s)."""

    #: Short name for messages ("numpy", "spark").
    name: str = "points"
    #: Number of columns (public).
    d: int

    @abstractmethod
    def count(self) -> int:
        """n: the number of finite rows (private)."""

    @abstractmethod
    def scale_counts(self, keys: np.ndarray) -> np.ndarray:
        """:func:`~privagg.mechanisms.mean.scale_counts` over the rows in the random order keyed
        by ``keys`` (:func:`~privagg.mechanisms.mean.row_keys`): int64 of shape (d, K)."""

    @abstractmethod
    def scaled(self, exponents: np.ndarray) -> PointSource:
        """The source of the rows ``x_j·2^(−exponents_j)`` (clamped into the float range)."""

    @abstractmethod
    def poisson_sample(self, rate: float, gen: np.random.Generator) -> np.ndarray:
        """Each row independently with probability ``rate`` (public), as a float64 (m, d) array
        on the driver. ``gen``: the release's generator (an engine may draw in its tasks instead,
        from streams of the same law)."""

    @abstractmethod
    def clipped_integer_sum(self, center: np.ndarray, radius: float, exponent: int) -> np.ndarray:
        """:func:`~privagg.mechanisms.mean._clipped_integer_sum` over all rows, exactly: an object
        array of d Python integers (never a wrapped machine integer)."""

    @abstractmethod
    def distance_bins(self, center: np.ndarray, edges: np.ndarray) -> np.ndarray:
        """:func:`~privagg.mechanisms.mean._distance_bins` over all rows: int64 of len(edges) + 1."""

    # the small-sample coordinate plan (privagg.mechanisms.mean_small, docs/proofs/mean.md §11)

    @abstractmethod
    def below_counts(self, edges: list[np.ndarray]) -> list[np.ndarray]:
        """Per column ``j``, ``#{rows : x_j < e}`` for each public edge ``e`` of ``edges[j]``
        (any order, may be empty): d int64 arrays of len(edges[j])."""

    @abstractmethod
    def column(self, j: int) -> PointSource:
        """The source of column ``j`` alone (d = 1) of the same rows."""

    @abstractmethod
    def outside_count(self, center: np.ndarray, radii: np.ndarray) -> int:
        """``#{rows : |x_j − c_j| > R_j for some j}`` (the box of ``radii`` around ``center``)."""


class KMeansSource(PointSource):
    """The finite rows (n, d) as the coreset strategy of :func:`privagg.private_kmeans` reads them.

    ``proj`` is None (the rows themselves) or a public (d, D_PROJ) matrix: the coreset space is
    then the rows ``y = x @ proj`` (:func:`~privagg.mechanisms.kmeans.coreset_space`). Every abstract
    method is a deterministic function of the rows and of its public arguments, draws no randomness, and
    returns exact integers; every implementation returns the same values for the same rows (the
    per-row arithmetic is :mod:`privagg.mechanisms.kmeans`'s). Only these totals reach the caller.

    The two stable histograms of the strategy, :meth:`noisy_cells` and :meth:`noisy_column_cells`,
    add their noise and threshold where the counts are: here (the default, from the caller's
    generator, in the local order) or, in Spark, in the tasks, so that only the kept cells and
    their noisy counts reach the caller (:mod:`privagg.engines.spark_kmeans`). Same law.
    """

    def noisy_cells(self, proj: np.ndarray | None, shift: np.ndarray, side: float, scale: Any,
                    threshold: int, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The stable histogram of the cells of :meth:`cell_counts`: every occupied cell's count
        plus ``DLap(scale)`` (independent), kept when ``>= threshold``. Returns the kept cells in
        lexicographic order (float64 (m, dc)) and their noisy counts (int64)."""
        from ..noise.samplers import discrete_laplace

        zs, counts = self.cell_counts(proj, shift, side)
        if zs.shape[0] == 0:
            return zs, counts
        noisy = counts + discrete_laplace(scale, size=counts.size, rng=gen)
        keep = noisy >= threshold
        return zs[keep], noisy[keep]

    def noisy_column_cells(self, width: float, u: np.ndarray, variance: Any, threshold: int,
                           gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Gaussian stable histogram of the per-column bins of :meth:`column_cell_counts`:
        every occupied bin's count plus a discrete Gaussian of ``variance``, kept when
        ``>= threshold``: ``(column, bin, noisy count)`` of the kept bins, sorted by (column, bin)."""
        from ..noise.samplers import discrete_gaussian

        col, vals, counts = self.column_cell_counts(width, u)
        noisy = counts + discrete_gaussian(variance, size=counts.size, rng=gen)
        keep = noisy >= threshold
        return col[keep], vals[keep], noisy[keep]

    @abstractmethod
    def cell_scores(self, proj: np.ndarray | None, shift: np.ndarray, sides: np.ndarray, mult: np.ndarray,
                    threshold: int) -> tuple[np.ndarray, np.ndarray]:
        """Per side: ``(Σ_cells max(count − T, 0), #cells with count >= T)`` of the hashed cells
        (:func:`~privagg.mechanisms.kmeans.cell_scores`), two int64 arrays of len(sides)."""

    @abstractmethod
    def cell_counts(self, proj: np.ndarray | None, shift: np.ndarray, side: float) -> tuple[np.ndarray, np.ndarray]:
        """The occupied cells ``floor(y/side − shift)`` in lexicographic order (float64 (m, dc))
        and their counts (int64): :func:`~privagg.mechanisms.kmeans.cell_counts`."""

    @abstractmethod
    def column_cell_counts(self, width: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per column ``j`` the occupied bins ``floor(x_j/width − u_j)`` (clamped), as ``(column,
        bin, count)`` sorted by (column, bin): :func:`~privagg.mechanisms.kmeans.column_cell_counts`."""

    @abstractmethod
    def cluster_sums(self, proj: np.ndarray | None, label_centers: np.ndarray, refs: np.ndarray,
                     radii: np.ndarray, exponent: int) -> tuple[np.ndarray, np.ndarray]:
        """Each row labelled by its nearest of ``label_centers`` in the coreset space of ``proj``:
        per-cluster sizes (int64 (k,)) and exact clipped integer sums (object (k, d) of Python
        integers): :func:`~privagg.mechanisms.kmeans.cluster_sums`."""
