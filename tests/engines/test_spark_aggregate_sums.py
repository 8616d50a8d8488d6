"""``aggregate`` on Spark computes the bounded metrics' clamped integer sums and present counts in
Spark (issue 14 item 2: the engine clamps and sums; issue 13 item 3: clamping inside the engine):
no value of a column that only bounded sums and means read reaches the driver, and the integers
are numpy's ``clamped_terms`` sums bit for bit — on hostile values (ties on the term grid, ±0,
±inf, NaN, NULL, bounds near 2^±850, negative terms for the two-part long sums) — so the release
equals the DuckDB path's for the same seed.

One SparkSession for all Spark tests (tests/engines/conftest.py).
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")

import privagg  # noqa: E402
from privagg.engines.grouped import open_table  # noqa: E402
from privagg.engines.spark_grouped import SparkGroupedTable  # noqa: E402
from privagg.mechanisms.grouped import ColumnSums, GroupedValues  # noqa: E402
from privagg.mechanisms.grouped_bounded import _term_exponent  # noqa: E402
from privagg.testing.fixtures import CLAMP_BOUNDS, hostile_term_values  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

BOUNDS = CLAMP_BOUNDS
_hostile = hostile_term_values


def _sdf(spark, pdf: pd.DataFrame):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark and pandas >= 3
        return spark.createDataFrame(pdf)


def test_spark_column_sums_equal_numpy_on_hostile_values(spark) -> None:
    """Per group and bounds: Spark's two-part long sums recombined == ``GroupedValues.integer_sums``
    (numpy's ``clamped_terms``), and the present counts equal. Negative control: numpy's terms
    rounded half away from zero (``np.round`` is half-even; ``floor(x + 0.5)`` is not) differ on
    the ties, so the comparison can fail."""
    pdf = _hostile()
    sdf = _sdf(spark, pdf)
    kw = dict(by=["g"], units=None, columns=["x"], where=None)
    with open_table(pdf.astype({"x": "float64"}), **kw) as tab:
        local = tab.prepare()
    with open_table(sdf, **kw) as tab:
        assert isinstance(tab, SparkGroupedTable)
        remote = tab.prepare(sums={"x": BOUNDS})
    gv, cs = local.values["x"], remote.values["x"]
    assert isinstance(gv, GroupedValues) and isinstance(cs, ColumnSums)
    assert cs.present_counts().tolist() == gv.present_counts().tolist()
    for lo, hi in BOUNDS:
        assert cs.integer_sums(lo, hi).tolist() == gv.integer_sums(lo, hi).tolist(), (lo, hi)
    # control: half away from zero instead of half to even
    lo, hi = BOUNDS[0]
    e = _term_exponent(lo, hi)
    t = np.floor(np.ldexp(np.clip(gv.values, lo, hi), -e) + 0.5).astype(np.int64)
    bad = np.bincount(gv.group, weights=t, minlength=gv.n_groups).astype(np.int64).tolist()
    assert bad != cs.integer_sums(lo, hi).tolist()


def _frame(seed: int = 9, n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(2.0, 1.0, n)
    x[::37] = np.nan
    return pd.DataFrame({"g": rng.choice(list("abcdef"), n), "x": x, "y": rng.integers(-5, 60, n).astype(float)})


def test_bounded_metrics_fetch_no_values_and_match_duckdb(spark, monkeypatch, fetched_columns) -> None:
    """count, sum and mean of x with the same bounds (one shared step), a sum and a mean of y with
    different bounds: no fetched table holds a value column (``v0``, ``v1``), and the release equals
    the DuckDB path's (seed 13). Control: the engine's fetch path (``prepare`` without ``sums`` and
    ``kept_rows``) fetches x's values (the spy sees ``v0``)."""
    pdf = _frame()
    sdf = _sdf(spark, pdf)
    seen = fetched_columns
    metrics = [privagg.count(), privagg.sum("x", (0.0, 50.0)), privagg.mean("x", (0.0, 50.0)),
               privagg.sum("y", (0.0, 10.0)), privagg.mean("y", (-5.0, 60.0))]
    for dom in (None, ["a", "b", "zz"]):
        a = privagg.aggregate(pdf, by="g", metrics=metrics, epsilon=3, delta=1e-6, domain=dom, rng=13)
        b = privagg.aggregate(sdf, by="g", metrics=metrics, epsilon=3, delta=1e-6, domain=dom, rng=13)
        assert len(b.groups) > 0
        pd.testing.assert_frame_equal(a.groups, b.groups)
    assert seen and not any({"v0", "v1"} & set(cols) for cols in seen), seen
    seen.clear()
    real = SparkGroupedTable.prepare
    monkeypatch.setattr(SparkGroupedTable, "prepare",
                        lambda self, **kw: real(self, **{**kw, "sums": None, "kept_rows": None}))
    privagg.aggregate(sdf, by="g", metrics=metrics, epsilon=3, delta=1e-6, domain=["a"], rng=13)
    assert any("v0" in cols for cols in seen) and any("v1" in cols for cols in seen), seen


def test_user_level_sums_in_spark_match_fetched_values(spark) -> None:
    """With units (bounding in Spark), the Spark sums of the bounded rows equal numpy's sums of the
    same bounded rows fetched from Spark (same secrets, same kept rows)."""
    rng = np.random.default_rng(21)
    n = 1500
    pdf = pd.DataFrame({"g": rng.choice(list("pqrs"), n), "u": rng.integers(0, 120, n),
                        "x": rng.normal(5.0, 9.0, n)})
    sdf = _sdf(spark, pdf)
    kw = dict(by=["g"], units="u", columns=["x"], where=None)
    opts = dict(max_groups=2, max_rows=3, secrets=(12345, 67890))
    with open_table(sdf, **kw) as tab:
        fetched = tab.prepare(**opts)
    with open_table(sdf, **kw) as tab:
        summed = tab.prepare(**opts, sums={"x": [(-10.0, 20.0)]})
    gv, cs = fetched.values["x"], summed.values["x"]
    assert fetched.rows.tolist() == summed.rows.tolist()
    assert cs.present_counts().tolist() == gv.present_counts().tolist()
    assert cs.integer_sums(-10.0, 20.0).tolist() == gv.integer_sums(-10.0, 20.0).tolist()
    keep = np.array([True, False, True, True])
    r = summed.restrict(keep).values["x"]
    assert r.n_groups == 3 and r.present_counts().tolist() == cs.present_counts()[keep].tolist()
