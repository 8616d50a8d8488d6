"""Noise parameters as exact rationals, rounded in a stated direction.

Every sampler of :mod:`privagg.noise` works with exact rational parameters. A float given by a
user (``scale=2/0.3``) is turned into a :class:`~fractions.Fraction` with a bounded denominator,
rounded so that the noise is never smaller than asked: ``direction="up"`` gives a rational
``≥ x``, ``"down"`` one ``≤ x``. Inputs that already are small rationals are kept exactly.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

from .._validate import fail

__all__ = ["one_sided_approximation", "to_fraction"]


def one_sided_approximation(
    x: Fraction, max_denominator: int, direction: str
) -> Fraction:
    """The best rational approximation of ``x`` from one side with a bounded denominator.

    Returns the rational ``p/q`` with ``q <= max_denominator`` that is ``>= x`` (``"up"``) or
    ``<= x`` (``"down"``) and closest to ``x`` among those. If ``x`` already has a denominator
    ``<= max_denominator`` it is returned unchanged.

    The two candidates are the last convergent and the last admissible semiconvergent of the
    continued fraction of ``x`` (the same pair :meth:`fractions.Fraction.limit_denominator`
    chooses between); they lie on opposite sides of ``x`` and each is the best approximation
    from its side (Khinchin, *Continued Fractions*, Thm. 15 and its one-sided corollary).
    """
    if max_denominator < 1:
        raise ValueError("max_denominator must be >= 1")
    if x.denominator <= max_denominator:
        return x
    p0, q0, p1, q1 = 0, 1, 1, 0
    n, d = x.numerator, x.denominator
    while True:
        a = n // d
        q2 = q0 + a * q1
        if q2 > max_denominator:
            break
        p0, q0, p1, q1 = p1, q1, p0 + a * p1, q2
        n, d = d, n - a * d
    k = (max_denominator - q0) // q1
    semi = Fraction(p0 + k * p1, q0 + k * q1)
    conv = Fraction(p1, q1)
    lower, upper = (semi, conv) if semi < conv else (conv, semi)
    if (
        not lower <= x <= upper
    ):  # pragma: no cover - guaranteed by continued-fraction theory
        raise AssertionError("one_sided_approximation: candidates do not bracket x")
    return upper if direction == "up" else lower


def to_fraction(
    x: Any,
    *,
    where: str,
    name: str,
    direction: str = "up",
    max_bits: int = 40,
    positive: bool = True,
) -> Fraction:
    """Turn a real parameter into an exact :class:`~fractions.Fraction`.

    Parameters
    ----------
    x : int, float, Fraction or numpy scalar
        The parameter. Must be finite (and ``> 0`` when ``positive``).
    where, name : str
        Calling function and parameter name, for the error message.
    direction : {"up", "down"}
        ``"up"`` returns a rational ``>= x``, ``"down"`` one ``<= x`` (use the direction that
        never gives less noise than asked: up for a scale or a variance, down for ε).
    max_bits : int
        The denominator of the result is at most ``2**max_bits``. Inputs with a smaller
        denominator (ints, ``2.0``, ``0.5``, ``Fraction(2, 3)``) are returned exactly; others
        are rounded to the best one-sided rational approximation with that bound.
    positive : bool
        Require ``x > 0`` (default).

    Returns
    -------
    Fraction

    Raises
    ------
    ParameterError
        If ``x`` is not a real number, is NaN or infinite, or is ``<= 0`` when ``positive``.

    Examples
    --------
    >>> to_fraction(2.0, where="f", name="scale")
    Fraction(2, 1)
    >>> to_fraction(0.1, where="f", name="scale") >= Fraction(0.1)
    True
    """
    rule = "a finite number > 0" if positive else "a finite number"
    if direction not in ("up", "down"):
        raise ValueError("direction must be 'up' or 'down'")
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise fail(where, name, rule, x)
    if isinstance(x, Fraction):
        value = x
    elif isinstance(x, numbers.Integral):
        value = Fraction(int(x))
    else:
        f = float(x)
        if math.isnan(f) or math.isinf(f):
            raise fail(where, name, rule, x)
        value = Fraction(f)
    if positive and value <= 0:
        raise fail(where, name, rule, x)
    result = one_sided_approximation(value, 1 << max_bits, direction)
    if positive and result <= 0:  # "down" of a tiny positive number
        raise fail(where, name, f"a finite number >= 2**-{max_bits}", x)
    return result
