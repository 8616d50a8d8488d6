"""private_mean at small n on columns with atoms (indicators, counts, two-point and rating columns)
and on data far from 0: the worst column's error over the range oracle's, per setting.

    PYTHONPATH=src python benchmarks/mean_atoms_small_n.py [--runs 60] [--kinds bin0.1,likert] [--settings 1x300,5x1000]

For each kind of column and each (d, n), ``--runs`` tables of d independent columns of that kind
(``mixed``: the kinds bin0.1, pois3, zilog, gauss, bin7 in turn), ε = 1, δ = 10⁻⁶, data seed
``s`` and release seed ``7000 + s`` for run s. Printed per setting: the median over the runs of the
worst column's |error| over the range oracle's median |error| (each column clamped to its true
[min, max], the Gaussian mechanism with the budget split evenly over the d columns:
``0.674·(max − min)/n·√(2 ln(1.25 d/δ))·d/ε``), and ``wild``: runs whose worst column is more
than 10 times that (⊥ counted apart). Not a timed benchmark. docs/utility/mean.md (seventh stop).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import privagg  # noqa: E402

KINDS = ("bin0.05", "bin0.1", "bin0.3", "bin0.7", "bin0.9", "neg", "pois0.5", "pois3", "zilog", "bin7",
         "bin1000", "b8p7", "b3p7", "likert", "gauss", "far", "lognorm", "mixed")
MIX = ("bin0.1", "pois3", "zilog", "gauss", "bin7")
DELTA = 1e-6


def column(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """One column of ``kind``: binP (0/1, a fraction P of ones), neg (0/−1, 10 %), poisL
    (Poisson(L)), zilog (70 % zeros, else 100·lognormal(0, 1)), bin7 / bin1000 (0/7, 0/1000, 20 %),
    b8p7 / b3p7 (0/8, 0/3, 70 %), likert (1–5, 55 % threes), gauss (N(50, 10²)), far (N(1000, 1)),
    lognorm (lognormal(0, 1))."""
    if kind == "bin7":
        return 7.0 * (rng.random(n) < 0.2)
    if kind == "bin1000":
        return 1000.0 * (rng.random(n) < 0.2)
    if kind == "b8p7":
        return 8.0 * (rng.random(n) < 0.7)
    if kind == "b3p7":
        return 3.0 * (rng.random(n) < 0.7)
    if kind.startswith("bin"):
        return (rng.random(n) < float(kind[3:])).astype(float)
    if kind == "neg":
        return -(rng.random(n) < 0.1).astype(float)
    if kind.startswith("pois"):
        return rng.poisson(float(kind[4:]), n).astype(float)
    if kind == "zilog":
        return np.where(rng.random(n) < 0.7, 0.0, 100 * rng.lognormal(0, 1, n))
    if kind == "likert":
        return rng.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=n, p=[0.05, 0.1, 0.55, 0.2, 0.1])
    if kind == "gauss":
        return rng.normal(50, 10, n)
    if kind == "far":
        return rng.normal(1000, 1, n)
    if kind == "lognorm":
        return rng.lognormal(0, 1, n)
    if kind == "n7":
        return rng.normal(7, 2, n)
    if kind == "n3":
        return rng.normal(3, 1, n)
    raise ValueError(kind)


def setting(kind: str, d: int, n: int, runs: int) -> tuple[float, int, int]:
    """(median worst-column ratio to the oracle, wild runs, ⊥ runs)."""
    worst, wild, bottom = [], 0, 0
    z = math.sqrt(2 * math.log(1.25 * d / DELTA)) * d / n
    for s in range(runs):
        rng = np.random.default_rng(s)
        x = np.column_stack([column(MIX[j % len(MIX)] if kind == "mixed" else kind, n, rng) for j in range(d)])
        r = privagg.private_mean(x, epsilon=1.0, delta=DELTA, rng=7000 + s)
        if not r.ok:
            bottom += 1
            continue
        span = np.where(x.max(0) > x.min(0), x.max(0) - x.min(0), 1.0)
        ratio = float((np.abs(r.mean - x.mean(0)) / (0.674 * span * z)).max())
        worst.append(ratio)
        wild += int(ratio > 10)
    return (float(np.median(worst)) if worst else math.inf), wild, bottom


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=60)
    p.add_argument("--kinds", type=lambda t: t.split(","), default=list(KINDS))
    p.add_argument("--settings", type=lambda t: [tuple(int(v) for v in s.split("x")) for s in t.split(",")],
                   default=[(1, 300), (3, 300), (5, 300), (5, 1000)])
    args = p.parse_args()
    print(f"runs {args.runs}, ε = 1, δ = {DELTA}; per setting d×n: median worst-column error / oracle, "
          "wild (> 10×) runs, ⊥ runs")
    print("| column | " + " | ".join(f"d = {d}, n = {n}" for d, n in args.settings) + " |")
    print("|---|" + "---|" * len(args.settings))
    for kind in args.kinds:
        cells = []
        for d, n in args.settings:
            med, wild, bottom = setting(kind, d, n, args.runs)
            cells.append(f"{med:.2f}× wild {wild}" + (f" ⊥ {bottom}" if bottom else ""))
        print(f"| {kind} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
