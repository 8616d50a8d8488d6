"""Known answers of what ``aggregate`` asks the engine for, per column (public: a function of the
query): ``_sums_only`` (columns that only bounded sums and means read: present counts and clamped
integer sums, no value fetched) and ``_mean_rows`` (columns that unbounded means read and no
quantile does: an engine may keep their rows, Spark). A quantile's column is in neither (its values
are fetched)."""

from __future__ import annotations

import privagg
from privagg.mechanisms.aggregate import _mean_rows, _sums_only


def test_engine_reads_known_answers() -> None:
    mets = (privagg.count(), privagg.mean("x"), privagg.sum("x", (0.0, 9.0)), privagg.mean("x", (1.0, 2.0)),
            privagg.quantile("y", 0.5), privagg.mean("y"), privagg.sum("z", (-1.0, 1.0)),
            privagg.mean("z", (0.0, 3.0)), privagg.mean("w"), privagg.quantile("v", 0.9, (0.0, 1.0)),
            privagg.sum("v", (0.0, 1.0)))
    assert _sums_only(mets) == {"z": [(-1.0, 1.0), (0.0, 3.0)]}
    assert _mean_rows(mets) == {"w": [], "x": [(0.0, 9.0), (1.0, 2.0)]}
    assert list(_mean_rows(mets)) == ["w", "x"]  # sorted: the engine's jobs in a public order
    assert _mean_rows((privagg.count(),)) == {} and _sums_only((privagg.count(),)) == {}
