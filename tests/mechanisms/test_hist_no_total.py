"""The stable histogram under add/remove without a noisy total: ``total_epsilon_share=0`` (issue 12 b).

The peers (PipelineDP, OpenDP) release counts only; privagg's default spends 10 % of ε on a noisy
total n̂ for the frequencies (docs/proofs/histograms.md §2.4). Share 0 releases the same content
as the peers: no n̂, frequencies NaN (no denominator exists: n is private and the released counts
miss the suppressed keys), all of ε on the counts and the threshold.

Known answers are exact. One statistical check (an audit at confidence 1 − 1e-6, seed printed;
false-failure rate ≤ 1e-6) with a negative control (counts at half the scale) that must be flagged.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import privagg
from privagg.accounting import Ledger
from privagg.engines.counting import KeyCounts
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.mechanisms.histogram import StableHistogramParams, stable_histogram, stable_histogram_from_counts
from privagg.noise.samplers import discrete_laplace
from privagg.testing.audit import audit_samples

ALPHA = 1e-6


@pytest.mark.parametrize("zero", [0, 0.0, Fraction(0)])
def test_share_zero_puts_all_of_epsilon_on_the_counts(zero) -> None:
    """ε = 1, δ = 1e-6: t = 1 and T = 15 (16 with the default share, t_c = 10/9); no total scale."""
    p = StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=zero)
    assert p.scale == 1 and p.total_scale is None and p.threshold == 15
    assert p.counts_epsilon == 1 and p.total_epsilon == 0 and p.epsilon_exact == 1
    assert p.total_epsilon_share == 0.0
    assert H.stable_threshold(1.0, 1e-6, "add_remove", total_epsilon_share=zero) == 15
    assert H.stable_threshold(1.0, 1e-6, "add_remove") == 16
    # user level (ℓ0, ℓ∞) = (3, 2): t = ℓ0ℓ∞/ε = 6; the Gaussian option's ε_c is all of ε
    u = StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=zero, bounds=(3, 2))
    assert u.scale == 6 and u.total_scale is None
    g = StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=zero, bounds=(3, 2),
                                    noise="gaussian")
    g_default = StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(3, 2), noise="gaussian")
    assert g.total_scale is None and g.sigma2 < g_default.sigma2 and g.threshold <= g_default.threshold
    # selection="optimal": per key (ε/(2ℓ0), δ/ℓ0) with ε_c = ε
    assert H._optimal_budget("stable_histogram", u, 3) == (Fraction(1, 6), Fraction(1e-6) / 3)


def test_share_zero_under_replace_is_still_an_error() -> None:
    with pytest.raises(ParameterError, match="total_epsilon_share.*replace"):
        stable_histogram(["a"] * 50, epsilon=1.0, delta=1e-6, total_epsilon_share=0, rng=1)


@pytest.mark.parametrize("share", [-0.0 - 1e-300, False, np.bool_(False), "0"])
def test_near_zero_or_non_number_shares_are_refused(share) -> None:
    with pytest.raises(ParameterError, match="total_epsilon_share"):
        StableHistogramParams.build(1.0, 1e-6, "add_remove", total_epsilon_share=share)


def test_kept_iff_noisy_count_reaches_15_and_nothing_else_is_drawn(monkeypatch) -> None:
    """Noise-free: counts 15 kept, 14 not; no draw for a total (the only draw is the counts')."""
    calls: list[tuple] = []

    def zero_noise(scale, size, rng=None):
        calls.append((Fraction(scale), size))
        return np.zeros(size, dtype=np.int64)

    monkeypatch.setattr(H, "discrete_laplace", zero_noise)
    kc = KeyCounts(keys=np.array(["a", "b", "c"]), counts=np.array([15, 14, 40]), n=69)
    r = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, neighbors="add_remove", total_epsilon_share=0,
                                     rng=3)
    assert r.keys.tolist() == ["a", "c"] and r.counts.tolist() == [15, 40] and r.threshold == 15
    assert calls == [(Fraction(1), 3)]
    assert r.noisy_total is None and np.isnan(r.frequencies).all()


@pytest.mark.parametrize("kw", [{}, {"selection": "optimal"}, {"noise": "gaussian"}])
def test_release_without_total_counts_bounds_and_ledger(tmp_path: Path, kw) -> None:
    """No n̂: frequencies NaN, frequency bound ∞ and frequency intervals NaN; the counts, their
    intervals and the ledger charge (ε, δ) are as usual; the charge records share 0, no t_n."""
    rng = np.random.default_rng(5)
    units = np.arange(4000)
    keys = rng.zipf(1.5, size=4000) % 40
    with Ledger.create(tmp_path / "b.ledger", epsilon=3, delta=1e-5) as ledger:
        r = stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, max_keys_per_unit=2, max_rows_per_key=1,
                             total_epsilon_share=0, rng=7, ledger=ledger, **kw)
        (charge,) = ledger.charges()
    assert charge.loss.epsilon <= 1 and charge.loss.delta >= Fraction(1e-6)
    assert charge.parameters["total_epsilon_share"] == 0.0 and "total_scale" not in charge.parameters
    assert r.keys.size > 0 and r.noisy_total is None
    assert np.isnan(r.frequencies).all() and r.error_bound(0.05) == math.inf
    low, high = r.confidence_intervals(0.05)
    assert np.isnan(low).all() and np.isnan(high).all()
    clow, chigh = r.confidence_intervals(0.05, unit="count")
    assert np.isfinite(clow).all() and (clow <= r.counts).all() and (r.counts <= chigh).all()
    if kw.get("selection") != "optimal":
        assert r.count_error_bound(0.05) == math.inf  # no n̂ bounds the number of keys
        assert math.isfinite(r.count_error_bound(0.05, max_keys=100))
    frame = r.to_pandas()
    assert frame["frequency"].isna().all() and (frame["count"] == r.counts).all()


def test_auto_l0_with_share_zero() -> None:
    rng = np.random.default_rng(2)
    units = np.repeat(np.arange(3000), 2)
    keys = rng.zipf(1.5, size=6000) % 40
    r = privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, max_keys_per_unit="auto",
                                 total_epsilon_share=0, rng=4)
    assert r.noisy_total is None and np.isnan(r.frequencies).all() and r.auto_l0 is not None


def test_audit_share_zero_counts_stay_within_epsilon(monkeypatch) -> None:
    """Audit of (ε = 1, δ = 1e-6) with share 0 on D = {a × 100} and D' = D + one record of a.

    Output 1 iff count_a ≥ 101 (post-processing): its log-ratio is exactly ε = 1 for DL(1) noise.
    Audit confidence 1 − 1e-6. Negative control: counts at half the scale (ε = 2 spent, 1 claimed)
    must be flagged.
    """
    seed, trials = 41, 8000
    print(f"seed={seed}")
    d0 = KeyCounts(keys=np.array(["a"]), counts=np.array([100]), n=100)
    d1 = KeyCounts(keys=np.array(["a"]), counts=np.array([101]), n=101)

    def outputs(kc: KeyCounts, g: np.random.Generator) -> np.ndarray:
        out = np.zeros(trials, dtype=np.int64)
        for i in range(trials):
            r = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, neighbors="add_remove",
                                             total_epsilon_share=0, rng=g)
            out[i] = int(r.counts.size == 1 and r.counts[0] >= 101)
        return out

    def audit():
        g0, g1 = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
        return audit_samples(outputs(d0, g0), outputs(d1, g1), delta=1e-6, confidence=1 - ALPHA)

    res = audit()
    assert not res.violates(1.0), f"seed={seed}: {res}"

    def half_scale(scale, size, rng):
        return discrete_laplace(Fraction(scale) / 2, size, rng=rng)

    monkeypatch.setattr(H, "discrete_laplace", half_scale)
    res_bad = audit()
    assert res_bad.violates(1.0), f"seed={seed}: over-spending not flagged: {res_bad}"
