"""Key selection at user level (issue 12 item 3): selection="optimal" for ℓ0 > 1 and the Gaussian
thresholding option noise="gaussian" of the stable histogram. Proofs: docs/proofs/histograms.md §8, §11.

Statistical checks use fixed, printed seeds. Level: Wilson intervals at α = 1e-6 each (the optimal
audit uses 40 of them, the Gaussian audit 1) and p-value thresholds 1e-4 (2 binomial tests, 1
chi-square variance test): this file fails spuriously with probability < 4e-4. Every harness runs
on a deliberately broken mechanism too (ℓ0 understated by one; row counts instead of distinct units;
ℓ0 not divided; Laplace noise where Gaussian is claimed) and must reject it.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import privagg
import privagg.mechanisms.partition_selection as PS
from privagg.accounting import zcdp_to_epsilon
from privagg.engines.counting import KeyCounts
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.testing import RecordingLedger, unit_copies, wilson_interval

ALPHA = 1e-6


# ------------------------------------------------------------------ selection="optimal", ℓ0 > 1


def test_optimal_l0_gt1_keeps_by_distinct_units_at_per_key_budget():
    """ℓ0 = 3, ℓ∞ = 2: every key has n = 36 distinct units with 2 rows each (row count 72). The
    keep rate must be p(36) at (ε_c/(2ℓ0), δ/ℓ0) = (3/20, δ/3). Negative controls: p on the row
    count (72) and p at (ε_c/2, δ) (ℓ0 not divided) are rejected by the same test."""
    seed = 4242
    print("seed", seed)
    eps, delta, l0, linf, n, copies = 1.0, 1e-3, 3, 2, 36, 2000
    keys, units = unit_copies(np.full(copies, n), l0, rows=linf)
    ledger = RecordingLedger()
    r = privagg.stable_histogram(keys, units=units, epsilon=eps, delta=delta, max_keys_per_unit=l0,
                                 max_rows_per_key=linf, selection="optimal", rng=seed, ledger=ledger)
    e_sel, d_sel = Fraction(9, 10) / (2 * l0), Fraction(delta) / l0
    p = PS.probability_of_keep(n, e_sel, d_sel)
    assert 0.2 < p < 0.8
    kept, trials = len(r.keys), copies * l0
    assert stats.binomtest(kept, trials, p).pvalue > 1e-4, (kept, trials, p)
    for wrong in (PS.probability_of_keep(n * linf, e_sel, d_sel), PS.probability_of_keep(n, e_sel * l0, d_sel * l0)):
        assert stats.binomtest(kept, trials, wrong).pvalue < 1e-4, wrong
    # truthful fields: no threshold, the counts' own law, the per-key budget in the ledger
    assert r.selection == "optimal" and r.threshold == 0
    assert r.counts_law.scale == 2 * r.params.scale == Fraction(2 * l0 * linf) / Fraction(9, 10)
    assert r.scale == float(r.counts_law.scale)
    entry = ledger.charges[-1][1]
    assert entry["selection"] == "optimal" and entry["threshold"] is None
    assert Fraction(entry["selection_epsilon_per_key"]) == e_sel
    assert Fraction(entry["selection_delta_per_key"]) == d_sel
    assert r.privacy_loss.epsilon <= eps and float(r.privacy_loss.delta) == pytest.approx(delta)
    from privagg.cli._render import release_payload

    j = release_payload(r, beta=0.05)
    assert j["noise"] == "discrete_laplace" and j["scale"] == float(Fraction(2 * l0 * linf) / Fraction(9, 10))
    assert j["error_bound"] is None and j["sigma2"] is None  # no threshold bounds the suppressed keys
    noisy = np.asarray(r.counts) - n * linf  # the kept keys' counts: bounded count 72 + DL(2ℓ0ℓ∞/ε_c)
    assert abs(float(np.median(noisy))) <= 3


@pytest.mark.parametrize("understate", [False, True])
def test_optimal_audit_neighbouring_units(monkeypatch, understate):
    """Audit of the selection on neighbouring data: copy c's two keys have n − 1 units in D and n
    in D' (one more unit holding both), n = 4..13, 3000 copies per n (independent trials of one
    neighbouring pair each: the keys of other copies are independent of them). The selection is
    (ε_s, δ)-DP with ε_s = ε_c/2, so for F = "neither key kept" and its complement S
      P_D[F] ≤ e^{ε_s} P_D'[F] + δ and P_D'[S] ≤ e^{ε_s} P_D[S] + δ;
    no Wilson-interval evidence of a violation is allowed for any n. Negative control: the per-key
    budget split over ℓ0 − 1 keys instead of ℓ0 (ℓ0 understated by one) must show a violation."""
    seed = 515 + understate
    print("seed", seed, "understate", understate)
    eps, delta, l0 = 3.0, 1e-3, 2
    e_s = float(Fraction(27, 10) / 2)
    if understate:
        orig = PS.select
        monkeypatch.setattr(PS, "select", lambda c, e, d, g: orig(c, e * l0 / (l0 - 1), d * l0 / (l0 - 1), g))
    ns = np.arange(4, 14)
    per = 3000
    n_of_copy = np.repeat(ns, per)
    rates = {}
    for extra in (0, 1):  # D: n − 1 units per copy; D': n
        keys, units = unit_copies(n_of_copy - 1 + extra, l0)
        r = privagg.stable_histogram(keys, units=units, epsilon=eps, delta=delta, max_keys_per_unit=l0,
                                     selection="optimal", rng=seed + 10 * extra)
        some = np.zeros(n_of_copy.size, dtype=bool)
        some[np.unique(np.asarray(r.keys, dtype=np.int64) // l0)] = True
        rates[extra] = [int(some[n_of_copy == n].sum()) for n in ns]
    violated = False
    for i, n in enumerate(ns):
        s_d, s_d1 = rates[0][i], rates[1][i]  # copies with some key kept, on D and on D'
        lo_fd, _ = wilson_interval(per - s_d, per, ALPHA)
        _, hi_fd1 = wilson_interval(per - s_d1, per, ALPHA)
        lo_sd1, _ = wilson_interval(s_d1, per, ALPHA)
        _, hi_sd = wilson_interval(s_d, per, ALPHA)
        bad = lo_fd > math.exp(e_s) * hi_fd1 + delta or lo_sd1 > math.exp(e_s) * hi_sd + delta
        print(n, s_d, s_d1, bad)
        violated |= bad
    assert violated == understate


def test_optimal_selection_validates_before_the_charge():
    k, u = np.arange(100) % 7, np.arange(100)
    ledger = RecordingLedger()
    with pytest.raises(ParameterError, match="epsilon"):  # ε_c/(2ℓ0) below the table's EPS_MIN
        privagg.stable_histogram(k, units=u, max_keys_per_unit=1 << 12, epsilon=1.0, delta=1e-6,
                                 selection="optimal", ledger=ledger)
    assert ledger.charges == []
    with pytest.raises(ParameterError, match="noise"):
        privagg.stable_histogram(k, units=u, max_keys_per_unit=2, epsilon=1.0, delta=1e-6, selection="optimal",
                                 noise="gaussian")


# ------------------------------------------------------------------ noise="gaussian"


def _dg_sf(sigma2: Fraction, k: int) -> mpmath.mpf:
    """P[Z ≥ k], Z ~ N_Z(0, σ²): direct sums with 60 digits (an independent transcription)."""
    with mpmath.workdps(60):
        s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
        w = int(abs(k) + 60 * mpmath.sqrt(s2) + 10)

        def term(j: int) -> mpmath.mpf:
            return mpmath.exp(-mpmath.mpf(j) ** 2 / (2 * s2))

        total = mpmath.fsum(term(j) for j in range(-w, w + 1))
        return mpmath.fsum(term(j) for j in range(k, w + 1)) / total


@pytest.mark.parametrize(("eps", "delta", "l0", "linf", "expected_t"),
                         [(1.0, 1e-6, 16, 1, 114), (1.0, 1e-6, 3, 2, None), (0.5, 1e-5, 64, 1, None)])
def test_gaussian_threshold_known_answers(monkeypatch, eps, delta, l0, linf, expected_t):
    """The zCDP calibration (§11; the fallback of the exact one, forced here)."""
    from privagg.mechanisms import _gaussian_profile

    monkeypatch.setattr(_gaussian_profile, "calibrate", lambda *a: None)
    p = H.StableHistogramParams.build(eps, delta, "add_remove", bounds=(l0, linf), noise="gaussian")
    assert p.gaussian_calibration == "zcdp"
    if expected_t is not None:
        assert p.threshold == expected_t
    t, d_t = p.threshold, Fraction(p.threshold_delta)
    # T is the smallest integer with 1 − (1 − P[Z ≥ T − ℓ∞])^ℓ0 ≤ δ_T (independent sums)
    q = 1 - (1 - _dg_sf(p.sigma2, t - linf)) ** l0
    q_below = 1 - (1 - _dg_sf(p.sigma2, t - 1 - linf)) ** l0
    assert q <= mpmath.mpf(d_t.numerator) / d_t.denominator < q_below
    # the δ split: δ_g (conversion) + δ_T (threshold) ≤ the charged δ, each about δ/2
    assert p.gaussian_delta + d_t <= H._charged_delta(delta)
    assert float(p.gaussian_delta) == pytest.approx(delta / 2) and float(d_t) == pytest.approx(delta / 2)
    # ρ from σ² with Δ₂² = ℓ0ℓ∞²; ε_g certified ≤ ε_c = (1 − 0.1)ε; the total ≤ ε
    assert p.rho == Fraction(l0 * linf * linf) / (2 * p.sigma2)
    eps_c = 1 / H._split_scales(eps, Fraction(1, 10), "stable_histogram")[0]
    assert p.gaussian_epsilon == min(zcdp_to_epsilon(p.rho, p.gaussian_delta), p.gaussian_epsilon)
    assert zcdp_to_epsilon(p.rho, p.gaussian_delta) <= eps_c
    # and not wasteful: the simple bound ρ + 2√(ρ ln(1/δ_g)) already reaches 0.99 ε_c
    r_, lnd = float(p.rho), math.log(1 / float(p.gaussian_delta))
    assert r_ + 2 * math.sqrt(r_ * lnd) >= 0.99 * float(eps_c)
    assert p.epsilon_exact == p.gaussian_epsilon + p.total_epsilon <= Fraction(eps)
    assert p.scale >= Fraction(math.sqrt(p.sigma2))


def test_gaussian_beats_laplace_threshold_at_large_l0():
    lap = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(16, 1))
    gau = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(16, 1), noise="gaussian")
    assert (lap.threshold, gau.threshold) == (285, 100)


@pytest.mark.parametrize("lowered", [False, True])
def test_gaussian_audit_new_keys_of_one_unit(lowered):
    """D' adds units that each create ℓ0 = 4 new keys with ℓ∞ = 2 rows (impossible on D): the rate
    of "one of its new keys is released" must not be significantly above δ (Wilson lower bound,
    p-threshold 1e-4). Negative control: the threshold lowered by one (q = 0.0549 > δ = 0.05 there)
    must be detected."""
    seed = 909 + lowered
    print("seed", seed, "lowered", lowered)
    eps, delta, l0, linf, m = 1.0, 0.05, 4, 2, 200_000
    params = H.StableHistogramParams.build(eps, delta, "add_remove", bounds=(l0, linf), noise="gaussian")
    assert params.gaussian_calibration == "exact" and params.threshold == 16
    if lowered:
        params = dataclasses.replace(params, threshold=params.threshold - 1)
    _, keep = H.stable_noise_threshold(params, np.full(m * l0, linf), np.random.default_rng(seed))
    hits = int(keep.reshape(m, l0).any(axis=1).sum())
    lo, _ = wilson_interval(hits, m, ALPHA)
    print("threshold", params.threshold, "rate", hits / m, "delta_T", params.threshold_delta)
    assert (lo > delta) == lowered


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_gaussian_counts_have_the_discrete_gaussian_variance(noise):
    """20,000 keys far above T: noisy − bounded count has variance σ² (chi-square interval,
    p-threshold 1e-4). Negative control: the Laplace release at the same (ε, δ, ℓ0) is rejected."""
    seed = 31337
    print("seed", seed, noise)
    k = 20000
    kc = KeyCounts(keys=np.arange(k), counts=np.full(k, 10_000, dtype=np.int64), n=k * 10_000)
    r = H.stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, max_keys_per_unit=16, max_rows_per_key=1,
                                       rng=seed, noise=noise)
    assert len(r.keys) == k
    z = np.asarray(r.counts, dtype=np.float64) - 10_000
    s2 = float(H.StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(16, 1), noise="gaussian").sigma2)
    stat = float(np.sum(z**2) / s2)  # ~ χ²_k if Var = σ² (mean 0 known)
    lo, hi = stats.chi2.ppf([0.5e-4, 1 - 0.5e-4], k)
    assert (lo <= stat <= hi) == (noise == "gaussian"), stat / k


def test_gaussian_release_fields_and_ledger_are_truthful():
    keys, units = unit_copies(np.full(40, 250), 16)
    ledger = RecordingLedger()
    r = privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, max_keys_per_unit=16,
                                 noise="gaussian", rng=5, ledger=ledger)
    p = r.params
    assert p.noise == "gaussian" and isinstance(p.law, H.DiscreteGaussian) and r._law == p.law
    assert r.threshold == p.threshold == 100 and r.scale == float(p.scale) >= math.sqrt(p.sigma2)
    assert len(r.keys) == 40 * 16 and (np.asarray(r.counts) >= r.threshold).all()
    assert r.privacy_loss == p.privacy_loss
    assert r.privacy_loss.epsilon == p.epsilon_exact <= 1 and r.privacy_loss.delta == H._charged_delta(1e-6)
    entry = ledger.charges[-1][1]
    assert entry["noise"] == "gaussian" and Fraction(entry["sigma2"]) == p.sigma2
    assert entry["threshold"] == 100 and entry["threshold_delta"] == p.threshold_delta
    assert entry["gaussian_calibration"] == "exact"
    assert entry["gaussian_delta"] == float(p.gaussian_delta)
    assert math.isfinite(r.error_bound(0.05)) and math.isfinite(r.count_error_bound(0.05))
    assert p.release_probability == pytest.approx(float(_dg_sf(p.sigma2, 99)), rel=1e-6)
    assert p.appearance_probability <= p.threshold_delta * (1 + 1e-9)
    from privagg.cli._render import release_payload  # the JSON of a release (CLI and API)

    j = release_payload(r, beta=0.05)
    assert (j["noise"], j["threshold"], j["sigma2"], j["rho"]) == ("discrete_gaussian", 100, float(p.sigma2),
                                                                   float(p.rho))
    assert j["epsilon"] == 1.0 and j["delta"] == 1e-6 and j["max_keys_per_unit"] == 16


def test_gaussian_api_errors_and_defaults():
    k, u = np.arange(100) % 7, np.arange(100)
    for kwargs in ({"units": None}, {"threshold": "seed"}, {"max_keys_per_unit": "auto"}, {"noise": "uniform"}):
        args = {"units": u, "noise": "gaussian", **kwargs}
        with pytest.raises(ParameterError, match="noise|threshold"):
            privagg.stable_histogram(k, epsilon=1.0, delta=1e-6, **args)
    r = privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, rng=0)
    assert r.params.noise == "laplace" and r.params.sigma2 is None and r.selection == "threshold"
