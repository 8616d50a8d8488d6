"""The small groups' sums around the query's released medians (docs/proofs/aggregate_mean.md §8.3).

Before (cc5e06d) every small group was clipped to one pooled range around one pooled center, so
groups at different locations shrank toward it: the accuracy test below fails there (its negative
control is that code path: no medians).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import privagg
import privagg.mechanisms.aggregate as agg
import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import GroupedValues

DLT = Fraction(1, 10**6)
EPS = Fraction(1, 3)


def test_shares_known_answers():
    """ε_sum/6 for the range, 5·ε_sum/6 for the sums: ε_sum in total."""
    assert gm.median_shares(Fraction(3, 5)) == (Fraction(1, 10), Fraction(1, 2))
    assert sum(gm.median_shares(Fraction(7, 13))) == Fraction(7, 13)


def test_median_groups_rule(monkeypatch):
    """The groups with a released median among ``ok``; none unless the medians spread over more
    than MEDIAN_SWITCH (0) times the pooled radius: with 0, unless two medians differ."""
    ok = np.array([True, True, False, True])
    assert gm.MEDIAN_SWITCH == 0
    assert gm.median_groups(ok, np.array([1.0, 2.0, 3.0, np.nan]), 5.0).tolist() == [True, True, False, False]
    assert not gm.median_groups(ok, np.array([1.0, 1.0, 3.0, np.nan]), 5.0).any()  # one location
    assert not gm.median_groups(ok, np.array([np.nan, 1.0, 3.0, np.nan]), 5.0).any()
    assert not gm.median_groups(ok, np.full(4, np.nan), 5.0).any()
    monkeypatch.setattr(gm, "MEDIAN_SWITCH", 0.25)
    assert not gm.median_groups(ok, np.array([1.0, 2.0, 3.0, np.nan]), 4.0).any()  # 1 <= 1
    assert gm.median_groups(ok, np.array([1.0, 2.0, 3.0, np.nan]), 3.9).tolist() == [True, True, False, False]


def test_which_queries_centre():
    """An unbounded mean whose column has an unbounded median in the query; not a bounded mean,
    a bounded median, another quantile or another column."""
    m, q = privagg.mean("x"), privagg.quantile("x", 0.5)
    assert agg._centred_medians((privagg.count(), m, q)) == {"mean_x": q}
    assert agg._centred_medians((q, privagg.count(), m)) == {"mean_x": q}
    assert agg._centred_medians((m, privagg.quantile("x", 0.25))) == {}
    assert agg._centred_medians((m, privagg.quantile("x", 0.5, bounds=(0, 1)))) == {}
    assert agg._centred_medians((privagg.mean("x", bounds=(0, 1)), q)) == {}
    assert agg._centred_medians((privagg.mean("y"), q)) == {}


class _Spy(gm._Draws):
    """Records the exponential-mechanism calls and the ε of every clipped-sum release."""

    def __init__(self, gen):
        super().__init__(gen)
        self.sums, self.em_calls = [], []

    def dlap_scaled(self, name, sens, eps, which):
        self.sums.append((tuple(eps), np.asarray(which).copy(), np.asarray(sens).copy()))
        return super().dlap_scaled(name, sens, eps, which)

    def em(self, name, utility, mu, eps):
        self.em_calls.append((name, np.asarray(utility).copy(), np.asarray(mu).copy(), eps))
        return super().em(name, utility, mu, eps)


def _located(sizes, seed, spacing=100.0, sd=10.0):
    """Groups of ``sizes`` rows, group i ~ N(spacing·i, sd²) (different locations)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(spacing * i, sd, int(n)) for i, n in enumerate(sizes)])
    g = np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)
    return GroupedValues(g, x, len(sizes)), x, g


def _run_small(gv, seed, medians, spy=None):
    """The small-group plan alone, fed exact counts as the query's ``count()`` (§8.1); ``medians``
    the per-group values the hook returns (None: no hook). Returns (output, the hook's inputs)."""
    fp = gm.friendly_means_plan(EPS, DLT)
    sizes = np.diff(gv.offsets)
    seen: list = []

    def hook(low, high):
        seen.append((low.copy(), high.copy()))
        return np.asarray(medians, dtype=np.float64)

    draws = spy if spy is not None else gm._Draws(np.random.default_rng(seed))
    out = gm._small_means(gv.values, gv.group, sizes, sizes.astype(np.float64),
                          np.ones(sizes.size, bool), fp, draws, n_scale=Fraction(4),
                          medians=None if medians is None else hook)
    return out, seen


def test_budget_and_inputs_known_answers():
    """Group 2's median is ⊥ (NaN): it keeps step 4 at ε_sum (index 0), the others take the sums
    at 5·ε_sum/6 (index 2); the range at ε_sum/6 (the sampler's 2·ε_c); the hook is called once
    with the pooled range m ± R, which the release reports as its window. Seed 3."""
    gv, x, g = _located([80, 80, 80, 80], 3)
    spy = _Spy(np.random.default_rng(3))
    out, seen = _run_small(gv, 3, [0.0, 100.0, np.nan, 300.0], spy)
    e_sum = out["budget"].eps_sum
    assert out["median_centred"].tolist() == [True, True, False, True]
    (eps, which, _), = spy.sums
    assert eps == (e_sum, e_sum / 10, e_sum * Fraction(5, 6)) and which.tolist() == [2, 2, 0, 2]
    assert spy.em_calls[-1][0] == "small_med_clip" and spy.em_calls[-1][3] == 2 * e_sum / 6
    assert (2 * e_sum / 6) / 2 + e_sum * Fraction(5, 6) == e_sum
    (low, high), = seen
    assert np.all(low == out["window_low"]) and np.all(high == out["window_high"])
    assert np.unique(high - low).size == 1  # one pooled range
    # the ⊥ median's group: step 4's pooled center and radius; the others their own centers
    assert out["center"][2] == (low[2] + high[2]) / 2
    assert np.all(out["radius"][[0, 1, 3]] == out["radius"][0])
    shift = out["center"][[0, 1, 3]] - np.array([0.0, 100.0, 300.0])
    assert np.ptp(shift) <= 1e-12 * 300  # c_g = med_g + (R_hi − R_lo)/2: the same move for all


def test_two_pass_groups_keep_their_two_passes():
    """The groups of §8.2 (ñ·ε_sum >= 200: the two of 3,000 rows) keep their two passes (their own
    first means center them already); the median-centred groups are the others. Seed 3."""
    gv, x, g = _located([600, 600, 600, 3000, 3000], 3)
    out, _ = _run_small(gv, 3, [0.0, 100.0, 200.0, 300.0, 400.0])
    assert out["two_pass"].tolist() == [False, False, False, True, True]
    assert out["median_centred"].tolist() == [True, True, True, False, False]


def test_wider_range_keeps_the_pooled_one(monkeypatch):
    """Where the deviations' range comes out at least step 4's radius (public), the groups keep
    step 4's pooled center and radius, at the sums' ε_f (the range's ε_c is spent), and none is
    marked centred; a narrower range centres them (the control: the same run unpatched). Seed 5."""
    gv, x, g = _located([200, 200, 200], 5, spacing=30.0)
    real = gm._median_range
    seen: dict = {}

    def wide(xg, gg, med, fm, eps_sum, s, draws):
        c, r, e = real(xg, gg, med, fm, eps_sum, s, draws)
        seen["r"] = r[0]
        return c, np.full(r.shape, 1e9), e

    ctl, (win,) = _run_small(gv, 5, [0.0, 30.0, 60.0])
    assert ctl["median_centred"].all() and ctl["radius"][0] < (win[1] - win[0])[0] / 2
    monkeypatch.setattr(gm, "_median_range", wide)
    spy = _Spy(np.random.default_rng(5))
    out, (win,) = _run_small(gv, 5, [0.0, 30.0, 60.0], spy)
    assert not out["median_centred"].any() and seen["r"] == ctl["radius"][0]
    m, rad = (win[0] + win[1])[0] / 2, (win[1] - win[0])[0] / 2
    assert np.allclose(out["center"], m, rtol=0, atol=1e-12 * abs(m)) and np.allclose(out["radius"], rad)
    e_sum = out["budget"].eps_sum
    (eps, which, _), = spy.sums
    assert eps[2] == e_sum * Fraction(5, 6) and which.tolist() == [2, 2, 2]


def _range_spy(monkeypatch) -> dict:
    """Record what ``_median_range`` receives (the groups, the medians, the unit ``s``)."""
    seen: dict = {}
    real = gm._median_range

    def spy(xg, gg, med, fm, eps_sum, s, draws):
        seen.update(med=med.copy(), fm=fm.copy(), s=s)
        return real(xg, gg, med, fm, eps_sum, s, draws)

    monkeypatch.setattr(gm, "_median_range", spy)
    return seen


def test_range_utility_reads_the_deviations_of_the_centred_groups(monkeypatch):
    """The range step's utility is ``side_utilities`` around 0 of the sorted deviations x − med_g
    of the groups with a median only, over the candidates ``grid_up(K·s)``, K in SIDE_KS_POOLED;
    controls: with the ⊥ group's rows, or around the pooled center, the counts differ. Seed 4."""
    gv, x, g = _located([80, 80, 80], 4)
    med = np.array([1.0, np.nan, 199.0])
    seen = _range_spy(monkeypatch)
    spy = _Spy(np.random.default_rng(4))
    out, _ = _run_small(gv, 4, med, spy)
    assert seen["fm"].tolist() == [True, False, True]
    u = spy.em_calls[-1][1]
    cand = gm._grid_up(np.asarray(gm.SIDE_KS_POOLED) * seen["s"])
    rows = np.isfinite(med)[g]
    dev = np.sort(x[rows] - med[g[rows]])
    assert np.array_equal(u, gm.side_utilities(dev, 0.0, cand))
    every = np.sort(x - np.nan_to_num(med, nan=100.0)[g])
    assert not np.array_equal(u, gm.side_utilities(every, 0.0, cand))
    m = (out["window_low"][0] + out["window_high"][0]) / 2
    assert not np.array_equal(u, gm.side_utilities(np.sort(x[rows] - m), 0.0, cand))


def _max_loss(u_d, u_p, mu, weight):
    """max over outcomes of |ln P_D(k) − ln P_D'(k)| for P(k) ∝ μ_k·exp(weight·u_k), exactly in
    log space (float64), per side."""
    def logp(u):
        a = np.log(mu.astype(np.float64)) + weight * u.astype(np.float64)
        mx = a.max()
        return a - (mx + math.log(np.exp(a - mx).sum()))
    return max(float(np.abs(logp(a) - logp(b)).max()) for a, b in zip(u_d, u_p, strict=True))


def _audit(monkeypatch, weight_factor):
    """The deviations' range step as the code calls it (utility, μ and ε captured from one run),
    on neighbouring sets of deviations: D (the run's) and D plus one row just beyond each candidate
    radius, on either side, at one, or at 0; the largest privacy loss over those neighbours divided
    by ε_c, with the sampler's weights exp(weight_factor·(ε/2)·u)."""
    gv, x, g = _located([150, 150, 150], 6, spacing=50.0)
    med = np.array([0.0, 50.0, 100.0])
    seen = _range_spy(monkeypatch)
    spy = _Spy(np.random.default_rng(6))
    out, _ = _run_small(gv, 6, med, spy)
    name, u, mu, eps = spy.em_calls[-1]
    assert name == "small_med_clip"
    e_c = out["budget"].eps_sum / 6
    cand = gm._grid_up(np.asarray(gm.SIDE_KS_POOLED) * seen["s"])
    dev = np.sort(x - med[g])
    assert np.array_equal(u, gm.side_utilities(dev, 0.0, cand))
    weight = weight_factor * float(eps) / 2
    worst = 0.0
    extra = np.concatenate([np.nextafter(cand, np.inf), -np.nextafter(cand, np.inf),
                            cand, -cand, [0.0, 1e300, -1e300]])
    for z in extra:
        u_p = gm.side_utilities(np.sort(np.append(dev, z)), 0.0, cand)
        worst = max(worst, _max_loss(u, u_p, mu, weight))
    return worst / float(e_c)


def test_range_step_exact_loss(monkeypatch):
    """The range step's loss on every neighbour above is at most ε_c = ε_sum/6 (exact
    probabilities, no sampling: false-failure rate 0; seed 6 only draws the data and the steps
    before it)."""
    loss = _audit(monkeypatch, 1.0)
    print("seed 6, loss / ε_c =", loss)
    assert loss <= 1.0 + 1e-9
    assert loss > 0.5  # the neighbours reach the bound's order (one row beyond a radius)


def test_range_step_exact_loss_negative_control(monkeypatch):
    """Weights exp(ε·u) (twice the sampler's ε/2): the loss exceeds ε_c."""
    loss = _audit(monkeypatch, 2.0)
    print("control seed 6, loss / ε_c =", loss)
    assert loss > 1.0


def _errors(seeds, centred: bool):
    """Median over groups and seeds of |mean − x̄|/sd for 5 groups of 60 rows at locations
    0, 100, …, 400 (sd 10), the small plan at ε = 1/3 with the groups' exact medians as the
    released ones (or, the control, no medians: step 4's pooled range)."""
    errs = []
    for seed in seeds:
        gv, x, g = _located([60] * 5, seed)
        med = np.array([np.median(x[g == i]) for i in range(5)])
        out, _ = _run_small(gv, seed + 1, med if centred else None)
        assert out["median_centred"].all() == centred
        errs.append(np.abs(out["value"] - np.bincount(g, weights=x) / 60) / 10.0)
    return float(np.median(np.concatenate(errs)))


def test_located_groups_accuracy():
    """Seeds 0–9: the median error around the medians is below 1.0 sd (measured 0.482); the
    pooled range (the control below, measured 2.14) shrinks the groups toward its center.
    Deterministic (fixed seeds); each median is over 50 group errors."""
    print("seeds 0-9")
    err = _errors(range(10), True)
    print("around the medians", err)
    assert err < 1.0


def test_located_groups_pooled_negative_control():
    """The same harness without medians (the cc5e06d plan) must fail the bound."""
    err = _errors(range(10), False)
    print("pooled", err)
    assert err >= 1.0


def _coverage(scale: float = 1.0, monkeypatch=None):
    """low/high per group against θ = c_g + Σ clip(x − c_g, ±R')/n (40 groups of 120 rows,
    lognormal at 40 locations, ε = 1/3, exact medians, seed 12)."""
    rng = np.random.default_rng(12)
    G, n = 40, 120
    x = rng.lognormal(size=G * n) + np.repeat(np.arange(G) * 3.0, n)
    g = np.repeat(np.arange(G), n).astype(np.int64)
    gv = GroupedValues(g, x, G)
    med = np.array([np.median(x[g == i]) for i in range(G)])
    if scale != 1.0:
        real = gm.noise_half_width
        monkeypatch.setattr(gm, "noise_half_width", lambda *a: scale * real(*a))
    out, _ = _run_small(gv, 13, med)
    assert out["median_centred"].all()
    c, lo, hi = out["center"], out["clip_low"], out["clip_high"]
    theta = c + np.bincount(g, weights=np.clip(x - c[g], (lo - c)[g], (hi - c)[g])) / n
    return float(((out["low"] <= theta) & (theta <= out["high"])).mean())


def test_interval_covers_the_clipped_mean():
    """Coverage >= 0.85 of 40 groups fails with probability < 1e-2 if the true coverage is 0.95
    (binomial tail); seed 12 (measured 1.0)."""
    cover = _coverage()
    print("seed 12, coverage", cover)
    assert cover >= 0.85


def test_interval_negative_control(monkeypatch):
    """Every half-width cut to 0.2×: the coverage falls below the bound (measured 0.7)."""
    cover = _coverage(0.2, monkeypatch)
    print("control, coverage", cover)
    assert cover < 0.85


def _table(seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.array(["a", "b", "c", "d"], dtype=object), 150)
    return pd.DataFrame({"g": g, "x": rng.normal(np.repeat([0.0, 50.0, 100.0, 150.0], 150), 5.0)})


def test_aggregate_draws_the_median_inside_the_mean(monkeypatch):
    """In ``aggregate`` with count, mean and median of one column: the median is released from the
    mean's pooled range (its windows) before the mean's sums, and those sums are centred at it;
    without the median the mean has no such keys. Seed 7."""
    seen: dict = {}
    real = gm._median_range

    def spy(xg, gg, med, fm, eps_sum, s_pool, draws):
        seen["med"] = med.copy()
        return real(xg, gg, med, fm, eps_sum, s_pool, draws)

    monkeypatch.setattr(gm, "_median_range", spy)
    real_q = agg.Quantile.run
    calls: list = []

    def q_run(self, cand, eps, dlt, contribution, gen, n_hat=None, windows=None):
        calls.append(windows)
        return real_q(self, cand, eps, dlt, contribution, gen, n_hat=n_hat, windows=windows)

    monkeypatch.setattr(agg.Quantile, "run", q_run)
    df = _table()
    rel = privagg.aggregate(df, by="g", metrics=[privagg.count(), privagg.mean("x"), privagg.quantile("x", 0.5)],
                            epsilon=1, delta=1e-6, domain=["a", "b", "c", "d"], rng=7)
    out = rel.to_pandas().set_index("g")
    assert np.array_equal(seen["med"], out["q0.5_x"].to_numpy(float), equal_nan=True)
    assert len(calls) == 1 and calls[0] is not None
    low, high = calls[0]
    assert np.unique(high - low).size == 1  # the pooled range, before the sums
    mean_ok = out["mean_x"].notna().to_numpy()
    assert mean_ok.all()
    # the clipping ranges are centred near each group's median, not one pooled range
    mid = (out["mean_x_clip_low"] + out["mean_x_clip_high"]).to_numpy(float) / 2
    assert np.unique(np.round(mid, 6)).size == 4
    truth = df.groupby("g").x.mean().to_numpy()
    print("seed 7, errors", np.abs(out["mean_x"].to_numpy(float) - truth))
    assert np.abs(out["mean_x"].to_numpy(float) - truth).max() < 5.0
    calls.clear()
    rel = privagg.aggregate(df, by="g", metrics=[privagg.count(), privagg.mean("x"), privagg.quantile("x", 0.25)],
                            epsilon=1, delta=1e-6, domain=["a", "b", "c", "d"], rng=7)
    out = rel.to_pandas().set_index("g")
    mid = (out["mean_x_clip_low"] + out["mean_x_clip_high"]).to_numpy(float) / 2
    assert np.unique(np.round(mid, 6)).size == 1  # the pooled range: no median in the query


@pytest.mark.parametrize("form", ["pandas", "path"])
def test_same_release_from_every_input(form, tmp_path):
    """The median-centred release is a function of the rows and the seed, not of the input form."""
    df = _table(8)
    ms = [privagg.count(), privagg.mean("x"), privagg.quantile("x", 0.5)]
    a = privagg.aggregate(df, by="g", metrics=ms, epsilon=1, delta=1e-6, rng=3, domain=["a", "b", "c", "d"])
    src = df
    if form == "path":
        src = tmp_path / "t.csv"
        df.to_csv(src, index=False)
    b = privagg.aggregate(src, by="g", metrics=ms, epsilon=1, delta=1e-6, rng=3, domain=["a", "b", "c", "d"])
    pd.testing.assert_frame_equal(a.groups, b.groups)
