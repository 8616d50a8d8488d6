"""Fixtures shared by the CLI tests (a test module may define its own under the same name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privagg.accounting import Ledger


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    """A one-column CSV of 110 codes (60 A, 50 B)."""
    path = tmp_path / "visits.csv"
    path.write_text("code\n" + "A\n" * 60 + "B\n" * 50, encoding="utf-8")
    return path


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """A fresh ledger with ε = 10, δ = 1e-4."""
    path = tmp_path / "budget.db"
    Ledger.create(path, epsilon=10, delta=1e-4).close()
    return path
