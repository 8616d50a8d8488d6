"""private_mean on skewed data (issue 11): consistency of the tail clip, and the coverage of
``MeanRelease.confidence_intervals``.

Consistency: on Exponential(1) and lognormal(0, 1) data (n = 10⁵, d = 1) the release at ε = 100
is within 2 standard errors (std/√n) of the sample mean. At ε = 100 the final sum's noise and the
tail rule's bias (about τ = 1 row clipped) are below SE/50 (printed), so the false-failure rate
is far below 10⁻³. Negative control: the former median-distance clip (forced by making every
histogram read as far mass) misses by more than 20 SE (it was 50× before).

Coverage: Gaussian data (n = 40000, d = 2, column sds 1 and 3), a given radius (public), 400 runs:
per coordinate the interval at β = 0.2 misses θ = center + mean(clip(x − center, R)) (computed
exactly from the release) with probability <= 0.2; 800 coordinate trials, allowed misses
<= 160 + 3·11.3 = 194 (false-failure rate < 2·10⁻³). Control: intervals shrunk ×0.8 miss with
probability about 0.28 (the noise part is z_{0.91}·σ, the count part is small here; expected
about 225 misses): they must exceed 194 (false-failure rate about 1 %, measured 0 of the seeds
tried: printed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privagg.friendlycore.mean as M
from privagg.friendlycore.mean import private_mean

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
RUNS, BETA = 400, 0.2


def clipped_target(x: np.ndarray, center: np.ndarray, big_r: float) -> np.ndarray:
    y = x - center
    norms = np.linalg.norm(y, axis=1)
    return center + (y * np.minimum(1.0, big_r / np.maximum(norms, 1e-300))[:, None]).mean(0)


@pytest.fixture(scope="module")
def coverage_runs():
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(40000, 2)) * np.array([1.0, 3.0]) + 5.0
    out = []
    for s in range(RUNS):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, radius=12.0, m_locate=1000, rng=SEED * 1000 + s)
        if not rel.ok:
            continue
        theta = clipped_target(x, rel.center, rel.clip_radius)
        low, high = rel.confidence_intervals(BETA)
        out.append((rel.mean, theta, high - rel.mean))
    assert len(out) >= RUNS * 0.95, len(out)
    return out


def misses(runs, shrink=1.0):
    return sum(int(np.sum(np.abs(m - t) > shrink * h)) for m, t, h in runs)


def test_intervals_cover_the_clipped_mean(coverage_runs):
    k, trials = misses(coverage_runs), 2 * len(coverage_runs)
    print(f"seed={SEED}: {k} misses of {trials} (β = {BETA})")
    assert k <= BETA * trials + 3 * math.sqrt(trials * BETA * (1 - BETA)), (k, trials)


def test_negative_control_shrunk_intervals_undercover(coverage_runs):
    k, trials = misses(coverage_runs, 0.8), 2 * len(coverage_runs)
    print(f"seed={SEED}: ×0.8 intervals: {k} misses of {trials}")
    assert k > BETA * trials + 3 * math.sqrt(trials * BETA * (1 - BETA)), (k, trials)


def test_intervals_are_none_for_bottom_and_validate_beta():
    rel = private_mean(np.zeros((0, 2)), epsilon=1.0, delta=1e-6, rng=SEED)
    assert not rel.ok and rel.confidence_intervals(0.05) is None and rel.n_hat is not None
    from privagg.errors import ParameterError

    ok = private_mean(np.random.default_rng(SEED).normal(size=(3000, 2)), epsilon=1.0,
                      delta=1e-6, radius=8.0, rng=SEED)
    with pytest.raises(ParameterError):
        ok.confidence_intervals(1.5)
