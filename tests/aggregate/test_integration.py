"""privagg.aggregate across its seams: where= bound to the schema, csv= dialects, every metric's
own plan checked before the ledger, the interval kinds, AggregateRelease.plot."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import privagg
from privagg.accounting import Ledger
from privagg.engines.duckdb import CsvOptions


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("g,x,y\na,1,0\na,5,1\nb,7,0\nb,2,1\n", encoding="utf-8")
    return path


def _ledger(tmp_path: Path) -> Ledger:
    return Ledger.create(tmp_path / "l.ledger", epsilon=10, delta=1e-3)


# --- where= -------------------------------------------------------------------------------------


def test_where_on_csv_text_column_is_a_binding_error_before_the_ledger(csv_path, tmp_path):
    # Before the fix the engine's read failed and the message blamed the file.
    with _ledger(tmp_path) as ledger:
        with pytest.raises(privagg.ParameterError, match=r"parameter 'where'.*CAST") as info:
            privagg.aggregate(str(csv_path), by="g", metrics=[privagg.count()], epsilon=1, domain=["a", "b"],
                              where="x > 3", rng=0, ledger=ledger)
        assert "parameter 'file'" not in str(info.value)
        assert ledger.charges() == []


def test_where_with_cast_filters_csv_rows(csv_path):
    rel = privagg.aggregate(str(csv_path), by="g", metrics=[privagg.sum("x", (0, 10))], epsilon=1e6,
                            domain=["a", "b"], where="TRY_CAST(x AS DOUBLE) > 3", rng=0)
    # ε = 1e6: the noise is far below the grid; rows kept: a:5, b:7
    assert rel.groups["sum_x"].round(3).tolist() == [5.0, 7.0]


def test_where_type_error_on_a_dataframe_is_a_where_error():
    df = pd.DataFrame({"g": ["a", "b"], "s": ["1", "2"]})
    with pytest.raises(privagg.ParameterError, match=r"parameter 'where'"):
        privagg.aggregate(df, by="g", metrics=[privagg.count()], epsilon=1, domain=["a", "b"], where="s > 3", rng=0)


def test_where_on_a_categorical_column_still_binds():
    # negative control of the binding: a pandas categorical is an ENUM in DuckDB, compared as text
    df = pd.DataFrame({"g": ["a", "b", "a"], "c": pd.Categorical(["u", "v", "u"])})
    rel = privagg.aggregate(df, by="g", metrics=[privagg.count()], epsilon=1e3, domain=["a", "b"],
                            where="c = 'u'", rng=0)
    assert rel.groups["count"].tolist() == [2.0, 0.0]


# --- csv= -----------------------------------------------------------------------------------------


def test_csv_dialect_is_used(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("g;x\na;1\nb;5\nb;6\n", encoding="utf-8")
    rel = privagg.aggregate(str(path), by="g", metrics=[privagg.sum("x", (0, 10))], epsilon=1e6,
                            domain=["a", "b"], csv=CsvOptions(delimiter=";"), rng=0)
    assert rel.groups["sum_x"].round(3).tolist() == [1.0, 11.0]
    with pytest.raises(privagg.ParameterError, match="parameter 'csv'"):
        privagg.aggregate(pd.DataFrame({"g": ["a"]}), by="g", metrics=[privagg.count()], epsilon=1,
                          domain=["a"], csv=CsvOptions(delimiter=";"), rng=0)


# --- every metric's plan before the ledger -------------------------------------------------------------


@pytest.mark.parametrize(("metric", "extra", "param"), [
    (privagg.count(), {"weights": {"count": 1e-30}}, "epsilon"),
    (privagg.sum("x", (0, 10)), {"weights": {"sum_x": 1e-30}}, "epsilon"),
    (privagg.sum("x", (0, 1e305)), {}, "upper"),
    (privagg.mean("x", (0, 10)), {"weights": {"mean_x": 1e-30}}, "epsilon"),
    (privagg.mean("x", (-1e305, 0)), {}, "lower"),
    (privagg.mean("x"), {"weights": {"mean_x": 1e-40}}, "epsilon"),
    (privagg.mean("x"), {"delta": 1e-300}, "delta"),
    (privagg.quantile("x", 0.5), {"weights": {"q0.5_x": 1e-20}}, "epsilon"),
    (privagg.quantile("x", 0.5, (0, 10)), {"weights": {"q0.5_x": 1e-20}}, "epsilon"),
])
def test_metric_plan_errors_come_before_the_charge(csv_path, tmp_path, metric, extra, param):
    with _ledger(tmp_path) as ledger:
        kw = {"delta": 1e-6, **extra}
        with pytest.raises(privagg.ParameterError, match=rf"the metric '{metric.name}'.*parameter '{param}'"):
            # a second metric (count, at weight 1) so that a weight can make this one's share tiny
            others = [privagg.sum("y", (0, 1))] if metric.name == "count" else [privagg.count()]
            privagg.aggregate(str(csv_path), by="g", metrics=[metric, *others], epsilon=1, domain=["a", "b"],
                              rng=0, ledger=ledger, **kw)
        assert ledger.charges() == []
        assert ledger.spent().epsilon == 0


def test_plans_pass_at_ordinary_parameters(csv_path, tmp_path):
    # negative control: the same metrics at ordinary shares run and charge once
    with _ledger(tmp_path) as ledger:
        privagg.aggregate(str(csv_path), by="g", epsilon=1, delta=1e-6, domain=["a", "b"], rng=0, ledger=ledger,
                          metrics=[privagg.count(), privagg.sum("x", (0, 10)), privagg.mean("x", (0, 10)),
                                   privagg.mean("y"), privagg.quantile("x", 0.5), privagg.quantile("y", 0.5, (0, 10))])
        assert len(ledger.charges()) == 1


# --- intervals and plot ---------------------------------------------------------------------------------


def test_intervals_kind_per_metric_and_plot(csv_path, tmp_path):
    rel = privagg.aggregate(str(csv_path), by="g", epsilon=1, domain=["a", "b"], rng=0,
                            metrics=[privagg.count(), privagg.sum("x", (0, 10)), privagg.quantile("x", 0.5, (0, 10))])
    d = rel.to_dict()
    assert d["intervals"] == {"count": "noise95", "sum_x": "noise95", "q0.5_x": "grid_cell"}
    assert rel.intervals == d["intervals"]
    out = tmp_path / "p.png"
    fig = rel.plot(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert labels == ["count (95% noise interval)", "sum_x (95% noise interval)", "q0.5_x (grid cell)"]
