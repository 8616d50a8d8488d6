"""private_mean's budget split and calibration against independent computations (mpmath, scipy),
and the radius-selection query (exactness against brute force, sensitivity bound)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import optimize

from privagg.accounting import zcdp_to_epsilon
from privagg.friendlycore import friend_counts, keep_probabilities
from privagg.mechanisms.mean import (
    M_MIN,
    dlap_tail_shift,
    mean_plan,
    rho_for,
)
from privagg.friendlycore.radius import GAMMA, grid_radii, radius_queries

mpmath.mp.dps = 60
SEED = 20261130


def cks_epsilon(rho: float, delta: float) -> float:
    """inf over α > 1 of the CKS bound, by scipy on log(α − 1) (independent of privagg's search)."""
    def f(t: float) -> float:
        a = 1.0 + math.exp(t)
        return a * rho + (math.log(1 / delta) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)
    res = optimize.minimize_scalar(f, bounds=(-25.0, 25.0), method="bounded",
                                   options={"xatol": 1e-12})
    return max(0.0, float(res.fun))


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.1, 1e-9), (0.75, 5e-7), (3.0, 1e-3)])
def test_rho_for_is_certified_and_near_optimal(eps, delta):
    rho = rho_for(eps, delta)
    assert zcdp_to_epsilon(rho, Fraction(delta)) <= Fraction(eps)
    # Independent: the root of cks_epsilon(ρ) = ε; rho_for is within 1e-6 of it, from below.
    root = optimize.brentq(lambda r: cks_epsilon(r, delta) - eps, 1e-12, eps, xtol=1e-15)
    assert float(rho) <= root * (1 + 1e-9)
    assert float(rho) >= root * (1 - 1e-6)


@pytest.mark.parametrize("scale", [Fraction(7, 2), Fraction(42), Fraction(1001, 3)])
@pytest.mark.parametrize("delta", [1e-3, 1e-7])
def test_dlap_tail_shift_against_exact_tail(scale, delta):
    k = dlap_tail_shift(scale, Fraction(delta))
    t = mpmath.mpf(scale.numerator) / scale.denominator
    tail = mpmath.exp(-(k + 1) / t) / (1 + mpmath.exp(-1 / t))  # exact P[Z > k]
    assert tail <= delta
    # And minimal for its rule e^{-k/t} <= δ:
    assert mpmath.exp(-mpmath.mpf(k - 1) / t) > delta


def reference_locate(ef_cc, ef_cm, df):
    """Conversion theorem with α = 0 (L = 2), in mpmath."""
    e = mpmath.mpf(ef_cc) + mpmath.mpf(ef_cm)
    e2 = 2 * mpmath.expm1(e)
    return e2, mpmath.mpf(df) * mpmath.expm1(e2) / mpmath.expm1(e)


@pytest.mark.parametrize("calibration", ["gaussian", "laplace", "zcdp"])
@pytest.mark.parametrize("select", [False, True])
@pytest.mark.parametrize("shares", ["regular", "small", "large"])
@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.3, 1e-8), (4.0, 1e-3)])
def test_plan_shares_and_totals(calibration, select, shares, eps, delta):
    small, large = shares == "small", shares == "large"
    p = mean_plan(eps, delta, calibration=calibration, select_radius=select, small=small, large=large)
    # Floats are read as the smaller of their value and their shortest decimal (the ledger's).
    e = min(Fraction(eps), Fraction(repr(eps)))
    d = min(Fraction(delta), Fraction(repr(delta)))
    assert (p.small, p.large) == (small, large)
    assert p.eps_count == e / 20  # the same in both plans: n̂ is released before the choice (ε/40 before §13)
    assert p.eps_select == ((e / 5 if small else e / 10) if select else 0)
    assert p.eps_quantile == e / 10
    # the spread floor (docs/proofs/mean.md §8c): ε/20 with a private radius, not in small plans
    assert p.eps_floor == (e / 20 if select and not small else 0)
    # Locate: the recorded end-to-end values are the conversion theorem's, rounded up (tiny).
    e_loc, d_loc = reference_locate(p.eps_core_count, p.eps_core_mean,
                                    p.delta_core_count + p.delta_core_mean)
    assert e_loc <= p.eps_locate <= e_loc * (1 + 1e-14)
    assert d_loc <= p.delta_locate <= d_loc * (1 + 1e-14)
    assert p.eps_locate <= (e / 3 if small else e / 10 if large else e / 5)
    assert p.delta_locate <= (d / 2 if calibration != "laplace" else d)
    assert p.eps_core_count == p.eps_friendly / (2 if small else 4)
    if calibration == "laplace":
        assert p.rho_sum is None and p.delta_sum == 0 and p.delta_core_mean == 0
        assert p.eps_sum == (e - p.eps_count - p.eps_select - p.eps_locate - p.eps_quantile
                             - p.eps_floor)
    else:
        assert p.delta_core_count == p.delta_friendly / 2
        # Each Gaussian part's ε is the certified conversion of its ρ, independently re-derived.
        assert cks_epsilon(float(p.rho_sum), float(p.delta_sum)) <= float(p.eps_sum) * (1 + 1e-9)
        assert cks_epsilon(float(p.rho_core_mean), float(p.delta_core_mean)) <= float(
            p.eps_core_mean) * (1 + 1e-9)
        assert p.delta_sum == d - p.delta_locate
    total = p.privacy_loss
    assert total.epsilon <= e and total.delta <= d
    # Nothing is wasted: the total is within 1e-6 of the target (ε) and exactly δ or below.
    assert float(total.epsilon) >= eps * (1 - 1e-6)


def test_plan_is_the_same_for_synonyms_and_reported_by_release():
    import privagg.mechanisms.mean as M

    g = mean_plan(1.0, 1e-6, calibration="gaussian")
    z = mean_plan(1.0, 1e-6, calibration="zcdp")
    assert (g.rho_sum, g.eps_sum, g.eps_locate) == (z.rho_sum, z.eps_sum, z.eps_locate)
    x = np.random.default_rng(SEED).normal(size=(50, 2))
    rel = M.private_mean(x, epsilon=1.0, delta=1e-6, radius=3.0, rng=SEED, calibration="zcdp")
    small = mean_plan(1.0, 1e-6, calibration="gaussian", small=True)
    # a given radius: the large-sample shares never run (large_sample), so they are not in the max
    total = M.mean_privacy_loss(1.0, 1e-6, calibration="zcdp")
    assert total.epsilon == max(g.privacy_loss.epsilon, small.privacy_loss.epsilon) <= 1
    assert total.delta == max(g.privacy_loss.delta, small.privacy_loss.delta) <= Fraction(1, 10**6)
    assert rel.privacy_loss == total
    assert (rel.epsilon, rel.delta) == (float(total.epsilon), float(total.delta))


def test_small_sample_plan_is_chosen_from_the_released_count(monkeypatch):
    """n̂·ε < SMALL_SAMPLE selects the small-sample shares; the count share is the same in both."""
    import privagg.mechanisms.mean as M

    used = []
    real = M._locate

    def spy(sub, r, plan, gen):
        used.append(plan.small)
        return real(sub, r, plan, gen)

    monkeypatch.setattr(M, "_locate", spy)
    x = np.random.default_rng(SEED).normal(size=(400, 2))
    M.private_mean(x, epsilon=1.0, delta=1e-6, radius=3.0, rng=SEED)  # n̂·ε ≈ 400 < 750
    M.private_mean(np.tile(x, (5, 1)), epsilon=1.0, delta=1e-6, radius=3.0, rng=SEED)  # ≈ 2000
    assert used == [True, False]
    assert M.SMALL_SAMPLE == 750


def test_core_count_shift_and_floor():
    p = mean_plan(1.0, 1e-6)
    t = 1 / p.eps_core_count
    assert p.core_count_shift == dlap_tail_shift(t, p.delta_core_count)
    assert M_MIN >= 2  # the empty core needs m_low >= 2 to be a δ-event (docs/proofs/mean.md)


# --------------------------------------------------------------------------- radius queries
def brute_queries(x: np.ndarray) -> list[int]:
    m = x.shape[0]
    diff = x[:, None, :] - x[None, :, :]
    d2 = (diff**2).sum(-1)
    out = []
    for r in grid_radii():
        c = (d2 <= r * r).sum(axis=1)
        num, den = keep_probabilities(c)
        q = Fraction(int(num.sum()), int(den[0])) if m else Fraction(0)
        out.append(math.floor(q - (1 - GAMMA) * m))
    return out


def test_radius_queries_match_brute_force():
    rng = np.random.default_rng(SEED)
    # Lattice points times 0.3: squared distances 0.09·k never sit on a grid boundary 2^{j/2}.
    x = rng.integers(-20, 20, size=(300, 3)).astype(float) * 0.3
    x[:40] += 500.0  # a far cluster
    assert radius_queries(x) == brute_queries(x)
    assert radius_queries(np.zeros((0, 3))) == [0] * len(grid_radii())


def test_radius_queries_sensitivity_at_most_three():
    """Adding one point moves every g(r_j) by at most Δ = ceil(L) + 1 = 3 (α = 0); the bound is
    approached (a change of >= 2 occurs), so the test is not vacuous."""
    rng = np.random.default_rng(SEED)
    worst = 0
    for trial in range(40):
        n = int(rng.integers(4, 60))
        k = n // 2
        x = np.concatenate([np.zeros((k, 1)), np.full((n - k, 1), 2.0 ** (trial % 7))])
        x += rng.normal(scale=0.01, size=x.shape)
        z = np.array([[2.0 ** (trial % 7) / 2]]) if trial % 2 else rng.normal(size=(1, 1))
        g0 = np.array(radius_queries(x))
        g1 = np.array(radius_queries(np.concatenate([x, z])))
        worst = max(worst, int(np.abs(g1 - g0).max()))
    assert worst <= 3, f"seed={SEED}"
    assert worst >= 2, f"seed={SEED}"


def test_friend_counts_of_query_agree_with_ball_away_from_boundaries():
    """The selection's friendship equals privagg.ball's where no distance is near r."""
    rng = np.random.default_rng(SEED)
    x = rng.integers(-5, 5, size=(80, 2)).astype(float) * 0.3
    r = float(grid_radii()[45])  # 2^{5/4}
    from privagg.friendlycore import ball

    c = friend_counts(x, ball(r))
    diff = x[:, None, :] - x[None, :, :]
    assert np.array_equal(c, ((diff**2).sum(-1) <= r * r).sum(1))
