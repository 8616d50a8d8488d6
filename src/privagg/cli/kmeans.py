"""``privagg kmeans FILE --columns A,B,... --k K --epsilon E --delta D``: private k-means centers.

Order of work: parameters (and the plot target) → the file's schema and the numeric columns
(DuckDB; with ``--engine spark``: Spark started, the Parquet schema, the rows counted) → the ledger → :func:`privagg.mechanisms.kmeans.private_kmeans` (which charges the
ledger before drawing noise) → output. Errors come only from public inputs (parameters, path,
schema), never from values.

``--plot`` (2-D only) draws the released centers alone: the points are private and are never
plotted, and no density of them is drawn.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import click

from .. import _validate
from ..accounting import Ledger
from . import _guard
from ._params import columns_option, csv_dialect, csv_options, number_option, radius_option
from ._plot2d import check_plot, plot_released
from ._render import dumps, visible
from . import _spark
from ._units import _max_rows, read_points, release_unit_fields, unit_fields, unit_lines, unit_options, with_unit

__all__ = ["kmeans"]

WHERE = "private_kmeans"


def _k(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise _validate.fail(WHERE, "k", "an integer in [1, 1000]", text) from None
    if not 1 <= value <= 1000:
        raise _validate.fail(WHERE, "k", "an integer in [1, 1000]", text)
    return value


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--columns", required=True, metavar="A,B,...", help="Numeric columns (exact names), comma-separated.")
@click.option("--k", "k_text", required=True, metavar="K", help="Number of centers (1 to 1000).")
@click.option("--epsilon", required=True, metavar="E", help="Privacy parameter ε > 0.")
@click.option("--delta", required=True, metavar="D", help="δ in (0, 1).")
@click.option("--radius", default=None, metavar="R", help="Tuple radius r (ℓ2); absent → chosen privately.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for machines).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), metavar="OUT.png",
              help="2-D only: plot the released centers (never the points).")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=Path), help="Charge this privacy ledger.")
@unit_options
@csv_dialect
@click.option("--engine", default="duckdb", show_default=True, metavar="duckdb|spark",
              help="Where the rows are read, counted and summed: DuckDB (embedded) or Spark (pip install "
                   "'privagg[spark]'; Parquet; with --radius the parts' k-means runs in Spark).")
@click.option("--spark-master", metavar="URL", help="Spark master with --engine spark [default: local[*]].")
@click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
def kmeans(
    file: Path,
    columns: str,
    k_text: str,
    epsilon: str,
    delta: str,
    radius: str | None,
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
    """Differentially private k-means centers of the COLUMNS of FILE (CSV with a header, or Parquet).

    Without --radius: a private grid coreset, k-means on it, then private Lloyd steps; with
    --radius: sample and aggregate (k-means++ on random parts, FriendlyCore agrees on the tuples
    of centers, then private Lloyd steps). ⊥ ("ok": false, with a reason) when too few rows. Rows with a missing or
    non-numeric value are dropped (data, not errors). Add/remove neighbours.
    """
    from ..mechanisms.kmeans import private_kmeans

    cols = columns_option(WHERE, columns)
    k = _k(k_text)
    eps = number_option(WHERE, "epsilon", epsilon)
    dlt = number_option(WHERE, "delta", delta, _validate.check_delta)
    r = radius_option(WHERE, radius)
    csv = csv_options(WHERE, delimiter, encoding, quote)
    if plot is not None:
        plot = check_plot(WHERE, plot, len(cols))
    conf = _spark.engine_conf(WHERE, engine, spark_master, spark_conf)
    if engine == "spark":
        k_rows = _max_rows(WHERE, privacy_unit, max_rows_per_unit)
        with ExitStack() as stack:
            release = _spark.spark_kmeans(stack, file, cols, ledger=ledger, master=spark_master, conf=conf,
                                          privacy_unit=privacy_unit, max_rows_per_unit=k_rows,
                                          k=k, epsilon=eps, delta=dlt, radius=r)
    else:
        points, rng, k_rows = read_points(WHERE, file, cols, privacy_unit, max_rows_per_unit, csv)
        with ExitStack() as stack:
            opened = None if ledger is None else stack.enter_context(Ledger(ledger))
            charged = _guard.charging(opened, command="kmeans", file=str(file), columns=cols,
                                      **({} if privacy_unit is None else unit_fields(privacy_unit, k_rows)))
            release = private_kmeans(points, k, epsilon=eps, delta=dlt, radius=r, rng=rng, ledger=charged)
    release = with_unit(release, privacy_unit, k_rows)
    centers = None if release.centers is None else [[float(v) for v in row] for row in release.centers]
    payload = {
        "ok": bool(release.ok),
        "centers": centers,
        "epsilon": float(release.epsilon),
        "delta": float(release.delta),
        "radius": None if release.radius is None else float(release.radius),
        "columns": cols,
        "k": k,
        "secure": bool(release.secure),
        "reason": release.reason,
        "strategy": release.strategy,
        "cell_side": None if release.cell_side is None else float(release.cell_side),
        "coreset_size": int(release.coreset_size),
        "n_hat": None if release.n_hat is None else int(release.n_hat),
        **release_unit_fields(release, k_rows),
    }
    if as_json:
        sys.stdout.write(dumps({**payload, **_guard.charge_fields()}, finite=True) + "\n")
    else:
        click.echo(f"private k-means of {visible(file.name)} · columns {visible(', '.join(cols))} · k = {k}")
        click.echo(f"guarantee   ε = {release.epsilon:.4g}, δ = {release.delta:.3g} (add/remove neighbours)"
                   + _unit_text(privacy_unit, k_rows))
        for line in unit_lines(release):
            click.echo(line)
        if release.strategy == "coreset":
            side = "—" if release.cell_side is None else f"{release.cell_side:.4g}"
            click.echo(f"strategy    coreset · cell side {side} (chosen privately) · "
                       f"{release.coreset_size} cells · n̂ = {release.n_hat}")
        else:
            click.echo(f"radius      {'—' if release.radius is None else f'{release.radius:.4g}'}"
                       f"{' (given)' if r is not None else ' (chosen privately)'}")
        if centers is None:
            click.echo(f"result      ⊥: {release.reason}; nothing more is released")
        else:
            click.echo("center  " + "  ".join(f"{visible(c):>12}" for c in cols))
            for i, row in enumerate(centers, 1):
                click.echo(f"{i:>6}  " + "  ".join(f"{v:>12.6g}" for v in row))
        line = _guard.charge_line()
        if line is not None:
            click.echo(line, err=True)
    if plot is not None:
        plot_released(WHERE, plot, points=centers or [], label="released centers", columns=cols,
                      title=f"private k-means of {file.name} (k = {k})")
        if not as_json:
            click.echo(f"wrote {visible(plot)}", err=True)


def _unit_text(unit: str | None, k: int) -> str:
    if unit is None:
        return ""
    rows = "one sampled row" if k == 1 else f"the average of up to {k} sampled rows"
    return f"; privacy unit {visible(unit)} (one vector per unit: {rows})"
