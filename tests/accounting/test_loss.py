"""PrivacyLoss: validation, exact values, composition rules and their properties."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privagg import ParameterError
from privagg.accounting import PrivacyLoss, compose

F = Fraction


def test_floats_are_read_as_the_decimal_written() -> None:
    assert PrivacyLoss.pure(0.1).epsilon == F(1, 10)
    assert PrivacyLoss.pure(np.float64(0.1)).epsilon == F(1, 10)
    assert PrivacyLoss.pure(Decimal("0.1")).epsilon == F(1, 10)
    assert PrivacyLoss.approx(1, 1e-6).delta == F(1, 10**6)
    assert PrivacyLoss.zcdp(F(1, 3)).rho == F(1, 3)


def test_ten_tenths_compose_to_exactly_one() -> None:
    total = compose(*[PrivacyLoss.pure(0.1)] * 10)
    assert total == PrivacyLoss.pure(1)
    assert total.fits_within(PrivacyLoss.pure(1.0))
    assert not (total + PrivacyLoss.pure(1e-300)).fits_within(PrivacyLoss.pure(1.0))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5, True, "0.1", None, [1]])
def test_bad_epsilon_is_refused_with_one_line(bad: object) -> None:
    with pytest.raises(ParameterError) as info:
        PrivacyLoss.pure(bad)
    msg = str(info.value)
    assert msg.startswith("PrivacyLoss.pure: parameter 'epsilon' must be a finite number >= 0; got ")
    assert "\n" not in msg


@pytest.mark.parametrize("bad", [1.0, 1.5, -1e-9, float("nan")])
def test_bad_delta_is_refused(bad: float) -> None:
    with pytest.raises(ParameterError, match="parameter 'delta' must be a number in"):
        PrivacyLoss.approx(1, bad)
    with pytest.raises(ParameterError, match="parameter 'delta'"):
        PrivacyLoss.zcdp(0.1, bad)


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ParameterError, match="'kind'"):
        PrivacyLoss("renyi", F(1), F(0), None)
    with pytest.raises(ParameterError, match="'delta' must be 0 for a pure loss"):
        PrivacyLoss("pure", F(1), F(1, 10), None)
    with pytest.raises(ParameterError, match="'rho'"):
        PrivacyLoss("approx", F(1), F(0), F(1))
    with pytest.raises(ParameterError, match="'epsilon' must be None"):
        PrivacyLoss("zcdp", F(1), F(0), F(1))


def test_is_immutable() -> None:
    loss = PrivacyLoss.pure(1)
    with pytest.raises(AttributeError):
        loss.epsilon = F(2)  # type: ignore[misc]


def test_composition_rules() -> None:
    p, a, z = PrivacyLoss.pure(1), PrivacyLoss.approx(0.5, 1e-6), PrivacyLoss.zcdp(0.25, 1e-9)
    assert p + p == PrivacyLoss.pure(2)
    assert p + a == PrivacyLoss.approx(1.5, 1e-6) == a + p
    assert a + a == PrivacyLoss.approx(1, 2e-6)
    assert z + z == PrivacyLoss.zcdp(0.5, 2e-9)
    assert p + z == PrivacyLoss.zcdp(F(3, 4), 1e-9) == z + p  # ε = 1 ↦ ρ = 1/2
    assert PrivacyLoss.approx(1, 0) + z == p + z  # (ε, 0)-DP is pure DP
    with pytest.raises(ParameterError, match="convert zCDP with to_approx"):
        a + z
    with pytest.raises(ParameterError, match="'losses'"):
        compose()
    assert compose(p, a, p) == PrivacyLoss.approx(2.5, 1e-6)


def test_conversions_of_each_kind() -> None:
    assert PrivacyLoss.pure(2).to_zcdp() == PrivacyLoss.zcdp(2)
    assert PrivacyLoss.pure(2).to_approx() == PrivacyLoss.approx(2, 0)
    a = PrivacyLoss.approx(1, 1e-6)
    assert a.to_approx() is not None and a.to_approx() == a
    with pytest.raises(ParameterError, match="to_zcdp"):
        a.to_zcdp()
    with pytest.raises(ParameterError, match="'delta' must be given"):
        PrivacyLoss.zcdp(1).to_approx()
    with pytest.raises(ParameterError, match=r"'delta' must be a number in \(1e-06, 1\)"):
        PrivacyLoss.zcdp(1, 1e-6).to_approx(1e-7)


def test_fits_within() -> None:
    budget = PrivacyLoss.approx(1, 1e-6)
    assert PrivacyLoss.pure(1).fits_within(budget)
    assert not PrivacyLoss.approx(1, 2e-6).fits_within(budget)
    assert not PrivacyLoss.pure(F(1) + F(1, 10**30)).fits_within(budget)
    assert PrivacyLoss.zcdp(0.1).fits_within(PrivacyLoss.zcdp(0.1))
    with pytest.raises(ParameterError, match="same family"):
        PrivacyLoss.zcdp(0.1).fits_within(budget)


def test_str() -> None:
    assert str(PrivacyLoss.pure(0.5)) == "ε=0.5"
    assert str(PrivacyLoss.approx(0.5, 1e-6)) == "ε=0.5, δ=1e-06"
    assert str(PrivacyLoss.zcdp(0.005)) == "ρ=0.005"
    assert str(PrivacyLoss.zcdp(0.005, 1e-9)) == "ρ=0.005, δ=1e-09"


# --- properties --------------------------------------------------------------------------------
small = st.fractions(min_value=0, max_value=10, max_denominator=10**6)
deltas = st.fractions(min_value=0, max_value=F(1, 10**3), max_denominator=10**9)
losses = st.one_of(
    st.builds(PrivacyLoss.pure, small),
    st.builds(PrivacyLoss.approx, small, deltas),
    st.builds(PrivacyLoss.zcdp, small, deltas),
)
dp_losses = st.one_of(st.builds(PrivacyLoss.pure, small), st.builds(PrivacyLoss.approx, small, deltas))


def _parts(x: PrivacyLoss) -> tuple[Fraction, Fraction]:
    return (x.rho if x.kind == "zcdp" else x.epsilon), x.delta


@settings(max_examples=200, deadline=None)
@given(losses, losses)
def test_composition_is_monotone_and_commutative(a: PrivacyLoss, b: PrivacyLoss) -> None:
    try:
        ab = a + b
    except ParameterError:
        assert {a.kind, b.kind} >= {"zcdp"} and not (a.is_pure or b.is_pure)
        return
    assert ab == b + a
    for x in (a, b):
        # compare in ab's family: never less than either part
        xx = x.to_zcdp() if ab.kind == "zcdp" else x
        big, small_ = _parts(ab), _parts(xx)
        assert big[0] >= small_[0] and big[1] >= small_[1]


@settings(max_examples=100, deadline=None)
@given(dp_losses, dp_losses, dp_losses)
def test_composition_is_associative_and_exact(a: PrivacyLoss, b: PrivacyLoss, c: PrivacyLoss) -> None:
    assert (a + b) + c == a + (b + c) == compose(a, b, c)
    assert compose(a, b, c).epsilon == a.epsilon + b.epsilon + c.epsilon


@settings(max_examples=100, deadline=None)
@given(losses)
def test_dict_round_trip(x: PrivacyLoss) -> None:
    assert PrivacyLoss.from_dict(json.loads(json.dumps(x.to_dict()))) == x


@settings(max_examples=100, deadline=None)
@given(st.fractions(min_value=0, max_value=100, max_denominator=10**6))
def test_pure_to_zcdp_round_trip(eps: Fraction) -> None:
    rho = PrivacyLoss.pure(eps).to_zcdp().rho
    assert rho == eps * eps / 2
    # back: ε = √(2ρ) exactly (2ρ is the square of a rational in lowest terms)
    two_rho = 2 * rho
    back = F(math.isqrt(two_rho.numerator), math.isqrt(two_rho.denominator))
    assert back == eps


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=1e-12, max_value=1e6, allow_subnormal=False))
def test_float_round_trip(x: float) -> None:
    """The exact value read from a float converts back to the same float."""
    assert float(PrivacyLoss.pure(x).epsilon) == x
