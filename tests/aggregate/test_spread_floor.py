"""The spread floor and the fallback center of the unbounded grouped mean
(docs/proofs/aggregate_mean.md §1.8, §1.9).

Before them a 0/1 column released exactly its majority value (p = 0.2 → 0, p = 0.8 → 1, on 5,000
rows and at any n: the core is one atom and the clipping ladder never reached the other value),
and ⊥ for p between about 0.3 and 0.7 (no majority atom: the core was too small).

Known answers of the cap and the utility; the utility's sensitivity 2 by brute force (with a
wrong utility as the control the checker must flag); the octave levels at their exact edges;
the draws' noise scale; an audit of the floor step on a neighbour pair (claim ε_f = 1, control:
a quarter of the noise, must be flagged); utility on 0/1 groups (control: the floor off, the old
release) and on constant groups (control: the cap off, constant groups lifted).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import Contribution, GroupedValues
from privagg.testing import clopper_pearson_lower, clopper_pearson_upper

SEED = 20261202
CONF = 0.999  # audit bounds: each holds with probability >= 0.999 (false failure <= 2e-3)
F = gm.FLOOR_OCTAVES


def test_floor_cap_known_answers():
    # ⌈2·ln(121/10⁻⁴)/ε⌉: ln(1.21e6) = 14.00609…
    assert gm.FLOOR_BETA == 1e-4 and F == 120
    assert gm.floor_cap(Fraction(1)) == 29
    assert gm.floor_cap(Fraction(1, 10)) == 281
    assert gm.floor_cap(Fraction(16, 250)) == math.ceil(2 * math.log(121e4) / 0.064) == 438


def test_floor_utility_known_answers():
    c = np.array([[6, 6, 9, 10]])
    # cap 0: t2 = min(10 + 6, 20) = 16
    assert gm.floor_utility(c, 10, 0).tolist() == [[-4, -4, 0, -2]]
    # cap 4: t2 = min(16, 2·6) = 12: the rows within U reach the target (ties: the first wins)
    assert gm.floor_utility(c, 10, 4).tolist() == [[0, 0, 0, -6]]
    # per group n_low and cap; a constant group (every row within U) keeps candidate 0 by 2K
    c2 = np.array([[6, 6, 9, 10], [50, 50, 50, 50]])
    assert gm.floor_utility(c2, np.array([10, 50]), np.array([0, 7])).tolist() == [
        [-4, -4, 0, -2], [0, -14, -14, -14]]


def _utility_wrong(counts, n_low, cap):
    """A wrong target (the rows within U subtracted, not added): sensitivity 3."""
    c = np.asarray(counts, dtype=np.int64)
    t2 = np.minimum(n_low - c[:, :1], 2 * (n_low - cap))
    below = np.zeros_like(c)
    below[:, 1:] = c[:, :-1]
    return -np.maximum(np.maximum(t2 - 2 * c, 2 * below - t2), 0)


def _max_change(util, rng, trials=3000, width=6):
    """The largest |Δu_k| over random level tables plus one added row at every level."""
    worst = 0
    for _ in range(trials):
        n = int(rng.integers(0, 40))
        levels = rng.integers(0, width + 1, n)  # width + 1 candidates 0 … width − 1, and beyond
        n_low, cap = int(rng.integers(0, 50)), int(rng.integers(0, 20))
        def counts(lv):
            return np.cumsum(np.bincount(lv, minlength=width + 1))[None, :width]
        base = util(counts(levels), n_low, cap)
        for extra in range(width + 1):
            worst = max(worst, int(np.abs(util(counts(np.append(levels, extra)), n_low, cap)
                                          - base).max()))
    return worst


def test_floor_utility_sensitivity_is_2_and_attained():
    print(f"seed {SEED}")
    assert _max_change(gm.floor_utility, np.random.default_rng(SEED)) == 2


def test_sensitivity_checker_flags_a_wrong_utility():
    assert _max_change(_utility_wrong, np.random.default_rng(SEED)) > 2


def test_octave_levels_at_their_edges():
    one = 1.0
    vals = np.array([0.0, -0.0, one, np.nextafter(one, 2), 2.0, np.nextafter(2.0, 3), -4.0,
                     2.0**F, np.nextafter(2.0**F, np.inf), np.inf, -np.inf, 2.0**-1074])
    want = [0, 0, 0, 1, 1, 2, 2, F, F + 1, F + 1, F + 1, 0]
    grp = np.zeros(vals.size, dtype=np.int64)
    c = gm._octave_counts(vals, np.ones(vals.size), grp, 1)[0]
    got_hist = np.diff(np.concatenate([[0], c]))
    want_hist = np.bincount(np.clip(want, 0, F + 1), minlength=F + 2)[: F + 1]
    assert got_hist.tolist() == want_hist.tolist()
    # relative to U: U = 2⁻⁶⁰ puts 1.0 at level 60, 1.5 at 61
    c = gm._octave_counts(np.array([1.0, 1.5]), np.full(2, 2.0**60), np.zeros(2, np.int64), 1)[0]
    assert c[59] == 0 and c[60] == 1 and c[61] == 2


class _Recording(gm._Draws):
    def __init__(self, gen):
        super().__init__(gen)
        self.scales = {}

    def dlap_by(self, name, scales, which, width=None):
        self.scales[name] = tuple(scales)
        return super().dlap_by(name, scales, which, width)


def test_floor_noise_scale_is_4_over_eps_floor():
    draws = _Recording(np.random.default_rng(SEED))
    gm.spread_floor(np.zeros(4), np.zeros(4, np.int64), np.ones(1), np.array([4]),
                    (Fraction(1, 3), Fraction(1, 7)), np.array([1]), draws)
    assert draws.scales["floor"] == (Fraction(12), Fraction(28))


# ---------------------------------------------------------------- audit of the floor step
class _Quarter(gm._Draws):
    """The control: a quarter of the floor's noise (DLap(1/ε_f) instead of DLap(4/ε_f))."""

    def dlap_by(self, name, scales, which, width=None):
        if name == "floor":
            scales = tuple(s / 4 for s in scales)
        return super().dlap_by(name, scales, which, width)


def _floor_picks(extra_row: bool, copies: int, seed: int, draws_cls=gm._Draws):
    # 50 rows within U (level 0), 50 at level 2 (3·U), U = 1; D' adds a row within U. With
    # ε_f = 1 the cap is 29 and n_low = 83 (public, both sides): t2 = 2·(83 − 29) = 108, so
    # u = (−8, −8, 0, −92, …) on D and (−6, −6, 0, −94, …) on D': candidates 0 and 1 gain 2 each
    rows = np.concatenate([np.zeros(50), np.full(50, 3.0)] + ([np.zeros(1)] if extra_row else []))
    dev = np.tile(rows, copies)
    grp = np.repeat(np.arange(copies), rows.size).astype(np.int64)
    k = gm.spread_floor(dev, grp, np.ones(copies), np.full(copies, 83), (Fraction(1),),
                        np.zeros(copies, np.int64), draws_cls(np.random.default_rng(seed)))
    return k


def _cp(k, n, low):
    """Clopper–Pearson bounds at CONF (each side (1 − CONF)/2)."""
    q = (1 - CONF) / 2
    return clopper_pearson_lower(k, n, q) if low else clopper_pearson_upper(k, n, q)


def _eps_lower(draws_cls, n=30_000):
    k_d = _floor_picks(False, n, 31, draws_cls)
    k_dp = _floor_picks(True, n, 32, draws_cls)
    a, b = int((k_dp <= 1).sum()), int((k_d <= 1).sum())
    return math.log(_cp(a, n, True) / _cp(b, n, False))


def test_floor_step_audit_within_its_epsilon():
    eps_low = _eps_lower(gm._Draws)
    print(f"seeds 31/32, {30_000} groups each, eps_lower {eps_low:.3f} (claim ε_f = 1)")
    assert eps_low <= 1.0
    assert eps_low > 0.2  # the harness sees the loss of this pair


def test_floor_step_audit_control_is_flagged():
    eps_low = _eps_lower(_Quarter)
    print(f"control (a quarter of the noise) eps_lower {eps_low:.3f}")
    assert eps_low > 1.0


# ---------------------------------------------------------------- utility
PS = (0.2, 0.35, 0.5, 0.65, 0.8)
N_G = 5000


def _binary_release(seed=SEED):
    x = np.concatenate([(np.arange(N_G) < round(p * N_G)).astype(np.float64) for p in PS])
    g = np.repeat(np.arange(len(PS)), N_G).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, x, len(PS)), epsilon=Fraction(1),
                            delta=Fraction(1, 10**6), contribution=Contribution(),
                            rng=np.random.default_rng(seed))
    return res, np.array(PS)


def _binary_errors(seed=SEED):
    res, truth = _binary_release(seed)
    return np.where(res.ok, np.abs(res.value - truth), np.inf), res


def test_binary_groups_release_their_proportion():
    # 0.04: the count noise DLap(40) moves the mean by p·57/5000 (sd) <= 0.009; the floor and
    # the clipping range make the clipped sum exact (no bias)
    print(f"seed {SEED}")
    err, res = _binary_errors()
    print("errors", np.round(err, 4), "fallback", res.extra["core_fallback"])
    assert (err < 0.04).all(), err
    # the groups without a majority atom run around 0 (§1.8); p = 0.2 and 0.8 keep their core
    assert res.extra["core_fallback"][2]
    assert not res.extra["core_fallback"][0] and not res.extra["core_fallback"][4]


def test_binary_control_without_floor_releases_the_atom(monkeypatch):
    monkeypatch.setattr(gm, "floor_pick", lambda counts, *a: np.zeros(counts.shape[0], np.int64))
    err, _ = _binary_errors()
    print("control errors", np.round(err, 4))
    assert err[0] > 0.15 and err[4] > 0.15  # p = 0.2 → 0, p = 0.8 → 1


def _constant_lifted(groups=50, rows=4000):
    x = np.full(groups * rows, 7.25)
    g = np.repeat(np.arange(groups), rows).astype(np.int64)
    res = gm.friendly_means(GroupedValues(g, x, groups), epsilon=Fraction(1),
                            delta=Fraction(1, 10**6), contribution=Contribution(),
                            rng=np.random.default_rng(SEED))
    assert res.ok.all()
    width = res.extra["clip_high"] - res.extra["clip_low"]
    return int((width > 1e-6).sum()), res


def test_constant_groups_keep_their_tiny_range():
    lifted, res = _constant_lifted()
    print(f"seed {SEED}: {lifted} of 50 constant groups lifted")
    assert lifted == 0  # each with probability <= β_K = 1e-4: false failure <= 0.5 %
    assert np.abs(res.value - 7.25).max() < 1e-9


def test_constant_groups_control_without_cap_are_lifted(monkeypatch):
    monkeypatch.setattr(gm, "floor_cap", lambda eps: 0)
    lifted, _ = _constant_lifted()
    print(f"control (no cap): {lifted} of 50 lifted")
    assert lifted >= 3


@pytest.mark.parametrize("p", [0.05, 0.95])
def test_rare_value_found_at_larger_n(p):
    # 60,000 rows, 3,000 of the minority value (> K = 182 + the count tail)
    n = 60_000
    x = (np.arange(n) < round(p * n)).astype(np.float64)
    res = gm.friendly_means(GroupedValues(np.zeros(n, np.int64), x, 1), epsilon=Fraction(1),
                            delta=Fraction(1, 10**6), contribution=Contribution(),
                            rng=np.random.default_rng(SEED))
    assert res.ok[0] and abs(res.value[0] - p) < 0.01, res.value


def _octave_counts_frexp(dev, inv_upper, grp, n_groups):
    """The reference: the octave level ⌈log2 u⌉ from ``frexp`` (the code before 2026-12-06)."""
    with np.errstate(over="ignore"):
        u = np.abs(dev) * inv_upper
    m, e = np.frexp(u)
    e -= m == 0.5
    e[np.isinf(u)] = gm.FLOOR_OCTAVES + 1
    np.clip(e, 0, gm.FLOOR_OCTAVES + 1, out=e)
    w = gm.FLOOR_OCTAVES + 2
    hist = np.bincount(grp * w + e, minlength=n_groups * w).reshape(n_groups, w)
    return np.cumsum(hist[:, :-1], axis=1)


def test_octave_counts_from_bits_equal_frexp():
    """The exponent-bits levels of ``_octave_counts`` equal ``frexp``'s on every kind of value:
    exact powers of two and their successors, subnormals, ±0, ±inf, overflow to inf, 10^±300
    (seed 1). Negative control: levels off by one at the exact powers (the ``bits − 1`` step
    dropped) differ."""
    rng = np.random.default_rng(1)
    n, groups = 40_000, 7
    grp = np.sort(rng.integers(0, groups, n))
    q = n // 4
    dev = np.concatenate([
        rng.standard_normal(q) * 10.0 ** rng.integers(-300, 300, q),
        np.ldexp(1.0, rng.integers(-1074, 1024, q)) * rng.choice([-1.0, 1.0], q),
        rng.choice([0.0, -0.0, np.inf, -np.inf, 5e-324, 2.0**1023, 1.0, 0.5, 2.0], q),
        np.nextafter(np.ldexp(1.0, rng.integers(-100, 130, n - 3 * q)), np.inf)])
    rng.shuffle(dev)
    inv = np.ldexp(1.0, rng.integers(-60, 61, groups))[grp]
    want = _octave_counts_frexp(dev, inv.copy(), grp, groups)
    with np.errstate(over="ignore"):
        got = gm._octave_counts(dev, inv.copy(), grp, groups)
    assert np.array_equal(got, want)
    # control: the level of an exact power 2^k computed without the "− 1" (k + 1 instead of k)
    with np.errstate(over="ignore"):
        u = np.abs(dev) * inv
    t = u.view(np.int64) >> 52
    t = np.clip(t - 1022, 0, gm.FLOOR_OCTAVES + 1)
    w = gm.FLOOR_OCTAVES + 2
    bad = np.cumsum(np.bincount(grp * w + t, minlength=groups * w).reshape(groups, w)[:, :-1], axis=1)
    assert not np.array_equal(bad, want)
