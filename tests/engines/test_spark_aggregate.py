"""``aggregate`` on a Spark DataFrame (local mode): the same candidates (keys, exact counts, values)
and, with the same seed, the same release as the DuckDB path on the same data; user-level bounding
in Spark keeps ℓ0 groups and ℓ∞ rows per unit and a unit's kept rows do not depend on the other
units; parameter errors come before any Spark job and never show data.

One SparkSession for all Spark tests (tests/engines/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")

import privagg  # noqa: E402
from privagg.accounting import Ledger  # noqa: E402
from privagg.engines.grouped import open_table  # noqa: E402
from privagg.engines.spark_grouped import SparkGroupedTable  # noqa: E402
from privagg.errors import ParameterError  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]


def _frame(seed: int = 3, n: int = 2000) -> pd.DataFrame:
    """Two key columns with NULL keys, a metric with NaN / ±inf / NULL, a unit column."""
    rng = np.random.default_rng(seed)
    g = rng.choice(np.array(["a", "b", "c", "d", "é", "Z"], dtype=object), n)
    g[::97] = None
    x = rng.normal(3.0, 2.0, n)
    x[::50] = np.nan
    x[1::211] = np.inf
    x[2::223] = -np.inf
    return pd.DataFrame({"g": g, "h": rng.integers(0, 3, n), "x": x, "y": rng.integers(-5, 50, n),
                         "u": rng.integers(0, 200, n)})


def _sdf(spark, pdf: pd.DataFrame):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark and pandas >= 3
        return spark.createDataFrame(pdf)


def _cands(table, **kw):
    opts = {k: kw.pop(k) for k in ("domain", "max_groups", "max_rows", "secrets") if k in kw}
    with open_table(table, where=None, **kw) as tab:
        return tab.prepare(**opts)


def _sorted_values(c, col):
    gv = c.values[col]
    order = np.lexsort((gv.values, gv.group))
    return gv.group[order].tolist(), gv.values[order].tolist()


def test_record_level_same_candidates_and_release_as_duckdb(spark) -> None:
    pdf = _frame()
    sdf = _sdf(spark, pdf)
    assert isinstance(open_table(sdf, by=["g"], units=None, columns=[], where=None), SparkGroupedTable)
    kw = dict(by=["g", "h"], units=None, columns=["x", "y"])
    local, remote = _cands(pdf, **kw), _cands(sdf, **kw)
    assert remote.size == local.size == 18
    for a, b in zip(local.keys, remote.keys, strict=True):
        assert a.tolist() == b.tolist()  # the canonical order, NULL keys dropped
    assert remote.rows.tolist() == local.rows.tolist() and remote.units.tolist() == local.units.tolist()
    for col in ("x", "y"):
        assert _sorted_values(remote, col) == _sorted_values(local, col)
        assert np.isfinite(remote.values[col].values).all()
    assert int(remote.rows.sum()) == int(pdf["g"].notna().sum())
    assert len(remote.values["x"].values) == int((pdf["g"].notna() & np.isfinite(pdf["x"])).sum())
    metrics = [privagg.count(), privagg.sum("x", bounds=(0, 10)), privagg.mean("y", bounds=(-5, 50)),
               privagg.quantile("x", 0.5, bounds=(-5, 10))]
    for dom in (None, [("a", 1), ("b", 0), ("zz", 2), ("é", 2)]):  # a domain: broadcast join, absent key
        a = privagg.aggregate(pdf, by=["g", "h"], metrics=metrics, epsilon=2, delta=1e-6, domain=dom, rng=11)
        b = privagg.aggregate(sdf, by=["g", "h"], metrics=metrics, epsilon=2, delta=1e-6, domain=dom, rng=11)
        assert len(b.groups) > 0
        pd.testing.assert_frame_equal(a.groups, b.groups)
        assert a.split == b.split and a.selection == b.selection


def _unit_frame(extra_unit: bool) -> pd.DataFrame:
    """Units 0 … 39 but 7 with 1–2 groups and ≤ 2 rows each; unit 7 in 5 groups with 3 rows in each;
    optionally unit 99 in 4 groups with 4 rows each. x identifies the unit: x = 1000·u + j."""
    rows = []
    for u in (v for v in range(40) if v != 7):
        for j, g in enumerate(["a", "b"][: 1 + u % 2]):
            rows += [(g, u, 1000.0 * u + j + 0.5 * r) for r in range(1 + u % 2)]
    rows += [(g, 7, 7000.0 + 10 * i + r) for i, g in enumerate("abcde") for r in range(3)]
    if extra_unit:
        rows += [(g, 99, 99000.0 + 10 * i + r) for i, g in enumerate("bcdf") for r in range(4)]
    return pd.DataFrame(rows, columns=["g", "u", "x"]).sample(frac=1.0, random_state=5).reset_index(drop=True)


def test_user_level_bounding_in_spark(spark) -> None:
    base, more = _unit_frame(False), _unit_frame(True)
    s_base, s_more = _sdf(spark, base), _sdf(spark, more)
    kw = dict(by=["g"], units="u", columns=["x"], max_groups=2, max_rows=2)
    chosen = set()
    for secrets in [(1, 2), (2**64 - 5, 2**63)]:
        c0 = _cands(s_base, secrets=secrets, **kw)
        c1 = _cands(s_more, secrets=secrets, **kw)
        # unit 7 contributes to exactly 2 groups, with 2 (of 3) rows in each
        x = c0.values["x"].values
        of7 = np.floor(x / 1000) == 7
        groups7 = set(c0.values["x"].group[of7].tolist())
        assert len(groups7) == 2 and of7.sum() == 4
        chosen.add(frozenset(c0.keys[0][sorted(groups7)].tolist()))
        # the other units are within the bounds: all their rows are kept
        others = base[base["u"] != 7]
        assert (~of7).sum() == len(others)
        assert int(c0.rows.sum()) == len(others) + 4
        assert int(c0.units.sum()) == int(others.groupby("u")["g"].nunique().sum()) + 2
        # adding unit 99: the others' kept rows are unchanged, 99 keeps 2 groups × 2 rows
        k0 = {(str(c0.keys[0][g]), v) for g, v in zip(c0.values["x"].group, x, strict=True)}
        k1 = {(str(c1.keys[0][g]), v) for g, v in zip(c1.values["x"].group, c1.values["x"].values, strict=True)}
        assert k0 <= k1 and len(k1 - k0) == 4 and all(v // 1000 == 99 for _, v in k1 - k0)
        assert len({g for g, _ in k1 - k0}) == 2
    assert len(chosen) > 1  # the priority depends on the secret (fails with a constant priority)
    # a domain (broadcast join; other keys drop out before bounding, as with DuckDB): unit 7 has 2
    # domain groups (kept) with 3 rows each (2 kept): the same bounded counts as DuckDB
    dk = dict(kw, domain=[["b", "a", "q"]], secrets=(5, 6))
    cd, cl = _cands(s_base, **dk), _cands(base, **dk)
    assert cd.keys[0].tolist() == ["b", "a", "q"] and cd.rows[2] == 0
    assert cd.rows.tolist() == cl.rows.tolist() and cd.units.tolist() == cl.units.tolist()
    assert sum(np.floor(cd.values["x"].values / 1000) == 7) == 4
    # when no unit exceeds the bounds, Spark and DuckDB keep the same rows
    small = base[base["u"] != 7]
    loc, rem = _cands(small, secrets=(3, 4), **kw), _cands(_sdf(spark, small), secrets=(3, 4), **kw)
    assert rem.rows.tolist() == loc.rows.tolist() and rem.units.tolist() == loc.units.tolist()
    assert _sorted_values(rem, "x") == _sorted_values(loc, "x")
    # max_rows_per_group caps the rows of count() (bounded rows) through aggregate too
    r = privagg.aggregate(s_base, by="g", metrics=[privagg.count()], epsilon=50, domain=["c", "d", "e"],
                          units="u", max_groups_per_unit=5, max_rows_per_group=1, rng=1)
    assert np.abs(r.groups["count"].to_numpy() - 1).max() <= 2  # unit 7 alone, one row each (ε = 50)


def test_parameter_errors_before_any_spark_job(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType

    secret = 918273.5
    bad = F.udf(lambda v: (_ for _ in ()).throw(ValueError(f"value {v}")) if v == secret else v, DoubleType())
    df = (spark.createDataFrame([(1.0, "x", 1, [1]), (secret, "y", 2, [2])], "a double, s string, u long, l array<int>")
          .withColumn("a", bad("a")))
    ledger = tmp_path / "l.db"
    Ledger.create(ledger, epsilon=10, delta=1e-3).close()
    sc = spark.sparkContext
    sc.setJobGroup("privagg-aggregate-errors", "errors", interruptOnCancel=False)
    base = dict(by="s", metrics=[privagg.sum("a", bounds=(0, 1))], epsilon=1.0, delta=1e-6)
    cases = [
        (dict(by="nope"), "'by' must be a column of the table"),
        (dict(by="l"), "'l' of type array<int>"),
        (dict(metrics=[privagg.mean("s", bounds=(0, 1))]), "'s' of type string"),
        (dict(metrics=[privagg.mean("zz", bounds=(0, 1))]), "'metrics'"),
        (dict(units="nope"), "'units'"),
        (dict(units=np.arange(2)), "'units' must be a column name for a Spark DataFrame"),
        (dict(where="a > 0"), "'where' must be None for a Spark DataFrame"),
        (dict(domain=["x", 3]), "'domain'"),
        (dict(by="u", domain=[1.5]), "'domain'"),
        (dict(by="u", domain=[1, 1.0]), "'domain'"),
        (dict(epsilon=0), "'epsilon'"),
        (dict(delta=0), "'delta'"),
        (dict(units="u", max_groups_per_unit=0), "max_groups_per_unit"),
    ]
    with Ledger(ledger) as book:
        for kwargs, text in cases:
            with pytest.raises(ParameterError, match=text.replace("(", r"\(")) as info:
                privagg.aggregate(df, **{**base, **kwargs}, ledger=book)
            assert str(secret) not in str(info.value) and "918273" not in str(info.value)
        assert sc.statusTracker().getJobIdsForGroup("privagg-aggregate-errors") == []
        # a DataFrame Spark cannot evaluate: a ParameterError before the charge, Spark's text not shown
        with pytest.raises(ParameterError, match="Spark failed") as info:
            privagg.aggregate(df, **base, ledger=book)
        assert "918273" not in str(info.value) and len(book.charges()) == 0
    sc.setJobGroup("other", "other")
