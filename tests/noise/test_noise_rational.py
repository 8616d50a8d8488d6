"""to_fraction / one_sided_approximation: exactness, direction, bounded denominators."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privagg.errors import ParameterError
from privagg.noise.rational import one_sided_approximation, to_fraction


@pytest.mark.parametrize(
    "value, expected",
    [
        (2.0, Fraction(2)),
        (2, Fraction(2)),
        (0.5, Fraction(1, 2)),
        (Fraction(2, 3), Fraction(2, 3)),
        (np.float64(0.25), Fraction(1, 4)),
        (np.int64(7), Fraction(7)),
    ],
)
def test_small_rationals_are_kept_exactly(value, expected):
    assert to_fraction(value, where="f", name="x") == expected


def test_float_rounding_direction_and_bound():
    up = to_fraction(0.1, where="f", name="x", direction="up")
    down = to_fraction(0.1, where="f", name="x", direction="down")
    assert down <= Fraction(0.1) <= up
    assert up.denominator <= 2**40 and down.denominator <= 2**40
    assert up != down  # 0.1 has denominator 2^55: it must be rounded


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), -1.0, 0, 0.0, True, "2", None]
)
def test_rejects_bad_values(bad):
    with pytest.raises(ParameterError, match=r"^f: parameter 'scale' must be"):
        to_fraction(bad, where="f", name="scale")


@settings(max_examples=200, deadline=None)
@given(
    st.floats(min_value=1e-6, max_value=1e9, allow_nan=False),
    st.integers(min_value=20, max_value=48),
)
def test_one_sided_property(x, bits):
    up = to_fraction(x, where="f", name="x", direction="up", max_bits=bits)
    down = to_fraction(x, where="f", name="x", direction="down", max_bits=bits)
    assert down <= Fraction(x) <= up
    assert up.denominator <= 2**bits and down.denominator <= 2**bits


@settings(max_examples=60, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(50)),
    st.integers(min_value=1, max_value=40),
)
def test_best_from_each_side_against_brute_force(x, max_den):
    """Independent check: scan every denominator q <= max_den for the closest p/q on each side."""
    best_up = min(Fraction(math.ceil(x * q), q) for q in range(1, max_den + 1))
    best_down = max(Fraction(math.floor(x * q), q) for q in range(1, max_den + 1))
    assert one_sided_approximation(x, max_den, "up") == best_up
    assert one_sided_approximation(x, max_den, "down") == best_down
