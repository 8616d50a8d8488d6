"""Group-by means of columns far from 0 relative to their spread, in small groups (issue 13 item 4).

A column such as a year (2007–2009), a timestamp, or a measurement with a large offset
(10⁶ ± 10) puts the small-group plan's pooled octave cell hundreds or thousands of spreads wide
(docs/proofs/aggregate_mean.md §8). Step 2b refines that cell; at its full number of levels it
needs ``e_lv·N_low >= 8·L``, so groups of about 100 rows (500 pooled) went without it and were
released hundreds of sd off. The partial step (``REFINE_PARTIAL_MIN`` or more affordable levels,
behind a gate and the second spread's test for near data) covers them, and the floor of its shares
(``REFINE_FLOOR_SHARE``) the groups whose capped shares afforded one level (about 100 rows in a
four-metric query). Since the eighteenth stop the cell step itself offers the octave cells' subcells
(``SMALL_SUBCELLS``), which locate such columns without step 2b's ε. This script measures, side by
side in one run:

- ``privagg``: ``privagg.aggregate(table, by="k", metrics=[count(), mean("x")])`` as it is
  (``--query four``: ``[count(), sum("x", b), mean("x"), quantile("x", 0.5)]``, ``b`` the
  bounded mean's bounds below — the group-by benchmark's query);
- ``no subcells``: the same with ``grouped_mean.SMALL_SUBCELLS = False`` (step 2's cell among the
  point cells only: the plan before the eighteenth stop);
- ``no floor``: ``no subcells`` with ``grouped_mean.REFINE_FLOOR_SHARE = 0`` (step 2b's capped
  shares: the plan of the thirteenth stop);
- ``no partial``: ``no subcells`` with ``grouped_mean.REFINE_PARTIAL_MIN`` set out of reach (the
  plan without the partial step: step 2b only at its full number of levels; no floor either);
- ``bounded``: ``mean("x", bounds=(q_0.001, q_0.999))`` with the TRUE quantiles of the column
  (which a user would not know).

Tables: ``--groups`` (5) groups of ``n_g`` rows (``--sizes``), values from one law (``--laws``):
far ``n1e6`` N(10⁶, 10²), ``n1e4`` N(10⁴, 1), ``years`` integers 2007–2009, ``n2008``
N(2008, 0.8²); near ``n50`` N(50, 10²), ``lognormal`` (0, 1), ``exponential`` (1), ``n0`` N(0, 1),
``likert`` 1..5 (p = .1, .2, .3, .25, .15), ``binary`` Bernoulli(0.2), ``mixture`` 30 % N(100, 5²)
and 70 % N(20, 3²). Run ``r`` draws its table from ``numpy.random.default_rng([r, n_g, 5])`` and
privagg's noise from seed ``r`` (public partitions, ε = ``--epsilon`` (1), δ = 10⁻⁶, record level).

Score per group: ``|released − true mean| / sd`` (⊥ = inf); printed per (law, n_g): the median
over runs and groups, the median over runs of the worst group, and for ``privagg`` the coverage of
its noise-only interval. Run: ``python benchmarks/aggregate_far.py --markdown``.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

LAWS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "n1e6": lambda g, n: g.normal(1e6, 10.0, n),
    "n1e4": lambda g, n: g.normal(1e4, 1.0, n),
    "years": lambda g, n: g.integers(2007, 2010, n).astype(np.float64),
    "n2008": lambda g, n: g.normal(2008.0, 0.8, n),
    "n50": lambda g, n: g.normal(50.0, 10.0, n),
    "lognormal": lambda g, n: g.lognormal(0.0, 1.0, n),
    "exponential": lambda g, n: g.exponential(1.0, n),
    "n0": lambda g, n: g.normal(0.0, 1.0, n),
    "likert": lambda g, n: g.choice([1.0, 2.0, 3.0, 4.0, 5.0], n, p=[0.1, 0.2, 0.3, 0.25, 0.15]),
    "binary": lambda g, n: (g.random(n) < 0.2).astype(np.float64),
    "mixture": lambda g, n: np.where(g.random(n) < 0.3, g.normal(100.0, 5.0, n), g.normal(20.0, 3.0, n)),
}
METHODS = ("privagg", "no subcells", "no floor", "no partial", "bounded")
#: The constants each variant sets (the plan without the floor; without the partial step).
VARIANTS: dict[str, tuple[tuple[str, Any], ...]] = {
    "no subcells": (("SMALL_SUBCELLS", False),),
    "no floor": (("SMALL_SUBCELLS", False), ("REFINE_FLOOR_SHARE", 0)),
    "no partial": (("SMALL_SUBCELLS", False), ("REFINE_PARTIAL_MIN", 10**9)),
}
QUERIES = ("count-mean", "four")


@contextlib.contextmanager
def _variant(method: str) -> Iterator[None]:
    """The constants of :data:`VARIANTS` ``[method]`` set while inside (none for the others)."""
    import privagg.mechanisms.grouped_mean as gm

    sets = VARIANTS.get(method, ())
    old = [(name, getattr(gm, name)) for name, _ in sets]
    for name, value in sets:
        setattr(gm, name, value)
    try:
        yield
    finally:
        for name, value in old:
            setattr(gm, name, value)


def cell(law: str, n_g: int, groups: int, runs: int, epsilon: float, query: str = "count-mean",
         methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    """Scores of ``methods`` (default all of :data:`METHODS`) on ``runs`` tables of one (law, n_g)."""
    import pandas as pd

    import privagg

    err: dict[str, list[np.ndarray]] = {m: [] for m in methods}
    cover: list[np.ndarray] = []
    for r in range(runs):
        gen = np.random.default_rng([r, n_g, 5])
        df = pd.DataFrame({"k": np.repeat(np.arange(groups), n_g), "x": LAWS[law](gen, groups * n_g)})
        st = df.groupby("k")["x"].agg(["mean", "std"])
        bounds = (float(df.x.quantile(0.001)), float(df.x.quantile(0.999)))
        for method in methods:
            metrics = [privagg.count(), privagg.mean("x", bounds=bounds) if method == "bounded" else privagg.mean("x")]
            if query == "four":
                metrics[1:1] = [privagg.sum("x", bounds=bounds)]
                metrics.append(privagg.quantile("x", 0.5, bounds=bounds) if method == "bounded"
                               else privagg.quantile("x", 0.5))
            with _variant(method):
                res = privagg.aggregate(df, by="k", domain=list(range(groups)), epsilon=epsilon, delta=1e-6,
                                        rng=r, metrics=metrics).to_pandas().set_index("k")
            value = res["mean_x"].to_numpy(dtype=float, na_value=np.nan)
            if "mean_x_ok" in res.columns:
                value = np.where(res["mean_x_ok"].to_numpy(dtype=bool, na_value=False), value, np.nan)
            e = np.abs(value - st["mean"].to_numpy()) / st["std"].to_numpy()
            err[method].append(np.where(np.isfinite(e), e, np.inf))
            if method == "privagg":
                truth = st["mean"].to_numpy()
                cover.append((res["mean_x_low"].to_numpy(float) <= truth) & (truth <= res["mean_x_high"].to_numpy(float)))
    out: dict[str, Any] = {}
    for method in methods:
        a = np.array(err[method])
        out[method] = (float(np.median(a)), float(np.median(a.max(axis=1))))
    out["coverage"] = float(np.mean(cover))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--laws", default=",".join(LAWS))
    p.add_argument("--sizes", default="100,200,300,1000")
    p.add_argument("--groups", type=int, default=5)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--query", choices=QUERIES, default="count-mean")
    p.add_argument("--methods", default=",".join(METHODS), help="a comma-separated subset of " + ", ".join(METHODS))
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    methods = tuple(m for m in args.methods.split(",") if m)
    if not methods or "privagg" not in methods or any(m not in METHODS for m in methods):
        raise SystemExit(f"--methods: a subset of {', '.join(METHODS)} holding privagg")
    laws = [w for w in args.laws.split(",") if w]
    unknown = [w for w in laws if w not in LAWS]
    if unknown:
        raise SystemExit(f"unknown laws {unknown}; known: {', '.join(LAWS)}")
    sizes = [int(v) for v in args.sizes.split(",") if v]
    t0 = time.perf_counter()
    header = ["law", "n_g", *(f"{m}: median / worst group (sd)" for m in methods), "privagg interval coverage"]
    if args.markdown:
        what = "count() + mean(x)" if args.query == "count-mean" else "count() + sum(x, b) + mean(x) + median(x)"
        print(f"**far and near columns in {args.groups} small groups: ε = {args.epsilon}, δ = 1e-06, "
              f"{what}, public partitions; {args.runs} runs per cell; |error|/sd**\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print("  ".join(header))
    results: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for law in laws:
            for n_g in sizes:
                c = cell(law, n_g, args.groups, args.runs, args.epsilon, args.query, methods)
                results[f"{law}/{n_g}"] = c
                row = [law, f"{n_g:,}", *(f"{c[m][0]:.3g} / {c[m][1]:.3g}" for m in methods), f"{c['coverage']:.2f}"]
                print(("| " + " | ".join(row) + " |") if args.markdown else "  ".join(row), flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return results


if __name__ == "__main__":
    main()
