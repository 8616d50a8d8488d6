"""Budget functions against the exact formulas (mpmath, written independently) and as inverses;
the wrapper for user friendly algorithms."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privagg
from privagg.errors import ParameterError
from privagg.friendlycore import ball, end_to_end_budget, friendly, friendly_budget
from privagg.friendlycore.conversion import FriendlyRelease, movement_bound

mpmath.mp.dps = 80


def reference(eps, delta, alpha):
    a = mpmath.mpf(Fraction(alpha).numerator) / Fraction(alpha).denominator
    big_l = 2 * (1 - a) / (1 - 2 * a) + a
    e2 = big_l * (mpmath.e ** mpmath.mpf(eps) - 1)
    d2 = mpmath.mpf(delta) * (mpmath.e**e2 - 1) / (mpmath.e ** mpmath.mpf(eps) - 1)
    return big_l, e2, d2


@pytest.mark.parametrize("alpha", (0.0, 0.1, 0.25, 0.45))
@pytest.mark.parametrize(
    "eps, delta", [(0.01, 0.0), (0.405, 1e-6), (1.0, 1e-9), (3.0, 1e-3)]
)
def test_end_to_end_matches_formula_rounded_up(eps, delta, alpha):
    big_l, e2, d2 = reference(eps, delta, alpha)
    got_e, got_d = end_to_end_budget(eps, delta, alpha=alpha)
    assert mpmath.mpf(got_e) >= e2 and abs(mpmath.mpf(got_e) / e2 - 1) < 1e-15
    if delta == 0:
        assert got_d == 0.0
    else:
        assert mpmath.mpf(got_d) >= d2 and abs(mpmath.mpf(got_d) / d2 - 1) < 1e-15
        assert got_d <= big_l * mpmath.e**e2 * delta  # the simpler bound of the theorem
    assert movement_bound(alpha) >= big_l


def test_known_values():
    eps, _ = friendly_budget(1.0, 0.0)
    assert (
        abs(eps - float(mpmath.log(1.5))) < 1e-15
        and eps <= float(mpmath.log(1.5)) + 1e-300
    )
    e2, _ = end_to_end_budget(float(mpmath.log(1.5)), 0.0)
    assert abs(e2 - 1.0) < 1e-15
    assert movement_bound(0.0) == 2.0
    assert abs(movement_bound(0.25) - (2 * 0.75 / 0.5 + 0.25)) < 1e-15


@settings(max_examples=200, deadline=None)
@given(
    eps=st.floats(1e-6, 20.0),
    delta=st.one_of(st.just(0.0), st.floats(1e-15, 0.5)),
    alpha=st.floats(0.0, 0.49),
)
def test_inverse_never_overshoots(eps, delta, alpha):
    fe, fd = friendly_budget(eps, delta, alpha=alpha)
    e2, d2 = end_to_end_budget(fe, fd, alpha=alpha) if fe > 0 else (0.0, 0.0)
    assert e2 <= eps and d2 <= delta
    assert e2 >= eps * (1 - 1e-12)
    assert d2 >= delta * (1 - 1e-12) - 1e-300
    # and the other way round
    e3, d3 = end_to_end_budget(eps, delta, alpha=alpha)
    if e3 < 700 and d3 < 1.0:
        back_e, back_d = friendly_budget(e3, d3, alpha=alpha)
        assert back_e <= eps * (1 + 1e-12) and abs(back_e / eps - 1) < 1e-12
        assert abs(back_d - delta) <= 1e-12 * delta


def test_friendly_budget_matches_formula_rounded_down():
    for alpha in (0.0, 0.1, 0.3):
        for eps2, delta2 in [(0.1, 1e-8), (1.0, 1e-6), (5.0, 0.01)]:
            big_l, _, _ = reference(1.0, 0.0, alpha)
            e = mpmath.log(1 + mpmath.mpf(eps2) / big_l)
            d = (
                mpmath.mpf(delta2)
                * (mpmath.e**e - 1)
                / (mpmath.e ** mpmath.mpf(eps2) - 1)
            )
            got_e, got_d = friendly_budget(eps2, delta2, alpha=alpha)
            assert mpmath.mpf(got_e) <= e and abs(mpmath.mpf(got_e) / e - 1) < 1e-15
            assert mpmath.mpf(got_d) <= d and abs(mpmath.mpf(got_d) / d - 1) < 1e-14


def test_validation():
    for bad in (0.0, -1.0, float("inf"), float("nan"), "1"):
        with pytest.raises(ParameterError, match="'eps_friendly'"):
            end_to_end_budget(bad, 0.0)
        with pytest.raises(ParameterError, match="'epsilon'"):
            friendly_budget(bad, 0.0)
    for bad in (-1e-9, 1.0, 2.0):
        with pytest.raises(ParameterError, match="'delta'"):
            friendly_budget(1.0, bad)
    with pytest.raises(ParameterError, match="'alpha'"):
        end_to_end_budget(1.0, 0.0, alpha=0.5)
    assert privagg.friendly_budget is friendly_budget
    assert privagg.end_to_end_budget is end_to_end_budget


# --------------------------------------------------------------------------- wrapper
def test_wrapper_records_guarantee_and_passes_a_shuffled_core():
    seen = []

    def algorithm(core, rng):
        seen.append(core.copy())
        return int(core.shape[0])

    mech = friendly(
        algorithm, eps_friendly=0.5, delta_friendly=1e-7, predicate=ball(1.0), alpha=0.1
    )
    assert (mech.epsilon, mech.delta) == end_to_end_budget(0.5, 1e-7, alpha=0.1)
    x = np.concatenate([np.arange(40.0)[:, None] * 1e-3, [[50.0]]])
    orders = set()
    for seed in range(20):
        rel = mech(x, rng=seed)
        assert isinstance(rel, FriendlyRelease) and not rel.secure
        assert (rel.epsilon, rel.delta) == (mech.epsilon, mech.delta)
        core = seen[-1]
        assert (
            rel.output == core.shape[0] == 40
        )  # the outlier is never kept, the rest always
        assert (
            sorted(core[:, 0].tolist()) == x[:40, 0].tolist()
        )  # the core as a multiset
        orders.add(tuple(core[:, 0]))
    assert len(orders) == 20  # the core arrives shuffled
    assert mech(x).secure


def test_wrapper_validation():
    with pytest.raises(ParameterError, match="'algorithm'"):
        friendly(3, eps_friendly=1.0, predicate=ball(1.0))
    with pytest.raises(ParameterError, match="'eps_friendly'"):
        friendly(lambda c, r: 0, eps_friendly=0, predicate=ball(1.0))
    with pytest.raises(ParameterError, match="'delta_friendly'"):
        friendly(lambda c, r: 0, eps_friendly=1, delta_friendly=1, predicate=ball(1.0))


def test_wrapped_release_records_its_loss_and_charges_a_ledger_first(tmp_path):
    """The end-to-end guarantee is recorded as a PrivacyLoss and charged before any draw."""
    import numpy as np

    import privagg
    from privagg.accounting import Ledger, PrivacyLoss

    mech = privagg.friendly(
        lambda core, rng: len(core), eps_friendly=0.2, delta_friendly=1e-7, predicate=privagg.predicates.ball(1.0)
    )
    ledger = Ledger.create(tmp_path / "b.db", epsilon=1.0, delta=1e-5)
    release = mech(np.zeros((10, 2)), rng=1, ledger=ledger)
    assert release.privacy_loss == PrivacyLoss.approx(Fraction(mech.epsilon), Fraction(mech.delta))
    assert [c.mechanism for c in ledger.charges()] == ["friendly"]
    calls = []
    greedy = privagg.friendly(
        lambda core, rng: calls.append(1), eps_friendly=0.4, delta_friendly=0.0, predicate=privagg.predicates.ball(1.0)
    )
    with pytest.raises(privagg.BudgetExceededError):
        greedy(np.zeros((10, 2)), rng=1, ledger=ledger)
    assert calls == [] and len(ledger.charges()) == 1
