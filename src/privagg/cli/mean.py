"""``privagg mean FILE --columns A,B,... --epsilon E --delta D [--radius R]``: a private mean.

``--plot`` (2-D only) draws released values alone — the mean, and the center and radius of the
final clipping ball (both released by the mechanism); the points are private and never plotted,
and no density of them is drawn.

Order of work: parameters → the file's schema and the numeric columns (DuckDB) → the ledger →
:func:`privagg.mechanisms.mean.private_mean` (which charges the ledger before drawing noise) →
output. Errors come only from public inputs (parameters, path, schema), never from values.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from .. import _validate
from ..accounting import Ledger
from . import _guard
from ._params import columns_option, csv_dialect, csv_options, number_option, radius_option
from ._plot2d import check_plot, plot_released
from ._render import dumps, visible
from . import _spark
from ._units import _max_rows, read_points, release_unit_fields, unit_fields, unit_lines, unit_options, with_unit

__all__ = ["mean"]

WHERE = "private_mean"
#: Miss probability of the printed per-column intervals (noise only; docs/proofs/mean.md §8).
CI_BETA = 0.05


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--columns", required=True, metavar="A,B,...", help="Numeric columns (exact names), comma-separated.")
@click.option("--epsilon", required=True, metavar="E", help="Privacy parameter ε > 0.")
@click.option("--delta", required=True, metavar="D", help="δ in (0, 1).")
@click.option("--radius", default=None, metavar="R", help="Friendship radius r (ℓ2); absent → chosen privately.")
@click.option("--calibration", default="auto", show_default=True, metavar="auto|gaussian|laplace|zcdp",
              help="Noise calibration; auto: Laplace where its final-sum noise is clearly smaller "
                   "(small d, large epsilon), else Gaussian. The output says which ran.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for machines).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), metavar="OUT.png",
              help="2-D only: plot the released mean and clipping ball (never the points).")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=Path), help="Charge this privacy ledger.")
@unit_options
@csv_dialect
@click.option("--engine", default="duckdb", show_default=True, metavar="duckdb|spark",
              help="Where the rows are read, clipped and summed: DuckDB (embedded) or Spark (pip install "
                   "'privagg[spark]'; Parquet).")
@click.option("--spark-master", metavar="URL", help="Spark master with --engine spark [default: local[*]].")
@click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
def mean(
    file: Path,
    columns: str,
    epsilon: str,
    delta: str,
    radius: str | None,
    calibration: str,
    as_json: bool,
    plot: Path | None,
    ledger: Path | None,
    privacy_unit: str | None,
    max_rows_per_unit: str,
    delimiter: str,
    encoding: str,
    quote: str,
    engine: str,
    spark_master: str | None,
    spark_conf: tuple[str, ...],
) -> None:
    """A differentially private mean of the COLUMNS of FILE (CSV with a header row, or Parquet).

    FriendlyCore locates the data privately (no bounds needed), then a clipped noisy sum gives
    the mean; ⊥ ("ok": false) when too few points agree. Rows with a missing or non-numeric value
    are dropped (data, not errors). Add/remove neighbours.
    """
    from ..mechanisms.mean import CALIBRATIONS, private_mean

    cols = columns_option(WHERE, columns)
    eps = number_option(WHERE, "epsilon", epsilon)
    dlt = number_option(WHERE, "delta", delta, _validate.check_delta)
    r = radius_option(WHERE, radius)
    csv = csv_options(WHERE, delimiter, encoding, quote)
    _validate.check_choice(WHERE, "calibration", calibration, CALIBRATIONS)
    if plot is not None:
        plot = check_plot(WHERE, plot, len(cols))
    conf = _spark.engine_conf(WHERE, engine, spark_master, spark_conf)
    if engine == "spark":
        k_rows = _max_rows(WHERE, privacy_unit, max_rows_per_unit)
        with ExitStack() as stack:
            release = _spark.spark_mean(stack, file, cols, ledger=ledger, master=spark_master, conf=conf,
                                        privacy_unit=privacy_unit, max_rows_per_unit=k_rows,
                                        epsilon=eps, delta=dlt, radius=r, calibration=calibration)
        _show(file, cols, release, r, as_json, plot, privacy_unit, k_rows)
        return
    points, rng, k_rows = read_points(WHERE, file, cols, privacy_unit, max_rows_per_unit, csv)
    with ExitStack() as stack:
        opened = None if ledger is None else stack.enter_context(Ledger(ledger))
        charged = _guard.charging(opened, command="mean", file=str(file), columns=cols,
                                  **({} if privacy_unit is None else unit_fields(privacy_unit, k_rows)))
        release = private_mean(points, epsilon=eps, delta=dlt, radius=r, calibration=calibration,
                               rng=rng, ledger=charged)
    release = with_unit(release, privacy_unit, k_rows)
    _show(file, cols, release, r, as_json, plot, privacy_unit, k_rows)


def _show(file: Path, cols: list[str], release: Any, r: float | None, as_json: bool, plot: Path | None,
          privacy_unit: str | None, k_rows: int) -> None:
    intervals = release.confidence_intervals(CI_BETA)
    payload = {
        "ok": bool(release.ok),
        "mean": None if release.mean is None else [float(v) for v in release.mean],
        "epsilon": float(release.epsilon),
        "delta": float(release.delta),
        "radius": None if release.radius is None else float(release.radius),
        "columns": cols,
        "calibration": release.calibration,
        "secure": bool(release.secure),
        "reason": release.reason,
        **release_unit_fields(release, k_rows),
        "n_hat": None if release.n_hat is None else int(release.n_hat),
        "clip_radius": None if release.clip_radius is None else float(release.clip_radius),
        "center": None if release.center is None else [float(v) for v in release.center],
        "outside": None if release.outside is None else float(release.outside),
        "outside_sd": None if release.outside_sd is None else float(release.outside_sd),
        "clip_rule": release.clip_rule,
        "scales": None if getattr(release, "scales", None) is None else [float(v) for v in release.scales],
        "ci_beta": CI_BETA,
        "ci_low": None if intervals is None else [float(v) for v in intervals[0]],
        "ci_high": None if intervals is None else [float(v) for v in intervals[1]],
    }
    if as_json:
        sys.stdout.write(dumps({**payload, **_guard.charge_fields()}, finite=True) + "\n")
    else:
        _print_table(file, cols, release, given_radius=r is not None, unit=privacy_unit, k_rows=k_rows)
        line = _guard.charge_line()
        if line is not None:
            click.echo(line, err=True)
    if plot is not None:
        ball = None
        if (release.ok and release.center is not None and release.clip_radius is not None
                and getattr(release, "scales", None) is None):  # with scales the region is an ellipse
            ball = ([float(v) for v in release.center], float(release.clip_radius))
        plot_released(WHERE, plot, points=[payload["mean"]] if release.ok else [], label="released mean",
                      columns=cols, title=f"private mean of {file.name}", ball=ball,
                      ball_label="clipping ball of the final sum (released)")
        if not as_json:
            click.echo(f"wrote {visible(plot)}", err=True)


def _print_table(file: Path, cols: list[str], release: Any, *, given_radius: bool, unit: str | None = None,
                 k_rows: int = 1) -> None:
    click.echo(f"private mean of {visible(file.name)} · columns {visible(', '.join(cols))}")
    click.echo(f"guarantee   ε = {release.epsilon:.4g}, δ = {release.delta:.3g} (add/remove neighbours)"
               + _unit_text(unit, k_rows))
    for line in unit_lines(release):
        click.echo(line)
    click.echo(f"radius      {'not found (⊥)' if release.radius is None else f'{release.radius:.4g}'}"
               f"{' (given)' if given_radius else ' (chosen privately)'}")
    if not release.ok:
        click.echo(f"result      ⊥: {release.reason}; nothing more is released")
        return
    click.echo(f"noisy count n̂ = {release.n_hat}; final clip: radius {release.clip_radius:.4g} "
               f"({release.clip_rule} rule), about {release.outside:.0f} ± {release.outside_sd:.2g} "
               "rows outside (noisy)")
    if getattr(release, "scales", None) is not None:
        click.echo("column scales (released; radii are in these units): "
                   + ", ".join(f"{visible(c)} {v:.4g}" for c, v in zip(cols, release.scales)))
    low, high = release.confidence_intervals(CI_BETA)
    click.echo(f"  column: mean   [{1 - CI_BETA:.0%} interval: noise only, not the clipping bias]")
    for name, value, lo, hi in zip(cols, release.mean, low, high):
        click.echo(f"  {visible(name)}: {value:.6g}   [{lo:.6g}, {hi:.6g}]")


def _unit_text(unit: str | None, k: int) -> str:
    if unit is None:
        return ""
    rows = "one sampled row" if k == 1 else f"the average of up to {k} sampled rows"
    return f"; privacy unit {visible(unit)} (one vector per unit: {rows})"
