"""Ledger: creation, exact accounting, refusal of bad files (never a reset), locking."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

import privagg.accounting.ledger as ledger_module
from privagg import BudgetExceededError, ParameterError
from privagg.accounting import Ledger, PrivacyLoss

F = Fraction


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "budget.db"
    Ledger.create(path, epsilon=1.0, delta=1e-6).close()
    return path


def test_create_and_reopen(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        assert ledger.total == PrivacyLoss.approx(1, 1e-6)
        assert ledger.spent() == PrivacyLoss.approx(0, 0)
        assert ledger.remaining() == ledger.total
        assert ledger.charges() == []
        ledger.verify()
    con = sqlite3.connect(ledger_path)
    assert con.execute("PRAGMA application_id").fetchone()[0] == ledger_module.APPLICATION_ID
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_create_never_overwrites(ledger_path: Path) -> None:
    before = _digest(ledger_path)
    with pytest.raises(ParameterError, match="never overwritten"):
        Ledger.create(ledger_path, epsilon=5)
    assert _digest(ledger_path) == before


@pytest.mark.parametrize(("eps", "delta", "name"), [(0, 0, "epsilon"), (float("nan"), 0, "epsilon"),
                                                    (-1, 0, "epsilon"), (1, 1, "delta"),
                                                    (1, -0.1, "delta")])
def test_create_validates(tmp_path: Path, eps: float, delta: float, name: str) -> None:
    with pytest.raises(ParameterError, match=f"Ledger.create: parameter '{name}'"):
        Ledger.create(tmp_path / "x.db", epsilon=eps, delta=delta)
    assert not (tmp_path / "x.db").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_ten_charges_of_a_tenth_fit_exactly(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "b.db", epsilon=1.0) as ledger:
        for i in range(10):
            ledger.charge(PrivacyLoss.pure(0.1), mechanism="m", parameters={"i": i})
        assert ledger.remaining() == PrivacyLoss.pure(0)
        with pytest.raises(BudgetExceededError, match="nothing was charged"):
            ledger.charge(PrivacyLoss.pure(1e-12), mechanism="m", parameters={})
        assert len(ledger.charges()) == 10
        assert ledger.spent() == PrivacyLoss.pure(1)


def test_delta_is_a_budget_too(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        ledger.charge(PrivacyLoss.approx(0.1, 6e-7), mechanism="m")
        with pytest.raises(BudgetExceededError):
            ledger.charge(PrivacyLoss.approx(0.1, 6e-7), mechanism="m")
        ledger.charge(PrivacyLoss.approx(0.1, 4e-7), mechanism="m")  # exactly fills δ
        assert ledger.remaining() == PrivacyLoss.approx(0.8, 0)
        assert len(ledger.charges()) == 2


def test_charges_round_trip(ledger_path: Path) -> None:
    losses = [PrivacyLoss.pure(F(1, 3)), PrivacyLoss.approx(0.25, 1e-7),
              PrivacyLoss.zcdp(F(1, 10**4)).to_approx(1e-7)]
    with Ledger(ledger_path) as ledger:
        made = [ledger.charge(x, mechanism=f"m{i}", parameters={"eps": x.epsilon, "k": [1, 2]})
                for i, x in enumerate(losses)]
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == made
        assert [c.loss for c in ledger.charges()] == losses
        assert ledger.spent().epsilon == sum(x.epsilon for x in losses)
        assert made[0].parameters == {"eps": "1/3", "k": [1, 2]}
        ledger.verify()


def test_charge_validates_without_recording(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        with pytest.raises(ParameterError, match="convert zCDP"):
            ledger.charge(PrivacyLoss.zcdp(0.01), mechanism="m")
        with pytest.raises(ParameterError, match="'mechanism'"):
            ledger.charge(PrivacyLoss.pure(0.1), mechanism="")
        with pytest.raises(ParameterError, match="'parameters'"):
            ledger.charge(PrivacyLoss.pure(0.1), mechanism="m", parameters={"x": object()})
        with pytest.raises(ParameterError, match="'parameters'"):
            ledger.charge(PrivacyLoss.pure(0.1), mechanism="m", parameters={"x": float("nan")})
        with pytest.raises(ParameterError, match="'loss'"):
            ledger.charge(0.1, mechanism="m")  # type: ignore[arg-type]
        assert ledger.charges() == []


# --- files that must be refused, unchanged ---------------------------------------------------
def _refused(path: Path, match: str) -> None:
    before = _digest(path) if path.exists() else None
    with pytest.raises(ParameterError, match=match) as info:
        Ledger(path)
    assert "\n" not in str(info.value) and str(info.value).startswith("Ledger: parameter 'path'")
    if before is not None:
        assert _digest(path) == before, "a refused file was modified"


def test_missing_file_is_refused_and_not_created(tmp_path: Path) -> None:
    _refused(tmp_path / "nope.db", "existing privagg ledger")
    assert not (tmp_path / "nope.db").exists()


def test_non_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("name,secret\nalice,1\n" * 100)
    _refused(path, "not a database")


def test_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    _refused(path, "foreign file")


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE budget (epsilon TEXT)")
    con.commit()
    con.close()
    _refused(path, "foreign file: wrong application_id")


def test_unknown_schema_version_is_refused(ledger_path: Path) -> None:
    con = sqlite3.connect(ledger_path)
    con.execute("PRAGMA user_version = 99")
    con.close()
    _refused(ledger_path, "schema version 1 .found version 99")


@pytest.mark.parametrize("where", ["header", "middle", "truncate"])
def test_corrupted_file_is_refused(ledger_path: Path, where: str) -> None:
    with Ledger(ledger_path) as ledger:
        for i in range(40):  # several pages of charges
            ledger.charge(PrivacyLoss.pure(F(1, 1000)), mechanism="m",
                          parameters={"i": i, "pad": "x" * 1000})
    data = bytearray(ledger_path.read_bytes())
    assert len(data) > 8 * 4096
    if where == "header":
        data[0:16] = b"garbage garbage!"
    elif where == "middle":
        for k in range(4096, len(data), 4096):  # every page after the first: B-tree headers
            data[k:k + 8] = b"\xff" * 8
    else:
        data = data[: len(data) // 2 + 100]
    ledger_path.write_bytes(bytes(data))
    _refused(ledger_path, "not a database|intact|malformed")


def test_tampered_amount_is_refused(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        ledger.charge(PrivacyLoss.pure(0.5), mechanism="m")
    con = sqlite3.connect(ledger_path)
    con.execute("UPDATE charges SET epsilon = '1/10'")  # spend no longer adds up
    con.commit()
    con.close()
    _refused(ledger_path, "do not add up")
    con = sqlite3.connect(ledger_path)
    con.execute("UPDATE charges SET epsilon = 'abc'")
    con.commit()
    con.close()
    _refused(ledger_path, "bad stored value")


def test_verify_detects_tampering_after_open(ledger_path: Path) -> None:
    with Ledger(ledger_path) as ledger:
        ledger.charge(PrivacyLoss.pure(0.5), mechanism="m")
        con = sqlite3.connect(ledger_path)
        con.execute("DELETE FROM charges")
        con.commit()
        con.close()
        with pytest.raises(ParameterError, match="do not add up"):
            ledger.verify()


def test_locked_ledger_gives_a_clear_error(ledger_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_module, "_BUSY_TIMEOUT_S", 0.2)
    blocker = sqlite3.connect(ledger_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        with Ledger(ledger_path) as ledger:  # reading still works under WAL
            with pytest.raises(ParameterError, match="locked"):
                ledger.charge(PrivacyLoss.pure(0.1), mechanism="m")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []
        ledger.charge(PrivacyLoss.pure(0.1), mechanism="m")


def test_closed_ledger_refuses_use(ledger_path: Path) -> None:
    ledger = Ledger(ledger_path)
    ledger.close()
    ledger.close()
    with pytest.raises(ParameterError, match="closed"):
        ledger.spent()


def test_charge_happens_before_noise(ledger_path: Path) -> None:
    """The contract callers follow: charge, then draw; an exceeded budget draws nothing."""
    draws: list[int] = []

    def release(ledger: Ledger, eps: float) -> int:
        ledger.charge(PrivacyLoss.pure(eps), mechanism="toy", parameters={"epsilon": eps})
        draws.append(1)
        return len(draws)

    with Ledger(ledger_path) as ledger:
        release(ledger, 0.75)
        with pytest.raises(BudgetExceededError):
            release(ledger, 0.5)
    assert draws == [1]
    assert os.path.exists(ledger_path)
