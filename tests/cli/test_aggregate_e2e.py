"""``privagg aggregate`` end to end against the REAL ``privagg.aggregate`` (no fake): CSV and
Parquet, every metric, --domain, units, --where, --json, --plot, --ledger, exit 3, escaping.

Randomness: every run is seeded (``--seed``); assertions are about shape, order, accounting and
exact facts (keys, the number of groups), or values at ε so large that the noise is far below
the checked tolerance (a false failure is then impossible: a count's noise is 0 with
probability > 1 − 10⁻⁹⁰ at ε = 1000 per step)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli

#: rows per key (a: 60, b: 40, c: 20), values 0..9 cycling, units 0..29 cycling
KEYS = ["a"] * 60 + ["b"] * 40 + ["c"] * 20
VALUES = [i % 10 for i in range(len(KEYS))]
UNITS = [i % 30 for i in range(len(KEYS))]
H = ["x" if i % 2 else "y" for i in range(len(KEYS))]


def run(*args: Any) -> Any:
    return CliRunner().invoke(cli, ["aggregate", *[str(a) for a in args]])


@pytest.fixture
def data_csv(tmp_path: Path) -> Path:
    path = tmp_path / "data.csv"
    lines = ["g,h,v,u"] + [f"{k},{h},{v},{u}" for k, h, v, u in zip(KEYS, H, VALUES, UNITS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def data_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "data.parquet"
    codes = {"a": 7, "b": 8, "c": 9}
    pq.write_table(pa.table({"g": pa.array([codes[k] for k in KEYS], pa.int64()), "h": H,
                             "v": pa.array(VALUES, pa.float64()), "u": UNITS}), path)
    return path


@pytest.fixture
def domain1(tmp_path: Path) -> Path:
    path = tmp_path / "dom.csv"
    path.write_text("g\nc\na\nzz\n", encoding="utf-8")  # order of the release; 'zz' absent
    return path


def _json(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_csv_every_metric_json_shape(data_csv, domain1, tmp_path):
    args = (data_csv, "--by", "g", "--domain", domain1, "--count", "--sum", "v:0:10", "--mean", "v:0:10",
            "--mean", "u", "--quantile", "v:0.5", "--quantile", "v:0.9:0:10", "--epsilon", "6", "--delta", "1e-6",
            "--seed", "1", "--json")
    d = _json(run(*args))
    assert {"mechanism", "epsilon", "delta", "by", "split", "groups"} <= set(d)
    assert d["mechanism"] == "aggregate" and d["by"] == ["g"]
    names = ["count", "sum_v", "mean_v", "mean_u", "q0.5_v", "q0.9_v"]
    # count, sum_v and mean_v (same column and bounds) are one shared step (aggregate_bounded.md §7, §8)
    assert set(d["split"]) == {"count+sum_v+mean_v", "mean_u", "q0.5_v", "q0.9_v"} and d["selection"] == "domain"
    assert Fraction(d["epsilon"]).limit_denominator(1000) == 6 and 0 < d["delta"] <= 1e-6
    assert d["intervals"] == {"count": "noise95", "sum_v": "noise95", "mean_v": "noise95", "mean_u": "noise95",
                              "q0.5_v": "grid_cell", "q0.9_v": "grid_cell"}
    assert [g["g"] for g in d["groups"]] == ["c", "a", "zz"]
    for g in d["groups"]:
        for n in names:
            assert {n, n + "_low", n + "_high"} <= set(g)
    # no row in 'zz': its unbounded mean is ⊥ unless its noisy counts clear the small-group
    # plan's floor ⌈1/ε_g⌉ (then a noise-only mean); either way the JSON says which
    zz = d["groups"][2]
    assert isinstance(zz["mean_u_ok"], bool)
    if zz["mean_u_ok"]:
        assert math.isfinite(zz["mean_u"]) and zz["mean_u_reason"] is None
    else:
        assert zz["mean_u"] is None and zz["mean_u_reason"]
    assert _json(run(*args)) == d  # the same seed, the same release


def test_csv_table_labels_intervals_truthfully(data_csv, domain1):
    result = run(data_csv, "--by", "g", "--domain", domain1, "--count", "--quantile", "v:0.5:0:10",
                 "--epsilon", "1", "--seed", "2")
    assert result.exit_code == 0, result.stderr
    assert "count [95% noise]" in result.stdout and "q0.5_v [grid cell]" in result.stdout
    assert "95% interval" not in result.stdout


def test_unbounded_mean_shows_its_clipping_range(data_csv, domain1):
    """An unbounded mean's table gets a "clipped to" column and its note; --json the two fields
    (a bounded mean neither: its range is the user's bounds)."""
    args = (data_csv, "--by", "g", "--domain", domain1, "--count", "--mean", "u", "--mean", "v:0:10",
            "--epsilon", "2", "--delta", "1e-6", "--seed", "3")
    result = CliRunner().invoke(cli, ["aggregate", *[str(a) for a in args]], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    assert "mean_u clipped to" in result.stdout and "mean_v clipped to" not in result.stdout
    assert "clamped its values to" in " ".join(result.stdout.split())
    for g in _json(run(*args, "--json"))["groups"]:
        assert {"mean_u_clip_low", "mean_u_clip_high"} <= set(g) and "mean_v_clip_low" not in g
        if g["mean_u_ok"]:
            assert g["mean_u_clip_low"] < g["mean_u_clip_high"]
        else:
            assert g["mean_u_clip_low"] is None and g["mean_u_clip_high"] is None


def test_parquet_two_by_columns_domain_and_exact_counts(data_parquet, tmp_path):
    dom = tmp_path / "dom2.csv"
    dom.write_text("h,g\nx,9\ny,007\nx,7\n", encoding="utf-8")  # "007" casts to the integer 7
    d = _json(run(data_parquet, "--by", "g,h", "--domain", dom, "--count", "--epsilon", "1000", "--seed", "3",
                  "--json"))
    assert [(g["g"], g["h"]) for g in d["groups"]] == [(9, "x"), (7, "y"), (7, "x")]
    assert [g["count"] for g in d["groups"]] == [10, 30, 30]


def test_privacy_unit_with_two_groups_per_unit_and_selection(data_csv):
    d = _json(run(data_csv, "--by", "g", "--count", "--privacy-unit", "u", "--max-groups-per-unit", "2",
                  "--epsilon", "1000", "--delta", "1e-6", "--seed", "4", "--json"))
    assert d["unit"] is True and d["max_groups_per_unit"] == 2 and d["selection"] == "optimal"
    assert set(d["split"]) == {"selection", "count"}
    counts = {g["g"]: g["count"] for g in d["groups"]}
    # each unit (0..29) has rows in 2 or 3 of a, b, c; at most 2 groups kept per unit and
    # max_rows_per_group 1 → distinct units per group: at most 30 each, 2·30 in all
    assert set(counts) <= {"a", "b", "c"} and sum(counts.values()) <= 60
    assert all(c <= 30 for c in counts.values())


def test_where_with_cast_and_without(data_csv, domain1, ledger_path):
    d = _json(run(data_csv, "--by", "g", "--domain", domain1, "--count", "--where", "TRY_CAST(v AS DOUBLE) >= 5",
                  "--epsilon", "1000", "--seed", "5", "--json"))
    assert [g["count"] for g in d["groups"]] == [10, 30, 0]
    result = run(data_csv, "--by", "g", "--domain", domain1, "--count", "--where", "v >= 5", "--epsilon", "1",
                 "--ledger", ledger_path)
    assert result.exit_code == 2 and result.stdout == ""
    assert "parameter 'where'" in result.stderr and "CAST" in result.stderr
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []


def test_delimiter_semicolon(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("g;v\na;1\nb;5\nb;6\n", encoding="utf-8")
    d = _json(run(path, "--by", "g", "--delimiter", ";", "--sum", "v:0:10", "--domain", _dom(tmp_path, "a", "b"),
                  "--epsilon", "1000000", "--seed", "6", "--json"))
    assert [round(g["sum_v"], 3) for g in d["groups"]] == [1.0, 11.0]


def _dom(tmp_path: Path, *keys: str) -> Path:
    path = tmp_path / "keys.csv"
    path.write_text("g\n" + "".join(k + "\n" for k in keys), encoding="utf-8")
    return path


def test_plot_and_ledger_charged_once_with_the_total(data_csv, domain1, ledger_path, tmp_path):
    out = tmp_path / "agg.png"
    result = run(data_csv, "--by", "g", "--domain", domain1, "--count", "--mean", "v", "--epsilon", "2",
                 "--delta", "1e-5", "--seed", "7", "--plot", out, "--ledger", ledger_path)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "charged ε=2, δ=" in result.stderr
    with Ledger(ledger_path) as ledger:
        charges = ledger.charges()
        assert len(charges) == 1 and charges[0].mechanism == "aggregate"
        assert charges[0].loss.epsilon == 2 and 0 < charges[0].loss.delta <= Fraction(1, 10**5)


def test_budget_exceeded_exits_3_and_prints_nothing_from_the_data(data_csv, domain1, tmp_path):
    path = tmp_path / "small.db"
    Ledger.create(path, epsilon=1).close()
    out = tmp_path / "never.png"
    result = run(data_csv, "--by", "g", "--domain", domain1, "--count", "--epsilon", "2", "--seed", "8",
                 "--ledger", path, "--plot", out)
    assert result.exit_code == 3
    assert result.stdout == "" and not out.exists()
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    with Ledger(path) as ledger:
        assert ledger.charges() == []


def test_hostile_keys_are_escaped_in_the_table(tmp_path):
    path = tmp_path / "hostile.csv"
    keys = ["[red]x[/red]", "e\x1b[31m", "line\nbreak"]
    body = "".join(f'"{k}",1\n' for k in keys for _ in range(5))
    path.write_text("g,v\n" + body, encoding="utf-8")
    dom = tmp_path / "hk.csv"
    dom.write_text("g\n" + "".join(f'"{k}"\n' for k in keys), encoding="utf-8")
    result = run(path, "--by", "g", "--domain", dom, "--count", "--epsilon", "1", "--seed", "9")
    assert result.exit_code == 0, result.stderr
    assert "[red]x[/red]" in result.stdout  # shown literally, not as markup
    assert "\x1b" not in result.stdout and "\\x1b[31m" in result.stdout
    assert "line\\x0abreak" in result.stdout
