"""The unbounded grouped mean on Spark reads its rows where they live (issue 14 items 2 and 5;
:class:`privagg.engines.spark_rows.SparkRows`): the spread floor's octave counts, the
per-side histogram and the exact clipped range sums are Spark aggregations of the local per-row
functions — the same integers as numpy on hostile values —, a Poisson locate subsample (every row
of the small-plan groups) is the only set of values collected, and the subsample has the local law.

One SparkSession for all Spark tests (tests/engines/conftest.py).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")

import privagg  # noqa: E402
from privagg.engines.grouped import open_table  # noqa: E402
from privagg.engines.spark_rows import SparkRows  # noqa: E402
from privagg.mechanisms import grouped_mean as gm  # noqa: E402
from privagg.mechanisms.grouped import Contribution, GroupedValues  # noqa: E402
from privagg.noise.rng import secure_generator  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

SEED = 20261206


def _sdf(spark, pdf: pd.DataFrame):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark and pandas >= 3
        return spark.createDataFrame(pdf)


def _hostile(seed: int = 3, n: int = 12_000, groups: int = 6) -> pd.DataFrame:
    """Finite values of every kind (ties on dyadic grids, ±0, 1e±300, subnormals, huge and
    tiny spreads per group) with NaN, ±inf and NULL rows that the engine must drop."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n)
    scale = np.ldexp(1.0, (g * 17 - 40))  # groups from 2^-40 to 2^45
    x = rng.normal(3.0, 1.0, n) * scale
    ties = rng.random(n) < 0.3
    x[ties] = (rng.integers(-64, 64, ties.sum()) + 0.5) * np.ldexp(1.0, g[ties] * 17 - 44)
    special = rng.random(n) < 0.05
    x[special] = rng.choice([0.0, -0.0, 1e300, -1e300, 1e-300, 5e-324, np.nan, np.inf, -np.inf],
                            special.sum())
    xs = pd.array(x, dtype="Float64")
    xs[rng.random(n) < 0.02] = pd.NA
    return pd.DataFrame({"g": g.astype(str), "x": xs})


def _pair(spark, pdf: pd.DataFrame) -> tuple[GroupedValues, SparkRows]:
    kw = dict(by=["g"], units=None, columns=["x"], where=None)
    with open_table(pdf.astype({"x": "float64"}), **kw) as tab:
        local = tab.prepare().values["x"]
    tab = open_table(_sdf(spark, pdf), **kw)  # left open: the rows stay persisted for the test
    remote = tab.prepare(kept_rows={"x": []}).values["x"]
    assert isinstance(local, GroupedValues) and isinstance(remote, SparkRows)
    return local, remote


def _public_arrays(rng: np.random.Generator, g: int) -> dict[str, np.ndarray]:
    exps = np.arange(g) * 17 - 40
    center = rng.normal(3.0, 1.0, g) * np.ldexp(1.0, exps)
    center[0] = 0.0
    upper = np.ldexp(1.0, exps - 1)
    r_lo = np.ldexp(rng.uniform(1, 8, g), exps)
    r_hi = np.ldexp(rng.uniform(1, 8, g), exps)
    shift = gm.recentre_shift(r_lo, r_hi, np.full(g, 0.5), 2.0)
    return dict(center=center, upper=upper, r_lo=r_lo + shift, r_hi=r_hi - shift, shift=shift)


@np.errstate(all="ignore")  # as in the mechanism (quiet_numerics): far rows overflow to ±inf
def _compare(local: GroupedValues, remote: SparkRows, a: dict[str, np.ndarray]) -> None:
    rows = gm._LocalRows(local)
    assert remote.present_counts().tolist() == rows.present_counts().tolist()
    assert remote.octave_counts(a["center"], a["upper"]).tolist() == \
        rows.octave_counts(a["center"], a["upper"]).tolist()
    top = 4 * 9
    assert remote.side_histogram(a["center"], a["upper"], top).tolist() == \
        rows.side_histogram(a["center"], a["upper"], top).tolist()
    _, e_s = gm.range_grid(a["r_lo"], a["r_hi"])
    want = rows.range_sums(a["center"], a["shift"], a["r_lo"], a["r_hi"], e_s)
    assert remote.range_sums(a["center"], a["shift"], a["r_lo"], a["r_hi"], e_s).tolist() == want.tolist()


def test_spark_rows_equal_local_rows_on_hostile_values(spark) -> None:
    """Octave counts, side histogram and exact range sums (the sum centred at ĉ + s, terms of
    ``(x − ĉ) − s``): Spark == numpy, before and after a restriction
    to released groups. Negative control: the local rows without one row (the engine dropping one
    finite value) give other octave counts and sums, so the comparison can fail."""
    print(f"seed {SEED}")
    pdf = _hostile()
    local, remote = _pair(spark, pdf)
    rng = np.random.default_rng(SEED)
    a = _public_arrays(rng, local.n_groups)
    _compare(local, remote, a)
    keep = np.array([True, False, True, True, False, True])
    from privagg.engines.grouped import Candidates

    sub = Candidates(keys=[np.arange(6)], rows=np.ones(6, np.int64), units=np.ones(6, np.int64),
                     values={"x": local}).restrict(keep).values["x"]
    _compare(sub, remote.restrict(keep), {k: v[keep] for k, v in a.items()})
    # control: one finite row fewer
    short = GroupedValues(group=local.group[1:], values=local.values[1:], n_groups=local.n_groups)
    with pytest.raises(AssertionError):
        _compare(short, remote, a)


class _Replay:
    """Spark's rows with the local subsample (same draws): every other read is Spark's."""

    def __init__(self, remote: SparkRows, local: GroupedValues, drop_shift: bool = False) -> None:
        self.remote, self.local, self.n_groups, self.drop_shift = remote, gm._LocalRows(local), remote.n_groups, drop_shift

    def __getattr__(self, name):
        return getattr(self.remote, name)

    def subsample(self, rate, draws):
        return self.local.subsample(rate, draws)

    def range_sums(self, center, shift, r_lo, r_hi, e_s):
        return self.remote.range_sums(center, 0.0 * shift if self.drop_shift else shift, r_lo, r_hi, e_s)


def test_friendly_means_on_spark_rows_replay_the_local_release(spark) -> None:
    """With the subsample replayed from the local code (the one step drawn in the tasks), the
    unbounded mean on Spark's rows is the local release bit for bit (value, interval, extras) —
    FriendlyCore groups, a small-plan group and a 0/1 group (spread floor). Control: Spark's range
    sums without the recentring shift change the release."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    sizes = [30_000, 12_000, 400, 9000]
    g = np.repeat(np.arange(4), sizes)
    x = np.concatenate([rng.lognormal(2.0, 1.0, sizes[0]), rng.normal(-50.0, 3.0, sizes[1]),
                        rng.exponential(7.0, sizes[2]), (rng.random(sizes[3]) < 0.2).astype(float)])
    pdf = pd.DataFrame({"g": g.astype(str), "x": x})
    local, remote = _pair(spark, pdf)
    kw = dict(epsilon=Fraction(1), delta=Fraction(1, 10**6), contribution=Contribution())
    want = gm.friendly_means(local, rng=np.random.default_rng(SEED), **kw)
    got = gm.friendly_means(_Replay(remote, local), rng=np.random.default_rng(SEED), **kw)
    assert want.ok.all() and want.extra["small_plan"][2]
    for name in ("value", "low", "high", "ok"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    for name, arr in want.extra.items():
        np.testing.assert_array_equal(got.extra[name], arr, err_msg=name)
    bad = gm.friendly_means(_Replay(remote, local, drop_shift=True), rng=np.random.default_rng(SEED), **kw)
    assert not np.array_equal(bad.value, want.value)


def test_median_centred_sums_on_spark_rows_replay_the_local_release(spark) -> None:
    """With the subsample replayed, the small groups' sums around given released medians
    (docs/proofs/aggregate_mean.md §8.3) are the local release bit for bit; the hook sees the same
    ranges on both engines. Control: other medians change the release."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    sizes = [30_000, 150, 120, 100]
    g = np.repeat(np.arange(4), sizes)
    x = np.concatenate([rng.lognormal(2.0, 1.0, sizes[0]), rng.normal(-50.0, 3.0, sizes[1]),
                        rng.exponential(7.0, sizes[2]), rng.normal(80.0, 5.0, sizes[3])])
    pdf = pd.DataFrame({"g": g.astype(str), "x": x})
    local, remote = _pair(spark, pdf)
    kw = dict(epsilon=Fraction(1), delta=Fraction(1, 10**6), contribution=Contribution())
    seen: list = []

    def medians(shift):
        def hook(n_hat, low, high):
            seen.append((n_hat.copy(), low.copy(), high.copy()))
            return np.array([np.nan, -50.0, 5.0, 80.0]) + shift
        return hook

    want = gm.friendly_means(local, rng=np.random.default_rng(SEED), medians=medians(0.0), **kw)
    got = gm.friendly_means(_Replay(remote, local), rng=np.random.default_rng(SEED), medians=medians(0.0), **kw)
    assert want.extra["median_centred"].tolist() == [False, True, True, True]
    for name in ("value", "low", "high", "ok"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    for name, arr in want.extra.items():
        np.testing.assert_array_equal(got.extra[name], arr, err_msg=name)
    for a, b in zip(seen[0], seen[1], strict=True):
        np.testing.assert_array_equal(a, b)
    bad = gm.friendly_means(_Replay(remote, local), rng=np.random.default_rng(SEED), medians=medians(3.0), **kw)
    assert not np.array_equal(bad.value, want.value)


def test_spark_subsample_has_the_local_law(spark) -> None:
    """Per group the kept rows are a sub-multiset of the group's values and their number a
    Binomial(n_g, rate_g), every row at rate 1 (the small groups): |z| <= 4.5 in every group over 3
    seeded calls (fixed draws: they pass or fail for good) and |z| <= 6 in the one secure call, whose
    draws no seed fixes (false failure 1.0·10⁻⁸ per run, exact binomial tails of its four random
    groups; at 4.5 it was 2.7·10⁻⁵ and CI met it once, z = 4.51). Control: the same counts tested
    against 0.8·rate fail; the same seed gives the same subsample, another seed another."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    sizes = np.array([20_000, 20_000, 8000, 5000, 3000, 1000])
    g = np.repeat(np.arange(sizes.size), sizes)
    pdf = pd.DataFrame({"g": g.astype(str), "x": rng.integers(0, 50, g.size).astype(float)})
    local, remote = _pair(spark, pdf)
    rate = np.array([0.05, 0.5, 0.3, 1.0, 0.0, 0.7])
    n = np.asarray(local.present_counts())

    def z(kept, r):
        sd = np.sqrt(np.maximum(n * r * (1 - r), 1e-12))
        return (kept - n * r) / sd

    runs = []
    for s in (1, 2, 3, None):
        draws = gm._Draws(np.random.default_rng(s) if s is not None else secure_generator())
        v, k = remote.subsample(rate, draws)
        assert np.all(np.diff(k) >= 0)
        kept = np.bincount(k, minlength=sizes.size)
        bound = 4.5 if s is not None else 6.0
        assert np.all(np.abs(z(kept, rate)) <= bound), (s, z(kept, rate))
        assert kept[3] == n[3] and kept[4] == 0
        assert np.abs(z(kept, 0.8 * rate))[[0, 1, 2, 5]].max() > bound  # control
        for grp in range(sizes.size):  # a sub-multiset of the group's values
            have = np.bincount(local.values[local.group == grp].astype(int), minlength=50)
            assert np.all(np.bincount(v[k == grp].astype(int), minlength=50) <= have)
        runs.append((v, k))
    again = remote.subsample(rate, gm._Draws(np.random.default_rng(1)))
    assert np.array_equal(again[0], runs[0][0]) and np.array_equal(again[1], runs[0][1])
    assert not np.array_equal(runs[1][0], runs[0][0])


def test_aggregate_unbounded_mean_on_spark_collects_a_subsample_not_the_column(spark, monkeypatch,
                                                                              fetched_columns) -> None:
    """``aggregate`` with ``mean(x)`` (no bounds) and a bounded sum of x on a Spark DataFrame: the
    values of x reach the driver only as the locate subsample (fewer than half of the rows here:
    groups of 60,000 rows, ε = 16, the largest plan's m_locate about 15,000), never the column; the bounded sum equals the
    DuckDB release's (same seed: the sums come first); the mean is within its interval plus the
    clipping bias of the true group mean on most groups. Control: the engine's fetch path
    (``prepare`` without ``sums`` and ``kept_rows``) fetches the column whole."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    n = 240_000
    g = rng.integers(0, 4, n)
    x = rng.normal(100.0, 15.0, n) + 10 * g
    pdf = pd.DataFrame({"g": g, "x": x})
    sdf = _sdf(spark, pdf)
    collected: list[int] = []
    real = SparkRows._collect

    def spy(self, frame):
        table = real(self, frame)
        if "v" in table.column_names:
            collected.append(table.num_rows)
        return table

    monkeypatch.setattr(SparkRows, "_collect", spy)
    fetched = fetched_columns
    metrics = [privagg.sum("x", (0.0, 200.0)), privagg.count(), privagg.mean("x")]
    r = privagg.aggregate(sdf, by="g", metrics=metrics, epsilon=16, delta=1e-6, domain=[0, 1, 2, 3], rng=SEED)
    d = privagg.aggregate(pdf, by="g", metrics=metrics, epsilon=16, delta=1e-6, domain=[0, 1, 2, 3], rng=SEED)
    assert r.groups["sum_x"].tolist() == d.groups["sum_x"].tolist()
    assert r.groups["mean_x_ok"].all()
    true = pdf.groupby("g").x.mean().to_numpy()
    err = np.abs(r.groups["mean_x"].to_numpy() - true)
    print("errors", err, "collected", collected)
    assert err.max() < 0.5  # the sampling error alone is about 0.06
    assert collected and sum(collected) < n / 2, collected
    assert not any("v0" in cols for cols in fetched), fetched
    fetched.clear()
    from privagg.engines.spark_grouped import SparkGroupedTable

    real_p = SparkGroupedTable.prepare
    monkeypatch.setattr(SparkGroupedTable, "prepare",
                        lambda self, **kw: real_p(self, **{**kw, "sums": None, "kept_rows": None}))
    privagg.aggregate(sdf, by="g", metrics=metrics, epsilon=1, delta=1e-6, domain=[0, 1, 2, 3], rng=SEED)
    assert any("v0" in cols for cols in fetched)


def test_quantiles_on_spark_rows_equal_the_local_release(spark, monkeypatch, fetched_columns) -> None:
    """Quantiles read only per-cell counts on Spark (``SparkRows.bin_counts``; the noise and the
    report-noisy-max stay on the driver), so a seeded release equals the DuckDB path's bit for
    bit: bounded (grid sizes from the released ``count()``: several sizes in one query, groups of
    10 … 20,000 rows) and unbounded (two stages), on hostile values, with a domain key absent from
    the data; no value of the column is collected. Control: Spark's counts with the largest cell
    of each chunk dropped (a lost bin) change the release."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    sizes = [20_000, 3000, 400, 60, 10]
    g = np.repeat(np.arange(len(sizes)), sizes)
    x = np.concatenate([rng.lognormal(3.0, 1.5, sizes[0]), rng.normal(-7.0, 1e-3, sizes[1]),
                        rng.integers(0, 5, sizes[2]).astype(float), np.full(sizes[3], -0.0),
                        np.array([1e300, -1e300, 5e-324, 0.0, 2.0**70, -2.0**70, 1e-20, 3.0, np.nan, np.inf])])
    pdf = pd.DataFrame({"g": g, "x": x})
    sdf = _sdf(spark, pdf)
    fetched = fetched_columns
    metrics = [privagg.count(), privagg.quantile("x", 0.5, (-10.0, 100.0)), privagg.quantile("x", 0.9),
               privagg.quantile("x", 0.25, (-1.0, 1.0))]
    dom = [0, 1, 2, 3, 4, 5]
    want = privagg.aggregate(pdf, by="g", metrics=metrics, epsilon=2, delta=1e-6, domain=dom, rng=SEED)
    got = privagg.aggregate(sdf, by="g", metrics=metrics, epsilon=2, delta=1e-6, domain=dom, rng=SEED)
    pd.testing.assert_frame_equal(got.groups, want.groups)
    steps = want.extra["q0.5_x"]["step"]
    assert len(set(steps.tolist())) > 1  # several grid sizes in the bounded quantile
    assert not any("v0" in cols for cols in fetched), fetched
    real_b = SparkRows.bin_counts

    def lossy(self, groups, bins, width, chunks):
        for counts in real_b(self, groups, bins, width, chunks):
            counts = counts.copy()
            counts[np.unravel_index(np.argmax(counts), counts.shape)] = 0
            yield counts

    monkeypatch.setattr(SparkRows, "bin_counts", lossy)
    bad = privagg.aggregate(sdf, by="g", metrics=metrics, epsilon=2, delta=1e-6, domain=dom, rng=SEED)
    assert not bad.groups.equals(want.groups)


def test_kept_rows_at_user_level_match_duckdb_when_nothing_is_dropped(spark) -> None:
    """With units (bounding in Spark) and bounds that no unit exceeds, both engines keep the same
    rows, so a quantile query released from Spark's kept rows equals the DuckDB release (seed
    fixed), and the unbounded mean releases in every group. Control: with ``max_rows_per_group``
    below some units' rows the two engines keep other subsets (Spark's hash is not DuckDB's) and
    the quantile releases differ."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    n = 9000
    pdf = pd.DataFrame({"g": rng.integers(0, 3, n), "u": rng.permutation(n) // 3,  # 3 rows per unit
                        "x": rng.gamma(2.0, 10.0, n)})
    pdf["g"] = (pdf["u"] % 3).astype(np.int64)  # each unit in one group
    sdf = _sdf(spark, pdf)
    metrics = [privagg.count(), privagg.quantile("x", 0.5, (0.0, 200.0)), privagg.quantile("x", 0.75)]
    kw = dict(by="g", metrics=metrics, epsilon=4, delta=1e-6, domain=[0, 1, 2], units="u",
              max_groups_per_unit=1, max_rows_per_group=3, rng=SEED)
    want = privagg.aggregate(pdf, **kw)
    got = privagg.aggregate(sdf, **kw)
    pd.testing.assert_frame_equal(got.groups, want.groups)
    mean = privagg.aggregate(sdf, **{**kw, "metrics": [privagg.count(), privagg.mean("x")], "epsilon": 8})
    assert mean.groups["mean_x_ok"].all()
    true = pdf.groupby("g").x.mean().to_numpy()
    assert np.all(np.abs(mean.groups["mean_x"].to_numpy() - true) < 2.0), (mean.groups["mean_x"], true)
    low = {**kw, "max_rows_per_group": 1}
    assert not privagg.aggregate(sdf, **low).groups.equals(privagg.aggregate(pdf, **low).groups)


def test_retried_subsample_tasks_do_not_change_the_subsample(spark, tmp_path) -> None:
    """Every subsample task fails on its first attempt and Spark retries it (``local[2,2]``): the
    seeded subsample is the one a run without failures draws (each partition's stream is a function
    of the seed and the partition, and the result is collected once); the markers show that the
    failures happened. Control: another seed gives another subsample."""
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    sizes = np.array([8000, 5000, 3000])
    g = np.repeat(np.arange(sizes.size), sizes)
    pdf = pd.DataFrame({"g": g.astype(str), "x": rng.normal(0.0, 1.0, g.size)})
    _, remote = _pair(spark, pdf)
    rate = np.array([0.3, 0.6, 1.0])
    clean = remote.subsample(rate, gm._Draws(np.random.default_rng(7)))
    remote._fault = str(tmp_path)
    retried = remote.subsample(rate, gm._Draws(np.random.default_rng(7)))
    remote._fault = None
    assert list(tmp_path.glob("failed-*"))
    assert np.array_equal(retried[0], clean[0]) and np.array_equal(retried[1], clean[1])
    other = remote.subsample(rate, gm._Draws(np.random.default_rng(8)))
    assert not np.array_equal(other[0], clean[0])
