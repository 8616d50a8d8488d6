"""``privagg histogram --noise gaussian`` (issue 12): the user-level Laplace histogram with discrete
Gaussian noise, as ``laplace_histogram(noise="gaussian")`` — refused (exit 2, nothing charged)
wherever Python refuses it, and its JSON/table state the noise law and its parameters."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli as main
from privagg.mechanisms.histogram import LaplaceHistogramParams


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    users, items = rng.integers(0, 300, 3000), rng.integers(0, 20, 3000)
    data = tmp_path / "u.csv"
    data.write_text("user,item\n" + "".join(f"{u},{k}\n" for u, k in zip(users, items, strict=True)))
    dom = tmp_path / "dom.txt"
    dom.write_text("".join(f"{i}\n" for i in range(20)))
    return data, dom


def _base(files, ledger):
    data, dom = files
    return ["histogram", str(data), "--column", "item", "--epsilon", "1", "--ledger", str(ledger)], dom


BAD = [  # (extra options, the start of the one-line error)
    # without --domain it is the stable histogram's Gaussian thresholding: test_cli_histogram_selection.py
    (["--domain", "DOM", "--noise", "gaussian", "--delta", "1e-6"],
     "laplace_histogram: parameter 'noise' must be 'laplace' without --privacy-unit"),
    (["--domain", "DOM", "--privacy-unit", "user", "--noise", "gaussian"],
     "laplace_histogram: parameter 'delta' must be given with --noise gaussian"),
    (["--domain", "DOM", "--privacy-unit", "user", "--noise", "gaussian", "--delta", "1"],
     "laplace_histogram: parameter 'delta' must be a number in the open interval"),
    (["--domain", "DOM", "--privacy-unit", "user", "--noise", "normal"],
     "laplace_histogram: parameter 'noise' must be one of 'laplace', 'gaussian'"),
    (["--domain", "DOM", "--privacy-unit", "user", "--noise", "gaussian", "--delta", "1e-6", "--threshold", "tight"],
     "laplace_histogram: parameter 'threshold' must be omitted with --domain"),
    (["--domain", "DOM", "--privacy-unit", "user", "--noise", "gaussian", "--delta", "1e-6", "--engine", "spark"],
     "laplace_histogram: parameter 'noise' must be 'laplace' with --engine spark"),
    (["--domain", "DOM", "--privacy-unit", "user", "--delta", "1e-6"],  # Laplace stays pure ε
     "laplace_histogram: parameter 'delta' must be omitted with --domain"),
]


@pytest.mark.parametrize(("extra", "message"), BAD)
def test_gaussian_refused_with_exit_2_and_nothing_charged(files, ledger_path, extra, message):
    base, dom = _base(files, ledger_path)
    res = CliRunner().invoke(main, [*base, *[str(dom) if a == "DOM" else a for a in extra]])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"privagg: error: {message}"), res.stderr
    assert res.stdout == ""
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []


def test_gaussian_release_json_states_the_law_and_its_parameters(files, ledger_path):
    base, dom = _base(files, ledger_path)
    args = [*base, "--domain", str(dom), "--privacy-unit", "user", "--max-keys-per-unit", "8",
            "--max-rows-per-key", "2", "--noise", "gaussian", "--delta", "1e-6", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    params = LaplaceHistogramParams.build(1.0, "add_remove", 20, bounds=(8, 2), noise="gaussian", delta=1e-6)
    assert out["mechanism"] == "laplace_histogram" and out["noise"] == "discrete_gaussian"
    assert out["sigma2"] == float(params.sigma2) and out["rho"] == float(params.rho)
    assert out["scale"] == float(params.scale) and out["scale"] ** 2 >= out["sigma2"]  # σ, rounded up
    assert (out["epsilon"], out["delta"]) == (1.0, 1e-6)
    assert (out["privacy_unit"], out["max_keys_per_unit"], out["max_rows_per_key"]) == ("user", 8, 2)
    assert out["rows_dropped"] == "not released" and out["neighbors"] == "add_remove"
    assert len(out["keys"]) == 20 and out["error_bound"] is not None
    with Ledger(ledger_path) as ledger:  # charged (ε, δ) once: the Gaussian's δ included
        (charge,) = ledger.charges()
        assert float(charge.loss.delta) == 1e-6 and 0 < float(charge.loss.epsilon) <= 1.0


def test_gaussian_table_and_auto_l0(files, ledger_path):
    base, dom = _base(files, ledger_path)
    user = [*base, "--domain", str(dom), "--privacy-unit", "user", "--noise", "gaussian", "--delta", "1e-6"]
    res = CliRunner().invoke(main, user)
    assert res.exit_code == 0, res.output
    assert "discrete Gaussian, σ" in res.stdout and "σ² =" in res.stdout and "δ = 1e-06" in res.stdout
    res = CliRunner().invoke(main, [*user, "--max-keys-per-unit", "auto", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["noise"] == "discrete_gaussian" and out["max_keys_per_unit_auto"] is not None
    assert out["sigma2"] > 0 and out["delta"] == 1e-6


def test_laplace_release_json_has_null_gaussian_parameters(files, ledger_path):
    base, dom = _base(files, ledger_path)
    res = CliRunner().invoke(main, [*base, "--domain", str(dom), "--privacy-unit", "user", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["noise"] == "discrete_laplace" and out["sigma2"] is None and out["rho"] is None
    assert out["delta"] == 0.0
