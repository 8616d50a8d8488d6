"""Validation of public parameters, shared by every layer.

All checks raise :class:`privagg.ParameterError` with one line of the form
``"<where>: parameter '<name>' must be <rule>; got <value>."`` The value shown is always the
public parameter itself, never data.
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

from .errors import ParameterError

__all__ = [
    "fail",
    "check_epsilon",
    "check_delta",
    "check_beta",
    "check_choice",
    "check_positive_int",
    "check_finite_positive",
    "quiet_numerics",
    "real_array",
]

_F = TypeVar("_F", bound=Callable[..., Any])


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


# ---------------------------------------------------------------------------------------------
# Numeric data: conversion, and floating-point exceptions that must not depend on a record.
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def quiet_numerics(func: _F) -> _F:
    """Decorator: run ``func`` with numpy floating-point errors ignored and RuntimeWarnings
    silenced, whatever the caller's ``np.seterr`` / warning filters.

    Every computation on data in privagg runs under it: an overflow, an invalid operation or a
    division by zero caused by a record must neither raise (``np.seterr(all="raise")``) nor print
    a warning on stderr, since either would reveal that such a record exists. The code inside is
    written so that such events never reach a released value (the callers document how: e.g.
    far rows are clipped with a scaled norm, released values are clamped to the float range).
    ``np.errstate`` is per thread (a context variable): worker threads enter it themselves
    (:func:`privagg.friendlycore.kernel._map`).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _quiet():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _to_float(value: Any) -> float:
    """One entry of numeric data: a real number as float64, anything else NaN (missing).

    Numbers beyond the float range (``10**400``) become ``±inf``; strings, None, complex numbers
    and other objects become NaN. Either way the row is then non-finite and dropped by the
    caller's declared policy, exactly as a missing value in a CSV file."""
    if type(value) is float:  # the common case, first (same result as the general rule)
        return value
    if isinstance(value, (numbers.Real, decimal.Decimal)) and not isinstance(value, (str, bytes)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
        except (TypeError, ValueError, ArithmeticError):
            return math.nan
    return math.nan


_TO_FLOAT = np.frompyfunc(_to_float, 1, 1)


def real_array(where: str, value: Any, ndim: int, name: str = "points") -> np.ndarray:
    """Numeric data as a C-contiguous float64 array of ``ndim`` dimensions (no error from values).

    * A numpy array of integer or float dtype is converted with ``astype`` (its dtype is public:
      it belongs to the container, not to a record); bool, string, complex, datetime or void
      dtypes are refused (:class:`ParameterError`, showing only the dtype).
    * Anything else (lists, tuples, object arrays, other array-likes) is converted entry by entry
      by one rule (:func:`_to_float`): a real number becomes its float64 value (``±inf`` beyond
      the range, e.g. ``2**1100``), any other entry NaN. The path taken does not depend on the
      values (a list whose entries include ``2**64`` or a string is converted like any list),
      so neither the exceptions nor, up to the per-entry cost, the running time do.

    Errors only for the shape: ``ndim`` dimensions, at least one column for ``ndim >= 2``, and a
    rectangular nesting; the message shows the shape or dtype, never a value.
    """
    rule = {2: "a 2-D array of shape (n, d) with d >= 1",
            3: "a 3-D array of shape (n, k, d)"}.get(ndim, f"a {ndim}-D array of real numbers")
    if isinstance(value, np.ndarray) and value.dtype != object:
        if value.dtype == bool or not (np.issubdtype(value.dtype, np.integer)
                                       or np.issubdtype(value.dtype, np.floating)):
            raise fail(where, name, "an array of real numbers", f"dtype={value.dtype}")
        arr = value
    else:
        try:
            obj = np.array(value, dtype=object)
        except ValueError:  # ragged nesting: a property of the container's shape
            raise fail(where, name, rule, "a ragged nested sequence") from None
        arr = _TO_FLOAT(obj).astype(np.float64) if obj.size else obj.astype(np.float64)
    if arr.ndim != ndim or (ndim >= 2 and 0 in arr.shape[1:]):
        raise fail(where, name, rule, f"shape={arr.shape}")
    with _quiet():  # float128 / huge integers beyond float64 become ±inf, silently
        return np.ascontiguousarray(arr, dtype=np.float64)
