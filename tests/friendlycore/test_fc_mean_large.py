"""The large-sample shares of ``private_mean`` (docs/proofs/mean.md §0, §7 "Large samples").

Where the radius is chosen privately and the locate step's need fits ``LARGE_FIT = 2`` times into
the rows it counts (``2·(M_MIN + k_L) <= min(n̂, m_locate)``, ``k_L`` the large plan's core-count
shift; not in the small-sample range), the locate step gets ε/10 instead of ε/5 and the sums the
rest. Known answers of the shares and the rule, the rule read from the released ``n̂`` (not the
true n), the loss, and an accuracy comparison with the large plan switched off as its negative
control.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.mean as M
from privagg.mechanisms.mean import large_sample, mean_plan, mean_privacy_loss

SEED = 20261206


@pytest.mark.parametrize("calibration", ["gaussian", "laplace"])
@pytest.mark.parametrize("select", [False, True])
def test_large_plan_moves_half_the_locate_share_to_the_sums(calibration, select):
    regular = mean_plan(1.0, 1e-6, calibration=calibration, select_radius=select)
    large = mean_plan(1.0, 1e-6, calibration=calibration, select_radius=select, large=True)
    assert large.large and not regular.large and not large.small
    # the locate target: ε/10 instead of ε/5 (the recorded cost is the conversion theorem's, below it)
    assert large.eps_locate <= Fraction(1, 10) < regular.eps_locate <= Fraction(1, 5)
    assert large.eps_locate > Fraction(9, 100)  # nothing of the share is lost
    # every other share is the regular plan's; the sums get what the locate step leaves
    for f in ("eps_count", "eps_select", "eps_quantile", "eps_scale", "eps_floor"):
        assert getattr(large, f) == getattr(regular, f), f
    if calibration == "laplace":
        assert large.eps_sum - regular.eps_sum == regular.eps_locate - large.eps_locate
    else:
        assert large.rho_sum > regular.rho_sum
        assert large.delta_sum + large.delta_locate == regular.delta_sum + regular.delta_locate
    assert large.privacy_loss.epsilon <= 1 and large.privacy_loss.delta <= Fraction(1, 10**6)
    assert large.privacy_loss.epsilon >= 1 - Fraction(1, 10**6)  # nothing wasted


def test_rule_known_answers():
    """At ε = 1, δ = 10⁻⁶ (Gaussian, radius selected, no scale step) the large plan's core-count
    shift is 1308, so the rule holds from n̂ = 2·(10 + 1308) = 2636 with m_locate = 8000, never
    with m_locate = 2635 or a given radius, and never in the small-sample range (n̂·ε < 750)."""
    kw = dict(calibration="gaussian", alpha=0.0, select_radius=True, scale=False)
    assert mean_plan(1.0, 1e-6, large=True).core_count_shift == 1308 and M.M_MIN == 10
    assert not large_sample(2635, 8000, 1.0, 1e-6, **kw)
    assert large_sample(2636, 8000, 1.0, 1e-6, **kw)
    assert not large_sample(10**9, 2635, 1.0, 1e-6, **kw)
    assert large_sample(10**9, 2636, 1.0, 1e-6, **kw)
    assert not large_sample(10**9, 8000, 1.0, 1e-6, **{**kw, "select_radius": False})  # a given radius
    # ε = 0.5: shift 2579, from n̂ = 5178; ε = 0.25: 2·(10 + 5123) > 8000, never at the default m_locate
    assert mean_plan(0.5, 1e-6, large=True).core_count_shift == 2579
    assert not large_sample(5177, 8000, 0.5, 1e-6, **kw) and large_sample(5178, 8000, 0.5, 1e-6, **kw)
    assert not large_sample(10**9, 8000, 0.25, 1e-6, **kw)
    # δ = 0.1: shift 364, the fit holds from n̂ = 748, but n̂·ε < 750 stays the small-sample plan
    assert mean_plan(1.0, 0.1, large=True).core_count_shift == 364
    assert not large_sample(749, 8000, 1.0, 0.1, **kw) and large_sample(750, 8000, 1.0, 0.1, **kw)


def _plans_used(monkeypatch, count_noise: int):
    """Spy on the locate step's plan; the count's noise fixed to ``count_noise`` (its first draw)."""
    used, real_locate, real_dlap = [], M._locate, M.discrete_laplace
    calls = []

    def dlap(scale, *args, **kwargs):
        calls.append(scale)
        return count_noise if len(calls) == 1 else real_dlap(scale, *args, **kwargs)

    monkeypatch.setattr(M, "discrete_laplace", dlap)
    monkeypatch.setattr(M, "_locate", lambda sub, r, plan, gen: used.append(plan.large)
                        or real_locate(sub, r, plan, gen))
    return used


def test_rule_reads_the_released_count(monkeypatch):
    """2000 rows (below 2636) with the count's noise +700 (n̂ = 2700): the large plan; +0: not; 3000
    rows with −400 (n̂ = 2600): not. The rule sees n̂, never n. With the radius given: never."""
    used = _plans_used(monkeypatch, 700)
    x = np.random.default_rng(SEED).normal(size=(2000, 24))
    M.private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED)
    assert used == [True]
    used = _plans_used(monkeypatch, 0)
    M.private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED)
    assert used == [False]
    y = np.random.default_rng(SEED).normal(size=(3000, 24))
    used = _plans_used(monkeypatch, -400)
    M.private_mean(y, epsilon=1.0, delta=1e-6, rng=SEED)
    assert used == [False]
    used = _plans_used(monkeypatch, 5000)  # n̂ = 8000, a given radius: the regular shares
    M.private_mean(y, epsilon=1.0, delta=1e-6, radius=8.0, rng=SEED)
    assert used == [False]


def test_loss_is_the_largest_over_the_plans_with_the_large_ones():
    """With the radius selected the large plans are among the maximum (at ε = 1, δ = 10⁻⁶ Gaussian
    one of them is the largest: 0.9999999999999996); with a given radius they cannot run."""
    for select in (False, True):
        total = mean_privacy_loss(1.0, 1e-6, calibration="gaussian", select_radius=select)
        large = [mean_plan(1.0, 1e-6, select_radius=select, large=True, scale=scale, tied=tied).privacy_loss
                 for scale in (False, True) for tied in (False, True)]
        others = [mean_plan(1.0, 1e-6, select_radius=select, small=small, scale=scale, tied=tied).privacy_loss
                  for small in (False, True) for scale in (False, True) for tied in (False, True)]
        plans = others + large if select else others
        assert total.epsilon >= max(p.epsilon for p in plans) and total.delta >= max(p.delta for p in plans)
        assert total.epsilon <= 1 and total.delta <= Fraction(1, 10**6)
    # the last pass of the loop is select = True: its large and other plans
    total = mean_privacy_loss(1.0, 1e-6, calibration="gaussian", select_radius=True)
    assert select and total.epsilon == max(p.epsilon for p in large) > max(p.epsilon for p in others)


def _median_error(runs: int = 16) -> float:
    x = np.random.default_rng(SEED).normal(3.0, 1.0, size=(6000, 24))
    errs = [np.linalg.norm(M.private_mean(x, epsilon=1.0, delta=1e-6, rng=s).mean - x.mean(axis=0))
            for s in range(runs)]
    print(f"LARGE_FIT={M.LARGE_FIT} table seed {SEED}, release seeds 0-{runs - 1}: "
          f"median |mean - x̄| = {np.median(errs):.4f}, {np.round(sorted(errs), 3).tolist()}")
    return float(np.median(errs))


def test_large_plan_is_more_accurate():
    """N(3, 1)^24, n = 6000, ε = 1 (d > 20: the FriendlyCore plans; n̂ >= 2636: the large plan):
    the median over release seeds 0–15 of ‖mean − x̄‖ (the privacy error) is <= 0.048. Measured:
    0.0407, 3 of 16 above 0.048 (re-seeded, 8 or more of 16 above happens with probability about
    0.006 at that rate). Control (below, must fail): the large plan off, 0.0568, 12 of 16 above."""
    assert _median_error() <= 0.048


def test_large_plan_control_off(monkeypatch):
    monkeypatch.setattr(M, "LARGE_FIT", 0)
    assert _median_error() > 0.048
