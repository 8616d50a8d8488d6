"""A sum and a bounded mean of the same column and bounds share one noisy count and one noisy
centered sum (docs/proofs/aggregate_bounded.md §7); distinct names for mean(col) / mean(col, b).

Known answers: the merged step of the split, the public sharing rule's scales (literal numbers,
recomputed by hand in the proof's formulas), the draws (the shared release IS bounded_means at
ε_sum + ε_mean, and sum = S̃ + mid·n̂), and the noise-free sum against exact rationals.

Audit (privagg.testing.audit_samples, confidence 0.999: a correct mechanism fails with probability
<= 1e-3 per audit; fixed seed, printed): the released sum and mean together, on worst-case
neighbours, must not show a loss above ε = 1 and must show one above 0.6 (power). Negative control:
the sensitivities understated 2× (true loss 2ε) must be detected. Blocks of groups in one call, as
in test_bounded_stats.py (each group's noise is independent, its scale public).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import privagg
from privagg import ParameterError
import privagg.noise.grid as grid_mod
from privagg.mechanisms import grouped_bounded as gb
from privagg.mechanisms.grouped import Contribution, GroupedValues
from privagg.testing.audit import audit_samples

SEED = 424242
CONFIDENCE = 0.999
BLOCKS = 20_000


def _frame(seed: int = 0, n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"g": rng.integers(0, 3, n), "x": rng.uniform(0.0, 10.0, n)})


# --------------------------------------------------------------------------------- names
def test_mean_with_and_without_bounds_share_the_spec_name_and_are_refused_together():
    """The spec names both ``mean_<col>``; asking both in one query is refused before any charge
    (control: each alone releases)."""
    assert privagg.mean("x").name == "mean_x"
    assert privagg.mean("x", (0, 10)).name == "mean_x"
    with pytest.raises(ParameterError, match="'mean_x' twice"):
        privagg.aggregate(_frame(), by="g", metrics=[privagg.mean("x"), privagg.mean("x", (0, 10))],
                          epsilon=4, delta=1e-6, domain=[0, 1, 2], rng=1)
    r = privagg.aggregate(_frame(), by="g", metrics=[privagg.mean("x", (0, 10))],
                          epsilon=4, delta=1e-6, domain=[0, 1, 2], rng=1)
    assert r.metrics == ("mean_x",)


# --------------------------------------------------------------------------------- the split
def test_shared_step_replaces_the_two_steps_default_weights():
    mets = [privagg.count(), privagg.sum("x", (0, 10)), privagg.mean("x", (0, 10)), privagg.quantile("x", 0.5, (0, 10))]
    # weights 1, 1, 1 and 3/2 (the quantile's default) of ε = 9/2
    r = privagg.aggregate(_frame(), by="g", metrics=mets, epsilon=Fraction(9, 2), domain=[0, 1, 2], rng=2)
    # the count joins them (§8: tests/aggregate/test_count_shared.py)
    assert r.split_exact == {"count+sum_x+mean_x": (Fraction(3), 0), "q0.5_x": (Fraction(3, 2), 0)}
    assert list(r.split) == ["count+sum_x+mean_x", "q0.5_x"]
    assert r.epsilon == 4.5 and r.delta == 0.0
    assert r.metrics == ("count", "sum_x", "mean_x", "q0.5_x")
    r = privagg.aggregate(_frame(), by="g", metrics=mets[1:], epsilon=Fraction(7, 2), domain=[0, 1, 2], rng=2)
    assert r.split_exact == {"sum_x+mean_x": (Fraction(2), 0), "q0.5_x": (Fraction(3, 2), 0)}


def test_shared_step_with_selection_and_weights():
    mets = [privagg.mean("x", (0, 10)), privagg.count(), privagg.sum("x", (0, 10))]
    r = privagg.aggregate(_frame(), by="g", metrics=mets, epsilon=5, delta=1e-6, rng=3,
                          weights={"selection": 1, "sum_x": 2, "mean_x": 1, "count": 1})
    # shares 1, 1, 1, 2 of ε = 5; the pair and the count (§8; at the first member's place) get
    # 1 + 2 + 1; δ all to the selection
    assert r.split_exact == {"selection": (Fraction(1), Fraction(1, 10**6)), "count+sum_x+mean_x": (Fraction(4), 0)}
    assert list(r.split_exact) == ["selection", "count+sum_x+mean_x"]
    assert r.epsilon == 5.0 and r.delta == 1e-6


def test_the_shared_step_gets_the_two_shares_once(monkeypatch):
    """aggregate passes ε_sum + ε_mean (not twice that, not one share) to the shared release, and
    the two metrics come from that one call."""
    seen = []
    orig = gb.shared_sums_means

    def spy(gv, **kw):
        seen.append(kw["epsilon"])
        return orig(gv, **kw)

    monkeypatch.setattr(gb, "shared_sums_means", spy)
    privagg.aggregate(_frame(), by="g", metrics=[privagg.sum("x", (0, 10)), privagg.mean("x", (0, 10)),
                                                 privagg.quantile("x", 0.5, (0, 10))], epsilon=Fraction(7, 2),
                      domain=[0, 1, 2], rng=4)
    assert seen == [Fraction(2)]


def test_direct_sum_when_the_rule_says_so():
    """mid = 0 and a 10:1 weight on the sum: (hw/5.5)² > (M/10)²: not shared, two steps as before."""
    mets = [privagg.sum("x", (-5, 5)), privagg.mean("x", (-5, 5))]
    r = privagg.aggregate(_frame(), by="g", metrics=mets, epsilon=11, domain=[0, 1, 2], rng=5,
                          weights={"sum_x": 10, "mean_x": 1})
    assert r.split_exact == {"sum_x": (Fraction(10), 0), "mean_x": (Fraction(1), 0)}
    plan = gb.share_plan(lower=-5, upper=5, epsilon_sum=10, epsilon_mean=1, contribution=Contribution())
    assert not plan.shared and plan.shared_variance > plan.direct_variance


def test_different_bounds_or_columns_are_not_shared():
    df = _frame().assign(y=lambda d: d.x * 2)
    mets = [privagg.sum("x", (0, 10)), privagg.mean("x", (0, 20)), privagg.sum("y", (0, 20)), privagg.mean("y", (0, 20))]
    r = privagg.aggregate(df, by="g", metrics=mets, epsilon=4, domain=[0, 1, 2], rng=6)
    assert list(r.split) == ["sum_x", "mean_x", "sum_y+mean_y"]


# ------------------------------------------------------------------------ the rule's numbers
def test_share_plan_known_answer_record_level():
    """[0, 10], ε_sum = ε_mean = 1, record level. Shared: mean_plan at 2 (halves 1): e_t = −34,
    centered grid 2^−35, W = 10·2^34, e = floor(log2 5) − 10 = −8, s = 27, Δ = 10·2^7 + 1 = 1281 = t_s;
    count t_n = 1; mid = 5. Direct: sum_plan at 1: M = 10·2^34, e = floor(log2 10) − 10 = −7, s = 27,
    Δ = 1281 = t_d."""
    p = gb.share_plan(lower=0, upper=10, epsilon_sum=1, epsilon_mean=1, contribution=Contribution())
    assert p.shared
    assert p.shared_variance == Fraction(1281, 256) ** 2 + 25
    assert p.direct_variance == Fraction(1281, 128) ** 2


def test_share_plan_known_answer_unit_level_replace():
    """[0, 10], ℓ0 = 2, ℓ∞ = 3, replace (f = 2), ε_sum = ε_mean = 1. Shared: Δ_n = 12 = t_n;
    Δ_h = 12·W, min(60, 15) = 15: e = −7, s = 28, Δ = 12·10·2^6 + 4 = 7684 = t_s. Direct at 1:
    Δ_h = 12·M on 2^−34, min(120, 30): e = floor(log2 30) − 10 = −6, s = 28, Δ = 12·10·2^6 + 4 = 7684."""
    c = Contribution(2, 3, True)
    mp = gb.mean_plan(lower=0, upper=10, epsilon=2, contribution=c)
    assert (mp.count.sensitivity, mp.count.scale) == (12, 12)
    assert (mp.centered.term_sensitivity, mp.centered.exponent, mp.centered.sensitivity) == (12 * 10 * 2**34, -7, 7684)
    p = gb.share_plan(lower=0, upper=10, epsilon_sum=1, epsilon_mean=1, contribution=c)
    assert p.shared_variance == Fraction(7684, 128) ** 2 + 25 * 144
    assert p.direct_variance == Fraction(7684, 64) ** 2
    assert p.shared


# ------------------------------------------------------------------------------ the draws
def _gv(rows):
    g = np.array([r[0] for r in rows], np.int64)
    v = np.array([r[1] for r in rows], np.float64)
    o = np.argsort(g, kind="stable")
    return GroupedValues(g[o], v[o], int(g.max()) + 1)


def test_shared_release_is_bounded_means_plus_the_sum():
    rng = np.random.default_rng(7)
    gv = _gv([(int(a), float(b)) for a, b in zip(rng.integers(0, 5, 500), rng.normal(3, 4, 500))])
    c = Contribution(2, 3)
    s, m = gb.shared_sums_means(gv, lower=-1, upper=6, epsilon=Fraction(2), contribution=c,
                                rng=np.random.default_rng(11))
    ref, n_hat, s_hat, plan = gb._bounded_means(gv, "t", -1, 6, Fraction(2), c, np.random.default_rng(11))
    for a in ("value", "low", "high", "ok"):
        np.testing.assert_array_equal(getattr(m, a), getattr(ref, a))
    np.testing.assert_array_equal(m.extra["n_hat"], n_hat)
    np.testing.assert_array_equal(s.value, s_hat + plan.mid * n_hat)
    assert s.epsilon == m.epsilon == ref.epsilon <= 2
    assert np.all(s.low < s.value) and np.all(s.value < s.high)


def test_noise_free_shared_sum_is_the_exact_clamped_sum(monkeypatch):
    lo, hi = -1.0, 3.0
    vals = [5e-324, -0.0, 2.9999999999, 3.0, 1e300, -1e300, 0.1, 0.2, 0.3, 1 / 3, -0.75, 2.5] * 7
    rows = [(i % 3, v) for i, v in enumerate(vals)]
    gv = _gv(rows)
    monkeypatch.setattr(grid_mod, "_laplace_flat", lambda scale, n, gen: np.zeros(n, np.int64))
    s, m = gb.shared_sums_means(gv, lower=lo, upper=hi, epsilon=1, contribution=Contribution(),
                                rng=np.random.default_rng(0))
    plan = gb.mean_plan(lower=lo, upper=hi, epsilon=1, contribution=Contribution())
    h = Fraction(2) ** gb._term_exponent(lo, hi)
    g = Fraction(2) ** plan.centered.exponent
    for grp in range(3):
        xs = [v for k, v in rows if k == grp]
        exact = sum((Fraction(round(Fraction(min(max(v, lo), hi)) / h)) * h for v in xs), Fraction(0))
        assert abs(Fraction(s.value[grp]) - exact) <= g / 2 + Fraction(abs(s.value[grp])) * Fraction(2) ** -52
        assert m.extra["n_hat"][grp] == len(xs)


def test_aggregate_sum_and_mean_come_from_the_same_draws():
    """Old code: independent draws, so this identity failed."""
    r = privagg.aggregate(_frame(8), by="g", metrics=[privagg.sum("x", (0, 10)), privagg.mean("x", (0, 10))],
                          epsilon=1, domain=[0, 1, 2], rng=9)
    n_hat = r.extra["mean_x"]["n_hat"]
    mid = 5.0
    np.testing.assert_allclose((r.groups["mean_x"] - mid) * n_hat, r.groups["sum_x"] - mid * n_hat,
                               rtol=1e-12, atol=1e-9)


# ----------------------------------------------------------------------------------- audits
@pytest.fixture
def understated(monkeypatch):
    """Break the mechanism: both sensitivities understated 2× (so the true loss is 2ε)."""
    orig_sum, orig_count = gb._sum_plan, gb._count_plan

    def half_sum(where, lo, hi, e_t, row_bound, eps, c, beta):
        return orig_sum(where, lo, hi, e_t, row_bound // 2, eps, c, beta)

    def half_count(where, eps, c, beta):
        p = orig_count(where, eps, c, beta)
        t, e = gb._laplace_scale(where, max(p.sensitivity // 2, 1), eps)
        return gb.CountPlan(max(p.sensitivity // 2, 1), t, e, p.target, p.half_width, p.beta)

    def apply():
        monkeypatch.setattr(gb, "_sum_plan", half_sum)
        monkeypatch.setattr(gb, "_count_plan", half_count)

    return apply


def _blocks(base_rows, extra_rows, width):
    def build(rows):
        g = np.array([r[0] for r in rows], np.int64)
        v = np.array([r[1] for r in rows], np.float64)
        gg = np.tile(g, BLOCKS) + np.repeat(np.arange(BLOCKS, dtype=np.int64) * width, g.size)
        vv = np.tile(v, BLOCKS)
        o = np.argsort(gg, kind="stable")
        return GroupedValues(gg[o], vv[o], BLOCKS * width)

    return build(base_rows), build(base_rows + extra_rows)


CASES = {
    "record_at_hi": (Contribution(1, 1), (0.0, 10.0), [(0, 5.0)] * 40, [(0, 1e300)], 1),
    "unit_l0_2_linf_3": (Contribution(2, 3), (-1.0, 3.0), [(0, 1.0)] * 20 + [(1, 0.5)] * 20,
                         [(0, 3.0)] * 3 + [(1, 3.0)] * 3, 2),
}


def _audit(case, monkeypatch):
    c, (lo, hi), base, extra, width = CASES[case]
    d0, d1 = _blocks(base, extra, width)
    plan = gb.mean_plan(lower=lo, upper=hi, epsilon=1, contribution=c)
    g = 2.0 ** plan.centered.exponent

    def run(gv, seed):  # the released pair (sum, mean) and n̂; S̃ recovered from the sum
        s, m = gb.shared_sums_means(gv, lower=lo, upper=hi, epsilon=Fraction(1), contribution=c,
                                    rng=np.random.default_rng(seed))
        n_hat = m.extra["n_hat"]
        return n_hat, np.rint((s.value - plan.mid * n_hat) / g)

    with monkeypatch.context() as mp:
        mp.setattr(grid_mod, "_laplace_flat", lambda scale, n, gen: np.zeros(n, np.int64))
        (na, sa), (nb, sb) = run(d0, 0), run(d1, 0)
    tn, ts = float(plan.count.scale), float(plan.centered.scale)

    def stat(out):
        n, s = out
        ln = ((np.abs(n - na) - np.abs(n - nb)) / tn + (np.abs(s - sa) - np.abs(s - sb)) / ts)
        top = np.abs(na - nb) / tn + np.abs(sa - sb) / ts
        return np.round(8 * ln.reshape(BLOCKS, width).sum(1) / top.reshape(BLOCKS, width).sum(1))

    return audit_samples(stat(run(d0, SEED)), stat(run(d1, SEED + 1)), confidence=CONFIDENCE)


@pytest.mark.parametrize("case", sorted(CASES))
def test_audit_shared_sum_and_mean(case, monkeypatch):
    print(f"seed={SEED}")
    res = _audit(case, monkeypatch)
    assert not res.violates(1.0), f"{case} seed={SEED} {res}"
    assert res.epsilon_lower > 0.6, f"{case}: audit too weak ({res})"


@pytest.mark.parametrize("case", sorted(CASES))
def test_audit_shared_negative_control(case, monkeypatch, understated):
    print(f"seed={SEED}")
    understated()
    res = _audit(case, monkeypatch)
    assert res.violates(1.0), f"{case} seed={SEED}: understated sensitivity not detected ({res})"


def test_mid_is_exact():
    plan = gb.mean_plan(lower=0.1, upper=0.7, epsilon=1, contribution=Contribution())
    assert math.isfinite(plan.mid) and Fraction(plan.mid) == Fraction(plan.centered.term_low + plan.centered.term_high,
                                                                      2 ** (1 - gb._term_exponent(0.1, 0.7)))
