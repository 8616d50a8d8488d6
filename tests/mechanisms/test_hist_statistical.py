"""Statistical tests of the histogram mechanisms, each with a negative control.

Every test draws from a fixed, printed seed. Each check is a Wilson interval (two-sided, or
one-sided where stated) or a chi-square test (privagg.testing) at level α = 1e-6, so this file
fails spuriously with probability < 2e-5 (about 20 checks). Each harness is also run on a deliberately
broken mechanism (threshold − 1, noise scale × 0.8 or × 1.25, bound halved) and must reject it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privagg.mechanisms import histogram as H
from privagg.mechanisms.histogram import StableHistogramParams, laplace_histogram, stable_histogram
from privagg.noise.samplers import discrete_laplace
from privagg.testing import chisquare_gof, discrete_laplace_pmf, wilson_interval, wilson_upper

ALPHA = 1e-6  # false-failure rate of one check (Wilson α, chi-square p threshold)


def wilson(successes: int, trials: int) -> tuple[float, float]:
    """Two-sided Wilson interval at level 1 − α."""
    return wilson_interval(successes, trials, ALPHA)


def chisquare_pvalue(residuals: np.ndarray, scale: Fraction) -> float:
    """Chi-square goodness of fit of integer residuals to DL(scale)."""
    return chisquare_gof(residuals, discrete_laplace_pmf(scale))


@pytest.fixture
def scaled_noise(monkeypatch: pytest.MonkeyPatch) -> Callable[[Fraction], None]:
    """Negative control: make the mechanisms draw noise of scale factor × t."""

    def apply(factor: Fraction) -> None:
        monkeypatch.setattr(
            H, "discrete_laplace", lambda scale, size, rng: discrete_laplace(scale * factor, size, rng=rng)
        )

    return apply


# ------------------------------------------------------------------ release rate of count-1 keys

TRIALS = 100_000


def _release_rate_check(release_count: int, delta: float) -> bool:
    """True iff the one-sided Wilson upper bound (level 1 − α) of the release rate is ≤ δ."""
    return wilson_upper(release_count, TRIALS, ALPHA) <= delta


@pytest.mark.parametrize(
    ("neighbors", "k"),
    [("replace", 8), ("add_remove", 4)],
)
def test_release_rate_of_count_one_keys_is_below_delta(neighbors: str, k: int) -> None:
    """10^5 keys of count 1 in one call are 10^5 independent trials of "a count-1 key is released".

    δ is chosen so that the tight threshold's exact rate p = P[Z ≥ T − 1] is ≈ 0.65 δ (δ is
    therefore detectable with 10^5 trials); the check: Wilson upper bound (z = 5) of the
    empirical rate ≤ δ. Negative control: the same harness with T − 1 (rate p/q > δ) must fail.
    """
    seed = 20261130 + k
    print(f"seed={seed}")
    t = StableHistogramParams.build(1.0, 0.5, neighbors).scale  # the counts' scale (add/remove: 1/ε_c)
    q = mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)
    p_exact = float(q**k / (1 + q))
    delta = p_exact / 0.65
    params = StableHistogramParams.build(1.0, delta, neighbors)
    assert params.threshold == k + 1  # known answer: p(T−1 = k) ≤ δ < p(k − 1)
    data = np.arange(TRIALS, dtype=np.int64)
    released = stable_histogram(data, epsilon=1.0, delta=delta, neighbors=neighbors, rng=seed).keys.size
    assert _release_rate_check(released, delta), f"seed={seed}: {released}/{TRIALS} released, δ={delta}"

    broken = dataclasses.replace(params, threshold=params.threshold - 1)
    counts = H.count_keys(data, "test")
    released_broken = H._stable_release(counts, broken, seed + 1, None).keys.size
    assert not _release_rate_check(released_broken, delta), (
        f"seed={seed}: T−1 not rejected ({released_broken})"
    )


def test_zero_keys_are_never_released_on_a_domain_of_1e12() -> None:
    """Keys drawn from 10^12 possible integers: every released key is present in the data.

    A mechanism that materialized the domain (e.g. a bincount over it) would need ~8 TB here
    and fail; released keys are checked against the keys present. At ε = 50, δ = 0.5 the noise
    is almost always 0 and T = 2, so every present key (count ≥ 2) is released.
    """
    seed = 4242
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 10**12, size=20_000)
    data = np.concatenate([data, data, data[:5000]])
    r = stable_histogram(data, epsilon=50.0, delta=0.5, neighbors="add_remove", rng=seed)
    assert r.threshold == 2
    present = np.unique(data)
    assert r.keys.size >= 0.99 * present.size, f"seed={seed}"
    assert np.isin(r.keys, present).all(), f"seed={seed}: a zero key was released"
    assert (np.diff(r.keys) > 0).all()


# ------------------------------------------------------------------------- noise distribution


@pytest.mark.parametrize(("neighbors", "epsilon"), [("replace", 1.0), ("add_remove", 0.5), ("replace", 0.2)])
def test_laplace_histogram_noise_follows_the_exact_pmf(neighbors: str, epsilon: float, scaled_noise) -> None:
    """Chi-square of (released − true) counts against DL(t), 2·10^5 bins in one call; p ≥ 1e-6.

    Negative control: noise of scale 0.8·t must give p < 1e-6.
    """
    seed = 777
    print(f"seed={seed}")
    m = 200_000
    true = np.arange(m) % 7
    data = np.repeat(np.arange(m), true)
    r = laplace_histogram(data, epsilon=epsilon, domain=range(m), neighbors=neighbors, rng=seed)
    assert r.params.scale == H.noise_scale(epsilon, neighbors)
    p = chisquare_pvalue(r.counts - true, r.params.scale)
    assert p >= ALPHA, f"seed={seed}: p={p}"

    scaled_noise(Fraction(4, 5))
    r_bad = laplace_histogram(data, epsilon=epsilon, domain=range(m), neighbors=neighbors, rng=seed)
    p_bad = chisquare_pvalue(r_bad.counts - true, r_bad.params.scale)
    assert p_bad < ALPHA, f"seed={seed}: scale×0.8 not rejected, p={p_bad}"


def test_stable_histogram_noise_follows_the_exact_pmf(scaled_noise) -> None:
    """Keys of count 10^6 are always kept; their residuals must be DL(t); scale × 0.8 rejected."""
    seed = 778
    print(f"seed={seed}")
    keys = 100_000
    from privagg.engines.counting import KeyCounts

    kc = KeyCounts(keys=np.arange(keys), counts=np.full(keys, 10**6, dtype=np.int64), n=keys * 10**6)
    r = H.stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, rng=seed)
    assert r.keys.size == keys
    assert chisquare_pvalue(r.counts - 10**6, r.params.scale) >= ALPHA, f"seed={seed}"
    scaled_noise(Fraction(4, 5))
    r_bad = H.stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, rng=seed)
    assert chisquare_pvalue(r_bad.counts - 10**6, r_bad.params.scale) < ALPHA, f"seed={seed}"


# --------------------------------------------------------------------------- coverage, 2-sided


def _interval_coverage_ok(seed: int, beta: float) -> bool:
    """Empirical per-key coverage of the count intervals over 10^5 bins vs the exact 1 − P[|Z| > a]."""
    m = 100_000
    true = 1 + (np.arange(m) * 7919) % 11  # 0 < F < n: clipping to [0, n] cannot add coverage
    data = np.repeat(np.arange(m), true)
    r = laplace_histogram(data, epsilon=1.0, domain=range(m), rng=seed)
    low, high = r.confidence_intervals(beta, unit="count")
    covered = int(((low <= true) & (true <= high)).sum())
    a = H._abs_quantile(r.params.scale, beta)
    q = math.exp(-r.params.scale.denominator / r.params.scale.numerator)
    exact = 1 - 2 * q ** (a + 1) / (1 + q)
    lo, hi = wilson(covered, m)
    return lo <= exact <= hi


@pytest.mark.parametrize("beta", [0.05, 0.2])
def test_interval_coverage_is_exact_two_sided(beta: float, scaled_noise) -> None:
    """Too little noise (×0.8) and too much noise (×1.25) must both fail the same check."""
    seed = 99
    print(f"seed={seed}")
    assert _interval_coverage_ok(seed, beta), f"seed={seed}"
    scaled_noise(Fraction(4, 5))
    assert not _interval_coverage_ok(seed, beta), f"seed={seed}: scale×0.8 not detected"
    scaled_noise(Fraction(5, 4))
    assert not _interval_coverage_ok(seed, beta), f"seed={seed}: scale×1.25 not detected"


def _error_bound_coverage(seed: int, beta: float, trials: int = 3000, m: int = 20) -> tuple[int, float]:
    """Number of trials where every bin is within error_bound(beta), and the exact probability."""
    rng = np.random.default_rng(seed)
    true = np.arange(m) + 5
    data = np.repeat(np.arange(m), true)
    n = data.size
    ok = 0
    bound = None
    for _ in range(trials):
        r = laplace_histogram(data, epsilon=1.0, domain=range(m), rng=rng)
        bound = r.error_bound(beta)
        ok += bool(np.max(np.abs(r.counts - true)) <= round(bound * n))
    k = round(bound * n)
    t = H.noise_scale(1.0, "replace")
    q = math.exp(-t.denominator / t.numerator)
    exact = (1 - 2 * q ** (k + 1) / (1 + q)) ** m
    return ok, exact


def test_error_bound_coverage_is_exact_two_sided(scaled_noise) -> None:
    """P[all m bins within error_bound] equals (1 − P[|Z| > k])^m ≥ 1 − β; ×0.8 and ×1.25 fail."""
    seed, beta, trials = 31337, 0.3, 3000
    print(f"seed={seed}")
    ok, exact = _error_bound_coverage(seed, beta, trials)
    assert exact >= 1 - beta
    lo, hi = wilson(ok, trials)
    assert lo <= exact <= hi, f"seed={seed}: {ok}/{trials}, exact {exact}"
    for factor in (Fraction(4, 5), Fraction(5, 4)):
        scaled_noise(factor)
        ok_bad, _ = _error_bound_coverage(seed, beta, trials)
        lo, hi = wilson(ok_bad, trials)
        assert not lo <= exact <= hi, f"seed={seed}: scale×{factor} not detected ({ok_bad}/{trials})"


def test_stable_replace_error_bound_holds_and_half_of_it_does_not() -> None:
    """One-sided: all keys within error_bound(β) in ≥ 1 − β of trials (Wilson upper ≥ 1 − β).

    Keys of count T − 1 are suppressed about half the time with error T − 1 > half the bound,
    so the harness run with the bound halved must fail.
    """
    seed, beta, trials = 2718, 0.1, 400
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    T = H.stable_threshold(1.0, 1e-6)
    data = np.repeat(np.arange(300), T - 1)
    n = data.size

    def fraction_ok(shrink: float) -> tuple[int, int]:
        ok = 0
        for _ in range(trials):
            r = stable_histogram(data, epsilon=1.0, delta=1e-6, rng=rng)
            released = np.zeros(300, dtype=np.int64)
            released[r.keys] = r.counts
            ok += bool(np.max(np.abs(released - (T - 1))) <= shrink * r.error_bound(beta) * n + 1e-9)
        return ok, trials

    ok, _ = fraction_ok(1.0)
    assert wilson_upper(ok, trials, ALPHA) >= 1 - beta, f"seed={seed}: {ok}/{trials}"
    ok_bad, _ = fraction_ok(0.5)
    assert wilson_upper(ok_bad, trials, ALPHA) < 1 - beta, (
        f"seed={seed}: halved bound not rejected ({ok_bad})"
    )


def test_laplace_add_remove_frequency_bound_holds_and_half_of_it_does_not() -> None:
    """One-sided coverage of the add/remove frequency bound (k + s)/N̂, with a halved-bound control."""
    seed, beta, trials, m = 1618, 0.1, 400, 30
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    true = np.full(m, 3)
    data = np.repeat(np.arange(m), true)

    def fraction_ok(shrink: float) -> int:
        ok = 0
        for _ in range(trials):
            r = laplace_histogram(data, epsilon=1.0, domain=range(m), neighbors="add_remove", rng=rng)
            err = np.max(np.abs(r.frequencies - true / true.sum()))
            ok += bool(err <= shrink * r.error_bound(beta))
        return ok

    ok = fraction_ok(1.0)
    assert wilson_upper(ok, trials, ALPHA) >= 1 - beta, f"seed={seed}: {ok}/{trials}"
    assert wilson_upper(fraction_ok(0.05), trials, ALPHA) < 1 - beta, (
        f"seed={seed}: shrunk bound not rejected"
    )
