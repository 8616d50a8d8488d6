"""The contract between :func:`privagg.aggregate` and its per-group metrics.

``aggregate`` (``mechanisms/aggregate.py``) reads the table through an engine, bounds each privacy
unit's contribution, selects or fixes the released groups, and numbers them ``0 … G − 1`` in their
released order. Each metric is then a *vectorized* function of the rows of those groups — one
numpy pass over all groups, never a Python loop per group — that returns a :class:`MetricResult`:

- :mod:`privagg.mechanisms.grouped_bounded`: ``noisy_counts``, ``clamped_sums``, ``bounded_means``
  (and the shared releases ``shared_sums_means``, ``shared_count_means``);
- :mod:`privagg.mechanisms.grouped_mean`: ``friendly_means`` (no bounds: FriendlyCore per group);
- :mod:`privagg.mechanisms.grouped_quantile`: ``quantiles`` (with or without bounds).

Groups are disjoint, so one record (one unit with ``max_groups = 1``) is in one group: a metric
that is (ε, δ)-DP for each group's rows is (ε, δ)-DP for all groups together (parallel
composition). A unit in up to ``max_groups`` groups with up to ``max_rows`` rows in each is handled
by each metric itself (its sensitivity, or group privacy), from :class:`Contribution`; proofs in
``docs/proofs/aggregate*.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["ColumnSums", "Contribution", "GroupedValues", "KeptRows", "MetricResult"]


@dataclass(frozen=True)
class Contribution:
    """What one neighbour step can change (public).

    Attributes
    ----------
    max_groups : int
        ℓ0 ≥ 1: groups one privacy unit (or one record) has rows in, after bounding.
    max_rows : int
        ℓ∞ ≥ 1: rows one unit has in one group, after bounding (1 at record level).
    replace : bool
        ``neighbors="replace"``: one unit is replaced by another (a removal and an addition,
        so, for example, two groups may change); otherwise add/remove one unit.
    """

    max_groups: int = 1
    max_rows: int = 1
    replace: bool = False


@dataclass(frozen=True, eq=False)
class GroupedValues:
    """The bounded rows of one numeric column of the released groups.

    Attributes
    ----------
    group : np.ndarray
        int64 (n,), the group id in ``[0, n_groups)`` of each row, sorted ascending
        (``offsets`` delimit each group's rows).
    values : np.ndarray
        float64 (n,), finite (rows whose value is missing, non-numeric, NaN or ±inf are removed by
        the engine: a 1-stable, declared policy). They are a subset of the bounded rows that the
        engine's ``Candidates.rows`` counts (what ``count()`` counts): a group's rows with a
        missing value are ``rows_g − len(group g)``, which ``shared_count_means`` releases.
    n_groups : int
        G, the number of released groups (public: a domain, or the output of the selection).
    """

    group: np.ndarray
    values: np.ndarray
    n_groups: int

    @property
    def offsets(self) -> np.ndarray:
        """int64 (G + 1,): rows of group g are ``values[offsets[g]:offsets[g + 1]]``."""
        return np.searchsorted(self.group, np.arange(self.n_groups + 1, dtype=np.int64)).astype(np.int64)

    @property
    def sizes(self) -> np.ndarray:
        """int64 (G,): the number of rows of each group (private)."""
        return np.bincount(self.group, minlength=self.n_groups).astype(np.int64)

    def present_counts(self) -> np.ndarray:
        """int64 (G,): the column's present (finite) values per group (private)."""
        return np.diff(self.offsets)

    def integer_sums(self, lower: float, upper: float) -> np.ndarray:
        """Exact ``Σ clamped_terms(x, lower, upper)`` per group (object array of Python ints),
        :func:`privagg.mechanisms.grouped_bounded.clamped_terms` and ``group_integer_sums`` in
        numpy (private)."""
        from .grouped_bounded import clamped_terms, group_integer_sums

        return group_integer_sums(np.asarray(self.group), clamped_terms(self.values, lower, upper),
                                  int(self.n_groups))


@dataclass(frozen=True, eq=False)
class ColumnSums:
    """What the bounded metrics read of one column when the engine computed it where the rows live
    (Spark: no value reaches the driver): the same two methods as :class:`GroupedValues`.

    Attributes
    ----------
    present : np.ndarray
        int64 (G,): the column's present (finite) values per group.
    sums : dict
        ``(lower, upper)`` (floats) → object (G,): exact ``Σ clamped_terms(x, lower, upper)`` per
        group, for every pair of bounds the query's bounded metrics of this column use.
    n_groups : int
        G.
    """

    present: np.ndarray
    sums: dict[tuple[float, float], np.ndarray]
    n_groups: int

    def present_counts(self) -> np.ndarray:
        return self.present

    def integer_sums(self, lower: float, upper: float) -> np.ndarray:
        return self.sums[(float(lower), float(upper))]

    def restrict(self, keep: np.ndarray) -> ColumnSums:
        """The groups where ``keep`` (bool, (G,)) holds, in the same order."""
        return ColumnSums(present=self.present[keep], sums={b: s[keep] for b, s in self.sums.items()},
                          n_groups=int(np.count_nonzero(keep)))


class KeptRows(Protocol):
    """What :func:`~privagg.mechanisms.grouped_mean.friendly_means` (the unbounded mean) and
    :func:`~privagg.mechanisms.grouped_quantile.quantiles` read of a column's rows, for an engine
    that keeps them where they live (Spark: only these results reach the driver).
    :class:`GroupedValues` is read through the same computations in numpy
    (``grouped_mean._LocalRows``, ``grouped_quantile.local_bin_counts``). Every method but
    :meth:`subsample` returns sums over the rows of a per-row function of the row and of public
    per-group arrays (``octave_bins``, ``side_bins``, ``range_terms`` of
    :mod:`~privagg.mechanisms.grouped_mean`; ``dyadic_bins``, ``shared_bins`` of
    :mod:`~privagg.mechanisms.grouped_quantile`), so an engine computes them on any split of the
    rows and adds the parts: the same integers.

    Attributes
    ----------
    n_groups : int
        G.
    """

    n_groups: int

    def present_counts(self) -> np.ndarray:
        """int64 (G,): the column's present (finite) values per group (private)."""

    def subsample(self, rate: np.ndarray, draws: Any) -> tuple[np.ndarray, np.ndarray]:
        """Each row kept independently with probability ``rate[g]`` (public; ``rate = 1`` keeps
        every row of the group); returns the kept ``(values, group)`` sorted by group. ``draws``:
        ``uniform(name, groups)`` (numpy) or ``entropy(name)`` (the seed of the engine's task
        streams; None: fresh OS entropy)."""

    def octave_counts(self, center: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """int64 (G, FLOOR_OCTAVES + 1): the spread floor's octave counts of ``x − center[g]``
        relative to ``upper[g]`` (``grouped_mean._octave_counts``)."""

    def side_histogram(self, center: np.ndarray, upper: np.ndarray, top_level: int) -> np.ndarray:
        """int64 (2·G·nb,): the counts of ``grouped_mean.side_bins`` (``nb = side_width(top_level)``)."""

    def range_sums(self, center: np.ndarray, shift: np.ndarray, r_lo: np.ndarray, r_hi: np.ndarray,
                   e_s: np.ndarray) -> np.ndarray:
        """int64 (G,): the exact ``Σ range_terms`` of ``(x − center[g]) − shift[g]`` per group."""

    def bin_counts(self, groups: np.ndarray | None, bins: Any, width: int,
                   chunks: list[tuple[int, int]]) -> Any:
        """The quantile's reads (:func:`~privagg.mechanisms.grouped_quantile.local_bin_counts`):
        for each chunk ``(c0, c1)`` of positions in ``groups`` (all groups when None), the int64
        ``(c1 − c0, width)`` counts of ``bins(x, j)`` (``j`` the row's position) over their rows."""


@dataclass(frozen=True, eq=False)
class MetricResult:
    """One metric over G groups.

    Attributes
    ----------
    value : np.ndarray
        float64 (G,): the released value (NaN where the group's release is ⊥).
    low, high : np.ndarray
        float64 (G,): the interval the metric's docstring defines (NaN where ⊥).
    ok : np.ndarray
        bool (G,): False where the release is ⊥.
    reason : np.ndarray
        object (G,): None, or a sentence in public terms saying why the group is ⊥.
    epsilon, delta : float
        The guarantee of this metric over all groups (at most what it was given).
    extra : dict
        Further public per-group arrays (e.g. ``"n_hat"``), for the release.
    """

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    ok: np.ndarray
    reason: np.ndarray
    epsilon: float
    delta: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
