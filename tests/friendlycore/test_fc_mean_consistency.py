"""private_mean on skewed data (issue 11): consistency of the tail clip, and the coverage of
``MeanRelease.confidence_intervals``.

Consistency: on Exponential(1) and lognormal(0, 1) data (n = 10⁵, d = 1) the release at ε = 100
is within 2 standard errors (std/√n) of the sample mean. At ε = 100 the final sum's noise and the
tail rule's bias (about τ = 1 row clipped) are below SE/50 (printed), so the false-failure rate
is far below 10⁻³. Negative control: the former median-distance clip (forced by making every
histogram read as far mass) misses by more than 20 SE (it was 50× before).

Coverage, computed exactly instead of simulated, for both calibrations (``"auto"`` runs Laplace
here, at d = 2): Gaussian data (n = 40000, d = 2, column sds 1 and 3), a given radius (public), 30
runs at β = 0.2. Per run and coordinate, the probability that
the interval misses θ = center + mean(clip(x − center, R)) is summed exactly over the discrete
Gaussian (or discrete Laplace) law of the final noise (every possible release's own interval, given the run's n̂,
center and R): whenever |n̂ − n| <= k_c (the count part, whose tail <= β/10 is checked exactly
with mpmath) it must be <= 0.9β. Control: intervals ×0.8 miss with exact probability about
0.28 > β in every run. Both are deterministic given the runs (no Bernoulli sampling); a third
test checks that the realized noise has the stated law (Gaussian: χ²₆₀ bounds on Z²/σ²,
false-failure rate 4.2e-5; Laplace: the mean of the 60 |Z|/b in [0.6, 1.5], a Gamma(60)/60 law,
false-failure rate 4.8e-4 by scipy.stats.gamma, the discreteness negligible at t in the thousands).
False-failure rate of the whole file < 1e-4 (the ε = 100 tests: noise sd < SE/50, 100 sd from
the bound; the count requirement of the coverage tests: < 1e-10).
"""

from __future__ import annotations

import math

import dataclasses

import mpmath
import numpy as np
import pytest

import privagg.mechanisms.mean as M
from privagg.mechanisms.mean import private_mean
from privagg.noise.grid import grid_integers

SEED = 1100
N = 100_000


def skewed(kind: str) -> np.ndarray:
    rng = np.random.default_rng([SEED, 0 if kind == "exponential" else 1])
    if kind == "exponential":
        return rng.exponential(size=(N, 1))
    return rng.lognormal(0.0, 1.0, size=(N, 1))


@pytest.mark.parametrize("kind", ["exponential", "lognormal"])
def test_error_at_large_epsilon_is_within_two_standard_errors(kind):
    x = skewed(kind)
    se = float(x.std() / math.sqrt(N))
    rel = private_mean(x, epsilon=100.0, delta=1e-6, rng=SEED)
    err = float(abs(rel.mean[0] - x.mean()))
    print(f"seed={SEED} {kind}: error {err:.3g}, SE {se:.3g}, R {rel.clip_radius:.3g}, "
          f"outside {rel.outside}, rule {rel.clip_rule}")
    assert rel.ok and rel.clip_rule == "tail"
    assert err <= 2 * se, (err, se, f"seed={SEED}")


@pytest.mark.parametrize("kind", ["exponential", "lognormal"])
def test_negative_control_median_clip_is_biased(kind, monkeypatch):
    """The former rule (median-distance clip) on the same data: biased far beyond 2 SE."""
    monkeypatch.setattr(M, "_far_threshold", lambda tau, sd0: -math.inf)  # always the robust rule
    x = skewed(kind)
    se = float(x.std() / math.sqrt(N))
    rel = private_mean(x, epsilon=100.0, delta=1e-6, rng=SEED)
    err = float(abs(rel.mean[0] - x.mean()))
    print(f"seed={SEED} {kind} (median clip): error {err:.3g}, SE {se:.3g}")
    assert rel.clip_rule == "robust" and err > 20 * se, (err, se)


# ------------------------------------------------------------------ confidence intervals
RUNS, BETA = 30, 0.2


def clipped_target(x: np.ndarray, center: np.ndarray, big_r: float) -> np.ndarray:
    y = x - center
    norms = np.linalg.norm(y, axis=1)
    return center + (y * np.minimum(1.0, big_r / np.maximum(norms, 1e-300))[:, None]).mean(0)


def conditional_misses(x, rel, shrink=1.0):
    """Per coordinate, the exact probability over the final sum's noise (its discrete Gaussian
    law, every integer within ±12σ: the rest has mass < e⁻⁷²) that the release's own interval
    (``confidence_intervals`` evaluated on every possible release at once), shrunk by ``shrink``,
    misses θ, given this run's n̂, center and clip radius."""
    kind, param, step, *_ = rel.noise
    assert kind == rel.calibration in ("gaussian", "laplace")
    e = int(round(math.log2(step)))
    g = grid_integers(M._clipped_sum(x, rel.center, rel.clip_radius), exponent=e)  # as released
    if kind == "gaussian":
        sigma = math.sqrt(param)
        k = np.arange(-math.ceil(12 * sigma), math.ceil(12 * sigma) + 1, dtype=np.float64)
        w = np.exp(-(k * k) / (2.0 * param))
    else:  # DLap(t): P[k] ∝ e^{−|k|/t}; beyond ±45t the mass is < e⁻⁴⁵
        sigma = param  # the scale t (Z/t is then |Z|/b up to b = t(1 + O(1/t²)))
        k = np.arange(-math.ceil(45 * param), math.ceil(45 * param) + 1, dtype=np.float64)
        w = np.exp(-np.abs(k) / param)
    w /= w.sum()
    means = M._finite(rel.center + step * (g[None, :] + k[:, None]) / rel.n_hat)  # (K, d)
    low, high = dataclasses.replace(rel, mean=means).confidence_intervals(BETA)
    half = (high - means) * shrink
    theta = clipped_target(x, rel.center, rel.clip_radius)
    miss = np.abs(means - theta) > half
    z = (np.rint((rel.mean - rel.center) * rel.n_hat / step) - g) / sigma  # the realized noise
    return w @ miss, z


@pytest.fixture(scope="module", params=["gaussian", "auto"])
def coverage_runs(request):
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(40000, 2)) * np.array([1.0, 3.0]) + 5.0
    out = []
    for s in range(RUNS):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, radius=12.0, m_locate=1000, rng=SEED * 1000 + s,
                           calibration=request.param)
        assert rel.ok, f"seed={SEED * 1000 + s}"
        assert rel.calibration == ("laplace" if request.param == "auto" else "gaussian")
        k_c = M._dlap_two_sided(rel.noise[3], 0.1 * BETA)
        p, z = conditional_misses(x, rel)
        p_shrunk, _ = conditional_misses(x, rel, 0.8)
        out.append((abs(rel.n_hat - x.shape[0]) <= k_c, p, p_shrunk, z, rel.calibration))
    return out


def test_count_part_of_the_intervals_is_exact():
    """|n̂ − n| <= k_c fails with probability <= β/10: the exact discrete Laplace law (mpmath)."""
    t = float(1 / M.mean_plan(1.0, 1e-6).eps_count)
    assert t == 20.0  # count noise scale 1/ε_n = 20/ε at ε = 1 (docs/proofs/mean.md §13)
    k_c = M._dlap_two_sided(t, 0.1 * BETA)
    q = mpmath.exp(-1 / mpmath.mpf(t))
    tail = lambda k: 2 * q ** (k + 1) / (1 + q)  # P[|Z| > k], Z ~ DLap(t)  # noqa: E731
    assert tail(k_c) <= 0.1 * BETA < tail(k_c - 1)


def test_intervals_cover_the_clipped_mean(coverage_runs):
    """Given a count within k_c, the noise part misses with probability <= 0.9β: computed
    exactly per run and coordinate (no sampling of the final noise: the test is deterministic
    given the runs, false-failure rate 0). Union with the count part: coverage >= 1 − β."""
    inside = [(p, ps) for ok, p, ps, *_ in coverage_runs if ok]
    # P[|n̂ − n| > k_c] <= 0.02 per run: fewer than 20 of 30 inside w.p. < 1e-10
    assert len(inside) >= 20, len(inside)
    worst = max(float(p.max()) for p, _ in inside)
    print(f"seed={SEED}: worst exact conditional miss probability {worst:.4f} (limit {0.9 * BETA})")
    assert worst <= 0.9 * BETA, worst


def test_negative_control_shrunk_intervals_undercover(coverage_runs):
    """Intervals ×0.8 miss with probability about 0.28 > β in every run (exact, as above)."""
    least = min(float(ps.min()) for ok, _, ps, *_ in coverage_runs if ok)
    print(f"seed={SEED}: ×0.8 intervals: least exact miss probability {least:.4f} (β = {BETA})")
    assert least > BETA, least


def test_the_released_noise_has_the_stated_law(coverage_runs):
    """The realized final noise Z (recovered exactly from each release, both coordinates) over
    its stated σ: the mean square of the 60 draws is in [0.4, 1.9] (χ²₆₀/60: false-failure rate
    4.2e-5). Control: the same draws ×3 (noise three times the stated σ) fail the bound whenever
    the test passes (0.4·9 > 1.9)."""
    z = np.concatenate([zz for *_, zz, _ in coverage_runs])
    if coverage_runs[0][-1] == "gaussian":
        ms = float(np.mean(z * z))
        print(f"seed={SEED}: mean square of Z/σ over {z.size} draws: {ms:.3f}")
        assert 0.4 <= ms <= 1.9, ms
        control = float(np.mean((3 * z) ** 2))
        assert not 0.4 <= control <= 1.9, control
        return
    # Laplace: z = Z/t; |Z|/b ~ Exp(1) up to the discreteness (t in the thousands here)
    ma = float(np.mean(np.abs(z)))
    print(f"seed={SEED}: mean of |Z|/t over {z.size} Laplace draws: {ma:.3f}")
    assert 0.6 <= ma <= 1.5, ma
    control = float(np.mean(np.abs(3 * z)))  # three times the stated scale: >= 1.8 whenever passing
    assert not 0.6 <= control <= 1.5, control


def test_intervals_are_none_for_bottom_and_validate_beta():
    rel = private_mean(np.zeros((0, 2)), epsilon=1.0, delta=1e-6, rng=SEED)
    assert not rel.ok and rel.confidence_intervals(0.05) is None and rel.n_hat is not None
    from privagg.errors import ParameterError

    ok = private_mean(np.random.default_rng(SEED).normal(size=(3000, 2)), epsilon=1.0,
                      delta=1e-6, radius=8.0, rng=SEED)
    with pytest.raises(ParameterError):
        ok.confidence_intervals(1.5)
