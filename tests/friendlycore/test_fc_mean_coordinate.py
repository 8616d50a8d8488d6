"""The small-sample coordinate plan of private_mean (privagg.mechanisms.mean_small, issue 11).

The plan is disabled by default (COORD_SAMPLE = 0: it fails for data far from the origin relative
to their spread, test_far_data_known_defect); these tests switch it on with monkeypatch.

Statistical test (seed 1113, 40 runs, N(7, 1), n = 300, d = 2, ε = 1): no ⊥, and the median over
the runs of |mean_j − x̄_j|/SE_j at most 6 in each coordinate (measured about 2.3; the final noise
alone is discrete Laplace of about 3.6 SE, P[|Z| > 6] < 0.2, so a median above 6 has probability
P[Binom(40, 0.2) >= 20] < 1e-4 per coordinate). Negative control: the current plan at d = 1,
n = 300 is ⊥ in some of 40 runs (measured 9 of 40 in docs/proofs/mean.md §4b; P[0 of 40] at a
⊥ rate of 0.2 is about 1e-4).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privagg.mechanisms.mean_small as S
from privagg.mechanisms.mean import mean_privacy_loss, private_mean

SEED = 1113
RUNS = 40


def test_rank_utility_sensitivity_is_one():
    rng = np.random.default_rng(SEED)
    grid = S.center_grid()
    worst = 0
    for _ in range(30):
        x = np.round(rng.normal(size=40) * 4) / 4  # ties, and rows equal to grid points
        z = rng.choice(np.concatenate([x, grid[8300:8500], [0.0]]))
        u = S.rank_utility(np.sort(x), grid)
        u2 = S.rank_utility(np.sort(np.append(x, z)), grid)
        worst = max(worst, int(np.abs(u - u2).max()))
    assert worst == 1, worst


def test_rank_utility_known_answers():
    x = np.sort(np.array([1.0, 2.0, 2.0, 5.0]))
    assert S.rank_utility(x, np.array([0.0, 1.0, 2.0, 3.0, 6.0])).tolist() == [-4, -3, 0, -2, -4]


def test_grids_cover_every_float_magnitude():
    g = S.center_grid()
    assert (np.diff(g) >= 0).all() and g[g.size // 2] == 0.0  # subnormals repeat (harmless)
    assert np.unique(g).size > 16000
    assert g[-1] == 2.0**1023.75 and g[0] == -g[-1] and g[g.size // 2 + 1] == 2.0**-1074


def _enable(monkeypatch):
    monkeypatch.setattr(S, "COORD_SAMPLE", 2500)


def test_shares_sum_to_epsilon_and_charge(monkeypatch):
    from fractions import Fraction

    eps_n, eps_out, steps = S.coordinate_shares(Fraction(1), 3)
    assert eps_n + eps_out + 3 * sum(steps) == 1
    _enable(monkeypatch)
    loss = mean_privacy_loss(1.0, 1e-6, select_radius=True)
    assert loss.epsilon == 1 and loss.delta <= Fraction(1, 10**6)


def test_small_n_releases_and_accuracy(monkeypatch):
    _enable(monkeypatch)
    rng = np.random.default_rng(SEED)
    errs, bottoms = [], 0
    for s in range(RUNS):
        x = rng.normal(size=(300, 2)) + 7.0
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED * 100 + s)
        if not rel.ok:
            bottoms += 1
            continue
        assert rel.clip_rule == "coordinate"
        errs.append(np.abs(rel.mean - x.mean(0)) / (x.std(0) / math.sqrt(300)))
        low, high = rel.confidence_intervals(0.05)
        assert (low <= rel.mean).all() and (rel.mean <= high).all()
    med = np.median(errs, axis=0)
    print(f"seed={SEED}: ⊥ {bottoms}/{RUNS}, median error {med} SE")
    assert bottoms == 0 and (med <= 6.0).all(), (bottoms, med)


def test_negative_control_current_plan_is_bottom_at_d1():
    rng = np.random.default_rng(SEED)
    bottoms = sum(not private_mean(rng.normal(size=(300, 1)) + 7.0, epsilon=1.0, delta=1e-6,
                                   rng=SEED * 100 + s).ok for s in range(RUNS))
    print(f"seed={SEED}: current plan ⊥ {bottoms}/{RUNS} at d = 1")
    assert bottoms >= 1


@pytest.mark.xfail(strict=True, reason="known defect: rows within one center-grid cell (1e12 ± 1)")
def test_far_data_known_defect(monkeypatch):
    _enable(monkeypatch)
    mu = np.array([1e12, -5e11])
    x = mu + np.random.default_rng(SEED).normal(size=(4000, 2))
    rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED)
    assert np.abs(rel.mean - mu).max() < 10.0
