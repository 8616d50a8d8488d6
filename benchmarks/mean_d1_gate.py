"""One column (d = 1): the coordinate plan against the FriendlyCore plan around the d = 1 gate
(``mean_small.COORD_SAMPLE_1D``, docs/utility/mean.md "the d = 1 gate").

    PYTHONPATH=src python benchmarks/mean_d1_gate.py [--runs 40] [--seed 20261207]
        [--sets bin0.1,bin0.05,exp,logn,norm] [--n 5000,10000] [--eps 1]
    PYTHONPATH=src python benchmarks/mean_d1_gate.py --tail [--runs 200] [--seed 20261209] [--n 10000]

Default mode: per set and n, the median over the runs of |estimate − x̄| in standard errors
(SE = std/√n; ⊥ counts as infinite) divided by the median of the range oracle's
(``range_oracle`` of benchmarks/utility.py), for ``friendlycore`` (the d = 1 gate set to the
d = 2 one, COORD_SAMPLE = 2500: the FriendlyCore plan above n̂·ε = 2500) and ``coordinate``
(gate 10⁹: the coordinate plan at every n̂), side by side with the same data, and the seconds
per release. Sets: ``binP`` 0/1 with P ones, ``exp`` Exp(1), ``logn`` lognormal(0, 1),
``logn1.5`` lognormal(0, 1.5), ``pareto`` Pareto(3) (x_m = 1), ``norm`` N(0, 1); fresh data per
run. ``--se``: the medians in standard errors instead of the ratios (the ε = 100 target: <= 2 SE).

``--floor SHARE,BETA`` (e.g. ``1/10,1e-2``): the second column is instead the FriendlyCore plan
with the spread floor's share ``mean._SHARE_FLOOR`` and ``mean.FLOOR_BETA`` set to these (its cap
K = ⌈2·ln(121/β)/ε_f⌉ smaller), both columns at the d = 2 gate: what a smaller cap would do.

``--tail``: 0/1 with 10 % ones (the benchmark's binary10), the shipped gate against the
FriendlyCore plan: median, mean, sd and largest |signed error| in SE and the runs off by more
than 3 SE (the median of mean_real.md hides the FriendlyCore plan's tail).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fractions import Fraction  # noqa: E402

import privagg.mechanisms.mean as M  # noqa: E402
import privagg.mechanisms.mean_small as S  # noqa: E402
from privagg import private_mean  # noqa: E402
from utility import DELTA, range_oracle  # noqa: E402

SHIPPED = S.COORD_SAMPLE_1D
GATES = {"friendlycore": S.COORD_SAMPLE, "coordinate": 10**9}


def sample(name: str, n: int, g: np.random.Generator) -> np.ndarray:
    if name.startswith("bin"):
        return (g.random((n, 1)) < float(name[3:])).astype(np.float64)
    if name == "exp":
        return g.exponential(size=(n, 1))
    if name == "logn":
        return g.lognormal(0.0, 1.0, size=(n, 1))
    if name == "norm":
        return g.normal(size=(n, 1))
    if name == "logn1.5":
        return g.lognormal(0.0, 1.5, size=(n, 1))
    if name == "pareto":
        return g.pareto(3.0, size=(n, 1)) + 1.0
    raise SystemExit(f"unknown set {name!r}")


def signed_error(x: np.ndarray, eps: float, g: np.random.Generator) -> float:
    rel = private_mean(x, epsilon=eps, delta=DELTA, rng=g)
    if not rel.ok:
        return np.nan
    return float((rel.mean[0] - x.mean()) / (x.std() / np.sqrt(len(x)) + 1e-300))


def side_by_side(args: argparse.Namespace) -> None:
    shipped_floor = (M._SHARE_FLOOR, M.FLOOR_BETA)
    configs = {label: (gate, shipped_floor) for label, gate in GATES.items()}
    if args.floor:
        share, beta = args.floor.split(",")
        configs["coordinate"] = (S.COORD_SAMPLE, (Fraction(share), float(beta)))
        print(f"second column: the FriendlyCore plan with floor share {share}, beta {beta}")
    second = "floor variant" if args.floor else "coordinate"
    unit = "SE" if args.se else "oracle"
    print(f"set | n | friendlycore/{unit} | {second}/{unit} | s/run friendlycore | s/run {second}")
    for name in args.sets:
        for n in args.n:
            med, secs = {}, {}
            for label, (gate, floor) in configs.items():
                S.COORD_SAMPLE_1D = gate
                M._SHARE_FLOOR, M.FLOOR_BETA = floor
                g = np.random.default_rng([args.seed, n, len(name)])  # same data for both plans
                errs, oracle, t = [], [], 0.0
                for _ in range(args.runs):
                    x = sample(name, n, g)
                    se = x.std() / np.sqrt(n) + 1e-300
                    t0 = time.perf_counter()
                    e = signed_error(x, args.eps, g)
                    t += time.perf_counter() - t0
                    errs.append(np.inf if np.isnan(e) else abs(e))
                    oracle.append(abs(range_oracle(x, args.eps, g)[0] - x.mean()) / se)
                med[label] = np.median(errs) / (1.0 if args.se else np.median(oracle))
                secs[label] = t / args.runs
            print(f"{name} | {n} | {med['friendlycore']:.2f} | {med['coordinate']:.2f} | "
                  f"{secs['friendlycore']:.3f} | {secs['coordinate']:.3f}", flush=True)
    S.COORD_SAMPLE_1D = SHIPPED
    M._SHARE_FLOOR, M.FLOOR_BETA = shipped_floor


def tail(args: argparse.Namespace) -> None:
    print("plan | n | median abs | mean | sd | max abs | runs > 3 SE | bottom")
    for n in args.n:
        for label, gate in ((f"shipped (gate {SHIPPED})", SHIPPED),
                            (f"friendlycore (gate {S.COORD_SAMPLE})", S.COORD_SAMPLE)):
            S.COORD_SAMPLE_1D = gate
            g = np.random.default_rng(args.seed)
            e = np.array([signed_error(sample("bin0.1", n, g), args.eps, g) for _ in range(args.runs)])
            a = np.abs(e)
            print(f"{label} | {n} | {np.nanmedian(a):.3f} | {np.nanmean(e):.3f} | {np.nanstd(e):.3f} | "
                  f"{np.nanmax(a):.2f} | {int((a > 3).sum())} | {int(np.isnan(e).sum())}", flush=True)
    S.COORD_SAMPLE_1D = SHIPPED


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tail", action="store_true")
    p.add_argument("--se", action="store_true", help="medians in standard errors, not over the oracle's")
    p.add_argument("--runs", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--sets", type=lambda t: t.split(","), default=["bin0.1", "bin0.05", "exp", "logn", "norm"])
    p.add_argument("--n", type=lambda t: [int(v) for v in t.split(",")])
    p.add_argument("--eps", type=float, default=1.0)
    p.add_argument("--floor", metavar="SHARE,BETA")
    args = p.parse_args()
    if args.tail:
        args.runs, args.seed = args.runs or 200, args.seed or 20261209
        args.n = args.n or [10_000]
        print(f"seed {args.seed}, runs {args.runs}, eps {args.eps}, delta {DELTA}")
        tail(args)
    else:
        args.runs, args.seed = args.runs or 40, args.seed or 20261207
        args.n = args.n or [5000, 10_000]
        print(f"seed {args.seed}, runs {args.runs}, eps {args.eps}, delta {DELTA}")
        side_by_side(args)


if __name__ == "__main__":
    main()
