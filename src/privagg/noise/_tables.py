"""Exact sampling by inversion with certified 64-bit threshold tables.

A table describes an increasing sequence of probabilities ``C_0 < C_1 < … < C_{m-1}`` (values of
a CDF) and stores ``T_j = floor(C_j · 2^64)``, each certified from integer enclosures
(:mod:`._exact`). With ``U`` uniform on [0, 1) and its first 64 bits ``u = floor(U · 2^64)``,
the index ``I = min{j : U < C_j}`` (``m`` if none) is computed exactly:

* ``u < T_j``  ⇒ ``U < (u+1)/2^64 <= T_j/2^64 <= C_j``: certainly ``U < C_j``;
* ``u > T_j``  ⇒ ``U >= u/2^64 >= (T_j+1)/2^64 > C_j``: certainly ``U >= C_j``;
* ``u == T_j`` is undecided; those (rare: probability ``<= m·2^-64``) draws are resolved by
  reading further 64-bit words of ``U`` and comparing with ever finer enclosures of ``C_j``.

``np.searchsorted(T, u, side="right")`` returns ``#{j : T_j <= u}``, which equals ``I`` unless
``T_{I-1} == u``; that case is detected in bulk and passed to the exact slow path.

A :class:`LazyTable` holds the same law without its full threshold array: each ``T_j`` is
certified on demand (and kept), so a handful of draws at a new parameter costs a few entries
instead of thousands. A float approximation of the CDF only says where to look first; every
decision is still an exact integer comparison with a certified ``T_j``, so the index and the
words drawn are the same as with the full table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ._exact import MAX_PRECISION, Interval

__all__ = [
    "InversionTable",
    "LazyTable",
    "certify_entry",
    "certify_thresholds",
    "invert",
    "random_words",
]

TWO64 = 1 << 64


def random_words(gen: np.random.Generator, n: int) -> np.ndarray:
    """``n`` uniform 64-bit words from the generator's bit generator (uint64 array)."""
    return gen.bit_generator.random_raw(n)


@dataclass(frozen=True, eq=False)
class InversionTable:
    """Certified thresholds of one CDF.

    ``enclosures(prec)`` returns the list of enclosures ``(lo, hi)`` of ``C_j · 2^prec`` for
    all ``j`` (cached by the caller); ``thresholds[j] = floor(C_j · 2^64)`` exactly.
    """

    thresholds: np.ndarray
    enclosures: Callable[[int], list[Interval]] = field(repr=False)

    @property
    def size(self) -> int:
        return int(self.thresholds.size)


def _floor64(lo: int, hi: int, shift: int) -> int | None:
    """``floor(C · 2^64)`` from an enclosure of ``C · 2^(64 + shift)``, or ``None`` if undecided.

    Decided when both ends floor to the same integer, or when the lower end is already at
    ``2^64 − 1`` (``C < 1``, see :func:`certify_thresholds`).
    """
    a, b = lo >> shift, hi >> shift
    if a == b or a >= TWO64 - 1:
        return min(a, TWO64 - 1)
    return None


def certify_entry(enclosure: Callable[[int], Interval], start: int = 128) -> int:
    """``floor(C · 2^64)`` for one value given by ``enclosure(prec)``, decided exactly.

    The same rule as :func:`certify_thresholds` for one entry: any valid enclosures give the
    same (exact) integer, so a table certified entry by entry equals the one certified at once.
    """
    prec = start
    while True:
        lo, hi = enclosure(prec)
        value = _floor64(lo, hi, prec - 64)
        if value is not None:
            return value
        prec *= 2
        if prec > MAX_PRECISION:
            raise ArithmeticError("certify_entry: could not certify a table entry")


def certify_thresholds(
    enclosures: Callable[[int], list[Interval]], start: int = 128
) -> np.ndarray:
    """``floor(C_j · 2^64)`` for every ``j``, each decided exactly.

    An entry is decided when both ends of its enclosure floor to the same integer; undecided
    entries are recomputed at doubled precision (the values are irrational for our laws, see
    docs/proofs/noise.md, so this ends; a cap turns the impossible case into an error).

    Precondition: every ``C_j < 1`` (a CDF value at a finite point of a law with infinite
    support). Hence ``floor(C_j · 2^64) <= 2^64 − 1``, and a lower end already at ``2^64 − 1``
    decides the entry — without this, ``C_j = 1 − e^{−500000}`` (scale 2e-6) would need
    ~721,000 bits.
    """
    prec = start
    values = enclosures(prec)
    result: list[int | None] = [None] * len(values)
    pending = list(range(len(values)))
    while pending:
        shift = prec - 64
        still = []
        for j in pending:
            value = _floor64(*values[j], shift)
            if value is None:
                still.append(j)
            else:
                result[j] = value
        pending = still
        if pending:
            prec *= 2
            if prec > MAX_PRECISION:
                raise ArithmeticError(
                    "certify_thresholds: could not certify a table entry"
                )
            values = enclosures(prec)
    return np.array(result, dtype=np.uint64)


class LazyTable:
    """Certified thresholds of one CDF, each computed when first needed (then kept).

    ``entry(j, prec)`` encloses ``C_j · 2^prec`` for one ``j``; ``approx()`` returns float64
    values near ``C_j · 2^64`` for all ``j`` (a search hint, never a decision);
    ``enclosures(prec)`` is the *same* full-table function the eager :class:`InversionTable`
    uses, so the rare undecided draws read exactly the same extra words.
    """

    def __init__(
        self,
        size: int,
        entry: Callable[[int, int], Interval],
        approx: Callable[[], np.ndarray],
        enclosures: Callable[[int], list[Interval]],
    ) -> None:
        self.size = size
        self.enclosures = enclosures
        self._entry = entry
        self._approx = approx
        self._hint: np.ndarray | None = None
        self._known: dict[int, int] = {}

    @property
    def certified(self) -> int:
        """How many entries have been certified so far."""
        return len(self._known)

    def threshold(self, j: int) -> int:
        """The certified ``T_j = floor(C_j · 2^64)``."""
        value = self._known.get(j)
        if value is None:
            value = certify_entry(lambda prec: self._entry(j, prec))
            self._known[j] = value
        return value

    def hint(self) -> np.ndarray:
        """Non-decreasing float64 approximations of ``C_j · 2^64`` (computed once)."""
        if self._hint is None:
            self._hint = np.maximum.accumulate(np.asarray(self._approx(), dtype=np.float64))
        return self._hint

    def count_le(self, u: int, guess: int) -> int:
        """``#{j : T_j <= u}`` exactly; ``guess`` (any int) only orders the probes.

        Probes ``T_guess`` and one neighbour (both usually decide it), then bisects the
        remaining range; ``T`` is non-decreasing, so ``j ↦ [T_j <= u]`` is monotone.
        """
        lo, hi = 0, self.size  # the answer lies in [lo, hi]
        g = min(max(guess, 0), self.size)
        if g < hi:
            if self.threshold(g) <= u:
                lo = g + 1
                if lo < hi:
                    if self.threshold(lo) <= u:
                        lo += 1
                    else:
                        hi = lo
            else:
                hi = g
                if g > 0:
                    if self.threshold(g - 1) <= u:
                        lo = g
                    else:
                        hi = g - 1
        elif g > 0:
            if self.threshold(g - 1) > u:
                hi = g - 1
            else:
                lo = g
        while lo < hi:
            mid = (lo + hi) // 2
            if self.threshold(mid) <= u:
                lo = mid + 1
            else:
                hi = mid
        return lo


def _resolve(
    table: InversionTable | LazyTable, u: int, first: int, stop: int, gen: np.random.Generator
) -> int:
    """Exact ``min{j in [first, stop) : U < C_j}`` (else ``stop``) for ``U`` starting with ``u``.

    ``U`` lies in ``[bits, bits+1) / 2^nbits``; one more 64-bit word refines it when the
    enclosure of ``C_j`` at precision ``nbits + 8`` cannot tell the two apart.
    """
    bits, nbits = u, 64
    for j in range(first, stop):
        while True:
            lo, hi = table.enclosures(nbits + 8)[j]
            if (bits + 1) << 8 <= lo:  # U < (bits+1)/2^nbits <= C_j
                return j
            if bits << 8 >= hi:  # U >= bits/2^nbits >= C_j
                break
            bits = (bits << 64) | int(random_words(gen, 1)[0])
            nbits += 64
    return stop


def _invert_lazy(
    table: LazyTable, u: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """:func:`invert` through a :class:`LazyTable`: the same indices, the same words drawn.

    Per word: ``i = #{j : T_j <= u}`` by :meth:`LazyTable.count_le`; if ``T_{i-1} == u`` the
    draw is resolved by :func:`_resolve` from ``first = #{j : T_j < u} = #{j : T_j <= u − 1}``,
    in index order, exactly as the eager path does. A loop over the draws: only used when
    there are few of them (a public choice on ``size`` and the parameter).
    """
    guess = np.searchsorted(table.hint(), u.astype(np.float64), side="right")
    out = np.empty(u.shape, dtype=np.int64)
    flat_u, flat_g, flat_out = u.ravel(), guess.ravel(), out.reshape(-1)
    for i in range(flat_u.size):
        ui = int(flat_u[i])
        stop = table.count_le(ui, int(flat_g[i]))
        if stop > 0 and table.threshold(stop - 1) == ui:
            first = table.count_le(ui - 1, stop - 1) if ui > 0 else 0
            stop = _resolve(table, ui, first, stop, gen)
        flat_out[i] = stop
    return out


def invert(
    table: InversionTable | LazyTable, u: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """Exact inversion: ``I = min{j : U < C_j}`` (``table.size`` if none) for words ``u``.

    Returns an int64 array shaped like ``u``. ``gen`` supplies the extra words of the rare
    undecided draws. A :class:`LazyTable` gives the same result and draws the same words.
    """
    if isinstance(table, LazyTable):
        return _invert_lazy(table, u, gen)
    t = table.thresholds
    idx = np.searchsorted(t, u, side="right")
    # T[idx-1] == u flags the undecided draws. For idx == 0, take() wraps to T[-1] >= T[0] > u,
    # so it never flags them by mistake.
    undecided = np.flatnonzero(t.take(idx - 1) == u)
    for i in undecided:
        stop = int(idx[i])
        ui = int(u[i])
        first = int(np.searchsorted(t, u[i], side="left"))
        idx[i] = _resolve(table, ui, first, stop, gen)
    return idx.astype(np.int64, copy=False)
