"""The exact (ε, δ) calibration of Gaussian thresholding (docs/proofs/histograms.md §11.1;
``privagg.mechanisms._gaussian_profile``): known answers, the certified profile against
independent direct summations, minimality of σ² and T, and audits with negative controls.

Statistical tests: fixed printed seeds; each one-sided at z = 4 (false-failure rate ≤ 3.2·10⁻⁵ per
test); every audit has a negative control (σ² understated, threshold lowered) that must be detected.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import optimize, stats

from privagg.mechanisms import _gaussian_profile as G
from privagg.mechanisms import histogram as H


def _build(eps, delta, l0, linf, share=0):
    return H.StableHistogramParams.build(eps, delta, "add_remove", bounds=(l0, linf), noise="gaussian",
                                         total_epsilon_share=share)


def _analytic_sigma(eps: float, delta: float, l2: float) -> float:
    """Balle & Wang 2018 (analytic Gaussian mechanism, continuous): the σ with
    Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) = δ (an independent transcription, scipy)."""
    def gap(s: float) -> float:
        a, b = l2 / (2 * s), eps * s / l2
        return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b) - delta
    return optimize.brentq(gap, 0.01 * l2, 100 * l2, xtol=1e-12)


def _dg_tail(sigma2: Fraction, k: mpmath.mpf) -> mpmath.mpf:
    """P[Z > k] for Z ~ N_Z(0, σ²), 60-digit direct sums."""
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    w = int(abs(k) + 60 * mpmath.sqrt(s2) + 10)
    term = lambda j: mpmath.exp(-mpmath.mpf(j) ** 2 / (2 * s2))  # noqa: E731
    total = mpmath.fsum(term(j) for j in range(-w, w + 1))
    return mpmath.fsum(term(j) for j in range(int(mpmath.floor(k)) + 1, w + 1)) / total


@pytest.mark.parametrize(("eps", "delta", "l0", "linf", "share", "t"),
                         [(1.0, 1e-6, 3, 2, 0, 76), (1.0, 1e-6, 16, 1, None, 100), (1.0, 1e-6, 1, 1, 0, 22),
                          (0.5, 1e-5, 2, 3, 0, None)])
def test_exact_calibration_known_answers(eps, delta, l0, linf, share, t):
    """σ within 1 % of the continuous analytic Gaussian's σ at (ε_c, δ, Δ₂ = √ℓ0·ℓ∞) (the discrete one
    is slightly less private per σ, never much), T the smallest with every mix certified ≤ δ, and
    σ² the smallest (2⁻¹² relative) whose noise part is certified ≤ δ."""
    p = _build(eps, delta, l0, linf, share)
    assert p.gaussian_calibration == "exact"
    if t is not None:
        assert p.threshold == t
    eps_c = p.counts_epsilon
    assert eps_c == p.gaussian_epsilon and p.epsilon_exact == eps_c + p.total_epsilon <= Fraction(eps)
    ratio = math.sqrt(p.sigma2) / _analytic_sigma(float(eps_c), delta, math.sqrt(l0) * linf)
    print("sigma / analytic", ratio)
    assert 0.999 <= ratio <= 1.01
    dlt = Fraction(repr(delta))
    assert G.certified_delta(p.sigma2, p.threshold, eps_c, l0, linf, dlt) <= dlt
    assert G.certified_delta(p.sigma2, p.threshold - 1, eps_c, l0, linf, dlt) is None  # T − 1 fails
    assert max(p.gaussian_delta, Fraction(p.threshold_delta)) <= dlt
    smaller = p.sigma2 * (1 - Fraction(1, 1 << 10))
    assert G.certified_delta(smaller, 10**6, eps_c, l0, linf, dlt) is None  # the noise part alone fails
    assert p.rho == Fraction(l0 * linf * linf) / (2 * p.sigma2)


def test_regression_sigma_near_analytic_and_lower_threshold_at_3_2():
    """The zCDP calibration (commit 261742a) had σ = 16.17 (1.11× the analytic Gaussian's at (1, 10⁻⁶),
    the δ halved) and T = 86 at ε = 1, δ = 10⁻⁶, ℓ0 = 3, ℓ∞ = 2, share 0; now ≤ 1.01× and T = 76."""
    p = _build(1.0, 1e-6, 3, 2)
    assert math.sqrt(p.sigma2) <= 1.01 * _analytic_sigma(1.0, 1e-6, 2 * math.sqrt(3))
    assert p.threshold == 76


def test_profile_bound_against_the_exact_1d_profile():
    """One coordinate, shift Δ ∈ {1, 2, 3}: CKS 2020 (Thm 7) δ = P[Z > εσ²/Δ − Δ/2] − e^ε P[Z > εσ²/Δ + Δ/2]
    (60-digit direct sums); the certified bound is ≥ it and within 10⁻⁶ relative."""
    sigma2, eps = Fraction(2002, 7), Fraction(1, 10)
    nodes = G.profile_bounds(sigma2, 1, 3, 80)
    with mpmath.workdps(60):
        for node in nodes[1]:
            d = node.s2 ** 0.5
            e, s2 = mpmath.mpf(eps.numerator) / eps.denominator, mpmath.mpf(sigma2.numerator) / sigma2.denominator
            x, half = e * s2 / d, mpmath.mpf(d) / 2
            exact = _dg_tail(sigma2, x - half) - mpmath.exp(e) * _dg_tail(sigma2, x + half)
            bound = node.hockey(G._float_down(G.exp_down(eps)))
            print(d, float(exact), bound)
            assert exact <= bound <= exact * (1 + 1e-6) + 1e-30


def test_profile_bound_against_direct_summation_2d():
    """Two coordinates, every shift multiset over {1, 2}: sup_E P(E) − e^ε Q(E) = Σ_x (p(x) − e^ε q(x))₊
    summed directly over the grid (float64, no use of the ⟨s, x⟩ reduction); the certified bound
    is ≥ it (up to the summation's 10⁻¹² relative) and within 10⁻⁶ relative."""
    sigma2, eps = Fraction(214), Fraction(1, 4)
    nodes = G.profile_bounds(sigma2, 2, 2, 80)
    r = 200
    z = np.arange(-r, r + 1, dtype=np.float64)
    logw = -z * z / (2 * float(sigma2))
    logn = math.log(np.exp(logw).sum())
    for node, s in zip(nodes[2], itertools.combinations_with_replacement((1, 2), 2), strict=True):
        assert node.s2 == s[0] ** 2 + s[1] ** 2
        lq = (logw - logn)[:, None] + (logw - logn)[None, :]
        shifted = [-(z - si) ** 2 / (2 * float(sigma2)) - logn for si in s]
        lp = shifted[0][:, None] + shifted[1][None, :]
        direct = float(np.maximum(np.exp(lp) - math.exp(0.25) * np.exp(lq), 0).sum())
        bound = node.hockey(G._float_down(G.exp_down(eps)))
        print(s, direct, bound)
        assert direct * (1 - 1e-12) <= bound <= direct * (1 + 1e-6)


@pytest.mark.parametrize("understate", [False, True])
def test_audit_noise_part_of_changed_keys(understate):
    """A unit raising ℓ0 = 3 present keys (count 10⁶) by ℓ∞ = 2 each, at ε = 0.5, δ = 0.05 (share 0):
    on 300,000 copies per side, the optimal event E = {Σ 2(noisy − 10⁶) ≥ v*} (v* from σ²) gives
    P'(E) − e^ε P(E), which must not exceed δ by 4 standard errors. Negative control: σ² understated
    to 0.7× (H ≈ 0.08) must be detected."""
    seed = 4242 + understate
    print("seed", seed, "understate", understate)
    eps, delta, l0, linf, n, c = 0.5, 0.05, 3, 2, 300_000, 10**6
    p = _build(eps, delta, l0, linf)
    assert p.gaussian_calibration == "exact"
    if understate:
        p = dataclasses.replace(p, sigma2=p.sigma2 * Fraction(7, 10))
    gen = np.random.default_rng(seed)
    v_star = math.ceil(float(p.sigma2) * eps + l0 * linf * linf / 2)
    out = []
    for shift in (0, linf):
        noisy, keep = H.stable_noise_threshold(p, np.full(n * l0, c + shift), gen)
        assert keep.all()
        w = (linf * (noisy - c)).reshape(n, l0).sum(axis=1)
        out.append(float(np.mean(w >= v_star)))
    q_hat, p_hat = out
    est = p_hat - math.exp(eps) * q_hat
    se = math.sqrt(p_hat * (1 - p_hat) / n + math.exp(2 * eps) * q_hat * (1 - q_hat) / n)
    print("estimate", est, "se", se, "gaussian_delta", float(p.gaussian_delta))
    assert (est - 4 * se > delta) == understate


def test_fallback_is_the_zcdp_calibration():
    """Where the exact path does not apply (ℓ0 = 64: too much work), the zCDP calibration is used,
    with its δ/2 + δ/2 split."""
    p = _build(1.0, 1e-6, 64, 1, None)
    assert p.gaussian_calibration == "zcdp"
    assert p.gaussian_delta + Fraction(p.threshold_delta) <= H._charged_delta(1e-6)
    assert not G.feasible(64, 1, Fraction(1, 10**6), p.sigma2)
    assert G.feasible(3, 2, Fraction(1, 10**6), p.sigma2)


# ------------------------------------------------------------------ laplace_histogram(noise="gaussian"), §10.1


def _lap(eps, delta, l0, linf, neighbors="add_remove"):
    return H.LaplaceHistogramParams.build(eps, neighbors, 10, bounds=(l0, linf), noise="gaussian", delta=delta)


@pytest.mark.parametrize(("l0", "linf"), [(1, 1), (3, 2), (16, 1)])
def test_laplace_histogram_exact_known_answers(l0, linf):
    """Add/remove: σ² is the exact profile's (the same minimal σ² as the stable histogram's noise
    part at share 0: both are the smallest σ² with every shift certified ≤ δ at ε), 6–8 % below
    the zCDP calibration's σ (§10); the charge is (ε, δ) as given. Replace-one stays zCDP."""
    p = _lap(1.0, 1e-6, l0, linf)
    zcdp = H._gaussian_calibration(1.0, 1e-6, "add_remove", l0, linf, "laplace_histogram")[0]
    assert p.gaussian_calibration == "exact"
    assert p.sigma2 == _build(1.0, 1e-6, l0, linf).sigma2
    assert 0.92 < math.sqrt(p.sigma2 / zcdp) < 0.95
    assert p.privacy_loss.epsilon == 1 and p.privacy_loss.delta == Fraction(1, 10**6)
    assert p.rho == Fraction(l0 * linf * linf) / (2 * p.sigma2)
    assert _lap(1.0, 1e-6, l0, linf, "replace").gaussian_calibration == "zcdp"
    assert _lap(1.0, 1e-6, 64, 1).gaussian_calibration == "zcdp"  # beyond the exact path's work limit


def test_laplace_histogram_exact_sigma_is_certified_and_minimal():
    """The certified profile at σ² is ≤ δ; at σ²·(1 − 2⁻⁹) it is above δ (σ² is minimal up to the
    bisection's 2⁻¹² grid): the certificate is not loose by more than the search step."""
    eps, delta, l0, linf = Fraction(1), Fraction(1, 10**6), 3, 2
    p = _lap(1.0, 1e-6, l0, linf)
    cut = G._cut_bits(delta, l0)
    big_lf = G._float_down(G.exp_down(eps))
    assert G._evaluate(p.sigma2, l0, linf, cut, big_lf)[1][l0] <= delta
    smaller = p.sigma2 * (1 - Fraction(1, 2**9))
    assert G._evaluate(smaller, l0, linf, cut, big_lf)[1][l0] > delta


@pytest.mark.parametrize("understate", [False, True])
def test_laplace_histogram_audit_of_a_unit_shift(understate):
    """The release itself (laplace_histogram_from_counts over a public domain of ℓ0 = 3 keys per
    copy): a unit raising all 3 keys by ℓ∞ = 2, at ε = 0.5, δ = 0.05, add/remove; 300,000 copies per
    side; the optimal event {Σ 2(noisy − c) ≥ v*} gives P'(E) − e^ε P(E), which must not exceed δ by
    4 standard errors. Negative control: σ² understated to 0.7× must be detected."""
    from privagg.engines.counting import KeyCounts

    seed = 5353 + understate
    print("seed", seed, "understate", understate)
    eps, delta, l0, linf, n, c = 0.5, 0.05, 3, 2, 300_000, 1000
    p = _lap(eps, delta, l0, linf)
    assert p.gaussian_calibration == "exact"
    sigma2 = p.sigma2 * (Fraction(7, 10) if understate else 1)
    v_star = math.ceil(float(sigma2) * eps + l0 * linf * linf / 2)
    domain = np.arange(n * l0)
    out = []
    gen = np.random.default_rng(seed)
    import unittest.mock

    for shift in (0, linf):
        kc = KeyCounts(keys=domain, counts=np.full(n * l0, c + shift, dtype=np.int64), n=n * l0 * (c + shift))
        with unittest.mock.patch.object(H.LaplaceHistogramParams, "build",
                                        return_value=dataclasses.replace(p, bins=n * l0, sigma2=sigma2)):
            r = H.laplace_histogram_from_counts(kc, epsilon=eps, domain=domain, max_keys_per_unit=l0,
                                                max_rows_per_key=linf, noise="gaussian", delta=delta, rng=gen)
        w = (linf * (np.asarray(r.counts) - c)).reshape(n, l0).sum(axis=1)
        out.append(float(np.mean(w >= v_star)))
    q_hat, p_hat = out
    est = p_hat - math.exp(eps) * q_hat
    se = math.sqrt(p_hat * (1 - p_hat) / n + math.exp(2 * eps) * q_hat * (1 - q_hat) / n)
    print("estimate", est, "se", se)
    assert (est - 4 * se > delta) == understate
