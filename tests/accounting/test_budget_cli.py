"""``privagg budget init/show``: standalone on the click group, and through the main command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from privagg import ParameterError
from privagg.accounting import Ledger, PrivacyLoss
from privagg.cli.budget import budget


def test_init_show_table_and_json(tmp_path: Path) -> None:
    path = str(tmp_path / "b.db")
    runner = CliRunner()
    result = runner.invoke(budget, ["init", path, "--epsilon", "1", "--delta", "1e-6"])
    assert result.exit_code == 0, result.output
    assert "total budget ε=1, δ=1e-06" in result.output
    with Ledger(path) as ledger:
        assert ledger.total == PrivacyLoss.approx(1, 1e-6)
        ledger.charge(PrivacyLoss.approx(0.25, 1e-7), mechanism="stable_histogram",
                      parameters={"epsilon": 0.25})
        ledger.charge(PrivacyLoss.pure(0.1), mechanism="laplace_histogram", parameters={})
    result = runner.invoke(budget, ["show", path])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("stable_histogram" in line and "0.25" in line and "1e-07" in line for line in lines)
    assert any("remaining" in line and "0.65" in line and "9e-07" in line for line in lines)
    result = runner.invoke(budget, ["show", path, "--json"])
    data = json.loads(result.output)
    assert data["remaining"]["epsilon_exact"] == "13/20"
    assert [c["mechanism"] for c in data["charges"]] == ["stable_histogram", "laplace_histogram"]


@pytest.mark.parametrize(("args", "message"), [
    (["--epsilon", "nan"], "parameter 'epsilon' must be a finite number > 0; got 'nan'."),
    (["--epsilon", "abc"], "parameter 'epsilon' must be a finite number > 0; got 'abc'."),
    (["--epsilon", "0"], "parameter 'epsilon' must be a finite number > 0; got '0'."),
    (["--epsilon", "1", "--delta", "1"], "parameter 'delta' must be a number in [0, 1); got '1'."),
])
def test_init_rejects_bad_numbers(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(budget, ["init", str(tmp_path / "b.db"), "--delta", "0", *args])
    assert isinstance(result.exception, ParameterError)
    assert str(result.exception) == "privagg budget init: " + message
    assert not (tmp_path / "b.db").exists()


def test_init_is_exact_for_decimals(tmp_path: Path) -> None:
    path = str(tmp_path / "b.db")
    CliRunner().invoke(budget, ["init", path, "--epsilon", "0.3", "--delta", "0"])
    with Ledger(path) as ledger:
        for _ in range(3):
            ledger.charge(PrivacyLoss.pure(0.1), mechanism="m")
        assert ledger.remaining().epsilon == 0


def _privagg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "privagg", *args], capture_output=True,
                          text=True, timeout=120)


def test_exit_codes_through_the_main_command(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    assert _privagg("budget", "init", str(path), "--epsilon", "1", "--delta", "0").returncode == 0
    again = _privagg("budget", "init", str(path), "--epsilon", "1", "--delta", "0")
    assert again.returncode == 2 and "never overwritten" in again.stderr
    assert "Traceback" not in again.stderr and len(again.stderr.strip().splitlines()) == 1
    shown = _privagg("budget", "show", str(path), "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["charges"] == []
    bad = tmp_path / "notes.txt"
    bad.write_text("secret-value-123\n" * 50)
    refused = _privagg("budget", "show", str(bad))
    assert refused.returncode == 2 and "not a database" in refused.stderr
    assert "secret-value-123" not in refused.stderr


def test_init_requires_delta(tmp_path: Path) -> None:
    """δ used to default to 0, and every stable histogram, mean or k-means then exited 3."""
    from privagg.cli.main import cli

    path = tmp_path / "b.db"
    result = CliRunner().invoke(cli, ["budget", "init", str(path), "--epsilon", "1"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Missing option '--delta'" in result.stderr
    assert not path.exists()
    pure = CliRunner().invoke(cli, ["budget", "init", str(path), "--epsilon", "1", "--delta", "0"])
    assert pure.exit_code == 0, pure.stderr
    with Ledger(path) as ledger:
        assert ledger.total == PrivacyLoss.pure(1)
    assert "--delta 0" in CliRunner().invoke(cli, ["budget", "init", "--help"]).stdout


def test_charge_context_is_recorded_and_shown(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    with Ledger.create(path, epsilon=1, delta=1e-6) as ledger:
        made = ledger.charge(PrivacyLoss.approx(0.25, 1e-7), mechanism="stable_histogram",
                             parameters={"epsilon": 0.25},
                             context={"command": "histogram", "file": "[b]v.csv", "column": "dx"})
        assert made.remaining == PrivacyLoss.approx(0.75, 9e-7)
        assert ledger.charges() == [made]
        assert ledger.charges()[0].context == {"command": "histogram", "file": "[b]v.csv", "column": "dx"}
        assert ledger.charges()[0].remaining == made.remaining
    shown = CliRunner().invoke(budget, ["show", str(path), "--json"])
    assert json.loads(shown.output)["charges"][0]["context"]["file"] == "[b]v.csv"
    table = CliRunner().invoke(budget, ["show", str(path)], env={"COLUMNS": "200"})
    assert "[b]v.csv · dx" in table.output


def test_ledgers_without_the_context_column_stay_readable(tmp_path: Path) -> None:
    """A ledger written before this change (no ``context`` column) is read, and charged."""
    import sqlite3

    path = tmp_path / "old.db"
    with Ledger.create(path, epsilon=1, delta=1e-6) as ledger:
        ledger.charge(PrivacyLoss.pure(0.1), mechanism="m")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE charges DROP COLUMN context")
    conn.commit()
    conn.close()
    with Ledger(path) as ledger:
        (old,) = ledger.charges()
        assert old.context == {} and old.to_dict()["context"] == {}
        ledger.charge(PrivacyLoss.pure(0.1), mechanism="m", context={"file": "x.csv"})
        assert [c.context for c in ledger.charges()] == [{}, {"file": "x.csv"}]
        ledger.verify()
