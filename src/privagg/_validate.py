"""Validation of public parameters, shared by every layer.

All checks raise :class:`privagg.ParameterError` with one line of the form
``"<where>: parameter '<name>' must be <rule>; got <value>."`` The value shown is always the
public parameter itself, never data.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from .errors import ParameterError

__all__ = [
    "fail",
    "check_epsilon",
    "check_delta",
    "check_beta",
    "check_choice",
    "check_positive_int",
    "check_finite_positive",
]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fail(where: str, name: str, rule: str, value: Any) -> ParameterError:
    """Build (not raise) the standard one-line error."""
    return ParameterError(f"{where}: parameter '{name}' must be {rule}; got {_show(value)}.")


def _as_real(where: str, name: str, value: Any, rule: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise fail(where, name, rule, value)
    x = float(value)
    if math.isnan(x) or math.isinf(x):
        raise fail(where, name, rule, value)
    return x


def check_finite_positive(where: str, name: str, value: Any) -> float:
    """A finite real number > 0 (ints, floats, Fractions, numpy scalars)."""
    rule = "a finite number > 0"
    x = _as_real(where, name, value, rule)
    if not x > 0:
        raise fail(where, name, rule, value)
    return x


def check_epsilon(where: str, value: Any, name: str = "epsilon") -> float:
    """ε: a finite real number > 0."""
    return check_finite_positive(where, name, value)


def check_delta(where: str, value: Any, name: str = "delta") -> float:
    """δ: a real number in the open interval (0, 1)."""
    rule = "a number in the open interval (0, 1)"
    x = _as_real(where, name, value, rule)
    if not 0.0 < x < 1.0:
        raise fail(where, name, rule, value)
    return x


def check_beta(where: str, value: Any, name: str = "beta") -> float:
    """A failure probability β in (0, 1)."""
    return check_delta(where, value, name)


def check_choice(where: str, name: str, value: Any, choices: Iterable[str]) -> str:
    """One of a fixed set of strings."""
    options = tuple(choices)
    if not isinstance(value, str) or value not in options:
        rule = "one of " + ", ".join(repr(c) for c in options)
        raise fail(where, name, rule, value)
    return value


def check_positive_int(
    where: str, name: str, value: Any, minimum: int = 1, maximum: int | None = None
) -> int:
    """An integer >= minimum, and <= maximum when given (bools are refused)."""
    rule = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or int(value) < minimum
        or (maximum is not None and int(value) > maximum)
    ):
        raise fail(where, name, rule, value)
    return int(value)
