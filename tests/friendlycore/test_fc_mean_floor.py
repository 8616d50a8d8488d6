"""The spread floor of ``private_mean`` (docs/proofs/mean.md §8c).

Before it a 0/1 column with a 5–10 % minority at n = 10⁴ (ε = 1) released its majority value
(the robust rule clipped the minority: error −p, about 40 standard errors, at every ε). The
floor's utility and cap are the grouped mean's (``tests/aggregate/test_spread_floor.py``: known
answers, sensitivity by brute force, an audit with a control); here: the noise scale, the
utility on 0/1 columns (control: the floor off)
and on a constant column (control: the cap off).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.mean as M
import privagg.mechanisms.mean_small as mean_small
from privagg import private_mean

SEED = 20261202


@pytest.fixture(autouse=True)
def friendlycore_plan(monkeypatch):
    """The floor belongs to the FriendlyCore plans: at these n̂·ε the d = 1 gate
    (``mean_small.COORD_SAMPLE_1D``) would run the coordinate plan, so it is set to the d = 2
    gate here (the coordinate plan's 0/1 columns: test_fc_mean_coordinate_wide.py)."""
    monkeypatch.setattr(mean_small, "COORD_SAMPLE_1D", mean_small.COORD_SAMPLE)


def _binary(n, p):
    x = np.zeros((n, 1))
    x[: round(p * n)] = 1.0
    return x


def test_plan_floor_share_and_noise_scale(monkeypatch):
    plan = M.mean_plan(1.0, 1e-6, select_radius=True)
    assert plan.eps_floor == Fraction(1, 20)
    assert M.mean_plan(1.0, 1e-6, select_radius=False).eps_floor == 0
    assert M.mean_plan(1.0, 1e-6, select_radius=True, small=True).eps_floor == 0
    seen = []
    real = M.discrete_laplace
    monkeypatch.setattr(M, "discrete_laplace",
                        lambda scale, size=None, rng=None: seen.append(scale) or real(scale, size=size, rng=rng))
    M.spread_floor_pick(np.zeros((10, 1)), np.zeros(1), 1.0, 10, plan, np.random.default_rng(SEED))
    assert seen == [Fraction(80)]  # 4/ε_f


@pytest.mark.parametrize("p", [0.1, 0.9])
def test_binary_column_releases_its_proportion(p):
    print(f"seeds {SEED}+0..3")
    x = _binary(10_000, p)
    for s in range(4):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED + s)
        # SE of a 10 % proportion on 10⁴ rows: 0.003; the noise at ε = 1 is below it
        assert rel.ok and abs(rel.mean[0] - p) < 0.01, (s, rel.mean, rel.clip_rule)


def test_binary_control_without_floor_releases_the_atom(monkeypatch):
    monkeypatch.setattr(M, "spread_floor_pick", lambda *a: 0)
    rel = private_mean(_binary(10_000, 0.1), epsilon=1.0, delta=1e-6, rng=SEED)
    assert abs(rel.mean[0] - 0.1) > 0.05 and rel.clip_rule == "robust"


def _constant_lifted(monkeypatch=None):
    x = np.full((10_000, 1), 7.25)
    picks = []
    real = M.spread_floor_pick
    if monkeypatch is not None:
        monkeypatch.setattr(M, "floor_cap", lambda eps: 0)
    def spy(*a):
        picks.append(real(*a))
        return picks[-1]
    M_spy = pytest.MonkeyPatch()
    M_spy.setattr(M, "spread_floor_pick", spy)
    try:
        rels = [private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED + s) for s in range(30)]
    finally:
        M_spy.undo()
    return sum(k > 0 for k in picks), rels


def test_constant_column_is_not_lifted():
    lifted, rels = _constant_lifted()
    print(f"seeds {SEED}+0..29: {lifted} lifted")
    assert lifted == 0  # each with probability <= 1e-4: false failure <= 0.3 %
    assert all(r.ok and abs(r.mean[0] - 7.25) < 1e-6 and r.clip_radius < 1e-4 for r in rels)


def test_constant_column_control_without_cap_is_lifted(monkeypatch):
    lifted, _ = _constant_lifted(monkeypatch)
    print(f"control (no cap): {lifted} of 30 lifted")
    assert lifted >= 3
