"""Benchmark of the histogram mechanisms (run by ``make bench``; not a timed test).

(a) n = 10^7 integer keys (Zipf, domain 10^5): ``laplace_histogram`` (secure generator, exact
    discrete Laplace) against the floor ``np.bincount`` + numpy's (insecure, floating-point)
    Laplace noise, measured alternately in the same process; target ≤ 3× the floor.
(c) per-call overhead on a 20-record input (simulation loops); target ≤ 200 µs.
(b) the Parquet/CLI case is ``benchmarks/histogram_file.py`` (called at the end if present).

Prints times and ratios; machines are noisy, so compare the ratios, not the absolute times.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from privagg import laplace_histogram, stable_histogram

N = 10_000_000
M = 100_000
REPEATS = 7
SEED = 20261130


def zipf_keys(n: int, m: int, seed: int) -> np.ndarray:
    """n Zipf(1.3) keys folded into [0, m)."""
    rng = np.random.default_rng(seed)
    return ((rng.zipf(1.3, size=n) - 1) % m).astype(np.int64)


def best_of(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def case_a() -> None:
    data = zipf_keys(N, M, SEED)
    domain = np.arange(M)
    rng = np.random.default_rng(SEED)

    def floor() -> np.ndarray:
        return np.bincount(data, minlength=M) / N + rng.laplace(scale=2.0 / N, size=M)

    def ours():
        return laplace_histogram(data, epsilon=1.0, domain=domain)

    def ours_stable():
        return stable_histogram(data, epsilon=1.0, delta=1e-6)

    ours()  # warm caches (noise tables, thresholds)
    ours_stable()
    t_floor, t_ours, t_stable = [], [], []
    for _ in range(REPEATS):  # alternate so that machine noise hits all alike
        t_floor.append(best_of(floor, 1))
        t_ours.append(best_of(ours, 1))
        t_stable.append(best_of(ours_stable, 1))
    f, o, s = min(t_floor), min(t_ours), min(t_stable)
    print(f"(a) n = {N:.0e} Zipf keys, domain {M:.0e}, best of {REPEATS}:")
    print(f"    floor  np.bincount + numpy Laplace (insecure) : {f * 1e3:8.1f} ms")
    print(
        f"    laplace_histogram (secure, exact)             : {o * 1e3:8.1f} ms   ratio {o / f:5.2f}x", end=""
    )
    print("  (target <= 3x)")
    print(f"    stable_histogram  (secure, exact)             : {s * 1e3:8.1f} ms   ratio {s / f:5.2f}x")


def case_c() -> None:
    rng = np.random.default_rng(SEED)
    data = rng.integers(0, 10, size=20).tolist()
    domain = list(range(10))
    calls = 2000
    for label, fn in (
        (
            "laplace_histogram, list of 20 ints, domain 10",
            lambda: laplace_histogram(data, epsilon=1.0, domain=domain),
        ),
        (
            "stable_histogram,  list of 20 ints          ",
            lambda: stable_histogram(data, epsilon=1.0, delta=1e-6),
        ),
        (
            "laplace_histogram, seeded Generator         ",
            lambda: laplace_histogram(data, epsilon=1.0, domain=domain, rng=rng),
        ),
    ):
        fn()
        per = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per.append((time.perf_counter() - t0) / calls)
        print(f"(c) {label}: median {statistics.median(per) * 1e6:7.1f} µs/call  (target <= 200 µs)")


def main() -> None:
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, seed={SEED}")
    case_a()
    case_c()
    file_bench = Path(__file__).with_name("histogram_file.py")
    if file_bench.exists():
        spec = importlib.util.spec_from_file_location("histogram_file", file_bench)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.main([])


if __name__ == "__main__":
    main()
