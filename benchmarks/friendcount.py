"""Friend-counting benchmark (not a timed test). Run: ``python benchmarks/friendcount.py``.

Cases, each in its own subprocess (so peak memory is per case), measured side by side:

1. ``gemm``: n = 20 000, d = 200, ball radius at ~10% friends. ``friend_counts`` against the
   floor (the same upper-triangular blocked products alone, same block size and threads, through
   the same thread pool ``_map``) and a naive scipy ``cdist`` reference (row blocks, so it fits in
   memory); best of 3 interleaved runs, wall and CPU time (the CPU ratio is the steadier one on a
   shared machine). Target: <= 1.2x floor (issue 11 item 6).
2. ``tree``: n = 10^6, d = 2, 10 Gaussian clusters (sd 1, centers uniform in [0, 100]^2),
   r = 2 (the ball cuts through the clusters: the hard case), low-dimension path. Target <= 60 s.
   ``tree_tight``: the same with sd 0.2 (friendly data: most clusters inside one ball).
3. ``memory``: n = 200 000, d = 50, blocked products path: peak resident memory. Target <= 2 GB.
4. ``far``: n = 3000, d = 20 (``friend_counts`` gemm at r ≈ 0.9·√(2d), and the radius-selection
   bins), without a far row and with one row at 1e135 / 1e200 / 1e300 / 1.5e308, placed first
   (the screening anchor) or last: seconds and peak RSS side by side (issue 10: one far record
   must not change time or memory beyond a small factor). ``far_mean``: ``private_mean`` at its
   defaults (m_locate = 8000) on n = 8000, d = 20, without and with a row at 1e135.

Pass a case name to run only that case (``python benchmarks/friendcount.py tree``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from privagg.friendlycore import ball, friend_counts
from privagg.friendlycore.kernel import _map

BLOCK = 2048


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def case_gemm() -> dict:
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(1)
    n, d = 20_000, 200
    x = rng.normal(size=(n, d))
    r = float(np.sqrt(2 * d) * 0.95)
    threads = os.cpu_count() or 1
    starts = range(0, n, BLOCK)
    tasks = [(i, j) for i in starts for j in starts if j >= i]

    def product(i: int, j: int) -> None:
        x[i : i + BLOCK] @ x[j : j + BLOCK].T

    out = {}
    for rep in range(3):  # interleaved repetitions; report the best of each
        t, cpu = time.perf_counter(), time.process_time()
        _map(product, tasks, threads)
        out.setdefault("floor_s", []).append(time.perf_counter() - t)
        out.setdefault("floor_cpu_s", []).append(time.process_time() - cpu)
        t, cpu = time.perf_counter(), time.process_time()
        counts = friend_counts(x, ball(r), method="gemm", block_size=BLOCK)
        out.setdefault("friend_counts_s", []).append(time.perf_counter() - t)
        out.setdefault("friend_counts_cpu_s", []).append(time.process_time() - cpu)
    t = time.perf_counter()
    ref = np.zeros(n, dtype=np.int64)
    for i in starts:
        ref[i : i + BLOCK] = (cdist(x[i : i + BLOCK], x, "sqeuclidean") <= r * r).sum(
            axis=1
        )
    cdist_s = time.perf_counter() - t
    floor, fc = min(out["floor_s"]), min(out["friend_counts_s"])
    floor_cpu, fc_cpu = min(out["floor_cpu_s"]), min(out["friend_counts_cpu_s"])
    return {
        "case": "gemm n=20000 d=200",
        "floor_s": round(floor, 3),
        "friend_counts_s": round(fc, 3),
        "ratio_to_floor": round(fc / floor, 2),
        "cpu_ratio_to_floor": round(fc_cpu / floor_cpu, 2),  # less sensitive to other load
        "load": round(os.getloadavg()[0], 1),
        "cdist_s": round(cdist_s, 3),
        "mean_friend_fraction": round(float(counts.mean()) / n, 4),
        "counts_equal_cdist": bool(np.array_equal(counts, ref)),
        "threads": threads,
    }


def case_tree(sd: float = 1.0) -> dict:
    rng = np.random.default_rng(2)
    n = 1_000_000
    centers = rng.uniform(0, 100, size=(10, 2))
    x = centers[rng.integers(0, 10, size=n)] + rng.normal(scale=sd, size=(n, 2))
    t, cpu = time.perf_counter(), time.process_time()
    counts = friend_counts(x, ball(2.0), method="tree")
    secs, cpu = time.perf_counter() - t, time.process_time() - cpu
    check = rng.choice(n, size=50, replace=False)
    exact = all(
        counts[i] == np.count_nonzero(((x - x[i]) ** 2).sum(axis=1) <= 4.0)
        for i in check
    )
    return {
        "case": f"tree n=1e6 d=2 clustered sd={sd} r=2",
        "seconds": round(secs, 2),
        "cpu_seconds": round(cpu, 2),
        "mean_friend_fraction": round(float(counts.mean()) / n, 4),
        "pairs_counted": int(counts.sum()),
        "spot_check_50_points": exact,
        "peak_rss_mb": round(_peak_mb(), 1),
    }


def case_memory() -> dict:
    rng = np.random.default_rng(3)
    n, d = 200_000, 50
    x = rng.normal(size=(n, d))
    base = _peak_mb()
    t = time.perf_counter()
    counts = friend_counts(x, ball(float(np.sqrt(2 * d) * 0.9)), method="gemm")
    secs = time.perf_counter() - t
    return {
        "case": "memory n=200000 d=50 gemm",
        "seconds": round(secs, 1),
        "peak_rss_mb": round(_peak_mb(), 1),
        "peak_rss_before_counting_mb": round(base, 1),
        "mean_friend_fraction": round(float(counts.mean()) / n, 4),
    }


def _far_data(n: int, d: int, far: float | None, first: bool) -> np.ndarray:
    x = np.random.default_rng(4).normal(size=(n, d))
    if far is None:
        return x
    row = np.full((1, d), far)
    row[0, 1::2] *= -1.0
    return np.vstack([row, x]) if first else np.vstack([x, row])


def case_far_one(spec: str) -> dict:
    from privagg.friendlycore.radius import _pair_bins

    far_s, first_s = spec.split(",")
    far = None if far_s == "none" else float(far_s)
    x = _far_data(3000, 20, far, first_s == "first")
    t = time.perf_counter()
    with np.errstate(all="ignore"):
        friend_counts(x, ball(float(np.sqrt(40) * 0.9)), method="gemm")
    counts_s = time.perf_counter() - t
    t = time.perf_counter()
    with np.errstate(all="ignore"):
        _pair_bins(x)
    bins_s = time.perf_counter() - t
    return {"case": f"far n=3000 d=20 row={far_s} {first_s}", "friend_counts_s": round(counts_s, 3),
            "radius_bins_s": round(bins_s, 3), "peak_rss_mb": round(_peak_mb(), 1)}


def case_far_mean(spec: str) -> dict:
    from privagg import private_mean

    x = _far_data(8000, 20, None if spec == "none" else float(spec), True)
    t = time.perf_counter()
    with np.errstate(all="ignore"):
        private_mean(x, epsilon=1.0, delta=1e-6, rng=1)
    return {"case": f"far_mean n=8000 d=20 row={spec} first", "seconds": round(time.perf_counter() - t, 2),
            "peak_rss_mb": round(_peak_mb(), 1)}


FAR_SPECS = [f"{f},{p}" for f in ("none", "1e135", "1e200", "1e300", "1.5e308") for p in ("first", "last")]

CASES = {
    "gemm": case_gemm,
    "tree": case_tree,
    "tree_tight": lambda: case_tree(sd=0.2),
    "memory": case_memory,
    **{f"far:{spec}": (lambda spec=spec: case_far_one(spec)) for spec in FAR_SPECS},
    **{f"far_mean:{spec}": (lambda spec=spec: case_far_mean(spec)) for spec in ("none", "1e135")},
}
GROUPS = {"far": [f"far:{spec}" for spec in FAR_SPECS], "far_mean": ["far_mean:none", "far_mean:1e135"]}


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[1].startswith("--child="):
        print(json.dumps(CASES[argv[1].split("=", 1)[1]]()))
        return
    names = argv[1:] or ["gemm", "tree", "tree_tight", "memory", "far", "far_mean"]
    names = [case for name in names for case in GROUPS.get(name, [name])]
    for name in names:
        proc = subprocess.run(
            [sys.executable, __file__, f"--child={name}"],
            capture_output=True,
            text=True,
            check=True,
        )
        print(json.dumps(json.loads(proc.stdout.strip().splitlines()[-1])), flush=True)


if __name__ == "__main__":
    main(sys.argv)
