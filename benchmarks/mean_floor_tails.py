"""The FriendlyCore plan's clipping radius before and after the 2026-12-03 changes, side by side on
the same data (docs/utility/mean.md, "2026-12-03: tails and floor").

    PYTHONPATH=src python benchmarks/mean_floor_tails.py [--runs 12] [--seed 20261308]
        [--sets bin0.01,bin0.02,...] [--n 12000,15000,30000] [--d 1]

``before`` recreates the former rules inside the current code: the noisy tails summed from the
top only (``noisy_tails`` without the count), an only-passing top edge always robust
(``TAIL_TOP_SD = ∞``), the spread floor's target relative to ``n̂`` less the count noise's 5 %
tail and its ε/20 share whatever the radius. ``after`` is the shipped code. Per set and n: the
median over the runs of the worst column's |estimate − x̄| in standard errors (⊥ infinite) over the
range oracle's median (``range_oracle`` of benchmarks/utility.py), and seconds per release. The d = 1
gate of the coordinate plan is set to the d = 2 one (2500) so that the FriendlyCore plan runs at
every n here (its subject). Sets: ``binP`` 0/1 with P ones, ``pctP`` 0/100 with P hundreds, ``exp``,
``logn`` (σ = 1), ``pareto`` (α = 3), ``norm``, ``small`` N(0, 10⁻⁸) (radius at its grid's bottom:
what the tied share costs continuous data); fresh data per run, the same for both columns.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import privagg.mechanisms.mean as M  # noqa: E402
import privagg.mechanisms.mean_small as S  # noqa: E402
from privagg import private_mean  # noqa: E402
from privagg.noise.samplers import discrete_laplace  # noqa: E402
from utility import DELTA, range_oracle  # noqa: E402

SHIPPED = dict(TAIL_TOP_SD=M.TAIL_TOP_SD, _SHARE_FLOOR_TIED=M._SHARE_FLOOR_TIED,
               spread_floor_pick=M.spread_floor_pick)
QUANTILE = M._quantile_radius


def _old_floor(x, center, upper, plan, gen):
    """The former floor: the target relative to ``n̂ − t`` (the count noise's 5 % tail). ``n̂`` is
    not passed any more: a fresh ``n + DLap(1/ε_n)``, the same law (not the same draw)."""
    bins = M._source(x).distance_bins(center, M.floor_edges(upper))
    within = np.cumsum(bins[::-1])[: M.FLOOR_OCTAVES + 1]
    n_hat = int(bins.sum()) + int(discrete_laplace(1 / plan.eps_count, rng=gen))
    n_low = max(0, n_hat - M.dlap_tail_shift(1 / plan.eps_count, Fraction(1, 20)))
    util = M.floor_utility(within[None, :], n_low, M.floor_cap(plan.eps_floor))[0]
    return int(np.argmax(util + discrete_laplace(4 / plan.eps_floor, size=util.shape, rng=gen)))


def _old_quantile(real):
    def q(x, center, upper, n_hat, eps_q, gen, tau=float(M.TAIL_MIN), eps_count=None):
        return real(x, center, upper, n_hat, eps_q, gen, tau, None)
    return q


BEFORE = dict(TAIL_TOP_SD=float("inf"), _SHARE_FLOOR_TIED=M._SHARE_FLOOR, spread_floor_pick=_old_floor)


def configure(before: bool) -> None:
    for k, v in SHIPPED.items():
        setattr(M, k, v)
    M._quantile_radius = QUANTILE
    if before:
        for k, v in BEFORE.items():
            setattr(M, k, v)
        M._quantile_radius = _old_quantile(QUANTILE)



def sample(name: str, n: int, d: int, g: np.random.Generator) -> np.ndarray:
    if name.startswith("pct"):
        return (g.random((n, d)) < float(name[3:])) * 100.0
    if name.startswith("bin"):
        return (g.random((n, d)) < float(name[3:])).astype(np.float64)
    draw = {"exp": lambda: g.exponential(size=(n, d)), "logn": lambda: g.lognormal(0.0, 1.0, (n, d)),
            "pareto": lambda: g.pareto(3.0, (n, d)), "norm": lambda: g.normal(size=(n, d)),
            "small": lambda: g.normal(size=(n, d)) * 1e-4}
    if name not in draw:
        raise SystemExit(f"unknown set {name!r}")
    return draw[name]()


def worst_error(x: np.ndarray, est: np.ndarray | None) -> float:
    if est is None:
        return np.inf
    se = x.std(axis=0) / np.sqrt(len(x)) + 1e-300
    return float(np.max(np.abs(est - x.mean(axis=0)) / se))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=12)
    p.add_argument("--seed", type=int, default=20261308)
    p.add_argument("--sets", type=lambda t: t.split(","),
                   default=["bin0.005", "bin0.01", "bin0.02", "bin0.03", "bin0.05", "pct0.01",
                            "exp", "logn", "pareto", "norm", "small"])
    p.add_argument("--n", type=lambda t: [int(v) for v in t.split(",")], default=[12_000, 15_000, 30_000])
    p.add_argument("--d", type=int, default=1)
    args = p.parse_args()
    S.COORD_SAMPLE_1D = S.COORD_SAMPLE
    print(f"seed {args.seed}, runs {args.runs}, eps 1, delta {DELTA}, d {args.d}")
    print("set | n | before/oracle | after/oracle | s/run before | s/run after")
    for name in args.sets:
        for n in args.n:
            med, secs = {}, {}
            for label in ("before", "after"):
                configure(label == "before")
                g = np.random.default_rng([args.seed, n, len(name), args.d])
                errs, oracle, t = [], [], 0.0
                for _ in range(args.runs):
                    x = sample(name, n, args.d, g)
                    t0 = time.perf_counter()
                    rel = private_mean(x, epsilon=1.0, delta=DELTA, rng=g)
                    t += time.perf_counter() - t0
                    errs.append(worst_error(x, rel.mean if rel.ok else None))
                    oracle.append(worst_error(x, range_oracle(x, 1.0, g)))
                med[label] = np.median(errs) / np.median(oracle)
                secs[label] = t / args.runs
            print(f"{name} | {n} | {med['before']:.2f} | {med['after']:.2f} | "
                  f"{secs['before']:.3f} | {secs['after']:.3f}", flush=True)
    configure(False)


if __name__ == "__main__":
    main()
