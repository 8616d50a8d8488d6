"""``privagg demo``: both histogram mechanisms side by side on synthetic diagnosis codes.

The data (:mod:`privagg.demo_data`) is generated from a fixed numpy seed; the noise comes from the
secure generator, as in every real release. Because the data is synthetic, the demo may show the
true counts next to the released ones — something a real release must never do.

``--out`` is checked before anything is computed (:func:`privagg.cli._output.plot_target`; no
suffix → ``.png``); without matplotlib the demo runs and says that no plot was written. All text
is printed without rich markup (the hint ``pip install 'privagg[plot]'`` keeps its ``[plot]``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import click
import numpy as np

from .. import _validate, demo_data
from ._output import OutputError, literal_text, plot_target, save_figure
from ._render import format_float, plain_console, summary_rows, visible

if TYPE_CHECKING:
    from ..mechanisms.histogram import HistogramRelease

__all__ = ["demo"]

EPSILON = 1.0
DELTA = 1e-6
BETA = 0.05
RECORDS = 100_000
#: Ranks of the codes shown in the table: the head, then samples of the long tail.
SHOWN_RANKS = (1, 2, 3, 4, 5, 10, 20, 50, 100, 200, 300, 400, 500, 700, 1000, 2000)


@click.command()
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("privagg-demo.png"),
    show_default=True,
    help="Where to write the side-by-side plot (needs matplotlib: pip install 'privagg[plot]'); "
         "no suffix → .png.",
)
def demo(out: Path) -> None:
    """Private histograms of 100,000 synthetic diagnosis codes: laplace vs stable, side by side."""
    from rich.table import Table
    from rich.text import Text

    from ..mechanisms.histogram import laplace_histogram, stable_histogram

    try:
        target: Path | None = plot_target("demo", "out", out)
    except _validate.ParameterError:
        if importlib.util.find_spec("matplotlib") is not None:
            raise
        target = None  # no matplotlib: the demo still runs, without a plot
    console = plain_console()
    codes, records = demo_data.diagnosis_records(RECORDS)
    laplace = laplace_histogram(records, epsilon=EPSILON, domain=codes)
    stable = stable_histogram(records, epsilon=EPSILON, delta=DELTA)
    truth = _true_frequencies(codes, records)
    ranks = np.argsort(-truth, kind="stable")  # code indices by true frequency (for display only)
    lap_f = _on_codes(codes, laplace)
    st_f = _on_codes(codes, stable)

    console.print(
        Text("privagg demo", style="bold"),
        f"— {RECORDS:,} synthetic records of ICD-10-like diagnosis codes "
        f"(Zipf long tail; data from numpy seed {demo_data.DEMO_SEED}, noise from the secure generator).\n"
        f"Public code list: {codes.size:,} codes; {int(np.count_nonzero(truth)):,} occur in the data.\n"
    )

    side = Table(title="Two mechanisms, one budget each", show_lines=False)
    side.add_column("")
    side.add_column("laplace_histogram\n(public code list, --domain)")
    side.add_column("stable_histogram\n(no domain needed)")
    for label, a, b in _side_by_side(summary_rows(laplace, beta=BETA), summary_rows(stable, beta=BETA)):
        if label != "mechanism":
            side.add_row(label, a, b)
    side.add_row(
        "largest actual error (demo only)",
        format_float(float(np.max(np.abs(lap_f - truth)))),
        format_float(float(np.max(np.abs(st_f - truth)))),
    )
    console.print(side)

    keys = Table(title="Frequencies by true rank (true values shown because the data is synthetic)")
    for name in ("rank", "code", "true count", "laplace count", "stable count"):
        keys.add_column(name, justify="left" if name == "code" else "right")
    lap_counts = dict(zip(laplace.keys.tolist(), laplace.counts.tolist()))
    st_counts = dict(zip(stable.keys.tolist(), stable.counts.tolist()))
    for rank in SHOWN_RANKS:
        code = str(codes[ranks[rank - 1]])
        true = int(round(truth[ranks[rank - 1]] * RECORDS))
        released = st_counts.get(code)
        keys.add_row(
            str(rank),
            code,
            f"{true:,}",
            f"{lap_counts[code]:,}",
            "suppressed" if released is None else f"{released:,}",
        )
    console.print(keys)
    console.print(
        "Laplace releases every public code (rare ones are mostly noise, some negative); the stable "
        f"histogram releases only codes whose noisy count reaches T = {stable.threshold} and would "
        "work just as well with 10^12 possible codes.\n"
    )

    if target is None:
        console.print("matplotlib is not installed: no plot (pip install 'privagg[plot]').")
    else:
        try:
            _plot(target, codes, truth, ranks, laplace, stable, lap_f, st_f)
        except OutputError:
            console.print("(the plot could not be written: see the last line)")
            raise
        console.print(Text("Wrote the side-by-side plot to "),
                      Text(visible(target.resolve()), style="bold"), Text("."), sep="")
    console.print(
        "On your own data: privagg histogram FILE --column COL --epsilon 1 --delta 1e-6  "
        "(or --domain KEYS.txt instead of --delta; add --json, --plot OUT.png, --ledger BUDGET.db)."
    )



def _side_by_side(left: list[tuple[str, str]], right: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Rows of two summaries matched by label (each keeps its order; a label one of them lacks,
    e.g. the stable histogram's "selection", shows "—" on the other side)."""
    order: list[str] = []
    for rows in (right, left):
        for i, (label, _) in enumerate(rows):
            if label not in order:  # after the label that precedes it in its own summary
                at = order.index(rows[i - 1][0]) + 1 if i and rows[i - 1][0] in order else len(order)
                order.insert(at, label)
    a, b = dict(left), dict(right)
    return [(label, a.get(label, "—"), b.get(label, "—")) for label in order]


def _true_frequencies(codes: np.ndarray, records: np.ndarray) -> np.ndarray:
    """True frequency of each code (codes are sorted) — demo only."""
    return np.bincount(np.searchsorted(codes, records), minlength=codes.size) / records.size


def _on_codes(codes: np.ndarray, release: HistogramRelease) -> np.ndarray:
    """Released frequency of every code, 0 for codes the release does not list."""
    out = np.zeros(codes.size)
    out[np.searchsorted(codes, release.keys)] = release.frequencies
    return out


def _plot(
    out: Path,
    codes: np.ndarray,
    truth: np.ndarray,
    ranks: np.ndarray,
    laplace: HistogramRelease,
    stable: HistogramRelease,
    lap_f: np.ndarray,
    st_f: np.ndarray,
) -> None:
    """Write a two-panel log–log rank plot (OutputError when the file cannot be written)."""
    with literal_text():
        fig = _figure(codes, truth, ranks, laplace, stable, lap_f, st_f)
    save_figure(fig, out, dpi=110)


def _figure(
    codes: np.ndarray,
    truth: np.ndarray,
    ranks: np.ndarray,
    laplace: HistogramRelease,
    stable: HistogramRelease,
    lap_f: np.ndarray,
    st_f: np.ndarray,
) -> object:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rank = np.arange(1, codes.size + 1)
    fig = Figure(figsize=(12.0, 4.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    floor = 0.5 / RECORDS
    for ax, release, released, color in ((axes[0], laplace, lap_f, "#4878a8"), (axes[1], stable, st_f, "#d07020")):
        bound = release.error_bound(BETA)
        true_sorted = truth[ranks]
        ax.fill_between(
            rank, np.maximum(true_sorted - bound, floor), true_sorted + bound, color="0.85",
            label=f"true ± error bound ({1 - BETA:.0%}, all keys at once)",
        )
        ax.plot(rank, np.maximum(true_sorted, floor), color="black", lw=1, label="true frequency")
        shown = released[ranks] > 0
        ax.scatter(rank[shown], released[ranks][shown], s=4, color=color, label="released frequency (> 0)")
        if release.threshold is not None:
            ax.axhline(release.threshold / RECORDS, color="#c03030", ls="--", lw=1,
                       label=f"threshold T = {release.threshold} records")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(floor, 0.1)
        ax.set_xlabel("code rank by true frequency")
        label = "public code list" if release.mechanism == "laplace_histogram" else "no domain"
        ax.set_title(
            f"{release.mechanism} ({label}): ε = {release.epsilon:g}"
            + (f", δ = {release.delta:g}" if release.delta else "")
            + f"\n{len(release.keys):,} keys released, error bound {format_float(bound)}"
        )
        ax.legend(loc="lower left", fontsize=8)
    axes[0].set_ylabel("frequency")
    fig.suptitle(f"privagg demo: {RECORDS:,} synthetic diagnosis codes (secure noise)")
    fig.tight_layout()
    return fig
