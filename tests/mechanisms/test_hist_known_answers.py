"""Known-answer tests of the histogram thresholds and bounds against independent mpmath arithmetic.

Every expected value here is computed from the closed forms of docs/proofs/histograms.md (§0 F2,
§2.1, §2.2, §4) with mpmath at 50 digits, independently of privagg.noise.distributions.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privagg.mechanisms import histogram as H
from privagg.mechanisms.histogram import (
    StableHistogramParams,
    laplace_histogram,
    noise_scale,
    stable_histogram,
    stable_threshold,
)

mpmath.mp.dps = 50


def _q(t: Fraction) -> mpmath.mpf:
    return mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)


def dl_sf(t: Fraction, k: int) -> mpmath.mpf:
    """P[Z ≥ k] for Z ~ DL(t) (closed form F2)."""
    q = _q(t)
    if k >= 1:
        return q**k / (1 + q)
    return 1 - q ** (1 - k) / (1 + q)


def dl_abs_tail(t: Fraction, k: int) -> mpmath.mpf:
    """P[|Z| > k], k ≥ 0."""
    q = _q(t)
    return 2 * q ** (k + 1) / (1 + q)


def tight_T(t: Fraction, delta: float) -> int:
    k = -int(50 * t) - 10
    while dl_sf(t, k) > mpmath.mpf(delta):
        k += 1
    return max(1, k + 1)


def seed_T(t: Fraction, delta: float) -> int:
    return int(mpmath.ceil(1 + mpmath.mpf(t.numerator) / t.denominator * mpmath.log(2 / mpmath.mpf(delta))))


def all_within(t: Fraction, m: int, beta: float) -> int:
    """Smallest k with P[max of m iid |Z| > k] ≤ β, by exact independence."""
    k = 0
    while 1 - (1 - dl_abs_tail(t, k)) ** m > mpmath.mpf(beta):
        k += 1
    return k


def abs_q(t: Fraction, beta: float) -> int:
    return all_within(t, 1, beta)


# ----------------------------------------------------------------------------------- thresholds


def test_spec_thresholds_at_eps1_delta1e6() -> None:
    assert stable_threshold(1.0, 1e-6, "replace") == 28
    assert stable_threshold(1.0, 1e-6, "replace", "seed") == 31  # ⌈30.02⌉
    # add/remove: the counts get ε_c = 0.9·ε (0.1·ε pays the noisy total), t = 10/9
    assert stable_threshold(1.0, 1e-6, "add_remove") == 16
    assert stable_threshold(1.0, 1e-6, "add_remove", "seed") == 18  # ⌈1 + (10/9)·ln(2e6)⌉ = ⌈17.1⌉
    # the spec's values 15 and 16 are those of counts at ε_c = 1 (t = 1): ε = 10/9
    assert stable_threshold(Fraction(10, 9), 1e-6, "add_remove") == 15
    assert stable_threshold(Fraction(10, 9), 1e-6, "add_remove", "seed") == 16  # ⌈15.5⌉


@pytest.mark.parametrize("epsilon", [0.05, 0.1, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-9, 1e-6, 1e-3, 0.05, 0.3, 0.9])
@pytest.mark.parametrize("neighbors", ["replace", "add_remove"])
def test_thresholds_match_mpmath(epsilon: float, delta: float, neighbors: str) -> None:
    t = StableHistogramParams.build(epsilon, delta, neighbors).scale  # the counts' scale
    # replace-one: 2/ε; add/remove: 1/ε_c with ε_c = (9/10)·ε (default share 0.1 for the total)
    assert t == (Fraction(2) if neighbors == "replace" else Fraction(10, 9)) / Fraction(repr(epsilon))
    T = stable_threshold(epsilon, delta, neighbors, "tight")
    assert T == tight_T(t, delta)
    # T is valid and minimal (unless clamped at 1)
    assert dl_sf(t, T - 1) <= delta
    if T > 1:
        assert dl_sf(t, T - 2) > delta
    Ts = stable_threshold(epsilon, delta, neighbors, "seed")
    assert Ts == seed_T(t, delta)
    assert dl_sf(t, Ts - 1) <= delta / 2  # the seed rule is valid (proof §2.2)
    assert Ts >= T


def test_release_probability_is_the_tail_at_T_minus_1() -> None:
    p = StableHistogramParams.build(1.0, 1e-6, "replace")
    assert p.threshold == 28
    assert p.release_probability == pytest.approx(float(dl_sf(Fraction(2), 27)), rel=1e-12)
    assert p.release_probability <= 1e-6 < float(dl_sf(Fraction(2), 26))


def test_scale_rounds_epsilon_down_as_the_ledger_reads_it() -> None:
    assert noise_scale(0.1, "replace") == Fraction(20)
    assert noise_scale(0.3, "add_remove") == Fraction(10, 3)
    assert noise_scale(Fraction(1, 3), "replace") == Fraction(6)
    assert noise_scale(np.float64(0.5), "replace") == Fraction(4)


# ------------------------------------------------------------------------------ comparison ≥ T


def test_key_with_noisy_count_exactly_T_is_kept_and_T_minus_1_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the noise replaced by zeros the comparison is visible: keep iff count ≥ T (not > T)."""
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))
    T = stable_threshold(1.0, 1e-6)
    data = ["at"] * T + ["below"] * (T - 1) + ["above"] * (T + 1)
    r = stable_histogram(data, epsilon=1.0, delta=1e-6, rng=0)
    assert r.keys.tolist() == ["above", "at"]
    assert r.counts.tolist() == [T + 1, T]


# ---------------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("m", [1, 7, 100, 10_000])
@pytest.mark.parametrize("beta", [0.01, 0.05, 0.3])
def test_laplace_replace_error_bound_matches_mpmath(m: int, beta: float) -> None:
    n = 1000
    r = laplace_histogram(np.arange(n) % m, epsilon=0.7, domain=range(m), rng=1)
    k = all_within(r.params.scale, m, beta)
    assert r.error_bound(beta) == k / n
    assert r.count_error_bound(beta) == k
    # exact coverage of the bound is ≥ 1 − β, and k − 1 would not be enough
    assert 1 - (1 - dl_abs_tail(r.params.scale, k)) ** m <= beta
    if k > 0:
        assert 1 - (1 - dl_abs_tail(r.params.scale, k - 1)) ** m > beta


def test_laplace_other_bin_counts_in_the_number_of_draws() -> None:
    r = laplace_histogram([1, 2, 3, 99], epsilon=1.0, domain=[1, 2, 3], other=True, rng=2)
    assert r.params.bins == 4
    assert r.count_error_bound(0.05) == all_within(r.params.scale, 4, 0.05)
    assert r.other_count is not None and r.total == int(r.counts.sum()) + r.other_count


@pytest.mark.parametrize("beta", [0.05, 0.2])
def test_laplace_add_remove_error_bound_formula(beta: float) -> None:
    m = 50
    data = np.repeat(np.arange(m), 200)
    r = laplace_histogram(data, epsilon=1.0, domain=range(m), neighbors="add_remove", rng=3)
    t = r.params.scale
    assert r.n is None
    k = all_within(t, m, beta / 2)
    from privagg.noise.distributions import DiscreteLaplace

    s = DiscreteLaplace(t).sum_abs_quantile(m, beta / 2)
    assert r.total > s
    assert r.error_bound(beta) == pytest.approx((k + s) / r.total, rel=1e-15)
    np.testing.assert_allclose(r.frequencies, r.counts / r.total, rtol=1e-15)


def test_laplace_add_remove_error_bound_is_infinite_for_a_tiny_total() -> None:
    r = laplace_histogram([], epsilon=0.5, domain=range(100), neighbors="add_remove", rng=4)
    assert r.error_bound(0.05) == float("inf")


@pytest.mark.parametrize("n", [1, 10, 1000, 100_000])
@pytest.mark.parametrize("neighbors_delta", [(1e-6, 0.05), (1e-3, 0.2)])
def test_stable_replace_error_bound_matches_mpmath(n: int, neighbors_delta: tuple[float, float]) -> None:
    delta, beta = neighbors_delta
    r = stable_histogram(np.zeros(n, dtype=np.int64), epsilon=1.0, delta=delta, rng=5)
    t = r.params.scale
    T = tight_T(t, delta)
    k = all_within(t, n, beta)
    assert r.error_bound(beta) == (T - 1 + k) / n
    assert r.count_error_bound(beta) == T - 1 + k


# The stable add/remove bounds (noisy total, split ε and β): test_hist_add_remove_total.py.


@pytest.mark.parametrize("beta", [0.01, 0.1, 0.5])
def test_confidence_interval_half_width_matches_mpmath(beta: float) -> None:
    r = laplace_histogram(np.arange(20), epsilon=0.5, domain=range(20), rng=7)
    a = abs_q(r.params.scale, beta)
    low, high = r.confidence_intervals(beta, unit="count")
    c = r.counts.astype(float)
    np.testing.assert_array_equal(low, np.clip(c - a, 0, 20))
    np.testing.assert_array_equal(high, np.clip(c + a, 0, 20))
    flow, fhigh = r.confidence_intervals(beta)
    np.testing.assert_array_equal(flow, low / 20)
    np.testing.assert_array_equal(fhigh, high / 20)


def test_privacy_loss_charged_is_what_the_noise_gives() -> None:
    """ε charged = sensitivity / scale exactly; δ charged ≥ the float δ the threshold used."""
    p = StableHistogramParams.build(Fraction(1, 3), 0.1, "replace")
    assert p.privacy_loss.epsilon == Fraction(1, 3) and p.privacy_loss.delta >= Fraction(0.1)
    lap = H.LaplaceHistogramParams.build(0.1, "add_remove", 5)
    assert lap.scale == 10 and lap.privacy_loss.epsilon == Fraction(1, 10) and lap.privacy_loss.is_pure
