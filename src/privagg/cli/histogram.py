"""``privagg histogram FILE --column COL --epsilon E ...``: a private histogram of one column.

Order of work, so that errors come early and only from public inputs: parameters and the
``--plot`` target (:func:`privagg.cli._output.plot_target`) → the data file's schema → the domain
file (cast to the column's type) → the ledger → the GROUP BY count in DuckDB → the mechanism
(which charges the ledger before drawing noise) → output: the release, the line
``charged ε=…, δ=…; left ε=…, δ=…`` (stderr; ``"charged"``/``"budget_left"`` in ``--json``),
then the plot. The ledger row records the command, the file path and the column. With
``--engine spark`` the same order, counted in Spark (:mod:`privagg.cli._spark`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import click

from .. import _validate
from ..accounting import Ledger
from ..engines import duckdb as duckdb_engine
from ..engines.base import Bounding, draw_secret
from ..engines.duckdb_bounding import DuckDBEngine
from ..noise.rng import secure_generator
from . import _guard, _spark
from ._output import literal_text, plot_target, save_figure
from ._params import csv_dialect, csv_options, number_option
from ._render import plain_console, print_json, print_table, visible

__all__ = ["histogram"]

NEIGHBORS = ("replace", "add_remove")
THRESHOLDS = ("tight", "seed", "randomized")
NOISES = ("laplace", "gaussian")
SELECTIONS = ("threshold", "optimal", "gaussian")
DEFAULT_BETA = 0.05


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--column", required=True, help="The key column (exact name).")
@click.option("--epsilon", required=True, metavar="E", help="Privacy parameter ε > 0.")
@click.option("--delta", metavar="D", help="δ in (0, 1); required without --domain.")
@click.option(
    "--domain",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Public key list, one per line → laplace_histogram (pure ε). Absent → stable_histogram.",
)
@click.option(
    "--neighbors", default=None, metavar="replace|add_remove",
    help="Neighbour relation [default: replace; add_remove with --privacy-unit].",
)
@click.option(
    "--privacy-unit", "privacy_unit", default=None, metavar="COL",
    help="Protect the unit of this column (a person: all its rows) instead of one row; contributions are bounded.",
)
@click.option(
    "--max-keys-per-unit", "max_keys_per_unit", default="1", show_default=True, metavar="L0",
    help="With --privacy-unit: keys one unit may contribute to (kept uniformly at random); 'auto': chosen "
         "privately (noisy 0.9 quantile of the keys per unit, 10% of ε).",
)
@click.option(
    "--max-rows-per-key", "max_rows_per_key", default="1", show_default=True, metavar="LINF",
    help="With --privacy-unit: rows one unit may contribute to one key (1: counts of distinct units).",
)
@click.option("--threshold", default=None, metavar="tight|seed|randomized",
              help="Threshold rule (stable only) [default: tight]. randomized: the tight T, and a noisy count of "
                   "T − 1 is kept with a probability that spends δ exactly (more keys).")
@click.option(
    "--selection", default=None, metavar="threshold|optimal|gaussian",
    help="How the stable histogram picks its keys [default: threshold]. optimal, gaussian: with --privacy-unit "
         "and an integer --max-keys-per-unit only (optimal: per-key partition selection on distinct units; "
         "gaussian: Gaussian thresholding of the distinct units per key; half of ε each, the counts get the "
         "other half; no threshold on the counts).",
)
@click.option(
    "--noise", default="laplace", show_default=True, metavar="laplace|gaussian",
    help="Noise of the counts. gaussian: with --privacy-unit and --delta only (discrete Gaussian, "
         "ℓ2 sensitivity √ℓ0·ℓ∞, ρ-zCDP converted to (ε, δ)-DP; smaller errors than Laplace for large ℓ0); "
         "without --domain also with an integer --max-keys-per-unit, --threshold tight and --selection "
         "threshold (Gaussian thresholding, δ split in halves).",
)
@click.option(
    "--beta", default=str(DEFAULT_BETA), show_default=True, metavar="B",
    help="Failure probability of the error bound and intervals.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for machines).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), metavar="OUT.png", help="Write a plot.")
@click.option("--ledger", type=click.Path(dir_okay=False, path_type=Path), help="Charge this privacy ledger.")
@click.option("--rows", default=30, show_default=True, type=click.IntRange(min=1), help="Table rows shown.")
@click.option("--engine", default="duckdb", show_default=True, metavar="duckdb|spark",
              help="Where the count runs: DuckDB (embedded) or Spark (pip install 'privagg[spark]'; Parquet).")
@click.option("--spark-master", metavar="URL", help="Spark master with --engine spark [default: local[*]].")
@click.option("--spark-conf", multiple=True, metavar="KEY=VALUE", help="A Spark setting (repeatable).")
@csv_dialect
def histogram(
    file: Path,
    column: str,
    epsilon: str,
    delta: str | None,
    domain: Path | None,
    neighbors: str | None,
    privacy_unit: str | None,
    max_keys_per_unit: str,
    max_rows_per_key: str,
    threshold: str | None,
    selection: str | None,
    noise: str,
    beta: str,
    as_json: bool,
    plot: Path | None,
    ledger: Path | None,
    rows: int,
    delimiter: str,
    encoding: str,
    quote: str,
    engine: str,
    spark_master: str | None,
    spark_conf: tuple[str, ...],
) -> None:
    """A differentially private histogram of COLUMN in FILE (CSV with a header row, or Parquet).

    With --domain: laplace_histogram over the public key list (ε-DP, every domain key released).
    Without: stable_histogram (ε, δ)-DP, which releases only keys whose noisy count reaches the
    threshold and never needs the domain. The count runs inside DuckDB (out of core), or, with
    --engine spark, in Spark (FILE: Parquet, local or a URI; noise and threshold in the tasks).
    With --privacy-unit COL: the guarantee protects a whole unit (all rows sharing COL), each
    unit keeping at most --max-keys-per-unit keys and --max-rows-per-key rows per key.
    With --privacy-unit and --delta, --noise gaussian draws discrete Gaussian noise
    ((ε, δ)-DP through zCDP) instead of discrete Laplace noise (without --domain: Gaussian
    thresholding). --selection optimal (with --privacy-unit, no --domain): each key is kept by
    the optimal partition selection on its number of distinct units instead of a threshold;
    --selection gaussian: by Gaussian thresholding of that number (better for --max-rows-per-key > 1).
    """
    from ..mechanisms import histogram as mech

    mechanism = "laplace_histogram" if domain is not None else "stable_histogram"
    eps = number_option(mechanism, "epsilon", epsilon)
    if neighbors is None:
        neighbors = "replace" if privacy_unit is None else "add_remove"
    _validate.check_choice(mechanism, "neighbors", neighbors, NEIGHBORS)
    bounds = _bounds(mechanism, privacy_unit, max_keys_per_unit, max_rows_per_key)
    if bounds is not None and domain is None and neighbors != "add_remove":
        rule = "add_remove with --privacy-unit and no --domain (the stable histogram adds or removes one unit)"
        raise _validate.fail(mechanism, "neighbors", rule, neighbors)
    b = number_option(mechanism, "beta", beta, _validate.check_beta)
    gaussian = _validate.check_choice(mechanism, "noise", noise, NOISES) == "gaussian"
    if gaussian and bounds is None:
        rule = "'laplace' without --privacy-unit (the Gaussian noise is user level)"
        raise _validate.fail(mechanism, "noise", rule, noise)
    split_selection = _check_selection(mechanism, selection, domain, bounds, threshold, gaussian, noise)
    if gaussian and domain is None and bounds[0] == "auto":  # type: ignore[index]
        rule = "'laplace' with --max-keys-per-unit auto and no --domain (give an integer ℓ0)"
        raise _validate.fail(mechanism, "noise", rule, noise)
    if gaussian and domain is None and threshold not in (None, "tight"):
        raise _validate.fail(mechanism, "threshold", "'tight' with --noise gaussian", threshold)
    dlt = None
    if domain is not None and gaussian:
        if delta is None:
            rule = "given with --noise gaussian (a number in the open interval (0, 1))"
            raise _validate.fail(mechanism, "delta", rule, None)
        dlt = number_option(mechanism, "delta", delta, _validate.check_delta)
        if threshold is not None:
            raise _validate.fail(mechanism, "threshold", "omitted with --domain (no threshold)", threshold)
        _check_gaussian(mech, mechanism, eps, neighbors, bounds, dlt)  # its calibration fails here, if at all
    elif domain is not None:
        if delta is not None:
            rule = "omitted with --domain (the release is pure ε-DP)"
            raise _validate.fail(mechanism, "delta", rule, delta)
        if threshold is not None:
            raise _validate.fail(mechanism, "threshold", "omitted with --domain (no threshold)", threshold)
    else:
        if delta is None:
            rule = "given with --delta when --domain is absent (a number in the open interval (0, 1))"
            raise _validate.fail(mechanism, "delta", rule, None)
        dlt = number_option(mechanism, "delta", delta, _validate.check_delta)
        threshold = _validate.check_choice(mechanism, "threshold", threshold or "tight", THRESHOLDS)
        if gaussian or split_selection is not None:  # the calibration (σ², the per-key table) fails here, if at all
            params = mech.StableHistogramParams.build(eps, dlt, neighbors, threshold, where=mechanism,
                                                      bounds=bounds, noise=noise)
            if split_selection is not None:
                mech._selection_budget(mechanism, params, split_selection)
    csv = csv_options("histogram", delimiter, encoding, quote)
    _validate.check_choice("histogram", "engine", engine, ("duckdb", "spark"))
    if engine != "spark" and (spark_master is not None or spark_conf):
        raise _validate.fail("histogram", "spark-master" if spark_master is not None else "spark-conf",
                             "given with --engine spark only", spark_master or spark_conf[0])
    if engine == "spark" and gaussian:
        raise _validate.fail(mechanism, "noise", "'laplace' with --engine spark (use --engine duckdb)", noise)
    if engine == "spark" and split_selection is not None:
        raise _validate.fail(mechanism, "selection", "'threshold' with --engine spark (use --engine duckdb)",
                             selection)
    conf = _spark.parse_conf("histogram", spark_conf)
    if plot is not None:
        plot = plot_target("histogram", "plot", plot)

    if engine == "spark":
        with ExitStack() as stack:
            release = _spark.spark_histogram(
                stack, file, column, mechanism=mechanism, epsilon=eps, delta=dlt,
                neighbors=neighbors, threshold=threshold, domain=domain, ledger=ledger, master=spark_master,
                conf=conf, privacy_unit=privacy_unit, bounds=bounds)
        _show(release, file=file, column=column, as_json=as_json, beta=b, rows=rows, plot=plot)
        return
    info = duckdb_engine.describe_column(file, column, where="histogram", csv=csv)
    unit_info = None
    if privacy_unit is not None:
        unit_info = duckdb_engine.describe_column(file, privacy_unit, where="histogram", csv=csv)
    domain_keys = None
    if domain is not None:
        domain_keys = duckdb_engine.load_domain(domain, info.duckdb_type, header=column, where=mechanism)
    with ExitStack() as stack:
        opened = None if ledger is None else stack.enter_context(Ledger(ledger))
        context = {} if privacy_unit is None else {"privacy_unit": privacy_unit}
        charged = _guard.charging(opened, command="histogram", file=str(file), column=column, **context)
        engine = DuckDBEngine(info, unit_info, where="histogram")
        user: dict = {}
        rng = None
        with _progress(enabled=not as_json and sys.stderr.isatty(), label=file.name) as callback:
            engine.progress = callback
            if bounds is not None and bounds[0] == "auto":  # ℓ0 chosen privately; charges once, in there
                release = mech.auto_l0_release(
                    engine, mechanism, epsilon=eps, max_rows_per_key=bounds[1], rng=None, ledger=charged,
                    unit=privacy_unit, neighbors=neighbors, delta=dlt, domain=domain_keys,
                    threshold=threshold or "tight", noise=noise)
            elif bounds is None:
                key_counts = engine.count_keys()
            else:  # the secret comes from the CSPRNG (the release's generator) and is never shown
                rng = secure_generator()
                bounding = Bounding(bounds[0], bounds[1], draw_secret(rng))
                key_counts = engine.bounded_counts(bounding, domain=domain_keys).key_counts
                user = {"max_keys_per_unit": bounds[0], "max_rows_per_key": bounds[1], "unit": privacy_unit}
                if split_selection is not None and bounds[1] != 1:  # v: distinct units per key, same secret
                    distinct = Bounding(bounds[0], 1, bounding.secret)
                    user["unit_counts"] = engine.bounded_counts(distinct).key_counts
                if split_selection is not None:
                    user["selection"] = split_selection
        # The mechanism charges the ledger (if any) before it draws noise.
        if bounds is not None and bounds[0] == "auto":
            pass
        elif domain is not None:
            release = mech.laplace_histogram_from_counts(
                key_counts, epsilon=eps, domain=domain_keys, neighbors=neighbors, rng=rng, ledger=charged,
                noise=noise, delta=dlt, **user
            )
        else:
            release = mech.stable_histogram_from_counts(
                key_counts, epsilon=eps, delta=dlt, neighbors=neighbors, threshold=threshold, rng=rng,
                ledger=charged, noise=noise, **user,
            )
    _show(release, file=file, column=column, as_json=as_json, beta=b, rows=rows, plot=plot)


def _show(release: object, *, file: Path, column: str, as_json: bool, beta: float, rows: int,
          plot: Path | None) -> None:
    """The release (JSON or table), the charge line, then the plot: the same for every engine."""
    b = beta
    if as_json:
        print_json(release, beta=b, extra=_guard.charge_fields())
    else:
        print_table(release, beta=b, rows=rows, title=f"{file.name} · column '{column}'")
        line = _guard.charge_line()
        if line is not None:
            click.echo(line, err=True)
    if plot is not None:
        with literal_text():
            figure = release.plot(None, beta=b)
            _escape_tick_labels(figure)
        save_figure(figure, plot, dpi=120)
        if not as_json:
            click.echo(f"wrote {visible(plot)}", err=True)


def _check_selection(where: str, selection: str | None, domain: Path | None,
                     bounds: tuple[int | str, int] | None, threshold: str | None, gaussian: bool,
                     noise: str) -> str | None:
    """--selection: "optimal" or "gaussian" (keys selected apart from the counts), or None for the
    threshold (refused where Python refuses it: exit 2, before any charge)."""
    if selection is None:
        return None
    if domain is not None:
        raise _validate.fail(where, "selection", "omitted with --domain (every domain key is released)", selection)
    if _validate.check_choice(where, "selection", selection, SELECTIONS) == "threshold":
        return None
    if bounds is None:
        rule = f"'threshold' without --privacy-unit (the {selection} selection is user level)"
        raise _validate.fail(where, "selection", rule, selection)
    if bounds[0] == "auto":
        raise _validate.fail(where, "selection", "'threshold' with --max-keys-per-unit auto", selection)
    if gaussian:
        raise _validate.fail(where, "noise", f"'laplace' with --selection {selection}", noise)
    if threshold is not None:
        raise _validate.fail(where, "threshold", f"omitted with --selection {selection} (no threshold)", threshold)
    return selection


def _check_gaussian(mech: object, where: str, eps: float, neighbors: str, bounds: tuple[int | str, int],
                    delta: float) -> None:
    """The Gaussian calibration at (ε, δ, ℓ0, ℓ∞) (with ℓ0 "auto": the ε left after choosing ℓ0,
    at the largest ℓ0), so that a σ² the exact sampler cannot take fails before the file is read."""
    l0, linf = bounds
    if l0 == "auto":
        eps = mech.auto_l0_split(eps, neighbors, where)[2]  # type: ignore[attr-defined]
        l0 = mech.AUTO_L0_MAX  # type: ignore[attr-defined]
    mech.LaplaceHistogramParams.build(eps, neighbors, 1, where=where, bounds=(l0, linf),  # type: ignore[attr-defined]
                                      noise="gaussian", delta=delta)


def _bounds(where: str, unit: str | None, l0: str, linf: str) -> tuple[int | str, int] | None:
    """(ℓ0, ℓ∞) with --privacy-unit (ℓ0 may be "auto"); without it both must stay 1."""
    if isinstance(l0, str) and l0.strip() == "auto":
        if unit is None:
            raise _validate.fail(where, "max_keys_per_unit", "left at 1 without --privacy-unit", "auto")
        return "auto", _bounds(where, unit, "1", linf)[1]  # type: ignore[index]
    values = []
    for name, text in (("max_keys_per_unit", l0), ("max_rows_per_key", linf)):
        try:
            value = int(text.strip())
        except (ValueError, AttributeError):
            rule = "an integer in [1, 1048576]" + (" or 'auto'" if name == "max_keys_per_unit" else "")
            raise _validate.fail(where, name, rule, text) from None
        values.append(_validate.check_positive_int(where, name, value, maximum=1 << 20))
    if unit is None:
        if values != [1, 1]:
            raise _validate.fail(where, "max_keys_per_unit" if values[0] != 1 else "max_rows_per_key",
                                 "left at 1 without --privacy-unit", values[0] if values[0] != 1 else values[1])
        return None
    return values[0], values[1]


def _escape_tick_labels(figure: object) -> None:
    """Keys on the plot's axis as :func:`visible` text (at most the plot's 40 bars)."""
    for ax in figure.axes:  # type: ignore[attr-defined]
        labels = ax.get_xticklabels()
        ax.set_xticks(ax.get_xticks(), [visible(t.get_text()) for t in labels])
    figure.tight_layout()  # type: ignore[attr-defined]


@contextmanager
def _progress(*, enabled: bool, label: str) -> Iterator[Callable[[float], None] | None]:
    """A transient rich progress bar on stderr fed by DuckDB's query progress (or nothing)."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns = (
        SpinnerColumn(),
        TextColumn("counting {task.description}", markup=False),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=plain_console(stderr=True), transient=True) as bar:
        task = bar.add_task(visible(label), total=100.0)
        yield lambda percent: bar.update(task, completed=percent)
