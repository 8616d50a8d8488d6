"""Vectorized counting of keys held in memory, and alignment of counts with a public domain.

This is the in-memory engine of the histogram mechanisms: it turns a 1-D column of hashable keys
into the counts of the keys that are present (:class:`KeyCounts`), without a Python loop over
records or keys on the usual paths:

- booleans and integers of at most 16 bits: ``np.bincount`` (the dtype, which is public, bounds
  the range); wider integers and floats: ``np.unique`` (a sort), so a domain of 10^12 possible
  keys costs nothing. The choice depends on the dtype only, never on the values;
- strings, bytes and other Arrow types: ``pyarrow.compute.value_counts`` (hashing);
- untyped Python objects (lists, tuples, object arrays): ``pandas.factorize`` (hashing).

Missing keys (``None``, Arrow nulls, float NaN) are counted in ``n`` but belong to no key: they are
never released and behave like records outside a public domain. Other engines (DuckDB) build a
:class:`KeyCounts` of their own and share the mechanisms' core.

Key equality (one rule for every engine). The released key's type and spelling are a function
of its equivalence class and of the public schema only, never of other records or their order:

- *Typed* inputs — numpy arrays of a non-object dtype, typed pandas Series, Arrow and polars
  arrays, DuckDB columns — keep the column's type (schema). Keys are equal when their values are
  equal in that type; float keys are canonical: −0.0 is released as +0.0 (NaN is missing).
- *Untyped* inputs — Python lists and tuples, object arrays, object Series — are compared by
  Python equality, as dict keys are (``1 == 1.0 == True``), and each class is released under a
  fixed representative: a number (bool, int, float, numpy scalar, ``Decimal``, ``Fraction``)
  that is finite and integral is the ``int`` (``True`` → 1, ``2.0`` → 2, ``-0.0`` → 0); another
  number equal to a float is that ``float``; anything else (strings, other ``Decimal``, dates, …)
  is itself; tuples are canonicalised element by element. So ``[1, 2, 1.5]`` releases the keys
  ``1, 2, 1.5`` whatever comes first, and a list of bools releases 0 and 1. (Strings are never
  equal to numbers: ``"1"`` and ``1`` are two keys.)

A public domain is canonicalised by the same rule, so that its keys align with the data's.

Errors depend only on public information (the shape and type of the input), never on its values.
"""

from __future__ import annotations

import decimal
import fractions
import functools
import importlib
import numbers
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import fail

__all__ = [
    "KeyCounts", "Domain", "count_keys", "as_domain", "align_to_domain", "canonical_keys", "sort_order", "is_arrow",
]

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

    KeyArray = np.ndarray | pa.Array | pa.ChunkedArray
else:

    class _LazyModule:
        """A module imported on first attribute access: pyarrow costs ~0.2 s to import, and the
        DuckDB engine (which hands over numpy keys) never needs it."""

        def __init__(self, name: str) -> None:
            self._name = name

        def __getattr__(self, attr: str) -> Any:
            return getattr(importlib.import_module(self._name), attr)

    pa = _LazyModule("pyarrow")
    pc = _LazyModule("pyarrow.compute")
    KeyArray = Any


def is_arrow(x: Any) -> bool:
    """True for a pyarrow Array or ChunkedArray, without importing pyarrow if nothing has."""
    mod = sys.modules.get("pyarrow")
    return mod is not None and isinstance(x, (mod.Array, mod.ChunkedArray))


_DATA_RULE = (
    "a 1-D array-like of hashable keys (list, tuple, numpy array, pandas/polars Series, pyarrow Array)"
)
_DOMAIN_RULE = "a non-empty 1-D sequence of distinct, non-missing hashable keys"


@dataclass(frozen=True, eq=False)  # arrays: compare by identity
class KeyCounts:
    """Counts of the keys present in a data set.

    Attributes
    ----------
    keys : numpy.ndarray or pyarrow.Array
        The distinct non-missing keys, each present at least once, in any order.
    counts : numpy.ndarray of int64
        ``counts[i]`` ≥ 1 is the number of records with key ``keys[i]``.
    n : int
        The number of records, including those whose key is missing (None/null/NaN).
    """

    keys: KeyArray
    counts: np.ndarray
    n: int


@dataclass(frozen=True, eq=False)  # arrays: compare by identity
class Domain:
    """A validated public domain: distinct, non-missing keys in the user's order.

    Build with :func:`as_domain`. Lookup structures are built once, on first use.
    """

    keys: np.ndarray

    @property
    def size(self) -> int:
        return int(self.keys.shape[0])

    @functools.cached_property
    def sorted_numeric(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, keys[order]) for numeric keys: a sorted table for ``np.searchsorted``."""
        order = np.argsort(self.keys, kind="stable")
        return order, self.keys[order]

    @functools.cached_property
    def arrow_strings(self) -> pa.Array | None:
        """The keys as an Arrow string array when every key is a str, else None."""
        return _maybe_strings(self.keys) if self.keys.dtype.kind == "O" else None


# --------------------------------------------------------------------------------------------
# normalisation of 1-D inputs
# --------------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _object_array(items: list | tuple) -> np.ndarray:
    """A 1-D object array of the items (np.asarray would turn tuples into a 2-D array)."""
    return np.fromiter(items, dtype=object, count=len(items))


def _normalize(data: Any, where: str, name: str, rule: str) -> np.ndarray | pa.Array | pa.ChunkedArray:
    """Turn a supported 1-D input into a numpy array (numeric or object) or an Arrow array."""
    module = type(data).__module__.split(".")[0]
    if is_arrow(data):
        return _from_arrow(data, where, name, rule)
    if module == "polars":
        if type(data).__name__ != "Series":
            raise fail(where, name, rule, f"a polars {type(data).__name__}")
        return _from_arrow(data.to_arrow(), where, name, rule)
    if module == "pandas":
        if getattr(data, "ndim", None) != 1:
            raise fail(
                where, name, rule, f"a pandas {type(data).__name__} with ndim={getattr(data, 'ndim', '?')}"
            )
        dtype = data.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "iufbmM":
            return _from_numpy(data.to_numpy(), where, name, rule)
        if dtype == object:  # untyped: Python equality, canonical keys (strings: Arrow, faster)
            strings = _string_array(data)
            return data.to_numpy(dtype=object) if strings is None else strings
        try:
            arrow = pa.Array.from_pandas(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError):
            return data.to_numpy(dtype=object)
        if pa.types.is_nested(arrow.type):  # tuples (hashable) or lists (not): decided when counting
            return data.to_numpy(dtype=object)
        return _from_arrow(arrow, where, name, rule)
    if isinstance(data, np.ndarray):
        return _from_numpy(data, where, name, rule)
    if isinstance(data, range):
        return np.arange(data.start, data.stop, data.step, dtype=np.int64)
    if isinstance(data, (list, tuple)):  # untyped: Python equality, canonical keys
        fast = _int_list(data)
        if fast is not None:
            return fast
        strings = _string_array(data)
        return _object_array(data) if strings is None else strings
    raise fail(where, name, rule, _type_name(data))


def _int_list(data: list | tuple) -> np.ndarray | None:
    """A list of ints and bools only as an int64 array (fast path: ints are their own canonical
    keys, bools become 0/1), else None. A list holding any float, None or other object is not
    converted here, so that one record never changes the type of the others' keys."""
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError, OverflowError):
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "iub":
        return None
    return arr.astype(np.int64) if arr.dtype.kind == "b" else arr


def _string_array(data: Any) -> pa.Array | None:
    """Untyped data holding only str (and missing values) as an Arrow string array, else None."""
    try:
        arrow = pa.array(data, from_pandas=True) if type(data).__module__.startswith("pandas") else pa.array(data)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError, ValueError):
        return None
    return arrow if (pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type)) else None


def _from_numpy(arr: np.ndarray, where: str, name: str, rule: str) -> np.ndarray | pa.Array:
    if arr.ndim != 1:
        raise fail(where, name, rule, f"an array of shape {arr.shape}")
    kind = arr.dtype.kind
    if kind in "US":
        return pa.array(arr)
    if kind == "V":
        raise fail(where, name, rule, f"an array of dtype {arr.dtype}")
    return arr


def _from_arrow(arr: pa.Array | pa.ChunkedArray, where: str, name: str, rule: str) -> np.ndarray | pa.Array:
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr = arr.cast(typ.value_type)
        typ = arr.type
    if pa.types.is_nested(typ):
        raise fail(where, name, rule, f"keys of unhashable Arrow type {typ}")
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ) or pa.types.is_floating(typ):
        if arr.null_count == 0:
            return _to_numpy(arr)
        # nulls are missing keys: keep them visible as NaN (floats) or in the Arrow array
        if pa.types.is_floating(typ):
            return _to_numpy(pc.fill_null(arr, float("nan")))
        return arr
    return arr


def _to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr.to_numpy(zero_copy_only=False)


# --------------------------------------------------------------------------------------------
# counting
# --------------------------------------------------------------------------------------------


def count_keys(data: Any, where: str = "count_keys", name: str = "data") -> KeyCounts:
    """Count every distinct key of a 1-D in-memory column.

    Parameters
    ----------
    data : array-like
        list/tuple, numpy array, pandas or polars Series, pyarrow Array or ChunkedArray of
        hashable keys. ``None``, nulls and float NaN are missing keys (counted in ``n`` only).
    where, name : str
        Function and parameter names used in error messages.

    Returns
    -------
    KeyCounts
        Present keys (numpy array, sorted when the keys are mutually comparable), their counts
        (int64, ≥ 1) and the number of records ``n``.

    Raises
    ------
    ParameterError
        2-D input, unsupported container, or unhashable keys (lists, dicts, sets). The message
        names the type or shape of the input, never a value.
    """
    x = _normalize(data, where, name, _DATA_RULE)
    n = len(x)
    if isinstance(x, np.ndarray):
        keys, counts = _count_numpy(x, where, name)
    else:
        keys, counts = _count_arrow(x)
    return KeyCounts(keys=keys, counts=counts.astype(np.int64, copy=False), n=int(n))


def _count_numpy(x: np.ndarray, where: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    kind = x.dtype.kind
    if kind in "iub":
        return _count_ints(x)
    if kind == "f":
        keys, counts = np.unique(x[~np.isnan(x)], return_counts=True)
        return _positive_zero(keys), counts
    if kind == "O":
        return _count_objects(x, where, name)
    if kind in "mM":
        x = x[~np.isnat(x)]
    return np.unique(x, return_counts=True)


def _positive_zero(keys: np.ndarray) -> np.ndarray:
    """Float keys with −0.0 as +0.0 (np.unique keeps whichever zero sorts first)."""
    if keys.size:
        keys = np.where(keys == 0, keys.dtype.type(0), keys)
    return keys


def _count_ints(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of an integer (or bool) array: bincount over the whole range of a dtype of at most
    16 bits (a public bound), else a sort. Never chosen from the values."""
    if x.dtype.kind == "b":
        bc = np.bincount(x.view(np.uint8), minlength=2)
        present = np.flatnonzero(bc)
        return present.astype(bool), bc[present]
    if x.dtype.itemsize <= 2:
        lo = int(np.iinfo(x.dtype).min)
        bc = np.bincount(np.subtract(x, lo, dtype=np.int64), minlength=1 << (8 * x.dtype.itemsize))
        present = np.flatnonzero(bc)
        return (present + lo).astype(x.dtype), bc[present]
    return np.unique(x, return_counts=True)


def _count_arrow(x: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of an Arrow array (strings, dates, integers with nulls, …) by hashing."""
    typ = x.type
    if pa.types.is_integer(typ) or pa.types.is_boolean(typ):
        return _count_ints(_to_numpy(pc.drop_null(x)))
    vc = pc.value_counts(x)
    values = vc.field("values")
    counts = vc.field("counts")
    if values.null_count:
        valid = pc.is_valid(values)
        values, counts = values.filter(valid), counts.filter(valid)
    order = pc.sort_indices(values)
    keys = values.take(order).to_numpy(zero_copy_only=False)
    counts = counts.take(order).to_numpy(zero_copy_only=False)
    if keys.dtype.kind == "f":  # floats that reached Arrow hashing (e.g. half floats)
        return _merge(_positive_zero(keys), counts)
    return keys, counts


def _count_objects(x: np.ndarray, where: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Counts of generic hashable Python objects (tuples, mixed types) with pandas' hash table."""
    import pandas as pd

    try:
        codes, uniques = pd.factorize(x, sort=False, use_na_sentinel=True)
    except TypeError:
        raise fail(where, name, _DATA_RULE, "unhashable keys (e.g. list, dict or set)") from None
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    # One Python call per distinct key (not per record): the class's representative, not the
    # first value seen; classes pandas kept apart (if any) are merged afterwards.
    keys, counts = _merge(canonical_keys(np.asarray(uniques, dtype=object)), counts)
    order = sort_order(keys)
    return keys[order], counts[order]


def _merge(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the counts of equal keys (after canonicalisation two classes may coincide)."""
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(keys, dtype=object), sort=False, use_na_sentinel=True)
    if len(uniques) == len(keys):
        return keys, counts
    merged = np.bincount(codes, weights=counts, minlength=len(uniques)).astype(np.int64)
    return np.asarray(keys)[np.unique(codes, return_index=True)[1]], merged


def _canonical(value: Any) -> Any:
    """The representative of ``value``'s class under Python equality (see the module docstring)."""
    t = type(value)
    if t is str or t is int:
        return value
    if t is float or isinstance(value, np.floating):
        f = float(value)
        return int(f) if f.is_integer() else f
    if isinstance(value, (bool, np.bool_, numbers.Integral)):
        return int(value)
    if isinstance(value, tuple):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, (decimal.Decimal, fractions.Fraction)):
        if isinstance(value, decimal.Decimal) and not value.is_finite():
            return float(value) if not value.is_nan() else value
        if value == int(value):
            return int(value)
        f = float(value)
        return f if f == value else value
    return value


_canonical_ufunc = np.frompyfunc(_canonical, 1, 1)


def canonical_keys(keys: np.ndarray) -> np.ndarray:
    """Untyped (object) keys replaced by their canonical representatives (a 1-D object array)."""
    if keys.size == 0:
        return keys
    out = _canonical_ufunc(keys)
    return np.asarray(out, dtype=object) if isinstance(out, np.ndarray) else _object_array([out])


def sort_order(keys: np.ndarray) -> np.ndarray:
    """A data-order-free order of distinct keys: natural order, or (type, repr) when incomparable."""
    try:
        return np.argsort(keys, kind="stable")
    except TypeError:
        labels = [(type(k).__module__, type(k).__qualname__, repr(k)) for k in keys]
        return np.array(sorted(range(len(labels)), key=labels.__getitem__), dtype=np.intp)


# --------------------------------------------------------------------------------------------
# public domains
# --------------------------------------------------------------------------------------------


def as_domain(domain: Any, where: str = "as_domain", name: str = "domain") -> Domain:
    """Validate a public domain: 1-D, non-empty, distinct and non-missing keys.

    The domain is public, so it is safe to look at its values (and to reject it).

    Raises
    ------
    ParameterError
        Not 1-D, empty, unhashable keys, missing keys (None/NaN) or duplicate keys.
    """
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, (set, frozenset, dict)):
        raise fail(where, name, _DOMAIN_RULE + " in a fixed order (not a set)", _type_name(domain))
    if isinstance(domain, range) and len(domain) > 0:  # distinct by construction
        keys = np.arange(domain.start, domain.stop, domain.step, dtype=np.int64)
        keys.flags.writeable = False
        return Domain(keys=keys)
    x = _normalize(domain, where, name, _DOMAIN_RULE)
    if _distinct_strings(x):  # fast path for string domains (the usual case from files)
        keys = _to_numpy(x)
        keys.flags.writeable = False
        return Domain(keys=keys)
    kc = count_keys(x, where, name)
    if kc.n == 0:
        raise fail(where, name, _DOMAIN_RULE, "an empty domain")
    if int(kc.counts.sum()) != kc.n:
        raise fail(where, name, _DOMAIN_RULE, "a domain containing None/null/NaN")
    if kc.counts.shape[0] != kc.n:
        dup = kc.keys[np.flatnonzero(kc.counts > 1)[:3]]
        raise fail(where, name, _DOMAIN_RULE, f"a domain with duplicate keys such as {list(dup.tolist())!r}")
    keys = _to_numpy(x) if is_arrow(x) else x
    # The same canonical keys as the data's (module docstring): untyped keys by their class's
    # representative, float keys with +0.0.
    if keys.dtype.kind == "O":
        keys = canonical_keys(np.asarray(keys, dtype=object))
    elif keys.dtype.kind == "f":
        keys = _positive_zero(keys)
    keys = np.array(keys, copy=True)
    keys.flags.writeable = False
    return Domain(keys=keys)


def _distinct_strings(x: Any) -> bool:
    """True for a non-empty Arrow string array without nulls or duplicates (hash-based check)."""
    if not is_arrow(x) or len(x) == 0 or x.null_count:
        return False
    if not (pa.types.is_string(x.type) or pa.types.is_large_string(x.type)):
        return False
    return pc.count_distinct(x).as_py() == len(x)


def _family(keys: np.ndarray | pa.Array | pa.ChunkedArray) -> str:
    if is_arrow(keys):
        typ = keys.type
        if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ):
            return "numeric"
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return "string"
        return "object"
    if keys.dtype.kind in "iufb":
        return "numeric"
    return "object"


def _as_numpy_keys(keys: np.ndarray | pa.Array | pa.ChunkedArray) -> np.ndarray:
    return _to_numpy(keys) if is_arrow(keys) else np.asarray(keys)


def _maybe_strings(keys: np.ndarray) -> pa.Array | None:
    """An Arrow string array of object keys when every key is a str, else None."""
    try:
        arr = pa.array(keys, from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
        return None
    return arr if (pa.types.is_string(arr.type) and arr.null_count == 0) else None


def align_to_domain(
    key_counts: KeyCounts, domain: Any, where: str = "align_to_domain"
) -> tuple[np.ndarray, int]:
    """Counts of the domain's keys, in the domain's order, and the number of other records.

    Each present key is looked up in the domain (numeric keys: binary search in the sorted
    domain; strings: an Arrow hash table of the domain; other objects: a pandas hash index).

    Parameters
    ----------
    key_counts : KeyCounts
        Counts of the present keys (from :func:`count_keys` or another engine).
    domain : Domain or array-like
        The public domain (validated with :func:`as_domain` if needed).

    Returns
    -------
    (numpy.ndarray of int64, int)
        ``aligned[j]`` is the count of ``domain[j]`` (0 if absent), and ``n_outside`` is the number
        of records whose key is not in the domain, missing keys included.
    """
    dom = as_domain(domain, where)
    counts = np.asarray(key_counts.counts, dtype=np.int64)
    pos = _positions(key_counts.keys, dom)  # position of each present key in the domain, or -1
    hit = pos >= 0
    aligned = np.zeros(dom.size, dtype=np.int64)
    aligned[pos[hit]] = counts[hit]  # keys are distinct, so positions are too
    return aligned, int(key_counts.n - aligned.sum())


def _positions(keys: KeyArray, dom: Domain) -> np.ndarray:
    """For each key, its position in the domain, or -1. Vectorized; the lookup table is the domain."""
    p = len(keys)
    if p == 0:
        return np.zeros(0, dtype=np.intp)
    fam_k, fam_d = _family(keys), _family(dom.keys)
    if fam_k == "numeric" and fam_d == "numeric":
        k = _as_numpy_keys(keys)
        kinds = {k.dtype.kind, dom.keys.dtype.kind}
        if kinds != {"u", "i"} or max(k.dtype.itemsize, dom.keys.dtype.itemsize) < 8:  # no float cast
            order, sorted_d = dom.sorted_numeric
            pos = np.minimum(np.searchsorted(sorted_d, k), sorted_d.shape[0] - 1)
            return np.where(sorted_d[pos] == k, order[pos], -1)
    k_str = keys if fam_k == "string" else (_maybe_strings(keys) if fam_k == "object" else None)
    if k_str is not None and dom.arrow_strings is not None:
        idx = pc.fill_null(pc.index_in(k_str, value_set=dom.arrow_strings), -1)
        return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.intp)
    import pandas as pd

    table = pd.Index(np.asarray(dom.keys, dtype=object), dtype=object, tupleize_cols=False)
    target = pd.Index(np.asarray(_as_numpy_keys(keys), dtype=object), dtype=object, tupleize_cols=False)
    return np.asarray(table.get_indexer(target), dtype=np.intp)
