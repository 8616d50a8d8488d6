"""One vector per privacy unit: contribution bounding for means and k-means (user level).

``private_mean`` / ``private_kmeans`` with ``units=`` (and ``privagg mean/kmeans
--privacy-unit COL``) first reduce the rows to **one vector per unit**, then run the record-level
mechanism, unchanged, on those vectors (docs/proofs/mean.md §9, kmeans.md §9).

Rule (identical in both implementations below). Rows with a non-finite entry are dropped first
(the mechanisms' declared policy). Each remaining row x of unit u gets the priority

    π(u, x) = hash(hash(s, hash(u), hash([x_1, …, x_d])))

(:data:`privagg.engines.base.PRIORITY_SQL` with the row's values as the key; DuckDB's 64-bit
``hash()``, evaluated in DuckDB by both implementations, so they agree bit for bit; ``hash`` of
a ``DOUBLE`` list is the same for a LIST, an ARRAY and a Parquet/Arrow list, and −0.0 hashes as
0.0). s is a 64-bit secret drawn from the release's generator (the CSPRNG unless a seed is given).
A unit keeps its ``k = max_rows_per_unit`` rows of smallest priority (all of them if it has fewer)
and its vector is their average, summed in priority order (k = 1: the sampled row itself).
Identical rows have identical priorities, so ties never change a vector. The vectors are
returned in the order of each unit's smallest priority (a canonical order, so that both
implementations feed the mechanism the same sequence; the mechanisms' output distribution does
not depend on the order).

Why this is safe: a unit's vector is a function of its own rows and of s only, so adding or
removing a unit (with all its rows) adds or removes exactly one vector and changes no other —
the add/remove-one neighbours of the record-level proofs, for every s. A unit with no finite row
contributes no vector (its absence is also "one vector fewer", at most).

Implementations: :func:`unit_vectors` (in memory: ``np.lexsort`` by (unit, π), ranks from group
starts, ``np.add.reduceat``) and :func:`file_unit_vectors` (DuckDB: ``min_by(row, π, k)`` per
unit, a top-n aggregate without a full sort); both end in the same :func:`_average`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._validate import check_positive_int, fail, real_array
from .base import PRIORITY_SQL, draw_secret

__all__ = ["MAX_ROWS_PER_UNIT", "bound_points", "check_max_rows", "file_unit_vectors", "unit_vectors"]

#: Largest accepted ``max_rows_per_unit``.
MAX_ROWS_PER_UNIT = 1_000_000


def check_max_rows(where: str, units: Any, max_rows_per_unit: Any) -> int:
    """k = ``max_rows_per_unit`` (validated); it must be left at 1 without ``units``."""
    if units is None:
        if not (isinstance(max_rows_per_unit, (int, np.integer)) and not isinstance(max_rows_per_unit, bool)
                and int(max_rows_per_unit) == 1):
            raise fail(where, "max_rows_per_unit", "left at 1 without units (it bounds a privacy unit's rows)",
                       max_rows_per_unit)
        return 1
    return check_positive_int(where, "max_rows_per_unit", max_rows_per_unit, 1, MAX_ROWS_PER_UNIT)


def bound_points(where: str, points: Any, units: Any, max_rows_per_unit: Any, rng: Any) -> tuple[np.ndarray, Any]:
    """Entry of ``private_mean``/``private_kmeans``: (points to release on, the generator to go on with).

    Without ``units``: ``points`` and ``rng`` unchanged (record level, exactly as before).
    With ``units``: one vector per unit (module docstring), the secret drawn first from the
    release's generator, which is returned so that the noise comes from the rest of the same
    stream (a :class:`~privagg.noise.rng.SecureGenerator` stays secure).
    """
    k = check_max_rows(where, units, max_rows_per_unit)
    if units is None:
        return points, rng
    from ..noise.rng import resolve_rng

    x = real_array(where, points, 2)
    gen, _ = resolve_rng(rng, where)
    return unit_vectors(x, units, k, draw_secret(gen), where=where), gen


def _average(group: np.ndarray, prio: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Per group: the average of its ≤ k rows of smallest priority; groups ordered by their
    smallest priority. ``group`` are integer ids, ``prio`` uint64, ``values`` (m, d) float64."""
    d = values.shape[1]
    if group.shape[0] == 0:
        return np.zeros((0, d), dtype=np.float64)
    order = np.lexsort((prio, group))
    g = group[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, g.shape[0]])
    rank = np.arange(g.shape[0]) - np.repeat(starts, sizes)
    kept = order[rank < k]
    used = np.minimum(sizes, k)
    first = np.r_[0, np.cumsum(used)[:-1]]
    if k == 1:
        out = values[kept]
    else:
        out = np.add.reduceat(values[kept], first, axis=0) / used[:, None]
    lead = prio[kept[first]]  # each unit's smallest priority
    return np.ascontiguousarray(out[np.argsort(lead, kind="stable")])


def _row_priorities(hu: np.ndarray, x: np.ndarray, secret: int) -> np.ndarray:
    """π for rows with unit hashes ``hu`` (uint64) and values ``x`` (m, d), computed in DuckDB."""
    import pyarrow as pa

    from .numpy_engine import table_priorities

    m, d = x.shape
    flat = pa.array(np.ascontiguousarray(x, dtype=np.float64).reshape(-1))
    rows = pa.FixedSizeListArray.from_arrays(flat, d) if d else pa.nulls(m, pa.list_(pa.float64(), 0))
    table = pa.table({"hu": pa.array(hu, type=pa.uint64()), "v": rows})
    return table_priorities(table, PRIORITY_SQL.replace("hash({unit})", "hu").format(key="v"), secret)


def unit_vectors(x: np.ndarray, units: Any, k: int, secret: int, *, where: str = "privagg") -> np.ndarray:
    """In memory: one vector per unit of the float64 rows ``x`` (n, d), ``units`` aligned with them.

    A missing unit (None/null/NaN) is one unit, as in :class:`~privagg.engines.numpy_engine.NumpyEngine`.
    """
    from .numpy_engine import factorize, value_hashes

    codes, uniques = factorize(units, where, "units")
    if codes.shape[0] != x.shape[0]:
        # lengths are not shown: under add/remove n is private
        raise fail(where, "units", "an array-like aligned with the points (one unit per row)", "another length")
    finite = np.isfinite(x).all(axis=1)
    x, codes = x[finite], codes[finite]
    hu = value_hashes(uniques)  # last entry: hash(NULL), the missing unit's
    codes = np.where(codes >= 0, codes, len(hu) - 1)
    prio = _row_priorities(hu[codes], x, secret)
    return _average(codes, prio, x, k)


def file_unit_vectors(
    path: str | Path,
    columns: Sequence[str],
    unit: str,
    k: int,
    secret: int,
    *,
    caller: str = "file_unit_vectors",
    csv: Any = None,
) -> np.ndarray:
    """Through DuckDB: one vector per value of the ``unit`` column, from the numeric ``columns``
    of a CSV or Parquet file (read as :func:`privagg.engines.duckdb_numeric.read_numeric_columns`
    reads them). A NULL unit is one unit; malformed CSV records belong to no unit."""
    from . import duckdb as dd
    from .duckdb_bounding import DuckDBEngine
    from .duckdb_numeric import numeric_select

    cols = list(columns)
    infos, select = numeric_select(path, cols, caller=caller, csv=csv)
    unit_info = dd.describe_column(path, unit, where=caller, csv=csv)
    fmt = infos[0].format
    names = [f"c{i}" for i in range(len(cols))]
    engine = DuckDBEngine(infos[0], unit_info, where=caller)
    finite = " AND ".join(f"isfinite({n})" for n in names)
    prio = PRIORITY_SQL.format(unit="u", key="[" + ", ".join(names) + "]")
    fields = ", ".join([f"'p': {prio}"] + [f"'{n}': {n}" for n in names])
    source = f"(SELECT {engine._unit_expr()} AS u, {select} FROM {dd._source(fmt)}) WHERE {finite}"
    top = f"SELECT min_by({{{fields}}}, {prio}, $k) AS sel FROM {source} GROUP BY u"
    sql = (f"SELECT g, unnest(sel, recursive := true) FROM "
           f"(SELECT row_number() OVER () AS g, sel FROM ({top}))")
    result = engine._run(sql, {"secret": int(secret), "k": int(k)})
    group = np.ma.getdata(result["g"]).astype(np.int64)
    pr = np.ma.getdata(result["p"]).astype(np.uint64)
    values = np.empty((group.shape[0], len(cols)), dtype=np.float64)
    for i, n in enumerate(names):
        values[:, i] = np.ma.getdata(result[n])
    return _average(group, pr, values, int(k))
