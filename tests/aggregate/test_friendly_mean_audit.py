"""Audit of friendly_means on a worst-case neighbour pair: a far outlier added to a group.

Disjoint groups are independent runs, so one call over G copies of a group gives G independent
releases (the same harness as the parallel-composition proof uses). The step audited with power
is the final clipped sum (30 000 groups of 100 rows) (the outlier is clipped onto ±R and moves the sum by R, the proven
sensitivity): claim ε_sum = 1; negative control: sensitivity halved, must be flagged. The whole
mechanism is also run on the pair (claim (ε, δ) = (1, 1e-6)): it must not be flagged.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import Contribution, GroupedValues
from privagg.testing import clopper_pearson_lower, clopper_pearson_upper

CONF = 0.999  # each bound holds with probability >= 0.999: false-failure rate <= 2e-3 per audit


def _eps_lower(hits_a, hits_b, n, delta=0.0):
    """Lower confidence bound on ε from P_a[E] <= e^ε P_b[E] + δ (Clopper–Pearson, each side
    (1 − CONF)/2)."""
    q = (1 - CONF) / 2
    pa, pb = clopper_pearson_lower(hits_a, n, q), clopper_pearson_upper(hits_b, n, q)
    return -math.inf if pa - delta <= 0 else math.log((pa - delta) / pb)


def _sum_releases(extra_row: bool, copies: int, seed: int):
    rng = np.random.default_rng(1)  # the same base rows on both sides
    base = rng.normal(size=100)
    rows = np.concatenate([base, [1e3]]) if extra_row else base
    x = np.tile(rows, copies)
    grp = np.repeat(np.arange(copies), rows.size).astype(np.int64)
    off = np.searchsorted(grp, np.arange(copies + 1))
    clip_r = np.full(copies, 4.0)
    ok = np.ones(copies, dtype=bool)
    draws = gm._Draws(np.random.default_rng(seed))
    total, sens, _, e_g = gm._noisy_clipped_sums(x.copy(), grp, off, clip_r, ok, Fraction(1), draws)
    exact = float(np.clip(base, -4, 4).sum())
    return total, exact


def _sum_audit():
    n = 30_000
    t_d, exact = _sum_releases(False, n, seed=11)
    t_dp, _ = _sum_releases(True, n, seed=12)
    event = lambda t: t >= exact + 4.0  # noise beyond one sensitivity on D
    return _eps_lower(int(event(t_dp).sum()), int(event(t_d).sum()), n)


def test_clipped_sum_step_within_its_epsilon():
    eps_low = _sum_audit()
    print("seeds 11/12, eps_lower", eps_low)
    assert eps_low <= 1.0
    assert eps_low > 0.6  # the harness has power: it sees most of the true loss


def test_clipped_sum_negative_control_is_flagged(monkeypatch):
    real = gm._sum_sensitivity
    monkeypatch.setattr(gm, "_sum_sensitivity",
                        lambda r, e_s, e_g: np.maximum(real(r, e_s, e_g) // 2, 1))
    eps_low = _sum_audit()
    print("control eps_lower", eps_low)
    assert eps_low > 1.0


def _whole(extra_row: bool, copies: int, seed: int):
    rng = np.random.default_rng(2)
    # 900 rows: above plan 0's radius selection at ε = 1 (the small-group plan pools its
    # location steps over the groups, so copies of a small group are not independent trials)
    base = rng.normal(size=900)
    rows = np.concatenate([base, [100.0]]) if extra_row else base
    x = np.tile(rows, copies)
    g = np.repeat(np.arange(copies), rows.size).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, x, copies), epsilon=Fraction(1),
                            delta=Fraction(1, 10**6), contribution=Contribution(),
                            rng=np.random.default_rng(seed))
    return np.where(res.ok, res.value, -np.inf), base.mean()


def test_whole_mechanism_on_outlier_pair_not_flagged():
    threshold = 0.1
    n = 2000
    v_d, m = _whole(False, n, 21)
    v_dp, _ = _whole(True, n, 22)
    for a, b in ((v_dp, v_d), (v_d, v_dp)):
        k_a, k_b = int((a > m + threshold).sum()), int((b > m + threshold).sum())
        assert _eps_lower(k_a, k_b, n, delta=1e-6) <= 1.0, (k_a, k_b)
