"""Issue 12 item 6: the mean, k-means and aggregate releases state the privacy unit, its bound,
the neighbour relation and that the rows dropped by bounding are not released — with the
histogram's names (``privacy_unit``, ``max_rows_per_unit``, ``neighbors``, ``rows_dropped``), in
Python, in ``--json`` and in the table."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from privagg.cli.main import cli as main
from privagg.mechanisms.kmeans import private_kmeans
from privagg.mechanisms.mean import private_mean


@pytest.fixture
def points_file(tmp_path):
    rng = np.random.default_rng(1)
    n = 2000
    path = tmp_path / "p.csv"
    users, x, y = rng.integers(0, 500, n), rng.normal(5, 1, n), rng.normal(-3, 1, n)
    path.write_text("user,x,y\n" + "".join(f"{u},{a},{b}\n" for u, a, b in zip(users, x, y, strict=True)))
    return path


def _points(n=1500):
    rng = np.random.default_rng(2)
    return rng.normal(0, 1, (n, 2)), rng.integers(0, 300, n)


@pytest.mark.parametrize("release_of", [
    lambda x, **kw: private_mean(x, epsilon=1.0, delta=1e-6, radius=4.0, rng=3, **kw),
    lambda x, **kw: private_kmeans(x, 1, epsilon=1.0, delta=1e-6, rng=3, **kw),
], ids=["mean", "kmeans"])
def test_python_release_carries_the_unit(release_of):
    x, u = _points()
    named = release_of(x, units=pd.Series(u, name="person"), max_rows_per_unit=2)
    assert (named.unit, named.max_rows_per_unit, named.neighbors, named.rows_dropped) == (
        "person", 2, "add_remove", "not released")
    assert release_of(x, units=u).unit == "units"  # an array has no name
    record = release_of(x)
    assert (record.unit, record.max_rows_per_unit, record.neighbors, record.rows_dropped) == (
        None, None, "add_remove", None)


@pytest.mark.parametrize("command", [["mean"], ["kmeans", "--k", "1"]])
def test_json_and_table_state_the_unit(points_file, command):
    base = [command[0], str(points_file), "--columns", "x,y", *command[1:], "--epsilon", "1", "--delta", "1e-6"]
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "user", "--max-rows-per-unit", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["privacy_unit"], out["max_rows_per_unit"]) == ("user", 3)  # as before
    assert (out["neighbors"], out["rows_dropped"]) == ("add_remove", "not released")
    res = CliRunner().invoke(main, [*base, "--json"])
    out = json.loads(res.stdout)
    assert (out["privacy_unit"], out["max_rows_per_unit"], out["neighbors"], out["rows_dropped"]) == (
        None, 1, "add_remove", None)
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "user", "--max-rows-per-unit", "3"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "privacy unit column 'user' (all rows of one unit)" in lines
    assert "bounding    one vector per unit: the average of up to 3 sampled rows (≤ 3 rows per unit)" in lines
    assert "rows dropped not released (would cost budget)" in lines
    res = CliRunner().invoke(main, base)
    assert "privacy unit one row (record level: each row is protected on its own)" in res.stdout.splitlines()
    assert "rows dropped" not in res.stdout


def test_aggregate_json_and_table_state_the_unit(points_file):
    base = ["aggregate", str(points_file), "--by", "user", "--count", "--epsilon", "1", "--delta", "1e-6"]
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "user", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["privacy_unit"], out["rows_dropped"], out["unit"]) == ("user", "not released", True)
    assert (out["max_groups_per_unit"], out["max_rows_per_group"], out["neighbors"]) == (1, 1, "add_remove")
    out = json.loads(CliRunner().invoke(main, [*base, "--json"]).stdout)
    assert (out["privacy_unit"], out["rows_dropped"], out["unit"]) == (None, None, False)
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "user"])
    assert res.exit_code == 0, res.output
    assert "column 'user' (all rows of one unit)" in res.stdout and "not released (would cost budget)" in res.stdout


def test_histogram_table_states_the_record_level_unit(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("code\n" + "A\n" * 60 + "B\n" * 50)
    res = CliRunner().invoke(main, ["histogram", str(path), "--column", "code", "--epsilon", "1", "--delta", "1e-6"])
    assert res.exit_code == 0, res.output
    assert "one row (record level: each row is protected on its own)" in res.stdout
