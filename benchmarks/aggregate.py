"""Group-by aggregates (issue 13): speed against plain DuckDB, utility against PipelineDP and OpenDP.

Sections (``--section perf|utility|all``, default all):

perf
    A table of ``--rows`` (10^7) rows and ``--groups`` (10^3) groups is generated once (fixed numpy
    seed) and written by DuckDB ``COPY`` as CSV and as Parquet into ``--workdir`` (a temporary
    folder, reused when the files are already there, deleted at the end unless ``--keep``).
    Columns: ``g`` (int, Zipf-like sizes ∝ 1/k^1.1, labels permuted), ``y`` (lognormal(3, 1):
    skewed, the bounded sum) and ``x`` (normal around a per-group level, clipped to [0, 100]: the
    mean). Each timing runs in a fresh Python process (imports excluded from the clock on both
    sides, pandas and pyarrow included, peak RSS measured), interleaved, ``--repeat`` (3) times after one untimed warm-up, and
    the medians are compared:

    - DuckDB: ``SELECT g, count(*), sum(least(greatest(y, lo), hi)), avg(x) FROM read_csv/
      read_parquet(FILE) GROUP BY g`` fetched to pandas (DuckDB's default reader and settings);
    - privagg: ``privagg.aggregate(FILE, by="g", metrics=[count(), sum("y", bounds=(lo, hi)),
      mean("x")], epsilon=1, delta=1e-6).to_pandas()`` (the CSPRNG, as a real release: a seed
      would add the seeded mode's canonical sort of the unbounded mean's column; private key selection;
      the number of released groups is printed).

    Target (issue 13): privagg ≤ 1.5× DuckDB on both formats.

utility
    The same query on each data set — per group: count, sum(v), mean(v) and median(v) — at equal
    (ε, δ), record-level add/remove neighbours everywhere. Bounds for every bounded metric are the
    TRUE 0.1 % / 99.9 % quantiles of the whole column (which a real user would not know).
    Methods (each one query at the total (ε, δ), splitting it by its own rule):

    - ``privagg bounded``: count(), sum(v, b), mean(v, b), quantile(v, 0.5, b);
    - ``privagg unbounded``: count(), sum(v, b), mean(v) (FriendlyCore, no bounds),
      quantile(v, 0.5) (no bounds);
    - ``PipelineDP``: COUNT, SUM, MEAN, PERCENTILE(50), Laplace noise, LocalBackend (pure Python);
    - ``OpenDP``: Polars API, ``dp.len()``, ``.dp.sum(b)``, ``.dp.mean(b)``,
      ``.dp.quantile(0.5, candidates)`` with 1024 evenly spaced candidates in b. opendp 0.16 needs
      polars 1.36.1 (the project venv has polars 2.x), so this part runs in a separate venv made by
      ``make bench-opendp-venv`` (``benchmarks/requirements-opendp.txt``), through a subprocess;
      it is skipped with a message when that venv is missing. ``--opendp-python`` points elsewhere.
      Margins: ``max_length`` = number of rows, ``max_groups`` = number of true groups (OpenDP
      requires both; they are given to it, like the bounds).

    Each method runs with public partitions (the true keys as the domain: isolates the metric
    error) and with private partition selection. Error per group: ``|estimate − exact| /
    max(|exact|, 1e-12)``, the exact answer being the non-private ``count(*)``, ``sum(v)``,
    ``avg(v)``, ``median(v)`` (unclamped); a released group whose metric is ⊥ (missing) counts
    as an infinite error; unreleased groups (private selection) are not scored, and the number of
    released groups is printed. Per run the median over groups; printed: the median over
    the runs (30 per method on each real table, 5 on the synthetic one — PipelineDP takes 2.5 s
    per run there —, ``--runs`` for all) with seeds ``seed + run``; with private selection over
    the runs that released at least one group, the number of runs that released none printed
    after the released groups. OpenDP draws from its own
    system RNG (it has no seed); its runs are still independent releases. ``--partitions
    public`` runs the public-partition half only (the targets; OpenDP's private runs are slow).
    Targets (issue 13), public partitions: privagg's unbounded mean within 1.5× of the best
    peer's bounded mean; privagg's bounded count / sum / mean / median no worse than the best
    peer (ratio ≤ 1). Per target: the ratio of the medians over runs, ``met`` / ``NOT met`` (that
    ratio against the target), and a 95 % percentile-bootstrap interval of the ratio (each
    method's runs resampled on their own, 2000 resamples, fixed seed); ``(within noise)`` when
    the interval holds the target.

    Data: ``synthetic`` (the perf generator at ``--utility-rows`` rows and ``--utility-groups``
    groups, v = y lognormal) and real tables shipped inside installed packages (never downloaded):
    vega_datasets (cars by Origin, seattle-weather by weather, airports by state, sf-temps by
    month, stocks by symbol), palmerpenguins (by species and by island), scikit-learn (wine by
    class, diabetes by sex). Rows with a missing value are dropped first (for every method).

Run: ``python benchmarks/aggregate.py`` (full: the baselines alone took 6 minutes on 2 cores), ``--quick`` (small
data, one repeat, two runs: under a minute), ``--markdown`` for Markdown tables (used in
docs/utility/aggregate.md). The privagg rows are skipped with a message while
``privagg.aggregate`` does not exist.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20_250_713
EPSILON = 1.0
DELTA = 1e-6
SUM_BOUNDS = (0.0, 500.0)  # perf: public bounds of the sum of y
TARGET_RATIO = 1.5
TARGET_MEAN_RATIO = 1.5
RUNS_REAL, RUNS_SYNTHETIC = 30, 5  # utility runs per method (PipelineDP: 2.5 s per synthetic run)
BOOTSTRAP, BOOT_LEVEL, BOOT_SEED = 2000, 0.95, 7  # the ratio intervals of the targets
OPENDP_CANDIDATES = 1024
ROOT = Path(__file__).resolve().parents[1]
OPENDP_VENV = Path(os.environ.get("PRIVAGG_OPENDP_VENV", "/tmp/privagg-opendp-venv"))  # `make bench-opendp-venv`
METRICS = ("count", "sum", "mean", "median")


# ---------------------------------------------------------------- data
def make_table(rows: int, groups: int, seed: int = SEED) -> dict[str, np.ndarray]:
    """``g`` Zipf-like (weight ∝ 1/k^1.1, labels permuted), ``y`` lognormal(3, 1), ``x`` in [0, 100]."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, groups + 1) ** 1.1
    cdf = np.cumsum(w / w.sum())
    rank = np.minimum(np.searchsorted(cdf, rng.random(rows), side="right"), groups - 1)
    g = rng.permutation(groups)[rank].astype(np.int32)
    y = np.round(rng.lognormal(3.0, 1.0, rows), 3)
    level = 20.0 + 60.0 * (g % 11) / 10.0
    x = np.round(np.clip(rng.normal(level, 12.0), 0.0, 100.0), 3)
    return {"g": g, "y": y, "x": x}


def write_files(folder: Path, rows: int, groups: int, seed: int = SEED) -> dict[str, Path]:
    """The perf table as CSV and Parquet (DuckDB COPY), reused when both are already in ``folder``."""
    stem = f"agg_{rows}_{groups}_{seed}"
    paths = {"csv": folder / f"{stem}.csv", "parquet": folder / f"{stem}.parquet"}
    if all(p.exists() for p in paths.values()):
        return paths
    import duckdb
    import pyarrow as pa

    t0 = time.perf_counter()
    table = pa.table(make_table(rows, groups, seed))
    con = duckdb.connect()
    con.register("t", table)
    for fmt, path in paths.items():
        tmp = path.with_suffix(path.suffix + ".part")
        option = "FORMAT parquet" if fmt == "parquet" else "FORMAT csv, HEADER true"
        con.execute(f"COPY t TO '{tmp}' ({option})")
        tmp.replace(path)
    con.close()
    print(f"generated {rows:,} rows, {groups:,} groups (seed {seed}) as CSV and Parquet in "
          f"{time.perf_counter() - t0:.1f} s under {folder}")
    return paths


# ---------------------------------------------------------------- perf
_PERF_CHILD = r"""
import json, resource, sys, time
what, fmt, path, lo, hi, seed = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
import pandas, pyarrow  # noqa: F401 - imported before the clock on both sides (DuckDB's .df() imports pandas lazily)
out = {}
if what == "duckdb":
    import duckdb
    source = "read_parquet($p)" if fmt == "parquet" else "read_csv($p)"
    sql = ("SELECT g, count(*) AS count, sum(least(greatest(y, $lo), $hi)) AS sum_y, avg(x) AS mean_x "
           f"FROM {source} GROUP BY g")
    t0 = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # it would print to stdout
    df = con.execute(sql, {"p": path, "lo": lo, "hi": hi}).df()
    out["groups"] = len(df)
else:
    import privagg
    if not hasattr(privagg, "aggregate"):
        print("RESULT " + json.dumps({"skip": "privagg.aggregate does not exist (yet)"}))
        sys.exit(0)
    t0 = time.perf_counter()
    release = privagg.aggregate(path, by="g", metrics=[privagg.count(), privagg.sum("y", bounds=(lo, hi)),
                                privagg.mean("x")], epsilon=1.0, delta=1e-6)  # the CSPRNG, as a release
    out["groups"] = len(release.to_pandas())
out["seconds"] = time.perf_counter() - t0
out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("RESULT " + json.dumps(out))
"""


def _perf_child(what: str, fmt: str, path: Path, seed: int) -> dict[str, Any]:
    cmd = [sys.executable, "-c", _PERF_CHILD, what, fmt, str(path), *map(str, SUM_BOUNDS), str(seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return {"error": f"exit {proc.returncode}: {last[:200]}"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return {"error": "no result line on stdout"}
    return json.loads(lines[-1][len("RESULT "):])


def perf_section(args: argparse.Namespace, out: Printer) -> dict[str, Any]:
    folder = args.workdir
    folder.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    try:
        paths = write_files(folder, args.rows, args.groups, args.seed)
        sizes = ", ".join(f"{f} {p.stat().st_size / 2**20:.0f} MiB" for f, p in paths.items())
        out.heading(f"perf: {args.rows:,} rows, {args.groups:,} groups ({sizes}); ε = {EPSILON}, "
                    f"δ = {DELTA}, sum bounds {SUM_BOUNDS}, seed {args.seed}; median of {args.repeat}, "
                    f"interleaved, one process per timing, imports excluded")
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for fmt, path in paths.items():  # warm the page cache; not timed
            _perf_child("duckdb", fmt, path, args.seed)
        for r in range(args.repeat):
            for fmt, path in paths.items():
                for what in ("duckdb", "privagg"):
                    if what == "privagg" and runs.get((fmt, what)) and "seconds" not in runs[(fmt, what)][0]:
                        continue  # skipped or failed once: do not retry
                    runs.setdefault((fmt, what), []).append(_perf_child(what, fmt, path, args.seed + r))
        rows = []
        for fmt in paths:
            base = runs[(fmt, "duckdb")]
            if any("seconds" not in b for b in base):
                raise RuntimeError(f"DuckDB baseline failed: {base}")
            b_sec = statistics.median(b["seconds"] for b in base)
            b_rss = max(b["rss_mb"] for b in base)
            rows.append([fmt, "DuckDB GROUP BY", f"{b_sec:.3f}", f"{b_rss:.0f}", str(base[0]["groups"]), "1.00"])
            summary[f"duckdb_{fmt}_s"] = b_sec
            priv = runs[(fmt, "privagg")]
            if all("seconds" in p for p in priv):
                p_sec = statistics.median(p["seconds"] for p in priv)
                ratio = p_sec / b_sec
                summary[f"privagg_{fmt}_s"], summary[f"ratio_{fmt}"] = p_sec, ratio
                groups = "/".join(sorted({str(p["groups"]) for p in priv}))
                rows.append([fmt, "privagg.aggregate", f"{p_sec:.3f}", f"{max(p['rss_mb'] for p in priv):.0f}",
                             groups, f"{ratio:.2f}"])
            else:
                why = priv[0].get("skip") or priv[0].get("error")
                rows.append([fmt, f"privagg: skipped ({why})", "", "", "", ""])
        out.table(["format", "query", "median s", "peak RSS MB", "groups released", "ratio"], rows)
        for fmt in paths:
            if f"ratio_{fmt}" in summary:
                ratio = summary[f"ratio_{fmt}"]
                out.line(f"target {fmt}: privagg / DuckDB = {ratio:.2f}x <= {TARGET_RATIO}x: "
                         f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return summary


# ---------------------------------------------------------------- utility data
def load_datasets(names: Sequence[str] | None, rows: int, groups: int, seed: int) -> dict[str, Any]:
    """name -> pandas DataFrame with columns ``g`` (keys as strings) and ``v`` (float), no missing values.

    Real tables come from data files inside installed packages; one that cannot be loaded is
    reported and left out.
    """
    import pandas as pd

    def frame(keys: Any, values: Any) -> pd.DataFrame:
        df = pd.DataFrame({"g": pd.Series(keys).to_numpy(), "v": pd.to_numeric(pd.Series(values), errors="coerce")
                           .to_numpy(dtype=float)})
        df = df[df["g"].notna() & np.isfinite(df["v"])]
        return pd.DataFrame({"g": df["g"].astype(str).to_numpy(dtype=object), "v": df["v"].to_numpy(float)})

    def synthetic() -> pd.DataFrame:
        t = make_table(rows, groups, seed)
        return frame(t["g"], t["y"])

    def vega(name: str, by: str, col: str) -> Callable[[], pd.DataFrame]:
        def load() -> pd.DataFrame:
            from vega_datasets import local_data

            d = local_data(name)
            return frame(d[by], d[col])
        return load

    def sf_temps() -> pd.DataFrame:
        from vega_datasets import local_data

        d = local_data("sf-temps")
        return frame(pd.to_datetime(d["date"]).dt.month, d["temp"])

    def penguins(by: str, col: str) -> Callable[[], pd.DataFrame]:
        def load() -> pd.DataFrame:
            from palmerpenguins import load_penguins

            d = load_penguins()
            return frame(d[by], d[col])
        return load

    def sklearn(which: str, by: str, col: str) -> Callable[[], pd.DataFrame]:
        def load() -> pd.DataFrame:
            from sklearn import datasets

            if which == "wine":
                d = datasets.load_wine(as_frame=True).frame
            else:
                d = datasets.load_diabetes(as_frame=True, scaled=False).frame
            return frame(d[by], d[col])
        return load

    loaders: dict[str, tuple[str, Callable[[], pd.DataFrame]]] = {
        "synthetic": ("Zipf groups, lognormal(3, 1) values", synthetic),
        "cars": ("vega cars, Weight_in_lbs by Origin", vega("cars", "Origin", "Weight_in_lbs")),
        "seattle-weather": ("vega seattle-weather, wind by weather", vega("seattle-weather", "weather", "wind")),
        "airports": ("vega airports, latitude by state", vega("airports", "state", "latitude")),
        "sf-temps": ("vega sf-temps, temp by month", sf_temps),
        "stocks": ("vega stocks, price by symbol", vega("stocks", "symbol", "price")),
        "penguins-species": ("palmerpenguins, body_mass_g by species", penguins("species", "body_mass_g")),
        "penguins-island": ("palmerpenguins, flipper_length_mm by island", penguins("island", "flipper_length_mm")),
        "wine": ("scikit-learn wine, proline by class", sklearn("wine", "target", "proline")),
        "diabetes": ("scikit-learn diabetes (raw), target by sex", sklearn("diabetes", "sex", "target")),
    }
    chosen = list(loaders) if not names else list(names)
    unknown = [n for n in chosen if n not in loaders]
    if unknown:
        raise SystemExit(f"unknown data sets {unknown}; known: {', '.join(loaders)}")
    out: dict[str, Any] = {}
    for name in chosen:
        label, load = loaders[name]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[name] = (label, load())
        except Exception as exc:  # noqa: BLE001 - a data set whose package is missing is reported, not fatal
            print(f"{name}: not available ({type(exc).__name__}: {exc})")
    return out


def exact(df: Any) -> dict[str, dict[str, float]]:
    """Non-private answers per key: count, sum, mean, median of ``v``."""
    grouped = df.groupby("g", sort=True)["v"]
    agg = grouped.agg(["count", "sum", "mean", "median"])
    return {m: dict(zip(agg.index.tolist(), agg[m].astype(float).tolist(), strict=True)) for m in METRICS}


def relative_errors(estimate: dict[str, dict[Any, float]], truth: dict[str, dict[Any, float]]
                    ) -> tuple[int, dict[str, float]]:
    """(released keys, median over released keys of |est − exact| / max(|exact|, 1e-12) per metric).

    A released key whose metric is missing or NaN (⊥) scores +inf; keys not in ``truth`` (cannot
    happen for a correct method) score +inf too; no released key: NaN.
    """
    keys = set(estimate.get("count", {}))
    for m in METRICS:
        keys |= set(estimate.get(m, {}))
    out: dict[str, float] = {}
    for m in METRICS:
        errs = []
        for k in keys:
            t, e = truth[m].get(k), estimate.get(m, {}).get(k)
            if t is None or e is None or not math.isfinite(e):
                errs.append(math.inf)
            else:
                errs.append(abs(e - t) / max(abs(t), 1e-12))
        out[m] = float(np.median(errs)) if errs else math.nan
    return len(keys), out


# ---------------------------------------------------------------- utility methods
def run_privagg(df: Any, bounds: tuple[float, float], unbounded: bool, public: bool, seed: int,
                weights: dict[str, Any] | None = None) -> dict[str, dict[Any, float]]:
    """One privagg release; ``weights`` is passed to ``privagg.aggregate`` (None: its default split)."""
    import privagg

    lo, hi = bounds
    metrics = [privagg.count(), privagg.sum("v", bounds=(lo, hi))]
    if unbounded:
        metrics += [privagg.mean("v"), privagg.quantile("v", 0.5)]
    else:
        metrics += [privagg.mean("v", bounds=(lo, hi)), privagg.quantile("v", 0.5, bounds=(lo, hi))]
    domain = sorted(set(df["g"].tolist())) if public else None
    needs_delta = unbounded or not public  # δ is only used by key selection and the unbounded mean
    release = privagg.aggregate(df, by="g", metrics=metrics, epsilon=EPSILON,
                                delta=DELTA if needs_delta else 0.0, domain=domain, rng=seed,
                                weights=weights)
    res = release.to_pandas()
    keys = [str(k) for k in res["g"].tolist()]
    names = {"count": "count", "sum": "sum_v", "mean": "mean_v" if unbounded else "mean_v", "median": "q0.5_v"}
    out: dict[str, dict[Any, float]] = {}
    for m, col in names.items():
        values = res[col].to_numpy(dtype=float, na_value=np.nan)
        if f"{col}_ok" in res.columns:
            values = np.where(res[f"{col}_ok"].to_numpy(dtype=bool, na_value=False), values, np.nan)
        out[m] = dict(zip(keys, values.tolist(), strict=True))
    return out


def run_pipeline_dp(df: Any, bounds: tuple[float, float], public: bool, seed: int) -> dict[str, dict[Any, float]]:
    """PipelineDP 0.3 LocalBackend (its own RNG: ``seed`` is unused)."""
    import pipeline_dp

    rows = list(zip(range(len(df)), df["g"].tolist(), df["v"].tolist(), strict=True))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM, pipeline_dp.Metrics.MEAN,
                 pipeline_dp.Metrics.PERCENTILE(50)],
        max_partitions_contributed=1, max_contributions_per_partition=1,
        min_value=float(bounds[0]), max_value=float(bounds[1]))
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
                                            value_extractor=lambda r: r[2])
    partitions = sorted(set(df["g"].tolist())) if public else None
    result = engine.aggregate(rows, params, extractors, public_partitions=partitions)
    accountant.compute_budgets()
    out: dict[str, dict[Any, float]] = {m: {} for m in METRICS}
    for key, t in result:
        out["count"][key], out["sum"][key] = float(t.count), float(t.sum)
        out["mean"][key], out["median"][key] = float(t.mean), float(t.percentile_50)
    return out


def opendp_python(args: argparse.Namespace) -> Path | None:
    path = Path(args.opendp_python) if args.opendp_python else OPENDP_VENV / "bin" / "python"
    return path if path.exists() else None


def run_opendp(python: Path, df: Any, bounds: tuple[float, float], runs: int, folder: Path,
               partitions: Sequence[bool] = (True, False)
               ) -> dict[bool, list[tuple[float, dict[str, dict[Any, float]]]]]:
    """All OpenDP runs of one data set in one child process of the OpenDP venv."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = folder / "opendp_in.parquet"
    pq.write_table(pa.table({"g": df["g"].tolist(), "v": df["v"].to_numpy(float)}), data)
    spec = {"data": str(data), "bounds": list(bounds), "runs": runs, "epsilon": EPSILON, "delta": DELTA,
            "keys": sorted(set(df["g"].tolist())), "candidates": OPENDP_CANDIDATES,
            "partitions": [bool(p) for p in partitions]}
    (folder / "opendp_in.json").write_text(json.dumps(spec))
    cmd = [str(python), "-I", str(Path(__file__).resolve()), "--opendp-child", str(folder / "opendp_in.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"OpenDP child exit {proc.returncode}: {last[:200]}")
    got = json.loads([line for line in proc.stdout.splitlines() if line.startswith("RESULT ")][-1][7:])
    return {public: [(r["seconds"], r["estimate"]) for r in got["public" if public else "private"]]
            for public in partitions}


def opendp_child(spec_path: str) -> None:
    """Runs inside the OpenDP venv (polars 1.36.1): reads the spec, prints one JSON line."""
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    spec = json.loads(Path(spec_path).read_text())
    lf = pl.scan_parquet(spec["data"])
    n = lf.select(pl.len()).collect().item()
    lo, hi = map(float, spec["bounds"])
    candidates = np.linspace(lo, hi, spec["candidates"]).tolist()
    keys = spec["keys"]
    result: dict[str, list] = {"public": [], "private": []}
    for public in spec.get("partitions", (True, False)):
        for _ in range(spec["runs"]):
            t0 = time.perf_counter()
            context = dp.Context.compositor(
                data=lf, privacy_unit=dp.unit_of(contributions=1),
                privacy_loss=dp.loss_of(epsilon=spec["epsilon"], delta=spec["delta"]), split_evenly_over=1,
                margins=[dp.polars.Margin(by=["g"], invariant="keys" if public else None, max_length=n,
                                          max_groups=len(keys))])
            v = pl.col("v").fill_null(0.0)
            query = context.query().group_by("g").agg(
                dp.len().alias("count"), v.dp.sum((lo, hi)).alias("sum"), v.dp.mean((lo, hi)).alias("mean"),
                v.dp.quantile(0.5, candidates).alias("median"))
            frame = query.release().collect()
            if public:  # public keys given as a join, as the OpenDP docs do
                frame = pl.DataFrame({"g": keys}).join(frame, on="g", how="left")
            got = frame.to_dict(as_series=False)
            estimate = {m: {k: (math.nan if v is None else float(v)) for k, v in zip(got["g"], got[m], strict=True)}
                        for m in METRICS}
            result["public" if public else "private"].append(
                {"seconds": time.perf_counter() - t0, "estimate": estimate})
    print("RESULT " + json.dumps(result))


# ---------------------------------------------------------------- utility section
def utility_section(args: argparse.Namespace, out: Printer) -> dict[str, Any]:
    sets = load_datasets(args.datasets, args.utility_rows, args.utility_groups, args.seed + 1)
    try:
        import privagg

        have_privagg = hasattr(privagg, "aggregate")
    except ImportError:
        have_privagg = False
    runs_of = {name: (args.runs or (args.runs_synthetic if name == "synthetic" else args.runs_real))
               for name in sets}
    partitions = {"public": (True,), "private": (False,), "both": (True, False)}[args.partitions]
    counts = sorted(set(runs_of.values()))
    out.heading(f"utility: ε = {EPSILON}, δ = {DELTA}, record level, add/remove; bounds = true 0.1 %/99.9 % "
                f"quantiles of the column; {'/'.join(map(str, counts))} runs per method (synthetic "
                f"{args.runs or args.runs_synthetic}, real tables {args.runs or args.runs_real}), seeds "
                f"{args.seed} + run; median over runs of the median relative error per group; ratio "
                f"intervals: {BOOT_LEVEL:.0%} bootstrap over runs ({BOOTSTRAP} resamples, seed {BOOT_SEED})")
    if not have_privagg:
        out.line("privagg: skipped (privagg.aggregate does not exist yet)")
    py_opendp = None if args.skip_opendp else opendp_python(args)
    if py_opendp is None and not args.skip_opendp:
        out.line(f"OpenDP: skipped (no OpenDP venv at {OPENDP_VENV}; run `make bench-opendp-venv`)")
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="privagg-agg-util-") as tmp:
        for name, (label, df) in sets.items():
            seeds = [args.seed + r for r in range(runs_of[name])]
            truth = exact(df)
            q = np.quantile(df["v"].to_numpy(float), [0.001, 0.999])
            bounds = (float(q[0]), float(q[1]))
            if bounds[0] == bounds[1]:
                bounds = (bounds[0], bounds[0] + 1.0)
            sizes = sorted(truth["count"].values())
            out.heading(f"{name}: {label}; {len(df):,} rows, {len(sizes)} groups (sizes {int(sizes[0])}.."
                        f"{int(sizes[-1])}, median {statistics.median(sizes):g}); bounds "
                        f"[{bounds[0]:.6g}, {bounds[1]:.6g}]")
            methods: dict[str, Callable[[bool, int], dict]] = {}
            if have_privagg:
                methods["privagg bounded"] = lambda p, s, df=df, b=bounds: run_privagg(df, b, False, p, s)
                methods["privagg unbounded"] = lambda p, s, df=df, b=bounds: run_privagg(df, b, True, p, s)
            if not args.skip_pipelinedp:
                methods["PipelineDP"] = lambda p, s, df=df, b=bounds: run_pipeline_dp(df, b, p, s)
            results: dict[tuple[str, bool], list[tuple[float, int, dict[str, float]]]] = {}
            failures: dict[str, str] = {}
            for public in partitions:
                for seed in seeds:
                    for method, fn in methods.items():
                        if method in failures:
                            continue
                        t0 = time.perf_counter()
                        try:
                            if method.startswith("privagg"):
                                estimate = fn(public, seed)
                            else:
                                with warnings.catch_warnings():
                                    warnings.simplefilter("ignore")
                                    estimate = fn(public, seed)
                        except Exception as exc:  # noqa: BLE001 - report why a method could not run
                            failures[method] = f"{type(exc).__name__}: {exc}"[:160]
                            continue
                        seconds = time.perf_counter() - t0
                        results.setdefault((method, public), []).append((seconds, *relative_errors(estimate, truth)))
            if py_opendp is not None:
                try:
                    for public, runs in run_opendp(py_opendp, df, bounds, len(seeds), Path(tmp),
                                                   partitions).items():
                        results[("OpenDP", public)] = [(sec, *relative_errors(est, truth)) for sec, est in runs]
                except Exception as exc:  # noqa: BLE001
                    failures["OpenDP"] = f"{type(exc).__name__}: {exc}"[:160]
            rows = []
            medians: dict[tuple[str, bool], dict[str, float]] = {}
            for (method, public), runs in sorted(results.items(), key=lambda kv: (not kv[0][1], kv[0][0])):
                med = {m: median_over_runs([r[2][m] for r in runs]) for m in METRICS}
                medians[(method, public)] = med
                empty = sum(r[1] == 0 for r in runs)  # private selection released no group: not scored
                rows.append([method, "public" if public else "private",
                             f"{statistics.median(r[1] for r in runs):g}/{len(sizes)}"
                             + (f" ({empty} of {len(runs)} runs: none)" if empty else ""),
                             *(_fmt(med[m]) for m in METRICS),
                             f"{statistics.median(r[0] for r in runs):.2f}"])
            out.table(["method", "partitions", "groups released", "count", "sum", "mean", "median", "s/run"], rows)
            for method, why in failures.items():
                out.line(f"{method}: failed ({why})")
            summary[name] = {f"{m}|{'public' if p else 'private'}": v for (m, p), v in medians.items()}
            per_run = {key: [r[2] for r in runs] for key, runs in results.items()}
            for line in targets(medians, per_run):
                out.line(line)
    return summary


def median_over_runs(scores: Sequence[float]) -> float:
    """The median over the runs that released at least one group (a run that released none has no
    error, NaN, and is left out: with ``np.median`` one such run made the whole cell NaN); NaN when
    no run released a group. +inf (⊥) scores stay in."""
    arr = np.asarray(scores, dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(np.median(arr)) if arr.size else math.nan


def _boot_ratio(a: Sequence[float], b: Sequence[float], rng: np.random.Generator) -> tuple[float, float]:
    """A percentile-bootstrap interval of median(a)/median(b): each method's runs resampled on their own
    (the runs are independent releases; the methods' runs are not paired)."""
    a_arr, b_arr = np.asarray(a, float), np.asarray(b, float)
    ia = rng.integers(0, a_arr.size, (BOOTSTRAP, a_arr.size))
    ib = rng.integers(0, b_arr.size, (BOOTSTRAP, b_arr.size))
    with np.errstate(divide="ignore", invalid="ignore"):  # ⊥ scores +inf: inf/inf, x/0
        r = np.median(a_arr[ia], axis=1) / np.median(b_arr[ib], axis=1)
    r = np.sort(np.where(np.isnan(r), 1.0, r))  # 0/0 or inf/inf: equal
    tail = (1 - BOOT_LEVEL) / 2  # order statistics (no interpolation between infinities)
    return float(r[int(math.floor(tail * (r.size - 1)))]), float(r[int(math.ceil((1 - tail) * (r.size - 1)))])


def targets(medians: dict[tuple[str, bool], dict[str, float]],
            per_run: dict[tuple[str, bool], list[dict[str, float]]] | None = None) -> list[str]:
    """The issue's targets on public partitions, where privagg and at least one peer ran: per target
    the ratio of medians over runs, ``met`` / ``NOT met`` (the point estimate against the target) and,
    with ``per_run``, a bootstrap interval of the ratio; ``(within noise)`` when it holds the target."""
    peers = [m for m, p in medians if p and not m.startswith("privagg")]
    lines: list[str] = []
    if not peers:
        return lines
    rng = np.random.default_rng(BOOT_SEED)

    def best(metric: str) -> tuple[float, str]:
        return min((medians[(m, True)][metric], m) for m in peers)

    def judged(method: str, metric: str, peer_metric: str, target: float) -> str:
        peer, who = best(peer_metric)
        ratio = _ratio(medians[(method, True)][metric], peer)
        text = f"{_fmt(ratio)} ({who})"
        if per_run is not None:
            lo, hi = _boot_ratio([r[metric] for r in per_run[(method, True)]],
                                 [r[peer_metric] for r in per_run[(who, True)]], rng)
            text += f" [{_fmt(lo)}, {_fmt(hi)}]"
            noise = " (within noise)" if lo <= target <= hi else ""
        else:
            noise = ""
        return text + (" met" if ratio <= target else " NOT met") + noise

    if ("privagg unbounded", True) in medians:
        lines.append(f"target: privagg unbounded mean / best bounded peer mean <= {TARGET_MEAN_RATIO}: "
                     + judged("privagg unbounded", "mean", "mean", TARGET_MEAN_RATIO))
    if ("privagg bounded", True) in medians:
        parts = [f"{metric} " + judged("privagg bounded", metric, metric, 1.0) for metric in METRICS]
        lines.append("target: privagg bounded / best peer <= 1: " + ", ".join(parts))
    return lines


def _ratio(a: float, b: float) -> float:
    if a == b:
        return 1.0
    return a / b if b > 0 else math.inf


def _fmt(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf (⊥)"
    return f"{x:.3g}"


# ---------------------------------------------------------------- output
class Printer:
    """Aligned text or Markdown tables on stdout."""

    def __init__(self, markdown: bool) -> None:
        self.markdown = markdown

    def heading(self, text: str) -> None:
        print(f"\n**{text}**\n" if self.markdown else f"\n{text}")

    def line(self, text: str) -> None:
        print(f"{text}\n" if self.markdown else f"  {text}")

    def table(self, header: list[str], rows: list[list[str]], left: int = 2) -> None:
        """The first ``left`` columns are left-aligned, the others right-aligned."""
        if self.markdown:
            print("| " + " | ".join(header) + " |")
            print("|" + "|".join("---" for _ in header) + "|")
            for row in rows:
                print("| " + " | ".join(row) + " |")
            print()
            return
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
        for row in (header, *rows):
            print("  " + "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                                   for i, (c, w) in enumerate(zip(row, widths, strict=False))))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--opendp-child"]:
        opendp_child(argv[1])
        return {}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=("perf", "utility", "all"), default="all")
    parser.add_argument("--quick", action="store_true",
                        help="small data (2·10^5 rows, 100 groups; utility 2·10^4 rows), 1 repeat, 2 runs")
    parser.add_argument("--rows", type=int, help="perf rows (default 10^7)")
    parser.add_argument("--groups", type=int, help="perf groups (default 10^3)")
    parser.add_argument("--repeat", type=int, help="perf repeats (default 3)")
    parser.add_argument("--utility-rows", type=int, help="rows of the synthetic utility table (default 10^5)")
    parser.add_argument("--utility-groups", type=int, help="groups of the synthetic utility table (default 100)")
    parser.add_argument("--runs", type=int, help="utility runs per method on every data set (default: "
                        f"{RUNS_REAL} on the real tables, {RUNS_SYNTHETIC} on the synthetic one)")
    parser.add_argument("--runs-real", type=int, default=RUNS_REAL, help=argparse.SUPPRESS)
    parser.add_argument("--runs-synthetic", type=int, default=RUNS_SYNTHETIC, help=argparse.SUPPRESS)
    parser.add_argument("--partitions", choices=("public", "private", "both"), default="both",
                        help="utility: public partitions (where the targets are judged), private key "
                             "selection, or both (default)")
    parser.add_argument("--datasets", type=lambda s: s.split(","), help="comma-separated utility data sets")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "privagg-bench-aggregate")
    parser.add_argument("--keep", action="store_true", help="keep the generated perf files for the next run")
    parser.add_argument("--skip-pipelinedp", action="store_true")
    parser.add_argument("--skip-opendp", action="store_true")
    parser.add_argument("--opendp-python", help=f"python of a venv with opendp 0.16 + polars 1.36.1 "
                                                f"(default {OPENDP_VENV}/bin/python)")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {"rows": (10_000_000, 200_000), "groups": (1_000, 100), "repeat": (3, 1),
                "utility_rows": (100_000, 20_000), "utility_groups": (100, 20), "runs": (None, 2)}
    for key, (full, small) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, small if quick else full)
    out = Printer(args.markdown)
    result: dict[str, Any] = {}
    if args.section in ("perf", "all"):
        result["perf"] = perf_section(args, out)
    if args.section in ("utility", "all"):
        result["utility"] = utility_section(args, out)
    return result


if __name__ == "__main__":
    main()
