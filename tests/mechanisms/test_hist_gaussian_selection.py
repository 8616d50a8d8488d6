"""selection="gaussian": Gaussian thresholding of the distinct units per key, then separate
discrete Laplace counts (user level; docs/proofs/histograms.md §8.2).

Known answers of the split and the calibration; the keep rate equals P[v + Z ≥ T_s] on the
distinct units v (control: the rate of the row counts is rejected); an audit on neighbouring
units with a negative control (the selection run on the row counts instead of the distinct units);
the new-keys event against δ with a negative control (T_s − 1); ledger, JSON and API errors.

Statistical checks use fixed, printed seeds. Level: the audit uses 2·9 Wilson intervals at
α = 1e-6 per run, the new-keys test one, the keep-rate test a binomial p-value threshold 1e-4:
this file fails spuriously with probability < 2e-4. Each harness also runs on a deliberately
broken mechanism and must reject it.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import privagg
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.noise.distributions import DiscreteGaussian
from privagg.testing import RecordingLedger, unit_copies, wilson_interval

ALPHA = 1e-6


def test_known_answers_of_the_split_and_the_calibration():
    """ε = 1, δ = 1e-6, (ℓ0, ℓ∞) = (3, 2): share 0 gives ε_s = 1/2 for the selection at (3, 1)
    (σ_s = 13.957, T_s = 71, the exact calibration) and counts of scale 2·3·2/1 = 12
    (PipelineDP's Laplace counts at ε/2); the default share 0.1 gives ε_c = 9/10, ε_s = 9/20
    (σ_s = 15.40, T_s = 79) and scale 40/3. Every part adds up to ε exactly."""
    for share, eps_s, sigma, t, scale in ((0, Fraction(1, 2), 13.957, 71, Fraction(12)),
                                          (None, Fraction(9, 20), 15.400, 79, Fraction(40, 3))):
        p = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=share, bounds=(3, 2))
        sel = H.gaussian_selection_params(p)
        assert sel.epsilon_exact == eps_s and sel.gaussian_calibration == "exact"
        assert (sel.max_keys_per_unit, sel.max_rows_per_key) == (3, 1) and sel.total_scale is None
        assert sel.threshold == t and math.sqrt(sel.sigma2) == pytest.approx(sigma, abs=5e-3)
        assert 2 * p.scale == scale
        counts_eps = Fraction(3 * 2) / (2 * p.scale)
        assert sel.epsilon_exact + counts_eps + p.total_epsilon == 1
        # the selection is Gaussian thresholding at (ℓ0, 1): the same object as noise="gaussian" there
        same = H.StableHistogramParams.build(eps_s, 1e-6, "add_remove", total_epsilon_share=0, bounds=(3, 1),
                                             noise="gaussian")
        assert (same.sigma2, same.threshold) == (sel.sigma2, sel.threshold)


def test_keep_rate_is_that_of_the_distinct_units():
    """Every key has n = T_s − 2 distinct units with ℓ∞ = 3 rows each (row count 3n): the keep
    rate must be P[n + Z ≥ T_s] (binomial test, p > 1e-4); the rate of the row count,
    P[3n + Z ≥ T_s], is rejected by the same test (control: a selection on rows would be wrong)."""
    seed = 8080
    print("seed", seed)
    l0, linf, copies = 2, 3, 2000
    params = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=0, bounds=(l0, linf))
    n = H.gaussian_selection_params(params).threshold - 2
    keys, units = unit_copies(np.full(copies, n), l0, linf)
    r = privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, max_keys_per_unit=l0,
                                 max_rows_per_key=linf, total_epsilon_share=0, selection="gaussian", rng=seed)
    sel = r.selection_params
    law = DiscreteGaussian(sel.sigma2)
    p, wrong = law.sf(sel.threshold - n), law.sf(sel.threshold - n * linf)
    assert 0.2 < p < 0.8
    kept, trials = len(r.keys), copies * l0
    assert stats.binomtest(kept, trials, p).pvalue > 1e-4, (kept, trials, p)
    assert stats.binomtest(kept, trials, wrong).pvalue < 1e-4, wrong
    assert r.selection == "gaussian" and r.threshold == 0
    assert r.counts_law.scale == 2 * r.params.scale == 2 * l0 * linf
    noisy = np.asarray(r.counts) - n * linf  # kept keys: bounded count 3n + DL(12), no selection bias
    assert abs(float(np.median(noisy))) <= 3


@pytest.mark.parametrize("control", [None, "rows"])
def test_gaussian_selection_audit_neighbouring_units(monkeypatch, control):
    """Copy c's ℓ0 = 2 keys are held by n − 1 units (D) or n units (D'), each unit with ℓ∞ = 3
    rows per key, n = 2..10, 3000 copies per n (independent trials of one neighbouring pair each).
    The selection is (ε_s, δ)-DP, ε_s = ε/2 (share 0), so for F = "neither key kept" and S = "some
    kept": P_D[F] ≤ e^{ε_s} P_D'[F] + δ and P_D'[S] ≤ e^{ε_s} P_D[S] + δ; no Wilson-interval
    evidence of a violation is allowed at any n. Control "rows": the selection fed the row counts
    (a unit moves each of its keys by ℓ∞ = 3, not 1) must show a violation."""
    seed = 6161 + (control is not None)
    print("seed", seed, "control", control)
    eps, delta, l0, linf = 3.0, 1e-3, 2, 3
    e_s = eps / 2
    if control == "rows":
        orig = H._optimal_from_counts
        monkeypatch.setattr(H, "_optimal_from_counts", lambda where, bc, uc, *a: orig(where, bc, bc, *a))
    ns = np.arange(2, 11)
    per = 3000
    n_of_copy = np.repeat(ns, per)
    rates = {}
    for extra in (0, 1):
        keys, units = unit_copies(n_of_copy - 1 + extra, l0, linf)
        r = privagg.stable_histogram(keys, units=units, epsilon=eps, delta=delta, max_keys_per_unit=l0,
                                     max_rows_per_key=linf, total_epsilon_share=0, selection="gaussian",
                                     rng=seed + 10 * extra)
        some = np.zeros(n_of_copy.size, dtype=bool)
        some[np.unique(np.asarray(r.keys, dtype=np.int64) // l0)] = True
        rates[extra] = [int(some[n_of_copy == n].sum()) for n in ns]
    violated = False
    for i, n in enumerate(ns):
        s_d, s_d1 = rates[0][i], rates[1][i]
        lo_fd, _ = wilson_interval(per - s_d, per, ALPHA)
        _, hi_fd1 = wilson_interval(per - s_d1, per, ALPHA)
        lo_sd1, _ = wilson_interval(s_d1, per, ALPHA)
        _, hi_sd = wilson_interval(s_d, per, ALPHA)
        bad = lo_fd > math.exp(e_s) * hi_fd1 + delta or lo_sd1 > math.exp(e_s) * hi_sd + delta
        print(n, s_d, s_d1, bad)
        violated |= bad
    assert violated == (control is not None)


@pytest.mark.parametrize("lower", [0, 1])
def test_new_keys_are_released_with_probability_at_most_delta(monkeypatch, lower):
    """D' = one unit holding ℓ0 = 2 new keys with ℓ∞ = 3 rows each (on D the keys are absent and
    never released): P["some key kept"] ≤ δ. 20,000 independent copies; the Wilson lower bound
    (α = 1e-6) of the rate must not exceed δ. Control: T_s − 1 (the threshold one below the
    calibrated one) must exceed it."""
    seed = 7272 + lower
    print("seed", seed, "threshold lowered by", lower)
    eps, delta, l0, linf, copies = 3.0, 1e-3, 2, 3, 20000
    if lower:
        orig = H.gaussian_selection_params
        monkeypatch.setattr(H, "gaussian_selection_params",
                            lambda p, **kw: dataclasses.replace(orig(p, **kw), threshold=orig(p, **kw).threshold - 1))
    keys, units = unit_copies(np.ones(copies, dtype=np.int64), l0, linf)
    r = privagg.stable_histogram(keys, units=units, epsilon=eps, delta=delta, max_keys_per_unit=l0,
                                 max_rows_per_key=linf, total_epsilon_share=0, selection="gaussian", rng=seed)
    some = np.unique(np.asarray(r.keys, dtype=np.int64) // l0).size
    lo, _ = wilson_interval(some, copies, ALPHA)
    print("copies with a released key", some, "of", copies, "lower bound", lo)
    assert (lo > delta) == bool(lower)


def test_ledger_json_and_table_are_truthful():
    keys = np.repeat(np.arange(40), 300)
    units = np.arange(keys.size) % 6000
    ledger = RecordingLedger()
    r = privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, max_keys_per_unit=3,
                                 max_rows_per_key=2, selection="gaussian", rng=5, ledger=ledger)
    loss, entry = ledger.charges[-1]
    assert float(loss.epsilon) <= 1.0 and float(loss.delta) == pytest.approx(1e-6)
    assert entry["selection"] == "gaussian" and entry["threshold"] is None
    assert Fraction(entry["selection_epsilon"]) == Fraction(9, 20)
    assert entry["selection_threshold"] == r.selection_params.threshold == 79
    assert Fraction(entry["selection_sigma2"]) == r.selection_params.sigma2
    assert Fraction(entry["counts_scale"]) == Fraction(40, 3)
    assert math.isinf(r.error_bound(0.05)) and math.isinf(r.count_error_bound(0.05))
    from privagg.cli._render import release_payload, summary_rows

    j = release_payload(r, beta=0.05)
    assert (j["selection"], j["threshold"], j["noise"]) == ("gaussian", None, "discrete_laplace")
    assert j["selection_threshold"] == 79 and j["selection_epsilon"] == 0.45
    assert j["selection_sigma2"] == float(r.selection_params.sigma2) and j["selection_epsilon_per_key"] is None
    text = dict(summary_rows(r, beta=0.05))
    assert "Gaussian thresholding of the distinct units" in text["selection"] and "≥ 79" in text["selection"]
    control = release_payload(privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6,
                                                       max_keys_per_unit=3, rng=5), beta=0.05)
    assert control["selection_threshold"] is None and control["selection"] == "threshold"


def test_api_errors_before_any_charge():
    k, u = np.arange(100) % 7, np.arange(100)
    ledger = RecordingLedger()
    with pytest.raises(ParameterError, match="selection"):  # user level only
        privagg.stable_histogram(k, epsilon=1.0, delta=1e-6, selection="gaussian", ledger=ledger)
    with pytest.raises(ParameterError, match="noise"):  # the counts are Laplace
        privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, selection="gaussian", noise="gaussian",
                                 ledger=ledger)
    with pytest.raises(ParameterError, match="selection"):
        privagg.stable_histogram(k, units=u, max_keys_per_unit="auto", epsilon=1.0, delta=1e-6,
                                 selection="gaussian", ledger=ledger)
    assert ledger.charges == []
