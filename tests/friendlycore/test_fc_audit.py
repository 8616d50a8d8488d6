"""Empirical privacy audits: the auditor tested both ways, then wrapped friendly algorithms.

Each audit gives a lower confidence bound ``epsilon_lower`` on the privacy loss (confidence
0.999, so a correct mechanism is flagged with probability <= 1e-3: that is each positive test's
false-failure rate). Negative controls must be flagged: a non-friendly use of the algorithm
and the filter with its randomness removed.
"""

from __future__ import annotations

import math

import numpy as np

from privagg.friendlycore import (
    ball,
    end_to_end_budget,
    friend_counts,
    friendly,
    keep_probabilities,
)
from privagg.testing.audit import audit_mechanism, audit_samples

SEED = 424242
CONF = 0.999
TRIALS = 6000


def dlap(gen: np.random.Generator, eps: float) -> int:
    """Two-sided geometric: P(k) ∝ exp(−eps·|k|)."""
    q = -math.expm1(-eps)
    return int(gen.geometric(q) - gen.geometric(q))


# --------------------------------------------------------------------------- the auditor
def test_auditor_accepts_private_and_rejects_non_private():
    print(f"seed={SEED}")
    eps = 0.5
    honest = lambda v, g: v + dlap(g, eps)
    leaky = lambda v, g: v + dlap(g, 3 * eps)
    ok = audit_mechanism(honest, 0, 1, trials=TRIALS, seed=SEED, confidence=CONF)
    bad = audit_mechanism(leaky, 0, 1, trials=TRIALS, seed=SEED, confidence=CONF)
    print(ok, bad)
    assert not ok.violates(eps), (ok, f"seed={SEED}")
    assert (
        ok.epsilon_lower > 0.2 * eps
    )  # the audit has power: it sees most of the true loss
    assert bad.violates(eps), (bad, f"seed={SEED}")


def test_auditor_accounts_for_delta():
    """M outputs a distinguishing symbol with probability 0.02 on D' only: (0, 0.02)-DP."""
    rng = np.random.default_rng(SEED)
    out0 = np.zeros(TRIALS, dtype=int)
    out1 = (rng.random(TRIALS) < 0.02).astype(int)
    assert audit_samples(out0, out1, delta=0.0, confidence=CONF).violates(1.0)
    assert not audit_samples(out0, out1, delta=0.02, confidence=CONF).violates(
        0.0 + 1e-12
    )


# --------------------------------------------------------------------------- friendly algorithms
def noisy_count(eps: float):
    return lambda core, rng: core.shape[0] + dlap(rng, eps)


def noisy_range(eps: float, r: float):
    """range(C) + noise for sensitivity 2r: friendly-DP for dist_r (a friendly set has
    diameter <= 2r), range(∅) = 0; not DP for arbitrary neighbours."""

    def algorithm(core, rng):
        spread = int(core.max() - core.min()) if core.shape[0] else 0
        return spread + dlap(rng, eps / (2 * r))

    return algorithm


def half_friendly_pair(k: int = 3):
    d0 = np.array([[0.0]] * k + [[2.0]] * k)
    return d0, np.concatenate([d0, [[1.0]]])


def outlier_pair(n: int = 20):
    d0 = (np.arange(n) % 2).astype(float)[:, None]
    return d0, np.concatenate([d0, [[100.0]]])


def test_wrapped_count_on_half_friendly_pair_within_eps_prime():
    print(f"seed={SEED}")
    eps = 0.3
    mech = friendly(noisy_count(eps), eps_friendly=eps, predicate=ball(1.0))
    d0, d1 = half_friendly_pair()
    run = lambda data, g: mech(data, rng=g).output
    res = audit_mechanism(run, d0, d1, trials=TRIALS, seed=SEED, confidence=CONF)
    print(res, "eps'=", mech.epsilon)
    assert not res.violates(mech.epsilon), (res, f"seed={SEED}")
    assert res.epsilon_lower > 0.0  # the audit does see a loss (z is always kept on D')


def test_negative_control_filter_without_randomness_violates():
    """Same pair and algorithm, but the filter keeps deterministically when p > 0."""
    print(f"seed={SEED}")
    eps = 0.3
    algorithm = noisy_count(eps)

    def deterministic(data, g):
        num, _ = keep_probabilities(friend_counts(data, ball(1.0)))
        return algorithm(data[num > 0], g)

    d0, d1 = half_friendly_pair()
    res = audit_mechanism(
        deterministic, d0, d1, trials=TRIALS, seed=SEED, confidence=CONF
    )
    eps_prime, _ = end_to_end_budget(eps, 0.0)
    print(res, "eps'=", eps_prime)
    assert res.violates(eps_prime), (res, f"seed={SEED}")


def test_wrapped_range_on_outlier_pair_within_eps_prime_and_unfiltered_violates():
    print(f"seed={SEED}")
    eps, r = 0.3, 1.0
    algorithm = noisy_range(eps, r)
    mech = friendly(algorithm, eps_friendly=eps, predicate=ball(r))
    d0, d1 = outlier_pair()
    run = lambda data, g: mech(data, rng=g).output
    res = audit_mechanism(run, d0, d1, trials=TRIALS, seed=SEED, confidence=CONF)
    print(res, "eps'=", mech.epsilon)
    assert not res.violates(mech.epsilon), (res, f"seed={SEED}")
    # Negative control: the friendly algorithm on a non-friendly pair (no filter).
    raw = audit_mechanism(algorithm, d0, d1, trials=TRIALS, seed=SEED, confidence=CONF)
    print(raw)
    assert raw.violates(mech.epsilon), (raw, f"seed={SEED}")
