"""Exact rational values for privacy parameters (shared by the loss type and the ledger).

A float is read as the shortest decimal that round-trips to it (``0.1`` → ``1/10``), i.e. the
number the user wrote; ints, Fractions and Decimals are kept exactly. See
``docs/proofs/accounting.md`` (section "Exact arithmetic") for why this is the rule and what it
asks of mechanisms.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction
from typing import Any

from .._validate import fail

__all__ = ["exact", "show", "as_float"]


def exact(where: str, name: str, value: Any, *, rule: str, low: Fraction, high: Fraction | None,
          low_open: bool, high_open: bool = True) -> Fraction:
    """``value`` as an exact Fraction inside the stated interval, else ParameterError."""
    if isinstance(value, bool):
        raise fail(where, name, rule, value)
    if isinstance(value, Fraction):
        x = value
    elif isinstance(value, numbers.Integral):
        x = Fraction(int(value))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise fail(where, name, rule, value)
        x = Fraction(value)
    elif isinstance(value, numbers.Rational):
        x = Fraction(value.numerator, value.denominator)
    elif isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise fail(where, name, rule, value)
        x = Fraction(repr(f))
    else:
        raise fail(where, name, rule, value)
    if x < low or (low_open and x == low):
        raise fail(where, name, rule, value)
    if high is not None and (x > high or (high_open and x == high)):
        raise fail(where, name, rule, value)
    return x


def show(x: Fraction | None) -> str:
    """A short decimal for tables and messages (display only; accounting uses the exact value)."""
    if x is None:
        return "-"
    return f"{as_float(x):.6g}"


def as_float(x: Fraction) -> float:
    """Nearest float, or ``inf`` for values beyond the float range (display and JSON only)."""
    try:
        return float(x)
    except OverflowError:
        return math.inf
