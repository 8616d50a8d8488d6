"""``privagg budget``: create a privacy-budget ledger and show what was spent.

::

    privagg budget init PATH --epsilon E --delta D
    privagg budget show PATH [--json]

``--delta`` is required: every stable histogram, mean and k-means needs δ > 0, so a ledger made
with δ = 0 would refuse them all; ``--delta 0`` is accepted for a pure-ε ledger (Laplace
histograms with ``--domain`` only). Numbers are read exactly (``0.1`` is one tenth). User errors raise :class:`privagg.ParameterError`,
which the main command turns into one line on stderr and exit status 2.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import click

from .._validate import fail
from ..accounting import Ledger
from ..accounting._exact import show
from ._render import plain_console, visible

__all__ = ["budget"]


def _number(where: str, name: str, text: str, *, rule: str, zero_ok: bool,
            below_one: bool) -> Fraction:
    """Parse a command-line number exactly; the error shows the text given."""
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise fail(where, name, rule, text) from None
    if value < 0 or (value == 0 and not zero_ok) or (below_one and value >= 1):
        raise fail(where, name, rule, text)
    return value


@click.group(name="budget")
def budget() -> None:
    """Create and inspect privacy-budget ledgers (one per dataset)."""


@budget.command(name="init")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--epsilon", "epsilon", required=True, metavar="E", help="Total ε (> 0).")
@click.option("--delta", "delta", required=True, metavar="D",
              help="Total δ in [0, 1), e.g. 1e-5. Required: stable histograms, mean and k-means "
                   "need δ > 0; give --delta 0 for a pure-ε ledger (Laplace histograms only).")
def init(path: str, epsilon: str, delta: str) -> None:
    """Create a new ledger at PATH with total budget (ε, δ); never overwrites a file."""
    where = "privagg budget init"
    eps = _number(where, "epsilon", epsilon, rule="a finite number > 0", zero_ok=False,
                  below_one=False)
    dlt = _number(where, "delta", delta, rule="a number in [0, 1)", zero_ok=True, below_one=True)
    with Ledger.create(path, epsilon=eps, delta=dlt) as ledger:
        click.echo(f"Created ledger {visible(path)} with total budget {ledger.total}.")


@budget.command(name="show")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
def show_cmd(path: str, as_json: bool) -> None:
    """Show every charge recorded in the ledger at PATH and what remains."""
    with Ledger(path) as ledger:
        charges = ledger.charges()
        total, spent, remaining = ledger.total, ledger.spent(), ledger.remaining()
    if as_json:
        click.echo(json.dumps({
            "path": path, "total": total.to_dict(), "spent": spent.to_dict(),
            "remaining": remaining.to_dict(), "charges": [c.to_dict() for c in charges],
        }))
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(visible(f"Privacy budget ledger {path}")), title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("mechanism")
    table.add_column("parameters")
    with_where = any(c.context for c in charges)  # rows written by the command line
    if with_where:
        table.add_column("file · columns")
    table.add_column("ε", justify="right", no_wrap=True)
    table.add_column("δ", justify="right", no_wrap=True)
    for c in charges:
        params = ", ".join(f"{k}={v}" for k, v in c.parameters.items())
        where = [Text(visible(_where(c.context)))] if with_where else []
        table.add_row(str(c.id), c.time[:19].replace("T", " "), Text(visible(c.mechanism)),
                      Text(visible(params)), *where, show(c.loss.epsilon), show(c.loss.delta))
    table.add_section()
    for label, loss in (("spent", spent), ("remaining", remaining), ("total", total)):
        table.add_row("", "", label, "", *([""] if with_where else []), show(loss.epsilon),
                      show(loss.delta))
    plain_console(soft_wrap=False).print(table)


def _where(context: Any) -> str:
    """The file and column(s) a command recorded with its charge ("" for older rows)."""
    parts = [str(context["file"])] if "file" in context else []
    if "column" in context:
        parts.append(str(context["column"]))
    elif "columns" in context:
        parts.append(",".join(map(str, context["columns"])))
    return " · ".join(parts)
