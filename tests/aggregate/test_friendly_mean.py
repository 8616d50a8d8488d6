"""friendly_means: plan known answers, the exact 1-D predicate, vectorized = per-group reference,
⊥ for tiny groups, accuracy on real-shaped data (docs/proofs/aggregate_mean.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import privagg.mechanisms.grouped_mean as gm
from privagg.errors import ParameterError
from privagg.mechanisms.grouped import Contribution, GroupedValues
from privagg.mechanisms.mean import M_MIN, mean_plan
from privagg.noise.samplers import bernoulli_rational, discrete_laplace

EPS, DLT = Fraction(1), Fraction(1, 10**6)


@pytest.mark.parametrize("l0, linf, replace, n_steps, k_max", [
    (1, 1, False, 1, 1), (1, 1, True, 2, 2), (3, 2, False, 6, 2), (3, 2, True, 12, 4)])
def test_plan_known_answers(l0, linf, replace, n_steps, k_max):
    fp = gm.friendly_means_plan(EPS, DLT, Contribution(l0, linf, replace))
    assert (fp.steps, fp.max_steps) == (n_steps, k_max)
    assert fp.epsilon_group == EPS / n_steps
    expected_dg = DLT / (n_steps * Fraction(math.exp((k_max - 1) * float(EPS / n_steps))))
    assert abs(float(fp.delta_group / expected_dg) - 1) < 1e-12
    with mpmath.workdps(80):  # δ_g·N·e^{(K−1)ε_g} <= δ exactly
        x = mpmath.mpf((k_max - 1) * fp.epsilon_group.numerator) / fp.epsilon_group.denominator
        lhs = mpmath.mpf(fp.delta_group.numerator) / fp.delta_group.denominator * n_steps
        assert lhs * mpmath.exp(x) <= mpmath.mpf(DLT.numerator) / DLT.denominator
    p = fp.group
    base = mean_plan(fp.epsilon_group, fp.delta_group, calibration="laplace", select_radius=True,
                     small=True, count_share=gm.SHARE_COUNT)  # the grouped mean's ε_g/40
    assert p.eps_quantile == fp.epsilon_group / 5
    assert p.eps_sum == base.eps_sum - (fp.epsilon_group / 5 - base.eps_quantile)
    assert (p.eps_count, p.eps_select, p.eps_locate) == (base.eps_count, base.eps_select,
                                                         base.eps_locate)
    loss = p.privacy_loss
    assert Fraction(loss.epsilon) <= fp.epsilon_group and Fraction(loss.delta) <= fp.delta_group
    assert fp.epsilon == n_steps * Fraction(loss.epsilon) <= EPS
    assert fp.delta <= DLT
    assert fp.need == M_MIN + p.core_count_shift
    assert fp.m_locate == max(gm.M_LOCATE_MIN, gm.LOCATE_FACTOR * fp.need)


def _check_every_plan_within(fp, n_hats):
    """For every n̂: the plan chosen from it (public) spends at most (ε_g, δ_g) per group, and
    the reported (ε, δ) covers it (exact rationals)."""
    idx = fp.choose(n_hats)
    for i in np.unique(idx):
        p = fp.plans[int(i)]
        e = (p.eps_count + p.eps_select + p.eps_locate + p.eps_quantile + p.eps_scale
             + p.eps_sum)
        d = p.delta_select + p.delta_locate + p.delta_sum
        assert e <= fp.epsilon_group and d <= fp.delta_group, (int(i), float(e), float(d))
        assert fp.steps * e <= fp.epsilon
        assert fp.steps * d <= fp.delta  # e^{(K−1)ε} >= 1
        assert min(p.eps_count, p.eps_select, p.eps_core_count, p.eps_core_mean, p.eps_quantile,
                   p.eps_sum) > 0


@pytest.mark.parametrize("eps", [Fraction(1, 7), Fraction(1), Fraction(8)])
@pytest.mark.parametrize("contribution", [Contribution(), Contribution(3, 2, True)])
def test_adaptive_shares_never_exceed_the_plan(eps, contribution):
    """The plan is chosen per group from its released n̂ (§1.7): over a range of n̂ (every grid
    threshold ±1 and a geometric sweep 1 … 10¹⁰) each chosen plan spends at most (ε_g, δ_g), and
    the choice has the known answers (the largest i with n̂ >= m_locate_i and
    n̂ − t_n >= m_select_i)."""
    fp = gm.friendly_means_plan(eps, DLT, contribution)
    assert len(fp.plans) == len(gm.LOCATE_SCALES) and fp.plans[0] == fp.group
    thr = np.array(fp.m_locates, dtype=np.int64)
    thr2 = np.array(fp.m_selects, dtype=np.int64) + fp.count_tail
    n_hats = np.unique(np.concatenate([thr - 1, thr, thr + 1, thr2 - 1, thr2, thr2 + 1,
                                       np.int64(10) ** np.arange(11),
                                       np.array([-5, 0, 1, 2])]))
    _check_every_plan_within(fp, n_hats)
    assert fp.epsilon <= eps and fp.delta <= DLT
    idx = fp.choose(n_hats)
    sel = fp.m_selects
    expect = [max([0] + [i for i in range(1, len(thr))
                         if n >= thr[i] and n - fp.count_tail >= sel[i]]) for n in n_hats]
    assert idx.tolist() == expect
    assert np.all(np.diff(idx) >= 0)  # more rows, never more locate budget
    eg = fp.epsilon_group
    for q, p, nd in zip(gm.LOCATE_SCALES, fp.plans, fp.needs):
        assert p.eps_count == eg / 40 and p.eps_select == q * eg / 5
        assert p.eps_quantile == eg * gm.SHARE_QUANTILE
        assert p.eps_sum == eg - eg / 40 - q * eg / 5 - p.eps_locate - eg * gm.SHARE_QUANTILE
        assert p.delta_locate <= fp.plans[0].delta_locate <= fp.delta_group
        assert nd == M_MIN + p.core_count_shift
    for ms, ml, p in zip(fp.m_selects, fp.m_locates, fp.plans):
        assert ms == math.ceil(8 * math.log(481 / 1e-3) / float(p.eps_select)) <= ml
    assert fp.count_tail == math.ceil(math.log(500) / float(eg / 40))
    assert fp.target_tail == math.ceil(math.log(10) / float(eg / 40))
    # shares of the sum grow with n̂; thresholds grow with the smaller locate share
    assert all(a.eps_sum < b.eps_sum for a, b in zip(fp.plans, fp.plans[1:]))
    assert all(a <= b for a, b in zip(fp.m_locates, fp.m_locates[1:]))


def test_adaptive_shares_negative_control():
    """A plan grid with one plan whose final sum forgets the smaller locate share (it keeps
    the q = 1 sum and adds what the locate saved): the same check must fail."""
    import dataclasses

    fp = gm.friendly_means_plan(EPS, DLT)
    bad = dataclasses.replace(fp.plans[3], eps_sum=fp.plans[3].eps_sum + fp.plans[0].eps_locate
                              - fp.plans[3].eps_locate)
    fp_bad = dataclasses.replace(fp, plans=fp.plans[:3] + (bad,) + fp.plans[4:])
    _check_every_plan_within(fp_bad, np.array([100, 2000]))  # plan 3 not chosen: passes
    with pytest.raises(AssertionError):
        _check_every_plan_within(fp_bad, np.array([10**4]))


def test_plan_rejects_zero_delta_and_bad_contribution():
    with pytest.raises(ParameterError, match="delta"):
        gm.friendly_means_plan(EPS, 0, Contribution())
    with pytest.raises(ParameterError, match="max_rows"):
        gm.friendly_means_plan(EPS, DLT, Contribution(1, 0))


def test_quantize_and_grid_exponent_known_answers():
    from privagg.noise.grid import grid_exponent

    v = np.array([0.2, 1.0, 16.0, 17.0, 31.5, 33.0, 1025.0, 2047.9])
    assert gm._quantize_up(v).tolist() == [1, 1, 16, 17, 32, 34, 1088, 2048]
    s = np.array([1e-30, 0.75, 1.0, 3.0, 1e300])
    assert gm._grid_exponent(s).tolist() == [grid_exponent(float(t)) for t in s]


def _brute_counts(values, r):
    fr = [Fraction(float(v)) for v in values]
    rr = Fraction(float(r))
    return [sum(abs(a - b) <= rr for b in fr) for a in fr]


@pytest.mark.parametrize("values, r", [
    ([0.0, 1.0, 2.0, 3.0, 1.0, 1.0], 1.0),                       # exactly r apart, duplicates
    ([-0.0, 0.0, 5e-324, -5e-324, 1.0], 5e-324),                 # ±0.0, subnormals
    ([1e16, 1e16 + 2, 1e16 + 4, 1e16 - 2], 1.0),                 # a ± r rounds back to a
    ([1e300, -1e300, 1.7e308, -1.7e308, 1.7e308], 3 * 2.0**60),  # huge magnitudes
    ([1.0, 1.0 + 2**-52, 1.0 + 2**-51, 0.1 + 0.2, 0.3], 2**-52), # one ulp apart
    ([0.1, 0.4, 0.7, 0.30000000000000004], 0.3),                 # fl(|a − b|) = r but |a − b| > r
])
def test_friend_counts_exact_against_rationals(values, r):
    sv = np.sort(np.array(values, dtype=np.float64))
    seg = np.zeros(sv.size, dtype=np.int64)
    got = gm.friend_counts_1d(sv, seg, np.array([0]), np.array([sv.size]), np.array([float(r)]))
    assert got.tolist() == _brute_counts(sv, r)


def test_friend_counts_random_segments_and_symmetry():
    rng = np.random.default_rng(11)
    print("seed 11")
    groups = np.repeat(np.arange(5), [0, 1, 7, 40, 25])
    vals = np.concatenate([np.round(rng.normal(size=k) * 4) / 4 for k in [0, 1, 7, 40, 25]])
    vals[-3:] = [1e15, 1e15 + 0.125, 1e15 - 0.25]
    radii = np.array([1.0, 0.5, 0.25, 0.75, 0.125])
    order = np.lexsort((vals, groups))
    sv, sg = vals[order], groups[order]
    off = np.searchsorted(sg, np.arange(6))
    got = gm.friend_counts_1d(sv, sg, off[:-1], off[1:], radii)
    for g in range(5):
        part = sv[off[g]:off[g + 1]]
        assert got[off[g]:off[g + 1]].tolist() == _brute_counts(part, radii[g])
    # the predicate is symmetric: total friend pairs counted from both ends agree (even count)
    assert (got.sum() - sv.size) % 2 == 0


class _PerGroupDraws(gm._Draws):
    """Every draw of group g from its own generator, in the same order as a run on group g
    alone: so the vectorized run over G groups must equal G single-group runs."""

    def __init__(self, gens, group_ids):
        self.gens, self.ids = gens, group_ids  # group_ids: the global id of each local group

    def dlap(self, name, scale, shape):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        # the histogram's width is the table's widest group: draw a fixed width per group and
        # use its prefix (the columns beyond a group's own edges are never used)
        wide = (256,) if name.startswith("quantile") else shape[1:]
        rows = [discrete_laplace(scale, size=wide, rng=self.gens[i]) for i in self.ids]
        return np.stack(rows)[(slice(None),) + tuple(slice(0, k) for k in shape[1:])]

    def dlap_by(self, name, scales, which, width=None):
        wide = () if width is None else (width,)
        return np.stack([discrete_laplace(scales[int(k)], size=wide, rng=self.gens[i])
                         for k, i in zip(which, self.ids)]).reshape(which.shape + wide)

    def dlap_scaled(self, name, sens, eps, which):
        return np.array([int(discrete_laplace(Fraction(int(s)) / eps[int(k)], rng=self.gens[i]))
                         for s, k, i in zip(sens, which, self.ids)], dtype=np.int64)

    def uniform(self, name, groups):
        out = np.empty(groups.size)
        for k, i in enumerate(self.ids):
            sel = groups == k
            out[sel] = self.gens[i].random(int(sel.sum()))
        return out

    def keys(self, name):
        return np.uint64(2) * self.gens[self.ids[0]].integers(0, 2**63, size=(2, 1),
                                                              dtype=np.uint64) + np.uint64(1)

    def bernoulli(self, name, num, den, groups):
        out = np.empty(num.size, dtype=bool)
        for k, i in enumerate(self.ids):
            sel = groups == k
            out[sel] = bernoulli_rational(num[sel], den[sel], rng=self.gens[i])
        return out

    def em(self, name, utility, mu, eps):  # the small-group plan's pooled steps (not per group)
        from privagg.mechanisms.mean_small import exponential_mechanism

        return exponential_mechanism(utility, mu, eps, self.gens[self.ids[0]])


def test_vectorized_equals_per_group_runs(monkeypatch):
    """Same randomness per group (the keyed order hash shares one key: the key is public
    randomness, drawn once; the reference reuses it). The FriendlyCore plan from plan 0's floor
    on (``SMALL_SWITCH = 1``): the groups of 2500–5000 rows run it."""
    monkeypatch.setattr(gm, "SMALL_SWITCH", 1)
    rng = np.random.default_rng(3)
    print("seed 3")
    sizes = [3000, 0, 40, 5000, 2500, 800]
    data = [rng.lognormal(size=sizes[0]), np.zeros(0), rng.normal(size=40),
            1e6 + 1e5 * rng.standard_t(3, size=sizes[3]), 1e-3 * rng.pareto(2.5, size=sizes[4]),
            np.where(rng.random(800) < 0.6, rng.normal(0, 1, 800), rng.normal(6, 1, 800))]
    fp = gm.friendly_means_plan(Fraction(2), DLT, Contribution())
    key_seed = 99

    def run(values_list, ids):
        gens = {i: np.random.default_rng(1000 + i) for i in ids}
        d = _PerGroupDraws(gens, ids)
        keys = np.random.default_rng(key_seed).integers(0, 2**63, size=(2, 1), dtype=np.uint64)
        d.keys = lambda name: keys * np.uint64(2) + np.uint64(1)
        g = np.repeat(np.arange(len(values_list)), [v.size for v in values_list])
        gv = GroupedValues(g.astype(np.int64), np.concatenate(values_list), len(values_list))
        return gm._friendly_means(gv, fp, d)

    full = run(data, list(range(len(data))))
    # the small-group plan (groups 1 and 2: n̂ below plan 0's radius selection) pools its
    # location steps over the small groups (docs/proofs/aggregate_mean.md §8): not per group
    small = fp.small(full.extra["n_hat"])
    assert small.tolist() == [False, True, True, False, False, False]
    for i in np.flatnonzero(~small):
        one = run([data[i]], [i])
        for field in ("value", "low", "high", "ok"):
            np.testing.assert_array_equal(getattr(full, field)[i:i + 1], getattr(one, field))
        for k in full.extra:
            np.testing.assert_array_equal(full.extra[k][i:i + 1], one.extra[k])
        assert full.reason[i] == one.reason[0]
    assert full.ok[[0, 3, 4, 5]].all() and full.ok[2]


class _NoNoise(gm._Draws):
    """Every Laplace draw 0 (the exponential mechanism stays exact): ``ñ = n`` exactly."""

    def dlap(self, name, scale, shape):
        return np.zeros(shape, dtype=np.int64)

    def dlap_by(self, name, scales, which, width=None):
        return np.zeros(which.shape + (() if width is None else (width,)), dtype=np.int64)

    def dlap_scaled(self, name, sens, eps, which):
        return np.zeros(sens.shape, dtype=np.int64)


def test_bottom_for_tiny_groups_with_public_reason():
    """Issue 13 item 4: groups of 50 and 100 rows release through the small-group plan (⊥ on
    d33c5b7); ⊥ only below ``ñ < ⌈1/ε_g⌉`` rows (here with zero count noise, so ``ñ = n``)."""
    rng = np.random.default_rng(4)
    print("seed 4")
    sizes = [0, 2, 3, 50, 100, 20000]
    g = np.repeat(np.arange(6), sizes).astype(np.int64)
    gv = GroupedValues(g, rng.normal(size=g.size), 6)
    fp = gm.friendly_means_plan(Fraction(1, 3), DLT)
    assert fp.need > 200 and fp.small_floor == 3  # n = 50, 100: far below the locate step
    res = gm._friendly_means(gv, fp, _NoNoise(np.random.default_rng(5)))
    assert res.ok.tolist() == [False, False, True, True, True, True]
    assert res.extra["small_plan"].tolist() == [False, False, True, True, True, False]
    for i in range(2):
        assert res.reason[i].startswith("group too small for the unbounded mean at this ε")
        assert "below 3" in res.reason[i]
        assert np.isnan(res.value[i]) and np.isnan(res.low[i])
    assert all(r is None for r in res.reason[2:])
    res = gm.friendly_means(gv, epsilon=EPS, delta=DLT, contribution=Contribution(),
                            rng=np.random.default_rng(5))
    assert res.epsilon == 1.0 and res.delta <= 1e-6
    assert set(res.extra) >= {"n_hat", "clip_radius"}


SHAPES = {
    "lognormal": lambda r, n: r.lognormal(size=n),
    "pareto2.5": lambda r, n: r.pareto(2.5, size=n),
    "student_t3": lambda r, n: r.standard_t(3, size=n),
    "bimodal": lambda r, n: np.where(r.random(n) < 0.6, r.normal(0, 1, n), r.normal(6, 1, n)),
    "tiny_scale": lambda r, n: 1e-3 * r.lognormal(size=n),
    "huge_scale": lambda r, n: 1e6 + 1e5 * r.normal(size=n),
}


def _accuracy(per_shape=6, n=10_000, seed=21, mutate=None):
    """Median over groups of |release − x̄|/SE per shape, all shapes in one table."""
    rng = np.random.default_rng(seed)
    names = list(SHAPES)
    xs = [SHAPES[s](rng, n) for s in names for _ in range(per_shape)]
    g = np.repeat(np.arange(len(xs)), n).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, np.concatenate(xs), len(xs)), epsilon=EPS,
                            delta=DLT, contribution=Contribution(), rng=np.random.default_rng(seed))
    true = np.array([x.mean() for x in xs])
    se = np.array([x.std(ddof=1) / math.sqrt(n) for x in xs])
    ratio = (np.abs(res.value - true) / se).reshape(len(names), per_shape)
    return res, dict(zip(names, np.median(ratio, axis=1)))


def _check_accuracy(res, med):
    assert res.ok.all()
    for name, m in med.items():
        assert m < 3.0, (name, m)


def test_accuracy_on_real_shaped_data():
    """n = 10⁴ per group, ε = 1, δ = 1e-6, seed 21. The DP error over the sampling SE measured
    (median over groups, 200 groups per shape, seed 5): lognormal 1.09, Pareto(2.5) 1.75,
    t(3) 0.24, bimodal 0.08, 1e-3 scale 0.11, 1e6 scale 1.13 (at n = 10⁵: 0.51, 1.33, 0.16,
    0.02, 0.04, 0.44). Threshold 3 on the median of 6 groups per shape: at the measured p95 of
    the per-group ratio (about 3 for Pareto) the median of 6 exceeds 3 with probability below
    2 %, so the false-failure rate over seeds is about 2 % (the seed is fixed: deterministic)."""
    res, med = _accuracy()
    print("seed 21", med)
    _check_accuracy(res, med)


def test_accuracy_negative_control_clip_at_bottom(monkeypatch):
    """The same harness with both side radii forced to the bottom edge U·2^-6 (a huge penalty
    per quarter-octave) must fail."""
    monkeypatch.setattr(gm, "side_penalty", lambda eps_q: 10**9)
    res, med = _accuracy(per_shape=2)
    print("control", med)
    with pytest.raises(AssertionError):
        _check_accuracy(res, med)


def test_interval_covers_the_clipped_mean():
    """low/high hold w.p. >= 0.95 per group for θ = ĉ + Σ clip(x − ĉ, ±R)/n (seed 8, 300
    groups): coverage >= 0.9 fails with probability < 1e-3 if the true coverage is 0.95."""
    rng = np.random.default_rng(8)
    print("seed 8")
    G, n = 300, 2000
    x = rng.lognormal(size=G * n)
    g = np.repeat(np.arange(G), n).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, x, G), epsilon=Fraction(1, 2), delta=DLT,
                            contribution=Contribution(), rng=np.random.default_rng(9))
    c, lo, hi = res.extra["center"], res.extra["clip_low"], res.extra["clip_high"]
    theta = c + np.bincount(g, weights=np.clip(x - c[g], (lo - c)[g], (hi - c)[g])) / n
    ok = res.ok
    cover = ((res.low <= theta) & (theta <= res.high))[ok]
    assert ok.mean() > 0.9 and cover.mean() >= 0.9


def _lognormal_skew(seed=0, mutate=None):
    """Median over 12 groups of |release − x̄|/SE: lognormal(3, 1), n = 2·10⁴ per group,
    ε = 1/7 (one metric of seven in an aggregate), δ = 1e-6."""
    rng = np.random.default_rng(seed)
    G, n = 12, 20_000
    xs = rng.lognormal(3.0, 1.0, (G, n))
    g = np.repeat(np.arange(G), n).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, xs.ravel(), G), epsilon=Fraction(1, 7), delta=DLT,
                            contribution=Contribution(), rng=np.random.default_rng(seed + 100))
    assert res.ok.all()
    ratio = np.abs(res.value - xs.mean(axis=1)) / (xs.std(axis=1, ddof=1) / math.sqrt(n))
    return float(np.median(ratio))


def test_skewed_groups_not_biased_down():
    """Regression (issue 13 review): the symmetric clip with the cumulative-tail rule clipped
    about 300 rows of the right tail of every group and biased the mean down (median 6.19 SE at
    this seed; 2.8–8.3 over seeds 0–5). Per-side ranges: 2.67 here; the median over seeds 0–19
    stays below 3.1 (measured), so the bound 4 fails for fewer than 1 seed in 20 (the seed is
    fixed: deterministic)."""
    med = _lognormal_skew(seed=0)
    print("seed 0", med)
    assert med < 4.0


def test_skewed_groups_negative_control(monkeypatch):
    """Over-clipping the tail (the side penalty ×8: about the old rule's clipped row count) is
    biased down and must fail the same bound (measured 15.5 at seed 0)."""
    real = gm.side_penalty
    monkeypatch.setattr(gm, "side_penalty", lambda eps_q: 8 * real(eps_q))
    med = _lognormal_skew(seed=0)
    print("control seed 0", med)
    assert med >= 4.0


def _near_threshold(seed=12):
    """max over passing groups of |release − x̄|/SE, ε = 1, δ = 1e-6, lognormal(3, 1), 60 groups
    each of n = 250, 300, 400, 600, 900 rows (just above ``need`` = 201)."""
    rng = np.random.default_rng(seed)
    sizes = np.repeat([250, 300, 400, 600, 900], 60)
    xs = [rng.lognormal(3.0, 1.0, k) for k in sizes]
    g = np.repeat(np.arange(sizes.size), sizes).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, np.concatenate(xs), sizes.size), epsilon=EPS,
                            delta=DLT, contribution=Contribution(),
                            rng=np.random.default_rng(seed + 1))
    z = np.array([abs(v - x.mean()) / (x.std(ddof=1) / math.sqrt(x.size))
                  for v, x in zip(res.value, xs)])
    return res, z


def test_near_threshold_groups_are_bottom_not_wild(monkeypatch):
    """Regression (issue 13 review): groups just above ``need`` passed the core with a radius
    from the plateau of too-large radii (all pairs within): errors up to 10¹⁸ SE (max 4.7·10¹⁶
    at this seed before, 49 % of the n = 250/300 groups passed). Now a public rule from n̂
    (⊥ unless n̂ − t_n >= m_select) and the lowered target: the passing groups' max is 14 here
    (seed 12); the bound 100 leaves a wide margin (a wild release is > 10⁶ SE). Rule's design
    rate of a wild radius: about 10⁻³ per group, so over the ~60 passing groups the bound
    fails for well under 1 seed in 10 (the seed is fixed: deterministic). The FriendlyCore plan
    from its floor on (``SMALL_SWITCH = 1``): the n = 900 groups run it."""
    monkeypatch.setattr(gm, "SMALL_SWITCH", 1)
    res, z = _near_threshold()
    print("seed 12", np.nanmax(z[res.ok]) if res.ok.any() else None, res.ok.mean())
    assert res.ok[-60:].mean() > 0.9  # n = 900 passes
    # n = 250, 300: no FriendlyCore release (they run the small-group plan since issue 13
    # item 4, which has no radius selection: docs/proofs/aggregate_mean.md §8)
    assert res.extra["small_plan"][:120].all()
    assert np.all(z[res.ok] < 100)
    assert all(r.startswith("group too small") for r in res.reason[~res.ok])


def test_near_threshold_negative_control(monkeypatch):
    """Without the rule (RADIUS_ROWS = 0, target from the bare n̂) the same groups go wild."""
    monkeypatch.setattr(gm, "RADIUS_ROWS", 0)
    monkeypatch.setattr(gm, "TARGET_BETA", 0.5)  # tail ln(1)/ε_n = 0: the old target
    res, z = _near_threshold()
    print("control", np.nanmax(z[res.ok]))
    assert res.ok[:120].any() and np.nanmax(z[res.ok]) >= 100
