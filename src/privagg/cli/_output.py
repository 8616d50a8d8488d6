"""Output files of the command line (``--plot``, ``demo --out``): checked before, written after.

:func:`plot_target` runs with the other parameter checks, before any file is read, counted or
charged: matplotlib must be installed, the name must end in a format matplotlib writes without
outside programs (no suffix → ``.png`` is added, and the message names the file written), the
folder must exist and be writable, and the path must not be a folder. After the release was
charged and printed, :func:`save_figure` can still fail (disk full, permissions changed in
between): that raises :class:`OutputError`, which the main command reports as one line and exit
status 4 — the release was already printed, and charged if a ledger was given.

Text in figures is drawn literally: :func:`literal_text` turns matplotlib's mathtext (``$...$``)
and LaTeX off, so a key or a column name is never interpreted, and silences matplotlib's
warnings there (a "Glyph … missing from font" warning would depend on the keys drawn).
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ParameterError

__all__ = ["OutputError", "PLOT_FORMATS", "plot_target", "save_figure", "literal_text"]

#: matplotlib's file formats, minus ``pgf`` (it runs LaTeX, which may be missing, at write time).
PLOT_FORMATS = ("eps", "jpeg", "jpg", "pdf", "png", "ps", "raw", "rgba", "svg", "svgz", "tif",
                "tiff", "webp")
DEFAULT_FORMAT = "png"


class OutputError(Exception):
    """An output file could not be written after the release was printed (exit status 4)."""


def _path_fail(where: str, name: str, rule: str, path: Path | str) -> ParameterError:
    """The standard one-line error with the whole path (``_validate.fail`` shortens values)."""
    return ParameterError(f"{where}: parameter '{name}' must be {rule}; got {str(path)!r}.")


def plot_target(where: str, name: str, path: Path) -> Path:
    """The file a plot will be written to, or ParameterError now (public reasons only).

    A name without a suffix gets ``.png``; an unknown suffix is refused.
    """
    if importlib.util.find_spec("matplotlib") is None:
        raise _path_fail(where, name, "usable: install matplotlib (pip install 'privagg[plot]')",
                             str(path))
    if not path.suffix:
        path = path.with_name(path.name + "." + DEFAULT_FORMAT)
    fmt = path.suffix[1:].lower()
    if fmt not in PLOT_FORMATS:
        rule = "a file name ending in ." + ", .".join(PLOT_FORMATS) + " (or no suffix: .png)"
        raise _path_fail(where, name, rule, str(path))
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise _path_fail(where, name, "a path in an existing folder", str(path))
    if os.path.isdir(path):
        raise _path_fail(where, name, "a file path, not a folder", str(path))
    if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise _path_fail(where, name, "a writable file path", str(path))
    return path


@contextmanager
def literal_text() -> Iterator[None]:
    """matplotlib draws every string as it is (no mathtext, no LaTeX) and warns nothing here."""
    import matplotlib

    with warnings.catch_warnings(), matplotlib.rc_context({"text.parse_math": False,
                                                           "text.usetex": False}):
        warnings.simplefilter("ignore")
        yield


def plain_log_ticks(fig: Any) -> None:
    """Log axes label their ticks as plain numbers (``0.001``): matplotlib's default log labels
    are mathtext (``$\\mathdefault{10^{-3}}$``), which :func:`literal_text` would print verbatim."""
    from matplotlib.ticker import LogFormatter, NullFormatter

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_major_formatter(LogFormatter(labelOnlyBase=True))
                axis.set_minor_formatter(NullFormatter())


def save_figure(fig: Any, path: Path, **kwargs: Any) -> None:
    """``fig.savefig(path)`` in the format of its suffix; any failure is an OutputError."""
    try:
        plain_log_ticks(fig)
        with literal_text():
            fig.savefig(path, format=path.suffix[1:].lower(), **kwargs)
    except Exception as exc:  # after the release: whatever went wrong, one line (exit 4)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise OutputError(f"could not write the plot {str(path)!r} ({reason})") from None
