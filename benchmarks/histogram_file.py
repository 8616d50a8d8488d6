"""Benchmark (b): ``privagg histogram`` on a Parquet file against a bare DuckDB GROUP BY count.

A Parquet file of 10^7 string keys (~10^6 distinct, skewed) is generated once (fixed numpy seed)
and cached. Then, alternating and each in a fresh Python process (so both pay interpreter start
and imports, and peak memory is measured per process with ``wait4``):

- privagg: ``python -m privagg histogram FILE --column key --epsilon 1 --delta 1e-6 --json``
  (stdout discarded) — count in DuckDB, exact secure noise, threshold, JSON of the kept keys;
- floor: ``python -c`` with ``duckdb`` only: ``SELECT key, count(*) FROM read_parquet(FILE) GROUP
  BY key`` fetched as Arrow, DuckDB's default settings.

Targets: time ratio ≤ 1.5×, privagg's peak memory ≤ 2 GB. Run: ``python benchmarks/histogram_file.py``
(``--rows``, ``--distinct``, ``--repeat`` to change the case).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SEED = 20_240_612
TARGET_RATIO = 1.5
TARGET_PEAK_GB = 2.0

FLOOR = """
import sys, duckdb
con = duckdb.connect()
con.sql("SET enable_progress_bar = false")
sql = "SELECT key, count(*) AS count FROM read_parquet($p) GROUP BY key"
table = con.sql(sql, params={"p": sys.argv[1]}).to_arrow_table()
assert table.num_rows > 0
"""


def make_file(path: Path, rows: int, distinct: int, seed: int = SEED) -> None:
    """``rows`` keys ``"key-<i>"`` with i = ⌊D·u²⌋ (u uniform): a skewed head and a long tail."""
    rng = np.random.default_rng(seed)
    spread = distinct  # nearly all of the `distinct` possible keys occur (a few rare ones do not)
    chunk = 1_000_000
    writer = None
    try:
        for start in range(0, rows, chunk):
            size = min(chunk, rows - start)
            ids = (spread * rng.random(size) ** 2).astype(np.int64)
            keys = pc.binary_join_element_wise("key-", pa.array(ids).cast(pa.string()), "")
            table = pa.table({"key": keys})
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def run_measured(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system, all threads) and peak RSS (MB) of one child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        code = proc.returncode = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"{cmd[:4]} failed ({code}): {err.read().decode(errors='replace')}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--distinct", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "privagg-bench")
    args = parser.parse_args(argv)

    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"keys_{args.rows}_{args.distinct}_{SEED}.parquet"
    if not path.exists():
        t0 = time.perf_counter()
        make_file(path, args.rows, args.distinct)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s")
    meta = pq.read_metadata(path)
    print(
        f"(b) histogram of a Parquet file: {meta.num_rows:,} string keys, "
        f"{path.stat().st_size / 2**20:.0f} MiB, seed {SEED}"
    )

    privagg_cmd = [
        sys.executable, "-m", "privagg", "histogram", str(path), "--column", "key",
        "--epsilon", "1", "--delta", "1e-6", "--json",
    ]
    floor_cmd = [sys.executable, "-c", FLOOR, str(path)]
    results: dict[str, list[tuple[float, float, float]]] = {"privagg": [], "floor": []}
    run_measured(floor_cmd)  # warm the page cache
    for _ in range(args.repeat):
        results["floor"].append(run_measured(floor_cmd))
        results["privagg"].append(run_measured(privagg_cmd))

    def median(name: str, i: int) -> float:
        return statistics.median(r[i] for r in results[name])

    for name, label in (("floor", "bare DuckDB GROUP BY (floor)"), ("privagg", "privagg histogram --json")):
        wall = [r[0] for r in results[name]]
        peak = max(r[2] for r in results[name])
        print(
            f"  {label:30s} wall median {median(name, 0):5.2f} s (min {min(wall):5.2f} s)  "
            f"CPU median {median(name, 1):5.2f} s  peak RSS {peak:5.0f} MB"
        )
    ratio = median("privagg", 0) / median("floor", 0)
    cpu_ratio = median("privagg", 1) / median("floor", 1)
    peak_gb = max(r[2] for r in results["privagg"]) / 1024
    print(
        f"  ratio privagg / floor: wall {ratio:.2f}x, CPU {cpu_ratio:.2f}x  "
        f"(target <= {TARGET_RATIO}x on wall medians: {'met' if ratio <= TARGET_RATIO else 'NOT met'})"
    )
    print(f"  privagg peak memory: {peak_gb:.2f} GB  (target <= {TARGET_PEAK_GB} GB: "
          f"{'met' if peak_gb <= TARGET_PEAK_GB else 'NOT met'})")


if __name__ == "__main__":
    main()
