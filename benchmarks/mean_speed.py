"""Speed of ``private_mean`` against CoinPress, and against an earlier privagg, side by side.

Not a timed test. Run: ``python benchmarks/mean_speed.py [--baseline REV] [--reps K]``.

Cases: ``n`` in {10⁴, 10⁵} × ``d`` in {2, 10}, ``x ~ N(μ, I_d)`` with ``‖μ‖ = 10⁴`` (unknown to
private_mean), ε = 1, δ = 1e-6, ``radius=None`` (private radius selection), default
``m_locate``. Each case runs in child processes (one per implementation, alternated ``K`` times;
the best time of each is printed), so the implementations see the same machine load:

* ``privagg``: this checkout (``src/``), with the time of its stages (per-column scales, radius
  selection, locate, final clipping radius, sums: the rest);
* ``privagg@REV`` (``--baseline``): ``src/privagg`` of git revision REV (``git archive``), the
  same stages, and whether its release equals this checkout's bit for bit (same seed);
* ``CoinPress``: ``benchmarks/baselines/coinpress.py`` (prior ball ``B(0, 10⁵)``, as in
  ``benchmarks/utility.py``).

The ratio ``privagg / CoinPress`` is the speed target of issue 11 (item 6).

``--profile``: instead, per case and implementation, a finer table of exclusive wall-clock and CPU
seconds per stage (exact noise samplers, the exponential mechanism, sorts, friend counts, radius
pair bins, hashing, plan and validation, …; :data:`PROFILE_STAGES`), best CPU of ``--reps``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EPS, DELTA, MU_NORM, PRIOR_RADIUS, BETA = 1.0, 1e-6, 1e4, 1e5, 0.01
CASES = [(10_000, 2), (10_000, 10), (100_000, 2), (100_000, 10)]
STAGES = {  # (module, function) -> stage name
    ("privagg.mechanisms.mean", "_column_scales"): "scales",
    ("privagg.friendlycore.radius", "select_radius"): "radius",
    ("privagg.mechanisms.mean", "_pair_radius"): "radius",
    ("privagg.mechanisms.mean", "_locate"): "locate",
    ("privagg.mechanisms.mean", "_quantile_radius"): "clip",
}


#: --profile: (module, function or Class.method, stage); each timed exclusive of the others.
PROFILE_STAGES = [
    *[("privagg.mechanisms.mean", f, "plan/validation") for f in (
        "mean_plan", "mean_privacy_loss", "coordinate_plan_possible", "_friendly_losses", "_check_points",
        "estimate_schedule", "dlap_tail_shift")],
    *[("privagg.mechanisms.mean_small", f, "plan/validation") for f in ("switch_budget", "coordinate_budget")],
    *[(m, "discrete_laplace", "noise samplers") for m in (
        "privagg.mechanisms.mean", "privagg.friendlycore.radius", "privagg.friendlycore.filter",
        "privagg.mechanisms.mean_small")],
    ("privagg.mechanisms.mean", "grid_gaussian_integers", "noise samplers"),
    ("privagg.mechanisms.mean", "grid_laplace_integers", "noise samplers"),
    ("privagg.mechanisms.mean_small", "exponential_mechanism", "exp. mechanism"),
    ("privagg.mechanisms.mean", "ArrayPoints.below_counts", "sorts + searchsorted"),
    ("privagg.mechanisms.mean", "row_hash", "hashing / row order"),
    ("privagg.mechanisms.mean", "_keyed_row_order", "hashing / row order"),
    ("privagg.mechanisms.mean", "sorted_scale_counts", "scale counts"),
    ("privagg.friendlycore.radius", "_pair_bins", "radius pair bins"),
    ("privagg.friendlycore.radius", "radius_queries", "radius queries"),
    ("privagg.friendlycore.filter", "friend_counts", "friend counts (locate)"),
    ("privagg.mechanisms.mean", "_anchored_mean", "locate average (Fraction)"),
    ("privagg.mechanisms.mean", "_exact_grid", "locate average (Fraction)"),
    ("privagg.mechanisms.mean", "_clipped_integer_sum", "clipped sums"),
    ("privagg.mechanisms.mean", "_distance_bins", "distance histogram"),
    ("privagg.mechanisms.mean", "ArrayPoints.poisson_sample", "subsample / scaling"),
    ("privagg.mechanisms.mean", "ArrayPoints.scaled", "subsample / scaling"),
    ("privagg.friendlycore.radius", "radius_subsample", "subsample / scaling"),
]


def profile_child(n: int, d: int, reps: int) -> dict:
    """Exclusive wall and CPU seconds per PROFILE_STAGES stage of one seeded call (best CPU)."""
    import importlib

    from privagg import private_mean

    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    stack: list[list[float]] = []

    def wrap(fn, stage):
        def timed(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            stack.append([0.0, 0.0])
            try:
                return fn(*a, **k)
            finally:
                dw, dc = time.perf_counter() - t, time.process_time() - c
                iw, ic = stack.pop()
                wall[stage] = wall.get(stage, 0.0) + dw - iw
                cpu[stage] = cpu.get(stage, 0.0) + dc - ic
                if stack:
                    stack[-1][0] += dw
                    stack[-1][1] += dc
        return timed

    for mod, name, stage in PROFILE_STAGES:
        owner = importlib.import_module(mod)
        if "." in name:
            owner_name, name = name.split(".")
            owner = getattr(owner, owner_name)
        if hasattr(owner, name):
            setattr(owner, name, wrap(getattr(owner, name), stage))
    x = data(n, d)
    private_mean(x[:2000], epsilon=EPS, delta=DELTA, rng=0)
    best = None
    for _ in range(reps):
        wall.clear()
        cpu.clear()
        t, c = time.perf_counter(), time.process_time()
        private_mean(x, epsilon=EPS, delta=DELTA, rng=1)
        tw, tc = time.perf_counter() - t, time.process_time() - c
        if best is None or tc < best["cpu"]:
            best = {"wall": tw, "cpu": tc, "stages": {k: [wall[k], cpu[k]] for k in wall}}
    best["stages"]["rest"] = [best["wall"] - sum(v[0] for v in best["stages"].values()),
                              best["cpu"] - sum(v[1] for v in best["stages"].values())]
    return best


def data(n: int, d: int) -> np.ndarray:
    rng = np.random.default_rng([n, d])
    mu = rng.normal(size=d)
    mu *= MU_NORM / np.linalg.norm(mu)
    return rng.normal(size=(n, d)) + mu


def child(n: int, d: int, coinpress: bool) -> dict:
    import importlib

    from privagg import private_mean

    spent: dict[str, float] = {}
    for (mod, name), stage in STAGES.items():
        module = importlib.import_module(mod)
        fn = getattr(module, name, None)
        if fn is None:
            continue

        def timed(*a, _fn=fn, _stage=stage, **k):
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spent[_stage] = spent.get(_stage, 0.0) + time.perf_counter() - t

        setattr(module, name, timed)
    x = data(n, d)
    private_mean(x[:2000], epsilon=EPS, delta=DELTA, rng=0)  # warm caches (sampler tables, imports)
    spent.clear()
    t = time.perf_counter()
    rel = private_mean(x, epsilon=EPS, delta=DELTA, rng=1)
    total = time.perf_counter() - t
    out = {"seconds": total, "stages": {**spent, "rest": total - sum(spent.values())},
           "release": [rel.ok, rel.radius, rel.clip_radius,
                       None if rel.mean is None else [float(v).hex() for v in rel.mean]]}
    if coinpress:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from baselines.coinpress import best_plan, coinpress_mean, rho_for

        plan = best_plan(n, d, rho=rho_for(EPS, DELTA), prior_radius=PRIOR_RADIUS, beta=BETA)
        coinpress_mean(x, plan, rng=np.random.default_rng(0))
        t = time.perf_counter()
        coinpress_mean(x, plan, rng=np.random.default_rng(1))
        out["coinpress_s"] = time.perf_counter() - t
    return out


def run_child(src: Path, n: int, d: int, coinpress: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, __file__, "--child", str(n), str(d), str(int(coinpress))],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_stages(st: dict) -> str:
    return " ".join(f"{k}={v:.3f}" for k, v in sorted(st.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", help="a git revision to compare with (its src/privagg)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="the per-stage table instead")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--profile-child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.profile_child:
        print(json.dumps(profile_child(*(int(v) for v in args.profile_child))))
        return
    if args.child:
        n, d, cp = (int(v) for v in args.child)
        print(json.dumps(child(n, d, bool(cp))))
        return
    impls = {"privagg": ROOT / "src"}
    tmp = None
    if args.baseline:
        tmp = tempfile.TemporaryDirectory()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "src/privagg"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp.name], input=archive, check=True)
        impls[f"privagg@{args.baseline}"] = Path(tmp.name) / "src"
    print(f"private_mean (ε={EPS}, δ={DELTA}, radius=None) vs CoinPress; best of {args.reps}; "
          f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}", flush=True)
    if args.profile:
        for n, d in CASES:
            for name, src in impls.items():
                env = {**os.environ, "PYTHONPATH": str(src)}
                out = subprocess.run([sys.executable, __file__, "--profile-child", str(n), str(d),
                                      str(args.reps)], capture_output=True, text=True, check=True, env=env)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"n = {n}, d = {d}, {name}: total wall {r['wall']:.4f} s, cpu {r['cpu']:.4f} s")
                for k, (w, c) in sorted(r["stages"].items(), key=lambda kv: -kv[1][1]):
                    print(f"    {k:28s} wall {w:.4f}  cpu {c:.4f}")
        if tmp is not None:
            tmp.cleanup()
        return
    for n, d in CASES:
        best: dict[str, dict] = {}
        cp = []
        for _ in range(args.reps):  # alternate the implementations
            for name, src in impls.items():
                r = run_child(src, n, d, coinpress=name == "privagg")
                if name == "privagg":
                    cp.append(r["coinpress_s"])
                if name not in best or r["seconds"] < best[name]["seconds"]:
                    best[name] = r
        cps = min(cp)
        line = {"n": n, "d": d, "coinpress_s": round(cps, 4)}
        for name, r in best.items():
            line[f"{name}_s"] = round(r["seconds"], 3)
            line[f"{name}/CoinPress"] = round(r["seconds"] / cps, 1)
        for name, r in best.items():
            if name != "privagg":
                line[f"{name}/privagg"] = round(r["seconds"] / best["privagg"]["seconds"], 2)
                line["same_release"] = r["release"] == best["privagg"]["release"]
        print(json.dumps(line), flush=True)
        for name, r in best.items():
            print(f"    {name:>18} stages (s): {fmt_stages(r['stages'])}", flush=True)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
