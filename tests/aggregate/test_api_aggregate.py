"""privagg.aggregate: the split, keys (domain / selection), inputs, units bounding, ledger, errors.

Exact answers come from replacing the metric primitives (``grouped_bounded.noisy_counts`` /
``clamped_sums``) and the selection by deterministic stand-ins with ``monkeypatch``, so these tests
check aggregate's orchestration and engine, not the primitives' noise.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import privagg
from privagg.accounting import Ledger
from privagg.engines import grouped as eg
from privagg.mechanisms import aggregate as agg
from privagg.mechanisms import grouped_bounded, partition_selection
from privagg.mechanisms.grouped import MetricResult


def _exact(counts_or_gv, *, epsilon, contribution, rng, lower=None, upper=None):
    """Stand-in metric: the exact count (or clamped sum, integer-valued data), low/high = value ∓ 1;
    it consumes draws from rng as a real metric would (without adding them)."""
    if lower is None:
        v = np.asarray(counts_or_gv, dtype=np.float64)
    else:
        gv = counts_or_gv  # GroupedValues or the engine's ColumnSums: the same integer sums
        h = np.ldexp(1.0, grouped_bounded._term_exponent(lower, upper))
        v = np.array([float(k) for k in gv.integer_sums(lower, upper)]) * h
    rng.integers(0, 10, v.shape[0])  # advance the stream
    g = v.shape[0]
    return MetricResult(value=v, low=v - 1, high=v + 1, ok=np.ones(g, bool), reason=np.full(g, None, object),
                        epsilon=float(epsilon))


@pytest.fixture
def exact_metrics(monkeypatch):
    monkeypatch.setattr(grouped_bounded, "noisy_counts", lambda c, **kw: _exact(c, **kw))
    monkeypatch.setattr(grouped_bounded, "clamped_sums", lambda gv, **kw: _exact(gv, **kw))


@pytest.fixture
def keep_all(monkeypatch):
    """Selection keeps every present group (and records the (ε, δ) it was called with)."""
    calls = []

    def select(units, eps, dlt, gen):
        calls.append((Fraction(eps), Fraction(dlt)))
        return np.asarray(units) > 0

    monkeypatch.setattr(partition_selection, "select", select)
    return calls


DF = pd.DataFrame({
    "k": ["a", "b", "a", None, "c", "a", "b", "zz"],
    "j": [1, 1, 2, 1, 1, 2, 1, 1],
    "x": [1.0, 2.0, 3.0, 100.0, np.nan, 5.0, 7.0, 9.0],
})


# --- the split -------------------------------------------------------------------------------


def test_split_default_and_weights_known_answers():
    """Default weights 1: ε/4 each over selection + 3 metrics; δ/2 to each of the two δ-steps
    (selection, unbounded mean). Weights {count: 2, selection: 3}: ε·w/7, δ·3/4 and δ·1/4."""
    steps = [("selection", True), ("count", False), ("sum_x", False), ("mean_x", True)]
    s = agg.split_budget(steps, 1, Fraction(1, 1000))
    assert s == {"selection": (Fraction(1, 4), Fraction(1, 2000)), "count": (Fraction(1, 4), 0),
                 "sum_x": (Fraction(1, 4), 0), "mean_x": (Fraction(1, 4), Fraction(1, 2000))}
    s = agg.split_budget(steps, 1, Fraction(1, 1000), {"count": 2, "selection": 3})
    assert s == {"selection": (Fraction(3, 7), Fraction(3, 4000)), "count": (Fraction(2, 7), 0),
                 "sum_x": (Fraction(1, 7), 0), "mean_x": (Fraction(1, 7), Fraction(1, 4000))}


def test_release_reports_the_split_and_totals(exact_metrics, keep_all):
    r = privagg.aggregate(DF, by="k", metrics=[privagg.count(), privagg.sum("x", (0, 10))], epsilon=0.9,
                          delta=1e-6, rng=0, weights={"sum_x": 2})
    assert r.split_exact == {"selection": (Fraction(9, 40), Fraction(1, 10**6)), "count": (Fraction(9, 40), 0),
                             "sum_x": (Fraction(9, 20), 0)}
    assert r.split["sum_x"] == (0.45, 0.0)
    assert (r.privacy_loss.epsilon, r.privacy_loss.delta) == (Fraction(9, 10), Fraction(1, 10**6))
    assert (r.epsilon, r.delta, r.selection, r.secure) == (0.9, 1e-6, "optimal", False)
    # a δ no step needs is not spent
    r = privagg.aggregate(DF, by="k", metrics=[privagg.count()], epsilon=1, delta=1e-6, domain=["a"], rng=0)
    assert r.delta == 0.0 and r.privacy_loss.is_pure


def test_selection_parameters_known_answers(exact_metrics, keep_all):
    """(ε_sel/k, δ_sel/k), k = ℓ0 (add/remove) or 2ℓ0 (replace), and aggregate uses them."""
    assert agg.selection_parameters(Fraction(1, 2), Fraction(1, 10), 3, False) == (Fraction(1, 6), Fraction(1, 30))
    assert agg.selection_parameters(Fraction(1, 2), Fraction(1, 10), 3, True) == (Fraction(1, 12), Fraction(1, 60))
    privagg.aggregate(DF, by="k", metrics=[privagg.count()], epsilon=1, delta=Fraction(1, 10**6), rng=0)
    privagg.aggregate(DF, by="k", metrics=[privagg.count()], epsilon=1, delta=Fraction(1, 10**6), rng=0,
                      units="j", max_groups_per_unit=2, neighbors="replace")
    assert keep_all == [(Fraction(1, 2), Fraction(1, 10**6)), (Fraction(1, 8), Fraction(1, 4 * 10**6))]


# --- keys --------------------------------------------------------------------------------------


def test_domain_releases_every_key_in_order_and_drops_others(exact_metrics):
    """Every listed key in the listed order, absent ones with count 0; rows with keys outside
    the domain and NULL keys dropped; a NaN value drops the row for sum only."""
    r = privagg.aggregate(DF, by="k", metrics=[privagg.count(), privagg.sum("x", (0, 10))], epsilon=1,
                          domain=["c", "q", "a"], rng=0)
    g = r.to_pandas()
    assert g["k"].tolist() == ["c", "q", "a"]
    assert g["count"].tolist() == [1, 0, 3]
    assert g["sum_x"].tolist() == [0.0, 0.0, 9.0]
    assert list(g.columns) == ["k", "count", "count_low", "count_high", "sum_x", "sum_x_low", "sum_x_high"]
    d = r.to_dict()
    assert d["mechanism"] == "aggregate" and d["by"] == ["k"] and d["groups"][2] == {
        "k": "a", "count": 3.0, "count_low": 2.0, "count_high": 4.0, "sum_x": 9.0, "sum_x_low": 8.0,
        "sum_x_high": 10.0}
    assert r.to_polars().shape == (3, 7)


@pytest.mark.parametrize("frame", [pd.DataFrame, pl.DataFrame, pa.table])
def test_domain_as_a_table_of_the_by_columns(exact_metrics, frame):
    """A DataFrame / arrow Table domain: its rows, the ``by`` columns picked by name (in ``by``'s
    order, extra columns ignored); one without a ``by`` column is refused before anything runs.
    (d33c5b7 raised AttributeError on a pandas DataFrame.)"""
    one = privagg.aggregate(DF, by="k", metrics=[privagg.count()], epsilon=1,
                            domain=frame({"other": [0, 1, 2], "k": ["c", "q", "a"]}), rng=0)
    assert one.groups["k"].tolist() == ["c", "q", "a"] and one.groups["count"].tolist() == [1, 0, 3]
    listed = privagg.aggregate(DF, by=["k", "j"], metrics=[privagg.count()], epsilon=1,
                               domain=[tuple(t) for t in DF[["k", "j"]].dropna().drop_duplicates().values.tolist()],
                               rng=0)
    keys = listed.groups[["k", "j"]]
    two = privagg.aggregate(DF, by=["k", "j"], metrics=[privagg.count()], epsilon=1,
                            domain=frame({"j": keys["j"].tolist(), "k": keys["k"].tolist()}), rng=0)
    assert two.groups.equals(listed.groups)
    with pytest.raises(privagg.ParameterError, match="a table domain needs the columns"):
        privagg.aggregate(DF, by="k", metrics=[privagg.count()], epsilon=1, domain=frame({"key": ["a"]}), rng=0)


def test_selection_keys_sorted_canonically_null_keys_dropped(exact_metrics, keep_all):
    shuffled = DF.sample(frac=1.0, random_state=3)
    r = privagg.aggregate(shuffled, by="k", metrics=[privagg.count()], epsilon=1, delta=1e-6, rng=0)
    assert r.groups["k"].tolist() == ["a", "b", "c", "zz"]
    assert r.groups["count"].tolist() == [3, 2, 1, 1]


def test_multi_column_by(exact_metrics, keep_all):
    r = privagg.aggregate(DF, by=["k", "j"], metrics=[privagg.count(), privagg.sum("x", (0, 10))], epsilon=1,
                          delta=1e-6, rng=0)
    assert list(zip(r.groups["k"], r.groups["j"], r.groups["count"], strict=True)) == [
        ("a", 1, 1), ("a", 2, 2), ("b", 1, 2), ("c", 1, 1), ("zz", 1, 1)]
    r = privagg.aggregate(DF, by=["k", "j"], metrics=[privagg.count()], epsilon=1,
                          domain=[("b", 1), ("a", 2), ("a", 9)], rng=0)
    assert r.groups[["k", "j"]].values.tolist() == [["b", 1], ["a", 2], ["a", 9]]
    assert r.groups["count"].tolist() == [2, 2, 0]


# --- inputs ------------------------------------------------------------------------------------


def test_same_release_from_every_input(tmp_path, exact_metrics):
    """CSV path, Parquet path, pandas, polars, arrow and a DuckDB relation give the same release
    for the same seed (real key selection; integer-valued x so that sums are exact)."""
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({"k": rng.choice([f"g{i}" for i in range(40)], n),
                       "x": rng.integers(-5, 20, n).astype(float), "w": rng.integers(0, 9, n).astype(str)})
    df.loc[rng.random(n) < 0.05, "x"] = np.nan
    rare = [f"r{i}" for i in range(20) for _ in range(i % 3 + 1)]  # groups of 1-3 rows
    df = pd.concat([df, pd.DataFrame({"k": rare, "x": 1.0, "w": "1"})], ignore_index=True)
    csv, parquet = tmp_path / "t.csv", tmp_path / "t.parquet"
    df.to_csv(csv, index=False)
    table = pa.Table.from_pandas(df, preserve_index=False)
    pq.write_table(table, parquet)
    con = duckdb.connect()
    con.register("df_", table)
    rel = con.sql("SELECT * FROM df_")
    kw = dict(by="k", metrics=[privagg.count(), privagg.sum("x", (0, 10))], epsilon=0.5, delta=1e-3, rng=11)
    ref = privagg.aggregate(df, **kw).to_pandas()
    assert 40 <= len(ref) < 60  # the selection ran and dropped some groups
    for source in (str(csv), parquet, pl.from_pandas(df), table, rel):
        got = privagg.aggregate(source, **kw).to_pandas()
        pd.testing.assert_frame_equal(got, ref)


# --- units bounding (engine) -------------------------------------------------------------------


def _kept(table, secrets, l0, linf):
    with eg.open_table(table, by=["k"], units="u", columns=["id"], where=None) as tab:
        cand = tab.prepare(max_groups=l0, max_rows=linf, secrets=secrets)
    gv = cand.values["id"]
    keys = cand.keys[0][gv.group]
    return cand, sorted(zip(gv.values.tolist(), keys.tolist(), strict=True))


def _unit_table():
    rows = []
    for g in range(5):  # unit 0: 7 rows in each of 5 groups
        rows += [(0, f"g{g}", 1000 * g + r) for r in range(7)]
    rng = np.random.default_rng(2)
    for u in range(1, 60):
        for r in range(int(rng.integers(1, 6))):
            rows.append((u, f"g{int(rng.integers(0, 6))}", 100_000 * u + r))
    return pd.DataFrame(rows, columns=["u", "k", "id"]).astype({"id": float})


def test_units_bounding_caps_groups_and_rows():
    df = _unit_table()
    for secrets in ((1, 2), (3, 4), (99, 7)):
        cand, kept = _kept(df, secrets, 2, 3)
        mine = [(v, k) for v, k in kept if v < 100_000]
        assert len({k for _, k in mine}) == 2  # exactly 2 of its 5 groups
        assert len(mine) == 6  # 3 rows in each
        assert cand.rows.sum() == len(kept)  # count() counts the bounded rows


def test_units_bounding_neighbour_property_exact():
    """Adding a unit (rows in 4 groups) leaves every other unit's kept rows unchanged, exactly."""
    df = _unit_table()
    extra = pd.DataFrame({"u": [777] * 8, "k": ["g0", "g1", "g2", "g3"] * 2,
                          "id": [777_000_000.0 + i for i in range(8)]})
    for secrets in ((1, 2), (5, 6)):
        _, before = _kept(df, secrets, 2, 2)
        _, after = _kept(pd.concat([df, extra], ignore_index=True), secrets, 2, 2)
        assert [r for r in after if r[0] < 777_000_000] == before
        assert 1 <= len([r for r in after if r[0] >= 777_000_000]) <= 4


# --- ledger and errors -------------------------------------------------------------------------


def test_ledger_charged_once_with_total_and_not_on_errors(tmp_path):
    with Ledger.create(tmp_path / "l.ledger", epsilon=10, delta=1e-3) as ledger:
        bad = [
            dict(by="nope"), dict(metrics=[privagg.sum("nope", (0, 1))]), dict(delta=0.0),
            dict(domain=["a", "a"]), dict(weights={"nope": 1}), dict(metrics=[privagg.count(), privagg.count()]),
            dict(max_groups_per_unit=2), dict(neighbors="swap"),
        ]
        base = dict(by="k", metrics=[privagg.count()], epsilon=1, delta=1e-6, rng=0, ledger=ledger)
        for change in bad:
            with pytest.raises(privagg.ParameterError):
                privagg.aggregate(DF, **{**base, **change})
        assert ledger.charges() == []
        privagg.aggregate(DF, **{**base, "metrics": [privagg.count(), privagg.sum("x", (0, 1))], "epsilon": 0.75})
        charges = ledger.charges()
        assert len(charges) == 1
        assert (charges[0].loss.epsilon, charges[0].loss.delta) == (Fraction(3, 4), Fraction(1, 10**6))


@pytest.mark.parametrize(("make", "param"), [
    (lambda: privagg.sum("x", (1, 1)), "bounds"),
    (lambda: privagg.sum("x", (0, float("inf"))), "bounds"),
    (lambda: privagg.sum(3, (0, 1)), "column"),
    (lambda: privagg.mean("x", (2, 1)), "bounds"),
    (lambda: privagg.quantile("x", 1.5), "q"),
    (lambda: privagg.quantile("x", -0.1), "q"),
])
def test_metric_constructors_validate(make, param):
    with pytest.raises(privagg.ParameterError, match=f"'{param}'"):
        make()


@pytest.mark.parametrize(("change", "param"), [
    (dict(by=[]), "by"), (dict(by=["k", "k"]), "by"), (dict(by="x2"), "by"),
    (dict(metrics=[]), "metrics"), (dict(metrics=[privagg.mean("k", (0, 1))]), "metrics"),
    (dict(epsilon=0), "epsilon"), (dict(delta=1.0), "delta"), (dict(delta=0), "delta"),
    (dict(metrics=[privagg.mean("x")], domain=["a"], delta=0), "delta"),
    (dict(domain=[]), "domain"), (dict(domain={"a"}), "domain"), (dict(domain=["a", None]), "domain"),
    (dict(domain=["a", "a"]), "domain"), (dict(by=["k", "j"], domain=["a"]), "domain"),
    (dict(units="nope"), "units"), (dict(max_rows_per_group=2), "max_rows_per_group"),
    (dict(units="j", max_groups_per_unit=0), "max_groups_per_unit"),
    (dict(weights={"count": 0}), "weights"), (dict(weights=[1]), "weights"),
    (dict(neighbors="swap"), "neighbors"), (dict(rng=-1), "rng"), (dict(table=3), "table"),
    (dict(where=3), "where"), (dict(epsilon=1e-4), "epsilon"),
])
def test_aggregate_errors_name_the_parameter(change, param):
    df = DF.assign(s=DF["k"])
    kw = dict(by="k", metrics=[privagg.count()], epsilon=1, delta=1e-6, rng=0)
    kw.update(change)
    table = kw.pop("table", df)
    if param == "metrics" and "metrics" in change and change["metrics"]:
        table = pa.Table.from_pandas(df)  # a VARCHAR column is not numeric (not CSV)
    with pytest.raises(privagg.ParameterError, match=f"'{param}'"):
        privagg.aggregate(table, **kw)


def test_lazy_exports():
    assert privagg.aggregate is agg.aggregate and privagg.sum is agg.sum and privagg.count is agg.count
    assert privagg.mean is agg.mean and privagg.quantile is agg.quantile
    assert privagg.AggregateRelease is agg.AggregateRelease
    assert privagg.quantile("age", 0.5).name == "q0.5_age" and privagg.sum("c", (0, 1)).name == "sum_c"
