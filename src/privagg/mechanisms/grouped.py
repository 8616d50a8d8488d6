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
from typing import Any

import numpy as np

__all__ = ["Contribution", "GroupedValues", "MetricResult"]


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
