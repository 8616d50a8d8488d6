"""A tiny run of ``benchmarks/aggregate_sweep.py`` (issue 13: every group-by pair of the packaged
real tables): which pairs it takes, what one pair's figures are, and that ``--set`` puts the
constant back. One seeded run: deterministic."""

from __future__ import annotations

import pandas as pd
import pytest

import privagg.mechanisms.grouped_mean as gm


def test_pairs(sweep_bench) -> None:
    df = pd.DataFrame({"g": ["a", "b"] * 60, "i": [1, 2, 3] * 40, "x": [float(i) for i in range(120)],
                       "b": [True, False] * 60, "few": [1.0, 2.0] * 60, "s": ["u"] * 120})
    # group columns: 2–12 values (strings, booleans, integers, floats with at most 6; not "s": one
    # value); value columns: numeric, not boolean, at least 3 values
    assert set(sweep_bench.pairs(df)) == {("g", "i"), ("g", "x"), ("i", "x"), ("b", "i"), ("b", "x"),
                                          ("few", "i"), ("few", "x")}
    assert list(sweep_bench.pairs(df.head(99))) == []  # fewer than 100 rows


def test_one_pair_and_the_variant_restored(sweep_bench, capsys) -> None:
    pytest.importorskip("vega_datasets")
    before = gm.SIDE_COST
    res = sweep_bench.main(["--runs", "1", "--only", "cars:Cylinders:Displacement",
                            "--set", "grouped_mean.SIDE_COST=0.5"])
    assert gm.SIDE_COST == before
    cell = res["cars:Cylinders:Displacement"]
    assert (cell["rows"], cell["groups"], cell["smallest"]) == (406, 5, 3)
    assert cell["unbounded"]["mean"] > 0 and cell["bounded"]["mean"] > 0 and 0 <= cell["unbounded"]["coverage"] <= 1
    out = capsys.readouterr().out
    assert "pairs: 1;" in out and "'grouped_mean.SIDE_COST': 0.5" in out
