"""Ctrl-C and ledger charges during one command.

The main command runs every subcommand inside :func:`session`, which handles SIGINT:

* **Before the ledger is charged**, Ctrl-C stops the command at once (DuckDB aborts a running
  count). Nothing was charged; the command prints ``privagg: interrupted`` and exits 130.
* **From the start of the charge until the release has been printed and written**, the first
  Ctrl-C is deferred: the charge (one SQLite transaction, committed or rolled back as a whole)
  and the release belong together, so the release is still shown, then the command exits 130. A
  second Ctrl-C in that window stops at once; the ledger then holds exactly the one charge and
  the release is lost (a charge is never lost or doubled, a release may be).

The session also remembers what was interrupted whatever exception follows a SIGINT (DuckDB
reports an interrupted query as ``RuntimeError``), so an interrupt is never reported as an
input error or an internal one.

:func:`charging` wraps a :class:`~privagg.accounting.Ledger` for the mechanisms: the charge is
recorded with a public ``context`` (the command, the file path, the column(s)), starts the
deferred window, and is remembered so the command can print what it charged and what is left.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from types import FrameType
from typing import Any

from ..accounting import Charge, Ledger
from ..accounting._exact import as_float, show

__all__ = ["Session", "session", "current", "charging", "charge_fields", "charge_line"]


@dataclass
class Session:
    """What happened to one command: SIGINTs received, whether they are deferred, its charges."""

    interrupts: int = 0
    deferring: bool = False
    output_done: bool = False
    charging: bool = False  # inside Ledger.charge: committed or not is unknown if it is cut short
    charges: list[Charge] = field(default_factory=list)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.interrupts += 1
        if self.deferring and self.interrupts == 1:
            return
        raise KeyboardInterrupt

    @property
    def interrupted(self) -> bool:
        return self.interrupts > 0


_current: Session | None = None


def current() -> Session | None:
    """The running command's session (None outside the main command)."""
    return _current


@contextmanager
def session() -> Iterator[Session]:
    """Install the SIGINT handler for one command (where signals can be handled: main thread,
    and SIGINT not ignored by the parent process)."""
    global _current
    state, previous, installed = Session(), None, False
    try:
        previous = signal.getsignal(signal.SIGINT)
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, state.handle)
            installed = True
    except ValueError:  # not the main thread: leave signals alone
        pass
    outer, _current = _current, state
    try:
        yield state
    finally:
        _current = outer
        if installed:
            signal.signal(signal.SIGINT, previous)


class _ChargingLedger:
    """The view of a Ledger that mechanisms get from the command line (only ``charge``)."""

    def __init__(self, ledger: Ledger, context: Mapping[str, Any]) -> None:
        self._ledger = ledger
        self._context = dict(context)

    def charge(self, loss: Any, *, mechanism: str, parameters: Mapping[str, Any] | None = None) -> Charge:
        state = current()
        if state is not None:
            state.deferring = True
            state.charging = True
        try:
            made = self._ledger.charge(loss, mechanism=mechanism, parameters=parameters,
                                       context=self._context)
        except Exception:  # refused (budget, locked file): nothing was recorded
            if state is not None:
                state.charging = False
                if not state.charges:
                    state.deferring = False  # Ctrl-C stops at once again
            raise
        # A KeyboardInterrupt (second Ctrl-C) leaves ``charging`` set: the transaction was
        # committed or rolled back as a whole, but this process cannot tell which.
        if state is not None:
            state.charging = False
            state.charges.append(made)
        return made


def charging(ledger: Ledger | None, **context: Any) -> _ChargingLedger | None:
    """``ledger`` as the mechanisms should see it, recording ``context`` (public values only)."""
    return None if ledger is None else _ChargingLedger(ledger, context)


def _amount(eps: Any, dlt: Any) -> dict[str, Any]:
    dlt = 0 if dlt is None else dlt
    return {"epsilon": as_float(eps), "delta": as_float(dlt), "epsilon_exact": str(eps),
            "delta_exact": str(dlt)}


def charge_fields() -> dict[str, Any]:
    """``{"charged": …, "budget_left": …}`` for ``--json`` (both null without a ledger)."""
    state = current()
    if state is None or not state.charges:
        return {"charged": None, "budget_left": None}
    eps = sum((c.loss.epsilon for c in state.charges), 0)
    dlt = sum((c.loss.delta or 0 for c in state.charges), 0)
    left = state.charges[-1].remaining
    return {"charged": _amount(eps, dlt),
            "budget_left": None if left is None else _amount(left.epsilon, left.delta)}


def charge_line() -> str | None:
    """``charged ε=…, δ=…; left ε=…, δ=…`` (None without a ledger)."""
    fields = charge_fields()
    if fields["charged"] is None:
        return None
    c, left = fields["charged"], fields["budget_left"]
    text = f"charged ε={show(_exact(c, 'epsilon'))}, δ={show(_exact(c, 'delta'))}"
    if left is not None:
        text += f"; left ε={show(_exact(left, 'epsilon'))}, δ={show(_exact(left, 'delta'))}"
    return text


def _exact(amount: Mapping[str, Any], name: str) -> Fraction:
    return Fraction(amount[f"{name}_exact"])
