"""User level for private_mean / private_kmeans: one vector per privacy unit (engines/unit_rows).

- numpy and DuckDB (CSV, Parquet) give the same unit vectors for the same secret, and the same
  releases for the same seed (mean and k-means);
- stability: adding a unit (with many rows) adds exactly its vector and changes no other
  (negative control: priorities from factorization codes instead of values);
- uniformity (chi-square, fixed seed, false-failure rate 1e-4 each; negative control: priority
  without the secret and the unit);
- an audit on neighbouring units (D, D + one unit with 300 far rows) at the claimed (ε, δ)
  (confidence 0.999: false-failure rate <= 1e-3), and the negative control with bounding off;
- API and CLI (--privacy-unit, --max-rows-per-unit) and their errors.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from scipy import stats

import privagg
import privagg.engines.unit_rows as UR
from privagg.engines import numpy_engine
from privagg.engines.base import draw_secret
from privagg.errors import ParameterError
from privagg.testing.audit import audit_mechanism

SEED = 2024
CHI2_ALPHA = 1e-4


def _table(seed: int, n: int = 3000, units: int = 400) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    u = g.integers(0, units, n)
    x = np.round(g.normal(size=(n, 2)) + u[:, None] % 3, 3)
    x[7, 1] = np.nan  # a dropped row
    return x, u


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    x, u = _table(SEED, n=12000, units=3000)
    d = tmp_path_factory.mktemp("unitrows")
    pq.write_table(pa.table({"u": u, "a": x[:, 0], "b": x[:, 1]}), d / "t.parquet")
    with open(d / "t.csv", "w") as fh:
        fh.write("u,a,b\n")
        fh.writelines(f"{c},{a!r},{b!r}\n" for c, a, b in zip(u.tolist(), x[:, 0].tolist(), x[:, 1].tolist(), strict=True))
    return x, u, d


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("k", [1, 3])
def test_numpy_and_duckdb_identical_unit_vectors(files, fmt, k):
    x, u, d = files
    if fmt == "csv":
        u = u.astype(str)  # the CSV unit column is text
    a = UR.unit_vectors(x, u, k, 123456789)
    b = UR.file_unit_vectors(d / f"t.{fmt}", ["a", "b"], "u", k, 123456789)
    assert a.shape == (np.unique(u).size, 2) and np.array_equal(a, b)
    assert not np.array_equal(a, UR.unit_vectors(x, u, k, 987654321))  # the secret matters


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_numpy_and_duckdb_identical_releases(files, fmt):
    x, u, d = files
    if fmt == "csv":
        u = u.astype(str)
    r1 = privagg.private_mean(x, units=u, max_rows_per_unit=2, epsilon=2.0, delta=1e-6, radius=3.0, rng=42)
    gen = np.random.default_rng(42)  # what rng=42 resolves to: the secret first, then the noise
    v = UR.file_unit_vectors(d / f"t.{fmt}", ["a", "b"], "u", 2, draw_secret(gen))
    r2 = privagg.private_mean(v, epsilon=2.0, delta=1e-6, radius=3.0, rng=gen)
    assert r1.ok and np.array_equal(r1.mean, r2.mean) and r1.n_hat == r2.n_hat


def test_kmeans_units_numpy_and_duckdb_identical(tmp_path):
    g = np.random.default_rng(SEED)
    truth = np.array([[0.0, 0.0], [60.0, 0.0]])
    n_units = 4000
    u = np.repeat(np.arange(n_units), 3)  # 3 rows per unit, all in the unit's cluster
    x = truth[u % 2] + g.normal(size=(u.size, 2))
    pq.write_table(pa.table({"u": u, "a": x[:, 0], "b": x[:, 1]}), tmp_path / "k.parquet")
    r1 = privagg.private_kmeans(x, 2, units=u, epsilon=2.0, delta=1e-6, rng=7)
    gen = np.random.default_rng(7)
    v = UR.file_unit_vectors(tmp_path / "k.parquet", ["a", "b"], "u", 1, draw_secret(gen))
    assert v.shape == (n_units, 2)
    r2 = privagg.private_kmeans(v, 2, epsilon=2.0, delta=1e-6, rng=gen)
    assert r1.ok and np.array_equal(r1.centers, r2.centers)
    assert np.abs(r1.centers - truth).max() < 1.5


# ------------------------------------------------------------------ stability, uniformity


def _rows_set(v: np.ndarray) -> np.ndarray:
    return v[np.lexsort(v.T[::-1])]


@pytest.mark.parametrize("k", [1, 4])
def test_adding_a_unit_adds_only_its_vector(k):
    x, u = _table(11)
    heavy = np.random.default_rng(3).normal(50.0, 5.0, size=(500, 2))
    heavy_u = np.full(500, -1)  # sorts first: shifts every other unit's factorization code
    before = UR.unit_vectors(x, u, k, 5)
    after = UR.unit_vectors(np.r_[heavy, x], np.r_[heavy_u, u], k, 5)
    alone = UR.unit_vectors(heavy, heavy_u, k, 5)
    assert alone.shape == (1, 2) and after.shape[0] == before.shape[0] + 1
    assert np.array_equal(_rows_set(after), _rows_set(np.r_[before, alone]))


def test_stability_negative_control_code_based_priority(monkeypatch):
    monkeypatch.setattr(numpy_engine, "value_hashes",
                        lambda v: np.arange(len(v) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    x, u = _table(11)
    heavy, heavy_u = np.full((5, 2), 50.0), np.full(5, -1)
    before = UR.unit_vectors(x, u, 1, 5)
    after = UR.unit_vectors(np.r_[heavy, x], np.r_[heavy_u, u], 1, 5)
    assert not np.array_equal(_rows_set(after), _rows_set(np.r_[before, heavy[:1]]))


def _choices(k: int, units: int = 12000) -> np.ndarray:
    """Each unit holds the rows 0, 1, 2, 4 (d = 1); its vector identifies the chosen subset."""
    x = np.tile([0.0, 1.0, 2.0, 4.0], units)[:, None]
    u = np.repeat(np.arange(units), 4)
    return UR.unit_vectors(x, u, k, 4242)[:, 0]


@pytest.mark.parametrize(("k", "outcomes"), [(1, 4), (2, 6)])  # 2-subsets of {0,1,2,4}: 6 distinct means
def test_sampling_is_uniform(k, outcomes):
    print("secret 4242")
    _, counts = np.unique(_choices(k), return_counts=True)
    assert counts.size == outcomes
    assert stats.chisquare(counts).pvalue > CHI2_ALPHA


def test_uniformity_negative_control_unkeyed_priority(monkeypatch):
    monkeypatch.setattr(UR, "_row_priorities", lambda hu, x, s: np.round(x[:, 0] * 7919).astype(np.uint64) % 5)
    _, counts = np.unique(_choices(1), return_counts=True)
    assert counts.size < 4 or stats.chisquare(counts).pvalue <= CHI2_ALPHA


# ------------------------------------------------------------------ audit on neighbouring units

EPS, DELTA, CONF, BOTTOM = 1.0, 1e-3, 0.999, -999.0


def _unit_pair(n: int = 600):
    x0 = (np.arange(n) % 2 * 0.5)[:, None]
    u0 = np.arange(n)
    x1 = np.r_[x0, np.full((300, 1), 100.0)]  # one unit with 300 far rows
    u1 = np.r_[u0, np.full(300, 10**6)]
    return (x0, u0), (x1, u1)


def _run(data, gen):
    x, u = data
    rel = privagg.private_mean(x, units=u, epsilon=EPS, delta=DELTA, radius=1.0, rng=gen)
    return float(np.round(rel.mean[0], 3)) if rel.ok else BOTTOM


def test_audit_neighbouring_units_within_claim():
    print(f"seed={SEED}")
    d0, d1 = _unit_pair()
    res = audit_mechanism(_run, d0, d1, trials=200, seed=SEED, delta=DELTA, confidence=CONF)
    print(res)
    assert not res.violates(EPS), (res, f"seed={SEED}")


def test_audit_negative_control_bounding_off(monkeypatch):
    # every row its own vector: the unit's 300 rows move the mean far beyond the claim
    monkeypatch.setattr(UR, "_average", lambda group, prio, values, k: values)
    print(f"seed={SEED}")
    d0, d1 = _unit_pair()
    res = audit_mechanism(_run, d0, d1, trials=100, seed=SEED, delta=DELTA, confidence=CONF)
    print(res)
    assert res.violates(EPS), (res, f"seed={SEED}")


# ------------------------------------------------------------------ API, CLI


def test_units_api_and_errors():
    x, u = _table(5)
    rec = privagg.private_mean(x, epsilon=1.0, delta=1e-6, radius=3.0, rng=3)
    same = privagg.private_mean(x, units=None, max_rows_per_unit=1, epsilon=1.0, delta=1e-6, radius=3.0, rng=3)
    assert np.array_equal(rec.mean, same.mean) and rec.n_hat == same.n_hat  # record level unchanged
    user = privagg.private_mean(x, units=u, epsilon=1.0, delta=1e-6, radius=3.0, rng=3)
    assert abs(user.n_hat - 400) < 250 and abs(rec.n_hat - 3000) < 250  # n̂ counts units
    with pytest.raises(ParameterError, match="units"):
        privagg.private_mean(x, units=u[:-1], epsilon=1.0, delta=1e-6)
    with pytest.raises(ParameterError, match="max_rows_per_unit"):
        privagg.private_mean(x, max_rows_per_unit=2, epsilon=1.0, delta=1e-6)
    for bad in (0, 2.5, True, -1):
        with pytest.raises(ParameterError, match="max_rows_per_unit"):
            privagg.private_kmeans(x, 2, units=u, max_rows_per_unit=bad, epsilon=1.0, delta=1e-6)


@pytest.mark.parametrize("command", ["mean", "kmeans"])
def test_cli_privacy_unit(files, command):
    from privagg.cli.main import cli as main

    _, _, d = files
    args = [command, str(d / "t.parquet"), "--columns", "a,b", "--epsilon", "2", "--delta", "1e-6"]
    if command == "kmeans":
        args += ["--k", "1"]
    table = CliRunner().invoke(main, args + ["--privacy-unit", "u"])
    assert table.exit_code == 0 and "privacy unit u (one vector per unit: one sampled row)" in table.output
    args.append("--json")
    res = CliRunner().invoke(main, args + ["--privacy-unit", "u", "--max-rows-per-unit", "2"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["privacy_unit"] == "u" and out["max_rows_per_unit"] == 2
    rec = json.loads(CliRunner().invoke(main, args).output)
    assert rec["privacy_unit"] is None and rec["max_rows_per_unit"] == 1
    bad = CliRunner().invoke(main, args + ["--max-rows-per-unit", "2"])
    assert bad.exit_code != 0 and "max_rows_per_unit" in bad.output
    missing = CliRunner().invoke(main, args + ["--privacy-unit", "nope"])
    assert missing.exit_code != 0
