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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ._exact import MAX_PRECISION, Interval

__all__ = ["InversionTable", "certify_thresholds", "invert", "random_words"]

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
            lo, hi = values[j]
            a, b = lo >> shift, hi >> shift
            if a == b or a >= TWO64 - 1:
                result[j] = min(a, TWO64 - 1)
            else:
                still.append(j)
        pending = still
        if pending:
            prec *= 2
            if prec > MAX_PRECISION:
                raise ArithmeticError(
                    "certify_thresholds: could not certify a table entry"
                )
            values = enclosures(prec)
    return np.array(result, dtype=np.uint64)


def _resolve(
    table: InversionTable, u: int, first: int, stop: int, gen: np.random.Generator
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


def invert(
    table: InversionTable, u: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """Exact inversion: ``I = min{j : U < C_j}`` (``table.size`` if none) for words ``u``.

    Returns an int64 array shaped like ``u``. ``gen`` supplies the extra words of the rare
    undecided draws.
    """
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
