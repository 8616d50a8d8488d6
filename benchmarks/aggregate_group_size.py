"""Where privagg's unbounded per-group mean reaches 1.5× the bounded peers: a group-size sweep (issue 13).

``benchmarks/aggregate.py --section utility --partitions public`` misses the unbounded-mean target
(privagg unbounded mean within 1.5× of the best bounded peer's mean) on eight real tables whose
groups are small. This script measures the ratio against the group size on synthetic tables, to
tell the price of not knowing the range at a given group size from a law where even large groups
miss.

Tables: ``G`` groups (``--groups``, default 5 and 50) of equal size ``n_g`` (``--sizes``, default
30 … 10,000; a cell of more than ``--max-cell-rows`` rows, 250,000, is skipped and said so), per-group
values from one law (``--laws``), each group shifted (``u_g`` evenly spaced in [−1, 1] over the
groups, so groups differ):

- ``normal``: normal(100 + 10·u_g, 10);
- ``lognormal``: exp(normal(3 + 0.5·u_g, 1)) (σ = 1);
- ``binary``: a 0/1 column, Bernoulli(0.5 + 0.3·u_g);
- ``likert``: an integer 1..5 column, round(clip(normal(3 + u_g, 1.2), 1, 5)).

Each table is drawn once from a fixed seed (``--seed`` and the cell). The query is the one of
``benchmarks/aggregate.py`` (its ``run_privagg`` and ``run_pipeline_dp``): count, sum(v, b),
mean(v) or mean(v, b), median, at ε = 1, δ = 1e-6, record level, public partitions; the bounds
``b`` are the TRUE 0.1 %/99.9 % quantiles of the whole column, for privagg bounded and PipelineDP.
Score (``relative_errors``): per run the median over groups of the relative error of the mean
(⊥ = inf); per method the median over runs. privagg runs ``--runs`` (10) times with seeds
``seed + run``; PipelineDP (its own RNG; LocalBackend, pure Python, about 35 µs a row on the 2
shared cores) runs ``min(runs, max(2, --pdp-rows // rows))`` times (``--pdp-rows`` 100,000: the
number is printed per cell).

Printed per (law, G, n_g): the three medians, the ratio privagg unbounded / PipelineDP (the
target's ratio, best bounded peer = PipelineDP here, OpenDP not run) with a 95 % bootstrap
interval (``aggregate._boot_ratio``: each method's runs resampled on their own), met / NOT met
against 1.5, the ratio privagg unbounded / privagg bounded, and for privagg's two means the median
over runs of the *largest* relative error over the groups (``worst group``: the median over groups
hides a group that is released far off, e.g. a 0/1 group at 20 % ones released as 0); per (law, G)
the crossover: the
smallest n_g from which the target is met at that and every larger n_g of the sweep; per law the
larger of its G's crossovers. Also the group size below which this query's unbounded mean takes
the small-group plan (docs/proofs/aggregate_mean.md §8: ``n̂ − t_n < m_select_0`` at the mean's
ε share), computed from public parameters.

Run: ``python benchmarks/aggregate_group_size.py --markdown`` (docs/utility/aggregate.md,
2026-12-03: 7.2 minutes on 2 shared, loaded cores at the defaults).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aggregate as bench  # noqa: E402  (benchmarks/aggregate.py)

LAWS = ("normal", "lognormal", "binary", "likert")
GROUPS = (5, 50)
SIZES = (30, 60, 100, 200, 500, 1000, 2000, 5000, 10000)
RUNS = 10
PDP_ROWS = 100_000  # PipelineDP rows per cell (runs × rows), at least 2 runs
MAX_CELL_ROWS = 250_000


def make_groups(law: str, groups: int, size: int, seed: int) -> Any:
    """A DataFrame ``g`` (labels ``g00``, ``g01``, … as strings), ``v`` (float): ``groups`` groups of
    ``size`` rows each, group ``i`` shifted by ``u_i`` (evenly spaced in [−1, 1])."""
    import pandas as pd

    if law not in LAWS:
        raise ValueError(f"unknown law {law!r}; known: {', '.join(LAWS)}")
    rng = np.random.default_rng([seed, LAWS.index(law), groups, size])
    u = np.repeat(np.linspace(-1.0, 1.0, groups) if groups > 1 else np.zeros(1), size)
    if law == "normal":
        v = rng.normal(100.0 + 10.0 * u, 10.0)
    elif law == "lognormal":
        v = np.exp(rng.normal(3.0 + 0.5 * u, 1.0))
    elif law == "binary":
        v = (rng.random(u.size) < 0.5 + 0.3 * u).astype(float)
    else:
        v = np.round(np.clip(rng.normal(3.0 + u, 1.2), 1.0, 5.0))
    width = len(str(groups - 1))
    labels = np.array([f"g{i:0{width}d}" for i in range(groups)], dtype=object)
    return pd.DataFrame({"g": np.repeat(labels, size), "v": v.astype(float)})


def true_bounds(values: np.ndarray) -> tuple[float, float]:
    """The column's true 0.1 %/99.9 % quantiles (``benchmarks/aggregate.py``'s rule); a width of 1
    where they are equal."""
    lo, hi = (float(q) for q in np.quantile(np.asarray(values, float), [0.001, 0.999]))
    return (lo, lo + 1.0) if lo == hi else (lo, hi)


def pdp_runs(runs: int, rows: int, budget: int = PDP_ROWS) -> int:
    """PipelineDP's runs in a cell of ``rows`` rows: ``min(runs, max(2, budget // rows))``."""
    return min(runs, max(2, budget // max(rows, 1)))


def crossover(sizes: Sequence[int], ratios: Sequence[float], target: float = bench.TARGET_MEAN_RATIO
              ) -> int | None:
    """The smallest size from which ``ratio <= target`` at that and every larger size (NaN: not
    met); None when the largest size misses."""
    order = np.argsort(np.asarray(sizes))
    found = None
    for i in order[::-1]:
        r = ratios[i]
        if not (r <= target):  # NaN misses
            break
        found = int(sizes[i])
    return found


def small_switch(seed: int) -> int | None:
    """The group size below which this query's unbounded mean runs the small-group plan (a group
    is small iff ``n̂ − t_n < SMALL_SWITCH·m_select_0``, docs/proofs/aggregate_mean.md §8):
    ``SMALL_SWITCH·m_select_0 + t_n`` at the mean's share of the split (public parameters only;
    None if privagg's internals moved)."""
    try:
        from privagg.mechanisms.grouped_mean import friendly_means_plan

        from privagg.mechanisms import grouped_mean

        import pandas as pd
        import privagg

        df = pd.DataFrame({"g": ["a"] * 40, "v": np.linspace(0.0, 1.0, 40)})
        metrics = [privagg.count(), privagg.sum("v", bounds=(0.0, 1.0)), privagg.mean("v"),
                   privagg.quantile("v", 0.5)]
        release = privagg.aggregate(df, by="g", metrics=metrics, epsilon=bench.EPSILON, delta=bench.DELTA,
                                    domain=["a"], rng=seed)
        eps, dlt = release.split_exact["mean_v"]
        fp = friendly_means_plan(eps, dlt)
        return int(getattr(grouped_mean, "SMALL_SWITCH", 1) * fp.m_selects[0] + fp.count_tail)
    except Exception:  # noqa: BLE001 - informative only
        return None


def worst_group_error(estimate: dict[str, dict[Any, float]], truth: dict[str, dict[Any, float]]) -> float:
    """The largest relative error of the mean over the groups of ``truth`` (⊥ or a missing group:
    inf): what the median over groups hides — one group of five released far off."""
    worst = 0.0
    for k, t in truth["mean"].items():
        e = estimate.get("mean", {}).get(k)
        err = math.inf if e is None or not math.isfinite(e) else abs(e - t) / max(abs(t), 1e-12)
        worst = max(worst, err)
    return worst


def run_cell(df: Any, runs: int, n_pdp: int, seed: int, skip_pipelinedp: bool
             ) -> dict[str, list[float]]:
    """Per method the per-run median relative error of the mean; for privagg's two means also the
    per-run largest (``… worst group``, :func:`worst_group_error`)."""
    truth = bench.exact(df)
    bounds = true_bounds(df["v"].to_numpy(float))
    out: dict[str, list[float]] = {"privagg unbounded": [], "privagg bounded": [], "PipelineDP": [],
                                   "privagg unbounded worst group": [], "privagg bounded worst group": []}
    for r in range(runs):
        for method, unbounded in (("privagg unbounded", True), ("privagg bounded", False)):
            est = bench.run_privagg(df, bounds, unbounded, True, seed + r)
            out[method].append(bench.relative_errors(est, truth)[1]["mean"])
            out[method + " worst group"].append(worst_group_error(est, truth))
        if not skip_pipelinedp and r < n_pdp:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = bench.run_pipeline_dp(df, bounds, True, seed + r)
            out["PipelineDP"].append(bench.relative_errors(est, truth)[1]["mean"])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--laws", type=lambda s: s.split(","), default=list(LAWS))
    parser.add_argument("--groups", type=lambda s: [int(x) for x in s.split(",")], default=list(GROUPS))
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(SIZES))
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--pdp-rows", type=int, default=PDP_ROWS)
    parser.add_argument("--max-cell-rows", type=int, default=MAX_CELL_ROWS)
    parser.add_argument("--seed", type=int, default=bench.SEED)
    parser.add_argument("--skip-pipelinedp", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    for law in args.laws:
        if law not in LAWS:
            parser.error(f"unknown law {law!r}; known: {', '.join(LAWS)}")
    if args.runs < 1 or min(args.groups) < 1 or min(args.sizes) < 1:
        parser.error("--runs, --groups and --sizes must be positive")
    out = bench.Printer(args.markdown)
    target = bench.TARGET_MEAN_RATIO
    switch = small_switch(args.seed)
    out.heading(f"group-size sweep: ε = {bench.EPSILON}, δ = {bench.DELTA}, public partitions, query count, "
                f"sum(v, b), mean(v) / mean(v, b), median; bounds = true 0.1 %/99.9 % quantiles; privagg "
                f"{args.runs} runs (seeds {args.seed} + run), PipelineDP min(runs, max(2, {args.pdp_rows:,} "
                f"// rows)) runs; median over runs of the per-run median relative error of the mean; "
                f"target unbounded / PipelineDP <= {target}; ratio intervals 95 % bootstrap over runs "
                f"({bench.BOOTSTRAP} resamples, seed {bench.BOOT_SEED})")
    out.line("small-group plan of the unbounded mean (aggregate_mean.md §8) below n̂ = "
             + (f"{switch:,} rows per group" if switch else "(unknown)"))
    rng = np.random.default_rng(bench.BOOT_SEED)
    result: dict[str, Any] = {"switch": switch, "cells": {}, "crossover": {}}
    t_all = time.perf_counter()
    for law in args.laws:
        per_g: dict[int, int | None] = {}
        for groups in args.groups:
            rows, sizes_done, ratios = [], [], []
            skipped = [s for s in args.sizes if s * groups > args.max_cell_rows]
            t0 = time.perf_counter()
            for size in sorted(s for s in args.sizes if s * groups <= args.max_cell_rows):
                df = make_groups(law, groups, size, args.seed)
                n_pdp = pdp_runs(args.runs, len(df), args.pdp_rows)
                errs = run_cell(df, args.runs, n_pdp, args.seed, args.skip_pipelinedp)
                med = {m: bench.median_over_runs(v) if v else math.nan for m, v in errs.items()}
                vs_pdp = bench._ratio(med["privagg unbounded"], med["PipelineDP"]) if errs["PipelineDP"] else math.nan
                vs_bnd = bench._ratio(med["privagg unbounded"], med["privagg bounded"])
                if errs["PipelineDP"]:
                    lo, hi = bench._boot_ratio(errs["privagg unbounded"], errs["PipelineDP"], rng)
                    interval = f"[{bench._fmt(lo)}, {bench._fmt(hi)}]"
                    verdict = ("met" if vs_pdp <= target else "NOT met") + (" (within noise)"
                                                                             if lo <= target <= hi else "")
                else:
                    interval, verdict = "", ""
                rows.append([f"{size:,}", f"{len(df):,}", str(n_pdp if errs["PipelineDP"] else 0),
                             bench._fmt(med["privagg unbounded"]), bench._fmt(med["privagg bounded"]),
                             bench._fmt(med["PipelineDP"]), bench._fmt(vs_pdp), interval, verdict,
                             bench._fmt(vs_bnd), bench._fmt(med["privagg unbounded worst group"]),
                             bench._fmt(med["privagg bounded worst group"])])
                sizes_done.append(size)
                ratios.append(vs_pdp)
                result["cells"][(law, groups, size)] = {**med, "vs_pdp": vs_pdp, "vs_bounded": vs_bnd}
            bounds_text = ""
            if sizes_done:
                b = true_bounds(make_groups(law, groups, max(sizes_done), args.seed)["v"].to_numpy(float))
                bounds_text = f"; bounds at n_g = {max(sizes_done):,}: [{b[0]:.4g}, {b[1]:.4g}]"
            out.heading(f"{law}, G = {groups}{bounds_text}; {time.perf_counter() - t0:.0f} s"
                        + (f"; skipped n_g {', '.join(map(str, skipped))} (over {args.max_cell_rows:,} rows)"
                           if skipped else ""))
            out.table(["n_g", "rows", "PDP runs", "privagg unbounded", "privagg bounded", "PipelineDP",
                       "unbounded / PDP", "95 % interval", f"<= {target}", "unbounded / bounded",
                       "unbounded worst group", "bounded worst group"], rows, left=1)
            per_g[groups] = crossover(sizes_done, ratios, target) if sizes_done else None
            met_at = [f"{s:,}" for s, r in zip(sizes_done, ratios, strict=True) if r <= target]
            out.line(f"crossover {law}, G = {groups}: "
                     + (f"n_g >= {per_g[groups]:,}" if per_g[groups] else "not reached in the sweep")
                     + f" (met at n_g: {', '.join(met_at) or 'none'})")
        known = [c for c in per_g.values() if c is not None]
        overall = max(known) if known and len(known) == len(per_g) else None
        result["crossover"][law] = overall
    out.heading("crossover per law (the smallest n_g from which unbounded / PipelineDP <= "
                f"{target} at every larger n_g, for every G)")
    out.table(["law", "crossover n_g"], [[law, f"{c:,}" if c else "not reached"]
                                          for law, c in result["crossover"].items()], left=1)
    out.line(f"total {time.perf_counter() - t_all:.0f} s")
    return result


if __name__ == "__main__":
    main()
