"""The pure helpers of ``benchmarks/aggregate_group_size.py`` (issue 13's group-size sweep) and a
tiny smoke run (PipelineDP-dependent: skipped without ``pipeline_dp``). No statistical assertion:
the smoke run checks what is printed, not the errors' sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest


def test_crossover_known_answers(group_size_sweep) -> None:
    """The smallest size from which the target holds at that and every larger size; a miss after a
    met size resets it; NaN (no peer) and inf (⊥) miss; the sizes need not be sorted."""
    c = group_size_sweep.crossover
    assert c([30, 60, 100, 200], [3.0, 1.2, 1.4, 1.5]) == 60
    assert c([30, 60, 100, 200], [1.0, 1.2, 2.0, 1.4]) == 200  # 30 and 60 met, 100 missed
    assert c([30, 60, 100, 200], [1.0, 1.0, 1.0, 1.6]) is None  # the largest misses
    assert c([30, 60], [1.0, math.nan]) is None
    assert c([30, 60], [math.inf, 1.0]) == 60
    assert c([200, 30, 100, 60], [1.4, 3.0, 1.2, 1.0]) == 60
    assert c([30, 60], [2.0, 2.0], target=2.0) == 30


def test_make_groups_laws(group_size_sweep) -> None:
    """Equal group sizes, string labels, the laws' supports, per-group shifts (group means increase
    with the label), and the same table from the same seed."""
    for law in group_size_sweep.LAWS:
        df = group_size_sweep.make_groups(law, 5, 400, 1)
        assert len(df) == 2000 and df["g"].map(type).eq(str).all()
        assert df.groupby("g").size().tolist() == [400] * 5
        means = df.groupby("g", sort=True)["v"].mean().to_numpy()
        assert means[-1] - means[0] > 0.5 * df["v"].std(), (law, means)  # the shift is visible
        assert df.equals(group_size_sweep.make_groups(law, 5, 400, 1))
        assert not df.equals(group_size_sweep.make_groups(law, 5, 400, 2))
    assert set(group_size_sweep.make_groups("binary", 5, 200, 1)["v"]) == {0.0, 1.0}
    assert set(group_size_sweep.make_groups("likert", 5, 200, 1)["v"]) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert (group_size_sweep.make_groups("lognormal", 5, 200, 1)["v"] > 0).all()
    assert group_size_sweep.make_groups("normal", 50, 2, 1)["g"].iloc[-1] == "g49"
    with pytest.raises(ValueError, match="unknown law"):
        group_size_sweep.make_groups("cauchy", 2, 10, 1)


def test_true_bounds_and_pdp_runs(group_size_sweep) -> None:
    v = np.arange(100001, dtype=float)
    assert group_size_sweep.true_bounds(v) == pytest.approx((100.0, 99900.0))
    assert group_size_sweep.true_bounds(np.ones(50)) == (1.0, 2.0)
    assert group_size_sweep.pdp_runs(10, 1_000) == 10
    assert group_size_sweep.pdp_runs(10, 25_000) == 4
    assert group_size_sweep.pdp_runs(10, 250_000) == 2
    assert group_size_sweep.pdp_runs(1, 250_000) == 1
    assert group_size_sweep.pdp_runs(10, 30_000, budget=60_000) == 2


def test_worst_group_error_known_answers(group_size_sweep) -> None:
    """The largest relative error of the mean over the true groups: ⊥ (NaN) or a missing group is
    inf; groups the truth does not hold are ignored; a zero mean is divided by 1e-12."""
    w = group_size_sweep.worst_group_error
    truth = {"mean": {"a": 10.0, "b": -2.0, "c": 0.5}}
    assert w({"mean": {"a": 11.0, "b": -2.0, "c": 0.5}}, truth) == pytest.approx(0.1)
    assert w({"mean": {"a": 10.0, "b": -1.0, "c": 0.5}}, truth) == pytest.approx(0.5)
    assert w({"mean": {"a": 10.0, "b": -2.0, "c": 0.0}}, truth) == pytest.approx(1.0)
    assert w({"mean": {"a": 10.0, "b": -2.0}}, truth) == math.inf
    assert w({"mean": {"a": 10.0, "b": math.nan, "c": 0.5}}, truth) == math.inf
    assert w({"mean": {"a": 10.0, "b": -2.0, "c": 0.5, "z": 99.0}}, truth) == 0.0
    assert w({"mean": {"z": 1e-9}}, {"mean": {"z": 0.0}}) == pytest.approx(1e3)


def test_smoke_prints_cells_and_crossover(group_size_sweep, capsys: pytest.CaptureFixture[str]) -> None:
    """One law, G = 2, two sizes, one run: a row per size with the three methods, the crossover
    lines, the small-group switch (a positive number), and a cell over --max-cell-rows skipped."""
    pytest.importorskip("pipeline_dp")
    result = group_size_sweep.main(["--laws", "likert", "--groups", "2", "--sizes", "30,60,500", "--runs", "1",
                         "--max-cell-rows", "200", "--markdown"])
    text = capsys.readouterr().out
    assert result["switch"] is not None and result["switch"] > 60
    assert set(result["cells"]) == {("likert", 2, 30), ("likert", 2, 60)}
    for cell in result["cells"].values():
        assert all(math.isfinite(cell[m]) or cell[m] == math.inf
                   for m in ("privagg unbounded", "privagg bounded", "PipelineDP",
                             "privagg unbounded worst group", "privagg bounded worst group"))
        assert cell["privagg unbounded worst group"] >= cell["privagg unbounded"]
    assert "skipped n_g 500 (over 200 rows)" in text
    assert "crossover likert, G = 2:" in text
    assert text.count("| 30 | 60 | 1 |") == 1 and text.count("| 60 | 120 | 1 |") == 1
    assert result["crossover"]["likert"] in (None, 30, 60)
