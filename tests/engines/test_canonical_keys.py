"""One key equality on every engine: the released key's type and spelling depend only on its
equivalence class and the public schema, never on other records or their order."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from privagg import ParameterError
from privagg.engines import duckdb as engine
from privagg.engines.counting import as_domain, count_keys
from privagg.mechanisms.histogram import laplace_histogram, stable_histogram


def _spelled(keys) -> list[tuple[str, str]]:
    """Each key with its type and repr: the exact spelling of a release."""
    return [(type(k).__name__, repr(k)) for k in np.asarray(keys, dtype=object).tolist()]


def _released(data) -> list[tuple[str, str]]:
    release = stable_histogram(data, epsilon=50.0, delta=0.5, neighbors="add_remove", rng=1)
    return _spelled(release.keys)


def test_the_first_record_does_not_choose_the_spelling_of_its_class() -> None:
    assert _released(["x"] * 5 + [1] * 100) == [("int", "1"), ("str", "'x'")]
    assert _released([1.0] + ["x"] * 5 + [1] * 100) == [("int", "1"), ("str", "'x'")]
    assert _released([True] + ["x"] * 5 + [1] * 100) == [("int", "1"), ("str", "'x'")]
    assert _released([-0.0, 0.0, "a"] * 10) == _released([0.0, -0.0, "a"] * 10) == [("int", "0"), ("str", "'a'")]


def test_one_record_does_not_change_the_type_of_the_other_keys() -> None:
    ints = _spelled(count_keys([1, 2, 3]).keys)
    assert ints == [("int", "1"), ("int", "2"), ("int", "3")]
    assert _spelled(count_keys([1, 2, 3, 1.5]).keys) == [("int", "1"), ("float", "1.5"), ("int", "2"), ("int", "3")]
    assert _spelled(count_keys([1, 2, 3, None]).keys) == ints
    assert _spelled(count_keys((1, 2, 3, float("nan"))).keys) == ints
    assert _spelled(count_keys([True, False]).keys) == [("int", "0"), ("int", "1")]  # bool → int (untyped)
    series = pd.Series([1, 2, 3, 1.5, "a"], dtype=object)
    assert _spelled(count_keys(series).keys)[:2] == [("float", "1.5"), ("int", "1")]  # sorted by (type, repr)


def test_untyped_tuples_and_numbers_are_canonical_element_by_element() -> None:
    from decimal import Decimal
    from fractions import Fraction

    kc = count_keys([(1.0, "x"), (1, "x"), (True, "x"), Decimal("2.0"), Fraction(5, 2), np.float64(2.5), np.int8(2)])
    assert _spelled(kc.keys) == [("float", "2.5"), ("int", "2"), ("tuple", "(1, 'x')")]
    assert kc.counts.tolist() == [2, 2, 3]


@pytest.mark.parametrize(
    "make",
    [
        np.array,
        pd.Series,
        pl.Series,
        pa.array,
        lambda v: pa.chunked_array([v[:1], v[1:]]),
        lambda v: pd.Series(v, dtype="Float64"),
        lambda v: np.array(v, dtype=np.float32),
    ],
)
def test_typed_floats_keep_their_type_and_release_positive_zero(make) -> None:
    for values in ([-0.0, 0.0, 1.0, math.nan], [0.0, -0.0, 1.0, math.nan]):
        kc = count_keys(make(values))
        keys = np.asarray(kc.keys)
        assert keys.dtype.kind == "f" and keys.tolist() == [0.0, 1.0] and kc.counts.tolist() == [2, 1]
        assert not np.signbit(keys).any()
        assert kc.n == 4


def test_typed_integers_keep_their_type_and_both_count_paths_agree() -> None:
    small = count_keys(np.array([5, -3, 5], dtype=np.int16))
    assert small.keys.dtype == np.int16 and small.keys.tolist() == [-3, 5] and small.counts.tolist() == [1, 2]
    wide = count_keys(np.array([5, -3, 5, 10**12], dtype=np.int64))
    assert wide.keys.dtype == np.int64 and wide.keys.tolist() == [-3, 5, 10**12]
    flags = count_keys(np.array([True, True, False]))
    assert flags.keys.dtype == bool and flags.keys.tolist() == [False, True]  # typed bool stays bool


def test_domains_are_canonical_by_the_same_rule() -> None:
    assert _spelled(as_domain([1.0, 2, "a"]).keys) == [("int", "1"), ("int", "2"), ("str", "'a'")]
    floats = as_domain(np.array([-0.0, 1.5]))
    assert floats.keys.dtype.kind == "f" and not np.signbit(floats.keys).any()
    with pytest.raises(ParameterError, match="duplicate keys"):
        as_domain([1, 1.0])
    with pytest.raises(ParameterError, match="duplicate keys"):
        as_domain(np.array([-0.0, 0.0]))
    r = laplace_histogram([1, 1, 0.0, -0.0], epsilon=1.0, domain=[1.0, -0.0], rng=0)
    assert _spelled(r.keys) == [("int", "1"), ("int", "0")]


def test_duckdb_double_groups_on_positive_zero(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    for first in (-0.0, 0.0):
        values = [first, -first, -0.0, 2.5, math.nan, None]
        pq.write_table(pa.table({"f": pa.array(values, pa.float64()), "g": pa.array(values, pa.float32())}), path)
        for column in ("f", "g"):
            kc = engine.count_file(path, column)
            assert kc.keys.tolist() == [0.0, 2.5] or kc.keys.tolist() == [2.5, 0.0]
            assert dict(zip(kc.keys.tolist(), kc.counts.tolist(), strict=True)) == {0.0: 3, 2.5: 1}
            assert not np.signbit(kc.keys).any() and kc.n == 6
    domain = tmp_path / "dom.txt"
    domain.write_text("-0\n2.5\n", encoding="utf-8")
    keys = engine.load_domain(domain, "DOUBLE")
    assert keys.tolist() == [0.0, 2.5] and not np.signbit(keys).any()
    domain.write_text("-0\n0\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="distinct keys"):
        engine.load_domain(domain, "DOUBLE")
