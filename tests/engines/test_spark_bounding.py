"""User-level bounding in Spark (:class:`privagg.engines.spark.SparkEngine`): exact equality with
the numpy and DuckDB engines when bounding drops nothing, the law of the kept subsets (uniform,
keyed by the unit), stability under adding a unit, the secret kept out of plans, and ``units=`` /
``--privacy-unit`` through the histograms and the CLI.

Spark's priority (xxhash64) is not DuckDB's hash(): kept subsets are not bit-identical across
engines, so the comparisons are exact only where nothing is dropped, and statistical elsewhere.
Statistical tests: fixed secrets (printed), false-failure rate ≤ 1e-3 each, with a negative
control that the same test rejects. The SparkSession is tests/engines/conftest.py's.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from scipy import stats  # noqa: E402

from privagg.accounting import Ledger  # noqa: E402
from privagg.engines import duckdb as dd  # noqa: E402
from privagg.engines import spark as se  # noqa: E402
from privagg.engines.base import Bounding  # noqa: E402
from privagg.engines.duckdb_bounding import DuckDBEngine  # noqa: E402
from privagg.engines.numpy_engine import NumpyEngine  # noqa: E402
from privagg.errors import ParameterError  # noqa: E402
from privagg.mechanisms import histogram as H  # noqa: E402
from privagg.noise.distributions import DiscreteLaplace  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

ALPHA = 1e-3
KEYS = np.array(["a", "b", "c", "d", "e", "f", "g", "é"], dtype=object)


def _small_units(seed: int = 4) -> pa.Table:
    """300 units (one NULL unit among them), each with ≤ 2 distinct keys (of 8), ≤ 2 rows per key,
    plus 0–2 rows of a NULL key: ℓ0 = 3 (the ``other`` key included) and ℓ∞ = 10 drop nothing."""
    rng = np.random.default_rng(seed)
    units, keys = [], []
    for u in range(300):
        unit = None if u == 0 else int(u)
        for k in rng.choice(8, size=rng.integers(1, 3), replace=False):
            reps = int(rng.integers(1, 3))
            units += [unit] * reps
            keys += [KEYS[k]] * reps
        nulls = int(rng.integers(0, 3))
        units += [unit] * nulls
        keys += [None] * nulls
    order = rng.permutation(len(keys))
    return pa.table({"u": pa.array(np.asarray(units, dtype=object)[order].tolist(), pa.int64()),
                     "k": pa.array(np.asarray(keys, dtype=object)[order].tolist(), pa.string()),
                     "row": pa.array(np.arange(len(keys)), pa.int64())})


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    table = _small_units()
    path = tmp_path_factory.mktemp("bounding") / "units.parquet"
    pq.write_table(table, path)
    return path, table


def _triple(bc) -> tuple[list, list, int, int]:
    return bc.key_counts.keys.tolist(), bc.key_counts.counts.tolist(), bc.key_counts.n, bc.other


@pytest.mark.parametrize("l0, linf, unit, domain, keep_other", [
    (3, 10, "u", None, False),
    (3, 10, "u", ["a", "b", "c", "é", "never"], True),
    (3, 10, "u", ["a", "b", "c", "é", "never"], False),
    (1, 1, "row", None, False),  # one row per unit: the ℓ0 = ℓ∞ = 1 plan (min_by), nothing dropped
])
def test_equal_to_numpy_and_duckdb_when_nothing_is_dropped(spark, small, l0, linf, unit, domain,
                                                           keep_other) -> None:
    path, table = small
    df = spark.read.parquet(str(path))
    bounding = Bounding(l0, linf, secret=987654321)
    got = _triple(se.SparkEngine(df, "k", unit).bounded_counts(bounding, domain=domain, keep_other=keep_other))
    local = NumpyEngine(table.column("k"), table.column(unit)).bounded_counts(
        bounding, domain=domain, keep_other=keep_other)
    duck = DuckDBEngine(dd.describe_column(path, "k"), dd.describe_column(path, unit)).bounded_counts(
        bounding, domain=domain, keep_other=keep_other)
    assert got == _triple(local) == _triple(duck)
    assert got[2] > 0 and (got[3] > 0) == keep_other


def test_dropping_changes_subsets_not_totals(spark, small) -> None:
    """ℓ0 = 1, ℓ∞ = 1 on units with up to 2 keys: engines keep different keys (other hashes) but
    the same total Σ_u min(#keys, 1) = number of units; control: it is below the ℓ0 = 3 total."""
    path, table = small
    df = spark.read.parquet(str(path))
    bounding = Bounding(1, 1, secret=5)
    got = se.SparkEngine(df, "k", "u").bounded_counts(bounding).key_counts
    local = NumpyEngine(table.column("k"), table.column("u")).bounded_counts(bounding).key_counts
    assert got.n == local.n == 300
    full = se.SparkEngine(df, "k", "u").bounded_counts(Bounding(3, 1, secret=5)).key_counts
    assert full.n > got.n


def test_keys_per_unit_equal_to_numpy(spark, small) -> None:
    path, table = small
    df = spark.read.parquet(str(path))
    for cap in (1, 2, 5):
        assert se.SparkEngine(df, "k", "u").keys_per_unit(cap).tolist() == \
            NumpyEngine(table.column("k"), table.column("u")).keys_per_unit(cap).tolist()


def _subset_pvalue(spark, l0: int, secret: int) -> float:
    """2000 units with the same 5 keys (one row each): chi-square of the kept ℓ0-subsets vs uniform."""
    df = spark.range(10000, numPartitions=3).selectExpr("id DIV 5 AS u", "id % 5 AS k")
    pairs = se.SparkEngine(df, "k", "u").kept_pairs(Bounding(l0, 1, secret)).toPandas()
    kept = pairs.sort_values(["u", "k"]).groupby("u")["k"].apply(tuple)
    assert len(kept) == 2000 and all(len(s) == l0 for s in kept)
    subsets = list(combinations(range(5), l0))
    observed = np.array([(kept == s).sum() for s in subsets])
    assert observed.sum() == 2000
    return stats.chisquare(observed).pvalue


def test_kept_subsets_uniform_and_keyed_by_unit(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each unit keeps a uniformly random ℓ0-subset (ℓ0 = 1: the min_by plan; ℓ0 = 2: top-ℓ0).
    Negative control: a priority not keyed by the unit (xxhash64(s, k)) keeps one subset for all."""
    from pyspark.sql import functions as F

    secret = 20240601
    print(f"secret={secret}")
    for l0 in (1, 2):
        assert _subset_pvalue(spark, l0, secret) > ALPHA
    monkeypatch.setattr(se, "_priority", lambda s, u, k: F.xxhash64(s, k))
    for l0 in (1, 2):
        assert _subset_pvalue(spark, l0, secret) < ALPHA


def test_adding_a_unit_changes_only_its_rows(spark) -> None:
    """Same secret: the kept pairs of the other units are unchanged when a unit is added (and when
    the data is repartitioned); the counts move by ≤ ℓ0·ℓ∞, on the new unit's keys only.
    Control: another secret does change other units' kept pairs."""
    rng = np.random.default_rng(8)
    m = 3000
    base = spark.createDataFrame(
        [(int(u), int(k)) for u, k in zip(rng.integers(0, 300, m), rng.integers(0, 12, m), strict=True)],
        "u long, k long")
    extra = spark.createDataFrame([(10**6, k) for k in (1, 2, 3, 4, 5, 5, 5)], "u long, k long")
    bigger = base.unionByName(extra).repartition(3)
    bounding = Bounding(2, 2, secret=77)

    def kept(frame, b=bounding):
        return set(se.SparkEngine(frame, "k", "u").kept_pairs(b).toPandas().itertuples(index=False, name=None))

    before, after = kept(base), kept(bigger)
    assert {p for p in after if p[0] != 10**6} == before
    new = {p for p in after if p[0] == 10**6}
    assert len(new) == 2 and all(c <= 2 for _, _, c in new)
    a = se.SparkEngine(base, "k", "u").bounded_counts(bounding).key_counts
    b = se.SparkEngine(bigger, "k", "u").bounded_counts(bounding).key_counts
    diff = dict(zip(b.keys.tolist(), b.counts.tolist(), strict=True))
    for key, count in zip(a.keys.tolist(), a.counts.tolist(), strict=True):
        diff[key] -= count
    assert {k for k, d in diff.items() if d} <= {k for _, k, _ in new} and 0 < sum(diff.values()) <= 4
    assert kept(base, Bounding(2, 2, secret=78)) != before  # control


def test_secret_in_no_plan_and_nothing_printed(spark, monkeypatch: pytest.MonkeyPatch,
                                               capfd: pytest.CaptureFixture) -> None:
    """The secret is not a literal of any plan string (explain modes); nothing is printed. Control:
    the same secret as a literal does show in the plan."""
    from pyspark.sql import functions as F

    secret = 0xD1CE_5EC2_E7AB_C0DE  # ≥ 2^63: Spark holds it as a negative long
    forms = [str(secret), str(secret - (1 << 64)), hex(secret)[2:]]
    df = spark.range(100).selectExpr("id % 7 AS u", "id % 3 AS k")
    engine = se.SparkEngine(df, "k", "u")
    explain = spark._jvm.org.apache.spark.sql.execution.ExplainMode

    def plans(frame) -> str:
        qe = frame._jdf.queryExecution()
        return "".join(qe.explainString(explain.fromString(m)) for m in ("extended", "formatted", "cost", "codegen"))

    for l0 in (1, 3):
        text = plans(engine.bounded_frame(Bounding(l0, 1, secret)))
        assert "xxhash64" in text and not any(f in text.lower() for f in forms)
    assert str(secret - (1 << 64)) in plans(df.select(F.xxhash64(F.lit(secret - (1 << 64)), "u")))  # control
    monkeypatch.setattr(se, "draw_secret", lambda gen: secret)
    capfd.readouterr()
    H.stable_histogram(df, column="k", units="u", epsilon=1.0, delta=1e-6)
    out, err = capfd.readouterr()
    assert not any(f in (out + err).lower() for f in forms)


def test_histograms_with_units(spark, small) -> None:
    """units= on a Spark DataFrame: Laplace = the local release for the same seed (nothing dropped);
    stable: add/remove, the local threshold, counts within the noise tail of the bounded counts."""
    path, table = small
    df = spark.read.parquet(str(path))
    domain = ["a", "b", "é", "never"]
    kw = dict(epsilon=1.0, domain=domain, other=True, max_keys_per_unit=3, max_rows_per_key=10, rng=9)
    mine = H.laplace_histogram(df, column="k", units="u", **kw)
    local = H.laplace_histogram(table.column("k"), units=table.column("u"), **kw)
    assert mine.counts.tolist() == local.counts.tolist() and mine.other_count == local.other_count
    assert mine.unit == "u" and mine.neighbors == "add_remove" and mine.scale == local.scale

    big = spark.range(30000, numPartitions=3).selectExpr("id DIV 30 AS u", "id % 5 AS k")  # 1000 units × 5 keys
    r = H.stable_histogram(big, column="k", units="u", epsilon=1.0, delta=1e-6, max_keys_per_unit=2, rng=3)
    ref = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(2, 1))
    assert r.unit == "u" and r.threshold == ref.threshold and r.scale == float(ref.scale) and r.n is None
    bound = DiscreteLaplace(r.params.scale).abs_quantile(1e-9)
    assert r.keys.tolist() == [0, 1, 2, 3, 4] and abs(int(r.counts.sum()) - 2000) <= 5 * bound
    assert abs(r.noisy_total - 2000) <= DiscreteLaplace(r.params.total_scale).abs_quantile(1e-9)


def test_units_errors_charge_nothing(spark, tmp_path: Path) -> None:
    ledger_path = tmp_path / "b.db"
    Ledger.create(ledger_path, epsilon=10, delta=1e-4).close()
    df = spark.range(50).selectExpr("id % 5 AS u", "id % 3 AS k", "CAST(CAST(id AS STRING) AS BINARY) AS blob")
    cases = [
        (dict(units="nope"), "units"),
        (dict(units="blob"), "units"),
        (dict(units=[1, 2]), "units"),
        (dict(units="u", neighbors="replace"), "neighbors"),
        (dict(units="u", selection="optimal"), "selection"),
        (dict(max_keys_per_unit=2), "max_keys_per_unit"),
        (dict(units="u", max_rows_per_key=0), "max_rows_per_key"),
    ]
    with Ledger(ledger_path) as ledger:
        for extra, name in cases:
            with pytest.raises(ParameterError, match=f"'{name}'"):
                H.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6, ledger=ledger, **extra)
        with pytest.raises(ParameterError, match="'units'"):
            H.laplace_histogram(df, column="k", epsilon=1.0, domain=[0, 1], units="nope", ledger=ledger)
        assert ledger.charges() == []
        H.stable_histogram(df, column="k", epsilon=1.0, delta=1e-6, units="u", ledger=ledger)  # control
        assert len(ledger.charges()) == 1


def _cli(*args: object):
    from click.testing import CliRunner

    from privagg.cli.main import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_privacy_unit_same_as_duckdb(spark, tmp_path: Path) -> None:
    """--privacy-unit with --engine spark: the DuckDB engine's keys, threshold, charge and ledger
    context (each unit has one key: nothing dropped); an unknown unit column charges nothing."""
    units = np.arange(900) // 3  # 300 units, 3 rows each, one key per unit
    keys = np.where(units < 200, "a", "b")
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"code": pa.array(keys.tolist()), "person": pa.array(units)}), path)
    ledger = tmp_path / "b.db"
    Ledger.create(ledger, epsilon=10, delta=1e-4).close()
    common = ("histogram", path, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json",
              "--ledger", ledger, "--privacy-unit", "person")
    duck, sp = _cli(*common), _cli(*common, "--engine", "spark")
    assert duck.exit_code == 0 and sp.exit_code == 0, sp.stderr
    a, b = json.loads(duck.stdout), json.loads(sp.stdout)
    assert set(a) == set(b) and a["keys"] == b["keys"] == ["a", "b"] and b["secure"] is True
    assert b["threshold"] == a["threshold"] and b["charged"] == a["charged"] and b["privacy_unit"] == a["privacy_unit"] == "person"
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2
    bad = _cli(*common[:-1], "nope", "--engine", "spark")
    assert bad.exit_code == 2 and "'privacy-unit'" in bad.stderr
    with Ledger(ledger) as opened:
        assert len(opened.charges()) == 2


# --------------------------------------------------------------------------------------------
# clipped sums (the building block of private_mean on Spark)
# --------------------------------------------------------------------------------------------


def test_clamp_sum_grid_exact_beyond_long(spark) -> None:
    """Grid integers of 2^62 each, 8 rows: the sum 2^65 is exact (a long would overflow: control,
    numpy's int64 sum wraps; 2^62 is also a double whose shortest text loses digits, so a direct
    DOUBLE → DECIMAL cast would be wrong). Random values: rint on the grid and the float sum as
    numpy's."""
    big = spark.createDataFrame([(2.0 ** 62,)] * 8 + [(float("nan"),), (None,)], "x double")
    engine = se.SparkEngine(big, "x")
    assert engine.clamp_sum_grid(0.0, 2.0 ** 62, 0) == 8 * 2 ** 62
    assert int(np.full(8, 2 ** 62, dtype=np.int64).sum()) != 8 * 2 ** 62  # control: int64 wraps
    rng = np.random.default_rng(12)
    x = rng.normal(0, 3, 5000)
    df = spark.createDataFrame([(float(v),) for v in x], "x double")
    engine = se.SparkEngine(df, "x")
    lo, hi, e = -4.0, 5.5, -10
    expected = int(np.rint(np.clip(x, lo, hi) * 2.0 ** -e).astype(np.int64).sum())
    assert engine.clamp_sum_grid(lo, hi, e) == expected
    assert engine.clamp_sum(lo, hi) == pytest.approx(NumpyEngine(x).clamp_sum(lo, hi), rel=1e-12)
    with pytest.raises(ParameterError, match="'exponent'"):
        engine.clamp_sum_grid(lo, hi, -70)  # 5.5·2^70 > 2^63
    with pytest.raises(ParameterError, match="numeric"):
        se.SparkEngine(spark.range(3).selectExpr("CAST(id AS STRING) AS s"), "s").clamp_sum(0.0, 1.0)
