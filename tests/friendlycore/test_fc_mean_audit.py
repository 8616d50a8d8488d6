"""Empirical audits of private_mean's end-to-end (ε, δ) on small neighbour pairs (d = 1).

Each audit gives a lower confidence bound on the privacy loss at the claimed δ (confidence 0.999:
a correct mechanism is flagged with probability <= 10⁻³, each positive test's false-failure
rate). Negative controls — the filter with its randomness removed, the sum without clipping —
must be flagged. Outputs are coarse: ⊥ or the mean rounded to 10⁻³.
"""

from __future__ import annotations

import numpy as np

import privagg.friendlycore.mean as M
from privagg.friendlycore import friend_counts, keep_probabilities
from privagg.testing.audit import audit_mechanism

SEED = 5150
CONF = 0.999
EPS, DELTA = 1.0, 1e-3
BOTTOM = -999.0


def run(data: np.ndarray, gen: np.random.Generator) -> float:
    rel = M.private_mean(data, epsilon=EPS, delta=DELTA, radius=1.0, rng=gen)
    return float(np.round(rel.mean[0], 3)) if rel.ok else BOTTOM


def outlier_pair(n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    d0 = (np.arange(n) % 2 * 0.5)[:, None]
    return d0, np.concatenate([d0, [[100.0]]])


def half_friendly_pair(k: int = 400) -> tuple[np.ndarray, np.ndarray]:
    d0 = np.concatenate([np.zeros((k, 1)), np.full((k, 1), 2.0)])
    return d0, np.concatenate([d0, [[1.0]]])


def test_outlier_pair_within_claimed_budget():
    print(f"seed={SEED}")
    d0, d1 = outlier_pair()
    rel = M.private_mean(d0, epsilon=EPS, delta=DELTA, radius=1.0, rng=SEED)
    assert rel.ok and rel.epsilon <= EPS and rel.delta <= DELTA
    res = audit_mechanism(run, d0, d1, trials=300, seed=SEED, delta=DELTA, confidence=CONF)
    print(res)
    assert not res.violates(EPS), (res, f"seed={SEED}")


def test_outlier_pair_negative_control_without_clipping(monkeypatch):
    print(f"seed={SEED}")
    monkeypatch.setattr(M, "_clipped_sum", lambda x, c, r: (x - c).sum(axis=0))
    d0, d1 = outlier_pair()
    res = audit_mechanism(run, d0, d1, trials=100, seed=SEED, delta=DELTA, confidence=CONF)
    print(res)
    assert res.violates(EPS), (res, f"seed={SEED}")


def test_half_friendly_pair_within_claimed_budget():
    print(f"seed={SEED}")
    d0, d1 = half_friendly_pair()
    res = audit_mechanism(run, d0, d1, trials=200, seed=SEED, delta=DELTA, confidence=CONF)
    print(res)
    assert not res.violates(EPS), (res, f"seed={SEED}")


def test_half_friendly_pair_negative_control_filter_without_randomness(monkeypatch):
    """Keep every point with p > 0: on D' = D ∪ {1} all points are kept (p = 1/(2k+1) > 0) and
    the release is a mean; on D nothing is (p = 0) and it is ⊥."""
    print(f"seed={SEED}")

    def deterministic(items, pred, alpha, gen):
        num, _ = keep_probabilities(friend_counts(items, pred), alpha=alpha)
        return num > 0

    monkeypatch.setattr(M, "core_mask", deterministic)
    d0, d1 = half_friendly_pair()
    res = audit_mechanism(run, d0, d1, trials=200, seed=SEED, delta=DELTA, confidence=CONF)
    print(res)
    assert res.violates(EPS), (res, f"seed={SEED}")
