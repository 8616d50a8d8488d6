"""``privagg histogram``: the options and output paths that tests/cli/test_cli_histogram.py does
not reach — ``--threshold seed``, ``--beta``, Laplace under ``add_remove`` and the README's
``error_bound: null`` case. Noise-free (the noise is tested in tests/mechanisms), so every
number below is a known answer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from privagg.cli.main import cli
from privagg.mechanisms import histogram as H

# 40 × "a", 30 × "b", 1 × "c", 5 × missing: n = 76.
KEYS = ["a"] * 40 + ["b"] * 30 + ["c"] + [None] * 5


@pytest.fixture
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "visits.csv"
    lines = ["id,code"] + [f"{i},{'' if k is None else k}" for i, k in enumerate(KEYS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def invoke(*args: str | Path):
    return CliRunner().invoke(cli, [str(a) for a in args])


def stable_json(data_file: Path, *extra: str) -> dict:
    res = invoke("histogram", data_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json", *extra)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_threshold_seed_is_used(no_noise: None, data_file: Path) -> None:
    """Seed rule: T = ⌈1 + 2·ln(2·10⁶)⌉ = 31 (tight: 28), so b (30) is dropped."""
    assert H.stable_threshold(1.0, 1e-6, rule="seed") == 31
    out = stable_json(data_file, "--threshold", "seed")
    assert out["threshold"] == 31 and out["keys"] == ["a"] and out["counts"] == [40]
    tight = stable_json(data_file, "--threshold", "tight")
    assert tight["threshold"] == 28 and tight["keys"] == ["a", "b"]
    assert stable_json(data_file) == tight  # the default is tight


def test_beta_sets_the_bound_in_json_and_table(no_noise: None, data_file: Path) -> None:
    """--beta 0.2: the JSON reports β = 0.2 and the stable replace bound (T − 1 + k_n(β))/n at
    that β; the table names it and its intervals are 80 % ones."""
    ref = H.stable_histogram(["a"] * len(KEYS), epsilon=1.0, delta=1e-6, rng=0)  # same n, T, scale
    out = stable_json(data_file, "--beta", "0.2")
    assert out["beta"] == 0.2 and out["error_bound"] == ref.error_bound(0.2)
    default = stable_json(data_file)
    assert default["beta"] == 0.05 and default["error_bound"] == ref.error_bound(0.05)
    assert ref.error_bound(0.2) < ref.error_bound(0.05)
    table = invoke("histogram", data_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6",
                   "--beta", "0.2")
    assert table.exit_code == 0, table.stderr
    assert "β = 0.2" in table.stdout and "80% interval" in table.stdout


def test_laplace_add_remove_path(no_noise: None, data_file: Path, tmp_path: Path) -> None:
    """--domain with --neighbors add_remove: scale 1/ε, n private (null), frequencies over the
    noisy total, and the add/remove error bound of the Python API."""
    domain = tmp_path / "codes.txt"
    domain.write_text("a\nb\nc\nz\n", encoding="utf-8")
    res = invoke("histogram", data_file, "--column", "code", "--epsilon", "0.5", "--domain", domain,
                 "--neighbors", "add_remove", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["mechanism"] == "laplace_histogram" and out["neighbors"] == "add_remove"
    assert out["scale"] == 2.0 and out["n"] is None and out["delta"] == 0.0
    assert out["keys"] == ["a", "b", "c", "z"] and out["counts"] == [40, 30, 1, 0]
    assert out["frequencies"] == pytest.approx([40 / 71, 30 / 71, 1 / 71, 0.0])
    ref = H.laplace_histogram(["a"] * 40 + ["b"] * 30 + ["c"], epsilon=0.5, domain=["a", "b", "c", "z"],
                              neighbors="add_remove", rng=0)
    assert ref.total == 71 and out["error_bound"] == ref.error_bound(0.05) < 1


def test_error_bound_null_when_no_finite_bound(no_noise: None, tmp_path: Path) -> None:
    """README: ``error_bound`` is null when no finite bound exists — a Laplace histogram under
    add_remove whose noisy total (here 3) is at most the bound on the total's noise."""
    path = tmp_path / "few.csv"
    path.write_text("code\na\na\nb\n", encoding="utf-8")
    domain = tmp_path / "codes.txt"
    domain.write_text("a\nb\n", encoding="utf-8")
    args = ["histogram", path, "--column", "code", "--epsilon", "1", "--domain", domain, "--neighbors", "add_remove"]
    res = invoke(*args, "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["counts"] == [2, 1] and out["error_bound"] is None
    table = invoke(*args)
    assert table.exit_code == 0, table.stderr
    assert "noisy total is too small" in table.stdout
