"""Small-n private mean: the coordinate plan (docs/proofs/mean.md §11) against the plan switched off.

    PYTHONPATH=src python benchmarks/mean_small_n.py [--runs 40] [--n 300] [--seed 11]

N(7, 1) data, n = 300, ε = 1, δ = 1e-6, d = 1, 2, 3, 5; per run a fresh sample, used by every
column of the table. Error per coordinate |estimate − x̄_j| in standard errors SE_j = std_j/√n;
per column the median over the runs (⊥ counts as infinite), the worst coordinate shown, and its
ratio to the oracle's (``range_oracle`` of benchmarks/utility.py: each column clamped to its true
range, classic Gaussian mechanism with ε/d per coordinate). Columns: ``default`` (the plan as
shipped: on for d <= COORD_DMAX), ``forced`` (COORD_DMAX raised to 5: the plan at every d here),
``off`` (COORD_SAMPLE = 0: the FriendlyCore plans only). Every column of a run gets the same
generator seed (common random numbers): where two columns run the same plan (default and off at
d > COORD_DMAX) they release the same values.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import privagg.mechanisms.mean_small as S  # noqa: E402
from privagg import private_mean  # noqa: E402
from utility import DELTA, range_oracle  # noqa: E402

CONFIGS = {"default": {}, "forced": {"COORD_DMAX": 5}, "off": {"COORD_SAMPLE": 0}}


def run_config(settings: dict, x: np.ndarray, eps: float, gen: np.random.Generator):
    saved = {k: getattr(S, k) for k in settings}
    try:
        for k, v in settings.items():
            setattr(S, k, v)
        rel = private_mean(x, epsilon=eps, delta=DELTA, rng=gen)
        return (rel.mean if rel.ok else None), getattr(rel, "clip_rule", "")
    finally:
        for k, v in saved.items():
            setattr(S, k, v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--dims", default="1,2,3,5")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    print(f"n={args.n} eps={args.eps} delta={DELTA} runs={args.runs} seed={args.seed} data N(7, 1)")
    head = ["d", "oracle (SE)"] + [f"{c} (SE)" for c in CONFIGS] + [f"{c}/oracle" for c in CONFIGS]
    head += [f"{c} ⊥" for c in CONFIGS] + ["rules (default)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for d in [int(v) for v in args.dims.split(",")]:
        ss = np.random.SeedSequence([args.seed, d])
        data_g, oracle_g, run_g = (np.random.default_rng(s) for s in ss.spawn(3))
        err = {c: [] for c in ("oracle", *CONFIGS)}
        rules: dict[str, int] = {}
        for _ in range(args.runs):
            x = data_g.normal(7.0, 1.0, size=(args.n, d))
            xbar, se = x.mean(axis=0), x.std(axis=0, ddof=1) / math.sqrt(args.n)
            err["oracle"].append(np.abs(range_oracle(x, args.eps, oracle_g) - xbar) / se)
            run_seed = int(run_g.integers(2**63))  # common random numbers: same seed per config
            for c, settings in CONFIGS.items():
                m, rule = run_config(settings, x, args.eps, np.random.default_rng(run_seed))
                err[c].append(np.full(d, np.inf) if m is None else np.abs(m - xbar) / se)
                if c == "default":
                    rules[rule or "⊥"] = rules.get(rule or "⊥", 0) + 1
        med = {c: float(np.max(np.median(np.array(v), axis=0))) for c, v in err.items()}
        bottoms = {c: int(sum(np.isinf(e).any() for e in err[c])) for c in CONFIGS}
        row = [str(d), f"{med['oracle']:.3g}"] + [f"{med[c]:.3g}" for c in CONFIGS]
        row += [f"{med[c] / med['oracle']:.2f}" for c in CONFIGS]
        row += [f"{bottoms[c]}/{args.runs}" for c in CONFIGS]
        row += [", ".join(f"{k} {v}" for k, v in sorted(rules.items()))]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
