"""``--privacy-unit COL`` and ``--max-rows-per-unit K`` for ``privagg mean`` and ``privagg kmeans``.

With a unit, DuckDB reduces the file's rows to one vector per unit
(:func:`privagg.engines.unit_rows.file_unit_vectors`, keyed by a secret from the CSPRNG that is
never shown) and the mechanism runs on those vectors, with the rest of the same generator.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np

from .. import _validate

__all__ = ["read_points", "release_unit_fields", "unit_fields", "unit_lines", "unit_options", "with_unit"]


def unit_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--max-rows-per-unit", "max_rows_per_unit", default="1", show_default=True, metavar="K",
        help="With --privacy-unit: a unit's vector is the average of K of its rows sampled uniformly "
             "(1: one sampled row).",
    )(fn)
    return click.option(
        "--privacy-unit", "privacy_unit", default=None, metavar="COL",
        help="Protect the unit of this column (a person: all its rows) instead of one row; one vector per unit.",
    )(fn)


def _max_rows(where: str, unit: str | None, text: str) -> int:
    from ..engines.unit_rows import MAX_ROWS_PER_UNIT, check_max_rows

    try:
        value = int(text.strip())
    except (ValueError, AttributeError):
        raise _validate.fail(where, "max_rows_per_unit", f"an integer in [1, {MAX_ROWS_PER_UNIT}]", text) from None
    if unit is None and value != 1:
        raise _validate.fail(where, "max_rows_per_unit", "left at 1 without --privacy-unit", value)
    return check_max_rows(where, unit, value)


def read_points(where: str, file: Path, cols: list[str], unit: str | None, max_rows: str,
                csv: Any) -> tuple[np.ndarray, Any, int]:
    """(points, rng, k): the numeric rows (record level, rng None: the mechanism's own secure
    generator) or one vector per unit (user level, rng: the secure generator the secret came from)."""
    from ..engines.duckdb_numeric import read_numeric_columns

    k = _max_rows(where, unit, max_rows)
    if unit is None:
        return read_numeric_columns(file, cols, caller=where, csv=csv), None, k
    from ..engines.base import draw_secret
    from ..engines.unit_rows import file_unit_vectors
    from ..noise.rng import secure_generator

    gen = secure_generator()
    return file_unit_vectors(file, cols, unit, k, draw_secret(gen), caller=where, csv=csv), gen, k


def unit_fields(unit: str | None, k: int) -> dict[str, Any]:
    """Public fields of the release: the unit column (None at record level) and k."""
    return {"privacy_unit": unit, "max_rows_per_unit": k}


def with_unit(release: Any, unit: str | None, k: int) -> Any:
    """The mean's or k-means' release saying its unit (the ``--privacy-unit`` column) and k; the
    points were already one vector per unit (:func:`read_points`). Unchanged at record level."""
    from ..mechanisms.mean import _with_unit

    return _with_unit(release, unit, k)


def release_unit_fields(release: Any, k: int) -> dict[str, Any]:
    """The ``--json`` fields of the unit, with the histogram's names: ``privacy_unit`` (the column,
    null at record level), ``max_rows_per_unit`` (k; 1 at record level), ``neighbors`` and
    ``rows_dropped`` (``"not released"`` at user level, null at record level)."""
    return {**unit_fields(release.unit, k), "neighbors": release.neighbors, "rows_dropped": release.rows_dropped}


def unit_lines(release: Any) -> list[str]:
    """The table's lines on the unit (labels as in the histogram's table)."""
    from ._render import ROWS_DROPPED_TEXT, unit_text

    rows = [("privacy unit", unit_text(release.unit))]
    if release.unit is not None:
        k = release.max_rows_per_unit
        kept = "one sampled row" if k == 1 else f"the average of up to {k} sampled rows"
        rows += [("bounding", f"one vector per unit: {kept} (≤ {k} rows per unit)"),
                 ("rows dropped", ROWS_DROPPED_TEXT)]
    return [f"{label:<11} {value}" for label, value in rows]
