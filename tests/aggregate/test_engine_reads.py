"""Known answers of what ``aggregate`` asks the engine for, per column (public: a function of the
query): ``_sums_only`` (columns that only bounded sums and means read: present counts and clamped
integer sums, no value fetched) and ``_kept_rows`` (columns that unbounded means or quantiles read,
with the bounds of their bounded metrics: an engine may keep their rows, Spark)."""

from __future__ import annotations

import privagg
from privagg.mechanisms.aggregate import _kept_rows, _sums_only


def test_engine_reads_known_answers() -> None:
    mets = (privagg.count(), privagg.mean("x"), privagg.sum("x", (0.0, 9.0)), privagg.mean("x", (1.0, 2.0)),
            privagg.quantile("y", 0.5), privagg.mean("y"), privagg.sum("z", (-1.0, 1.0)),
            privagg.mean("z", (0.0, 3.0)), privagg.mean("w"), privagg.quantile("v", 0.9, (0.0, 1.0)),
            privagg.sum("v", (0.0, 1.0)))
    assert _sums_only(mets) == {"z": [(-1.0, 1.0), (0.0, 3.0)]}
    assert _kept_rows(mets) == {"v": [(0.0, 1.0)], "w": [], "x": [(0.0, 9.0), (1.0, 2.0)], "y": []}
    assert list(_kept_rows(mets)) == ["v", "w", "x", "y"]  # sorted: the engine's jobs in a public order
    assert _kept_rows((privagg.count(),)) == {} and _sums_only((privagg.count(),)) == {}
