"""The figure of an :class:`~privagg.AggregateRelease` (shared by ``AggregateRelease.plot`` and
``privagg aggregate --plot``): one bar chart per metric, the released value and its interval per
group, keys drawn escaped (:func:`privagg.cli._render.visible`), text drawn literally."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_PLOT_GROUPS", "INTERVAL_LABELS", "figure", "interval_kind"]

#: At most this many groups are drawn (the first ones, in the release's order).
MAX_PLOT_GROUPS = 40
#: How each kind of ``<name>_low`` / ``<name>_high`` is labelled (table header, plot axis).
INTERVAL_LABELS = {"noise95": "95% noise interval", "grid_cell": "grid cell"}


def interval_kind(release: Any, name: str) -> str:
    """``"noise95"`` or ``"grid_cell"`` for the metric ``name`` (a release without the
    ``intervals`` field: ``grid_cell`` for a quantile column ``q…``, else ``noise95``)."""
    kinds = getattr(release, "intervals", None) or {}
    if name in kinds:
        return str(kinds[name])
    return "grid_cell" if name.startswith("q") else "noise95"


def _key_texts(groups: Any, by: list[str], n: int) -> list[str]:
    from ..cli._render import visible

    cols = [groups[c].iloc[:n].tolist() for c in by]
    return [visible(", ".join(_text(v) for v in parts)) for parts in zip(*cols)]


def _text(value: Any) -> str:
    if isinstance(value, bytes):  # a binary key: undecodable bytes become surrogates, shown as \udcXX
        return value.decode("utf-8", errors="surrogateescape")
    return value if isinstance(value, str) else str(value)


def figure(release: Any) -> Any:
    """One bar chart per metric (rows), the released value and its interval (as labelled on the
    axis: the 95 % noise interval, or a quantile's grid cell) per group, for at most the first
    :data:`MAX_PLOT_GROUPS` groups in the release's order; keys drawn escaped, all text literal
    (no mathtext). Returns a matplotlib Figure on the Agg canvas (no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ..cli._output import literal_text
    from ..cli._render import visible

    by = list(release.by) if not isinstance(release.by, str) else [release.by]
    groups = release.groups
    names = list(release.metrics)
    n = min(MAX_PLOT_GROUPS, len(groups))
    with literal_text():
        fig = Figure(figsize=(max(6.0, 0.3 * n + 2), 2.8 * max(1, len(names)) + 0.6))
        FigureCanvasAgg(fig)
        labels = _key_texts(groups, by, n)
        x = np.arange(n)
        for i, name in enumerate(names):
            ax = fig.add_subplot(len(names), 1, i + 1)
            value = np.asarray(groups[name].iloc[:n], dtype=np.float64)
            low = np.asarray(groups[name + "_low"].iloc[:n], dtype=np.float64) if name + "_low" in groups else value
            high = np.asarray(groups[name + "_high"].iloc[:n], dtype=np.float64) if name + "_high" in groups else value
            shown = np.where(np.isfinite(value), value, 0.0)
            ax.bar(x, shown, color="#4878a8")
            err_lo = np.where(np.isfinite(low) & np.isfinite(value), np.maximum(value - low, 0), 0.0)
            err_hi = np.where(np.isfinite(high) & np.isfinite(value), np.maximum(high - value, 0), 0.0)
            ax.errorbar(x, shown, yerr=[err_lo, err_hi], fmt="none", ecolor="black", capsize=2, lw=0.8)
            label = INTERVAL_LABELS.get(interval_kind(release, name), "interval")
            ax.set_ylabel(visible(name) + f" ({label})", fontsize=8)
            ax.set_xticks(x, labels if i == len(names) - 1 else [""] * n, rotation=90, fontsize=7)
        fig.suptitle(visible(f"private aggregates by {', '.join(by)}"
                             + (f" (first {n} of {len(groups)} groups)" if len(groups) > n else "")), fontsize=9)
        fig.tight_layout()
    return fig
