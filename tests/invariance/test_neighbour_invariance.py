"""Neighbour invariance: D and D plus one hostile record look alike apart from the release.

For every CLI command and Python mechanism of :mod:`privagg.testing.invariance` and every one of
its hostile records (ragged rows, non-UTF-8 bytes, a 1 MB field, markup and ANSI keys, NaN, ±inf,
±1e308, huge integers, −0.0, mixed types, far points, …): the same exit code, byte-identical
stderr, the same exception type (or none) and the same warnings — with warnings as errors and
``np.seterr(all="raise")``. Deterministic (no statistics): a difference is a failure, always.

Negative controls: the same harness must catch (a) an error message that quotes a record and
(b) a warning that only an extreme record triggers.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest

from privagg.testing import invariance as inv

RECORDS = inv.HOSTILE_RECORDS


def test_the_harness_has_at_least_thirty_hostile_records() -> None:
    assert len(RECORDS) >= 30
    assert len({r.name for r in RECORDS}) == len(RECORDS)


@functools.cache
def _cli_base(case_name: str, folder: str) -> inv.Observation:
    case = next(c for c in inv.CLI_CASES if c.name == case_name)
    return inv.cli_observation(case, Path(folder), None)


@pytest.fixture(scope="module")
def cli_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("invariance-cli")


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
@pytest.mark.parametrize("case", inv.CLI_CASES, ids=lambda c: c.name)
def test_cli_is_blind_to_one_hostile_record(case: inv.CliCase, record: inv.HostileRecord,
                                           cli_folder: Path) -> None:
    base = _cli_base(case.name, str(cli_folder))
    assert base.exit_code == 0, base
    obs = inv.cli_observation(case, cli_folder, record.line)
    assert base.differences(obs) == []


@functools.cache
def _api_base(name: str) -> inv.Observation:
    case = next(c for c in inv.api_cases() if c.name == name)
    obs = inv.api_observation(case, None)
    assert obs is not None
    return obs


API_NAMES = ["stable_histogram", "stable_histogram add_remove", "stable_histogram units", "laplace_histogram",
             "private_mean", "private_kmeans", "friendly (ball)",
             "aggregate pandas (count, sum, unbounded mean, quantile; selection)",
             "aggregate pandas (units array, domain, where)",
             "aggregate path (CSV; count, quantile with bounds; where with CAST)"]


def test_api_case_names_are_all_covered() -> None:
    assert sorted(API_NAMES) == sorted(c.name for c in inv.api_cases())


def _api_params() -> list:
    """(mechanism, record) pairs where the record has an in-memory form for that input kind."""
    kinds = {c.name: c.kind for c in inv.api_cases()}
    out = []
    for name in API_NAMES:
        for record in RECORDS:
            kind = kinds[name]
            usable = (True if kind in ("frame", "path") else
                      record.has_key if kind == "keys" else record.row is not None)
            if usable:
                out.append(pytest.param(name, record, id=f"{name}-{record.name}"))
    return out


@pytest.mark.parametrize("name, record", _api_params())
def test_api_is_blind_to_one_hostile_record(name: str, record: inv.HostileRecord) -> None:
    case = next(c for c in inv.api_cases() if c.name == name)
    base = _api_base(name)
    assert base.exception is None and base.warnings == (), base
    obs = inv.api_observation(case, record)
    assert obs is not None
    assert base.differences(obs) == []


# --- negative controls: the harness must catch a leak ---------------------------------------


def test_control_a_message_that_quotes_a_record_is_caught(tmp_path: Path, monkeypatch) -> None:
    """A histogram whose 'error' quotes the last record: the harness must see it."""
    import privagg.engines.duckdb as engine
    from privagg.errors import ParameterError

    original = engine.count_column

    def leaky(info, **kwargs):
        last = info.path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if b"nan" in last.lower():  # a data-dependent branch with a message that quotes data
            raise ParameterError(f"histogram: bad record {last[:40]!r}")
        return original(info, **kwargs)

    monkeypatch.setattr(engine, "count_column", leaky)
    case = inv.CLI_CASES[0]
    base = inv.cli_observation(case, tmp_path, None)
    nan_record = next(r for r in RECORDS if r.name == "NaN values")
    caught = inv.cli_observation(case, tmp_path, nan_record.line)
    assert base.differences(caught), "the harness missed an error message that quotes a record"
    assert caught.exit_code == 2 and b"nan" in caught.stderr


def test_control_a_warning_on_an_extreme_record_is_caught() -> None:
    """A mechanism that computes exp of the data without errstate: caught through FP events."""
    def naive_softmax(rows):
        arr = np.asarray([[float(v) for v in r] for r in rows if all(isinstance(v, float) for v in r)])
        return np.exp(arr).sum()

    case = inv.ApiCase("naive", "rows", naive_softmax)
    base = inv.api_observation(case, None)
    big = next(r for r in RECORDS if r.name == "±1e308")
    obs = inv.api_observation(case, big)
    assert base is not None and obs is not None
    assert base.differences(obs), "the harness missed a floating point event caused by one record"


def test_control_a_raw_escape_on_stdout_is_caught(tmp_path: Path) -> None:
    def echo(args: list[str]) -> tuple[int, bytes, bytes]:
        data = Path(args[1]).read_bytes() if len(args) > 1 and args[0] != "budget" else b""
        return 0, data[-64:], b""

    case = inv.CLI_CASES[1]
    base = inv.cli_observation(case, tmp_path, None, invoke=echo)
    ansi = next(r for r in RECORDS if r.name == "ANSI clear-screen key")
    assert base.differences(inv.cli_observation(case, tmp_path, ansi.line, invoke=echo))


def test_control_the_aggregate_inputs_carry_the_hostile_record(tmp_path: Path) -> None:
    """The Parquet CLI case and the pandas / path API cases really see D plus the record."""
    import pyarrow.parquet as pq

    nan = next(r for r in RECORDS if r.name == "NaN values")
    markup = next(r for r in RECORDS if r.name == "markup key")
    seen: list[tuple[int, list]] = []

    def probe(args: list[str]) -> tuple[int, bytes, bytes]:
        if args[0] == "aggregate":
            t = pq.read_table(args[1])
            seen.append((t.num_rows, t.column("key").to_pylist()[-1:] + t.column("x").to_pylist()[-1:]))
        return 0, b"", b""

    case = next(c for c in inv.CLI_CASES if c.input == "parquet")
    n = len(inv.base_rows())
    inv.cli_observation(case, tmp_path, None, invoke=probe)
    inv.cli_observation(case, tmp_path, markup.line, invoke=probe)
    inv.cli_observation(case, tmp_path, nan.line, invoke=probe)
    assert seen[0][0] == n and seen[1] == (n + 1, ["[bold red]x[/bold red]", 1.0])
    assert seen[2][0] == n + 1 and np.isnan(seen[2][1][1])
    frame = inv.base_frame(markup)
    assert len(frame) == n + 1 and frame["key"].iloc[-1] == "[bold red]x[/bold red]"
    assert [str(t) for t in frame.dtypes] == ["object", "float64", "float64"]
    got: list[bytes] = []
    path_case = inv.ApiCase("probe", "path", lambda p: got.append(Path(p).read_bytes()))
    inv.api_observation(path_case, markup)
    assert got[0].endswith(markup.line + b"\n")


def test_control_an_aggregate_warning_on_a_hostile_key_is_caught(monkeypatch) -> None:
    """An aggregate whose engine warns when it meets a markup key: the pandas case must show it."""
    import warnings

    import privagg.engines.grouped as grouped

    original = grouped.open_table

    def leaky(table, **kwargs):
        if hasattr(table, "columns") and table["key"].astype(str).str.contains("[", regex=False).any():
            warnings.warn("odd key", UserWarning, stacklevel=2)
        return original(table, **kwargs)

    monkeypatch.setattr(grouped, "open_table", leaky)
    case = next(c for c in inv.api_cases() if c.kind == "frame")
    base = inv.api_observation(case, None)
    markup = next(r for r in RECORDS if r.name == "markup key")
    obs = inv.api_observation(case, markup)
    assert base is not None and obs is not None
    assert base.differences(obs), "the harness missed a warning raised on one hostile key"
