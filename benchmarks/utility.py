"""Utility benchmark: ℓ2 error of private means, privagg against baselines at the same (ε, δ).

Run: ``python benchmarks/utility.py --quick`` (minutes) or ``--full`` (hours; see the printed
estimate); ``--dims 10,100 --sizes 1000,10000`` keeps part of a grid (each cell has its own seed,
so a part reproduces the same cells of the whole). Needs the ``bench`` extra (diffprivlib 0.6.6
imports a name that scikit-learn >= 1.7 removed: install scikit-learn < 1.7 beside it).
Writes ``docs/utility/mean.md`` and PNG plots, and prints the table and the issue's targets
beside the measured ratios. Not a timed test; medians over ``--runs`` (>= 20) runs, every method
on the same sample in each run.

Data: ``N(μ, I_d)`` with ``‖μ‖ = 10⁴`` in a random direction, ``δ = 1e-6``. Stress settings:
``contaminated`` (5% of points replaced by a cluster ``N(μ + 10⁶·v, I)``, ``v`` a random unit
vector), ``heavy_tails`` (μ + independent Student-t, 3 dof, per coordinate), ``scale10``
(``N(μ, 100·I)``, the scale not announced to any method). Error is ``‖estimate − μ‖`` (the
inliers' population mean); a ⊥ release counts as an infinite error (and is counted).

Methods (privacy notions differ; all at the same (ε, δ)):

* ``privagg known r`` — ``private_mean(radius=r)``, ``r = √2·g(d, n²/0.01)`` with
  ``g(d, m) = √(d + 2√(d ln m) + 2 ln m)``: every pair of N(μ, I) points is within r w.p. ≥ 0.99.
  Computed for unit scale in every setting (what a user assuming ``I`` would pass).
  Add/remove neighbours, (ε, δ)-DP.
* ``privagg private r`` — ``private_mean(radius=None)``.
* ``oracle`` — knows ``μ`` and the scale s (1, √3 for t₃, 10): clips to ``B(μ, s·g(d, n/0.01))``
  and adds Gaussian noise of replace-one sensitivity ``2R/n``, σ by the analytic Gaussian
  mechanism (Balle & Wang 2018) at (ε, δ). Not a private algorithm (μ is data); the floor.
* ``CoinPress`` — ``benchmarks/baselines/coinpress.py``, prior ball ``B(0, 10⁵)``, the
  schedule (t in 2..10, split) with the smallest public final radius, ρ the largest with
  ``zcdp_to_epsilon(ρ, δ) <= ε``. Replace-one neighbours, n public.
* ``diffprivlib`` — ``diffprivlib.tools.mean(x, epsilon=ε, bounds=±(10⁴+10), axis=0)``: ε-DP
  (δ unused), ε split evenly over coordinates by diffprivlib, replace-one, n public.
* ``empirical`` — the non-private sample mean (reference).

Sections: ``mean`` (default) and ``kmeans`` (``--section kmeans``: k-means cost relative to
scikit-learn, against diffprivlib's KMeans; quick: k = 10, d = 10, n = 10⁵; ``--full``: k in
{5, 10, 20}, d in {2, 10, 100}; writes ``docs/utility/kmeans.md``) and ``kmeans-time``
(``--section kmeans-time``: only the time target, privagg against scikit-learn KMeans(n_init=1)
on the same threads, the median of interleaved repeats; prints, writes nothing).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import log_ndtr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.coinpress import best_plan, chi_radius, coinpress_mean, rho_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "docs" / "utility"
DELTA = 1e-6
MU_NORM = 1e4
PRIOR_RADIUS = 1e5
BETA = 0.01
SETTINGS = ("gaussian", "contaminated", "heavy_tails", "scale10")
STRESS = SETTINGS[1:]
SCALE = {"gaussian": 1.0, "contaminated": 1.0, "heavy_tails": math.sqrt(3.0), "scale10": 10.0}
METHODS = (
    "privagg known r",
    "privagg private r",
    "oracle",
    "CoinPress",
    "diffprivlib",
    "empirical",
)


# ---------------------------------------------------------------- data
def sample(setting: str, n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(points (n, d), μ) for one run of ``setting``."""
    mu = rng.normal(size=d)
    mu *= MU_NORM / np.linalg.norm(mu)
    if setting == "heavy_tails":
        return mu + rng.standard_t(3, size=(n, d)), mu
    x = mu + SCALE[setting] * rng.normal(size=(n, d))
    if setting == "contaminated":
        v = rng.normal(size=d)
        bad = rng.choice(n, size=n // 20, replace=False)
        x[bad] = mu + 1e6 * v / np.linalg.norm(v) + rng.normal(size=(bad.size, d))
    return x, mu


# ---------------------------------------------------------------- methods
def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ (to 1e-10 relative) with Balle–Wang's exact δ(σ) <= δ, by bisection.

    δ(σ) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) is decreasing in σ.
    """

    def delta_of(s: float) -> float:
        a, b = sensitivity / (2 * s), epsilon * s / sensitivity
        return math.exp(log_ndtr(a - b)) - math.exp(epsilon + log_ndtr(-a - b))

    lo, hi = 1e-3 * sensitivity, sensitivity
    while delta_of(hi) > delta:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if delta_of(mid) <= delta else (mid, hi)
    return hi


def oracle_mean(
    x: np.ndarray, mu: np.ndarray, scale: float, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    n, d = x.shape
    radius = scale * chi_radius(d, n / BETA)
    y = x - mu
    norms = np.sqrt(np.einsum("ij,ij->i", y, y))
    clipped = y * np.minimum(1.0, radius / np.maximum(norms, 1e-300))[:, None]
    sigma = analytic_gaussian_sigma(epsilon, DELTA, 2 * radius / n)
    return mu + clipped.mean(axis=0) + rng.normal(0.0, sigma, size=d)


def diffprivlib_mean(x: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    from diffprivlib.tools import mean

    b = MU_NORM + 10.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mean(
            x, epsilon=epsilon, bounds=(-b, b), axis=0, random_state=int(rng.integers(2**31))
        )


def known_radius(n: int, d: int) -> float:
    return math.sqrt(2.0) * chi_radius(d, n * n / BETA)


def _load_privagg() -> Callable | None:
    try:
        from privagg.mechanisms.mean import private_mean
    except ImportError:
        return None
    return private_mean


# ---------------------------------------------------------------- harness
@dataclass
class Cell:
    setting: str
    n: int
    d: int
    epsilon: float
    errors: dict[str, list[float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    bottoms: dict[str, int] = field(default_factory=dict)

    def median(self, method: str) -> float:
        errs = self.errors.get(method)
        return statistics.median(errs) if errs else math.nan


class MeanBench:
    """Runs the cells; skips a method that is not available (printing why, once)."""

    def __init__(self, runs: int, seed: int) -> None:
        self.runs, self.seed = runs, seed
        self.private_mean = _load_privagg()
        self.unavailable: dict[str, str] = {}
        if self.private_mean is None:
            self._drop("privagg known r", "privagg: not available")
            self._drop("privagg private r", "privagg: not available")
        try:
            import diffprivlib  # noqa: F401
        except ImportError as exc:
            self._drop("diffprivlib", f"diffprivlib: not available ({exc})")

    def _drop(self, method: str, why: str) -> None:
        if method not in self.unavailable:
            self.unavailable[method] = why
            print(why, flush=True)

    def _privagg(
        self, x: np.ndarray, eps: float, radius: float | None, rng: np.random.Generator
    ) -> np.ndarray | None:
        rel = self.private_mean(x, epsilon=eps, delta=DELTA, radius=radius, rng=rng)
        return rel.mean if rel.ok else None

    def run_block(self, setting: str, n: int, d: int, epsilons: list[float]) -> list[Cell]:
        """One cell per ε; every run draws one sample and runs every method at every ε on it."""
        r_known = known_radius(n, d)
        cells = {eps: Cell(setting, n, d, eps) for eps in epsilons}
        plans = {eps: best_plan(n, d, rho=rho_for(eps, DELTA), prior_radius=PRIOR_RADIUS, beta=BETA)
                 for eps in epsilons}

        def methods(eps: float) -> dict[str, Callable[[np.ndarray, np.ndarray, np.random.Generator],
                                                       np.ndarray | None]]:
            return {
                "privagg known r": lambda x, mu, g: self._privagg(x, eps, r_known, g),
                "privagg private r": lambda x, mu, g: self._privagg(x, eps, None, g),
                "oracle": lambda x, mu, g: oracle_mean(x, mu, SCALE[setting], eps, g),
                "CoinPress": lambda x, mu, g: coinpress_mean(x, plans[eps], rng=g),
                "diffprivlib": lambda x, mu, g: diffprivlib_mean(x, eps, g),
                "empirical": lambda x, mu, g: x.mean(axis=0),
            }

        # Seeds depend on the cell alone: a cell gives the same samples in every grid holding it.
        key = [self.seed, SETTINGS.index(setting), n, d]
        for run, run_seed in enumerate(np.random.SeedSequence(key).spawn(self.runs)):
            x, mu = sample(setting, n, d, np.random.default_rng(run_seed))
            for eps in epsilons:
                cell, fns = cells[eps], methods(eps)
                gens = np.random.default_rng(key + [round(eps * 1000), run]).spawn(len(fns))
                for (name, fn), gen in zip(fns.items(), gens, strict=True):
                    if name in self.unavailable:
                        continue
                    t = time.perf_counter()
                    try:
                        est = fn(x, mu, gen)
                    except (ImportError, NotImplementedError) as exc:
                        self._drop(name, f"{name}: not available ({type(exc).__name__}: {exc})")
                        continue
                    cell.seconds[name] = cell.seconds.get(name, 0.0) + time.perf_counter() - t
                    if est is None:
                        cell.bottoms[name] = cell.bottoms.get(name, 0) + 1
                        err = math.inf
                    else:
                        err = float(np.linalg.norm(est - mu))
                    cell.errors.setdefault(name, []).append(err)
        return [cells[eps] for eps in epsilons]


# ---------------------------------------------------------------- grids
def quick_grid() -> list[tuple[str, int, int, float]]:
    """d = 100, n = 10⁴, ε = 1 in every setting, plus the isotropic n = 10³ point."""
    return [(s, 10_000, 100, 1.0) for s in SETTINGS] + [("gaussian", 1_000, 100, 1.0)]


def full_grid() -> list[tuple[str, int, int, float]]:
    """Isotropic and contaminated: every d, n, ε; heavy tails and σ = 10: every d, n at ε = 1."""
    return [
        (s, n, d, e)
        for s in SETTINGS
        for d in (10, 100, 1000)
        for n in (1_000, 10_000, 100_000)
        for e in ((0.5, 1.0, 2.0) if s in ("gaussian", "contaminated") else (1.0,))
    ]


def blocks(grid: list[tuple[str, int, int, float]]) -> list[tuple[str, int, int, list[float]]]:
    """Group the cells sharing (setting, n, d): one sample per run serves every ε."""
    out: dict[tuple[str, int, int], list[float]] = {}
    for s, n, d, e in grid:
        out.setdefault((s, n, d), []).append(e)
    return [(s, n, d, eps) for (s, n, d), eps in out.items()]


def estimate_seconds(
    cells: list[Cell], grid: list[tuple[str, int, int, float]], runs: int
) -> float:
    """Extrapolate the grid's runtime from the measured cells (a rough guide, not a promise).

    Cost model: privagg ~ min(n, 4000)²·d + 50·n·d (friend counting on the locate subsample,
    then linear passes), the others ~ n·d. Per method, seconds per unit come from its largest
    measured cell (fixed overheads inflate the small ones).
    """
    per_unit: dict[str, float] = {}
    largest: dict[str, float] = {}
    for c in cells:
        for m, s in c.seconds.items():
            units = _cost_units(m, c.n, c.d)
            if units > largest.get(m, 0.0):
                largest[m] = units
                per_unit[m] = s / (len(c.errors[m]) * units)
    return sum(per_unit[m] * _cost_units(m, n, d) * runs for _, n, d, _ in grid for m in per_unit)


def _cost_units(method: str, n: int, d: int) -> float:
    if method.startswith("privagg"):
        return min(n, 4000) ** 2 * d + 50.0 * n * d
    return float(n * d)


# ---------------------------------------------------------------- report
TARGETS_ISO = (("privagg", "CoinPress", 1.3), ("privagg", "oracle", 2.0))


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "⊥"
    return f"{x:.3g}"


def table(cells: list[Cell], methods: list[str]) -> str:
    head = "| setting | d | n | ε | " + " | ".join(methods) + " | ⊥ (of runs) |"
    rows = [head, "|" + "---|" * (len(methods) + 5)]
    for c in cells:
        bots = ", ".join(f"{m}: {k}" for m, k in c.bottoms.items()) or "0"
        rows.append(
            f"| {c.setting} | {c.d} | {c.n} | {c.epsilon:g} | "
            + " | ".join(_fmt(c.median(m)) for m in methods)
            + f" | {bots} |"
        )
    return "\n".join(rows)


def targets(cells: list[Cell], variants: list[str]) -> list[str]:
    """One line per target, per privagg variant: measured ratio and MET / NOT MET."""
    lines = []

    def ratio(c: Cell, a: str, b: str) -> float:
        return c.median(a) / c.median(b)

    for v in variants:
        for c in cells:
            if v == "privagg known r" and SCALE[c.setting] != 1.0:
                continue  # given the unit-scale r on purpose (a misspecified radius): no target
            tag = f"{c.setting} d={c.d} n={c.n} ε={c.epsilon:g}"
            if c.setting == "gaussian":
                bounds = [("CoinPress", 1.3), ("oracle", 2.0)] if c.n > 1000 else [("oracle", 3.0)]
                for other, lim in bounds:
                    q = ratio(c, v, other)
                    ok = "MET" if q <= lim else "NOT MET"
                    lines.append(f"{v} / {other} <= {lim:g} [{tag}]: {q:.3g}  {ok}")
            else:
                for other in ("CoinPress", "diffprivlib"):
                    q = ratio(c, v, other)
                    ok = "MET" if q < 1 else "NOT MET"
                    lines.append(f"{v} < {other} (ratio < 1) [{tag}]: {q:.3g}  {ok}")
    return lines


def plot(cells: list[Cell], methods: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cells)), 4.2))
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        vals = [c.median(m) for c in cells]
        vals = [v if math.isfinite(v) else np.nan for v in vals]
        ax.bar(np.arange(len(cells)) + i * width, vals, width, label=m)
    ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2)
    ax.set_xticklabels(
        [f"{c.setting}\nd={c.d} n={c.n}\nε={c.epsilon:g}" for c in cells], fontsize=8
    )
    ax.set_yscale("log")
    ax.set_ylabel("median ℓ2 error")
    ax.set_title(f"Private mean, δ = {DELTA:g} (⊥ and missing bars: not shown)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_vs_n(cells: list[Cell], methods: list[str], path: Path) -> None:
    """Isotropic ε = 1: error against n, one panel per d (full grid only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    iso = [c for c in cells if c.setting == "gaussian" and c.epsilon == 1.0]
    dims = sorted({c.d for c in iso})
    if not dims:  # a part of the grid without isotropic ε = 1 cells: nothing to draw
        return
    fig, axes = plt.subplots(1, len(dims), figsize=(4.5 * len(dims), 4), squeeze=False)
    for ax, d in zip(axes[0], dims, strict=True):
        sub = sorted((c for c in iso if c.d == d), key=lambda c: c.n)
        for m in methods:
            ax.plot([c.n for c in sub], [c.median(m) for c in sub], marker="o", label=m)
        ax.set(xscale="log", yscale="log", xlabel="n", title=f"d = {d}, ε = 1")
    axes[0][0].set_ylabel("median ℓ2 error")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cell_json(c: Cell) -> str:
    return json.dumps({"setting": c.setting, "n": c.n, "d": c.d, "epsilon": c.epsilon,
                       "errors": c.errors, "seconds": c.seconds, "bottoms": c.bottoms})


def _cell_from_json(line: str) -> Cell:
    o = json.loads(line)
    errors = {m: [float(v) for v in vals] for m, vals in o["errors"].items()}
    return Cell(o["setting"], o["n"], o["d"], o["epsilon"], errors, o["seconds"], o["bottoms"])


def mean_section(args: argparse.Namespace) -> None:
    """Run the (filtered) grid, or with ``--report`` only rebuild the table from results files."""
    bench = MeanBench(args.runs, args.seed)
    t0 = time.perf_counter()
    if args.report:
        cells = [_cell_from_json(line) for path in args.report
                 for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        order: dict[tuple[str, int, int, float], int] = {}
        for cell in full_grid() + quick_grid():
            order.setdefault(cell, len(order))
        cells.sort(key=lambda c: order.get((c.setting, c.n, c.d, c.epsilon), len(order)))
        runs = {len(errs) for c in cells for errs in c.errors.values()}
        print(f"report of {len(cells)} cells from {', '.join(args.report)} (runs per cell: "
              f"{sorted(runs)})", flush=True)
    else:
        grid = full_grid() if args.full else quick_grid()
        grid = [cell for cell in grid if (args.dims is None or cell[2] in args.dims)
                and (args.sizes is None or cell[1] in args.sizes)
                and (args.settings is None or cell[0] in args.settings)]
        cells = []
        if args.results and Path(args.results).exists():  # resume: keep the finished cells
            cells = [_cell_from_json(line) for line in
                     Path(args.results).read_text(encoding="utf-8").splitlines() if line.strip()]
            finished = {(c.setting, c.n, c.d, c.epsilon) for c in cells}
            grid = [cell for cell in grid if cell not in finished]
            print(f"resuming: {len(cells)} finished cells read from {args.results}", flush=True)
        work = blocks(grid)
        print(f"seed={args.seed} runs={args.runs} cells={len(grid)} delta={DELTA:g}", flush=True)
        for i, (setting, n, d, epsilons) in enumerate(work):
            done = bench.run_block(setting, n, d, epsilons)
            cells += done
            if args.results:
                with open(args.results, "a", encoding="utf-8") as fh:
                    fh.writelines(_cell_json(c) + "\n" for c in done)
            print(f"  [{i + 1}/{len(work)}] {setting} d={d} n={n} ε={','.join(map(str, epsilons))} "
                  f"done ({time.perf_counter() - t0:.0f} s)", flush=True)
    elapsed = time.perf_counter() - t0
    methods = [m for m in METHODS if m not in bench.unavailable and any(m in c.errors for c in cells)]
    variants = [m for m in methods if m.startswith("privagg")]
    tab = table(cells, methods)
    tgt = targets(cells, variants) if variants else ["privagg: not available; no target evaluated"]
    met = sum(t.endswith("  MET") for t in tgt)
    tgt = [f"{met} of {len(tgt)} checks met; not met: "
           + ("; ".join(t.split(": ")[0] for t in tgt if t.endswith("NOT MET")) or "none"), *tgt]
    per_method = {m: sum(c.seconds.get(m, 0.0) for c in cells) for m in methods}
    timing = ", ".join(f"{m} {s:.1f} s" for m, s in per_method.items())
    full = args.full or bool(args.report)
    print("\n" + tab + "\n\nTargets (issue 5):\n" + "\n".join("  " + t for t in tgt))
    print(f"\nelapsed {elapsed:.0f} s; method seconds summed over cells: {timing}")
    if not args.report:
        est = estimate_seconds(cells, full_grid(), args.runs)
        print(f"estimated full grid at {args.runs} runs: {est / 3600:.1f} h")
    for why in bench.unavailable.values():
        print(why)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    main_cells = [c for c in cells if c.epsilon == 1.0 and c.n == 10_000 and c.d == 100]
    plot(main_cells or cells, methods, OUT_DIR / "mean_settings.png")
    if full:
        plot_vs_n(cells, methods, OUT_DIR / "mean_vs_n.png")
    if args.report:
        command = ("`python benchmarks/utility.py --report " + " ".join(args.report) + "` over results "
                   "written by `--full --results FILE` runs (parts split with `--dims`)")
    else:
        command = (f"`python benchmarks/utility.py --{'full' if args.full else 'quick'} --runs {args.runs} "
                   f"--seed {args.seed}{_filters(args)}`")
    md = [
        "# Private mean: utility (generated by `benchmarks/utility.py`)",
        "",
        (f"Command: {command}; median ℓ2 error ‖estimate − μ‖ over the runs of each cell, "
         f"δ = {DELTA:g}, ‖μ‖ = 10⁴. Methods and settings: the module docstring of "
         "`benchmarks/utility.py`. A ⊥ entry: at least half of the runs released ⊥ (no estimate); "
         "⊥ counts as an infinite error. `privagg known r` is always given the radius for unit "
         "scale (what a user assuming I_d would pass): with heavy tails or σ = 10 it is "
         "misspecified and often ⊥ by design, and it has no targets there."),
        "",
        tab,
        "",
        "## Targets (issue 5)",
        "",
        *[f"- {t}" for t in tgt],
        "",
        f"Method seconds summed over cells: {timing}.",
        *[f"- {why}" for why in bench.unavailable.values()],
        "",
        "![errors by setting](mean_settings.png)",
        *(["", "![error against n](mean_vs_n.png)"] if full else []),
        "",
        "Skewed, heavy-tailed, mixed-unit and real data (issue 11): [mean_real.md](mean_real.md) "
        "(`--section mean-real`).",
        "",
    ]
    (OUT_DIR / "mean.md").write_text("\n".join(md), encoding="utf-8")
    print(f"wrote {OUT_DIR / 'mean.md'}")


#: Benchmark sections by name; the k-means section adds itself here.
SECTIONS: dict[str, Callable[[argparse.Namespace], None]] = {"mean": mean_section}


# ---------------------------------------------------------------- mean on skewed, mixed-unit and real data
# ``--section mean-real`` (issue 11). Error per coordinate against the sample mean x̄_j (the privacy
# error), in standard errors SE_j = std_j/√n; medians over --runs runs (fresh samples for the
# synthetic settings, the same table for the real ones; ⊥ counts as an infinite error). Methods at
# the same (ε, δ = 1e-6): ``privagg`` private_mean(radius=None); ``oracle`` each column clamped to
# its true [min, max], Δ_j = (max − min)/n, Gaussian mechanism σ_j = Δ_j·√(2 ln(1.25d/δ))·d/ε;
# ``CoinPress`` (prior ball B(0, 10⁵), as above); ``diffprivlib`` given the true bounds (ε-DP);
# ``empirical`` (0 by definition here). Targets: ε = 1, privagg's worst-coordinate median error ≤
# 1.5× the oracle's; ε = 100, within 2 SE in every coordinate; mixed units: each column's error/std
# within 2× the 1-D error (setting ``normal1d``) at the same n, ε. ``binary10``: a 0/1 column
# with p = 0.1 (tied data: the spread floor, docs/proofs/mean.md §8c); ``binary50``: p = 0.5 (the
# median between the two atoms: the cell step's occupancy floor, docs/proofs/mean.md §11).
REAL_METHODS = ("privagg", "oracle", "CoinPress", "diffprivlib", "empirical")
SYNTH = ("exponential", "lognormal", "pareto3", "mixture", "mixed_units", "normal1d", "binary10", "binary50")


def synth_sample(setting: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if setting == "exponential":
        return rng.exponential(size=(n, 2))
    if setting == "lognormal":
        return rng.lognormal(0.0, 1.0, size=(n, 2))
    if setting == "pareto3":
        return rng.pareto(3.0, size=(n, 2)) + 1.0  # Pareto α = 3, x_m = 1: finite variance
    if setting == "mixture":  # 0.8·N(0, I) + 0.2·N((6, 6), I)
        return rng.normal(size=(n, 2)) + 6.0 * (rng.random(n) < 0.2)[:, None]
    if setting == "binary10":  # a 0/1 column with a 10 % minority (a rate): tied data, one atom
        return (rng.random((n, 1)) < 0.1).astype(np.float64)
    if setting == "binary50":  # a 0/1 column near half and half: the median between the atoms
        return (rng.random((n, 1)) < 0.5).astype(np.float64)
    if setting == "mixed_units":
        return rng.normal(size=(n, 2)) * np.array([1.0, 1000.0]) + np.array([10.0, 5000.0])
    return rng.normal(size=(n, 1))


def real_tables() -> dict[str, np.ndarray]:
    """Datasets shipped inside packages (never downloaded); rows with a NaN dropped."""
    out: dict[str, np.ndarray] = {}

    def keep(name: str, arr: Any) -> None:
        a = np.asarray(arr, dtype=np.float64)
        out[name] = a[np.isfinite(a).all(axis=1)][:, :10]

    try:
        from sklearn import datasets as skd

        keep("diabetes (target+bmi+bp)", np.column_stack([skd.load_diabetes().target,
                                                          skd.load_diabetes().data[:, 2:4]]))
        keep("breast_cancer (10 cols)", skd.load_breast_cancer().data)
        keep("wine (10 cols)", skd.load_wine().data)
    except ImportError as exc:
        print(f"scikit-learn datasets: not available ({exc})")
    try:
        from vega_datasets import local_data as vl

        keep("airports lat/long", vl.airports()[["latitude", "longitude"]])
        keep("sf_temps temp", vl.sf_temps()[["temp"]])
        keep("seattle_weather", vl.seattle_weather()[["precipitation", "temp_max", "temp_min", "wind"]])
        keep("cars", vl.cars()[["Miles_per_Gallon", "Horsepower", "Weight_in_lbs", "Acceleration"]])
    except ImportError as exc:
        print(f"vega_datasets: not available ({exc})")
    try:
        from palmerpenguins import load_penguins

        keep("penguins bill_length, body_mass", load_penguins()[["bill_length_mm", "body_mass_g"]])
    except ImportError as exc:
        print(f"palmerpenguins: not available ({exc})")
    randhie = statsmodels_randhie()  # 20,190 rows, skewed counts and 0/1 columns (bench extra)
    if randhie is not None:
        keep("randhie (10 cols)", randhie)
    return out


#: Small-n real cells: a fresh subsample (without replacement) of a real table in every run, so
#: the runs see different samples of real columns (medians far from 0 relative to their spread).
#: (the :func:`real_tables` name's first word, columns, rows per subsample).
SUBSAMPLES = (("breast_cancer", 5, 300), ("breast_cancer", 10, 400), ("diabetes", 3, 300))


def subsample_cells(tables: dict[str, np.ndarray]) -> list[tuple[str, Callable[[np.random.Generator], np.ndarray]]]:
    """``(name, draw)`` for :data:`SUBSAMPLES` whose table is available."""
    out = []
    for base, d, n in SUBSAMPLES:
        src = next((x for k, x in tables.items() if k.split(" ")[0] == base), None)
        if src is not None and src.shape[0] >= n and src.shape[1] >= d:
            x = src[:, :d]
            out.append((f"{base} {d} cols, {n}-row subsamples",
                        lambda g, x=x, n=n: x[g.choice(x.shape[0], n, replace=False)]))
    return out


def range_oracle(x: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    n, d = x.shape
    lo, hi = x.min(axis=0), x.max(axis=0)
    sigma = (hi - lo) / n * math.sqrt(2.0 * math.log(1.25 * d / DELTA)) * d / eps
    return np.clip(x, lo, hi).mean(axis=0) + rng.normal(size=d) * sigma


def real_methods(x: np.ndarray, eps: float, private_mean: Callable) -> dict[str, Callable]:
    n, d = x.shape
    plan = best_plan(n, d, rho=rho_for(eps, DELTA), prior_radius=PRIOR_RADIUS, beta=BETA)

    def priv(g: np.random.Generator) -> np.ndarray | None:
        rel = private_mean(x, epsilon=eps, delta=DELTA, rng=g)
        return rel.mean if rel.ok else None

    def dpl(g: np.random.Generator) -> np.ndarray:
        from diffprivlib.tools import mean

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mean(x, epsilon=eps, bounds=(x.min(0), x.max(0)), axis=0,
                        random_state=int(g.integers(2**31)))

    return {"privagg": priv, "oracle": lambda g: range_oracle(x, eps, g),
            "CoinPress": lambda g: coinpress_mean(x, plan, rng=g), "diffprivlib": dpl,
            "empirical": lambda g: x.mean(axis=0)}


#: A release more than this many standard deviations off in some coordinate is "wild".
WILD_SD = 10.0


@dataclass
class RealCell:
    name: str
    n: int
    d: int
    epsilon: float
    errors: dict[str, list[np.ndarray]] = field(default_factory=dict)  # per run: |err_j|/SE_j
    seconds: dict[str, float] = field(default_factory=dict)
    bottoms: dict[str, int] = field(default_factory=dict)

    def wild(self, method: str) -> int:
        """Runs whose estimate is more than 10 standard deviations (10·√n SE) off in some
        coordinate (⊥ not counted): a median over runs hides them."""
        return sum(bool(np.any(np.isfinite(e) & (e > WILD_SD * math.sqrt(self.n))))
                   for e in self.errors.get(method, []))

    def med(self, method: str) -> np.ndarray:
        """Per coordinate, the median over the runs of |est_j − x̄_j|/SE_j."""
        errs = self.errors.get(method)
        return np.median(np.array(errs), axis=0) if errs else np.full(self.d, np.nan)


def run_real_cell(name: str, draw: Callable[[np.random.Generator], np.ndarray], eps: float,
                  runs: int, seed: int, private_mean: Callable, unavailable: set) -> RealCell:
    cell = None
    for run, ss in enumerate(np.random.SeedSequence([seed, sum(map(ord, name)), round(eps * 1000)]).spawn(runs)):
        g_data, *gens = np.random.default_rng(ss).spawn(1 + len(REAL_METHODS))
        x = draw(g_data)
        n, d = x.shape
        cell = cell or RealCell(name, n, d, eps)
        se = x.std(axis=0) / math.sqrt(n)
        for (m, fn), g in zip(real_methods(x, eps, private_mean).items(), gens, strict=True):
            if m in unavailable:
                continue
            t = time.perf_counter()
            try:
                est = fn(g)
            except ImportError as exc:
                unavailable.add(m)
                print(f"{m}: not available ({exc})")
                continue
            cell.seconds[m] = cell.seconds.get(m, 0.0) + time.perf_counter() - t
            if est is None:
                cell.bottoms[m] = cell.bottoms.get(m, 0) + 1
                cell.errors.setdefault(m, []).append(np.full(d, np.inf))
            else:
                cell.errors.setdefault(m, []).append(np.abs(est - x.mean(axis=0)) / se)
    assert cell is not None
    return cell


#: Bootstrap resamples of the runs for the interval of privagg/oracle (fixed seed: the table is
#: reproducible). The median of 20 runs of a Laplace-like |error| has a relative sd of about 30 %,
#: so a ratio of two such medians, maxed over coordinates, scatters by ±40 % at 20 runs.
RATIO_BOOT = 1000


def ratio_interval(priv: list[np.ndarray], orac: list[np.ndarray], level: float = 0.9,
                   seed: int = 0) -> tuple[float, float]:
    """A bootstrap ``level`` interval (percentile, runs resampled in pairs: the same sample for
    both methods) of ``max_j median(privagg_j) / median(oracle_j)``; ⊥ runs stay infinite."""
    p, o = np.asarray(priv, dtype=np.float64), np.asarray(orac, dtype=np.float64)
    if p.ndim != 2 or p.shape != o.shape or p.shape[0] < 2:
        return math.nan, math.nan
    idx = np.random.default_rng(seed).integers(0, p.shape[0], size=(RATIO_BOOT, p.shape[0]))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.max(np.median(p[idx], axis=1) / np.median(o[idx], axis=1), axis=1)
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(lo), float(hi)


def real_table(cells: list[RealCell]) -> tuple[str, list[str]]:
    head = ("| data | n | d | ε | " + " | ".join(f"{m} (worst coord, SE)" for m in REAL_METHODS[:4])
            + " | privagg/oracle (worst coord) | 90% bootstrap | privagg ⊥ | privagg wild | privagg s/run | CoinPress s/run |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    misses = []
    one_d = {(c.n, c.epsilon): float(c.med("privagg")[0]) for c in cells if c.name == "normal1d"}
    for c in cells:
        worst = {m: float(np.max(c.med(m))) for m in REAL_METHODS[:4]}
        ratio = float(np.max(c.med("privagg") / c.med("oracle")))
        lo, hi = ratio_interval(c.errors.get("privagg", []), c.errors.get("oracle", []))
        runs = max(1, len(c.errors.get("privagg", [])))
        lines.append(f"| {c.name} | {c.n} | {c.d} | {c.epsilon:g} | "
                     + " | ".join(_fmt(worst[m]) for m in REAL_METHODS[:4])
                     + f" | {ratio:.2f} | {lo:.2f}–{hi:.2f} | {c.bottoms.get('privagg', 0)}/{runs} | "
                     f"{c.wild('privagg')}/{runs} | "
                     f"{c.seconds.get('privagg', 0.0) / runs:.3f} | {c.seconds.get('CoinPress', 0.0) / runs:.4f} |")
        if c.wild("privagg"):
            misses.append(f"{c.name} n={c.n} d={c.d} ε={c.epsilon:g}: {c.wild('privagg')}/{runs} privagg "
                          f"releases more than {WILD_SD:g} standard deviations off in some coordinate")
        if c.name == "normal1d":
            continue
        tag = f"{c.name} n={c.n} d={c.d} ε={c.epsilon:g}"
        if c.epsilon == 1.0 and not ratio <= 1.5:
            noise = " (within the runs' noise: the interval reaches 1.5)" if lo <= 1.5 else ""
            misses.append(f"{tag}: privagg/oracle {ratio:.2f} > 1.5 (90% bootstrap {lo:.2f}–{hi:.2f}){noise}")
        if c.epsilon == 100.0 and not worst["privagg"] <= 2.0:
            misses.append(f"{tag}: privagg {worst['privagg']:.2f} SE > 2")
        if c.name == "mixed_units" and (c.n, c.epsilon) in one_d:
            # error/std = (error/SE)/√n for every column: compare with the 1-D cell directly
            r = float(np.max(c.med("privagg"))) / one_d[(c.n, c.epsilon)]
            if not r <= 2.0:
                misses.append(f"{tag}: per-column error/std {r:.2f}× the 1-D error > 2")
    return "\n".join(lines), misses


def mean_real_section(args: argparse.Namespace) -> None:
    private_mean = _load_privagg()
    if private_mean is None:
        print("privagg: not available")
        return
    unavailable: set = set()
    try:
        import diffprivlib  # noqa: F401
    except ImportError as exc:
        unavailable.add("diffprivlib")
        print(f"diffprivlib: not available ({exc})")
    sizes = sorted(args.sizes or {300, 1_000, 10_000, 100_000})
    settings = args.settings or list(SYNTH) + ["real"]
    t0 = time.perf_counter()
    cells = []
    for eps in (1.0, 100.0):
        for setting in [s for s in SYNTH if s in settings]:
            for n in sizes:
                cells.append(run_real_cell(setting, lambda g, s=setting, n=n: synth_sample(s, n, g),
                                           eps, args.runs, args.seed, private_mean, unavailable))
                print(f"  {setting} n={n} ε={eps:g} done ({time.perf_counter() - t0:.0f} s) "
                      + real_table(cells[-1:])[0].splitlines()[-1], flush=True)
        if "real" in settings:
            tables = real_tables()
            draws = [(name, lambda g, x=x: x) for name, x in tables.items()] + subsample_cells(tables)
            for name, draw in draws:
                cells.append(run_real_cell(name, draw, eps, args.runs, args.seed,
                                           private_mean, unavailable))
                print(f"  {name} ε={eps:g} done ({time.perf_counter() - t0:.0f} s) "
                      + real_table(cells[-1:])[0].splitlines()[-1], flush=True)
    tab, misses = real_table(cells)
    print("\n" + tab + "\n\nTargets (issue 11) not met:\n" + ("\n".join("  " + m for m in misses) or "  none"))
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    md = ["# Private mean on skewed, mixed-unit and real data (generated by `benchmarks/utility.py`)", "",
          f"Command: `python benchmarks/utility.py --section mean-real --runs {args.runs} --seed {args.seed}"
          f"{_filters(args)}`. Entries: per coordinate the median over the runs of |estimate − x̄_j| in "
          "standard errors SE_j = std_j/√n; the worst coordinate is shown (the section's comment in "
          "`benchmarks/utility.py` defines the methods). ⊥ counts as an infinite error.", "",
          "Reading the targets: each entry is a median over the runs, and the median of 20 runs of a "
          "Laplace-like |error| has a relative sd of about 30 %; the 90% bootstrap column is the "
          "interval of privagg/oracle over resampled runs (`ratio_interval`), and a miss whose "
          "interval reaches 1.5 is within the runs' noise (re-run with more `--runs`). The mixed-units "
          "per-column target compares a d = 2 column with the 1-D cell at the same ε: the coordinate "
          "plan splits ε over the d coordinates and its error is the clipped sum's Laplace noise "
          "(∝ d/ε), so that ratio is about 2 by composition alone. `privagg wild`: runs whose release "
          f"is more than {WILD_SD:g} standard deviations off in some coordinate (a median hides them; "
          "each is listed below). The `…-row subsamples` cells draw a fresh subsample of a real "
          "table in every run.", "", tab, "",
          "## Targets (issue 11) not met", "", *([f"- {m}" for m in misses] or ["- none"]), ""]
    (OUT_DIR / "mean_real.md").write_text("\n".join(md), encoding="utf-8")
    print(f"wrote {OUT_DIR / 'mean_real.md'} ({time.perf_counter() - t0:.0f} s)")


SECTIONS["mean-real"] = mean_real_section


# ---------------------------------------------------------------- k-means section
# Data: a mixture of k equally likely N(c_j, I_d), centers c_j drawn N(0, I_d) and rescaled so
# the least pairwise distance is KM_SEP·√d (well separated: the cluster radius is ≈ √d), n rows,
# ε = 1, δ = 1e-6. Cost: Σ_i min_j ‖x_i − c_j‖² of the released centers over the sample, divided
# by the cost of non-private scikit-learn KMeans (k-means++, n_init=3) on the same sample.
# Methods: ``privagg`` — private_kmeans(x, k, epsilon, delta) (radius chosen privately,
# add/remove neighbours, (ε, δ)-DP); ``diffprivlib`` — diffprivlib.models.KMeans(k, epsilon=ε,
# bounds=(per-coordinate min, max) of the sample) (ε-DP, replace-one, given the true bounds,
# which is not private); ⊥ counts as an infinite cost ratio. Real data (the same rows every run):
# ``km_real_sets`` — vega_datasets, palmerpenguins, scikit-learn's bundled sets (k = 3, 5) and
# statsmodels' randhie (20,190 rows, d = 10; k = 3, 5, 10: the cells of the n >= 10^4 target), in
# raw units and z-scored. ``--real-only`` runs only the real cells.
KM_SEP = 8.0
KM_N = 100_000
KM_EPS = 1.0
#: Runs of the k = 64, d = 100 cell (diffprivlib and scikit-learn take ~20 s a run there).
KM_RUNS_64 = 5
#: The time target (privagg <= 5× scikit-learn KMeans(n_init=1)) times both under
#: threadpoolctl's limit of KM_THREADS threads (privagg's own passes are single-threaded numpy;
#: unlimited, scikit-learn's OpenMP and the BLAS threads make both noisy on shared cores), and
#: ``--section kmeans-time`` takes the median of KM_TIME_REPEATS interleaved repeats on one sample.
KM_THREADS = 1
KM_TIME_REPEATS = 7


def km_sample(n: int, k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    c = rng.normal(size=(k, d))
    a, b = np.triu_indices(k, 1)
    c *= KM_SEP * math.sqrt(d) / np.linalg.norm(c[a] - c[b], axis=1).min()
    return c[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))


def km_cost(x: np.ndarray, centers: np.ndarray) -> float:
    c2 = np.einsum("ij,ij->i", centers, centers)
    total = 0.0
    for s in range(0, x.shape[0], 8192):
        blk = x[s : s + 8192]
        d2 = np.einsum("ij,ij->i", blk, blk)[:, None] + c2[None, :] - 2.0 * (blk @ centers.T)
        total += float(np.maximum(d2.min(axis=1), 0.0).sum())
    return total


def km_run(x: np.ndarray, k: int, seed: int, dpl: bool = True) -> dict[str, tuple[float, float]]:
    """{method: (cost ratio to scikit-learn n_init=3, seconds)} for one sample; also the seconds
    of scikit-learn with n_init=1 (the time target's reference)."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from privagg.mechanisms.kmeans import private_kmeans

    out: dict[str, tuple[float, float]] = {}
    t0 = time.perf_counter()
    base = km_cost(x, KMeans(k, init="k-means++", n_init=3, random_state=seed).fit(x).cluster_centers_)
    out["scikit-learn"] = (1.0, time.perf_counter() - t0)
    with threadpool_limits(KM_THREADS):  # the time target's pair: the same threads for both
        t0 = time.perf_counter()
        KMeans(k, init="k-means++", n_init=1, random_state=seed).fit(x)
        out["sklearn-n_init=1"] = (math.nan, time.perf_counter() - t0)
        t0 = time.perf_counter()
        rel = private_kmeans(x, k, epsilon=KM_EPS, delta=DELTA, rng=seed)
        out["privagg"] = (math.nan, time.perf_counter() - t0)
    ratio = km_cost(x, rel.centers) / base if rel.ok else math.inf
    out["privagg"] = (ratio, out["privagg"][1])
    try:
        from diffprivlib.models import KMeans as DPKMeans
    except ImportError:  # pragma: no cover - optional baseline
        return out
    if not dpl:
        return out
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bounds = (x.min(axis=0), x.max(axis=0))
        dp = DPKMeans(n_clusters=k, epsilon=KM_EPS, bounds=bounds, random_state=seed).fit(x)
    out["diffprivlib"] = (km_cost(x, dp.cluster_centers_) / base, time.perf_counter() - t0)
    return out


def km_real_sets() -> dict[str, np.ndarray]:
    """Real datasets shipped inside installed packages (never downloaded): name → rows."""
    out: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from vega_datasets import local_data

            a = local_data.airports()
            out["airports lat/long"] = a[["latitude", "longitude"]].to_numpy(float)
            for name, df in (("sf-temps", local_data.sf_temps()), ("seattle-temps", local_data.seattle_temps())):
                t = df["date"]
                out[f"{name} temp/hour/day"] = np.c_[df["temp"].to_numpy(float), t.dt.hour, t.dt.day_of_year]
            w = local_data.seattle_weather()
            out["seattle-weather"] = w[["precipitation", "temp_max", "temp_min", "wind"]].to_numpy(float)
        except ImportError:  # pragma: no cover
            pass
        try:
            import palmerpenguins

            p = palmerpenguins.load_penguins()[["bill_length_mm", "bill_depth_mm", "flipper_length_mm",
                                                "body_mass_g"]].dropna()
            out["penguins"] = p.to_numpy(float)
        except ImportError:  # pragma: no cover
            pass
        from sklearn import datasets as skd

        out["iris"] = skd.load_iris().data
        out["digits"] = skd.load_digits().data
    out.update(km_statsmodels_sets())
    return out


def statsmodels_randhie() -> np.ndarray | None:
    """statsmodels' RAND Health Insurance Experiment table (20,190 rows, its 10 numeric columns:
    mdvis, lncoins, idp, lpi, fmde, physlm, disea, hlthg, hlthf, hlthp), read by statsmodels' own
    loader from the CSV inside the installed package (``load_csv(__file__, "randhie.csv")``: no
    download); None without statsmodels (the ``bench`` extra)."""
    try:
        from statsmodels.datasets import randhie
    except ImportError:  # pragma: no cover - optional (bench extra)
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return randhie.load_pandas().data.to_numpy(np.float64)


def km_statsmodels_sets() -> dict[str, np.ndarray]:
    """The k-means cells with n >= 10^4 (statsmodels' randhie, the only table of >= 10^4 rows
    that statsmodels ships): in raw units (counts, logs and 0/1 columns on different scales: the
    coreset grid is isotropic) and z-scored by the sample's mean and std (not private: the
    scale a user would fix from public knowledge)."""
    x = statsmodels_randhie()
    if x is None:  # pragma: no cover
        return {}
    return {"randhie raw": x, "randhie z-scored": (x - x.mean(axis=0)) / x.std(axis=0)}


def _km_cell(k: int, d: int, n: int, runs: int, seed: int, data: str | None = None) -> dict:
    """One k-means cell: per-run cost ratios and seconds of every method (synthetic when
    ``data`` is None, else the named real dataset, the same rows every run)."""
    rng = np.random.default_rng([seed, k, d])
    res: dict[str, list[tuple[float, float]]] = {}
    real = km_real_sets()[data] if data is not None else None
    for _ in range(runs):
        x = km_sample(n, k, d, rng) if real is None else real
        for m, v in km_run(x, k, int(rng.integers(2**31))).items():
            res.setdefault(m, []).append(v)
    return {"k": k, "d": int(x.shape[1]), "n": int(x.shape[0]), "data": data or "synthetic",
            "ratios": {m: [r for r, _ in v] for m, v in res.items()},
            "seconds": {m: [t for _, t in v] for m, v in res.items()}}


def km_plot(cells: list[dict], path: Path) -> None:
    """Median cost ratio (log scale) of privagg and diffprivlib per (k, d); ⊥ medians not drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cells)), 4.0))
    methods = [m for m in ("privagg", "diffprivlib") if all(m in c["ratios"] for c in cells)]
    width = 0.8 / max(1, len(methods))
    for i, m in enumerate(methods):
        vals = [statistics.median(c["ratios"][m]) for c in cells]
        ax.bar(np.arange(len(cells)) + i * width, [v if math.isfinite(v) else np.nan for v in vals],
               width, label=m)
    ax.axhline(1.2, color="grey", linestyle="--", linewidth=1, label="target 1.2 (k=20, d=10)")
    ax.axhline(1.3, color="grey", linestyle=":", linewidth=1, label="target 1.3 (real, n >= 10^4)")
    ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{c.get('data', 'synthetic')[:14]}\nk={c['k']} d={c['d']}" for c in cells],
                       fontsize=6, rotation=60)
    ax.set_yscale("log")
    ax.set_ylabel("k-means cost / scikit-learn's (median)")
    ax.set_title(f"Private k-means, n = {cells[0]['n'] if cells else KM_N}, ε = {KM_EPS:g}, δ = {DELTA:g}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def kmeans_section(args: argparse.Namespace) -> None:
    """Run the k-means cells (resuming from ``--results``), or only report with ``--report``."""
    t_all = time.perf_counter()
    if args.report:
        done = [json.loads(line) for path in args.report
                for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        done.sort(key=lambda c: (c.get("data", "synthetic") != "synthetic", c.get("data", ""), c["k"], c["d"]))
        n = done[0]["n"] if done else KM_N
        print(f"report of {len(done)} k-means cells from {', '.join(args.report)}", flush=True)
    else:
        n = max(args.sizes) if args.sizes else KM_N
        done = []
        if args.results and Path(args.results).exists():
            done = [json.loads(line) for line in
                    Path(args.results).read_text(encoding="utf-8").splitlines() if line.strip()]
            print(f"resuming: {len(done)} finished cells read from {args.results}", flush=True)
        have = {(c.get("data", "synthetic"), c["k"], c["d"]) for c in done}
        # (data, k, d, runs): the cells; k = 64, d = 100 with KM_RUNS_64 runs (time)
        plan = [("synthetic", 20, 10, args.runs), ("synthetic", 64, 100, KM_RUNS_64),
                ("synthetic", 10, 10, args.runs)]
        if args.full:
            plan += [("synthetic", k, d, args.runs) for k in (5, 10, 20) for d in (2, 10, 100)
                     if (k, d) not in {(20, 10), (10, 10)}]
        if args.real_only:  # k-means: only the real-data cells
            plan = []
        for name, x in km_real_sets().items():  # k = 10 too where n >= 10^4 (the target's cells)
            plan += [(name, k, x.shape[1], args.runs) for k in ((3, 5, 10) if len(x) >= 10_000 else (3, 5))]
        if args.ks:
            plan = [p for p in plan if p[1] in args.ks]
        todo = [p for p in plan if (p[0], p[1], p[2]) not in have]
        print(f"seed={args.seed} runs={args.runs} cells={len(todo)} n={n} eps={KM_EPS:g} "
              f"delta={DELTA:g}", flush=True)
        for ci, (data, k, d, runs) in enumerate(todo):
            cell = _km_cell(k, d, n, runs, args.seed, None if data == "synthetic" else data)
            done.append(cell)
            if args.results:
                with open(args.results, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(cell) + "\n")
            print(f"  [{ci + 1}/{len(todo)}] {data} k={k} d={d} done ({time.perf_counter() - t_all:.0f} s)",
                  flush=True)
    rows, lines = [], []
    for cell in done:
        k, d, data = cell["k"], cell["d"], cell.get("data", "synthetic")
        med = {m: statistics.median(v) for m, v in cell["ratios"].items()}
        secs = {m: statistics.median(v) for m, v in cell["seconds"].items()}
        runs = len(cell["ratios"]["privagg"])
        bottoms = sum(1 for r in cell["ratios"]["privagg"] if not math.isfinite(r))
        sk1 = secs.get("sklearn-n_init=1", math.nan)
        rows.append(f"| {data} | {k} | {d} | {cell['n']} | {runs} | {med['privagg']:.4g} | "
                    f"{med.get('diffprivlib', math.nan):.4g} | {bottoms}/{runs} | "
                    f"{secs['privagg']:.2f} / {secs.get('diffprivlib', math.nan):.2f} / "
                    f"{secs['scikit-learn']:.2f} / {sk1:.2f} |")
        p, q = med["privagg"], med.get("diffprivlib", math.inf)
        if data == "synthetic" and (k, d) == (20, 10):
            ok = "MET" if p <= 1.2 and bottoms * 20 <= runs else "NOT MET"
            lines.append(f"k=20 d=10 n={cell['n']}: cost ratio <= 1.2 with ⊥ in <= 1/20 runs: "
                         f"{p:.4g}, ⊥ {bottoms}/{runs}  {ok}")
        if data == "synthetic" and (k, d) == (64, 100):
            ok = "MET" if p < q else "NOT MET"
            lines.append(f"k=64 d=100 n={cell['n']}: better than diffprivlib: {p:.4g} vs {q:.4g}  {ok}")
        if data == "synthetic" and cell["n"] >= 100_000:
            ok = "MET" if secs["privagg"] <= 5 * sk1 else "NOT MET"
            lines.append(f"time k={k} d={d} n={cell['n']}: privagg <= 5× scikit-learn n_init=1: "
                         f"{secs['privagg']:.2f} s vs 5 × {sk1:.2f} s  {ok}")
        if data != "synthetic" and d <= 10:
            big = cell["n"] >= 10_000
            ok = ("MET" if p <= 1.3 else "NOT MET") if big else ("(n < 10^4: no target) "
                                                                 + ("<= 1.3" if p <= 1.3 else "> 1.3"))
            lines.append(f"real {data} k={k} n={cell['n']} d={d}: cost ratio <= 1.3: {p:.4g}  {ok}")
    head = [("| data | k | d | n | runs | privagg cost ratio | diffprivlib cost ratio | privagg ⊥ | "
             "median s (privagg / dpl / sklearn n_init=3 / sklearn n_init=1) |"),
            "|---|---|---|---|---|---|---|---|---|"]
    tab = "\n".join(head + rows)
    print("\n" + tab + "\n\nTargets (issue 5):\n" + "\n".join("  " + t for t in lines))
    print(f"elapsed {time.perf_counter() - t_all:.0f} s")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.report:
        how = f"`python benchmarks/utility.py --section kmeans --report {' '.join(args.report)}`"
    else:
        extra = ((f" --ks {','.join(map(str, sorted(args.ks)))}" if args.ks else "")
                 + (" --real-only" if args.real_only else "") + _filters(args))
        how = (f"`python benchmarks/utility.py --section kmeans {'--full ' if args.full else ''}"
               f"--runs {args.runs} --seed {args.seed}{extra}`")
    command = (
        f"Command: {how}. Median over the runs of each cell of the k-means "
        f"cost of the released centers divided by non-private scikit-learn's (k-means++, n_init=3) on "
        f"the same sample; ε = {KM_EPS:g}, δ = {DELTA:g}. Data: k equally likely N(c_j, I_d), least "
        f"center distance {KM_SEP:g}·√d; real datasets shipped in packages (`km_real_sets`, the same "
        "rows every run; the cells with n >= 10^4 are statsmodels' randhie, raw and z-scored). privagg "
        "uses its default strategy (coreset). diffprivlib's KMeans is given the sample's true bounds "
        "(not private). Details: the comment block of the k-means section in `benchmarks/utility.py`."
    )
    km_plot(done, OUT_DIR / "kmeans_cost.png")
    md = ["# Private k-means: utility (generated by `benchmarks/utility.py --section kmeans`)", "",
          command, "", tab, "", "## Targets (issue 5)", "", *[f"- {t}" for t in lines], "",
          "![cost ratios](kmeans_cost.png)", ""]
    (OUT_DIR / "kmeans.md").write_text("\n".join(md), encoding="utf-8")
    print(f"wrote {OUT_DIR / 'kmeans.md'}")


SECTIONS["kmeans"] = kmeans_section


def kmeans_time_section(args: argparse.Namespace) -> None:
    """Only the k-means time target: on one sample per cell (k = 20, d = 10; ``--ks 64`` also
    k = 64, d = 100), KM_TIME_REPEATS interleaved repeats of scikit-learn KMeans(n_init=1) and
    private_kmeans, both under ``threadpool_limits(KM_THREADS)``; the medians, printed as is."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from privagg.mechanisms.kmeans import private_kmeans

    n = max(args.sizes) if args.sizes else KM_N
    cells = [(20, 10)] + ([(64, 100)] if args.ks and 64 in args.ks else [])
    print(f"seed={args.seed} n={n} threads={KM_THREADS} repeats={KM_TIME_REPEATS} eps={KM_EPS:g} "
          f"delta={DELTA:g}", flush=True)
    for k, d in cells:
        rng = np.random.default_rng([args.seed, k, d])
        x = km_sample(n, k, d, rng)
        secs: dict[str, list[float]] = {"sklearn": [], "privagg": []}
        with threadpool_limits(KM_THREADS):
            for rep in range(KM_TIME_REPEATS):
                seed = int(rng.integers(2**31))
                t0 = time.perf_counter()
                KMeans(k, init="k-means++", n_init=1, random_state=seed).fit(x)
                secs["sklearn"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                private_kmeans(x, k, epsilon=KM_EPS, delta=DELTA, rng=seed)
                secs["privagg"].append(time.perf_counter() - t0)
        p, q = statistics.median(secs["privagg"]), statistics.median(secs["sklearn"])
        print(f"time k={k} d={d} n={n}: privagg <= 5× scikit-learn n_init=1 ({KM_THREADS} thread, "
              f"median of {KM_TIME_REPEATS} interleaved): {p:.2f} s vs 5 × {q:.2f} s  "
              f"{'MET' if p <= 5 * q else 'NOT MET'}", flush=True)


SECTIONS["kmeans-time"] = kmeans_time_section


def _filters(args: argparse.Namespace) -> str:
    out = ""
    for name in ("dims", "sizes", "settings"):
        values = getattr(args, name, None)
        if values is not None:
            out += f" --{name} " + ",".join(str(v) for v in sorted(values))
    return out


def _int_list(text: str) -> set[int]:
    return {int(v) for v in text.split(",")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="reduced grid (default)")
    mode.add_argument("--full", action="store_true", help="the whole grid (hours)")
    parser.add_argument("--runs", type=int, default=20, help="runs per cell (>= 20)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--section", choices=sorted(SECTIONS), default="mean")
    parser.add_argument("--dims", type=_int_list, help="keep only these d (comma-separated)")
    parser.add_argument("--sizes", type=_int_list, help="keep only these n (comma-separated)")
    parser.add_argument("--settings", type=lambda t: set(t.split(",")),
                        help=f"mean: keep only these settings (of {', '.join(SETTINGS)})")
    parser.add_argument("--ks", type=_int_list, help="k-means: keep only these k (comma-separated)")
    parser.add_argument("--real-only", action="store_true", help="k-means: only the real-data cells")
    parser.add_argument("--results", metavar="FILE",
                        help="append every finished cell to FILE (JSON lines); cells already there are skipped")
    parser.add_argument("--report", nargs="+", metavar="FILE",
                        help="no runs: build the table, targets and plots from results FILEs")
    args = parser.parse_args(argv)
    if args.runs < 20:
        parser.error("--runs must be >= 20 (medians over at least 20 runs)")
    SECTIONS[args.section](args)


if __name__ == "__main__":
    main()
