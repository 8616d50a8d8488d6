"""Throughput of privagg's exact samplers beside numpy's float samplers and OpenDP's.

Not a timed test: prints a table measured side by side in one process (one core), so the
ratios are meaningful on a noisy machine. Usage::

    python benchmarks/noise.py [--draws 1000000] [--repeats 5] [--opendp-draws 1000000]

Rows: discrete Laplace at scale 2 and discrete Gaussian at σ = 2 (privagg, with the secure
AES-CTR generator and with a seeded PCG64), numpy's insecure float ``laplace`` / ``normal``,
and OpenDP's exact samplers when ``opendp`` is installed (the ``bench`` extra). Two more rows
show privagg's paths for wide laws (scale 5000: G1 − G2; σ = 2000: Canonne–Kamath–Steinke);
their "÷ numpy" column compares with numpy at scale 2, which costs the same at any scale.

A second table (``--many-scales``, on by default; ``--no-many-scales`` skips it) times new
scales from cold caches, as a grouped release meets them: 321 distinct scales ``s/(9/10)``
(``s`` on the 5-significant-bit grid 1 … 2^20) with 1 … 10 draws each, and one call of
10^6 draws at scales 7/3 and 2^20/0.9, with whole tables always certified (what 4bd1e9f did) and
with the automatic choice (lazy tables for few draws); it also checks that both give the same
draws. That table reports process CPU time (single-threaded work; on a shared machine wall
time mostly measures the other processes).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from privagg.noise import SecureGenerator, _laws, discrete_gaussian, discrete_laplace
from privagg.noise import samplers as _samplers


def best_rate(fn: Callable[[], object], draws: int, repeats: int) -> float:
    """Draws per second of the fastest of ``repeats`` runs (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return draws / best


def opendp_samplers(draws: int):
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    lap = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=2.0
    )
    gau = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=float), scale=2.0
    )
    zeros = [0] * draws
    return (lambda: lap(zeros)), (lambda: gau(zeros))


def scale_grid() -> list[Fraction]:
    """``s / (9/10)`` for ``s`` with 5 significant bits in ``[1, 2^20]`` (321 scales)."""
    out: list[Fraction] = []
    for e in range(21):
        for m in range(16, 32):
            v = Fraction(m << e, 16)
            if 1 <= v <= 2**20 and v not in out:
                out.append(v)
    return [s / Fraction(9, 10) for s in out]


def _clear_table_caches() -> None:
    for cached in (
        _laws.geometric_plan,
        _laws._geom_enclosures,
        _laws.geometric_lazy,
        _laws.laplace_table,
        _laws._laplace_enclosures,
        _laws.laplace_lazy,
        _laws._exp_iv,
    ):
        cached.cache_clear()


def many_scales(repeats: int) -> None:
    """Cold-cache cost of new scales: whole tables (as 4bd1e9f) vs the automatic choice."""
    scales = scale_grid()
    modes = {  # label -> LAZY_RATIO (10^18: never lazy, as 4bd1e9f)
        "whole tables (4bd1e9f)": 10**18,
        f"auto (LAZY_RATIO={_samplers.LAZY_RATIO})": _samplers.LAZY_RATIO,
    }
    saved = _samplers.LAZY_RATIO
    workloads = {
        f"{len(scales)} distinct scales, 1-10 draws each": lambda gen: [
            discrete_laplace(s, 1 + i % 10, rng=gen) for i, s in enumerate(scales)
        ],
        "1 scale (7/3), 10^6 draws": lambda gen: [
            discrete_laplace(Fraction(7, 3), 10**6, rng=gen)
        ],
        "1 scale (2^20/0.9), 10^6 draws": lambda gen: [
            discrete_laplace(Fraction(2**20) / Fraction(9, 10), 10**6, rng=gen)
        ],
    }
    print(f"\nCPU ms, best of {repeats}, caches cleared before each run")
    cols = " ".join(f"{m:>26s}" for m in modes)
    header = f"{'workload (cold caches)':42s} {cols} {'speed-up':>9s}"
    print()
    print(header)
    print("-" * len(header))
    try:
        for name, work in workloads.items():
            times = [float("inf")] * len(modes)
            outs: list[np.ndarray] = [np.empty(0)] * len(modes)
            for _ in range(repeats):  # modes interleaved, best of `repeats` each
                for k, ratio in enumerate(modes.values()):
                    _samplers.LAZY_RATIO = ratio
                    _clear_table_caches()
                    gen = np.random.default_rng(1)
                    t0 = time.process_time()  # CPU time: the machine may be shared
                    out = work(gen)
                    times[k] = min(times[k], time.process_time() - t0)
                    outs[k] = np.concatenate([np.ravel(o) for o in out])
            same = all(np.array_equal(outs[0], o) for o in outs[1:])
            cells = " ".join(f"{t * 1e3:23.1f} ms" for t in times)
            flag = "" if same else "  DRAWS DIFFER"
            print(f"{name:42s} {cells} {times[0] / times[-1]:8.1f}x{flag}")
    finally:
        _samplers.LAZY_RATIO = saved
        _clear_table_caches()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=10**6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--opendp-draws", type=int, default=10**6)
    parser.add_argument(
        "--many-scales", action=argparse.BooleanOptionalAction, default=True
    )
    args = parser.parse_args()
    n, reps = args.draws, args.repeats

    for cached in (
        _laws.laplace_table,
        _laws._laplace_enclosures,
        _laws.gaussian_table,
        _laws._gaussian_enclosures,
        _laws.gaussian_tail_sums,
    ):
        cached.cache_clear()
    t0 = time.perf_counter()
    _laws.laplace_table(Fraction(2))
    t_lap = time.perf_counter() - t0
    t0 = time.perf_counter()
    _laws.gaussian_table(Fraction(4))
    t_gau = time.perf_counter() - t0
    print(
        f"table build (cold, certified): laplace t=2 {t_lap * 1e3:.1f} ms, gaussian sigma=2 {t_gau * 1e3:.1f} ms"
    )

    secure = SecureGenerator()
    pcg = np.random.default_rng(1)
    rows: list[tuple[str, str, float]] = []  # (family, name, rate)
    rows.append(
        (
            "laplace",
            "numpy laplace(0, 2) float, PCG64 [insecure]",
            best_rate(lambda: pcg.laplace(0, 2, n), n, reps),
        )
    )
    rows.append(
        (
            "laplace",
            "privagg discrete_laplace(2), AES-CTR secure",
            best_rate(lambda: discrete_laplace(2, n, rng=secure), n, reps),
        )
    )
    rows.append(
        (
            "laplace",
            "privagg discrete_laplace(2), PCG64 seeded",
            best_rate(lambda: discrete_laplace(2, n, rng=pcg), n, reps),
        )
    )
    rows.append(
        (
            "gaussian",
            "numpy normal(0, 2) float, PCG64 [insecure]",
            best_rate(lambda: pcg.normal(0, 2, n), n, reps),
        )
    )
    rows.append(
        (
            "gaussian",
            "privagg discrete_gaussian(4), AES-CTR secure",
            best_rate(lambda: discrete_gaussian(4, n, rng=secure), n, reps),
        )
    )
    rows.append(
        (
            "gaussian",
            "privagg discrete_gaussian(4), PCG64 seeded",
            best_rate(lambda: discrete_gaussian(4, n, rng=pcg), n, reps),
        )
    )
    rows.append(
        (
            "laplace",
            "privagg discrete_laplace(5000) [G1 - G2 path]",
            best_rate(lambda: discrete_laplace(5000, n, rng=secure), n, reps),
        )
    )
    rows.append(
        (
            "gaussian",
            "privagg discrete_gaussian(2000^2) [CKS path]",
            best_rate(lambda: discrete_gaussian(2000**2, n, rng=secure), n, reps),
        )
    )
    odp = opendp_samplers(args.opendp_draws)
    ref: dict[str, float] = {}
    if odp is not None:
        m = args.opendp_draws
        ref["laplace"] = best_rate(odp[0], m, 1)
        ref["gaussian"] = best_rate(odp[1], m, 1)
        rows.append(("laplace", "OpenDP make_laplace (int, exact)", ref["laplace"]))
        rows.append(("gaussian", "OpenDP make_gaussian (int, exact)", ref["gaussian"]))
    base = {fam: rate for fam, name, rate in rows if name.startswith("numpy")}

    print(
        f"draws per run: {n:,} (OpenDP: {args.opendp_draws:,}); best of {reps}; one process"
    )
    header = f"{'sampler':48s} {'M draws/s':>10s} {'÷ numpy':>8s} {'÷ OpenDP':>9s}"
    print(header)
    print("-" * len(header))
    for fam, name, rate in rows:
        vs_np = rate / base[fam]
        vs_odp = f"{rate / ref[fam]:9.1f}" if fam in ref else f"{'n/a':>9s}"
        print(f"{name:48s} {rate / 1e6:10.2f} {vs_np:8.2f} {vs_odp}")
    if odp is None:
        print(
            "OpenDP not installed: pip install opendp (the 'bench' extra) to compare."
        )
    if args.many_scales:
        many_scales(max(1, min(reps, 3)))


if __name__ == "__main__":
    main()
