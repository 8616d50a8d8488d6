"""Friendship predicates for FriendlyCore.

A predicate ``f`` decides, for two items ``x`` and ``y`` (rows of an array), whether they are
"friends". FriendlyCore needs ``f`` to be symmetric (``f(x, y) == f(y, x)``) and reflexive
(``f(x, x) == 1``); the counting kernel evaluates every unordered pair exactly once and credits
the result to both items, and counts every item as its own friend without evaluating ``f``.

Interface. Every predicate is a :class:`Predicate`: it validates the items once
(:meth:`Predicate.prepare`, which turns user input into an array whose first axis indexes items)
and decides stacks of pairs at once (:meth:`Predicate.pairs`, vectorized over the first axis).
Items may have any shape: rows ``(d,)`` for :func:`ball`, ``(k, d)`` tuples of centers for the
k-tuple predicate of the clustering issue. The generic counting path in
:mod:`privagg.friendlycore.kernel` works for any predicate through :meth:`Predicate.pairs`;
:class:`Ball` also has the fast kernels (blocked matrix products, spatial index).

A plain Python callable ``f(x, y) -> bool`` is accepted wherever a predicate is
(:func:`as_predicate` wraps it in :class:`CallablePredicate`): the slow path for small ``n``,
one Python call per unordered pair.

What :func:`ball` decides, exactly. Items are converted to float64 and
``f(x, y) = 1`` iff ``sqdist(x, y) <= fl(r * r)``, where ``sqdist`` is the *direct formula*
evaluated in float64 in a fixed order: ``t_k = fl(x_k - y_k)``, ``acc = t_0*t_0``, then
``acc = fl(acc + fl(t_k*t_k))`` for ``k = 1, …, d-1`` (no fused multiply-add). This is exactly
symmetric (``fl(x - y) = -fl(y - x)``) and reflexive, and every kernel of this package returns the
counts of this decision (see ``docs/proofs/friendlycore.md``, "Numerics").

Non-finite rows are data, not errors (an error would reveal that such a row exists). :func:`ball`
maps every row with a NaN or an infinity to one extra element ``⊥`` of the domain and decides
``f(⊥, ⊥) = 1`` and ``f(⊥, y) = 0`` for every finite ``y``. This extended predicate is still
symmetric and reflexive, so every FriendlyCore argument applies to it unchanged; a friendly set
is then either all finite or all ``⊥``, and a ``⊥`` row can only enter a core when more than half
of the rows are ``⊥``.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validate import check_finite_positive, fail, real_array

__all__ = [
    "Ball",
    "CallablePredicate",
    "Predicate",
    "TupleMatch",
    "as_predicate",
    "ball",
    "squared_distance",
    "tuple_match",
]


def squared_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The direct formula: float64 squared distance summed over the last axis in index order.

    ``a`` and ``b`` broadcast together; the result has their broadcast shape without the last
    axis. Each term is ``fl(fl(a_k - b_k)**2)`` and the terms are added one at a time, left to
    right, so the value is fully determined by the inputs (no dependence on array layout,
    blocking or BLAS) and monotone in every ``|a_k - b_k|``.
    """
    d = a.shape[-1]
    t = a[..., 0] - b[..., 0]
    acc = t * t
    for k in range(1, d):
        t = a[..., k] - b[..., k]
        t *= t
        acc += t
    return acc


class Predicate(abc.ABC):
    """A symmetric, reflexive friendship predicate over items (rows of an array).

    Subclasses implement :meth:`pairs`; they may override :meth:`prepare` to validate items.
    The contract (not checked): ``pairs(a, b) == pairs(b, a)`` elementwise, and an item is
    always a friend of itself (the kernel counts it without asking).
    """

    def prepare(self, items: Any, where: str) -> np.ndarray:
        """Validate ``items`` and return an array whose first axis indexes the items."""
        arr = np.asarray(items)
        if arr.ndim < 1:
            raise fail(
                where, "points", "an array with one item per row", f"ndim={arr.ndim}"
            )
        return arr

    @abc.abstractmethod
    def pairs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Decide ``f(a[m], b[m])`` for every ``m``; returns a bool array of length ``len(a)``."""


class Ball(Predicate):
    """``f(x, y) = 1`` iff the ℓ2 distance of ``x`` and ``y`` is at most ``radius``.

    Items are rows of a 2-D float array ``(n, d)``, converted to float64. The decision is
    ``squared_distance(x, y) <= fl(radius**2)`` for finite rows; non-finite rows are friends of
    each other only (module docstring).
    """

    def __init__(self, radius: float) -> None:
        r = check_finite_positive("ball", "radius", radius)
        r2 = r * r
        if not math.isfinite(r2) or r2 < 2.0**-900:
            raise fail(
                "ball",
                "radius",
                "a number whose square is in [2**-900, 2**1000]",
                radius,
            )
        self.radius = r
        self.radius_sq = r2

    def __repr__(self) -> str:
        return f"ball({self.radius!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ball) and other.radius == self.radius

    def __hash__(self) -> int:
        return hash(("ball", self.radius))

    def prepare(self, items: Any, where: str) -> np.ndarray:
        # float64 (n, d); in a list an entry that is not a real number becomes NaN (a ⊥ row):
        # privagg._validate.real_array, errors only for the shape or an array's dtype.
        return real_array(where, items, 2)

    def pairs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        close = squared_distance(a, b) <= self.radius_sq
        bad_a = ~np.isfinite(a).all(axis=-1)
        bad_b = ~np.isfinite(b).all(axis=-1)
        return np.where(bad_a | bad_b, bad_a & bad_b, close)


class CallablePredicate(Predicate):
    """A user callable ``f(x, y) -> bool`` (slow path: one Python call per unordered pair).

    The callable must be symmetric and satisfy ``f(x, x) = 1``; the kernel calls it once per
    unordered pair ``i < j`` with ``x = items[i]``, ``y = items[j]`` and never on the diagonal.
    """

    def __init__(self, func: Callable[[Any, Any], Any]) -> None:
        self.func = func

    def __repr__(self) -> str:
        return f"as_predicate({self.func!r})"

    def pairs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        f = self.func
        return np.fromiter(
            (bool(f(x, y)) for x, y in zip(a, b)), dtype=bool, count=len(a)
        )


def ball(radius: float) -> Ball:
    """The ℓ2-ball predicate ``dist_r``: ``f(x, y) = 1`` iff ``‖x − y‖₂ ≤ radius``.

    Parameters
    ----------
    radius : float
        Finite, > 0 (public).

    Returns
    -------
    Ball
        Counted by :func:`privagg.friend_counts` with blocked float64 matrix products (any
        ``d``) or a spatial index that counts whole subtrees (``d <= 8``); both give the counts
        of the exact decision described in the module docstring.

    Examples
    --------
    >>> import numpy as np
    >>> f = ball(1.0)
    >>> bool(f.pairs(np.array([[0.0, 0.0]]), np.array([[0.6, 0.8]]))[0])
    True
    """
    return Ball(radius)


class TupleMatch(Predicate):
    """Tuples of ``k`` centers that match one to one within ``radius``, both well separated.

    Items are ``(k, d)`` arrays (a stack ``(n, k, d)``), converted to float64. With the direct
    formula ``D_ab = squared_distance(X_a, Y_b)``, ``r2 = fl(radius**2)`` and
    ``s2 = fl(fl(36 * r2) * (1 + 2**-20))`` (separation ``6r`` with a margin for rounding),
    for two finite tuples ``f(X, Y) = 1`` iff

    * ``X`` and ``Y`` are equal entry by entry, or
    * ``sep(X) > s2`` and ``sep(Y) > s2`` (``sep``: the least ``D`` between two centers of one
      tuple; ``+inf`` for ``k = 1``), and ``cost(X, Y) <= r2`` with
      ``cost = max(max_a min_b D_ab, max_b min_a D_ab)``: every center of either tuple has a
      center of the other within ``r``.

    Under the separation, a center has at most one partner within ``r`` (two would be within
    ``2r < 6r`` of each other), so the second case is "some bijection ``π`` has
    ``‖X_a − Y_π(a)‖ <= r`` for all ``a``". The decision is exactly symmetric (``D`` of the
    swapped pair is the transpose, the cost is symmetric in rows and columns) and reflexive (the
    equality case). A tuple with a NaN or an infinity is the extra element ``⊥`` (friend of
    other ``⊥`` tuples only), as for :func:`ball`. Proof of the uses: ``docs/proofs/kmeans.md``.
    """

    def __init__(self, radius: float) -> None:
        r = check_finite_positive("tuple_match", "radius", radius)
        r2 = r * r
        if not math.isfinite(37.0 * r2) or r2 < 2.0**-900:
            raise fail("tuple_match", "radius", "a number whose square is in [2**-900, 2**1000]", radius)
        self.radius = r
        self.radius_sq = r2
        self.separation_sq = 36.0 * r2 * (1.0 + 2.0**-20)

    def __repr__(self) -> str:
        return f"tuple_match({self.radius!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TupleMatch) and other.radius == self.radius

    def __hash__(self) -> int:
        return hash(("tuple_match", self.radius))

    def prepare(self, items: Any, where: str) -> np.ndarray:
        return real_array(where, items, 3)  # as Ball.prepare, for (n, k, d) stacks

    @staticmethod
    def separation(items: np.ndarray) -> np.ndarray:
        """``sep`` of each tuple of a stack ``(n, k, d)``: least squared distance of two of its
        centers (direct formula; ``+inf`` for ``k = 1``; NaN for a non-finite tuple)."""
        n, k, _ = items.shape
        a, b = np.triu_indices(k, 1)
        if a.size == 0:
            return np.full(n, np.inf)
        return squared_distance(items[:, a, :], items[:, b, :]).min(axis=1)

    @staticmethod
    def match_cost(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For stacks ``a``, ``b`` of shape ``(m, k, d)``: ``(cost, equal)`` of each pair."""
        dist = squared_distance(a[:, :, None, :], b[:, None, :, :])
        cost = np.maximum(dist.min(axis=2).max(axis=1), dist.min(axis=1).max(axis=1))
        equal = (a == b).all(axis=(1, 2))
        return cost, equal

    def pairs(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        cost, equal = self.match_cost(a, b)
        sep = np.minimum(self.separation(a), self.separation(b))
        close = equal | ((sep > self.separation_sq) & (cost <= self.radius_sq))
        bad_a = ~np.isfinite(a).all(axis=(1, 2))
        bad_b = ~np.isfinite(b).all(axis=(1, 2))
        return np.where(bad_a | bad_b, bad_a & bad_b, close)


def tuple_match(radius: float) -> TupleMatch:
    """The k-tuple predicate of clustering: one-to-one match within ``radius``, separation ``6r``.

    Parameters
    ----------
    radius : float
        Finite, > 0 (public).

    Returns
    -------
    TupleMatch
        Items are ``(k, d)`` tuples of centers; counted by the generic path of
        :func:`privagg.friend_counts` (exact decision in :class:`TupleMatch`).

    Examples
    --------
    >>> import numpy as np
    >>> f = tuple_match(1.0)
    >>> x = np.array([[[0.0, 0.0], [10.0, 0.0]]])
    >>> y = np.array([[[10.5, 0.0], [0.0, 0.5]]])
    >>> bool(f.pairs(x, y)[0])
    True
    """
    return TupleMatch(radius)


def as_predicate(predicate: Any, where: str = "friend_counts") -> Predicate:
    """Return ``predicate`` itself if it is a :class:`Predicate`, wrap a callable, else fail."""
    if isinstance(predicate, Predicate):
        return predicate
    if callable(predicate):
        return CallablePredicate(predicate)
    raise fail(
        where,
        "predicate",
        "a privagg predicate or a callable f(x, y) -> bool",
        predicate,
    )
