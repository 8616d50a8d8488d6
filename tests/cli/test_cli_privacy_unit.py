"""CLI ``privagg histogram --privacy-unit COL`` (issue 12): user-level release and its report."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from privagg.cli.main import cli as main


def _file(tmp_path):
    rng = np.random.default_rng(0)
    u = rng.integers(0, 400, 4000)
    k = rng.zipf(1.6, 4000) % 30
    path = tmp_path / "r.csv"
    path.write_text("user,item\n" + "".join(f"{a},{b}\n" for a, b in zip(u, k, strict=True)))
    return path


def test_privacy_unit_json_reports_unit_bounds_and_no_dropped_count(tmp_path):
    path = _file(tmp_path)
    args = ["histogram", str(path), "--column", "item", "--privacy-unit", "user", "--epsilon", "1",
            "--delta", "1e-6", "--max-keys-per-unit", "3", "--max-rows-per-key", "2", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["privacy_unit"] == "user" and out["neighbors"] == "add_remove"
    assert (out["max_keys_per_unit"], out["max_rows_per_key"]) == (3, 2)
    assert out["rows_dropped"] == "not released"
    assert out["scale"] == float(6 / __import__("fractions").Fraction(9, 10)) and out["n"] is None
    # a unit holds at most 3 keys × 2 rows: the noisy total is near ≤ 400 · 6
    assert out["noisy_total"] < 400 * 6 + 100


def test_privacy_unit_table_and_errors(tmp_path):
    path = _file(tmp_path)
    base = ["histogram", str(path), "--column", "item", "--epsilon", "1", "--delta", "1e-6"]
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "user"])
    assert res.exit_code == 0 and "column 'user'" in res.stdout and "≤ 1 keys per unit" in res.stdout
    res = CliRunner().invoke(main, [*base, "--max-keys-per-unit", "2"])
    assert res.exit_code == 2 and "max_keys_per_unit" in res.stderr
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "nope"])
    assert res.exit_code == 2 and "column" in res.stderr
    res = CliRunner().invoke(main, [*base, "--privacy-unit", "user", "--neighbors", "replace"])
    assert res.exit_code == 2 and "neighbors" in res.stderr
    dom = tmp_path / "dom.txt"
    dom.write_text("".join(f"{i}\n" for i in range(30)))
    res = CliRunner().invoke(main, ["histogram", str(path), "--column", "item", "--epsilon", "1", "--domain",
                                    str(dom), "--privacy-unit", "user", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mechanism"] == "laplace_histogram" and len(out["keys"]) == 30 and out["scale"] == 1.0
