"""The ``privagg`` command line: a thin layer over the Python API.

Exit codes: 0 success; 2 bad arguments or input (one line on stderr, no traceback; nothing was
charged or released); 3 budget exceeded (nothing was released); 4 the release was printed (and
charged, with ``--ledger``) but an output file (``--plot``) could not be written; 130
interrupted (Ctrl-C; see :mod:`privagg.cli._guard` for what is charged then); 1 an internal
error (a bug: one line naming the exception type; ``PRIVAGG_DEBUG=1`` shows the traceback).
Every user error is a :class:`privagg.ParameterError` (or another :class:`privagg.PrivaggError`)
raised by the same validation as the Python API, so the CLI and the library word an error
identically; click's own usage errors also exit with 2, on one line. Every line on stderr is
plain text with control characters escaped (:func:`privagg.cli._render.visible`).

Subcommands live in one module each and are registered in :data:`COMMANDS`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from .. import __version__
from ..errors import BudgetExceededError, PrivaggError
from . import _guard
from ._output import OutputError
from ._render import visible
from .aggregate import aggregate
from .budget import budget
from .demo import demo
from .histogram import histogram
from .kmeans import kmeans
from .mean import mean

__all__ = ["cli", "main", "EXIT_USAGE", "EXIT_BUDGET", "EXIT_OUTPUT", "EXIT_INTERRUPTED",
           "EXIT_INTERNAL"]

EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_BUDGET = 3
EXIT_OUTPUT = 4
EXIT_INTERRUPTED = 130


def _line(text: str) -> None:
    """One plain line on stderr (whitespace collapsed, control characters escaped)."""
    click.echo(visible(" ".join(text.split()), backslash=False), err=True)


def _print_error(exc: BaseException) -> None:
    _line(f"privagg: error: {exc}")


def _interrupted() -> int:
    state = _guard.current()
    if state is not None and state.charging:
        _line("privagg: interrupted during the ledger charge (recorded once or not at all: see "
              "'privagg budget show'); the release was not shown")
    elif state is None or not state.charges:
        _line("privagg: interrupted; nothing was charged")
    elif state.output_done:
        _line("privagg: interrupted (the release above was charged and printed)")
    else:
        _line("privagg: interrupted after the ledger was charged; the release was not shown")
    return EXIT_INTERRUPTED


def _stdout_closed() -> None:
    """stdout went away (``| head``): make the final flush at exit quiet."""
    try:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until the process exits
    except OSError:
        pass


class PrivaggGroup(click.Group):
    """A click group that turns every outcome into one line on stderr and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        state = _guard.current()
        try:
            rv = super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException):
            if state is not None and state.interrupted:
                ctx.exit(_interrupted())
            raise
        except (KeyboardInterrupt, EOFError, click.Abort):
            ctx.exit(_interrupted())
        except BaseException as exc:
            if state is not None and state.interrupted:  # e.g. DuckDB's "Query interrupted"
                ctx.exit(_interrupted())
            if isinstance(exc, BudgetExceededError):
                _print_error(exc)
                ctx.exit(EXIT_BUDGET)
            if isinstance(exc, PrivaggError):
                _print_error(exc)
                ctx.exit(EXIT_USAGE)
            if isinstance(exc, OutputError):
                _print_error(f"{exc}; the release above was printed"
                             + (" and charged" if state is not None and state.charges else ""))
                ctx.exit(EXIT_OUTPUT)
            if isinstance(exc, BrokenPipeError):
                _stdout_closed()
                _print_error("stdout was closed before the output was written"
                             + ("; the ledger was charged" if state is not None and state.charges else ""))
                ctx.exit(EXIT_OUTPUT)
            if isinstance(exc, Exception) and not os.environ.get("PRIVAGG_DEBUG"):
                # Never a traceback, and never the message (it could quote a value): the type only.
                _line(f"privagg: internal error ({type(exc).__name__}); please report it "
                      "(PRIVAGG_DEBUG=1 shows the traceback)")
                ctx.exit(EXIT_INTERNAL)
            raise
        if state is not None:
            state.output_done = True
            if state.interrupted:  # deferred while the charged release was being shown
                ctx.exit(_interrupted())
        return rv

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """As click's, but usage errors are one line and Ctrl-C is ``privagg: interrupted``, 130."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        with _guard.session():
            try:
                rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
                code = rv if isinstance(rv, int) else 0
            except click.exceptions.NoArgsIsHelpError as exc:
                exc.show()
                code = exc.exit_code
            except click.ClickException as exc:
                message = exc.format_message()
                if isinstance(exc, click.UsageError) and exc.ctx is not None:
                    message += f" (see '{exc.ctx.command_path} --help')"
                _print_error(message)
                code = exc.exit_code
            except (KeyboardInterrupt, EOFError, click.Abort):
                code = _interrupted()
        sys.exit(code)


@click.group(cls=PrivaggGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="privagg")
def cli() -> None:
    """privagg — differentially private aggregation of CSV and Parquet files.

    Exit codes: 0 success, 2 bad arguments or input (nothing charged), 3 privacy budget
    exceeded (nothing released), 4 the release was printed (and charged) but the --plot file
    could not be written, 130 interrupted (Ctrl-C), 1 internal error.
    """


COMMANDS: tuple[click.Command, ...] = (demo, histogram, mean, kmeans, aggregate, budget)
for _command in COMMANDS:
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``privagg`` and ``python -m privagg`` (exits the process)."""
    cli.main(args=None if argv is None else list(argv), prog_name="privagg")
