"""A tiny run of ``benchmarks/aggregate_far.py`` (issue 13 item 4: far columns in small groups):
what it returns, that its "no partial" column really runs the plan without the partial step (and
puts the constant back), and the laws' supports. One seeded run: deterministic."""

from __future__ import annotations

import numpy as np

import privagg.mechanisms.grouped_mean as gm


def test_laws(far_bench) -> None:
    gen = np.random.default_rng(1)
    assert set(far_bench.LAWS["years"](gen, 500)) == {2007.0, 2008.0, 2009.0}
    assert set(far_bench.LAWS["binary"](gen, 500)) == {0.0, 1.0}
    assert set(far_bench.LAWS["likert"](gen, 500)) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert (far_bench.LAWS["lognormal"](gen, 500) > 0).all()
    assert abs(np.median(far_bench.LAWS["n1e6"](gen, 500)) - 1e6) < 3.0


def test_smoke_side_by_side(far_bench, capsys) -> None:
    """N(10⁶, 10²) in five groups of 100 rows, one run: without the partial step the release is
    far off (the plan before), with it within a few sd; the constant is restored afterwards."""
    before = gm.REFINE_PARTIAL_MIN, gm.REFINE_FLOOR_SHARE
    res = far_bench.main(["--laws", "n1e6", "--sizes", "100", "--runs", "1"])
    assert (gm.REFINE_PARTIAL_MIN, gm.REFINE_FLOOR_SHARE) == before
    cell = res["n1e6/100"]
    assert set(cell) == {"privagg", "no subcells", "no floor", "no partial", "bounded", "coverage"} and 0.0 <= cell["coverage"] <= 1.0
    print(cell)
    assert cell["no partial"][0] > 20.0 and cell["privagg"][0] < 5.0
    assert "n1e6" in capsys.readouterr().out


def test_smoke_four_metric_query(far_bench) -> None:
    """The same groups in the four-metric query: the capped shares afford one level, so only the
    floor of step 2b's shares brings the release within a few sd ("no floor" is the plan before)."""
    before = gm.REFINE_FLOOR_SHARE
    cell = far_bench.main(["--laws", "n1e6", "--sizes", "100", "--runs", "1", "--query", "four"])["n1e6/100"]
    assert gm.REFINE_FLOOR_SHARE == before
    print(cell)
    assert cell["no floor"][0] > 20.0 and cell["no partial"][0] > 20.0 and cell["privagg"][0] < 5.0
