"""Tests of the CoinPress baseline in ``benchmarks/baselines/coinpress.py``.

Known answers of the calibration (exact fractions and mpmath, computed independently of the code),
a statistical check that the noise actually drawn matches the privacy calibration, an accuracy
check on easy data, and negative controls: each harness must reject a deliberately broken variant.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy import stats

from privagg.accounting.conversions import zcdp_to_epsilon

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str, path: Path):  # noqa: ANN202 - a module
    """Import a benchmarks/ file by path, leaving sys.path as it was (benchmarks/ has files
    named like common modules: noise.py, ledger.py)."""
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


_cp = _load("privagg_bench_coinpress", BENCHMARKS / "baselines" / "coinpress.py")
SPLITS, Plan, best_plan, chi_radius = _cp.SPLITS, _cp.Plan, _cp.best_plan, _cp.chi_radius
coinpress_mean, make_plan, rho_for = _cp.coinpress_mean, _cp.make_plan, _cp.rho_for

SEED = 20201207


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("steps", [1, 2, 3, 7, 10])
def test_step_budgets_sum_exactly_to_total(steps: int, split: str) -> None:
    plan = make_plan(1000, 5, rho=0.0173, prior_radius=1e4, steps=steps, split=split)
    assert plan.steps == steps
    assert sum(plan.rhos, Fraction(0)) == plan.rho == Fraction(0.0173)
    assert all(r > 0 for r in plan.rhos)


@pytest.mark.parametrize("split", SPLITS)
def test_noise_scales_known_answer(split: str) -> None:
    """σ_i = 2R_i/(n√(2ρ_i)) at 50 digits; the exact spent zCDP is ≤ ρ and tight."""
    n, d = 5000, 30
    plan = make_plan(n, d, rho=0.05, prior_radius=1e5, steps=5, split=split)
    with mpmath.workdps(50):
        for big_r, rho_i, s in zip(plan.clip, plan.rhos, plan.sigma, strict=True):
            rho_mp = mpmath.mpf(rho_i.numerator) / rho_i.denominator
            expected = 2 * mpmath.mpf(big_r) / (n * mpmath.sqrt(2 * rho_mp))
            assert abs(mpmath.mpf(s) / expected - 1) < 1e-14
            assert mpmath.mpf(s) >= expected  # rounded toward more noise
    spent = plan.spent_rho()
    assert spent <= plan.rho
    assert spent >= plan.rho * (1 - Fraction(1, 10**12))


def test_radius_recursion_known_answer() -> None:
    """r_{i+1} = √(1/n + σ_i²)·g(d, 2t/β) and R_i = r_i + g(d, 2tn/β), recomputed with mpmath."""
    n, d, t, beta = 2000, 50, 4, 0.01
    plan = make_plan(n, d, rho=0.1, prior_radius=3e4, steps=t, beta=beta, split="equal")

    def g(m: mpmath.mpf) -> mpmath.mpf:
        lm = mpmath.log(m)
        return mpmath.sqrt(d + 2 * mpmath.sqrt(d * lm) + 2 * lm)

    with mpmath.workdps(50):
        bi = mpmath.mpf(beta) / (2 * t)
        r = mpmath.mpf(3e4)
        for i in range(t):
            assert abs(mpmath.mpf(plan.radius[i]) / r - 1) < 1e-12
            assert abs(mpmath.mpf(plan.clip[i]) / (r + g(n / bi)) - 1) < 1e-12
            r = mpmath.sqrt(mpmath.mpf(1) / n + mpmath.mpf(plan.sigma[i]) ** 2) * g(1 / bi)
        assert abs(mpmath.mpf(plan.final_radius) / r - 1) < 1e-12


@pytest.mark.parametrize(("d", "m"), [(1, 10.0), (10, 1e3), (100, 1e6), (1000, 1e9)])
def test_chi_radius_is_a_valid_tail_bound(d: int, m: float) -> None:
    """P[χ²_d ≥ g(d, m)²] ≤ 1/m (Laurent–Massart), checked with scipy's χ² tail."""
    assert stats.chi2.sf(chi_radius(d, m) ** 2, d) <= 1.0 / m


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-6), (1.0, 1e-6), (2.0, 1e-6), (1.0, 1e-9)])
def test_rho_for_is_the_largest_rho_within_epsilon(epsilon: float, delta: float) -> None:
    rho = rho_for(epsilon, delta)
    assert zcdp_to_epsilon(Fraction(rho), Fraction(delta)) <= Fraction(epsilon)
    assert zcdp_to_epsilon(Fraction(rho * (1 + 1e-9)), Fraction(delta)) > Fraction(epsilon)
    # Independent: inf over α of the CKS expression, by a dense α grid in mpmath.
    with mpmath.workdps(30):
        r, ld = mpmath.mpf(rho), mpmath.log(1 / mpmath.mpf(delta))
        best = min(
            a * r + (ld + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)) / (a - 1)
            for a in (1 + mpmath.mpf(10) ** (k / 200) for k in range(-600, 800))
        )
    assert abs(best / epsilon - 1) < 1e-4


def _noise_matches_calibration(plan: Plan, runs: int, seed: int, false_failure: float) -> bool:
    """Does the final step's noise have the variance the privacy budget demands?

    All points sit at one x0 inside every ball (w.p. ≥ 1 − β per run), so the output is
    x0 + N(0, σ_t² I). σ_t is recomputed from the public clip radius and ρ_t, not read from the
    plan. Two-sided χ² test on runs·d squared deviations at level ``false_failure``.
    """
    rng = np.random.default_rng(seed)
    x0 = np.full(plan.d, 10.0 / math.sqrt(plan.d))
    points = np.tile(x0, (plan.n, 1))
    sigma_t = 2 * plan.clip[-1] / (plan.n * math.sqrt(2 * float(plan.rhos[-1])))
    dev = np.stack([coinpress_mean(points, plan, rng=rng) for _ in range(runs)]) - x0
    dof = dev.size
    stat = float(np.sum(dev * dev)) / sigma_t**2
    lo, hi = stats.chi2.ppf(false_failure / 2, dof), stats.chi2.isf(false_failure / 2, dof)
    return bool(lo <= stat <= hi)


def test_noise_matches_calibration_and_negative_controls() -> None:
    """False-failure rate ≤ 1e-6 (χ² level) + 400·β = 4e-7 (a point clipped in some run)."""
    print(f"seed={SEED}")
    plan = make_plan(50, 20, rho=0.2, prior_radius=100.0, steps=3, beta=1e-9)
    assert _noise_matches_calibration(plan, 400, SEED, 1e-6), f"seed={SEED}"
    half_noise = dataclasses.replace(plan, sigma=tuple(s / 2 for s in plan.sigma))
    assert not _noise_matches_calibration(half_noise, 400, SEED, 1e-6), f"seed={SEED}"
    no_noise = dataclasses.replace(plan, sigma=(0.0,) * plan.steps)
    assert not _noise_matches_calibration(no_noise, 400, SEED, 1e-6), f"seed={SEED}"
    slightly_less = dataclasses.replace(plan, sigma=tuple(s * 0.9 for s in plan.sigma))
    assert not _noise_matches_calibration(slightly_less, 400, SEED, 1e-6), f"seed={SEED}"


def _within_final_radius(mu_norm: float, prior_radius: float, trials: int, seed: int) -> bool:
    """All ``trials`` estimates on N(μ, I) data land within the plan's final radius of μ."""
    rng = np.random.default_rng(seed)
    n, d = 2000, 10
    plan = make_plan(n, d, rho=0.5, prior_radius=prior_radius, steps=4, beta=1e-6)
    for _ in range(trials):
        mu = rng.normal(size=d)
        mu *= mu_norm / np.linalg.norm(mu)
        x = mu + rng.normal(size=(n, d))
        if np.linalg.norm(coinpress_mean(x, plan, rng=rng) - mu) > plan.final_radius:
            return False
    return True


def test_accuracy_on_easy_data_and_negative_control() -> None:
    """False-failure rate ≤ 20·β = 2e-5 (the plan's guarantee, β = 1e-6 per trial)."""
    print(f"seed={SEED}")
    assert _within_final_radius(1e3, 1e4, 20, SEED), f"seed={SEED}"
    # Broken: the prior ball misses μ, so the guarantee's premise fails and the check must too.
    assert not _within_final_radius(3e4, 1e4, 20, SEED), f"seed={SEED}"


def test_best_plan_beats_every_candidate() -> None:
    best = best_plan(10_000, 100, rho=0.02, prior_radius=1e5)
    for t in range(2, 11):
        for split in SPLITS:
            cand = make_plan(10_000, 100, rho=0.02, prior_radius=1e5, steps=t, split=split)
            assert best.final_radius <= cand.final_radius


def test_shape_is_checked() -> None:
    plan = make_plan(10, 3, rho=0.1, prior_radius=1.0, steps=2)
    with pytest.raises(ValueError, match="shape"):
        coinpress_mean(np.zeros((10, 4)), plan, rng=np.random.default_rng(0))


def _load_utility():  # noqa: ANN202 - a module
    return _load("privagg_bench_utility", BENCHMARKS / "utility.py")


@pytest.mark.parametrize(
    ("epsilon", "delta", "sens"), [(0.5, 1e-6, 1.0), (1.0, 1e-6, 0.02), (2.0, 1e-9, 3.0)]
)
def test_oracle_analytic_gaussian_known_answer(epsilon: float, delta: float, sens: float) -> None:
    """The oracle's σ: Balle–Wang δ(σ) recomputed in mpmath is <= δ at σ and > δ just below."""
    sigma = _load_utility().analytic_gaussian_sigma(epsilon, delta, sens)

    def delta_of(s: float) -> mpmath.mpf:
        a, b = mpmath.mpf(sens) / (2 * s), epsilon * mpmath.mpf(s) / sens
        return mpmath.ncdf(a - b) - mpmath.exp(epsilon) * mpmath.ncdf(-a - b)

    with mpmath.workdps(40):
        assert delta_of(sigma) <= delta * (1 + 1e-9)
        assert delta_of(sigma * (1 - 1e-6)) > delta
    classic = sens * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    if epsilon < 1:
        assert sigma < classic
