"""Tables whose columns are of different types (d >= 3): the plans side by side around the
d >= 3 gate (``mean_small.COORD_WIDE_MAX``) and the scale step's rank (``mean.scale_rank``)
(docs/utility/mean.md, "mixed column types").

    PYTHONPATH=src python benchmarks/mean_mixed_types.py [--runs 16] [--seed 20261401]
        [--sets mixh,mixcol,bin,logn1.5,norm] [--d 3,10] [--levels 3000,12000] [--eps 1]

Per set, d and level L = n·ε/d (n = L·d/ε), the median over the runs of each column's
|estimate − x̄_j| in standard errors divided by the median of the range oracle's
(``range_oracle`` of benchmarks/utility.py: each column clamped to its true range, Gaussian noise
with the budget split over the d columns), the worst column shown; ⊥ counts as infinite. Columns,
on the same data (fresh per run): ``coordinate`` (gate 10⁹: the coordinate plan), ``fc median``
(gate 0: the FriendlyCore plan, scales at the median rank: SCALE_TAIL_MIN = 10⁹), ``fc shipped``
(gate 0, the shipped rank rule ``mean.scale_rank``: 7/8 from n̂·ε/(10d) >= 800, 15/16 from 1600,
…), ``fc no large`` (as ``fc shipped``, the large-sample shares off: ``mean.LARGE_FIT = 0``) and
``shipped`` (all as shipped). The data, the releases and the oracle each draw from their own
generator (the same tables and oracle noise in every column and for every version of the code;
until 2026-12-06 all three drew from one).

Sets: ``mixh`` cycles 0/1 (20 % ones), 100·lognormal(0, 1), N(50, 10), Poisson(3) over the d
columns; ``mixcol`` cycles 0/1, Poisson(3), N(50, 10), 100·lognormal(0, 1) (no heavy column at
d = 3); ``bin`` 0/1 with 10 % ones; ``exp``, ``logn``, ``logn1.5``, ``pareto`` (Pareto(3), x_m = 1),
``norm`` N(7, 1); ``mixed`` lognormal(0, 1)·10^j (units 1 … 10^(d−1)).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import privagg.mechanisms.mean as M  # noqa: E402
import privagg.mechanisms.mean_small as S  # noqa: E402
from privagg import private_mean  # noqa: E402
from utility import DELTA, range_oracle  # noqa: E402

#: label -> (COORD_WIDE_MAX, SCALE_TAIL_MIN, LARGE_FIT); None keeps the shipped value.
CONFIGS = {"coordinate": (10**9, None, None), "fc median": (0, 10**9, None), "fc shipped": (0, None, None),
           "fc no large": (0, None, 0), "shipped": (None, None, None)}


def sample(name: str, n: int, d: int, g: np.random.Generator) -> np.ndarray:
    def cycle(cols: list[np.ndarray]) -> np.ndarray:
        return np.column_stack([cols[j % len(cols)] for j in range(d)])

    if name == "mixh":
        return cycle([(g.random(n) < 0.2).astype(float), 100 * g.lognormal(0.0, 1.0, n),
                      g.normal(50.0, 10.0, n), g.poisson(3.0, n).astype(float)])
    if name == "mixcol":
        return cycle([(g.random(n) < 0.2).astype(float), g.poisson(3.0, n).astype(float),
                      g.normal(50.0, 10.0, n), 100 * g.lognormal(0.0, 1.0, n)])
    laws = {"bin": lambda: (g.random((n, d)) < 0.1).astype(float),
            "exp": lambda: g.exponential(size=(n, d)),
            "logn": lambda: g.lognormal(0.0, 1.0, size=(n, d)),
            "logn1.5": lambda: g.lognormal(0.0, 1.5, size=(n, d)),
            "pareto": lambda: g.pareto(3.0, size=(n, d)) + 1.0,
            "norm": lambda: g.normal(7.0, 1.0, size=(n, d)),
            "mixed": lambda: g.lognormal(0.0, 1.0, size=(n, d)) * 10.0 ** np.arange(d)}
    if name not in laws:
        raise SystemExit(f"unknown set {name!r}")
    return laws[name]()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=16)
    p.add_argument("--seed", type=int, default=20261401)
    p.add_argument("--sets", type=lambda t: t.split(","), default=["mixh", "mixcol", "bin", "logn1.5", "norm"])
    p.add_argument("--d", type=lambda t: [int(v) for v in t.split(",")], default=[3, 10])
    p.add_argument("--levels", type=lambda t: [int(v) for v in t.split(",")], default=[3000, 12000])
    p.add_argument("--eps", type=float, default=1.0)
    args = p.parse_args()
    shipped = (S.COORD_WIDE_MAX, M.SCALE_TAIL_MIN, M.LARGE_FIT)
    print(f"seed {args.seed}, runs {args.runs}, eps {args.eps}, delta {DELTA}; shipped gate "
          f"{shipped[0]}, tail rank from n̂·ε/(10d) >= {shipped[1]}, LARGE_FIT {shipped[2]}; worst column, "
          "privagg / range oracle")
    print("set | d | n·ε/d | n | " + " | ".join(CONFIGS) + " | s/run (same order)")
    for name in args.sets:
        for d in args.d:
            for level in args.levels:
                n = int(round(level * d / args.eps))
                ratios, secs = [], []
                for gate, tail_min, fit in CONFIGS.values():
                    S.COORD_WIDE_MAX = shipped[0] if gate is None else gate
                    M.SCALE_TAIL_MIN = shipped[1] if tail_min is None else tail_min
                    M.LARGE_FIT = shipped[2] if fit is None else fit
                    g = np.random.default_rng([args.seed, d, level, len(name)])  # same data per config
                    # the releases' and the oracle's own generators: the data and the oracle's noise
                    # stay the same across configs and versions of the code
                    rg = np.random.default_rng([args.seed, d, level, len(name), 1])
                    og = np.random.default_rng([args.seed, d, level, len(name), 2])
                    errs, oracle, t = [], [], 0.0
                    for _ in range(args.runs):
                        x = sample(name, n, d, g)
                        se = x.std(axis=0) / np.sqrt(n) + 1e-300
                        t0 = time.perf_counter()
                        rel = private_mean(x, epsilon=args.eps, delta=DELTA, rng=rg)
                        t += time.perf_counter() - t0
                        errs.append(np.abs(rel.mean - x.mean(axis=0)) / se if rel.ok else np.full(d, np.inf))
                        oracle.append(np.abs(range_oracle(x, args.eps, og) - x.mean(axis=0)) / se)
                    ratios.append(float(np.max(np.median(errs, axis=0) / np.median(oracle, axis=0))))
                    secs.append(t / args.runs)
                print(f"{name} | {d} | {level} | {n} | " + " | ".join(f"{r:.2f}" for r in ratios)
                      + " | " + " / ".join(f"{s:.3f}" for s in secs), flush=True)
    S.COORD_WIDE_MAX, M.SCALE_TAIL_MIN, M.LARGE_FIT = shipped


if __name__ == "__main__":
    main()
