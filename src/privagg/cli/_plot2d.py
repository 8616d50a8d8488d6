"""2-D plots of released values for ``privagg mean`` and ``privagg kmeans``.

Only values the mechanism released are drawn (centers, the mean, the public clipping ball): the
points are private and are never plotted, and no density of them is drawn.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from .. import _validate

__all__ = ["check_plot", "plot_released"]

NOTE = "only released values are shown; the points are private and never plotted"


def check_plot(where: str, path: Path, d: int) -> None:
    """Refuse ``--plot`` before any data are read (public reasons only)."""
    if d != 2:
        raise _validate.fail(where, "plot", "used with exactly 2 columns", f"{d} columns")
    if importlib.util.find_spec("matplotlib") is None:
        raise _validate.fail(where, "plot", "usable: install matplotlib (pip install 'privagg[plot]')", str(path))
    if not path.resolve().parent.is_dir():
        raise _validate.fail(where, "plot", "a path in an existing folder", str(path))


def plot_released(
    where: str,
    path: Path,
    *,
    points: Sequence[Sequence[float]],
    label: str,
    columns: Sequence[str],
    title: str,
    ball: tuple[Sequence[float], float] | None = None,
    ball_label: str = "",
) -> None:
    """Released ``points`` as crosses, optionally a released ball ``(center, radius)`` dashed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle

    fig = Figure(figsize=(6, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if points:
        xs, ys = zip(*points)
        ax.scatter(xs, ys, marker="x", s=80, color="tab:red", label=label, zorder=3)
        if ball is not None:
            (cx, cy), radius = ball
            ax.add_patch(Circle((cx, cy), radius, fill=False, linestyle="--", color="tab:blue",
                                label=ball_label))
            ax.scatter([cx], [cy], marker="+", s=60, color="tab:blue", zorder=3)
            ax.set_xlim(min(min(xs), cx - radius) - 0.1 * radius, max(max(xs), cx + radius) + 0.1 * radius)
            ax.set_ylim(min(min(ys), cy - radius) - 0.1 * radius, max(max(ys), cy + radius) + 0.1 * radius)
            ax.set_aspect("equal")
        ax.legend(loc="lower right" if ball is not None else "best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "⊥ (nothing released)", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(columns[0])
    ax.set_ylabel(columns[1])
    ax.set_title(f"{title}\n({NOTE})", fontsize=9)
    try:
        fig.savefig(path)
    except OSError:
        raise _validate.fail(where, "plot", "a writable file path", str(path)) from None
