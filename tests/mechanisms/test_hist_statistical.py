"""Statistical tests of the histogram mechanisms, each with a negative control.

Every test draws from a fixed, printed seed. Each check is a Wilson interval (two-sided, or
one-sided where stated) or a chi-square test (privagg.testing) at level α = 1e-6, so this file
fails spuriously with probability < 3e-5 (about 30 checks). Each harness is also run on a deliberately
broken mechanism (threshold − 1, noise scale × 0.8 or × 1.25, bound halved, intervals narrowed) and
must reject it. Bounds whose looseness sampling cannot see (the add/remove Laplace bound and
intervals) are also compared with their exact formula, computed independently here.
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


# ------------------------------------------------------------------ Laplace under add/remove
# Independent references (closed forms and an exact convolution, written here, not privagg's).


def dl_abs_quantile(scale: float, m: int, beta: float) -> int:
    """Smallest k >= 0 with P[max of m iid |Z_i| <= k] >= 1 − β: P[|Z| > k] = 2q^{k+1}/(1 + q)."""
    with mpmath.workdps(50):
        q = mpmath.exp(-1 / mpmath.mpf(scale))
        per_draw = -mpmath.expm1(mpmath.log1p(-mpmath.mpf(beta)) / m)
        return max(0, int(mpmath.ceil(mpmath.log(per_draw * (1 + q) / 2) / mpmath.log(q))) - 1)


def dl_sum_pmf(scale: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact law of Z_1 + … + Z_m (truncated at |Z_i| <= 60t: mass lost < 1e-24), by convolution."""
    q = math.exp(-1 / scale)
    width = int(60 * scale)
    ks = np.arange(-width, width + 1)
    one = (1 - q) / (1 + q) * q ** np.abs(ks)
    law = np.array([1.0])
    for _ in range(m):
        law = np.convolve(law, one)
    return np.arange(law.size) - m * width, law


def dl_sum_exact_quantile(scale: float, m: int, beta: float) -> int:
    """Smallest s with P[|ΣZ| > s] <= β, exactly (up to float rounding of the convolution)."""
    support, law = dl_sum_pmf(scale, m)
    tail = np.array([law[np.abs(support) > s].sum() for s in range(int(support.max()) + 1)])
    return int(np.argmax(tail <= beta))


def dl_sum_chernoff_quantile(scale: float, m: int, beta: float) -> int:
    """Smallest k with min_λ 2e^{−λ(k+1)} M(λ)^m <= β, M the MGF of Z (the documented formula)."""
    from scipy.optimize import minimize_scalar

    q = math.exp(-1 / scale)

    def log_bound(lam: float, k: int) -> float:
        return (math.log(2) - lam * (k + 1) + m * (2 * math.log1p(-q) - math.log1p(-q * math.exp(lam))
                                                 - math.log1p(-q * math.exp(-lam))))

    k = 0
    while True:
        best = minimize_scalar(lambda lam: log_bound(lam, k), bounds=(1e-9, 1 / scale - 1e-9),
                               method="bounded", options={"xatol": 1e-12})
        if best.fun <= math.log(beta):
            return k
        k += 1


@pytest.mark.parametrize(("m", "epsilon", "beta"), [(30, 1.0, 0.1), (5, 1.0, 0.01), (30, 0.5, 0.05)])
def test_laplace_add_remove_frequency_bound_is_the_exact_formula(m: int, epsilon: float, beta: float) -> None:
    """error_bound(β) = (k_m(β/2) + s)/N̂ with k from the closed form and s the Chernoff bound on
    |ΣZ| at β/2 (between the exact quantile of |ΣZ| and the Chernoff value + 1). Deterministic:
    a bound with the β split dropped, without s, or 2× loose fails here."""
    data = np.repeat(np.arange(m), 50)
    r = laplace_histogram(data, epsilon=epsilon, domain=range(m), neighbors="add_remove", rng=4)
    t = 1 / epsilon
    k = dl_abs_quantile(t, m, beta / 2)
    bound = r.error_bound(beta)
    s = round(bound * r.total) - k
    assert bound == (k + s) / r.total
    assert dl_sum_exact_quantile(t, m, beta / 2) <= s  # valid: P[|ΣZ| > s] <= β/2
    assert dl_sum_chernoff_quantile(t, m, beta / 2) <= s <= dl_sum_chernoff_quantile(t, m, beta / 2) + 1
    # N̂ <= s: no finite bound (the denominator is not known to be positive).
    empty = laplace_histogram([], epsilon=epsilon, domain=range(m), neighbors="add_remove", rng=4)
    assert empty.total <= s and empty.error_bound(beta) == math.inf


def test_laplace_add_remove_bound_parts_cover_exactly(scaled_noise) -> None:
    """The two events the add/remove frequency bound rests on, each against its exact
    probability (two-sided Wilson, α = 1e-6 each): max|Z_i| <= k_m(β/2) (closed form) and
    |ΣZ| <= s (exact convolution); and the frequency bound itself holds in >= 1 − β of the
    trials (one-sided). Negative control: noise × 0.8 and × 1.25 are rejected."""
    seed, beta, trials, m = 1618, 0.3, 3000, 30
    print(f"seed={seed}")
    true = np.full(m, 3)
    data = np.repeat(np.arange(m), true)
    k = dl_abs_quantile(1.0, m, beta / 2)
    s = H._sum_abs_quantile(Fraction(1), m, beta / 2)
    support, law = dl_sum_pmf(1.0, m)
    exact_max = (1 - 2 * math.exp(-(k + 1)) / (1 + math.exp(-1))) ** m
    exact_sum = float(law[np.abs(support) <= s].sum())

    def run() -> tuple[int, int, int]:
        rng = np.random.default_rng(seed)
        ok_max = ok_sum = ok_freq = 0
        for _ in range(trials):
            r = laplace_histogram(data, epsilon=1.0, domain=range(m), neighbors="add_remove", rng=rng)
            z = r.counts - true
            ok_max += bool(np.abs(z).max() <= k)
            ok_sum += bool(abs(int(z.sum())) <= s)
            ok_freq += bool(np.abs(r.frequencies - true / true.sum()).max() <= r.error_bound(beta))
        return ok_max, ok_sum, ok_freq

    def matches(ok: int, exact: float) -> bool:
        lo, hi = wilson(ok, trials)
        return lo <= exact <= hi

    ok_max, ok_sum, ok_freq = run()
    assert matches(ok_max, exact_max), f"seed={seed}: {ok_max}/{trials} vs {exact_max}"
    assert matches(ok_sum, exact_sum), f"seed={seed}: {ok_sum}/{trials} vs {exact_sum}"
    assert wilson_upper(ok_freq, trials, ALPHA) >= 1 - beta, f"seed={seed}: {ok_freq}/{trials}"
    for factor in (Fraction(4, 5), Fraction(5, 4)):
        scaled_noise(factor)
        bad_max, bad_sum, _ = run()
        assert not (matches(bad_max, exact_max) and matches(bad_sum, exact_sum)), (
            f"seed={seed}: scale×{factor} not detected ({bad_max}, {bad_sum})"
        )


# ---- per-key confidence intervals under add/remove (histogram.py, confidence_intervals)


@pytest.mark.parametrize("other", [False, True])
def test_laplace_add_remove_intervals_known_answers(monkeypatch: pytest.MonkeyPatch, other: bool) -> None:
    """Noise-free: [(c − a)/(N̂ + s), (c + a)/(N̂ − s)] clipped to [0, 1], with a the per-key
    quantile at β/2 (closed form) and s the bound on |ΣZ| over all bins at β/2; [0, 1] when
    N̂ <= s."""
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))
    beta = 0.1
    counts = np.array([0, 1, 5, 40, 200, 754])
    data = np.concatenate([np.repeat(np.arange(6), counts), np.full(17, 99)])  # 17 outside
    r = laplace_histogram(data, epsilon=1.0, domain=range(6), neighbors="add_remove", other=other, rng=0)
    total = int(counts.sum()) + (17 if other else 0)
    assert r.total == total
    a = dl_abs_quantile(1.0, 1, beta / 2)
    s = H._sum_abs_quantile(Fraction(1), 6 + int(other), beta / 2)
    assert dl_sum_exact_quantile(1.0, 6 + int(other), beta / 2) <= s
    low, high = r.confidence_intervals(beta)
    np.testing.assert_array_equal(low, np.clip((counts - a) / (total + s), 0, 1))
    np.testing.assert_array_equal(high, np.clip((counts + a) / (total - s), 0, 1))
    assert low[0] == 0.0 and 0 < high[0] < 1 and (low[3:] > 0).all() and (high > low).all()
    c_low, c_high = r.confidence_intervals(beta, unit="count")  # counts: ± a at β, no total
    a_count = dl_abs_quantile(1.0, 1, beta)
    np.testing.assert_array_equal(c_low, np.clip(counts - a_count, 0, None))
    np.testing.assert_array_equal(c_high, counts + a_count)
    # The fallback: a noisy total <= s gives [0, 1] for every key.
    few = laplace_histogram([0, 1, 1], epsilon=1.0, domain=range(6), neighbors="add_remove", rng=0)
    assert few.total == 3 <= s
    low, high = few.confidence_intervals(beta)
    assert low.tolist() == [0.0] * 6 and high.tolist() == [1.0] * 6


def test_laplace_add_remove_intervals_cover_and_narrowed_ones_do_not() -> None:
    """Per-key coverage >= 1 − β, one key per trial (independent trials), one-sided Wilson
    (α = 1e-6). Negative control: the same intervals narrowed to a quarter of their width
    around the estimate must show a miss rate above β (the collapsed, point-estimate interval
    misses even more). What this can detect: intervals that undercover. It cannot see intervals
    that are too wide: at this seed the miss rate is 38/1500 ≈ 2.5 % against β = 0.2 (the β
    split and the Chernoff s are conservative); their exact width is pinned by the known answers
    above."""
    seed, beta, trials, m = 4242, 0.2, 1500, 12
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    true = np.arange(1, m + 1) * 4
    data = np.repeat(np.arange(m), true)
    truth = true / true.sum()
    miss = miss_narrow = 0
    for i in range(trials):
        r = laplace_histogram(data, epsilon=0.5, domain=range(m), neighbors="add_remove", rng=rng)
        low, high = r.confidence_intervals(beta)
        j = i % m
        miss += not low[j] <= truth[j] <= high[j]
        mid, half = r.frequencies[j], (high[j] - low[j]) / 8
        miss_narrow += not mid - half <= truth[j] <= mid + half
    assert wilson(miss, trials)[0] <= beta, f"seed={seed}: {miss}/{trials} misses"
    assert wilson(miss_narrow, trials)[0] > beta, f"seed={seed}: narrowed {miss_narrow}/{trials}"
