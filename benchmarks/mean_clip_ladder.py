"""The coordinate plan's clip ladder (issue 11; docs/proofs/mean.md §11, step 5a): before/after.

    PYTHONPATH=src python benchmarks/mean_clip_ladder.py [--runs 100] [--n 300,1000,10000] [--seed 7]
        [--columns binary,poisson,...] [--rates 0,0.5,1]

Two changes of 2026-12-03, side by side on the same data and generator seeds (common random
numbers), d = 1, ε = 1, δ = 1e-6:

- a column whose released cell is the one around 0 or a point cell (an atom at its median: 0/1,
  counts, zero-inflated, Likert with median 4) takes the annulus path; its ladder is now
  ``ZERO_CLIP_KS`` (the grid points inside the annulus, then 1 and ``COORD_CLIP_KS``) with the
  extra decay ``ZERO_CLIP_RATE``;
- the ladder ``COORD_CLIP_KS`` of every column now goes on above 7 to 40 (heavy tails).

Configurations: ``before`` (the code as it was: ladder (1.25, 2, 3, 5, 7) for every column, no
extra decay; recreated by setting the module's constants), ``zero only`` (the annulus path's
ladder, the top still 7), ``after`` (as shipped), and ``--rates``: the shipped ladders at other
``ZERO_CLIP_RATE`` values. Per cell the median over ``--runs`` runs (fresh data per run) of
|estimate − x̄| divided by the median |error| of ``range_oracle`` (benchmarks/utility.py: the
column clamped to its true range, the classic Gaussian mechanism) on the same runs; ⊥ counts as
infinite. Issue 11's target: ≤ 1.5.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import privagg.mechanisms.mean_small as S  # noqa: E402
from privagg import private_mean  # noqa: E402
from utility import DELTA, range_oracle  # noqa: E402

COLUMNS = {
    "binary p=0.1": lambda n, g: (g.random(n) < 0.1).astype(np.float64),
    "binary p=0.05": lambda n, g: (g.random(n) < 0.05).astype(np.float64),
    "binary p=0.3": lambda n, g: (g.random(n) < 0.3).astype(np.float64),
    "binary p=0.7": lambda n, g: (g.random(n) < 0.7).astype(np.float64),
    "0/100 p=0.1": lambda n, g: 100.0 * (g.random(n) < 0.1),
    "poisson 0.5": lambda n, g: g.poisson(0.5, n).astype(np.float64),
    "poisson 1": lambda n, g: g.poisson(1.0, n).astype(np.float64),
    "likert median 4": lambda n, g: g.choice(np.arange(1.0, 6.0), size=n, p=[0.05, 0.1, 0.2, 0.4, 0.25]),
    "zero-inflated 0.6·0 + Exp(5)": lambda n, g: np.where(g.random(n) < 0.6, 0.0, g.exponential(5.0, n)),
    "zero-inflated 0.9·0 + Exp(5)": lambda n, g: np.where(g.random(n) < 0.9, 0.0, g.exponential(5.0, n)),
    "zero-inflated 0.6·0 + lognormal(0, 1.5)": lambda n, g: np.where(g.random(n) < 0.6, 0.0, g.lognormal(0.0, 1.5, n)),
    "N(7, 1)": lambda n, g: g.normal(7.0, 1.0, n),
    "Exp(1)": lambda n, g: g.exponential(size=n),
    "lognormal(0, 1)": lambda n, g: g.lognormal(0.0, 1.0, n),
    "lognormal(0, 1.5)": lambda n, g: g.lognormal(0.0, 1.5, n),
    "Pareto(3)": lambda n, g: g.pareto(3.0, n) + 1.0,
}
OLD_KS = (1.25, 2.0, 3.0, 5.0, 7.0)


def configs(rates: list[float]) -> dict[str, dict]:
    zero_old_top = tuple(k for k in S.ZERO_CLIP_KS if k <= OLD_KS[-1])
    out = {"before": {"COORD_CLIP_KS": OLD_KS, "ZERO_CLIP_KS": OLD_KS, "ZERO_CLIP_RATE": 0.0},
           "zero only": {"COORD_CLIP_KS": OLD_KS, "ZERO_CLIP_KS": zero_old_top}, "after": {}}
    out.update({f"rate {r:g}": {"ZERO_CLIP_RATE": r} for r in rates})
    return out


def release(settings: dict, x: np.ndarray, gen: np.random.Generator) -> float | None:
    saved = {k: getattr(S, k) for k in settings}
    try:
        for k, v in settings.items():
            setattr(S, k, v)
        rel = private_mean(x, epsilon=1.0, delta=DELTA, rng=gen)
        return float(rel.mean[0]) if rel.ok else None
    finally:
        for k, v in saved.items():
            setattr(S, k, v)


def cell(name: str, n: int, cfgs: dict[str, dict], runs: int, seed: int) -> list[float]:
    ss = np.random.SeedSequence([seed, n, sum(map(ord, name))])
    data_g, oracle_g, run_g = (np.random.default_rng(s) for s in ss.spawn(3))
    err: dict[str, list[float]] = {c: [] for c in cfgs}
    orc = []
    for _ in range(runs):
        x = COLUMNS[name](n, data_g)[:, None]
        xbar = float(x.mean())
        orc.append(abs(float(range_oracle(x, 1.0, oracle_g)[0]) - xbar))
        s = int(run_g.integers(2**63))
        for c, settings in cfgs.items():  # the same generator seed for every configuration
            m = release(settings, x, np.random.default_rng(s))
            err[c].append(np.inf if m is None else abs(m - xbar))
    o = float(np.median(orc))
    return [float(np.median(err[c])) / o for c in cfgs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--n", default="300,1000,10000")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--columns", default="", help="prefixes of the column names (comma-separated)")
    ap.add_argument("--rates", default="", help="further ZERO_CLIP_RATE values (comma-separated)")
    args = ap.parse_args()
    names = [c for c in COLUMNS if not args.columns or any(c.startswith(p) for p in args.columns.split(","))]
    cfgs = configs([float(r) for r in args.rates.split(",") if r])
    print(f"ε = 1, δ = {DELTA}, d = 1, runs = {args.runs}, seed = {args.seed}; median |error| / range "
          f"oracle's; shipped ZERO_CLIP_RATE = {S.ZERO_CLIP_RATE}; target <= 1.5")
    print("| column | n | " + " | ".join(cfgs) + " |")
    print("|---|---|" + "---|" * len(cfgs))
    t0 = time.perf_counter()
    misses = []
    for name in names:
        for n in [int(v) for v in args.n.split(",")]:
            ratios = cell(name, n, cfgs, args.runs, args.seed)
            print(f"| {name} | {n} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |", flush=True)
            if not ratios[2] <= 1.5:
                misses.append(f"{name} n={n}: after {ratios[2]:.2f} > 1.5 (before {ratios[0]:.2f})")
    print("\nafter, target 1.5 not met:\n" + ("\n".join("  " + m for m in misses) or "  none"))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
