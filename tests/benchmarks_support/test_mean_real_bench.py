"""Tests of the ``--section mean-real`` report of ``benchmarks/utility.py`` (issue 11's table).

The privagg/oracle target is a ratio of two medians over (by default) 20 runs, which scatters by
tens of percent; the report now prints a bootstrap interval of that ratio (``ratio_interval``) and
says when a miss lies within the runs' noise. Checked here: known answers (all-⊥ and constant
inputs), a coverage check on draws whose true ratio is known, with a negative control (a
zero-width "interval" at the point estimate must fail the same check), and the wording of the
target lines for a miss inside and outside the noise.

Seeds are fixed (printed in the assertion messages); the coverage check's false-failure rate is
stated at the check.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load():  # noqa: ANN202 - a module
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("bench_utility_mean_real",
                                                      BENCHMARKS / "utility.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_utility_mean_real"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


U = _load()

SEED = 20261201
REPS = 300
RUNS = 20
TRUE_RATIO = 1.3  # privagg |error| ~ Exp(1.3), oracle ~ Exp(1): medians 1.3·ln 2 and ln 2


def _draws(rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray]]:
    p = rng.exponential(TRUE_RATIO, size=(RUNS, 1))
    o = rng.exponential(1.0, size=(RUNS, 1))
    return list(p), list(o)


def _coverage(interval) -> float:  # noqa: ANN001 - a function (priv, orac) -> (lo, hi)
    rng = np.random.default_rng(SEED)
    hit = 0
    for _ in range(REPS):
        lo, hi = interval(*_draws(rng))
        hit += lo <= TRUE_RATIO <= hi
    return hit / REPS


def test_ratio_interval_known_answers() -> None:
    inf = [np.full(2, np.inf)] * 20
    ones = [np.ones(2)] * 20
    assert U.ratio_interval(inf, ones) == (math.inf, math.inf)  # all ⊥: the ratio is ∞
    assert U.ratio_interval(ones, ones) == (1.0, 1.0)  # constant errors: no scatter
    lo, hi = U.ratio_interval([np.array([2.0, 1.0])] * 20, ones)
    assert (lo, hi) == (2.0, 2.0)  # the worst coordinate
    assert all(math.isnan(v) for v in U.ratio_interval([], []))
    # seeded: the same inputs give the same interval
    rng = np.random.default_rng(SEED)
    p, o = _draws(rng)
    assert U.ratio_interval(p, o) == U.ratio_interval(p, o)


def test_ratio_interval_covers_the_true_ratio() -> None:
    # Percentile bootstrap of a ratio of 20-run medians, nominal 90 %. Measured coverage with
    # this seed: 0.94 (printed on failure). The bound 0.80 is about 5 binomial sds (300 reps, sd 0.017
    # at 0.9) below nominal: false-failure rate < 1e-6 for a correct interval of coverage >= 0.88.
    cov = _coverage(U.ratio_interval)
    assert cov >= 0.80, f"coverage {cov:.3f} over {REPS} reps (seed {SEED})"
    assert cov <= 0.99, f"coverage {cov:.3f}: too wide (seed {SEED})"


def test_ratio_interval_negative_control() -> None:
    # A zero-width interval at the point estimate (what the table printed before) must fail.
    def point(p: list[np.ndarray], o: list[np.ndarray]) -> tuple[float, float]:
        r = float(np.max(np.median(p, axis=0) / np.median(o, axis=0)))
        return r, r

    cov = _coverage(point)
    assert cov < 0.80, f"the harness accepted a point 'interval' (coverage {cov:.3f}, seed {SEED})"


def _cell(name: str, priv: np.ndarray, orac: np.ndarray, eps: float = 1.0):  # noqa: ANN202
    cell = U.RealCell(name, 300, priv.shape[1], eps)
    cell.errors = {"privagg": list(priv), "oracle": list(orac)}
    return cell


def test_targets_say_when_a_miss_is_within_the_noise() -> None:
    rng = np.random.default_rng(SEED)
    # 20 runs of Exp(1.7) against Exp(1): with this seed the point ratio is 2.30, its interval
    # 1.41–5.95 (reaches 1.5); a gap of 3× with no scatter is a miss outside the noise
    noisy = _cell("noisy", rng.exponential(1.7, size=(20, 2)), rng.exponential(1.0, size=(20, 2)))
    far = _cell("far", np.full((20, 2), 3.0) + rng.random((20, 2)), np.ones((20, 2)))
    tab, misses = U.real_table([noisy, far])
    assert "90% bootstrap" in tab.splitlines()[0]
    by = {m.split(" ")[0]: m for m in misses}
    assert "far" in by and "within the runs' noise" not in by["far"], misses
    assert "noisy" in by and "within the runs' noise" in by["noisy"], misses


def test_wild_count_known_answers() -> None:
    """A run is wild when some coordinate is more than 10 standard deviations (10·√n SE) off;
    ⊥ runs (infinite errors) are counted as ⊥, not as wild."""
    cell = U.RealCell("t", 100, 2, 1.0)
    cell.errors["privagg"] = [np.array([1.0, 99.0]), np.array([101.0, 0.0]), np.array([np.inf, np.inf]),
                              np.array([100.0, 100.0])]
    assert cell.wild("privagg") == 1  # only 101 > 10·√100 = 100
    assert cell.wild("oracle") == 0
