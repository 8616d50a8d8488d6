"""Certified integer arithmetic: every enclosure contains the mpmath value (60 digits)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
from hypothesis import given, settings
from hypothesis import strategies as st

from privagg.noise._exact import decide_le, exp_neg_fixed, float_up


def _mp(fr: Fraction) -> mpmath.mpf:
    return mpmath.mpf(fr.numerator) / fr.denominator


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**7),
    st.integers(min_value=1, max_value=10**6),
    st.integers(min_value=1, max_value=300),
)
def test_exp_neg_fixed_encloses(num, den, prec):
    lo, hi = exp_neg_fixed(num, den, prec)
    with mpmath.workprec(prec + 200):
        exact = mpmath.exp(-mpmath.mpf(num) / den) * mpmath.mpf(2) ** prec
        assert lo <= exact <= hi
    assert hi - lo <= 4  # tight: a few units in the last place


def test_float_up_is_the_upward_rounding():
    for num, den in [(1, 2), (3, 7), (100, 1), (700, 1), (1, 10**9)]:
        got = float_up(lambda p, a=num, b=den: exp_neg_fixed(a, b, p))
        with mpmath.workprec(2000):
            exact = mpmath.exp(-mpmath.mpf(num) / den)
            assert mpmath.mpf(got) >= exact
            assert mpmath.mpf(math.nextafter(got, 0.0)) < exact


def test_float_up_underflow_is_an_upper_bound():
    assert float_up(lambda p: exp_neg_fixed(800, 1, p)) == 5e-324


def test_decide_le_both_ways():
    enc = lambda p: exp_neg_fixed(1, 1, p)  # e^{-1} = 0.36787944117144233...
    assert decide_le(enc, Fraction(36787944117144233, 10**17))
    assert not decide_le(enc, Fraction(36787944117144232, 10**17))
