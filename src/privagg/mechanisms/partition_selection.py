"""The optimal (ε, δ) partition selection for ℓ0 = 1 ("truncated geometric").

Desfontaines, Voss, Gipson, Mandayam, "Differentially private partition selection", PoPETs 2022
(arXiv:2006.03684): when each unit contributes to at most one key, a key with n distinct units is
kept with probability p(n), independently per key, where

    p(0) = 0,   p(n) = min(e^ε p(n−1) + δ,  1 − e^{−ε}(1 − p(n−1) − δ),  1)

is the largest keep-probability allowed by the two (ε, δ) constraints between n − 1 and n units
(the paper's Theorem: no (ε, δ)-DP selection keeps any key with higher probability). Closed form:
p(n) = δ(e^{nε} − 1)/(e^ε − 1) up to a first crossover, then 1 − (1 − p(n₁) + δ/(e^ε − 1))e^{−(n−n₁)ε}
+ δ/(e^ε − 1), then 1 (checked against it in the tests).

Exactness. privagg evaluates the recursion on the grid 2^−62 with ε replaced by a rational
L ≤ e^ε and δ by ⌊δ·2^62⌋·2^−62, and rounds every p(n) *down*. Each step then still satisfies
p(n) ≤ e^ε p(n−1) + δ and 1 − p(n−1) ≤ e^ε (1 − p(n)) + δ, and p is non-decreasing (so the
reverse inequalities hold trivially): these are all the constraints of (ε, δ)-DP for one key's
keep/drop under adding or removing one unit, whose key goes from n − 1 to n units
(docs/proofs/histograms.md §8). The keep draws are exact Bernoulli(P/2^62)
(:func:`privagg.noise.samplers.bernoulli_rational`). The table has at most ~2(ln(1/δ) + 1)/ε
entries before p reaches 1; ε below ``EPS_MIN`` is refused (a public parameter).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from .._validate import fail

__all__ = ["EPS_MIN", "GRID_BITS", "keep_numerators", "probability_of_keep"]

GRID_BITS = 62
_ONE = 1 << GRID_BITS
#: Smallest ε of the selection (the table would exceed ~10⁶ entries below it).
EPS_MIN = 2.0**-10


def _exp_down(x: Fraction) -> Fraction:
    """A rational lower bound of e^x (mpmath at 40 digits, a float moved down two ulps)."""
    with mpmath.workdps(40):
        value = float(mpmath.exp(mpmath.mpf(x.numerator) / x.denominator))
    return Fraction(math.nextafter(math.nextafter(value, 0.0), 0.0))


def keep_numerators(epsilon: Any, delta: Any, *, where: str = "stable_histogram") -> np.ndarray:
    """P[n] (int64) for n = 0, 1, …, N with p(n) = P[n] / 2^62 and P[N] = 2^62 (then p = 1 for all
    larger n): the rounded-down table of the module docstring, for the selection's (ε, δ)."""
    eps, dlt = Fraction(epsilon), Fraction(delta)
    if not (eps >= Fraction(EPS_MIN) and 0 < dlt < 1):
        raise fail(where, "epsilon", f"a selection ε >= {EPS_MIN} (selection='optimal') and δ in (0, 1)", float(eps))
    big_l = _exp_down(eps)
    ln, ld = big_l.numerator, big_l.denominator
    d = (dlt.numerator * _ONE) // dlt.denominator  # ⌊δ·2^62⌋
    out = [0]
    p = 0
    while p < _ONE:
        a = (ln * p) // ld + d  # ⌊L p⌋ + ⌊δ⌋ on the grid: ≤ L p + δ
        rest = _ONE - p - d
        b = _ONE - (-((-rest * ld) // ln)) if rest > 0 else _ONE  # 1 − ⌈(1 − p − δ)/L⌉
        p = min(a, b, _ONE)
        out.append(p)
        if len(out) > 2_000_000:  # unreachable for ε >= EPS_MIN
            raise fail(where, "epsilon", f"a selection ε >= {EPS_MIN}", float(eps))
    return np.asarray(out, dtype=np.int64)


def probability_of_keep(n: Any, epsilon: Any, delta: Any) -> np.ndarray | float:
    """p(n): the probability that a key with ``n`` distinct units is kept (exactly what the
    mechanism draws: the grid value of :func:`keep_numerators`, as a float)."""
    table = keep_numerators(epsilon, delta)
    idx = np.minimum(np.asarray(n, dtype=np.int64), table.size - 1)
    out = np.where(idx > 0, table[np.maximum(idx, 0)], 0) / float(_ONE)
    return float(out) if np.ndim(out) == 0 else out


def select(unit_counts: np.ndarray, epsilon: Any, delta: Any, gen: np.random.Generator) -> np.ndarray:
    """Keep mask: each key with c ≥ 1 distinct units kept with probability p(c), independently."""
    from ..noise.samplers import bernoulli_rational

    table = keep_numerators(epsilon, delta)
    c = np.minimum(np.asarray(unit_counts, dtype=np.int64), table.size - 1)
    num = np.where(c > 0, table[np.maximum(c, 0)], 0)
    return bernoulli_rational(num, _ONE, rng=gen) & (c > 0)
