"""Ctrl-C: one line on stderr, exit 130, and the ledger holds exactly one charge or none
(issue 10, item 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import privagg.accounting.ledger as ledger_module
import privagg.cli.histogram as histogram_module
import privagg.engines.duckdb as duckdb_engine
from privagg.accounting import Ledger
from privagg.cli.main import cli

main_thread_only = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                      reason="signal handlers need the main thread")


@pytest.fixture(autouse=True)
def _sigint_not_ignored():
    """A test run started in the background of a non-interactive shell (``cmd &``, ``nohup``)
    inherits SIGINT as SIG_IGN, and the CLI (rightly) leaves an ignored SIGINT alone; the tests
    that raise SIGINT need it deliverable, so it is reset to Python's default for each test."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run(csv_file: Path, ledger_path: Path, *extra: str):
    args = ["histogram", str(csv_file), "--column", "code", "--epsilon", "1", "--delta", "1e-6",
            "--ledger", str(ledger_path), *extra]
    return CliRunner().invoke(cli, args)


def charges(path: Path) -> int:
    with Ledger(path) as ledger:
        ledger.verify()
        return len(ledger.charges())


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


NOT_CHARGED = "privagg: interrupted; nothing was charged\n"
CHARGED_NOT_SHOWN = "privagg: interrupted after the ledger was charged; the release was not shown\n"
IN_CHARGE = ("privagg: interrupted during the ledger charge (recorded once or not at all: see "
             "'privagg budget show'); the release was not shown\n")


@pytest.mark.parametrize("target, attribute, stderr, recorded", [
    (duckdb_engine, "count_column", NOT_CHARGED, 0),             # while DuckDB counts
    (ledger_module, "_now", IN_CHARGE, 0),                       # inside the charge, before the INSERT
    (ledger_module, "MappingProxyType", IN_CHARGE, 1),           # after the COMMIT, inside charge()
    (histogram_module, "print_json", CHARGED_NOT_SHOWN, 1),      # after the charge, before output
])
def test_keyboard_interrupt_at_each_point(csv_file: Path, ledger_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          target, attribute: str, stderr: str, recorded: int) -> None:
    monkeypatch.setattr(target, attribute, _interrupt)
    result = run(csv_file, ledger_path, "--json")
    monkeypatch.undo()
    assert result.exit_code == 130, (result.stdout, result.stderr)
    assert result.stdout == "" and result.stderr == stderr
    assert charges(ledger_path) == recorded


@main_thread_only
def test_sigint_after_the_charge_waits_for_the_release(csv_file: Path, ledger_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real = histogram_module.print_json

    def print_json(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # Ctrl-C between the charge and the output
        time.sleep(0.01)
        real(*args, **kwargs)

    monkeypatch.setattr(histogram_module, "print_json", print_json)
    result = run(csv_file, ledger_path, "--json")
    assert result.exit_code == 130, (result.stdout, result.stderr)
    assert '"mechanism": "stable_histogram"' in result.stdout  # the charged release was shown
    assert result.stderr == "privagg: interrupted (the release above was charged and printed)\n"
    assert charges(ledger_path) == 1


@main_thread_only
def test_second_sigint_abandons_the_release_but_keeps_one_charge(csv_file: Path, ledger_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def print_json(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.01)
        signal.raise_signal(signal.SIGINT)
        time.sleep(0.01)
        raise AssertionError("not reached")

    monkeypatch.setattr(histogram_module, "print_json", print_json)
    result = run(csv_file, ledger_path, "--json")
    assert result.exit_code == 130 and result.stdout == ""
    assert result.stderr == CHARGED_NOT_SHOWN
    assert charges(ledger_path) == 1


@main_thread_only
def test_sigint_handler_is_restored(csv_file: Path, ledger_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    assert run(csv_file, ledger_path).exit_code == 0
    assert signal.getsignal(signal.SIGINT) is before


# The real process: SIGINT while DuckDB counts a generated file (DuckDB raises "Query interrupted").
_WRAPPER = textwrap.dedent("""
    import pathlib, sys
    import privagg.engines.duckdb as d
    real = d.count_column
    def count_column(*args, **kwargs):
        pathlib.Path(sys.argv[1]).touch()   # tell the test that the count has started
        return real(*args, **kwargs)
    d.count_column = count_column
    from privagg.cli.main import main
    main(sys.argv[2:])
""")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_while_duckdb_counts(tmp_path: Path, ledger_path: Path) -> None:
    import duckdb

    big = tmp_path / "big.csv"
    duckdb.sql(f"COPY (SELECT 'k' || (i % 997) AS code FROM range(6000000) t(i)) TO '{big}' (HEADER)")
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, str(started), "histogram", str(big), "--column", "code",
         "--epsilon", "1", "--delta", "1e-6", "--json", "--ledger", str(ledger_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert out == "" and err == NOT_CHARGED
    assert charges(ledger_path) == 0
