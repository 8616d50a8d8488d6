"""Output of the command line: one JSON object for machines, a rich table for people.

Every string that is printed — released keys, and public strings such as file names and column
names — is plain text: rich markup (``[bold]``), emoji codes (``:smile:``) and highlighting are
never interpreted, and invisible or terminal-controlling characters are shown as escapes by
:func:`visible`. JSON is written with ``ensure_ascii`` (the default of :func:`json.dumps`): every
character outside printable ASCII is a ``\\uXXXX`` escape, so no raw control byte reaches stdout.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import sys
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rich.console import Console

    from ..mechanisms.histogram import HistogramRelease

__all__ = [
    "release_payload", "print_json", "print_table", "format_float", "json_keys", "summary_rows",
    "visible", "plain_console", "dumps", "unit_text", "ROWS_DROPPED_TEXT",
]

# Characters shown as escapes: C0 controls, DEL and C1 controls (ESC starts terminal sequences),
# surrogates (an undecodable byte of a file name), the line and paragraph separators, and every
# format character (Unicode category Cf): the bidi embeddings, overrides and isolates
# (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C), zero-width characters (U+200B–U+200D,
# U+2060, U+FEFF), the soft hyphen, tag characters and the rest. Format characters are escaped
# even where they are legitimate (ZWJ in emoji sequences, ZWNJ in some scripts): two distinct
# keys must never look alike in a table. The backslash itself is doubled, so an escape shown is
# never confused with a key that holds the same text.
_INVISIBLE = re.compile(
    r"[\\\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    r"\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    r"\ud800-\udfff\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    r"\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c == "\\":
        return "\\\\"
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: object, *, backslash: bool = True) -> str:
    """``text`` with every invisible or terminal-controlling character as an escape (``\\x1b``,
    ``\\u202e``), for printing; with ``backslash`` (the default) a backslash is shown doubled.

    The result is plain text: print it through :func:`plain_console` or ``click.echo``, never as
    rich markup.
    """
    s = text if isinstance(text, str) else str(text)
    if backslash:
        return _INVISIBLE.sub(_escape, s)
    return _INVISIBLE.sub(lambda m: m.group() if m.group() == "\\" else _escape(m), s)


def plain_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A rich Console that never interprets markup, emoji codes or highlighting in strings."""
    from rich.console import Console

    return Console(stderr=stderr, markup=False, emoji=False, highlight=False, **kwargs)


def dumps(payload: Any, *, finite: bool = False) -> str:
    """One line of JSON: ASCII only (``ensure_ascii``), numpy scalars and dates converted.

    With ``finite``, every non-finite float becomes ``null`` (for small payloads such as a mean:
    a release that overflowed must still print, after the charge); without it, NaN or infinity
    is a bug and raises.
    """
    if finite:
        payload = _finite(payload)
    return json.dumps(payload, default=_json_default, allow_nan=False, ensure_ascii=True)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


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
        "threshold": None if release.threshold is None or _optimal(release) else int(release.threshold),
        # threshold="randomized": a noisy count of T − 1 was kept with this probability (exact fraction)
        "boundary_probability": None if (b := _boundary(release)) is None else str(b),
        # stable histogram: "threshold" (noisy count ≥ T), "optimal" (partition selection, no T)
        # or "gaussian" (Gaussian thresholding of the distinct units per key, no T on the counts)
        "selection": release.selection if release.mechanism == "stable_histogram" else None,
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
        # user level: the unit and its bounds; rows dropped by bounding are not released
        "privacy_unit": release.unit,
        "max_keys_per_unit": release.max_keys_per_unit,
        "max_rows_per_key": release.max_rows_per_key,
        "rows_dropped": None if release.unit is None else "not released",
        # max_keys_per_unit="auto": the chosen ℓ0, its quantile, range and the ε it cost
        "max_keys_per_unit_auto": None if release.auto_l0 is None else release.auto_l0.to_dict(),
        "noise": _noise_name(release),
        # noise="gaussian": the discrete Gaussian's σ² and the ρ-zCDP it gives (converted to ε, δ)
        "sigma2": _gaussian_param(release, "sigma2"),
        "rho": _gaussian_param(release, "rho"),
        # Gaussian thresholding: the noise's δ and the new keys' δ (T); "zcdp": their sum ≤ δ,
        # "exact": each ≤ δ and every mix certified ≤ δ (docs/proofs/histograms.md §11.1)
        "gaussian_delta": _gaussian_param(release, "gaussian_delta"),
        "threshold_delta": _gaussian_param(release, "threshold_delta"),
        "gaussian_calibration": getattr(release.params, "gaussian_calibration", None),
        # selection="optimal": the per-key (ε', δ') of the partition selection
        **dict(zip(("selection_epsilon_per_key", "selection_delta_per_key"), _per_key(release), strict=True)),
        # selection="gaussian": the selection's (ε, δ), discrete Gaussian σ² and threshold on the
        # noisy distinct units per key (docs/proofs/histograms.md §8.2)
        **_gaussian_selection_fields(release),
    }


def _gaussian_selection_fields(release: HistogramRelease) -> dict[str, Any]:
    sel = getattr(release, "selection_params", None)
    if sel is None:
        return {"selection_epsilon": None, "selection_delta": None, "selection_sigma2": None,
                "selection_threshold": None}
    return {"selection_epsilon": float(sel.epsilon_exact), "selection_delta": float(sel.delta),
            "selection_sigma2": float(sel.sigma2), "selection_threshold": int(sel.threshold)}


def _boundary(release: HistogramRelease) -> Fraction | None:
    """threshold="randomized": the boundary probability b (exact), else None."""
    b = getattr(release.params, "boundary_probability", None)
    return None if b is None or _optimal(release) else b


def _optimal(release: HistogramRelease) -> bool:
    """Whether keys were selected apart from the counts (no threshold on the counts)."""
    return getattr(release, "selection", "threshold") in ("optimal", "gaussian")


def _per_key(release: HistogramRelease) -> tuple[float | None, float | None]:
    """selection="optimal": (ε', δ') = (ε_c/(2ℓ0), δ/ℓ0), as charged; else (None, None)."""
    if getattr(release, "selection", "threshold") != "optimal":
        return None, None
    from ..mechanisms.histogram import _optimal_budget

    eps, dlt = _optimal_budget(release.mechanism, release.params, release.max_keys_per_unit)  # type: ignore[arg-type]
    return float(eps), float(dlt)


def _gaussian_param(release: HistogramRelease, name: str) -> float | None:
    value = getattr(release.params, name, None)
    return None if value is None else float(value)


def _noise_name(release: HistogramRelease) -> str:
    return "discrete_gaussian" if getattr(release.params, "sigma2", None) is not None else "discrete_laplace"


def print_json(release: HistogramRelease, *, beta: float, extra: dict[str, Any] | None = None) -> None:
    """Print the release (and ``extra`` fields) as one JSON object on stdout (non-finite numbers
    become null)."""
    sys.stdout.write(dumps({**release_payload(release, beta=beta), **(extra or {})}) + "\n")


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
        ("noise", _noise_text(release)),
        *_selection_rows(release),
        ("records n", "private" if release.n is None else f"{release.n:,}"),
        *_unit_rows(release),
        ("keys released", f"{len(release.keys):,}"),
        (f"error bound (β = {format_float(beta)})", _bound_text(release.error_bound(beta), _optimal(release))),
        ("randomness", "secure (AES-CTR CSPRNG)" if release.secure else "NOT secure (seeded generator)"),
    ]
    return rows


def _noise_text(release: HistogramRelease) -> str:
    if _noise_name(release) != "discrete_gaussian":
        return f"discrete Laplace, scale {format_float(release.scale)} counts"
    sigma2, rho = _gaussian_param(release, "sigma2"), _gaussian_param(release, "rho")
    split = ""
    dg, dt = _gaussian_param(release, "gaussian_delta"), _gaussian_param(release, "threshold_delta")
    if dg is not None and dt is not None and getattr(release.params, "gaussian_calibration", None) == "exact":
        split = f"; exact profile: Gaussian δ {format_float(dg)}, new keys δ {format_float(dt)}, every mix ≤ δ"
    elif dg is not None and dt is not None:  # Gaussian thresholding: δ split between the noise and T
        split = f"; δ = {format_float(dg)} (Gaussian) + {format_float(dt)} (threshold)"
    elif getattr(release.params, "gaussian_calibration", None) == "exact":  # laplace_histogram, §10.1
        split = "; exact profile: every shift of a unit certified ≤ δ"
    return (f"discrete Gaussian, σ {format_float(release.scale)} counts (σ² = {format_float(sigma2)}; "  # type: ignore[arg-type]
            f"ρ = {format_float(rho)} zCDP, as (ε, δ)-DP{split})")  # type: ignore[arg-type]


def _selection_rows(release: HistogramRelease) -> list[tuple[str, str]]:
    """The threshold line, and for the stable histogram how keys were selected."""
    if not _optimal(release):
        rows = [("threshold", "none" if release.threshold is None else f"noisy count ≥ {release.threshold}")]
        b = _boundary(release) or None  # b = 0 (T = 1): nothing to say
        if b is not None:  # threshold="randomized" (docs/proofs/histograms.md §2.5)
            rows[0] = ("threshold", f"noisy count ≥ {release.threshold}, or = {release.threshold - 1} "  # type: ignore[operator]
                                    f"with probability {format_float(float(b))} (randomized boundary)")
        if release.mechanism == "stable_histogram":
            rows.insert(0, ("selection", "threshold (released iff the noisy count reaches it)" if b is None else
                                         "threshold (released iff the noisy count reaches it, or by the coin at T − 1)"))
        return rows
    sel = getattr(release, "selection_params", None)
    if sel is not None:
        return [
            ("selection", "Gaussian thresholding of the distinct units of each key (ε = "
                          f"{format_float(float(sel.epsilon_exact))}, δ = {format_float(float(sel.delta))}; "
                          f"discrete Gaussian σ {format_float(float(sel.sigma2) ** 0.5)}, kept iff ≥ {sel.threshold})"),
            ("threshold", "none on the counts (keys kept by the selection; counts noised separately)"),
        ]
    eps, dlt = _per_key(release)
    return [
        ("selection", "optimal partition selection on the distinct units of each key "
                      f"(per key ε = {format_float(eps)}, δ = {format_float(dlt)})"),  # type: ignore[arg-type]
        ("threshold", "none (keys kept at random by the selection; counts noised separately)"),
    ]


#: The table's "rows dropped" line at user level (every command: the count is never released).
ROWS_DROPPED_TEXT = "not released (would cost budget)"


def unit_text(unit: str | None) -> str:
    """The table's "privacy unit" line (every command)."""
    if unit is None:
        return "one row (record level: each row is protected on its own)"
    return f"column '{visible(unit)}' (all rows of one unit)"


def _unit_rows(release: HistogramRelease) -> list[tuple[str, str]]:
    """The privacy unit and its bounds (user level), else the record."""
    if release.unit is None:
        return [("privacy unit", unit_text(None))]
    return [
        ("privacy unit", unit_text(release.unit)),
        ("bounding", f"≤ {release.max_keys_per_unit} keys per unit, ≤ {release.max_rows_per_key} rows per key"
         + ("" if release.auto_l0 is None else
            f" (ℓ0 chosen privately, ε = {format_float(float(release.auto_l0.epsilon))} of the total)")),
        ("rows dropped", ROWS_DROPPED_TEXT),
    ]


def _bound_text(bound: float, optimal: bool = False) -> str:
    if optimal:  # no threshold bounds the count of a suppressed key
        return "none (no bound on suppressed keys without a threshold; per-key intervals below)"
    if not math.isfinite(bound):
        return "none (the noisy total is too small to bound frequencies)"
    return f"± {format_float(bound)} on every frequency"


def print_table(release: HistogramRelease, *, beta: float, rows: int = 30, title: str | None = None) -> None:
    """A header with the release's parameters, then the keys by noisy count with intervals.

    Keys are shown as plain text through :func:`visible` (``title`` is escaped too)."""
    from rich.table import Table
    from rich.text import Text

    console = plain_console()
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
    table = Table(title=None if title is None else Text(visible(title)), show_lines=False)
    table.add_column("key")
    table.add_column("noisy count", justify="right")
    table.add_column("frequency", justify="right")
    table.add_column(f"{level} interval (per key)", justify="right")
    keys = json_keys(release.keys)
    freqs = np.asarray(release.frequencies)
    for i in order:
        key = keys[i] if isinstance(keys[i], str) else str(_json_default(keys[i]))
        table.add_row(
            Text(visible(key)),
            f"{int(counts[i]):,}",
            f"{freqs[i]:.4g}",
            f"[{format_float(float(low[i]))}, {format_float(float(high[i]))}]",
        )
    console.print(table)
    if len(counts) > rows:
        console.print(f"… {len(counts) - rows:,} more keys (use --json for all, --rows to show more)")
    elif len(counts) == 0:
        console.print("no key was selected: nothing to release" if _optimal(release)
                      else "no key reached the threshold: nothing to release")
