"""The small-group plan up to ``SMALL_SWITCH`` times plan 0's floor, and the scale per group of its
second pass (docs/proofs/aggregate_mean.md §8 "Switch", §8.2 b0).

Before (2026-12-06, eleventh stop) groups just above plan 0's floor ran the FriendlyCore plan,
which spends most of a group's ε before its sum: 0/1 groups of 3,000–6,000 rows at the query's ε
share were released as their majority value (20 % ones → 0) or ⊥; and the small plan's second
pass chose one pooled range of deviations in absolute units, so groups whose spreads differ by
orders of magnitude were clipped to the others' range.

Known answers of the levels, the utility (against a per-group brute force), the offsets and the
snap rule; the utility's sensitivity 2 (brute force, control: a wrong utility is flagged); an
audit of the pick on a neighbour pair (claim ε_s = 1, control a quarter of the noise); accuracy
on 0/1 groups of 5,000 rows (control: the old switch) and on five groups at scales 10⁰ … 10⁴
(control: no scale step).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import Contribution, GroupedValues
from privagg.testing import clopper_pearson_lower, clopper_pearson_upper

SEED = 20261206
F = gm.SCALE_OCTAVES
CONF = 0.999  # audit bounds: each holds with probability >= 0.999 (false failure <= 2e-3)


# ---------------------------------------------------------------- known answers
def test_scale_levels_known_answers():
    """``ℓ = ⌈log2(|dev|/unit)⌉`` exactly at and beside the powers of two, both signs; 0 and
    underflow at the bottom, inf and overflow at the top."""
    unit = 3.0
    k = np.arange(-F, F + 1, dtype=np.float64)
    at = np.ldexp(unit, k.astype(int))
    assert np.array_equal(gm.scale_levels(at, unit), k.astype(np.int64))
    assert np.array_equal(gm.scale_levels(-at, unit), k.astype(np.int64))
    above = np.nextafter(at, np.inf)
    assert np.array_equal(gm.scale_levels(above, unit)[:-1], k[:-1].astype(np.int64) + 1)
    assert gm.scale_levels(above, unit)[-1] == F + 1
    edge = np.array([0.0, -0.0, 5e-324, np.ldexp(unit, -F - 1), np.inf, -np.inf, 1e308, 1.0])
    assert gm.scale_levels(edge, unit).tolist() == [-F - 1, -F - 1, -F - 1, -F - 1, F + 1, F + 1,
                                                   F + 1, -1]


def _brute_utility(dev, grp, n_groups, unit):
    out = np.zeros((n_groups, 2 * F + 1), dtype=np.int64)
    for gi in range(n_groups):  # a reference, per group
        a = np.abs(dev[grp == gi]) / unit
        n, z = a.size, int(np.sum(a <= 2.0 ** (-F - 1)))
        c = [int(np.sum(a <= 2.0**k)) for k in range(-F, F + 1)]
        inner = [z] + c[:-1]
        out[gi] = [-max(2 * (n - ck), 2 * (ci - z)) for ck, ci in zip(c, inner, strict=True)]
    return out


def test_scale_utility_matches_a_per_group_brute_force():
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    for trial in range(20):
        n_groups = int(rng.integers(1, 6))
        grp = np.sort(rng.integers(0, n_groups, 300))
        dev = rng.normal(0, 1, 300) * np.exp2(rng.integers(-25, 25, 300))
        dev[rng.random(300) < 0.1] = 0.0
        dev[rng.random(300) < 0.1] = 1.5  # ties
        unit = float(np.exp2(rng.uniform(-3, 3)))
        got = gm.scale_utility(gm.scale_levels(dev, unit), grp, n_groups)
        assert np.array_equal(got, _brute_utility(dev, grp, n_groups, unit)), trial


def _max_move(utility, rng, trials=300):
    """The largest |u(D') − u(D)| over random D and D' = D plus one row (any group), and whether
    every move was in {0, −1, −2} on the added row's group and 0 elsewhere."""
    worst, monotone = 0, True
    for _ in range(trials):
        n_groups = 3
        m = int(rng.integers(0, 40))
        grp = np.sort(rng.integers(0, n_groups, m))
        dev = rng.normal(0, 1, m) * np.exp2(rng.integers(-4, 4, m))
        dev[rng.random(m) < 0.2] = 0.0
        g_new = int(rng.integers(0, n_groups))
        z = float(rng.choice([0.0, 1.0, -3.0, rng.normal() * 2.0 ** rng.integers(-30, 30)]))
        u = utility(gm.scale_levels(dev, 1.0), grp, n_groups)
        order = np.argsort(np.append(grp, g_new), kind="stable")
        u2 = utility(gm.scale_levels(np.append(dev, z)[order], 1.0), np.append(grp, g_new)[order],
                     n_groups)
        d = u2 - u
        worst = max(worst, int(np.abs(d).max()))
        others = np.delete(d, g_new, axis=0)
        monotone &= bool(np.isin(d[g_new], [0, -1, -2]).all() and not others.any())
    return worst, monotone


def test_scale_utility_sensitivity_is_2_monotone_and_attained():
    print(f"seed {SEED}")
    worst, monotone = _max_move(gm.scale_utility, np.random.default_rng(SEED))
    assert worst == 2 and monotone


def test_scale_utility_sensitivity_checker_flags_a_wrong_utility():
    """Control: the utility minus the group's row count (a term a row moves by 1) moves by 3."""
    def wrong(levels, grp, n_groups):
        return gm.scale_utility(levels, grp, n_groups) - np.bincount(grp, minlength=n_groups)[:, None]
    worst, _ = _max_move(wrong, np.random.default_rng(SEED))
    assert worst > 2


def test_offsets_and_snap_known_answers():
    e = Fraction(1, 8)
    off = gm.scale_offsets(e)
    assert off.size == 2 * F + 1 and off[F] == 0.0
    assert off[F + 3] == off[F - 3] == -gm.SCALE_PENALTY * 32.0 * 3
    assert gm.SCALE_DEAD_ZONE == 2
    two = np.array([True, True, True, True, False, True])
    k = np.array([0, 1, -2, 5, 9, -3])
    # lower median of (0, 1, −2, 5, −3) is 0: within 2 → 0; 5 and −3 keep theirs; not in two → 0
    assert gm.snap_scales(k, two).tolist() == [0, 0, 0, 5, 0, -3]
    assert gm.snap_scales(k, np.zeros(6, bool)).tolist() == [0] * 6
    assert gm.snap_scales(np.array([4, 7]), np.array([True, True])).tolist() == [4, 7]


def test_scale_groups_rule():
    two = np.array([True, True, True, False])
    got = gm.scale_groups(two, np.array([399.0, 400.0, 1e6, 1e6]), Fraction(1, 10))
    assert got.tolist() == [False, True, True, False] and gm.SCALE_ROWS == 40


# ---------------------------------------------------------------- audit of the pick
class _Quarter(gm._Draws):
    """The control: a quarter of the pick's noise (DLap(1/ε_s) instead of DLap(4/ε_s))."""

    def dlap(self, name, scale, shape):
        if name == "two_scale":
            scale = scale / 4
        return super().dlap(name, scale, shape)


def _picks(extra_row: bool, copies: int, seed: int, draws_cls=gm._Draws):
    # 50 rows at level 0 and 50 at level 2 (unit 1): u = −100 at k = 0, 1, 2 (a three-way tie);
    # D' adds a row at level 0: u_0 stays −100, u_1 and u_2 fall to −102 (a move of 2)
    rows = np.concatenate([np.ones(50), np.full(50, 3.0)] + ([np.ones(1)] if extra_row else []))
    dev = np.tile(rows, copies)
    grp = np.repeat(np.arange(copies), rows.size).astype(np.int64)
    return gm.scale_picks(dev, grp, np.ones(copies, bool), 1.0, Fraction(1),
                          draws_cls(np.random.default_rng(seed)))


def _cp(k, n, low):
    """Clopper–Pearson bounds at CONF (each side (1 − CONF)/2)."""
    q = (1 - CONF) / 2
    return clopper_pearson_lower(k, n, q) if low else clopper_pearson_upper(k, n, q)


def _eps_lower(draws_cls, n=30_000):
    """The larger lower confidence bound of the two events ``k = 0`` (likelier on D') and
    ``k != 0`` (likelier on D)."""
    k_d = _picks(False, n, 41, draws_cls)
    k_dp = _picks(True, n, 42, draws_cls)
    a, b = int((k_dp == 0).sum()), int((k_d == 0).sum())
    up = math.log(_cp(a, n, True) / _cp(b, n, False))
    down = math.log(_cp(n - b, n, True) / _cp(n - a, n, False))
    return max(up, down)


def test_scale_pick_audit_within_its_epsilon():
    eps_low = _eps_lower(gm._Draws)
    print(f"seeds 41/42, {30_000} groups each, eps_lower {eps_low:.3f} (claim ε_s = 1)")
    assert eps_low <= 1.0
    assert eps_low > 0.1  # the harness sees the loss of this pair


def test_scale_pick_audit_control_is_flagged():
    eps_low = _eps_lower(_Quarter)
    print(f"control (a quarter of the noise) eps_lower {eps_low:.3f}")
    assert eps_low > 1.0


# ---------------------------------------------------------------- utility
EPS = Fraction(1, 4)  # the unbounded mean's share of a four-metric query
DLT = Fraction(1, 10**6)


def _release(x, g, seed):
    gv = GroupedValues(g, x, int(g.max()) + 1)
    res = gm.friendly_means(gv, epsilon=EPS, delta=DLT, contribution=Contribution(),
                            rng=np.random.default_rng(seed + 100))
    truth = np.bincount(g, weights=x) / np.bincount(g)
    return res, truth


def _binary_worst(seeds):
    """Per seed the largest |error| over five 0/1 groups of 5,000 rows (20, 35, 50, 65, 80 % ones;
    ⊥ = inf) at ε = 1/4."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng([SEED, seed])
        g = np.repeat(np.arange(5), 5000).astype(np.int64)
        x = (rng.random(25_000) < np.repeat([0.2, 0.35, 0.5, 0.65, 0.8], 5000)).astype(float)
        res, truth = _release(x, g, seed)
        out.append(float(np.where(res.ok, np.abs(res.value - truth), np.inf).max()))
    return np.array(out)


def test_binary_groups_above_the_old_switch_release_their_proportion():
    """Seeds [20261206, 0..9] (deterministic): every group within 0.03 in every seed (measured
    worst 0.014 over 20 seeds of another family); the count noise alone moves a mean by about
    0.002 here."""
    worst = _binary_worst(range(10))
    print(f"seeds [{SEED}, 0..9] worst per seed {np.round(worst, 4)}")
    assert (worst < 0.03).all()


def test_binary_groups_old_switch_control(monkeypatch):
    """``SMALL_SWITCH = 1`` (the FriendlyCore plan for these groups, as before): the 20 % and
    80 % groups come out as their majority value (error ≈ 0.2) or a group is ⊥, in most seeds."""
    monkeypatch.setattr(gm, "SMALL_SWITCH", 1)
    worst = _binary_worst(range(10))
    print(f"control worst per seed {np.round(worst, 4)}")
    assert (worst > 0.1).sum() >= 8


def _scales_errors(seeds):
    """Relative errors (seeds × groups) on five groups of 3,000 rows, lognormal(0, 1) times
    10^g (g = 0 … 4) at ε = 1/4."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng([SEED, 1, seed])
        g = np.repeat(np.arange(5), 3000).astype(np.int64)
        x = rng.lognormal(0.0, 1.0, 15_000) * 10.0 ** g
        res, truth = _release(x, g, seed)
        out.append(np.where(res.ok, np.abs(res.value - truth), np.inf) / truth)
    return np.array(out)


def test_groups_on_different_scales_keep_their_own_range():
    """Seeds [20261206, 1, 0..19] (deterministic): the 10⁴ group's median relative error over the
    seeds is below 0.2 (measured 0.054 on another seed family; the control 0.62: the pooled range
    clips it) and the median over all groups and seeds below 0.15 (0.075; control 0.36). The
    10⁰ group stays noisy (median 1.0 there: its first pass runs on the pooled range, §8.2)."""
    err = _scales_errors(range(20))
    med = np.median(err, axis=0)
    print(f"seeds [{SEED}, 1, 0..19] per-group medians {np.round(med, 3)}, all {np.median(err):.3f}")
    assert med[4] < 0.2 and np.median(err) < 0.15


def test_groups_on_different_scales_control(monkeypatch):
    """No scale step (``SCALE_ROWS`` out of reach: every group on the pooled unit, as before):
    the 10⁴ group's median relative error is above 0.4."""
    monkeypatch.setattr(gm, "SCALE_ROWS", math.inf)
    err = _scales_errors(range(20))
    med = np.median(err, axis=0)
    print(f"control per-group medians {np.round(med, 3)}, all {np.median(err):.3f}")
    assert med[4] > 0.4
