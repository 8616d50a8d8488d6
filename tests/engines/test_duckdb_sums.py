"""The DuckDB engine clamps and sums in DuckDB (issue 13 item 3: clamping inside the engine): a
column that only bounded sums and means read is not fetched; its present counts and exact clamped
integer sums come from one ``GROUP BY`` and equal numpy's ``clamped_terms`` sums bit for bit on
hostile values (ties on the term grid, ±0, ±inf, NaN, NULL, bounds near 2^±850 and with 16
significant digits), so every release is unchanged."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

import privagg
from privagg.engines import grouped as eg
from privagg.mechanisms.grouped import ColumnSums, GroupedValues
from privagg.mechanisms.grouped_bounded import _term_exponent
from privagg.testing.fixtures import CLAMP_BOUNDS, hostile_term_values

BOUNDS = CLAMP_BOUNDS
_hostile = hostile_term_values


@pytest.mark.parametrize("units", [None, "u"])
def test_duckdb_column_sums_equal_numpy_on_hostile_values(units) -> None:
    """Per group and bounds, DuckDB's sums == ``GroupedValues.integer_sums`` of the fetched rows
    (record level, and user level with ℓ0 = 2, ℓ∞ = 3: the same kept rows for the same secrets).
    Negative control: numpy's terms rounded half away from zero differ on the ties."""
    pdf = _hostile()
    pdf["u"] = np.random.default_rng(1).integers(0, 900, len(pdf))
    kw = dict(by=["g"], units=units, columns=["x"], where=None)
    opts = {} if units is None else dict(max_groups=2, max_rows=3, secrets=(11, 22))
    with eg.open_table(pdf, **kw) as tab:
        fetched = tab.prepare(**opts)
    with eg.open_table(pdf, **kw) as tab:
        summed = tab.prepare(**opts, sums={"x": BOUNDS})
    gv, cs = fetched.values["x"], summed.values["x"]
    assert isinstance(gv, GroupedValues) and isinstance(cs, ColumnSums)
    assert cs.present_counts().tolist() == gv.present_counts().tolist()
    for lo, hi in BOUNDS:
        assert cs.integer_sums(lo, hi).tolist() == gv.integer_sums(lo, hi).tolist(), (lo, hi)
    lo, hi = BOUNDS[0]
    t = np.floor(np.ldexp(np.clip(gv.values, lo, hi), -_term_exponent(lo, hi)) + 0.5).astype(np.int64)
    bad = [int(s) for s in np.bincount(gv.group, weights=t, minlength=gv.n_groups)]
    assert bad != cs.integer_sums(lo, hi).tolist()


def test_bounded_metrics_do_not_fetch_their_column(monkeypatch) -> None:
    """A query of count, sum and bounded mean fetches no value column (no ``ORDER BY i`` query);
    the release equals the one computed from the fetched values (the engine told nothing, seed 4).
    Control: a quantile of the column makes the engine fetch it."""
    rng = np.random.default_rng(3)
    pdf = pd.DataFrame({"g": rng.choice(list("abcd"), 5000), "x": rng.lognormal(2.0, 1.0, 5000)})
    metrics = [privagg.count(), privagg.sum("x", (0.0, 40.0)), privagg.mean("x", (1.0, 30.0))]
    seen: list[str] = []
    real = eg.GroupedTable._run

    def run(self, sql, params=None, fetch=False):
        seen.append(sql)
        return real(self, sql, params, fetch)

    monkeypatch.setattr(eg.GroupedTable, "_run", run)
    a = privagg.aggregate(pdf, by="g", metrics=metrics, epsilon=2, domain=list("abcd"), rng=4)
    assert not any("ORDER BY i" in q for q in seen), [q for q in seen if "ORDER BY i" in q]
    real_prepare = eg.GroupedTable.prepare
    monkeypatch.setattr(eg.GroupedTable, "prepare", lambda self, **kw: real_prepare(self, **{**kw, "sums": None}))
    b = privagg.aggregate(pdf, by="g", metrics=metrics, epsilon=2, domain=list("abcd"), rng=4)
    pd.testing.assert_frame_equal(a.groups, b.groups)
    monkeypatch.setattr(eg.GroupedTable, "prepare", real_prepare)
    seen.clear()
    privagg.aggregate(pdf, by="g", metrics=metrics + [privagg.quantile("x", 0.5, (0.0, 40.0))], epsilon=2,
                      domain=list("abcd"), rng=4)
    assert any("ORDER BY i" in q for q in seen)


@pytest.mark.parametrize("k, n", [(0, 0), (5, 1), (-1022, 1), (1023, 1), (1034, 2), (-1034, 2), (2500, 3)])
def test_power_steps_known_answers(k, n) -> None:
    """``power_steps(k)``: ``n`` normal powers of two whose exact product is 2^k (checked in
    integers/rationals: no double overflow on the way)."""
    from fractions import Fraction

    steps = eg.power_steps(k)
    assert len(steps) == n and all(2.0**-1022 <= s <= 2.0**1023 for s in steps)
    prod = Fraction(1)
    for s in steps:
        prod *= Fraction(s)
    assert prod == Fraction(2) ** k
