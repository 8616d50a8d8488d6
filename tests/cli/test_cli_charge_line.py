"""Every charged release says what it charged and what is left (issue 10, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "visits.csv"
    rows = np.random.default_rng(11).normal(size=(600, 2))
    lines = [f"{'A' if i % 2 else 'B'},{a:.4f},{b:.4f}" for i, (a, b) in enumerate(rows)]
    path.write_text("code,x,y\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "budget.db"
    Ledger.create(path, epsilon=5, delta=1e-4).close()
    return path


COMMANDS = {
    "histogram": (("--column", "code", "--epsilon", "1", "--delta", "1e-6"), {"column": "code"}),
    "mean": (("--columns", "x,y", "--epsilon", "1", "--delta", "1e-6", "--radius", "4"),
             {"columns": ["x", "y"]}),
    "kmeans": (("--columns", "x,y", "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--radius", "4"),
               {"columns": ["x", "y"]}),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_table_mode_prints_the_charge_on_stderr(csv_file: Path, ledger_path: Path, command: str) -> None:
    args, context = COMMANDS[command]
    result = CliRunner().invoke(cli, [command, str(csv_file), *args, "--ledger", str(ledger_path)])
    assert result.exit_code == 0, result.stderr
    with Ledger(ledger_path) as ledger:
        (charge,) = ledger.charges()
        left = ledger.remaining()
    eps, dlt = float(charge.loss.epsilon), float(charge.loss.delta or 0)
    expected = (f"charged ε={eps:.6g}, δ={dlt:.6g}; "
                f"left ε={float(left.epsilon):.6g}, δ={float(left.delta):.6g}\n")
    assert result.stderr.endswith(expected), result.stderr
    assert result.stderr.count("charged ε=") == 1 and "charged" not in result.stdout
    assert dict(charge.context) == {"command": command, "file": str(csv_file), **context}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_json_mode_has_charged_and_budget_left(csv_file: Path, ledger_path: Path, command: str) -> None:
    args, _ = COMMANDS[command]
    result = CliRunner().invoke(cli, [command, str(csv_file), *args, "--json", "--ledger", str(ledger_path)])
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    with Ledger(ledger_path) as ledger:
        (charge,) = ledger.charges()
        left = ledger.remaining()
    assert out["charged"]["epsilon"] == float(charge.loss.epsilon)
    assert out["charged"]["delta_exact"] == str(charge.loss.delta)
    assert out["budget_left"]["epsilon_exact"] == str(left.epsilon)
    assert out["budget_left"]["delta"] == float(left.delta)
    assert result.stderr == ""
    plain = CliRunner().invoke(cli, [command, str(csv_file), *args, "--json"])
    assert plain.exit_code == 0
    assert json.loads(plain.stdout)["charged"] is None and json.loads(plain.stdout)["budget_left"] is None
