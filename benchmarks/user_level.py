"""User-level histograms (issue 12): speed against plain DuckDB, and utility against peers.

(a) A ratings-like table (N rows, N/10 units, Zipf keys, heavy-tailed rows per unit) written once
    to Parquet in a temporary folder; privagg's bounded stable histogram through DuckDB against
    ``SELECT key, COUNT(DISTINCT unit) FROM t GROUP BY key`` on the same file, side by side,
    each in a subprocess whose peak RSS is measured. Targets: ratio ≤ 2, peak ≤ 2 GB.
(b) Utility at equal (ε, δ), ℓ0, ℓ∞ on the same data (a ratings-like table, and one where units
    have few keys so that the bounding bias is small; ℓ0=ℓ∞=1, ℓ0=3, ℓ∞=2 and ℓ0=16, ℓ∞=1; privagg's
    threshold, selection="optimal" and noise="gaussian" options, plus ℓ0="auto"): keys released
    and median relative error of the released counts, medians over
    ``--reps`` repetitions; the error both against the true counts Σ_units min(rows, ℓ∞) (bias +
    noise) and against each method's own bounded counts (the noise error; for PipelineDP, whose
    bounded counts are not exposed, against their expectation). privagg against PipelineDP
    (``pipeline-dp``) and OpenDP (Polars API, truncate_num_groups, run in the throwaway venv of
    ``make bench-opendp-venv`` through ``--opendp-python``; see :func:`opendp_child` for two
    opendp 0.16 defects worked around). Then the Gaussian option over a public domain against
    PipelineDP's public partitions. Results: docs/utility/user_level.md.

Run: ``python benchmarks/user_level.py [--rows 10000000] [--utility-rows 200000] [--reps 10]
[--section speed|utility|all|bounding] [--tables all|ratings|few] [--configs 1,1 3,2 16,1] [--skip-public-domain]
[--skip-opendp]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20250601
OPENDP_VENV = Path(os.environ.get("PRIVAGG_OPENDP_VENV", "/tmp/privagg-opendp-venv"))  # `make bench-opendp-venv`


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


# ---------------------------------------------------------------- (b) utility
K = 200_000  # keys are in [0, K)
PEER_EPS_NOTE = ("PipelineDP and OpenDP cannot be seeded: their repetitions are plain reruns; the bounding of each "
                 "repetition is privagg's (seeded), PipelineDP's (uniform, per unit) and OpenDP's (one shared random "
                 "key order per repetition).")


def make_few_table(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Units with few keys (1 + Poisson(0.5) rows each, mostly one key): the bounding bias is small."""
    rng = np.random.default_rng(seed)
    per = 1 + rng.poisson(0.5, size=n)
    units = np.repeat(np.arange(n), per)[:n]
    keys = rng.zipf(1.3, size=n) % K
    return units.astype(np.int64), keys.astype(np.int64)


def _pairs(units: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unit, key, rows) of every distinct (unit, key) pair, sorted by unit then key."""
    pair, rows = np.unique(units * np.int64(K) + keys, return_counts=True)
    return pair // K, pair % K, rows


def _truth(units: np.ndarray, keys: np.ndarray, linf: int = 1) -> np.ndarray:
    """Dense count per key of Σ_units min(rows, ℓ∞) (ℓ∞ = 1: distinct units per key): no ℓ0 bound."""
    _, k, r = _pairs(units, keys)
    return np.bincount(k, weights=np.minimum(r, linf), minlength=K)


def _expected_bounded(units: np.ndarray, keys: np.ndarray, l0: int, linf: int) -> np.ndarray:
    """E[bounded count] per key when each unit keeps ℓ0 of its d distinct keys uniformly at random
    (independently of the other units): Σ_units min(1, ℓ0/d)·min(rows, ℓ∞)."""
    u, k, r = _pairs(units, keys)
    _, inv, d = np.unique(u, return_inverse=True, return_counts=True)
    return np.bincount(k, weights=np.minimum(1.0, l0 / d[inv]) * np.minimum(r, linf), minlength=K)


def _shared_order_bounded(units: np.ndarray, keys: np.ndarray, l0: int, linf: int, perm: np.ndarray) -> np.ndarray:
    """The bounded counts when every unit keeps its ℓ0 keys of smallest ``perm[key]`` (OpenDP's
    truncate_num_groups(keep="first") on keys relabelled by ``perm``): deterministic given perm."""
    u, k, r = _pairs(units, keys)
    order = np.lexsort((perm[k], u))
    u, k, r = u[order], k[order], r[order]
    first = np.r_[0, np.flatnonzero(np.diff(u)) + 1]
    rank = np.arange(len(u)) - np.repeat(first, np.diff(np.r_[first, len(u)]))
    keep = rank < l0
    return np.bincount(k[keep], weights=np.minimum(r[keep], linf), minlength=K)


def _median_rel(keys: np.ndarray, counts: np.ndarray, target: np.ndarray) -> float:
    if len(keys) == 0:
        return float("nan")
    t = target[keys]
    return float(np.median(np.abs(counts - t) / np.maximum(1.0, t)))


def _mean_rel(keys: np.ndarray, counts: np.ndarray, target: np.ndarray) -> float:
    """The mean of the same relative errors: not quantized by integer noise, and it weighs the keys
    whose bounding bias is large (a median over a few keys hides them)."""
    if len(keys) == 0:
        return float("nan")
    t = target[keys]
    return float(np.mean(np.abs(counts - t) / np.maximum(1.0, t)))


def _privagg_rows(units, keys, eps, delta, l0, linf, seed) -> list[tuple[str, np.ndarray, np.ndarray, Any]]:
    """privagg's releases of one repetition: (name, keys, counts, own bounded counts or None)."""
    import privagg
    from privagg.mechanisms.histogram import _bounded
    from privagg.noise.rng import resolve_rng

    def dense(kc) -> np.ndarray:  # the bounded counts the release used: its generator's first draw is the secret
        return np.bincount(np.asarray(kc.keys, dtype=np.int64), weights=kc.counts, minlength=K)

    def bounded(bl0: int) -> np.ndarray:
        return dense(_bounded("stable_histogram", keys, units, (bl0, linf), resolve_rng(seed)[0]))

    out = []
    common = {"units": units, "epsilon": eps, "delta": delta, "max_rows_per_key": linf, "rng": seed}
    r = privagg.stable_histogram(keys, max_keys_per_unit=l0, **common)
    out.append(("privagg stable (Laplace threshold)", r.keys, r.counts, bounded(l0)))
    r = privagg.stable_histogram(keys, max_keys_per_unit=l0, selection="optimal", **common)
    out.append(("privagg optimal selection + counts", r.keys, r.counts, bounded(l0)))
    r = privagg.stable_histogram(keys, max_keys_per_unit=l0, noise="gaussian", **common)
    out.append(("privagg stable, noise=gaussian", r.keys, r.counts, bounded(l0)))
    r = privagg.stable_histogram(keys, max_keys_per_unit=l0, selection="gaussian", **common)
    out.append(("privagg gaussian selection + counts", r.keys, r.counts, bounded(l0)))
    # the peers release no total: equal release content is privagg with total_epsilon_share=0 (no
    # noisy total, no frequencies, all of ε on the counts)
    for name, kw in (("privagg stable, no total (share 0)", {}),
                     ("privagg randomized T, no total (share 0)", {"threshold": "randomized"}),
                     ("privagg optimal, no total (share 0)", {"selection": "optimal"}),
                     ("privagg gaussian, no total (share 0)", {"noise": "gaussian"}),
                     ("privagg gauss. sel., no total (share 0)", {"selection": "gaussian"})):
        r = privagg.stable_histogram(keys, max_keys_per_unit=l0, total_epsilon_share=0, **kw, **common)
        out.append((name, r.keys, r.counts, bounded(l0)))
    r = privagg.stable_histogram(keys, max_keys_per_unit="auto", **common)
    out.append(("privagg stable, ℓ0=auto", r.keys, r.counts, None, r.auto_l0.max_keys_per_unit))
    return out


def _pipeline_dp(units, keys, eps, delta, l0, linf, strategy=None, noise="LAPLACE", public=None
                 ) -> tuple[np.ndarray, np.ndarray]:
    import pipeline_dp

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    extra = {} if strategy is None else {
        "partition_selection_strategy": getattr(pipeline_dp.PartitionSelectionStrategy, strategy)}
    params = pipeline_dp.AggregateParams(
        noise_kind=getattr(pipeline_dp.NoiseKind, noise), metrics=[pipeline_dp.Metrics.COUNT],
        max_partitions_contributed=l0, max_contributions_per_partition=linf, **extra)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                            value_extractor=lambda r: 0)
    result = engine.aggregate(list(zip(units.tolist(), keys.tolist(), strict=True)), params, extractors,
                              public_partitions=None if public is None else public.tolist())
    accountant.compute_budgets()
    got = sorted((int(k), float(v.count)) for k, v in result)
    return np.array([k for k, _ in got], dtype=np.int64), np.array([v for _, v in got])


def _opendp_perms(seeds: list[int]) -> list[np.ndarray]:
    return [np.random.default_rng([seed, 7]).permutation(K) for seed in seeds]


def _run_opendp(python: Path, units, keys, eps, delta, l0, linf, seeds, folder: Path
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """All repetitions of one configuration in one child of the OpenDP venv (polars 1.36.1)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = folder / "opendp_user_level.parquet"
    pq.write_table(pa.table({"unit": units, "g": keys}), data)
    spec = {"data": str(data), "epsilon": eps, "delta": delta, "l0": l0, "linf": linf,
            "perms": [p.tolist() for p in _opendp_perms(seeds)]}
    (folder / "opendp_user_level.json").write_text(json.dumps(spec))
    cmd = [str(python), "-I", "-W", "ignore::FutureWarning", str(Path(__file__).resolve()), "--opendp-child",
           str(folder / "opendp_user_level.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"OpenDP child exit {proc.returncode}: {last[:200]}")
    got = json.loads([line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
    return [(np.asarray(k, dtype=np.int64), np.asarray(c, dtype=float)) for k, c in got]


def opendp_child(spec_path: str) -> None:
    """Runs inside the OpenDP venv. opendp 0.16 with polars 1.36.1: truncate_num_groups(keep="sample")
    fails ("multiple fields with name 'g' found") and truncate_num_groups(k) keeps k − 1 groups per
    unit (a 1-based dense rank filtered by ``< k``: k = 1 keeps nothing). So the keys are relabelled
    by a random permutation (a data-independent shared order, as keep="sample"'s hash order is) and
    truncate_num_groups(ℓ0 + 1, keep="first") keeps the ℓ0 keys of smallest label per unit; the
    privacy unit declares ℓ0, which is what the data then satisfies and what OpenDP calibrates on."""
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    spec = json.loads(Path(spec_path).read_text())
    l0, linf = spec["l0"], spec["linf"]
    base = pl.read_parquet(spec["data"])
    result = []
    for perm in spec["perms"]:
        perm = np.asarray(perm, dtype=np.int64)
        inverse = np.empty_like(perm)
        inverse[perm] = np.arange(len(perm))
        lf = base.with_columns(g=pl.Series(perm[base["g"].to_numpy()])).lazy()
        context = dp.Context.compositor(
            data=lf, privacy_unit=dp.unit_of(contributions=[dp.polars.Bound(per_group=linf),
                                                             dp.polars.Bound(num_groups=l0, by=["g"])],
                                             identifier="unit"),
            privacy_loss=dp.loss_of(epsilon=spec["epsilon"], delta=spec["delta"]), split_evenly_over=1)
        query = (context.query().truncate_per_group(linf, by=["g"]).truncate_num_groups(l0 + 1, by=["g"], keep="first")
                 .group_by("g").agg(dp.len()))
        df = query.release().collect()
        result.append([inverse[df["g"].to_numpy()].tolist(), df["len"].to_list()])
    print("RESULT " + json.dumps(result))


def utility(units: np.ndarray, keys: np.ndarray, label: str, eps: float, delta: float, l0: int, linf: int,
            seeds: list[int], opendp_python: Path | None, folder: Path) -> None:
    truth = _truth(units, keys, linf)
    expected = _expected_bounded(units, keys, l0, linf)
    print(f"\n(b) utility, {label}: {len(keys):,} rows, {len(np.unique(units)):,} units, "
          f"{int((truth > 0).sum()):,} true keys; ε={eps}, δ={delta}, ℓ0={l0}, ℓ∞={linf}; {len(seeds)} repetitions")
    per_method: dict[str, list[tuple]] = {}  # name → per repetition (keys, counts, own bounded or None, note)

    def add(name, k, c, own, note=""):
        per_method.setdefault(name, []).append((np.asarray(k, dtype=np.int64), np.asarray(c, dtype=float), own, note))

    failures: dict[str, str] = {}
    for seed in seeds:
        for row in _privagg_rows(units, keys, eps, delta, l0, linf, seed):
            add(row[0], row[1], row[2], row[3], row[4] if len(row) > 4 else "")
        for strategy in ("TRUNCATED_GEOMETRIC", "LAPLACE_THRESHOLDING", "GAUSSIAN_THRESHOLDING"):
            name = f"PipelineDP {strategy.lower()}"
            if name in failures:
                continue
            try:
                add(name, *_pipeline_dp(units, keys, eps, delta, l0, linf, strategy), expected, "*")
            except Exception as exc:  # noqa: BLE001 - report why a peer could not run
                failures[name] = f"{type(exc).__name__}: {exc}"[:100]
    name = "OpenDP Polars (truncate_num_groups)"
    if opendp_python is None:
        failures[name] = f"skipped (no OpenDP venv at {OPENDP_VENV}; `make bench-opendp-venv`)"
    else:
        try:
            got = _run_opendp(opendp_python, units, keys, eps, delta, l0, linf, seeds, folder)
            for (k, c), perm in zip(got, _opendp_perms(seeds), strict=True):
                add(name, k, c, _shared_order_bounded(units, keys, l0, linf, perm))
        except Exception as exc:  # noqa: BLE001
            failures[name] = f"{type(exc).__name__}: {exc}"[:100]
    commons = [set.intersection(*(set(reps[i][0].tolist()) for reps in per_method.values()))
               for i in range(len(seeds))]
    print(f"{'method':<40}{'keys released':>15}{'rel. error':>12}{'on common':>11}{'noise error':>13}"
          f"{'mean, common':>14}")
    print(f"{'':<40}{'(min–max)':>15}{'vs true':>12}{'keys, true':>11}{'vs bounded':>13}{'keys, true':>14}")
    for name, reps in per_method.items():
        nk = [len(r[0]) for r in reps]
        err = np.median([_median_rel(r[0], r[1], truth) for r in reps])
        on_common, mean_common = [], []
        for (k, c, _, _), common in zip(reps, commons, strict=True):
            sel = np.isin(k, np.fromiter(common, dtype=np.int64, count=len(common)))
            on_common.append(_median_rel(k[sel], c[sel], truth))
            mean_common.append(_mean_rel(k[sel], c[sel], truth))
        star = "*" if reps[0][3] == "*" else " "
        noise = (f"{np.median([_median_rel(r[0], r[1], r[2]) for r in reps]):.4f}{star}"
                 if reps[0][2] is not None else "- ")
        chosen = [r[3] for r in reps if isinstance(r[3], int)]  # ℓ0=auto: the chosen ℓ0
        label_ = name + (f" (chose {min(chosen)}–{max(chosen)})" if chosen else "")
        print(f"{label_:<40}{f'{int(np.median(nk))} ({min(nk)}–{max(nk)})':>15}{err:>12.4f}"
              f"{np.median(on_common):>11.4f}{noise:>13}{np.mean(mean_common):>14.4f}")
    for name, why in failures.items():
        print(f"{name}: {why}")
    print(f"  medians over the repetitions; 'on common keys' = the keys every method released in that repetition "
          f"(median {int(np.median([len(c) for c in commons]))}); noise error against the method's own bounded "
          f"counts, * = against E[bounded count] under uniform per-unit sampling (PipelineDP's own are not exposed); "
          f"'mean, common' = the mean over the repetitions of the mean relative error on the common keys")


def public_domain(units: np.ndarray, keys: np.ndarray, eps: float, delta: float, l0: int, linf: int,
                  seeds: list[int]) -> None:
    """The Gaussian option: laplace_histogram over a public domain (the true keys) against PipelineDP
    with public partitions, Laplace and Gaussian noise."""
    import privagg
    from privagg.mechanisms.histogram import _bounded
    from privagg.engines.counting import as_domain
    from privagg.noise.rng import resolve_rng

    truth = _truth(units, keys, linf)
    domain = np.flatnonzero(truth > 0)
    print(f"\n(b) public domain (the {len(domain):,} true keys given), {len(keys):,} rows; ε={eps}, δ={delta}, "
          f"ℓ0={l0}, ℓ∞={linf}; {len(seeds)} repetitions; every domain key released")
    print(f"{'method':<44}{'rel. error vs true':>20}{'noise error vs bounded':>24}{'mean rel. error':>17}"
          f"{'RMSE vs true':>14}")
    rows: dict[str, list[tuple[float, ...]]] = {}
    expected = _expected_bounded(units, keys, l0, linf)
    for seed in seeds:
        own_kc = _bounded("laplace_histogram", keys, units, (l0, linf), resolve_rng(seed)[0],
                          domain=as_domain(domain, "laplace_histogram"))
        own = np.zeros(K)
        own[np.asarray(own_kc.keys, dtype=np.int64)] = own_kc.counts
        for noise in ("laplace", "gaussian"):
            r = privagg.laplace_histogram(keys, units=units, domain=domain, epsilon=eps,
                                          delta=delta if noise == "gaussian" else None, noise=noise,
                                          max_keys_per_unit=l0, max_rows_per_key=linf, rng=seed)
            k = np.asarray(r.keys, dtype=np.int64)
            rows.setdefault(f"privagg laplace_histogram noise={noise}", []).append(
                (_median_rel(k, r.counts, truth), _median_rel(k, r.counts, own), _mean_rel(k, r.counts, truth),
                 float(np.sqrt(np.mean((r.counts - truth[k]) ** 2)))))
        for noise in ("LAPLACE", "GAUSSIAN"):
            try:
                k, c = _pipeline_dp(units, keys, eps, delta, l0, linf, noise=noise, public=domain)
                rows.setdefault(f"PipelineDP public partitions {noise.lower()}", []).append(
                    (_median_rel(k, c, truth), _median_rel(k, c, expected), _mean_rel(k, c, truth),
                     float(np.sqrt(np.mean((c - truth[k]) ** 2)))))
            except Exception as exc:  # noqa: BLE001
                rows[f"PipelineDP {noise.lower()}: {type(exc).__name__}: {exc}"[:100]] = []
    for name, reps in rows.items():
        if not reps:
            print(name)
            continue
        a, b = np.median(np.array(reps), axis=0)[:2]
        mean_err, rmse = np.mean(np.array(reps), axis=0)[2:]
        print(f"{name:<44}{a:>20.4f}{b:>23.4f}{'*' if name.startswith('PipelineDP') else ' '}{mean_err:>16.4f}"
              f"{rmse:>14.3f}")
    print("  * = against E[bounded count] under uniform per-unit sampling")


def bounding_effect(units: np.ndarray, keys: np.ndarray, label: str, seeds: list[int]) -> None:
    """ℓ0 = ℓ∞ = 1: the expected number of keys the share-0 Laplace threshold (T, DL(1/ε), the
    calibration OpenDP uses) releases on privagg's bounding (one uniform key per unit) and on
    OpenDP's (the first key in one shared random order), exactly (Σ_keys P[c + Z ≥ T]): what is left
    of a gap at equal calibration is the bounding rule, not noise or threshold."""
    from privagg.mechanisms.histogram import StableHistogramParams, _bounded
    from privagg.noise.rng import resolve_rng

    p = StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=0, bounds=(1, 1))
    sf = np.array([p.law.sf(p.threshold - c) if c > 0 else 0.0 for c in range(2000)])
    b = float(StableHistogramParams.build(1.0, 1e-6, "add_remove", "randomized", total_epsilon_share=0,
                                          bounds=(1, 1)).boundary_probability)
    sf_b = sf + np.array([b * p.law.pmf(p.threshold - 1 - c) if c > 0 else 0.0 for c in range(2000)])
    own, od, rnd = [], [], []
    for seed, perm in zip(seeds, _opendp_perms(seeds), strict=True):
        kc = _bounded("stable_histogram", keys, units, (1, 1), resolve_rng(seed)[0])
        own.append(sf[np.minimum(np.asarray(kc.counts, dtype=np.int64), 1999)].sum())
        rnd.append(sf_b[np.minimum(np.asarray(kc.counts, dtype=np.int64), 1999)].sum())
        c = _shared_order_bounded(units, keys, 1, 1, perm).astype(np.int64)
        od.append(sf[np.minimum(c[c > 0], 1999)].sum())
    print(f"(b) bounding effect, {label}, ℓ0=ℓ∞=1, T={p.threshold} at DL(1): E[keys released] on privagg's "
          f"bounding {np.median(own):.1f} ({min(own):.1f}–{max(own):.1f}), on OpenDP's shared-order bounding "
          f"{np.median(od):.1f} ({min(od):.1f}–{max(od):.1f}); medians (min–max) over the {len(seeds)} seeds; "
          f"means {np.mean(own):.2f} and {np.mean(od):.2f}; privagg's threshold=\"randomized\" (b = {b:.4f} at T − 1) "
          f"on its bounding {np.median(rnd):.1f} ({min(rnd):.1f}–{max(rnd):.1f}), mean {np.mean(rnd):.2f}")


def bias_effect(units: np.ndarray, keys: np.ndarray, label: str, seeds: list[int], l0: int, top: int = 10) -> None:
    """The bounding's bias |bounded − true|/true (ℓ∞ = 1, no noise) on the `top` keys of largest true
    count — one fixed set — under privagg's rule (each unit keeps ℓ0 of its keys uniformly,
    independently) and OpenDP's (the first ℓ0 in one shared random order), and on each rule's own
    `top` largest *bounded* counts (what a threshold releases). Both rules keep a given key of a unit
    with d keys with probability min(1, ℓ0/d), so on a fixed set the expected bias is the same; a
    shared order moves all units together, so the bias of one key varies more between orders, and
    the keys a release selects are the ones its order favoured."""
    from privagg.mechanisms.histogram import _bounded
    from privagg.noise.rng import resolve_rng

    truth = _truth(units, keys, 1)
    fixed = np.argsort(-truth)[:top]
    own_fixed, od_fixed, own_sel, od_sel = [], [], [], []
    for seed, perm in zip(seeds, _opendp_perms(seeds), strict=True):
        kc = _bounded("stable_histogram", keys, units, (l0, 1), resolve_rng(seed)[0])
        own = np.bincount(np.asarray(kc.keys, dtype=np.int64), weights=kc.counts, minlength=K)
        od = _shared_order_bounded(units, keys, l0, 1, perm).astype(float)

        def bias(c: np.ndarray, k: np.ndarray) -> np.ndarray:
            return np.abs(c[k] - truth[k]) / np.maximum(1.0, truth[k])

        own_fixed.append(bias(own, fixed))
        od_fixed.append(bias(od, fixed))
        own_sel.append(np.median(bias(own, np.argsort(-own)[:top])))
        od_sel.append(np.median(bias(od, np.argsort(-od)[:top])))
    a, b = np.array(own_fixed), np.array(od_fixed)
    print(f"(b) bounding bias, {label}, ℓ0={l0}, ℓ∞=1, {len(seeds)} seeds: on the {top} keys of largest true count "
          f"mean {a.mean():.4f} (privagg) vs {b.mean():.4f} (shared order), sd over seeds of a key's bias "
          f"{a.std(axis=0).mean():.4f} vs {b.std(axis=0).mean():.4f}; median over seeds of the median on each rule's "
          f"own {top} largest bounded counts {np.median(own_sel):.4f} vs {np.median(od_sel):.4f}")


def main() -> None:
    if sys.argv[1:2] == ["--opendp-child"]:
        opendp_child(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 10_000_000])
    ap.add_argument("--utility-rows", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=10, help="utility repetitions (seeds SEED, SEED+1, ...)")
    ap.add_argument("--section", choices=("speed", "utility", "all", "bounding"), default="all",
                    help="bounding: only the ℓ0 = 1 bounding-effect lines of (b) (no peers needed)")
    ap.add_argument("--skip-opendp", action="store_true")
    ap.add_argument("--tables", choices=("all", "ratings", "few"), default="all", help="utility: which data sets")
    ap.add_argument("--configs", nargs="*", default=["1,1", "3,2", "16,1"], help="utility: (ℓ0,ℓ∞) pairs")
    ap.add_argument("--skip-public-domain", action="store_true")
    ap.add_argument("--opendp-python", help=f"python of a venv with opendp 0.16 + polars 1.36.1 "
                                            f"(default {OPENDP_VENV}/bin/python)")
    args = ap.parse_args()
    print(f"seed {SEED}")
    with tempfile.TemporaryDirectory(prefix="privagg-bench-") as folder:
        if args.section in ("speed", "all"):
            for n in args.rows:
                t0 = time.perf_counter()
                speed(n, Path(folder))
                print(f"  ({time.perf_counter() - t0:.0f} s)")
        if args.section == "bounding":
            seeds = [SEED + r for r in range(args.reps)]
            bounding_effect(*make_table(args.utility_rows, SEED + 1), "ratings-like table", seeds)
            bounding_effect(*make_few_table(args.utility_rows, SEED + 2), "few keys per unit", seeds)
            for l0 in (1, 16):
                bias_effect(*make_table(args.utility_rows, SEED + 1), "ratings-like table", seeds, l0)
        if args.section in ("utility", "all"):
            t0 = time.perf_counter()
            py = Path(args.opendp_python) if args.opendp_python else OPENDP_VENV / "bin" / "python"
            py = None if args.skip_opendp or not py.exists() else py
            seeds = [SEED + r for r in range(args.reps)]
            print(f"\nutility seeds {seeds[0]}..{seeds[-1]}. {PEER_EPS_NOTE}")
            tables = (("ratings-like table (heavy-tailed keys per unit)", make_table(args.utility_rows, SEED + 1)),
                      ("few keys per unit (1 + Poisson(0.5) rows)", make_few_table(args.utility_rows, SEED + 2)))
            configs = [tuple(int(x) for x in c.split(",")) for c in args.configs]
            for i, (label, (units, keys)) in enumerate(tables):
                if args.tables != "all" and i != ("ratings", "few").index(args.tables):
                    continue
                for l0, linf in configs:  # (16, 1): where Gaussian thresholding should win
                    utility(units, keys, label, 1.0, 1e-6, l0, linf, seeds, py, Path(folder))
                if (1, 1) in configs:
                    bounding_effect(units, keys, label, seeds)
            units, keys = tables[0][1]
            for l0, linf in () if args.skip_public_domain else ((3, 2), (16, 1)):  # Gaussian pays off for large ℓ0
                public_domain(units, keys, 1.0, 1e-6, l0, linf, seeds)
            print(f"  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
