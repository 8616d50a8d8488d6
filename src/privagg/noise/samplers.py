"""Exact samplers, vectorized over arrays (loops only over rejection rounds).

(The noise issue fills this module in; ``bernoulli_rational`` is here first because the
FriendlyCore filter needs it.)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from .rng import resolve_rng

__all__ = ["bernoulli_rational"]


def bernoulli_rational(
    numerator: Any, denominator: Any, size: Any = None, *, rng: Any = None
) -> np.ndarray:
    """Exact Bernoulli(numerator / denominator) draws, elementwise.

    ``numerator`` and ``denominator`` are integers or int64 arrays (broadcast together and with
    ``size``) with ``0 <= numerator <= denominator`` and ``denominator >= 1``. Each draw is
    ``U < numerator`` for ``U`` uniform on ``{0, …, denominator − 1}``; numpy's bounded-integer
    routine is exact (rejection), so ``P[True] = numerator / denominator`` exactly.

    Returns a bool array of the broadcast shape (or of ``size``).
    """
    gen, _ = resolve_rng(rng, "bernoulli_rational")
    num = np.asarray(numerator, dtype=np.int64)
    den = np.asarray(denominator, dtype=np.int64)
    if np.any(den < 1) or np.any(num < 0) or np.any(num > den):
        raise ValueError("bernoulli_rational: need 1 <= denominator and 0 <= numerator <= denominator")
    if size is None:
        size = np.broadcast_shapes(num.shape, den.shape)
    u = gen.integers(0, den, size=size, dtype=np.int64)
    return u < num


def bernoulli_fraction(p: Fraction, size: Any = None, *, rng: Any = None) -> np.ndarray:
    """Exact Bernoulli(p) for a scalar rational ``p`` in [0, 1]."""
    p = Fraction(p)
    return bernoulli_rational(p.numerator, p.denominator, size, rng=rng)
