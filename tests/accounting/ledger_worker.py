"""Worker process for the ledger race and crash tests (run as a script, not collected).

usage: ledger_worker.py MODE LEDGER EPSILON ATTEMPTS GO

MODE
  charge      : charge ε, then print "released <id>" and flush (the correct order).
  print_first : print "released <next id>" and flush, pause, then charge (broken order; the
                crash test's negative control).
  racy        : check the remaining budget and record the charge in two separate transactions
                (broken locking; the race test's negative control).
Each printed line is one released result. Unless GO is "-", the worker creates GO.ready.<pid> once
it is set up and then waits for the file GO to appear, so that all workers start together. It stops
at the first BudgetExceededError.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from fractions import Fraction
from pathlib import Path

from privagg import BudgetExceededError
from privagg.accounting import Ledger, PrivacyLoss


def _racy_charge(ledger: Ledger, loss: PrivacyLoss) -> int:
    conn = sqlite3.connect(ledger.path, timeout=30, isolation_level=None)
    try:
        (spent,) = conn.execute("SELECT epsilon FROM spent").fetchone()
        if ledger.total.epsilon - Fraction(spent) < loss.epsilon:
            raise BudgetExceededError("racy: budget exhausted")
        time.sleep(0.02)  # the window between check and write that a real transaction closes
        conn.execute("BEGIN IMMEDIATE")
        eps, count = conn.execute("SELECT epsilon, charges FROM spent").fetchone()
        cur = conn.execute(
            "INSERT INTO charges (time, mechanism, parameters, loss, epsilon, delta) "
            "VALUES ('t', 'racy', '{}', ?, ?, '0')",
            ('{"kind": "pure", "epsilon_exact": "%s"}' % loss.epsilon, str(loss.epsilon)))
        conn.execute("UPDATE spent SET epsilon = ?, charges = ?",
                     (str(Fraction(eps) + loss.epsilon), count + 1))
        conn.execute("COMMIT")
        return int(cur.lastrowid)
    finally:
        conn.close()


def main() -> None:
    mode, path, epsilon, attempts, go = sys.argv[1:6]
    loss = PrivacyLoss.pure(Fraction(epsilon))
    ledger = Ledger(path)
    if go != "-":
        Path(f"{go}.ready.{os.getpid()}").touch()
        while not os.path.exists(go):
            time.sleep(0.002)
    for i in range(int(attempts)):
        try:
            if mode == "charge":
                charge_id = ledger.charge(loss, mechanism="worker", parameters={"i": i}).id
            elif mode == "racy":
                charge_id = _racy_charge(ledger, loss)
            elif mode == "print_first":
                charge_id = len(ledger.charges()) + 1
                print(f"released {charge_id}", flush=True)
                time.sleep(0.05)
                ledger.charge(loss, mechanism="worker", parameters={"i": i})
                continue
            else:
                raise SystemExit(f"unknown mode {mode}")
        except BudgetExceededError:
            break
        print(f"released {charge_id}", flush=True)
    ledger.close()


if __name__ == "__main__":
    main()
