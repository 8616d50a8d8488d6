"""A persistent privacy-budget ledger on SQLite (one file per dataset).

The file holds the dataset's total budget (ε, δ), every charge (time, mechanism, public
parameters, loss, and an optional public *context* such as the file and columns a command read)
and the running total spent. Each :meth:`Ledger.charge` is one
``BEGIN IMMEDIATE`` transaction (WAL journal, ``synchronous=FULL``): read what was spent, refuse
with :class:`privagg.BudgetExceededError` if the charge would not fit, else record it and commit.
Callers charge *before* drawing noise and show a result only after ``charge`` returned, so a crash
can lose a result but never a charge, and concurrent processes are serialised by SQLite's write
lock.

Accounting rule: basic composition of each charge's (ε, δ) against the total — a valid privacy
filter even when parameters are chosen adaptively (``docs/proofs/accounting.md``). Charges are
pure or approximate losses; convert a zCDP loss first with ``loss.to_approx(delta)``. Sums are exact
rationals stored as ``"p/q"`` text, so ten charges of 0.1 fit a total of 1 exactly.

SQLite keeps recent commits in ``PATH-wal`` next to the file: copy or move a ledger only while no
process has it open (or copy all three files). A missing, locked, corrupt or foreign file raises
:class:`privagg.ParameterError` with one line; the ledger is never reset or re-initialised.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from .._validate import fail
from ..errors import BudgetExceededError, ParameterError
from ._exact import exact
from .loss import PrivacyLoss

__all__ = ["Ledger", "Charge", "APPLICATION_ID", "SCHEMA_VERSION"]

APPLICATION_ID = 0x70724C67  # "prLg": PRAGMA application_id of every privagg ledger
SCHEMA_VERSION = 1
_FORMAT = "privagg-ledger"
_BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE budget (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epsilon TEXT NOT NULL, delta TEXT NOT NULL, created TEXT NOT NULL
);
CREATE TABLE spent (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epsilon TEXT NOT NULL, delta TEXT NOT NULL, charges INTEGER NOT NULL
);
CREATE TABLE charges (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL, mechanism TEXT NOT NULL, parameters TEXT NOT NULL,
    loss TEXT NOT NULL, epsilon TEXT NOT NULL, delta TEXT NOT NULL, context TEXT
);
"""
# Ledgers written before the ``context`` column existed are read as they are (every context is
# empty); the first charge with a context adds the column inside its write transaction.


@dataclass(frozen=True)
class Charge:
    """One recorded charge.

    Attributes
    ----------
    id : int
        Increasing identifier within the ledger.
    time : str
        UTC time of the commit, ISO 8601.
    mechanism : str
        Name of the mechanism that was charged.
    parameters : Mapping[str, Any]
        Its public parameters (read-only; JSON values).
    loss : PrivacyLoss
        The loss charged (pure or approximate).
    context : Mapping[str, Any]
        Public description of what was released (read-only; JSON values), e.g. the command,
        the file path and the column(s) the command line read; empty when none was given.
    remaining : PrivacyLoss or None
        The budget left right after this charge committed (total minus the charges up to and
        including this one). Not part of equality.
    """

    id: int
    time: str
    mechanism: str
    parameters: Mapping[str, Any]
    loss: PrivacyLoss
    context: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    remaining: PrivacyLoss | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"id": self.id, "time": self.time, "mechanism": self.mechanism,
                "parameters": dict(self.parameters), "loss": self.loss.to_dict(),
                "context": dict(self.context)}


def _frac(text: str) -> Fraction:
    value = Fraction(text)
    if value < 0:
        raise ValueError("negative amount")
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, Fraction):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(type(value).__name__)


class Ledger:
    """A dataset's privacy budget and every charge against it, persisted in one SQLite file.

    ``Ledger(path)`` opens an existing ledger; :meth:`create` makes a new one. Use as a context
    manager or call :meth:`close`. Any number of processes may open the same file at once (each
    its own ``Ledger``; do not share one across ``fork`` or threads).

    Parameters
    ----------
    path : str or os.PathLike
        An existing ledger file.

    Raises
    ------
    ParameterError
        The file is missing, not an SQLite database, not a privagg ledger (foreign file or
        unknown schema version), corrupt or inconsistent, or locked by another process for longer
        than 30 s. The file is never modified in that case.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "budget.db")
    >>> with Ledger.create(path, epsilon=1.0) as ledger:
    ...     c = ledger.charge(PrivacyLoss.pure(0.25), mechanism="demo", parameters={"k": 3})
    ...     print(ledger.remaining())
    ε=0.75
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._conn: sqlite3.Connection | None = None
        if not os.path.isfile(self.path):
            raise fail("Ledger", "path", "an existing privagg ledger file (create one with "
                       "'privagg budget init')", self.path)
        try:
            uri = "file:" + _quote_uri(os.path.abspath(self.path)) + "?mode=rw"
            conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._error("a readable and writable SQLite file", exc) from None
        try:
            self._total = self._check_and_load(conn)
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # ---------------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike[str], *, epsilon: Any, delta: Any = 0.0) -> Ledger:
        """Create a new ledger with total budget (ε, δ) and open it.

        Refuses (ParameterError) when ``path`` already exists: an existing ledger is never
        overwritten. The file is built under a temporary name and then linked into place
        atomically, so a crash leaves either no ledger or a complete one.
        """
        where = "Ledger.create"
        eps = exact(where, "epsilon", epsilon, rule="a finite number > 0", low=Fraction(0),
                    high=None, low_open=True)
        dlt = exact(where, "delta", delta, rule="a number in [0, 1)", low=Fraction(0),
                    high=Fraction(1), low_open=False)
        target = os.fspath(path)
        if os.path.lexists(target):
            raise fail(where, "path", "a path that does not exist yet (a ledger is never "
                       "overwritten)", target)
        directory = os.path.dirname(os.path.abspath(target))
        if not os.path.isdir(directory):
            raise fail(where, "path", "in an existing directory", target)
        try:
            fd, tmp = tempfile.mkstemp(prefix=".privagg-ledger-", suffix=".tmp", dir=directory)
        except OSError:
            raise fail(where, "path", "in a writable directory", target) from None
        os.close(fd)
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                for statement in _split(_SCHEMA):
                    conn.execute(statement)
                now = _now()
                conn.executemany("INSERT INTO meta VALUES (?, ?)",
                                 [("format", _FORMAT), ("schema_version", str(SCHEMA_VERSION)),
                                  ("created", now)])
                conn.execute("INSERT INTO budget VALUES (1, ?, ?, ?)", (str(eps), str(dlt), now))
                conn.execute("INSERT INTO spent VALUES (1, '0', '0', 0)")
                conn.execute("COMMIT")
            finally:
                conn.close()  # checkpoints the WAL into the main file
            try:
                _publish(tmp, target)
            except FileExistsError:
                raise fail(where, "path", "a path that does not exist yet (a ledger is never "
                           "overwritten)", target) from None
        finally:
            os.unlink(tmp)
        return cls(target)

    # ---------------------------------------------------------------------------------------
    @property
    def total(self) -> PrivacyLoss:
        """The total budget as a loss: pure when δ = 0, else approximate."""
        eps, dlt = self._total
        return PrivacyLoss.pure(eps) if dlt == 0 else PrivacyLoss.approx(eps, dlt)

    def spent(self) -> PrivacyLoss:
        """(Σε, Σδ) of all committed charges, read now (other processes may have charged)."""
        with self._read() as conn:
            eps, dlt, _ = self._spent_row(conn)
        return self._like_total(eps, dlt)

    def remaining(self) -> PrivacyLoss:
        """Total minus spent, read now."""
        with self._read() as conn:
            eps, dlt, _ = self._spent_row(conn)
        return self._like_total(self._total[0] - eps, self._total[1] - dlt)

    def charges(self) -> list[Charge]:
        """Every committed charge, oldest first."""
        with self._read() as conn:
            context = "context" if _has_context(conn) else "NULL"
            rows = conn.execute(f"SELECT id, time, mechanism, parameters, loss, {context} "
                                "FROM charges ORDER BY id").fetchall()
        out, eps, dlt = [], Fraction(0), Fraction(0)
        for row in rows:  # one row per charge: bookkeeping, not data
            c = self._charge_from_row(row)
            eps, dlt = eps + c.loss.epsilon, dlt + c.loss.delta
            out.append(Charge(c.id, c.time, c.mechanism, c.parameters, c.loss, c.context,
                              self._like_total(self._total[0] - eps, self._total[1] - dlt)))
        return out

    def charge(self, loss: PrivacyLoss, *, mechanism: str,
               parameters: Mapping[str, Any] | None = None,
               context: Mapping[str, Any] | None = None) -> Charge:
        """Record ``loss`` against the budget, or refuse without recording anything.

        Call this after validating inputs and before drawing any noise; show a result only after
        it returned.

        Parameters
        ----------
        loss : PrivacyLoss
            A pure or approximate loss (convert zCDP first with ``loss.to_approx(delta)``).
        mechanism : str
            Name of the mechanism (non-empty).
        parameters : Mapping, optional
            The mechanism's public parameters; must be JSON-serialisable (Fractions and numpy
            scalars are accepted). Never pass data.
        context : Mapping, optional
            A public description of the release (what the command line records: command, file
            path, column(s)); JSON-serialisable like ``parameters``. Never pass data.

        Returns
        -------
        Charge
            The committed record, with ``remaining`` (the budget left right after it).

        Raises
        ------
        BudgetExceededError
            The charge would make Σε exceed the total ε or Σδ exceed the total δ; nothing was
            recorded.
        ParameterError
            Bad arguments, or the file is locked for > 30 s, corrupt or inconsistent.
        """
        where = "Ledger.charge"
        if not isinstance(loss, PrivacyLoss):
            raise fail(where, "loss", "a PrivacyLoss", loss)
        if loss.kind == "zcdp":
            raise fail(where, "loss", "a pure or approximate loss (convert zCDP with "
                       "loss.to_approx(delta))", str(loss))
        if not isinstance(mechanism, str) or not mechanism.strip():
            raise fail(where, "mechanism", "a non-empty string", mechanism)
        try:
            params_json = json.dumps(dict(parameters or {}), sort_keys=True, allow_nan=False,
                                     default=_json_default)
        except (TypeError, ValueError):
            raise fail(where, "parameters", "a mapping of JSON-serialisable public values",
                       type(parameters).__name__) from None
        try:
            context_json = json.dumps(dict(context or {}), sort_keys=True, allow_nan=False,
                                      default=_json_default)
        except (TypeError, ValueError):
            raise fail(where, "context", "a mapping of JSON-serialisable public values",
                       type(context).__name__) from None
        loss_json = json.dumps(loss.to_dict(), sort_keys=True)
        with self._write() as conn:
            eps, dlt, count = self._spent_row(conn)
            new_eps, new_dlt = eps + loss.epsilon, dlt + loss.delta
            total_eps, total_dlt = self._total
            if new_eps > total_eps or new_dlt > total_dlt:
                raise BudgetExceededError(
                    f"Ledger.charge: {mechanism} needs ({loss}) but the remaining budget is "
                    f"({self._like_total(total_eps - eps, total_dlt - dlt)}) of "
                    f"({self.total}); nothing was charged or released.")
            stamp = _now()
            columns = "time, mechanism, parameters, loss, epsilon, delta"
            values = [stamp, mechanism, params_json, loss_json, str(loss.epsilon), str(loss.delta)]
            if context:
                if not _has_context(conn):  # a ledger from before the column existed
                    conn.execute("ALTER TABLE charges ADD COLUMN context TEXT")
                columns, values = columns + ", context", values + [context_json]
            marks = ", ".join("?" * len(values))
            cur = conn.execute(f"INSERT INTO charges ({columns}) VALUES ({marks})", values)
            conn.execute("UPDATE spent SET epsilon = ?, delta = ?, charges = ? WHERE id = 1",
                         (str(new_eps), str(new_dlt), count + 1))
            charge_id = cur.lastrowid
        return Charge(charge_id, stamp, mechanism, MappingProxyType(json.loads(params_json)), loss,
                      MappingProxyType(json.loads(context_json)),
                      self._like_total(total_eps - new_eps, total_dlt - new_dlt))

    def verify(self) -> None:
        """Full check: SQLite ``integrity_check`` and Σ of the charges equal to the recorded spend.

        Raises ParameterError when anything is wrong.
        """
        with self._read() as conn:
            try:
                result = conn.execute("PRAGMA integrity_check").fetchall()
            except sqlite3.DatabaseError as exc:
                raise self._error("an intact privagg ledger", exc) from None
            if result != [("ok",)]:
                raise self._error("an intact privagg ledger", "integrity_check failed")
            self._check_sums(conn)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self.path!r}, total={self.total})"

    # internals -----------------------------------------------------------------------------
    def _like_total(self, eps: Fraction, dlt: Fraction) -> PrivacyLoss:
        return PrivacyLoss.pure(eps) if self._total[1] == 0 else PrivacyLoss.approx(eps, dlt)

    def _error(self, rule: str, why: object) -> ParameterError:
        reason = str(why).splitlines()[0] if str(why) else type(why).__name__
        return fail("Ledger", "path", f"{rule} ({reason})", self.path)

    def _check_and_load(self, conn: sqlite3.Connection) -> tuple[Fraction, Fraction]:
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            if app_id != APPLICATION_ID:
                raise self._error("a privagg ledger", "foreign file: wrong application_id")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise self._error(f"a privagg ledger of schema version {SCHEMA_VERSION}",
                                  f"found version {version}")
            quick = conn.execute("PRAGMA quick_check").fetchall()
            if quick != [("ok",)]:
                raise self._error("an intact privagg ledger", "quick_check failed")
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format") != _FORMAT or meta.get("schema_version") != str(SCHEMA_VERSION):
                raise self._error("a privagg ledger", "foreign file: wrong meta table")
            row = conn.execute("SELECT epsilon, delta FROM budget WHERE id = 1").fetchone()
            if row is None:
                raise self._error("a consistent privagg ledger", "budget row missing")
            total = _frac(row[0]), _frac(row[1])
            if not (total[0] > 0 and total[1] < 1):
                raise self._error("a consistent privagg ledger", "budget out of range")
            self._check_sums(conn, total)
            return total
        except ParameterError:
            raise
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise self._error("a ledger not locked by another process", exc) from None
            raise self._error("a privagg ledger", exc) from None
        except sqlite3.DatabaseError as exc:
            raise self._error("an intact privagg ledger", exc) from None
        except (ValueError, ZeroDivisionError, TypeError) as exc:
            raise self._error("a consistent privagg ledger", f"bad stored value: {exc}") from None

    def _check_sums(self, conn: sqlite3.Connection,
                    total: tuple[Fraction, Fraction] | None = None) -> None:
        """Σ charges == recorded spend ≤ total (exact)."""
        total = total or self._total
        try:
            rows = conn.execute("SELECT epsilon, delta FROM charges").fetchall()
            eps, dlt, count = self._spent_row(conn)
            sum_eps = sum((_frac(r[0]) for r in rows), Fraction(0))
            sum_dlt = sum((_frac(r[1]) for r in rows), Fraction(0))
        except (ValueError, ZeroDivisionError, TypeError) as exc:
            raise self._error("a consistent privagg ledger", f"bad stored value: {exc}") from None
        if (sum_eps, sum_dlt, len(rows)) != (eps, dlt, count):
            raise self._error("a consistent privagg ledger", "charges do not add up to the "
                              "recorded spend")
        if eps > total[0] or dlt > total[1]:
            raise self._error("a consistent privagg ledger", "spend exceeds the total")

    def _spent_row(self, conn: sqlite3.Connection) -> tuple[Fraction, Fraction, int]:
        row = conn.execute("SELECT epsilon, delta, charges FROM spent WHERE id = 1").fetchone()
        if row is None:
            raise self._error("a consistent privagg ledger", "spent row missing")
        try:
            return _frac(row[0]), _frac(row[1]), int(row[2])
        except (ValueError, ZeroDivisionError, TypeError) as exc:
            raise self._error("a consistent privagg ledger", f"bad stored value: {exc}") from None

    def _charge_from_row(self, row: tuple[Any, ...]) -> Charge:
        loss = PrivacyLoss.from_dict(json.loads(row[4]))
        context = MappingProxyType(json.loads(row[5]) if row[5] else {})
        return Charge(int(row[0]), row[1], row[2], MappingProxyType(json.loads(row[3])), loss,
                      context)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise fail("Ledger", "self", "open (it was closed)", self.path)
        return self._conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise self._error("a ledger not locked by another process", exc) from None
        except sqlite3.DatabaseError as exc:
            raise self._error("an intact privagg ledger", exc) from None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; retried while another writer holds the lock."""
        conn = self._connection()
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise self._error("a privagg ledger", exc) from None
                if time.monotonic() >= deadline:
                    raise self._error("a ledger not locked by another process", exc) from None
                time.sleep(0.001)
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError):
                raise self._error("an intact privagg ledger", exc) from None
            raise


def _publish(tmp: str, target: str) -> None:
    """Put the finished file at ``target``, failing with FileExistsError if something is there."""
    try:
        os.link(tmp, target)  # atomic and never replaces an existing file
    except FileExistsError:
        raise
    except OSError:  # no hard links on this file system: exclusive create, then copy
        with open(tmp, "rb") as src, open(target, "xb") as out:
            out.write(src.read())
            out.flush()
            os.fsync(out.fileno())


def _has_context(conn: sqlite3.Connection) -> bool:
    """Whether the ``charges`` table has the (optional) ``context`` column."""
    return any(row[1] == "context" for row in conn.execute("PRAGMA table_info(charges)"))


def _split(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _quote_uri(path: str) -> str:
    return quote(path, safe="/:")

