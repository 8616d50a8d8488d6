"""2-D plots of released values for ``privagg mean`` and ``privagg kmeans``.

Only values the mechanism released are drawn (centers, the mean, the public clipping ball): the
points are private and are never plotted, and no density of them is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .. import _validate
from ._output import literal_text, plot_target, save_figure
from ._render import visible

__all__ = ["check_plot", "plot_released"]

NOTE = "only released values are shown; the points are private and never plotted"


def check_plot(where: str, path: Path, d: int) -> Path:
    """Refuse ``--plot`` before any data are read (public reasons only); the file to write."""
    if d != 2:
        raise _validate.fail(where, "plot", "used with exactly 2 columns", f"{d} columns")
    return plot_target(where, "plot", path)


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
    """Released ``points`` as crosses, optionally a released ball ``(center, radius)`` dashed.

    Column names and the title are drawn as literal, escaped text. A failure to write the file
    (after the release was printed) is an :class:`~privagg.cli._output.OutputError`.
    """
    with literal_text():
        fig = _figure(points=points, label=label, columns=[visible(c) for c in columns],
                      title=visible(title), ball=ball, ball_label=ball_label)
    save_figure(fig, path)


def _figure(
    *,
    points: Sequence[Sequence[float]],
    label: str,
    columns: Sequence[str],
    title: str,
    ball: tuple[Sequence[float], float] | None,
    ball_label: str,
) -> object:
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
    return fig
