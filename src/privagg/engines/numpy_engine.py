"""The in-memory engine: keys (and privacy units) held as 1-D arrays.

Record level it is :func:`privagg.engines.counting.count_keys`. User level
(:meth:`NumpyEngine.bounded_counts`) it bounds contributions without a Python loop over rows,
units or keys:

1. keys and units are factorized into integer codes (keys under the one key equality of
   :mod:`privagg.engines.counting`; a missing unit — None/null/NaN — is one more unit);
2. the distinct (unit, key) pairs and their row counts come from one ``np.unique`` on
   ``unit_code · K + key_code``;
3. each pair's priority π(u, k) (:mod:`privagg.engines.base`) is computed by DuckDB's vectorized
   ``hash()`` on the distinct values (so that it equals the DuckDB engine's, bit for bit);
4. ``np.lexsort((π, unit))`` ranks the pairs inside each unit; ranks < ℓ0 are kept, each with
   min(rows, ℓ∞); ``np.bincount`` sums them per key.

Cost: O(n log n) time, O(n) memory, whatever the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail
from .base import PRIORITY_SQL, BoundedCounts, Bounding, Engine
from .counting import (
    KeyCounts,
    _normalize,
    _positions,
    _positive_zero,
    as_domain,
    canonical_keys,
    count_keys,
    is_arrow,
    pa,
    pc,
    sort_order,
)

__all__ = ["NumpyEngine", "factorize"]

_DATA_RULE = (
    "a 1-D array-like of hashable keys (list, tuple, numpy array, pandas/polars Series, pyarrow Array)"
)


def factorize(data: Any, where: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques): ``uniques[codes[i]]`` is record i's canonical key; code −1 = missing.

    ``uniques`` holds distinct canonical keys (the same representatives as
    :func:`~privagg.engines.counting.count_keys`), as a numpy array.
    """
    x = _normalize(data, where, name, _DATA_RULE)
    if is_arrow(x):
        if isinstance(x, pa.ChunkedArray):
            x = x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
        enc = pc.dictionary_encode(x)
        codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        uniques = enc.dictionary.to_numpy(zero_copy_only=False)
        if uniques.dtype.kind == "f":  # half floats hashed by Arrow: canonical zeros, merge
            uniques = _positive_zero(uniques)
        return _merge_codes(codes, uniques)
    kind = x.dtype.kind
    if kind == "O":
        import pandas as pd

        try:
            codes, uniques = pd.factorize(x, sort=False, use_na_sentinel=True)
        except TypeError:
            raise fail(where, name, _DATA_RULE, "unhashable keys (e.g. list, dict or set)") from None
        return _merge_codes(codes.astype(np.int64), canonical_keys(np.asarray(uniques, dtype=object)))
    missing = None
    if kind == "f":
        missing = np.isnan(x)
        x = np.where(x == 0, x.dtype.type(0), x)
    elif kind in "mM":
        missing = np.isnat(x)
    if missing is not None and missing.any():
        uniques, inv = np.unique(x[~missing], return_inverse=True)
        codes = np.full(x.shape[0], -1, dtype=np.int64)
        codes[~missing] = inv
        return codes, uniques
    uniques, inv = np.unique(x, return_inverse=True)
    return inv.astype(np.int64).reshape(-1), uniques


def _merge_codes(codes: np.ndarray, uniques: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge classes that coincide after canonicalisation (codes −1 stay −1)."""
    import pandas as pd

    if uniques.dtype.kind != "O" or len(uniques) == 0:
        return codes, uniques
    inner, merged = pd.factorize(np.asarray(uniques, dtype=object), sort=False, use_na_sentinel=True)
    if len(merged) == len(uniques):
        return codes, uniques
    out = np.where(codes >= 0, inner[np.maximum(codes, 0)], -1)
    return out.astype(np.int64), np.asarray(uniques, dtype=object)[np.unique(inner, return_index=True)[1]]


def _as_duckdb_column(values: np.ndarray) -> Any:
    """The values as an Arrow array DuckDB types like the DuckDB engine's columns; objects that
    are not all strings (tuples, mixed types) as their typed text."""
    if values.dtype.kind == "O":
        try:
            arr = pa.array(values, from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
            arr = None
        if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_integer(arr.type)
                               or pa.types.is_floating(arr.type) or pa.types.is_boolean(arr.type)
                               or arr.type == pa.null()):
            texts = [None if v is None else f"{type(v).__module__}.{type(v).__qualname__}:{v!r}" for v in values]
            arr = pa.array(texts, type=pa.string())
        return arr
    return pa.array(values)


def value_hashes(values: np.ndarray) -> np.ndarray:
    """DuckDB's ``hash()`` of each value (uint64), plus, last, the hash of NULL of that type."""
    import duckdb

    arr = _as_duckdb_column(values)
    arr = pa.concat_arrays([arr, pa.nulls(1, type=arr.type)])
    table = pa.table({"v": arr})
    con = duckdb.connect(":memory:")
    try:
        con.register("vals", table)
        out = con.sql("SELECT hash(v) AS h FROM vals").fetchnumpy()["h"]
    finally:
        con.close()
    return np.asarray(out, dtype=np.uint64)


def pair_priorities(hu: np.ndarray, hk: np.ndarray, secret: int) -> np.ndarray:
    """π = hash(hash(s, hu, hk)) for aligned uint64 arrays of value hashes (DuckDB, vectorized)."""
    table = pa.table({"hu": pa.array(hu, type=pa.uint64()), "hk": pa.array(hk, type=pa.uint64())})
    # hash(u) for a UBIGINT u is what PRIORITY_SQL's inner hash() returned: pass hu, hk through
    # as already-hashed values, i.e. the same expression with hash(x) replaced by x.
    return table_priorities(table, PRIORITY_SQL.replace("hash({unit})", "hu").replace("hash({key})", "hk"),
                            secret)


def table_priorities(table: pa.Table, expr: str, secret: int) -> np.ndarray:
    """``SELECT expr`` over an Arrow table in DuckDB, in row order, with ``$secret`` bound (never
    formatted into the SQL): the keyed priorities of :data:`PRIORITY_SQL`, as uint64."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.sql("SET preserve_insertion_order = true")
        con.register("rows_", table)
        out = con.execute(f"SELECT {expr} AS p FROM rows_", {"secret": secret}).fetchnumpy()["p"]
    finally:
        con.close()
    return np.asarray(out, dtype=np.uint64)


class NumpyEngine(Engine):
    """Keys (and units) in memory. ``units`` is aligned with ``keys`` (same length), or None."""

    name = "numpy"

    def __init__(self, keys: Any, units: Any = None, *, where: str = "privagg") -> None:
        self._keys = keys
        self._units = units
        self._where = where
        self._factorized: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        if units is not None:
            k, u = self._codes()
            if k[0].shape[0] != u[0].shape[0]:
                # lengths are not shown: under add/remove n is private
                raise fail(where, "units", "an array-like of the same length as data", "another length")

    def _codes(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        if self._factorized is None:
            kc, ku = factorize(self._keys, self._where, "data")
            uc, uu = factorize(self._units, self._where, "units")
            self._factorized = (kc, ku, uc, uu)
        kc, ku, uc, uu = self._factorized
        return (kc, ku), (uc, uu)

    def count_keys(self) -> KeyCounts:
        return count_keys(self._keys, self._where)

    def _unit_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Unit codes 0..U (U = the missing unit) and the uint64 hash of every unit value."""
        (_, _), (uc, uu) = self._codes()
        hu = value_hashes(uu)  # last entry: hash(NULL), the missing unit's
        codes = np.where(uc >= 0, uc, len(hu) - 1)
        return codes, hu

    def bounded_counts(self, bounding: Bounding, *, domain: Any = None, keep_other: bool = False) -> BoundedCounts:
        (kc, ku), _ = self._codes()
        uc, hu = self._unit_codes()
        hk = value_hashes(ku)  # last entry: hash(NULL), the "other" pseudo-key
        n_keys = len(ku)
        if domain is not None:
            dom = as_domain(domain, self._where)
            pos = _positions(ku, dom) if n_keys else np.zeros(0, dtype=np.intp)
            kc = np.where(kc >= 0, pos[np.maximum(kc, 0)] if n_keys else -1, -1)  # -1: other
            out_keys = dom.keys
            hk = np.append(value_hashes(np.asarray(dom.keys))[:-1], hk[-1])
            n_keys = dom.size
        else:
            out_keys = ku
        code = np.where(kc >= 0, kc, n_keys)  # n_keys: the other pseudo-key
        if not keep_other:
            sel = code < n_keys
            code, uc = code[sel], uc[sel]
        width = np.int64(n_keys + 1)
        pairs, rows = np.unique(uc.astype(np.int64) * width + code, return_counts=True)
        pu, pk = pairs // width, pairs % width
        prio = pair_priorities(hu[pu], hk[pk], bounding.secret)
        order = np.lexsort((prio, pu))
        pu_s = pu[order]
        starts = np.flatnonzero(np.r_[True, pu_s[1:] != pu_s[:-1]])
        sizes = np.diff(np.r_[starts, pu_s.shape[0]])
        rank = np.arange(pu_s.shape[0]) - np.repeat(starts, sizes)
        kept = order[rank < bounding.max_keys_per_unit]
        contrib = np.minimum(rows[kept], bounding.max_rows_per_key)
        per_key = np.bincount(pk[kept], weights=contrib, minlength=n_keys + 1).astype(np.int64)
        other = int(per_key[n_keys])
        per_key = per_key[:n_keys]
        present = per_key > 0
        keys, per_key = np.asarray(out_keys)[present], per_key[present]
        order = sort_order(keys)  # a canonical order: noise is drawn key by key in this order
        kcounts = KeyCounts(keys=keys[order], counts=per_key[order], n=int(per_key.sum()) + other)
        return BoundedCounts(kcounts, other)

    def keys_per_unit(self, cap: int) -> np.ndarray:
        (kc, _), _ = self._codes()
        uc, _ = self._unit_codes()
        sel = kc >= 0
        width = np.int64(int(kc.max(initial=0)) + 1)
        pairs = np.unique(uc[sel].astype(np.int64) * width + kc[sel])
        per_unit = np.bincount(pairs // width, minlength=0)
        per_unit = np.minimum(per_unit[per_unit > 0], cap)
        return np.bincount(per_unit, minlength=cap + 1)[: cap + 1].astype(np.int64)

    def clamp_sum(self, lower: float, upper: float) -> float:
        x = np.asarray(self._keys, dtype=np.float64)
        return float(np.clip(x[~np.isnan(x)], lower, upper).sum())

