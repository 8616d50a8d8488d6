"""Ledger benchmark (not a test): latency of one charge, and charges per second with 1 and 8
concurrent processes on one ledger file.

Each charge is one ``BEGIN IMMEDIATE`` transaction in WAL mode with ``synchronous=FULL`` (an fsync
per commit), so the numbers mostly measure the disk's fsync. Run side by side in one go; compare
the ratios, not the absolute values, across machines.

usage: python benchmarks/ledger.py [--charges N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from privagg.accounting import Ledger, PrivacyLoss

LOSS = PrivacyLoss.approx(Fraction(1, 1000), Fraction(1, 10**12))


def _charge_loop(path: str, n: int, start_at: float) -> tuple[list[float], float, float]:
    """Charge ``n`` times; return each charge's latency (s) and the loop's start and end times."""
    latencies = []
    with Ledger(path) as ledger:
        time.sleep(max(0.0, start_at - time.time()))
        begin = time.time()
        for i in range(n):
            t0 = time.perf_counter()
            ledger.charge(LOSS, mechanism="bench", parameters={"i": i})
            latencies.append(time.perf_counter() - t0)
        end = time.time()
    return latencies, begin, end


def _run(path: str, procs: int, per_proc: int) -> tuple[float, float, float]:
    """(median latency s, p90 latency s, charges per second) for ``procs`` concurrent processes."""
    if procs == 1:
        parts = [_charge_loop(path, per_proc, 0.0)]
    else:
        ctx = mp.get_context("spawn")
        start_at = time.time() + 2.0
        with ctx.Pool(procs) as pool:
            results = [pool.apply_async(_charge_loop, (path, per_proc, start_at)) for _ in range(procs)]
            parts = [r.get(timeout=600) for r in results]
    lat = [x for part in parts for x in part[0]]
    wall = max(p[2] for p in parts) - min(p[1] for p in parts)
    lat.sort()
    return statistics.median(lat), lat[int(0.9 * (len(lat) - 1))], len(lat) / wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charges", type=int, default=400, help="charges per configuration")
    parser.add_argument("--dir", default=None, help="directory for the ledger file (default: tmp)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        rows = []
        for procs in (1, 8):
            path = str(Path(tmp) / f"ledger-{procs}.db")
            Ledger.create(path, epsilon=10**9, delta=Fraction(1, 2)).close()
            med, p90, rate = _run(path, procs, max(1, args.charges // procs))
            with Ledger(path) as ledger:
                ledger.verify()
                n = len(ledger.charges())
            rows.append((procs, n, med, p90, rate))
    print(f"ledger charge benchmark (WAL, synchronous=FULL, BEGIN IMMEDIATE); cpus={mp.cpu_count()}")
    print(f"{'processes':>9} {'charges':>8} {'median ms':>10} {'p90 ms':>8} {'charges/s':>10} {'vs 1 proc':>9}")
    base = rows[0][4]
    for procs, n, med, p90, rate in rows:
        print(f"{procs:>9} {n:>8} {med * 1e3:>10.2f} {p90 * 1e3:>8.2f} {rate:>10.0f} {rate / base:>8.2f}x")


if __name__ == "__main__":
    main()
