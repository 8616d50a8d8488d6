"""The unbounded group-by mean on every (group column, numeric column) pair of the real tables shipped
inside packages (issue 13): where does it hold, and where not?

``benchmarks/aggregate.py`` scores ten chosen tables. This script scores them all: every table of
palmerpenguins, vega_datasets (its local files), scikit-learn's bundled sets and statsmodels'
bundled data sets (never downloaded), every pair of a *group column* (2 to 12 distinct values:
strings, categories, integers, or floats with at most 6 values) and a *value column* (numeric, at
least 3 distinct values), with at least 100 rows once missing values are dropped.

Per pair, the group-by benchmark's query at ε = 1, δ = 10⁻⁶, the true keys as the public domain,
record-level add/remove neighbours, ``--runs`` runs with seeds ``1000 + run``:

- ``unbounded``: ``count()``, ``sum(v, b)``, ``mean(v)`` (no bounds), ``quantile(v, 0.5)`` (no bounds);
- ``bounded``: the same with ``b`` for the mean and the median too;

``b`` = the TRUE 0.1 % / 99.9 % quantiles of the whole column (which a user would not know).

Score per group: ``|released − exact| / sd`` (``sd`` the whole column's standard deviation;
⊥ = inf); per run the median over the groups; printed per pair: the median over the runs for each
method (mean and median), their ratio for the mean, and the coverage of the unbounded mean's
``_low``/``_high`` interval (noise only: it does not cover the clamping bias) over runs and groups
(a ⊥ group counts as not covered).
The summary counts the pairs whose unbounded mean is within 1.5× the bounded one (the issue's
target, there against the peers' bounded means), above 3×, and above 0.3 sd; the pairs above
0.3 sd are listed.

``--set MODULE.NAME=VALUE`` (repeatable) sets a constant of ``privagg.mechanisms.MODULE`` for the
unbounded runs (a variant, e.g. ``--set grouped_mean.SIDE_COST=1.0``); ``--json PATH`` writes the
per-pair figures; ``--only name:group:value,...`` restricts the pairs.

Run: ``python benchmarks/aggregate_sweep.py [--runs 10] [--markdown]`` (about 2 s per pair and 10
runs here: 859 s for 193 pairs at 20 runs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

EPSILON, DELTA, SEED = 1.0, 1e-6, 1000
TARGET = 1.5


def tables() -> dict[str, Any]:
    """name -> pandas DataFrame, from data files inside installed packages (one that cannot be
    loaded is left out)."""
    import pandas as pd

    out: dict[str, Any] = {}
    try:
        from palmerpenguins import load_penguins

        out["penguins"] = load_penguins()
    except ImportError:
        pass
    try:
        from vega_datasets import local_data

        for name in local_data.list_datasets():
            try:
                out[name] = local_data(name)
            except Exception:  # noqa: BLE001 - a file the package lacks
                continue
    except ImportError:
        pass
    try:
        import sklearn.datasets as skd

        out["wine"] = skd.load_wine(as_frame=True).frame
        out["diabetes"] = skd.load_diabetes(as_frame=True, scaled=False).frame
        out["breast_cancer"] = skd.load_breast_cancer(as_frame=True).frame
    except ImportError:
        pass
    try:
        import statsmodels.datasets as smd

        for name in ("anes96", "randhie", "star98", "fair", "heart", "modechoice", "spector", "scotland",
                     "statecrime", "cpunish", "grunfeld", "engel", "macrodata", "ccard", "china_smoking",
                     "committee", "copper", "strikes", "fertility"):
            try:
                out[name] = getattr(smd, name).load_pandas().data
            except Exception:  # noqa: BLE001 - a data set this statsmodels lacks
                continue
    except ImportError:
        pass
    return {k: v for k, v in out.items() if isinstance(v, pd.DataFrame)}


def pairs(df: Any) -> Iterator[tuple[str, str]]:
    """The (group column, value column) pairs of a table (module docstring)."""
    import pandas as pd

    cats, nums = [], []
    for c in df.columns:
        s = df[c]
        nu = s.nunique(dropna=True)
        if 2 <= nu <= 12 and (pd.api.types.is_string_dtype(s) or s.dtype == object
                              or isinstance(s.dtype, pd.CategoricalDtype)
                              or pd.api.types.is_integer_dtype(s) or pd.api.types.is_bool_dtype(s)
                              or (pd.api.types.is_float_dtype(s) and nu <= 6)):
            cats.append(c)
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and nu >= 3:
            nums.append(c)
    for g in cats:
        for x in nums:
            if g != x and len(df[[g, x]].dropna()) >= 100:
                yield g, x


def score(df: Any, g: str, x: str, runs: int, variant: dict[str, Any]) -> dict[str, Any]:
    """The figures of one pair (module docstring)."""
    import pandas as pd

    import privagg

    d = df[[g, x]].dropna()
    d = pd.DataFrame({"g": d[g].astype(str).to_numpy(dtype=object), "v": d[x].astype(float).to_numpy()})
    keys = sorted(d["g"].unique())
    grp = d.groupby("g")["v"]
    t_mean = grp.mean().loc[keys].to_numpy()
    t_med = grp.apply(lambda v: np.quantile(v.to_numpy(), 0.5, method="inverted_cdf")).loc[keys].to_numpy()
    sd = max(float(d["v"].std()), 1e-12)
    lo, hi = float(d["v"].quantile(0.001)), float(d["v"].quantile(0.999))
    hi = hi if hi > lo else lo + 1.0
    res: dict[str, Any] = {"rows": len(d), "groups": len(keys), "smallest": int(grp.size().min())}
    for label, b in (("unbounded", None), ("bounded", (lo, hi))):
        mean_err, med_err, cover = [], [], []
        with _variant(variant if b is None else {}):
            for r in range(runs):
                metrics = [privagg.count(), privagg.sum("v", bounds=(lo, hi)), privagg.mean("v", bounds=b),
                           privagg.quantile("v", 0.5, bounds=b)]
                out = privagg.aggregate(d, by="g", metrics=metrics, epsilon=EPSILON, delta=DELTA, rng=SEED + r,
                                        domain=keys).to_pandas().set_index("g").loc[keys]
                m, q = out["mean_v"].to_numpy(float), out["q0.5_v"].to_numpy(float)
                mean_err.append(float(np.median(np.nan_to_num(np.abs(m - t_mean) / sd, nan=np.inf))))
                med_err.append(float(np.median(np.nan_to_num(np.abs(q - t_med) / sd, nan=np.inf))))
                if b is None:
                    inside = (out["mean_v_low"].to_numpy(float) <= t_mean) & (t_mean <= out["mean_v_high"].to_numpy(float))
                    cover.append(float(np.mean(inside)))
        res[label] = {"mean": float(np.median(mean_err)), "median": float(np.median(med_err))}
        if cover:
            res[label]["coverage"] = float(np.mean(cover))
    return res


class _variant:
    """Sets the constants ``{"module.NAME": value}`` of ``privagg.mechanisms`` while inside."""

    def __init__(self, sets: dict[str, Any]) -> None:
        self.sets, self.old = sets, {}

    def __enter__(self) -> None:
        for key, value in self.sets.items():
            mod, name = key.rsplit(".", 1)
            m = importlib.import_module(f"privagg.mechanisms.{mod}")
            self.old[key] = getattr(m, name)
            setattr(m, name, value)

    def __exit__(self, *exc: Any) -> None:
        for key, value in self.old.items():
            mod, name = key.rsplit(".", 1)
            setattr(importlib.import_module(f"privagg.mechanisms.{mod}"), name, value)


def _parse_set(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--only", default="", help="name:group:value pairs, comma-separated")
    p.add_argument("--set", action="append", default=[], help="MODULE.NAME=VALUE (the unbounded runs)")
    p.add_argument("--json", default="", help="write the per-pair figures here")
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args(argv)
    warnings.simplefilter("ignore")
    variant = dict(_parse_set(s) for s in a.set)
    only = {s for s in a.only.split(",") if s}
    t0 = time.perf_counter()
    results: dict[str, Any] = {}
    for name, df in tables().items():
        for g, x in pairs(df):
            key = f"{name}:{g}:{x}"
            if only and key not in only:
                continue
            results[key] = score(df, g, x, a.runs, variant)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(results, f)
    report(results, a.runs, variant, a.markdown, time.perf_counter() - t0)
    return results


def report(results: dict[str, Any], runs: int, variant: dict[str, Any], markdown: bool, seconds: float) -> None:
    """The per-pair table (worst unbounded mean first) and the summary."""
    rows = sorted(results.items(), key=lambda kv: -kv[1]["unbounded"]["mean"])
    ratio = {k: v["unbounded"]["mean"] / max(v["bounded"]["mean"], 1e-12) for k, v in results.items()}
    sep = " | " if markdown else "  "
    head = ["pair (table:group:value)", "rows", "groups", "smallest group", "unbounded mean (sd)",
            "bounded mean (sd)", "ratio", "coverage", "unbounded median (sd)", "bounded median (sd)"]
    print(f"**every group-by pair of the packaged real tables: ε = {EPSILON}, δ = {DELTA}, four-metric query, "
          f"{runs} runs; |error| / column sd, median over groups, then over runs"
          + (f"; variant {variant}" if variant else "") + "**\n")
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print(sep.join(head))
    for key, v in rows:
        u, b = v["unbounded"], v["bounded"]
        cells = [key, f"{v['rows']:,}", str(v["groups"]), str(v["smallest"]), f"{u['mean']:.3g}", f"{b['mean']:.3g}",
                 f"{ratio[key]:.2f}", f"{u['coverage']:.2f}", f"{u['median']:.3g}", f"{b['median']:.3g}"]
        print(("| " + " | ".join(cells) + " |") if markdown else sep.join(cells))
    r = np.array(list(ratio.values()))
    fin = r[np.isfinite(r)]
    worst = next(((k, v) for k, v in rows if np.isfinite(v["unbounded"]["mean"])), None)
    print()
    print(f"pairs: {len(results)}; unbounded mean within {TARGET}x the bounded one: {int((r <= TARGET).sum())}; "
          f"above 3x: {int((r > 3).sum())} (⊥ in most groups: {int((~np.isfinite(r)).sum())}); median ratio "
          f"{np.median(r):.2f}; geometric mean of the finite ratios {np.exp(np.mean(np.log(fin))) if fin.size else np.nan:.2f}")
    far = [k for k, v in rows if v["unbounded"]["mean"] > 0.3]
    print(f"unbounded mean above 0.3 sd: {len(far)} pairs" + (f" ({', '.join(far)})" if far else ""))
    if worst is not None:
        print(f"worst released: {worst[0]} {worst[1]['unbounded']['mean']:.3g} sd; mean coverage of the unbounded "
              f"mean's interval {np.mean([v['unbounded']['coverage'] for v in results.values()]):.3f}")
    print(f"({seconds:.0f} s)")


if __name__ == "__main__":
    main()
