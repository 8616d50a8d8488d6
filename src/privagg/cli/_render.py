"""Output of the command line: one JSON object for machines, a rich table for people."""

from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..mechanisms.histogram import HistogramRelease

__all__ = ["release_payload", "print_json", "print_table", "format_float", "json_keys", "summary_rows"]


def _json_default(value: Any) -> Any:
    """JSON for the values ``json`` does not know: numpy scalars, dates/times, else their text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    return str(value)


def json_keys(keys: np.ndarray) -> list[Any]:
    """Keys as JSON-native values (datetimes as ISO 8601 text, whatever their unit)."""
    keys = np.asarray(keys)
    if keys.dtype.kind == "M":
        return np.datetime_as_string(keys).tolist()
    if keys.dtype.kind == "m":
        return [str(k) for k in keys]
    return keys.tolist()


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def release_payload(release: HistogramRelease, *, beta: float) -> dict[str, Any]:
    """The JSON object of api.md (plus ``beta``, ``scale``, ``n``, ``secure``)."""
    return {
        "mechanism": release.mechanism,
        "epsilon": float(release.epsilon),
        "delta": float(release.delta),
        "neighbors": release.neighbors,
        "threshold": None if release.threshold is None else int(release.threshold),
        "keys": json_keys(release.keys),
        "counts": np.asarray(release.counts).tolist(),
        "frequencies": np.where(  # NaN (stable add/remove, noisy total ≤ 0) → null
            np.isfinite(release.frequencies), release.frequencies.astype(object), None
        ).tolist(),
        "error_bound": _finite_or_none(release.error_bound(beta)),
        "beta": beta,
        "scale": float(release.scale),
        "n": None if release.n is None else int(release.n),
        "noisy_total": release.noisy_total,  # stable add/remove: the frequencies' denominator
        "secure": bool(release.secure),
    }


def print_json(release: HistogramRelease, *, beta: float) -> None:
    """Print the release as one JSON object on stdout (non-finite numbers become null)."""
    text = json.dumps(release_payload(release, beta=beta), default=_json_default, allow_nan=False)
    sys.stdout.write(text + "\n")


def format_float(x: float, digits: int = 3) -> str:
    """Short human formatting: 0.000231, 1.5e-06, inf."""
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def summary_rows(release: HistogramRelease, *, beta: float) -> list[tuple[str, str]]:
    """(label, value) lines describing a release without data: guarantee, threshold, bound."""
    pure = release.delta == 0
    guarantee = f"ε = {format_float(release.epsilon)}" + ("" if pure else f", δ = {format_float(release.delta)}")
    rows = [
        ("mechanism", release.mechanism),
        ("guarantee", guarantee + (" (pure DP)" if pure else "")),
        ("neighbours", release.neighbors + (" (n public)" if release.neighbors == "replace" else " (n private)")),
        ("noise", f"discrete Laplace, scale {format_float(release.scale)} counts"),
        ("threshold", "none" if release.threshold is None else f"noisy count ≥ {release.threshold}"),
        ("records n", "private" if release.n is None else f"{release.n:,}"),
        ("keys released", f"{len(release.keys):,}"),
        (f"error bound (β = {format_float(beta)})", _bound_text(release.error_bound(beta))),
        ("randomness", "secure (AES-CTR CSPRNG)" if release.secure else "NOT secure (seeded generator)"),
    ]
    return rows


def _bound_text(bound: float) -> str:
    if not math.isfinite(bound):
        return "none (the noisy total is too small to bound frequencies)"
    return f"± {format_float(bound)} on every frequency"


def print_table(release: HistogramRelease, *, beta: float, rows: int = 30, title: str | None = None) -> None:
    """A header with the release's parameters, then the keys by noisy count with intervals."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    for label, value in summary_rows(release, beta=beta):
        header.add_row(label, value)
    console.print(header)

    counts = np.asarray(release.counts)
    order = np.argsort(-counts, kind="stable")[:rows]
    low, high = release.confidence_intervals(beta)
    level = f"{100 * (1 - beta):.3g}%"
    table = Table(title=title, show_lines=False)
    table.add_column("key")
    table.add_column("noisy count", justify="right")
    table.add_column("frequency", justify="right")
    table.add_column(f"{level} interval (per key)", justify="right")
    keys = json_keys(release.keys)
    freqs = np.asarray(release.frequencies)
    for i in order:
        table.add_row(
            keys[i] if isinstance(keys[i], str) else str(_json_default(keys[i])),
            f"{int(counts[i]):,}",
            f"{freqs[i]:.4g}",
            f"[{format_float(float(low[i]))}, {format_float(float(high[i]))}]",
        )
    console.print(table)
    if len(counts) > rows:
        console.print(f"… {len(counts) - rows:,} more keys (use --json for all, --rows to show more)")
    elif len(counts) == 0:
        console.print("no key reached the threshold: nothing to release")
