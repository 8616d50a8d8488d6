"""Neighbour invariance of everything privagg shows besides the release.

privagg's rule: the exit code, stderr, warnings and the set of exceptions are functions of public
inputs only (parameters, schema, the domain, ``n`` where public) — never of a record. This module
checks that rule the way an attacker would probe it: run a command (or a Python mechanism) on a
data set ``D`` and on ``D`` plus one *hostile* record, and compare what is observable apart from
the noisy release itself:

- CLI: the exit code and the bytes written to stderr (stdout carries the release, which is
  random, and is only checked to hold no raw control character);
- Python API: the type of the exception raised (or none) and the warnings emitted.

Both are run with warnings turned into errors and ``np.seterr(all="raise")``, so a floating point
event or a warning that only an extreme record triggers shows up as a different exception.

:data:`HOSTILE_RECORDS` lists the records (ragged, non-UTF-8, over-long, markup, ANSI, NaN, ±inf,
±1e308, huge integers, −0.0, far points …); :func:`cli_observation` and :func:`api_observation`
run one case; :func:`invariance_table` runs them all and returns the table printed by
``benchmarks/invariance.py``. The harness is itself tested with a negative control (a command
that quotes a record in its error message must be caught), see ``tests/invariance/``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "HostileRecord",
    "HOSTILE_RECORDS",
    "CliCase",
    "CLI_CASES",
    "ApiCase",
    "API_CASES",
    "Observation",
    "base_csv",
    "base_frame",
    "frame_row",
    "write_parquet",
    "cli_observation",
    "api_observation",
    "invariance_table",
]


@dataclass(frozen=True)
class HostileRecord:
    """One record written by an attacker.

    ``line`` is the raw CSV line (columns ``key,x,y``, no newline) appended to a file; ``key`` is
    the value appended to an in-memory key column and ``row`` the row appended to an in-memory
    point list (``None``: the record has no in-memory form, e.g. a malformed CSV line).
    """

    name: str
    line: bytes
    key: Any = None
    row: Sequence[Any] | None = None
    has_key: bool = True


def _h(name: str, line: bytes | str, key: Any = None, row: Sequence[Any] | None = None, *,
       has_key: bool = True) -> HostileRecord:
    raw = line.encode("utf-8") if isinstance(line, str) else line
    return HostileRecord(name=name, line=raw, key=key, row=row, has_key=has_key)


HOSTILE_RECORDS: tuple[HostileRecord, ...] = (
    _h("ragged: one field too many", "JANE DOE,HIV+,1980-01-01,x", "JANE DOE"),
    _h("ragged: one field", "lonely", "lonely"),
    _h("ragged: only delimiters", ",,,,,,", has_key=False),
    _h("empty fields", ",,", None, [None, None]),
    _h("non-UTF-8 bytes", b"\xff\xfe\xfa\x80,1,2", b"\xff\xfe", None),
    _h("latin-1 text", b"caf\xe9,1,2", "café"),
    _h("1 MB field", b"A" * (1 << 20) + b",1,2", "A" * (1 << 20)),
    _h("3 MB line (over DuckDB's line limit)", b"B" * (3 << 20) + b",1,2", "B" * (3 << 20)),
    _h("NUL byte", b"a\x00b,1,2", "a\x00b"),
    _h("unbalanced quote", '"abc,1,2', '"abc'),
    _h("quote inside field", 'a"b"c,1,2', 'a"b"c'),
    _h("markup key", "[bold red]x[/bold red],1,2", "[bold red]x[/bold red]"),
    _h("markup that crashes rich", "a[/]b,1,2", "a[/]b"),
    _h("ANSI clear-screen key", "\x1b[2J\x1b[H,1,2", "\x1b[2J\x1b[H"),
    _h("bidi override key", "\u202eevil\u202c,1,2", "\u202eevil"),
    _h("rich emoji code", ":smile:,1,2", ":smile:"),
    _h("mathtext key", "$\\frac{$,1,2", "$\\frac{$"),
    _h("fake error key", "privagg: error: x,1,2", "privagg: error: x"),
    _h("formula key", '=HYPERLINK("http://x"),1,2', "=HYPERLINK"),
    _h("NaN values", "A,nan,NaN", float("nan"), [float("nan"), float("nan")]),
    _h("+inf / -inf", "A,inf,-inf", float("inf"), [float("inf"), float("-inf")]),
    _h("±1e308", "A,1e308,-1e308", 1e308, [1e308, -1e308]),
    _h("±1.5e308", "A,1.5e308,-1.5e308", -1.5e308, [1.5e308, -1.5e308]),
    _h("1e400 literal (overflows)", "A,1e400,-1e400", None, [1e300 * 1e300, 1.0]),
    _h("10^30 as an int", "A," + "1" + "0" * 30 + ",1", 10**30, [10**30, 1]),
    _h("2^63 as an int", "A,9223372036854775808,1", 2**63, [2**63, 1]),
    _h("10^400 as an int", "A,1" + "0" * 400 + ",1", 10**400, [10**400, 1]),
    _h("-0.0", "-0.0,-0.0,-0.0", -0.0, [-0.0, -0.0]),
    _h("mixed-type key", "1.0,1,2", 1.0, ["1", 2]),
    _h("bool key", "True,1,2", True, [True, False]),
    _h("far point 1e200", "A,1e200,1e200", "A", [1e200, 1e200]),
    _h("far point 1e135", "A,1e135,-1e135", "A", [1e135, -1e135]),
    _h("subnormals", "A,5e-324,-5e-324", 5e-324, [5e-324, -5e-324]),
    _h("newline inside quotes", '"multi\nline",1,2', "multi\nline"),
    _h("lone CR", "a\rb,1,2", "a\rb"),
    _h("copy of the header", "key,x,y", "key"),
    _h("tab and spaces", "a\tb,  1e5 ,\t2", "a\tb", [" 1e5 ", "\t2"]),
    _h("hex and Arabic digits", "0x10,0x10,\u0663", "0x10", ["0x10", "\u0663"]),
    _h("BOM inside the file", b"\xef\xbb\xbfA,1,2", "\ufeffA"),
    _h("quoted delimiter", '"a,b",1,2', "a,b"),
    _h("tuple key", "(1,2),1,2", (1, 2), [(1, 2), 1]),
)


@dataclass(frozen=True)
class Observation:
    """What a run shows besides the release."""

    exit_code: int | None = None
    stderr: bytes = b""
    exception: str | None = None
    warnings: tuple[str, ...] = ()
    stdout_clean: bool = True

    def differences(self, other: Observation) -> list[str]:
        """The ways ``other`` differs from this (empty when the runs look alike)."""
        out = []
        if self.exit_code != other.exit_code:
            out.append(f"exit code {self.exit_code} != {other.exit_code}")
        if self.stderr != other.stderr:
            out.append(f"stderr {self.stderr[:200]!r} != {other.stderr[:200]!r}")
        if self.exception != other.exception:
            out.append(f"exception {self.exception} != {other.exception}")
        if self.warnings != other.warnings:
            out.append(f"warnings {self.warnings} != {other.warnings}")
        if not other.stdout_clean:
            out.append("stdout holds a raw control character")
        return out


# --- data sets ------------------------------------------------------------------------------

#: Keys of the base data set and how many records each has (large enough to be released).
BASE_KEYS = {"A": 300, "B": 200, "C": 60}


def base_rows(seed: int = 20261201) -> list[tuple[str, float, float]]:
    """The base data set D: keys with released-size counts and two clusters of 2-D points."""
    rng = np.random.default_rng(seed)
    keys = [k for k, c in BASE_KEYS.items() for _ in range(c)]
    n = len(keys)
    centers = np.where((np.arange(n) % 2 == 0)[:, None], [[0.0, 0.0]], [[40.0, 40.0]])
    points = np.round(centers + rng.normal(size=(n, 2)), 6)
    return [(k, float(x), float(y)) for k, (x, y) in zip(keys, points)]


def base_csv(extra: bytes | None = None) -> bytes:
    """The CSV bytes of D (header ``key,x,y``), plus one extra line (the hostile record)."""
    lines = [b"key,x,y"] + [f"{k},{x!r},{y!r}".encode() for k, x, y in base_rows()]
    if extra is not None:
        lines.append(extra)
    return b"\n".join(lines) + b"\n"


def _as_float(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None


def frame_row(record: HostileRecord) -> tuple[str | None, float | None, float | None]:
    """The hostile record as a typed row (key text, x, y doubles) for a DataFrame or Parquet file.

    A key that is not text is written as its ``str``; a value that is no double (text, a tuple, an
    integer beyond the double range) is NULL; a record without a point keeps the CSV's ``1, 2``.
    """
    key = record.key
    if isinstance(key, bytes):
        key = key.decode("latin-1")
    elif key is not None and not isinstance(key, str):
        key = str(key)
    if record.row is None:
        return key, 1.0, 2.0
    x, y = (list(record.row) + [None, None])[:2]
    return key, _as_float(x), _as_float(y)


def base_frame(record: HostileRecord | None = None) -> Any:
    """D (+ ``record``) as a pandas DataFrame with a fixed schema: key object (text), x, y float64."""
    import pandas as pd

    rows = [(k, x, y) for k, x, y in base_rows()]
    if record is not None:
        rows.append(frame_row(record))
    frame = pd.DataFrame(rows, columns=["key", "x", "y"])
    return frame.astype({"key": object, "x": "float64", "y": "float64"})


def write_parquet(path: Path, record: HostileRecord | None = None) -> None:
    """D (+ ``record``) as a Parquet file with the schema key string, x double, y double (a NaN
    stays NaN, a value that is no double is NULL)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [(k, x, y) for k, x, y in base_rows()]
    if record is not None:
        rows.append(frame_row(record))
    keys, xs, ys = zip(*rows, strict=True)
    table = pa.table({"key": pa.array(keys, pa.string()), "x": pa.array(xs, pa.float64()),
                      "y": pa.array(ys, pa.float64())})
    pq.write_table(table, path)


# --- the CLI --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CliCase:
    """A CLI command line; ``{data}``, ``{domain}``, ``{ledger}``, ``{plot}`` are filled in."""

    name: str
    args: tuple[str, ...]
    ledger: bool = False
    #: ``"csv"`` (``{data}`` is D as CSV plus the hostile line) or ``"parquet"`` (``{data}`` is D as
    #: a typed Parquet file — key VARCHAR, x/y DOUBLE — plus the hostile record's in-memory form).
    input: str = "csv"


CLI_CASES: tuple[CliCase, ...] = (
    CliCase("histogram (stable, table, ledger)",
            ("histogram", "{data}", "--column", "key", "--epsilon", "1", "--delta", "1e-6",
             "--ledger", "{ledger}"), ledger=True),
    CliCase("histogram (stable, add_remove, json)",
            ("histogram", "{data}", "--column", "key", "--epsilon", "1", "--delta", "1e-6",
             "--neighbors", "add_remove", "--json")),
    CliCase("histogram (laplace, domain, table)",
            ("histogram", "{data}", "--column", "key", "--epsilon", "1", "--domain", "{domain}")),
    CliCase("histogram (stable, privacy unit, json)",
            ("histogram", "{data}", "--column", "key", "--epsilon", "1", "--delta", "1e-6",
             "--privacy-unit", "y", "--max-keys-per-unit", "2", "--json")),
    CliCase("mean (json, ledger)",
            ("mean", "{data}", "--columns", "x,y", "--epsilon", "1", "--delta", "1e-6", "--json",
             "--ledger", "{ledger}"), ledger=True),
    CliCase("mean (table)", ("mean", "{data}", "--columns", "x,y", "--epsilon", "1", "--delta", "1e-6")),
    CliCase("kmeans (table)",
            ("kmeans", "{data}", "--columns", "x,y", "--k", "2", "--epsilon", "1", "--delta", "1e-6")),
    CliCase("aggregate (count + bounded sum, private selection, ledger)",
            ("aggregate", "{data}", "--by", "key", "--count", "--sum", "x:-5:50", "--epsilon", "1",
             "--delta", "1e-6", "--seed", "1", "--ledger", "{ledger}"), ledger=True),
    CliCase("aggregate (unbounded mean + quantile, domain, json)",
            ("aggregate", "{data}", "--by", "key", "--mean", "y", "--quantile", "x:0.5",
             "--domain", "{keys}", "--epsilon", "1", "--delta", "1e-6", "--seed", "1", "--json")),
    CliCase("aggregate (privacy unit, 2 groups per unit, bounded mean)",
            ("aggregate", "{data}", "--by", "key", "--count", "--mean", "x:-5:50", "--privacy-unit", "y",
             "--max-groups-per-unit", "2", "--max-rows-per-group", "2", "--epsilon", "1",
             "--delta", "1e-6", "--seed", "1")),
    CliCase("aggregate (--where with a failing CAST, json)",
            ("aggregate", "{data}", "--by", "key", "--count", "--quantile", "y:0.9:-5:50",
             "--where", "CAST(x AS DOUBLE) > 1 AND CAST(y AS INTEGER) < 30", "--epsilon", "1",
             "--delta", "1e-6", "--seed", "1", "--json")),
    CliCase("aggregate (Parquet, count + sum + quantile, domain)",
            ("aggregate", "{data}", "--by", "key", "--count", "--sum", "y:0:50", "--quantile", "x:0.5",
             "--domain", "{keys}", "--epsilon", "1", "--seed", "1"), input="parquet"),
)

_CONTROL = set(range(0x20)) - {0x0A} | {0x7F}


def _stdout_clean(data: bytes) -> bool:
    return not any(b in _CONTROL for b in data)


@contextlib.contextmanager
def _strict() -> Any:
    """Warnings are errors and floating point events raise, as in privagg's own test suite."""
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        yield


def cli_observation(case: CliCase, folder: Path, extra: bytes | None,
                    invoke: Callable[[list[str]], tuple[int, bytes, bytes]] | None = None) -> Observation:
    """Run ``case`` on D (+ the ``extra`` line) in ``folder`` and observe exit code and stderr.

    The files have the same names in every run (``data.csv``/``data.parquet``, ``domain.txt``,
    ``keys.csv``, ``budget.ledger``), so messages that name them are comparable. ``invoke`` runs
    the CLI and returns ``(exit_code, stdout, stderr)``; default: click's in-process runner.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if case.input == "parquet":
        data = folder / "data.parquet"
        record = None if extra is None else next(r for r in HOSTILE_RECORDS if r.line == extra)
        write_parquet(data, record)
    else:
        data = folder / "data.csv"
        data.write_bytes(base_csv(extra))
    domain = folder / "domain.txt"
    domain.write_text("A\nB\nC\nD\n", encoding="utf-8")
    keys = folder / "keys.csv"
    keys.write_text("key\nA\nB\nC\nD\n", encoding="utf-8")
    ledger = folder / "budget.ledger"
    for stale in folder.glob("budget.ledger*"):
        stale.unlink()
    if case.ledger:
        code, _, err = (invoke or _click_invoke)(["budget", "init", str(ledger), "--epsilon", "10",
                                                  "--delta", "1e-3"])
        if code != 0:
            raise RuntimeError(f"budget init failed: {err!r}")
    names = {"data": str(data), "domain": str(domain), "keys": str(keys), "ledger": str(ledger)}
    args = [a.format(**names) for a in case.args]
    code, out, err = (invoke or _click_invoke)(args)
    return Observation(exit_code=code, stderr=err, stdout_clean=_stdout_clean(out))


def _click_invoke(args: list[str]) -> tuple[int, bytes, bytes]:
    from click.testing import CliRunner

    from ..cli.main import cli

    with _strict():
        result = CliRunner().invoke(cli, args)
    err = result.stderr_bytes or b""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # An exception click did not turn into an exit code: a traceback for a user.
        err += f"<uncaught {type(result.exception).__name__}>".encode()
    return result.exit_code, result.stdout_bytes, err


# --- the Python API -------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiCase:
    """A Python mechanism run on an in-memory column (``kind="keys"``), a point list (``"rows"``),
    a pandas DataFrame ``key, x, y`` (``"frame"``, :func:`base_frame`) or the path of D's CSV file
    (``"path"``, :func:`base_csv` plus the record's raw line)."""

    name: str
    kind: str
    run: Callable[[list[Any]], Any] = field(repr=False)


def _api_cases() -> tuple[ApiCase, ...]:
    import privagg

    def _friendly(points: list[Any]) -> Any:
        def mean_of_core(core: np.ndarray, rng: Any) -> Any:
            return core.mean(axis=0) if len(core) else None

        mech = privagg.friendly(mean_of_core, eps_friendly=0.5, delta_friendly=1e-8,
                                predicate=privagg.predicates.ball(5.0))
        return mech(points, rng=1)

    return (
        ApiCase("stable_histogram", "keys",
                lambda keys: privagg.stable_histogram(keys, epsilon=1.0, delta=1e-6, rng=1)),
        ApiCase("stable_histogram add_remove", "keys",
                lambda keys: privagg.stable_histogram(keys, epsilon=1.0, delta=1e-6,
                                                      neighbors="add_remove", rng=1)),
        ApiCase("stable_histogram units", "keys",
                lambda keys: privagg.stable_histogram(keys, units=[i // 3 for i in range(len(keys))],
                                                      epsilon=1.0, delta=1e-6, max_keys_per_unit=2, rng=1)),
        ApiCase("laplace_histogram", "keys",
                lambda keys: privagg.laplace_histogram(keys, epsilon=1.0, domain=["A", "B", "C"], rng=1)),
        ApiCase("private_mean", "rows",
                lambda rows: privagg.private_mean(rows, epsilon=1.0, delta=1e-6, rng=1)),
        ApiCase("private_kmeans", "rows",
                lambda rows: privagg.private_kmeans(rows, 2, epsilon=1.0, delta=1e-6, rng=1)),
        ApiCase("friendly (ball)", "rows", _friendly),
        ApiCase("aggregate pandas (count, sum, unbounded mean, quantile; selection)", "frame",
                lambda frame: privagg.aggregate(
                    frame, by="key", metrics=[privagg.count(), privagg.sum("x", (-5, 50)), privagg.mean("y"),
                                              privagg.quantile("x", 0.5)],
                    epsilon=1.0, delta=1e-6, rng=1)),
        ApiCase("aggregate pandas (units array, domain, where)", "frame",
                lambda frame: privagg.aggregate(
                    frame, by="key", metrics=[privagg.count(), privagg.mean("x", (-5, 50))],
                    units=np.arange(len(frame)) // 3, max_groups_per_unit=2, max_rows_per_group=2,
                    domain=["A", "B", "C", "D"], where="x > 1 OR y < 0", epsilon=1.0, rng=1)),
        ApiCase("aggregate path (CSV; count, quantile with bounds; where with CAST)", "path",
                lambda path: privagg.aggregate(
                    path, by="key", metrics=[privagg.count(), privagg.quantile("y", 0.9, (-5, 50))],
                    where="CAST(x AS DOUBLE) > 1", neighbors="replace", epsilon=1.0, delta=1e-6, rng=1)),
    )


API_CASES: tuple[ApiCase, ...] = ()  # filled lazily by api_cases() (imports privagg)


def api_cases() -> tuple[ApiCase, ...]:
    global API_CASES
    if not API_CASES:
        API_CASES = _api_cases()
    return API_CASES


@functools.cache
def _api_folder() -> Path:
    """A private folder for the ``"path"`` cases' file (the same name in every run)."""
    folder = tempfile.mkdtemp(prefix="privagg-invariance-api-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return Path(folder)


def api_observation(case: ApiCase, record: HostileRecord | None) -> Observation | None:
    """Run ``case`` on D (+ ``record``); ``None`` when the record has no in-memory form here."""
    rows = base_rows()
    if case.kind == "frame":
        data: Any = base_frame(record)
    elif case.kind == "path":
        data = _api_folder() / "data.csv"
        data.write_bytes(base_csv(None if record is None else record.line))
    elif case.kind == "keys":
        data = [k for k, _, _ in rows]
        if record is not None:
            if not record.has_key:
                return None
            data.append(record.key)
    else:
        data = [[x, y] for _, x, y in rows]
        if record is not None:
            if record.row is None:
                return None
            data.append(list(record.row))
    exception = None
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as seen, np.errstate(all="raise"):
        warnings.simplefilter("always")
        try:
            case.run(data)
        except Exception as exc:  # the point is to see which exception, if any
            exception = type(exc).__name__
        caught = [f"{w.category.__name__}" for w in seen]
    return Observation(exception=exception, warnings=tuple(caught))


# --- the table ------------------------------------------------------------------------------


def invariance_table(folder: Path, records: Sequence[HostileRecord] = HOSTILE_RECORDS) -> list[dict[str, Any]]:
    """Every CLI case and API case against every record: one dict per (case, record)."""
    table = []
    for case in CLI_CASES:
        base = cli_observation(case, folder / "cli", None)
        for record in records:
            obs = cli_observation(case, folder / "cli", record.line)
            table.append({"case": "privagg " + case.name, "record": record.name,
                          "differences": base.differences(obs), "base": base})
    for api in api_cases():
        base_api = api_observation(api, None)
        assert base_api is not None
        for record in records:
            obs_api = api_observation(api, record)
            if obs_api is None:
                continue
            table.append({"case": api.name, "record": record.name,
                          "differences": base_api.differences(obs_api), "base": base_api})
    return table
