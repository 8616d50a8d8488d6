"""Small-n private mean: the coordinate plan (docs/proofs/mean.md §11) against the plan switched off.

    PYTHONPATH=src python benchmarks/mean_small_n.py [--runs 40] [--n 300,1000] [--seed 11]
        [--sets normal,exponential,lattice,mixed] [--dims 1,2,3,5] [--eps 1] [--bias]

Data sets (d columns): ``normal`` N(7, 1); ``exponential`` Exp(1); ``lattice`` uniform on the
integers {0..6} (ties: most consecutive pairs differ by 0, 1 or 2); ``mixed`` N(5, 1)·10^{3j/(d−1)}
(column scales 1 … 1000). ε, δ = 1e-6; per run a fresh sample, used by every column of the table.
Error per coordinate |estimate − x̄_j| in standard errors SE_j = std_j/√n; per column the median
over the runs (⊥ counts as infinite), the worst coordinate shown, and its ratio to the oracle's
(``range_oracle`` of benchmarks/utility.py: each column clamped to its true range, classic
Gaussian mechanism with ε/d per coordinate). Columns: ``default`` (the plans as shipped: the
coordinate plan where ``mean_small.plan_runs``), ``forced`` (the coordinate plan at every n̂
here: COORD_SAMPLE = COORD_SAMPLE_1D = COORD_WIDE_MAX = 10⁹), ``off`` (COORD_SAMPLE = 0: the FriendlyCore plans
only). Every column of a run gets the same generator seed (common random numbers).

``--bias`` prints instead, per set, the ``forced`` plan's mean signed error (SE) over the runs at
the given ε (use ε = 100: the noise is then negligible and what is left is bias).

``--table`` (issue 11, bounded columns) prints instead, for the 3-column tables of
:data:`TABLES` (a bounded column — 0/1 with p = 0.3 or 0.05, Likert 1..5, uniform[0, 1] — next
to N(50, 10) and 100·Exp(1)) at each n, per column the median |error| over the runs divided by the
range oracle's (⊥ counts as infinite), the plans as shipped, fresh data per run:

    PYTHONPATH=src python benchmarks/mean_small_n.py --table --runs 40 --n 300,1000 --seed 11

``--table --extra`` runs the same for :data:`EXTRA_TABLES` (0/1 with p = 0.7, Poisson(0.5) and
Poisson(3) counts, a zero-inflated column, N(0, 1)).
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

CONFIGS = {"default": {}, "forced": {"COORD_SAMPLE": 10**9, "COORD_SAMPLE_1D": 10**9, "COORD_WIDE_MAX": 10**9},
           "off": {"COORD_SAMPLE": 0}}


def sample(name: str, n: int, d: int, g: np.random.Generator) -> np.ndarray:
    if name == "normal":
        return g.normal(7.0, 1.0, size=(n, d))
    if name == "exponential":
        return g.exponential(size=(n, d))
    if name == "lattice":
        return g.integers(0, 7, size=(n, d)).astype(np.float64)
    if name == "mixed":
        scale = np.logspace(0.0, 3.0, d) if d > 1 else np.ones(1)
        return (g.normal(size=(n, d)) + 5.0) * scale
    raise ValueError(name)


#: --table: the bounded first column of each 3-column table (the others N(50, 10), 100·Exp(1)).
TABLES = {
    "binary p=0.3": lambda n, g: g.binomial(1, 0.3, n).astype(np.float64),
    "binary p=0.05": lambda n, g: g.binomial(1, 0.05, n).astype(np.float64),
    "likert 1..5": lambda n, g: g.choice(np.arange(1.0, 6.0), size=n, p=[0.1, 0.2, 0.3, 0.25, 0.15]),
    "uniform[0,1]": lambda n, g: g.uniform(size=n),
}


#: --table --extra: further atom-heavy first columns (issue 11, two-point and zero-heavy columns).
EXTRA_TABLES = {
    "binary p=0.7": lambda n, g: g.binomial(1, 0.7, n).astype(np.float64),
    "poisson 0.5": lambda n, g: g.poisson(0.5, n).astype(np.float64),
    "poisson 3": lambda n, g: g.poisson(3.0, n).astype(np.float64),
    "zero-inflated 0.6·0 + Exp(5)": lambda n, g: np.where(g.random(n) < 0.6, 0.0, g.exponential(5.0, n)),
    "N(0, 1)": lambda n, g: g.normal(size=n),
}


def table_cell(name: str, n: int, args: argparse.Namespace) -> list[str]:
    ss = np.random.SeedSequence([args.seed, n, sum(map(ord, name))])
    data_g, oracle_g, run_g = (np.random.default_rng(s) for s in ss.spawn(3))
    err, orc = [], []
    for _ in range(args.runs):
        x = np.column_stack([TABLES[name](n, data_g), data_g.normal(50.0, 10.0, n),
                             100.0 * data_g.exponential(size=n)])
        xbar = x.mean(axis=0)
        orc.append(np.abs(range_oracle(x, args.eps, oracle_g) - xbar))
        m, _ = run_config({}, x, args.eps, np.random.default_rng(int(run_g.integers(2**63))))
        err.append(np.full(3, np.inf) if m is None else np.abs(m - xbar))
    ratio = np.median(np.array(err), axis=0) / np.median(np.array(orc), axis=0)
    bottoms = int(sum(np.isinf(e).any() for e in err))
    return [name, str(n)] + [f"{v:.2f}" for v in ratio] + [f"{bottoms}/{args.runs}"]


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
    ap.add_argument("--n", default="300,1000")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--dims", default="1,2,3,5")
    ap.add_argument("--sets", default="normal,exponential,lattice,mixed")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--bias", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--extra", action="store_true", help="--table: the EXTRA_TABLES instead")
    args = ap.parse_args()
    if args.table:
        print(f"eps={args.eps} delta={DELTA} runs={args.runs} seed={args.seed} (median |error| / range oracle's)")
        head = ["bounded column", "n", "bounded/oracle", "N(50, 10)/oracle", "100·Exp(1)/oracle", "⊥"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        if args.extra:
            TABLES.clear()
            TABLES.update(EXTRA_TABLES)
        for name in TABLES:
            for n in [int(v) for v in args.n.split(",")]:
                print("| " + " | ".join(table_cell(name, n, args)) + " |", flush=True)
        return
    configs = {"forced": CONFIGS["forced"]} if args.bias else CONFIGS
    print(f"eps={args.eps} delta={DELTA} runs={args.runs} seed={args.seed}"
          + (" (bias: forced plan, mean signed error)" if args.bias else ""))
    if args.bias:
        head = ["set", "n", "d", "mean signed error (SE), per coordinate", "max |mean| (SE)", "⊥"]
    else:
        head = ["set", "n", "d", "oracle (SE)"] + [f"{c} (SE)" for c in configs]
        head += [f"{c}/oracle" for c in configs] + [f"{c} ⊥" for c in configs] + ["rules (default)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in args.sets.split(","):
        for n in [int(v) for v in args.n.split(",")]:
            for d in [int(v) for v in args.dims.split(",")]:
                row = one_cell(name, n, d, args, configs)
                print("| " + " | ".join(row) + " |", flush=True)


def one_cell(name: str, n: int, d: int, args: argparse.Namespace, configs: dict) -> list[str]:
    ss = np.random.SeedSequence([args.seed, d, n, sum(map(ord, name))])
    data_g, oracle_g, run_g = (np.random.default_rng(s) for s in ss.spawn(3))
    err: dict[str, list] = {c: [] for c in ("oracle", *configs)}
    signed: list[np.ndarray] = []
    rules: dict[str, int] = {}
    for _ in range(args.runs):
        x = sample(name, n, d, data_g)
        xbar, se = x.mean(axis=0), x.std(axis=0, ddof=1) / math.sqrt(n)
        err["oracle"].append(np.abs(range_oracle(x, args.eps, oracle_g) - xbar) / se)
        run_seed = int(run_g.integers(2**63))  # common random numbers: same seed per config
        for c, settings in configs.items():
            m, rule = run_config(settings, x, args.eps, np.random.default_rng(run_seed))
            err[c].append(np.full(d, np.inf) if m is None else np.abs(m - xbar) / se)
            if m is not None and c == "forced":
                signed.append((m - xbar) / se)
            if c == ("forced" if args.bias else "default"):
                rules[rule or "⊥"] = rules.get(rule or "⊥", 0) + 1
    bottoms = {c: int(sum(np.isinf(e).any() for e in err[c])) for c in configs}
    if args.bias:
        mean = np.mean(np.array(signed), axis=0) if signed else np.full(d, np.nan)
        return [name, str(n), str(d), " ".join(f"{v:+.2f}" for v in mean),
                f"{np.nanmax(np.abs(mean)):.2f}", f"{bottoms['forced']}/{args.runs}"]
    med = {c: float(np.max(np.median(np.array(v), axis=0))) for c, v in err.items()}
    row = [name, str(n), str(d), f"{med['oracle']:.3g}"] + [f"{med[c]:.3g}" for c in configs]
    row += [f"{med[c] / med['oracle']:.2f}" for c in configs]
    row += [f"{bottoms[c]}/{args.runs}" for c in configs]
    row += [", ".join(f"{k} {v}" for k, v in sorted(rules.items()))]
    return row


if __name__ == "__main__":
    main()
