"""Certified fixed-point arithmetic on Python integers (no floating point, no mpmath).

A quantity ``v`` "at precision ``p``" is a pair of integers ``(lo, hi)`` with
``lo <= v * 2**p <= hi``. Every function here returns such an enclosure, proven below, so that
sampler tables and tail decisions are exact: a decision is made only when the enclosure lies
strictly on one side; otherwise the precision is raised.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

__all__ = [
    "MAX_PRECISION",
    "ceil_div",
    "decide_le",
    "div_iv",
    "exp_neg_fixed",
    "float_up",
    "mul_iv",
]

#: Precision cap (bits) for refinement loops; beyond it a public-parameter error is raised.
MAX_PRECISION = 1 << 14

Interval = tuple[int, int]


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, ``b > 0``."""
    return -((-a) // b)


def exp_neg_fixed(num: int, den: int, prec: int) -> Interval:
    """Enclosure of ``exp(-num/den) * 2**prec`` for integers ``num >= 0``, ``den >= 1``.

    Proof sketch (docs/proofs/noise.md, "certified exponentials"): with ``s`` chosen so that
    ``z = num/(den·2^s) < 1/2``, the Taylor terms ``τ_n = 2^W z^n/n!`` are computed by
    ``c_n = floor(c_{n-1}·z/n)``; by induction ``τ_n − 2 < c_n <= τ_n``. The series stops at
    the first ``c_N = 0`` (so ``τ_N < 2``); the alternating remainder is at most ``τ_N``.
    Hence ``|Σ(−1)^n c_n − 2^W e^{−z}| <= 2N + 2``. Squaring ``s`` times with floor/ceil keeps
    the enclosure (all values are >= 0), and the final shift by ``W − prec`` floors/ceils.
    """
    if num < 0 or den < 1 or prec < 0:
        raise ValueError("exp_neg_fixed: need num >= 0, den >= 1, prec >= 0")
    if num == 0:
        return 1 << prec, 1 << prec
    s = (num // den).bit_length() + 1
    work = prec + s + 24
    d = den << s
    term = total = 1 << work
    n = 0
    while term:
        n += 1
        term = term * num // (d * n)
        total += -term if n & 1 else term
    err = 2 * n + 2
    lo, hi = max(total - err, 0), total + err
    for _ in range(s):
        lo = (lo * lo) >> work
        hi = ceil_div(hi * hi, 1 << work)
    shift = work - prec
    return lo >> shift, ceil_div(hi, 1 << shift)


def mul_iv(a: Interval, b: Interval, prec: int) -> Interval:
    """Product of two non-negative enclosures at precision ``prec``."""
    return (a[0] * b[0]) >> prec, ceil_div(a[1] * b[1], 1 << prec)


def div_iv(a: Interval, b: Interval, prec: int) -> Interval:
    """Quotient of non-negative enclosures (``b[0] > 0``) at precision ``prec``."""
    return (a[0] << prec) // b[1], ceil_div(a[1] << prec, b[0])


def _ceil_float(x: Fraction) -> float:
    """The smallest float ``>= x`` (``x >= 0``; ``inf`` beyond the float range)."""
    try:
        f = float(x)  # correctly rounded to nearest (integer true division)
    except OverflowError:
        return math.inf
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def float_up(
    enclosure: Callable[[int], Interval], start: int = 96, max_prec: int = MAX_PRECISION
) -> float:
    """The smallest float ``>= v`` for a value ``v`` in ``[0, 1]`` given by its enclosures.

    The precision is raised until both ends of the enclosure round up to the same float, which
    is then exactly the upward rounding of ``v``. Values below the smallest subnormal return
    ``5e-324`` (an upper bound). If the ends do not separate below ``max_prec`` bits, the
    upward rounding of the upper end (still an upper bound, at most a few ulps above) is
    returned.
    """
    prec = start
    while True:
        lo, hi = enclosure(prec)
        if hi <= 0:
            return 0.0
        if hi.bit_length() + 1074 <= prec:  # v <= hi / 2^prec <= 2^-1074
            return 5e-324
        if hi.bit_length() < 72:  # too few significant bits: raise the precision
            prec += 80 - hi.bit_length()
            continue
        up_lo, up_hi = (
            _ceil_float(Fraction(lo, 1 << prec)),
            _ceil_float(Fraction(hi, 1 << prec)),
        )
        if up_lo == up_hi or prec >= max_prec:
            return up_hi
        prec *= 2


def decide_le(
    enclosure: Callable[[int], Interval], target: Fraction, start: int = 96
) -> bool:
    """Decide ``v <= target`` exactly for a value given by enclosures.

    Raises :class:`ArithmeticError` if the enclosures never separate ``v`` from ``target``
    below :data:`MAX_PRECISION` (for our quantities equality is impossible: see the
    transcendence argument in docs/proofs/noise.md).
    """
    prec = start
    while prec <= MAX_PRECISION:
        lo, hi = enclosure(prec)
        scaled = target * (1 << prec)
        if hi <= scaled:
            return True
        if lo > scaled:
            return False
        prec *= 2
    raise ArithmeticError("decide_le: could not separate the value from the target")
