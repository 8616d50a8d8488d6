"""The ``privagg`` command line: a thin layer over the Python API.

Exit codes: 0 success, 2 bad arguments or input (one line on stderr, no traceback), 3 budget
exceeded. Every user error is a :class:`privagg.ParameterError` (or another
:class:`privagg.PrivaggError`) raised by the same validation as the Python API, so the CLI and
the library word an error identically; click's own usage errors also exit with 2.

Subcommands live in one module each and are registered in :data:`COMMANDS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from .. import __version__
from ..errors import BudgetExceededError, PrivaggError
from .budget import budget
from .demo import demo
from .histogram import histogram
from .kmeans import kmeans
from .mean import mean

__all__ = ["cli", "main", "EXIT_USAGE", "EXIT_BUDGET"]

EXIT_USAGE = 2
EXIT_BUDGET = 3


def _print_error(exc: BaseException) -> None:
    message = " ".join(str(exc).split())  # always one line
    click.echo(f"privagg: error: {message}", err=True)


class PrivaggGroup(click.Group):
    """A click group that turns privagg's errors into one line on stderr and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BudgetExceededError as exc:
            _print_error(exc)
            ctx.exit(EXIT_BUDGET)
        except PrivaggError as exc:
            _print_error(exc)
            ctx.exit(EXIT_USAGE)


@click.group(cls=PrivaggGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="privagg")
def cli() -> None:
    """privagg — differentially private aggregation of CSV and Parquet files.

    Exit codes: 0 success, 2 bad arguments or input, 3 privacy budget exceeded.
    """


COMMANDS: tuple[click.Command, ...] = (demo, histogram, mean, kmeans, budget)
for _command in COMMANDS:
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``privagg`` and ``python -m privagg`` (exits the process)."""
    cli.main(args=None if argv is None else list(argv), prog_name="privagg")
