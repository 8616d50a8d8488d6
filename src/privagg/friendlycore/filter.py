"""BasicFilter: keep each item with a probability that grows with its friend count.

With ``n`` items, friend counts ``c_i`` (self included) and ``α ∈ [0, 1/2)``::

    p_i = clip((c_i − n/2) / ((1/2 − α)·n), 0, 1) = clip((2c_i − n) / ((1 − 2α)·n), 0, 1)

and item ``i`` is kept independently with probability ``p_i`` (an exact rational Bernoulli draw
from the secure generator by default). ``p_i = 0`` at ``c_i <= n/2`` and ``p_i = 1`` at
``c_i >= (1 − α)·n``.

Rounding of α (stated, one-sided). The filter uses the rational ``α̃ <= α``: the fraction of
denominator at most 2**20 closest to α if it does not exceed α, else ``floor(α·2**20)/2**20``.
``p_i`` is non-decreasing in α, so the filter never keeps an item with more probability than the
formula with the given α, complete inputs still give ``p_i = 1``, and the conversion constant
``L(α̃) <= L(α)`` (see :mod:`privagg.friendlycore.conversion`).
"""

from __future__ import annotations

import numbers
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import fail, quiet_numerics
from ..noise.rng import resolve_rng
from ..noise.samplers import bernoulli_rational
from .kernel import friend_counts
from .predicates import as_predicate

__all__ = ["alpha_fraction", "basic_filter", "keep_probabilities"]

_ALPHA_DEN = 1 << 20
_MAX_N = 1 << 40


def alpha_fraction(alpha: Any, where: str = "basic_filter") -> Fraction:
    """The rational ``α̃ <= α`` the filter uses (module docstring); ``α`` must be in [0, 1/2)."""
    rule = "a number in [0, 0.5)"
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise fail(where, "alpha", rule, alpha)
    try:
        exact = Fraction(alpha)
    except (ValueError, OverflowError):
        raise fail(where, "alpha", rule, alpha) from None
    if not 0 <= exact < Fraction(1, 2):
        raise fail(where, "alpha", rule, alpha)
    near = exact.limit_denominator(_ALPHA_DEN)
    if near <= exact:
        return near
    return Fraction(int(exact * _ALPHA_DEN), _ALPHA_DEN)


def keep_probabilities(
    counts: Any, *, alpha: Any = 0.0, sizes: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact keep probabilities ``p_i = numerator_i / denominator`` of BasicFilter.

    Parameters
    ----------
    counts : array_like of int
        Friend counts ``c_i`` (self included) of a dataset of ``n = len(counts)`` items.
    alpha : float or Fraction
        In [0, 1/2); rounded down to ``α̃`` as in the module docstring.
    sizes : array_like of int, optional
        Many datasets at once (the grouped mean): ``sizes[i]`` is the size ``n`` of the dataset
        item ``i`` belongs to (then the denominators differ between datasets). Default: one
        dataset, ``n = len(counts)``.

    Returns
    -------
    (numpy.ndarray of int64, numpy.ndarray of int64)
        Numerators (shape (n,)) and denominators (shape (n,), all equal to ``(b − 2a)·n`` for
        ``α̃ = a/b``), with ``0 <= numerator <= denominator``.
    """
    where = "keep_probabilities"
    frac = alpha_fraction(alpha, where)
    c = np.asarray(counts, dtype=np.int64)
    n = c.shape[0]
    if c.ndim != 1 or n > _MAX_N:
        raise fail(
            where,
            "counts",
            "a 1-D integer array of length <= 2**40",
            f"shape={c.shape}",
        )
    a, b = frac.numerator, frac.denominator
    if sizes is not None:
        m = np.asarray(sizes, dtype=np.int64)
        dens = np.maximum((b - 2 * a) * m, 1)
        return np.clip((2 * c - m) * np.int64(b), 0, dens), dens
    den = np.int64((b - 2 * a) * n) if n else np.int64(1)
    num = np.clip((2 * c - n) * np.int64(b), 0, den)
    return num, np.full(n, den, dtype=np.int64)


@quiet_numerics
def basic_filter(
    points: Any, *, predicate: Any, alpha: Any = 0.0, rng: Any = None
) -> np.ndarray:
    """BasicFilter of FriendlyCore: the core mask (not a private release on its own).

    Counts every item's friends with :func:`privagg.friend_counts` and keeps item ``i``
    independently with probability ``p_i = clip((2c_i − n)/((1 − 2α)n), 0, 1)``, drawn exactly.

    Parameters
    ----------
    points : array_like
        The dataset, one item per row (2-D float ``(n, d)`` for ``ball``).
    predicate : Predicate or callable
        Symmetric friendship predicate with ``f(x, x) = 1``.
    alpha : float or Fraction
        In [0, 1/2): items with at least ``(1 − α)n`` friends are always kept. Rounded down
        to a rational of denominator <= 2**20 (module docstring).
    rng : None, int, SeedSequence or Generator
        ``None``: the secure generator.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        The core mask ``C``. Pass the core to a friendly algorithm as a multiset (or uniformly
        shuffled): :func:`privagg.friendlycore.friendly` does this for you.

    Privacy
    -------
    On its own the mask is not private. For add/remove neighbours ``D' = D ∪ {z}`` it has the
    properties proven in ``docs/proofs/friendlycore.md``: (P1) an f-complete ``D`` gives
    ``C = D``; (P2) every item either run can keep has more than half of its dataset as friends,
    so the union of both supports is f-friendly; (P3) ``Σ_{i≠z} |p_i − p'_i| <= 2/(1 − 2α)``,
    and with ``p'_z`` the total movement is at most ``L = 2(1 − α)/(1 − 2α) + α``, which yields
    the conversion theorem (:func:`privagg.end_to_end_budget`).

    Examples
    --------
    >>> import numpy as np
    >>> from privagg.friendlycore import ball
    >>> basic_filter(np.zeros((4, 2)), predicate=ball(1.0), rng=0).tolist()
    [True, True, True, True]
    """
    where = "basic_filter"
    pred = as_predicate(predicate, where)
    alpha_fraction(alpha, where)
    gen, _ = resolve_rng(rng, where)
    items = pred.prepare(points, where)
    return core_mask(items, pred, alpha, gen)


def core_mask(
    items: np.ndarray, pred: Any, alpha: Any, gen: np.random.Generator
) -> np.ndarray:
    """BasicFilter on prepared items with a resolved generator (shared with the wrapper)."""
    num, den = keep_probabilities(friend_counts(items, pred), alpha=alpha)
    return bernoulli_rational(num, den, rng=gen)
