"""User-level histograms (issue 12): speed against plain DuckDB, and utility against peers.

(a) A ratings-like table (N rows, N/10 units, Zipf keys, heavy-tailed rows per unit) written once
    to Parquet in a temporary folder; privagg's bounded stable histogram through DuckDB against
    ``SELECT key, COUNT(DISTINCT unit) FROM t GROUP BY key`` on the same file, side by side,
    each in a subprocess whose peak RSS is measured. Targets: ratio ≤ 2, peak ≤ 2 GB.
(b) Utility at equal (ε, δ), ℓ0, ℓ∞ on the same data: keys released and median relative error
    of the released counts (against the true number of distinct units per key), privagg against
    PipelineDP (``pipeline-dp``) and OpenDP (``opendp``, Polars API), each when installed.

Run: ``python benchmarks/user_level.py [--rows 10000000] [--utility-rows 200000]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SEED = 20250601


def make_table(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_units = max(1, n // 10)
    w = 1.0 / np.arange(1, n_units + 1) ** 0.9  # heavy-tailed rows per unit
    w /= w.sum()
    units = rng.choice(n_units, size=n, p=w)
    units[:n_units] = np.arange(n_units)
    keys = rng.zipf(1.3, size=n) % 200_000
    return units.astype(np.int64), keys.astype(np.int64)


_CHILD = r"""
import json, resource, sys, time
path, what, l0, linf = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import duckdb
if what != "plain":
    from privagg.engines import duckdb as dd
    from privagg.engines.base import Bounding, draw_secret
    from privagg.engines.duckdb_bounding import DuckDBEngine
    from privagg.mechanisms.histogram import stable_histogram_from_counts
    from privagg.noise.rng import secure_generator
t0, c0 = time.perf_counter(), time.process_time()  # imports excluded on both sides
if what == "plain":
    con = duckdb.connect()
    con.sql("SET enable_progress_bar = false")  # its bar would print to stdout after 2 s
    rows = con.execute("SELECT key, COUNT(DISTINCT unit) FROM read_parquet($p) GROUP BY key", {"p": path}).fetchall()
    keys = len(rows)
else:
    eng = DuckDBEngine(dd.describe_column(path, "key"), dd.describe_column(path, "unit"))
    kc = eng.bounded_counts(Bounding(l0, linf, draw_secret(secure_generator()))).key_counts
    r = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, max_keys_per_unit=l0, max_rows_per_key=linf)
    keys = len(r.keys)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"seconds": dt, "cpu": cpu, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "keys": keys}))
"""


def _child(path: Path, what: str, l0: int = 1, linf: int = 1) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), what, str(l0), str(linf)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def speed(n: int, folder: Path, repeats: int = 3) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / f"ratings_{n}.parquet"
    if not path.exists():
        units, keys = make_table(n)
        pq.write_table(pa.table({"unit": units, "key": keys}), path)
    print(f"\n(a) speed, {n:,} rows, {max(1, n // 10):,} units, file {path.stat().st_size / 1e6:.0f} MB")
    # CPU seconds (all threads, of the best run) beside the wall clock: on a shared machine they
    # vary less than the wall clock.
    print(f"{'query':<34}{'seconds (best of %d)' % repeats:>22}{'CPU s':>8}{'peak RSS MB':>14}{'ratio':>8}")
    plain = min((_child(path, "plain") for _ in range(repeats)), key=lambda r: r["seconds"])
    print(f"{'COUNT(DISTINCT unit) GROUP BY key':<34}{plain['seconds']:>22.3f}{plain['cpu']:>8.2f}"
          f"{plain['rss_mb']:>14.0f}{1:>8.2f}")
    for l0, linf in ((1, 1), (3, 2)):
        r = min((_child(path, "privagg", l0, linf) for _ in range(repeats)), key=lambda r: r["seconds"])
        label = f"privagg stable, ℓ0={l0}, ℓ∞={linf}"
        print(f"{label:<34}{r['seconds']:>22.3f}{r['cpu']:>8.2f}{r['rss_mb']:>14.0f}"
              f"{r['seconds'] / plain['seconds']:>8.2f}")


def _truth(units: np.ndarray, keys: np.ndarray) -> dict[int, int]:
    pairs = np.unique(units * np.int64(1 << 20) + keys)
    k, c = np.unique(pairs % (1 << 20), return_counts=True)
    return dict(zip(k.tolist(), c.tolist(), strict=True))


def _score(name: str, released: dict, truth: dict) -> tuple[str, int, float, dict]:
    if not released:
        return name, 0, float("nan"), released
    rel = [abs(v - truth.get(k, 0)) / max(1, truth.get(k, 0)) for k, v in released.items()]
    return name, len(released), float(np.median(rel)), released


def _common_error(released: dict, truth: dict, common: set) -> float:
    """Median relative error on the keys every method released (same keys for all: a method that
    releases more small keys is not penalised for them)."""
    if not common:
        return float("nan")
    return float(np.median([abs(released[k] - truth[k]) / max(1, truth[k]) for k in common]))


def utility(n: int, eps: float, delta: float, l0: int, linf: int) -> None:
    import privagg

    units, keys = make_table(n, SEED + 1)
    truth = _truth(units, keys)  # distinct units per key (the ℓ∞ = 1 target)
    print(f"\n(b) utility, {n:,} rows, ε={eps}, δ={delta}, ℓ0={l0}, ℓ∞={linf}; "
          f"true keys {len(truth):,}; error vs distinct units per key")
    rows = []
    r = privagg.stable_histogram(keys, units=units, epsilon=eps, delta=delta, max_keys_per_unit=l0,
                                 max_rows_per_key=linf, rng=SEED)
    rows.append(_score("privagg stable (Laplace threshold)", dict(zip(r.keys.tolist(), r.counts.tolist(),
                                                                     strict=True)), truth))
    if l0 == 1:
        r = privagg.stable_histogram(keys, units=units, epsilon=eps, delta=delta, max_keys_per_unit=l0,
                                     max_rows_per_key=linf, rng=SEED, selection="optimal")
        rows.append(_score("privagg optimal selection (ε_c/2) + counts", dict(zip(r.keys.tolist(), r.counts.tolist(),
                                                                                 strict=True)), truth))
    for strategy in ("TRUNCATED_GEOMETRIC", "LAPLACE_THRESHOLDING", "GAUSSIAN_THRESHOLDING"):
        try:
            rows.append(_score(f"PipelineDP {strategy.lower()}", _pipeline_dp(units, keys, eps, delta, l0, linf,
                                                                             strategy), truth))
        except Exception as exc:  # noqa: BLE001 - report why a peer could not run
            rows.append((f"PipelineDP {strategy.lower()}: {type(exc).__name__}: {exc}"[:110], -1, float("nan"), {}))
    try:
        rows.append(_score("OpenDP (Polars, truncate_num_groups)", _opendp(units, keys, eps, delta, l0, linf), truth))
    except Exception as exc:  # noqa: BLE001
        rows.append((f"OpenDP: {type(exc).__name__}: {exc}"[:110], -1, float("nan"), {}))
    ran = [row[3] for row in rows if row[1] > 0]
    common = set.intersection(*(set(d) for d in ran)) if ran else set()
    print(f"{'method':<44}{'keys released':>15}{'median rel. error':>20}{'on %d common keys' % len(common):>22}")
    for name, k, err, released in rows:
        on_common = _common_error(released, truth, common) if k > 0 else float("nan")
        print(f"{name:<44}{k:>15}{err:>20.4f}{on_common:>22.4f}" if k >= 0 else name)


def _pipeline_dp(units, keys, eps, delta, l0, linf, strategy) -> dict:
    import pipeline_dp

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[pipeline_dp.Metrics.COUNT],
        max_partitions_contributed=l0, max_contributions_per_partition=linf,
        partition_selection_strategy=getattr(pipeline_dp.PartitionSelectionStrategy, strategy))
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                            value_extractor=lambda r: 0)
    result = engine.aggregate(list(zip(units.tolist(), keys.tolist(), strict=True)), params, extractors)
    accountant.compute_budgets()
    return {k: v.count for k, v in result}


def _opendp(units, keys, eps, delta, l0, linf) -> dict:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    lf = pl.LazyFrame({"unit": units, "key": keys})
    context = dp.Context.compositor(
        data=lf,
        privacy_unit=dp.unit_of(contributions=[dp.polars.Bound(per_group=linf), dp.polars.Bound(num_groups=l0,
                                                                                                 by=["key"])],
                                identifier="unit"),
        privacy_loss=dp.loss_of(epsilon=eps, delta=delta),
        split_evenly_over=1,
    )
    query = (context.query().truncate_per_group(linf).truncate_num_groups(l0, ordering="random")
             .group_by("key").agg(dp.len()))
    df = query.release().collect()
    return dict(zip(df["key"].to_list(), df["len"].to_list(), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 10_000_000])
    ap.add_argument("--utility-rows", type=int, default=200_000)
    args = ap.parse_args()
    print(f"seed {SEED}")
    with tempfile.TemporaryDirectory(prefix="privagg-bench-") as folder:
        for n in args.rows:
            t0 = time.perf_counter()
            speed(n, Path(folder))
            print(f"  ({time.perf_counter() - t0:.0f} s)")
    for l0, linf in ((1, 1), (3, 1)):
        utility(args.utility_rows, 1.0, 1e-6, l0, linf)


if __name__ == "__main__":
    main()
