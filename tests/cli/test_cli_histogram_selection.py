"""``privagg histogram`` without --domain at user level (issue 12): ``--selection optimal`` (the
truncated-geometric partition selection on distinct units, docs/proofs/histograms.md §8) and
``--noise gaussian`` (Gaussian thresholding, §11) through the DuckDB engine — refused (exit 2, one
line, nothing charged) wherever Python refuses them, equal to Python's ``stable_histogram`` on
the same rows and generator, and truthfully rendered (JSON and table)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner

from privagg import stable_histogram
from privagg.accounting import Ledger
from privagg.cli import histogram as cli_histogram
from privagg.cli.main import cli as main
from privagg.engines.counting import KeyCounts
from privagg.mechanisms.histogram import StableHistogramParams, stable_histogram_from_counts

SEED = 20261201  # the fixed generator of the equality tests (deterministic: no false failures)


@pytest.fixture
def rows(tmp_path):
    """16000 (user, item) rows: 2000 users, 20 items (skewed), repeated pairs (so ℓ∞ > 1 matters)."""
    rng = np.random.default_rng(0)
    users, items = rng.integers(0, 2000, 16000), np.minimum(rng.geometric(0.15, 16000) - 1, 19)
    data = tmp_path / "u.csv"
    data.write_text("user,item\n" + "".join(f"{u},{k}\n" for u, k in zip(users, items, strict=True)))
    return data, users.astype(str).astype(object), items.astype(str).astype(object)  # a CSV's cells are text


def _args(data, ledger, *extra):
    return ["histogram", str(data), "--column", "item", "--privacy-unit", "user", "--epsilon", "1",
            "--delta", "1e-6", "--ledger", str(ledger), *extra]


BAD = [  # (extra options, the start of the one-line error)
    (["--noise", "gaussian", "--max-keys-per-unit", "auto"],
     "stable_histogram: parameter 'noise' must be 'laplace' with --max-keys-per-unit auto and no --domain"),
    (["--noise", "gaussian", "--threshold", "seed"],
     "stable_histogram: parameter 'threshold' must be 'tight' with --noise gaussian"),
    (["--noise", "gaussian", "--engine", "spark"],
     "stable_histogram: parameter 'noise' must be 'laplace' with --engine spark"),
    (["--noise", "gaussian", "--selection", "optimal"],
     "stable_histogram: parameter 'noise' must be 'laplace' with --selection optimal"),
    (["--selection", "optimal", "--max-keys-per-unit", "auto"],
     "stable_histogram: parameter 'selection' must be 'threshold' with --max-keys-per-unit auto"),
    (["--selection", "optimal", "--threshold", "tight"],
     "stable_histogram: parameter 'threshold' must be omitted with --selection optimal"),
    (["--selection", "optimal", "--engine", "spark"],
     "stable_histogram: parameter 'selection' must be 'threshold' with --engine spark"),
    (["--noise", "gaussian", "--selection", "gaussian"],
     "stable_histogram: parameter 'noise' must be 'laplace' with --selection gaussian"),
    (["--selection", "gaussian", "--threshold", "tight"],
     "stable_histogram: parameter 'threshold' must be omitted with --selection gaussian"),
    (["--selection", "gaussian", "--engine", "spark"],
     "stable_histogram: parameter 'selection' must be 'threshold' with --engine spark"),
    (["--selection", "best"],
     "stable_histogram: parameter 'selection' must be one of 'threshold', 'optimal'"),
    (["--selection", "optimal", "--max-keys-per-unit", "3", "--epsilon", "0.005"],  # ε' = 0.00075 < 2^-10
     "stable_histogram: parameter 'epsilon'"),
    (["--domain", "DOM", "--selection", "threshold"],
     "laplace_histogram: parameter 'selection' must be omitted with --domain"),
]


@pytest.mark.parametrize(("extra", "message"), BAD)
def test_refused_with_exit_2_one_line_and_nothing_charged(rows, ledger_path, tmp_path, extra, message):
    data = rows[0]
    dom = tmp_path / "dom.txt"
    dom.write_text("".join(f"{i}\n" for i in range(20)))
    extra = [str(dom) if a == "DOM" else a for a in extra]
    args = _args(data, ledger_path, *extra)
    if "--domain" in extra:
        args.remove("--delta"), args.remove("1e-6")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"privagg: error: {message}"), res.stderr
    assert res.stderr.count("\n") == 1 and res.stdout == ""
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []


def test_refused_without_privacy_unit_or_delta(rows, ledger_path):
    data = rows[0]
    base = ["histogram", str(data), "--column", "item", "--epsilon", "1", "--ledger", str(ledger_path)]
    for extra, message in (
        (["--delta", "1e-6", "--selection", "optimal"],
         "stable_histogram: parameter 'selection' must be 'threshold' without --privacy-unit"),
        (["--privacy-unit", "user", "--noise", "gaussian"],
         "stable_histogram: parameter 'delta' must be given with --delta when --domain is absent"),
    ):
        res = CliRunner().invoke(main, [*base, *extra])
        assert res.exit_code == 2 and res.stderr.startswith(f"privagg: error: {message}"), res.stderr
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []


def _seeded(monkeypatch):
    """The CLI's CSPRNG replaced by a seeded generator (the secret and the noise come from it)."""
    monkeypatch.setattr(cli_histogram, "secure_generator", lambda: np.random.default_rng(SEED))


@pytest.mark.parametrize(("l0", "linf", "selection"), [(3, 2, "optimal"), (2, 1, "optimal"), (3, 2, "gaussian"),
                                                    (2, 1, "gaussian")])
def test_optimal_duckdb_cli_equals_python_on_the_same_rows_and_generator(rows, ledger_path, monkeypatch, l0, linf,
                                                                        selection):
    """DuckDB's two bounded counts (ℓ0, ℓ∞) and (ℓ0, 1) with one secret, then the selection: the
    release equals stable_histogram(selection=...) with the same generator (the secret is its
    first draw in both). Control: another seed gives another release."""
    data, users, items = rows
    _seeded(monkeypatch)
    res = CliRunner().invoke(main, _args(data, ledger_path, "--selection", selection, "--max-keys-per-unit",
                                         str(l0), "--max-rows-per-key", str(linf), "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    py = stable_histogram(items, units=users, epsilon=1, delta=1e-6, max_keys_per_unit=l0, max_rows_per_key=linf,
                          selection=selection, rng=np.random.default_rng(SEED))
    assert len(py.keys) >= 5  # enough keys kept for the comparison to mean something
    assert out["keys"] == py.keys.tolist() and out["counts"] == py.counts.tolist()
    assert out["noisy_total"] == py.noisy_total and out["selection"] == selection
    other = stable_histogram(items, units=users, epsilon=1, delta=1e-6, max_keys_per_unit=l0,
                             max_rows_per_key=linf, selection=selection, rng=np.random.default_rng(SEED + 1))
    assert (other.counts.tolist(), other.noisy_total) != (py.counts.tolist(), py.noisy_total)


def test_gaussian_duckdb_cli_equals_python_on_the_same_rows_and_generator(rows, ledger_path, monkeypatch):
    data, users, items = rows
    _seeded(monkeypatch)
    res = CliRunner().invoke(main, _args(data, ledger_path, "--noise", "gaussian", "--max-keys-per-unit", "4",
                                         "--max-rows-per-key", "2", "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    py = stable_histogram(items, units=users, epsilon=1, delta=1e-6, max_keys_per_unit=4, max_rows_per_key=2,
                          noise="gaussian", rng=np.random.default_rng(SEED))
    assert len(py.keys) >= 5
    assert out["keys"] == py.keys.tolist() and out["counts"] == py.counts.tolist()
    assert out["noisy_total"] == py.noisy_total and out["threshold"] == py.threshold


def test_gaussian_json_states_the_law_and_the_delta_split(rows, ledger_path):
    data = rows[0]
    res = CliRunner().invoke(main, _args(data, ledger_path, "--noise", "gaussian", "--max-keys-per-unit", "16",
                                         "--json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    p = StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(16, 1), noise="gaussian")
    assert (out["mechanism"], out["noise"], out["selection"]) == ("stable_histogram", "discrete_gaussian",
                                                                  "threshold")
    assert out["threshold"] == p.threshold == 100  # §11.1's worked value at (1, 1e-6, 16, 1)
    assert (out["sigma2"], out["rho"]) == (float(p.sigma2), float(p.rho))
    assert (out["gaussian_delta"], out["threshold_delta"]) == (float(p.gaussian_delta), p.threshold_delta)
    # exact calibration (§11.1): each part ≤ δ (every mix of new and changed keys certified ≤ δ)
    assert out["gaussian_calibration"] == "exact"
    assert max(Fraction(out["gaussian_delta"]), Fraction(out["threshold_delta"])) <= Fraction(1, 10**6)
    assert out["selection_epsilon_per_key"] is None and out["error_bound"] is not None
    with Ledger(ledger_path) as ledger:
        (charge,) = ledger.charges()
        assert float(charge.loss.delta) == 1e-6 and 0 < float(charge.loss.epsilon) <= 1.0


def test_optimal_json_and_table_are_truthful(rows, ledger_path):
    data = rows[0]
    base = _args(data, ledger_path, "--selection", "optimal", "--max-keys-per-unit", "3", "--max-rows-per-key", "2")
    res = CliRunner().invoke(main, [*base, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    eps_c = Fraction(9, 10)  # ε_c = ε − ε_n with the default share 0.1
    assert (out["selection"], out["threshold"], out["noise"]) == ("optimal", None, "discrete_laplace")
    assert out["scale"] == float(2 * 3 * 2 / eps_c)  # the counts' own scale 2ℓ0ℓ∞/ε_c
    assert out["selection_epsilon_per_key"] == float(eps_c / 6)  # ε_c/(2ℓ0)
    assert out["selection_delta_per_key"] == float(Fraction(1e-6) / 3)  # δ/ℓ0 (the float δ, exactly)
    assert out["error_bound"] is None and out["sigma2"] is None and out["gaussian_delta"] is None
    res = CliRunner().invoke(main, base)
    assert res.exit_code == 0, res.output
    assert "noisy count ≥" not in res.stdout and "optimal partition selection" in res.stdout
    assert "too small" not in res.stdout  # the missing bound is not blamed on the noisy total
    res = CliRunner().invoke(main, _args(data, ledger_path, "--max-keys-per-unit", "3"))  # control: threshold
    assert res.exit_code == 0 and "noisy count ≥ " in res.stdout
    with Ledger(ledger_path) as ledger:
        first = ledger.charges()[0]
        assert first.parameters["selection"] == "optimal" and first.parameters["threshold"] is None


def test_gaussian_table_shows_the_delta_split(rows, ledger_path):
    res = CliRunner().invoke(main, _args(rows[0], ledger_path, "--noise", "gaussian", "--max-keys-per-unit", "16"))
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "discrete Gaussian, σ" in text and "exact profile: Gaussian δ" in text and "new keys δ" in text
    assert "every mix ≤ δ" in text and "noisy count ≥ 100" in text


def test_optimal_from_counts_matches_keys_by_value_when_the_two_runs_differ():
    """If the two runs listed different keys (a π tie broken differently), v decides: a key with
    no distinct-unit count is never released, and a key missing from c has count 0 (+ noise)."""
    bc = KeyCounts(keys=np.array(["a", "b", "c"], dtype=object), counts=np.array([500, 600, 700]), n=1800)
    uc = KeyCounts(keys=np.array(["b", "c", "d"], dtype=object), counts=np.array([300, 350, 400]), n=1050)
    r = stable_histogram_from_counts(bc, epsilon=1, delta=1e-6, max_keys_per_unit=2, max_rows_per_key=2,
                                     selection="optimal", unit_counts=uc, rng=np.random.default_rng(SEED))
    assert r.keys.tolist() == ["b", "c", "d"]  # v ≥ 300: kept with probability 1; 'a' has v = 0
    got = dict(zip(r.keys.tolist(), r.counts.tolist(), strict=True))
    assert abs(got["b"] - 600) < 150 and abs(got["c"] - 700) < 150 and abs(got["d"]) < 150  # DL(8/0.9) noise
    same = stable_histogram_from_counts(bc, epsilon=1, delta=1e-6, max_keys_per_unit=2, max_rows_per_key=2,
                                        selection="optimal", unit_counts=KeyCounts(bc.keys, bc.counts // 2, 900),
                                        rng=np.random.default_rng(SEED))
    assert same.keys.tolist() == ["a", "b", "c"]  # control: aligned runs keep bc's keys


def test_gaussian_selection_json_and_table_are_truthful(rows, ledger_path):
    base = _args(rows[0], ledger_path, "--selection", "gaussian", "--max-keys-per-unit", "3", "--max-rows-per-key",
                 "2")
    res = CliRunner().invoke(main, [*base, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["selection"], out["threshold"], out["noise"]) == ("gaussian", None, "discrete_laplace")
    assert out["scale"] == float(Fraction(12) / Fraction(9, 10))  # counts: 2ℓ0ℓ∞/ε_c
    assert out["selection_epsilon"] == 0.45 and out["selection_threshold"] == 79  # (ε_c/2, δ) at (3, 1)
    assert out["error_bound"] is None and out["selection_epsilon_per_key"] is None
    res = CliRunner().invoke(main, base)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "Gaussian thresholding of the distinct units" in text and "noisy count ≥" not in text
    with Ledger(ledger_path) as ledger:
        first = ledger.charges()[0]
        assert first.parameters["selection"] == "gaussian" and first.parameters["selection_threshold"] == 79
