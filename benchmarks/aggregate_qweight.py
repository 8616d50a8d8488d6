"""The quantile step's default weight (3/2) against the old one (1), on its own (issue 13).

For each data set of ``benchmarks/aggregate.py`` named in ``--datasets`` and each of its two privagg
queries — ``bounded``: count(), sum(v, b), mean(v, b), quantile(v, 0.5, b); ``unbounded``: count(),
sum(v, b), mean(v) (FriendlyCore), quantile(v, 0.5) (no bounds) — privagg runs ``--runs`` times
with the default split (quantile weight 3/2) and with ``weights={"q0.5_v": 1}`` (the split before
the last stop), with the SAME seeds ``seed + run`` for both, at ε = 1, δ = 10⁻⁶ (δ = 0 for the
bounded query with public keys), the bounds being the true 0.1 %/99.9 % quantiles of the column,
public partitions (``--partitions private``: private key selection). Scored like
``benchmarks/aggregate.py``: per run the median over groups of the relative error per metric
(⊥ = inf), then the median over runs; also the share of released groups within 10 % of the truth
(median over runs: the median over groups hides the small groups). Printed per cell: the two medians, the ratio new/old and a
95 % percentile-bootstrap interval of it, resampling the runs in pairs (same seed in both arms;
2000 resamples, seed 7). The ε of each step of both splits is printed.

Run: ``python benchmarks/aggregate_qweight.py --markdown`` (7.7 minutes on 2 shared,
loaded cores at the defaults).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aggregate as bench  # noqa: E402  (benchmarks/aggregate.py)

OLD = {"q0.5_v": 1}
BOOT, BOOT_SEED = 2000, 7


def paired_ratio(new: list[float], old: list[float], rng: np.random.Generator) -> tuple[float, float, float]:
    a, b = np.asarray(new, float), np.asarray(old, float)
    idx = rng.integers(0, a.size, (BOOT, a.size))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
        point = float(np.median(a) / np.median(b)) if np.median(a) != np.median(b) else 1.0
    r = np.sort(np.where(np.isnan(r), 1.0, r))
    return point, float(r[int(0.025 * (r.size - 1))]), float(r[int(math.ceil(0.975 * (r.size - 1)))])


def within_10(estimate: dict, truth: dict) -> dict[str, float]:
    """Per metric: the share of released groups whose relative error is at most 0.1 (⊥: not)."""
    out = {}
    for m in bench.METRICS:
        got = estimate.get(m, {})
        ok = [math.isfinite(got[k]) and abs(got[k] - truth[m][k]) <= 0.1 * max(abs(truth[m][k]), 1e-12)
              for k in got]
        out[m] = float(np.mean(ok)) if ok else math.nan
    return out


def split_text(df, bounds, unbounded: bool, public: bool, weights) -> str:
    import privagg

    lo, hi = bounds
    metrics = [privagg.count(), privagg.sum("v", bounds=(lo, hi))]
    metrics += ([privagg.mean("v"), privagg.quantile("v", 0.5)] if unbounded
                else [privagg.mean("v", bounds=(lo, hi)), privagg.quantile("v", 0.5, bounds=(lo, hi))])
    rel = privagg.aggregate(df, by="g", metrics=metrics, epsilon=bench.EPSILON,
                            delta=bench.DELTA if (unbounded or not public) else 0.0,
                            domain=sorted(set(df["g"].tolist())) if public else None, rng=0, weights=weights)
    return ", ".join(f"{k} ε={v[0]}" for k, v in rel.split_exact.items())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="synthetic,airports,sf-temps")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--seed", type=int, default=bench.SEED)
    p.add_argument("--partitions", choices=("public", "private"), default="public")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    public = args.partitions == "public"
    sets = bench.load_datasets(args.datasets.split(","), 100_000, 100, args.seed + 1)
    rng = np.random.default_rng(BOOT_SEED)
    print(f"quantile weight 3/2 (new) vs 1 (old): eps = {bench.EPSILON}, delta = {bench.DELTA}, "
          f"{args.partitions} partitions, {args.runs} runs, seeds {args.seed} + run (same in both arms); "
          "median over runs of the median relative error per group; ratio new/old, 95% paired bootstrap")
    for name, (label, df) in sets.items():
        truth = bench.exact(df)
        q = np.quantile(df["v"].to_numpy(float), [0.001, 0.999])
        bounds = (float(q[0]), float(q[1]))
        sizes = sorted(truth["count"].values())
        print(f"\n**{name}: {label}; {len(df):,} rows, {len(sizes)} groups (sizes {int(sizes[0])}..{int(sizes[-1])});"
              f" bounds [{bounds[0]:.6g}, {bounds[1]:.6g}]**\n")
        rows = []
        for unbounded in (False, True):
            query = "unbounded" if unbounded else "bounded"
            for weights, tag in ((OLD, "old (1)"), (None, "new (3/2)")):
                print(f"- {query}, {tag}: {split_text(df, bounds, unbounded, public, weights)}")
            per: dict[str, list] = {"old": [], "new": []}
            released: dict[str, list] = {"old": [], "new": []}
            within: dict[str, list] = {"old": [], "new": []}
            t0 = time.perf_counter()
            for r in range(args.runs):
                for arm, weights in (("old", OLD), ("new", None)):
                    est = bench.run_privagg(df, bounds, unbounded, public, args.seed + r, weights=weights)
                    n, errs = bench.relative_errors(est, truth)
                    per[arm].append(errs)
                    within[arm].append(within_10(est, truth))
                    released[arm].append(n)
            sec = (time.perf_counter() - t0) / (2 * args.runs)
            for metric in bench.METRICS:
                old = [e[metric] for e in per["old"]]
                new = [e[metric] for e in per["new"]]
                ratio, lo, hi = paired_ratio(new, old, rng)
                rows.append([query, metric, bench._fmt(float(np.median(old))), bench._fmt(float(np.median(new))),
                             bench._fmt(ratio), f"[{bench._fmt(lo)}, {bench._fmt(hi)}]",
                             f"{np.median([w[metric] for w in within['old']]):.2f}/"
                             f"{np.median([w[metric] for w in within['new']]):.2f}",
                             f"{np.median(released['old']):g}/{np.median(released['new']):g}", f"{sec:.2f}"])
        print()
        header = ["query", "metric", "old (weight 1)", "new (weight 3/2)", "new/old", "95% interval",
                  "within 10% old/new", "groups old/new", "s/run"]
        if args.markdown:
            print("| " + " | ".join(header) + " |")
            print("|" + "---|" * len(header))
            for row in rows:
                print("| " + " | ".join(row) + " |")
        else:
            for row in [header, *rows]:
                print("  ".join(f"{c:>16}" for c in row))


if __name__ == "__main__":
    main()
