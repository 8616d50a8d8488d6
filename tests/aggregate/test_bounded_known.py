"""Known answers of grouped_bounded: every exponent, sensitivity, scale, interval width and the
reported ε, computed here independently with exact rationals (docs/proofs/aggregate_bounded.md),
and the releases with the noise removed (``_laplace_flat`` patched to zeros)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import privagg.noise.grid as grid_mod
from privagg.errors import ParameterError
from privagg.mechanisms import grouped_bounded as gb
from privagg.mechanisms.grouped import Contribution, GroupedValues

CONTRIBUTIONS = [
    Contribution(1, 1, False),
    Contribution(1, 1, True),
    Contribution(2, 3, False),
    Contribution(2, 3, True),
    Contribution(5, 1, False),
    Contribution(1, 7, True),
]
BOUNDS = [(-1.0, 3.0), (0.0, 10.0), (-1e6, -2.5), (0.1, 0.2), (-3.0, 3.0), (-2.0**-30, 2.0**40)]
EPSILONS = [Fraction(1), Fraction(1, 3), Fraction(1, 10), Fraction(7, 2)]


def _least_e(b: Fraction) -> int:
    """The least E with b < 2^E (by search, independent of frexp)."""
    e = 0
    while Fraction(2) ** e <= b:
        e += 1
    while Fraction(2) ** (e - 1) > b:
        e -= 1
    return e


def _floor_log2(q: Fraction) -> int:
    e = 0
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    return e


def _dlap_quantile(t: Fraction, beta: Fraction) -> int:
    """Least k >= 0 with P[|Z| > k] = 2 q^(k+1)/(1 + q) <= beta, q = e^(-1/t) (mpmath, 60
    digits): the closed-form solution, then checked at k and k − 1."""
    with mpmath.workdps(60):
        q = mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)
        b = mpmath.mpf(beta.numerator) / beta.denominator

        def tail_ok(k: int) -> bool:
            return k >= 0 and 2 * q ** (k + 1) / (1 + q) <= b

        k = max(int(mpmath.ceil(mpmath.log(b * (1 + q) / 2) / mpmath.log(q))) - 1, 0)
        while not tail_ok(k):
            k += 1
        while tail_ok(k - 1):
            k -= 1
        return k


def _float_down(x: Fraction) -> Fraction:
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return Fraction(f)


def _scale(sens: int, eps: Fraction) -> Fraction:
    from privagg.noise.rational import to_fraction

    e = to_fraction(eps, where="t", name="e", direction="down")
    return to_fraction(Fraction(sens) / e, where="t", name="t")


def _expected_sum_plan(lo, hi, eps_target, c, centered=False):
    e_big = _least_e(max(abs(Fraction(lo)), abs(Fraction(hi))))
    h = Fraction(2) ** (e_big - 38)
    k_lo, k_hi = round(Fraction(lo) / h), round(Fraction(hi) / h)  # Python rounds half to even
    f = 2 if c.replace else 1
    if centered:
        row, e_t = k_hi - k_lo, e_big - 39
    else:
        row, e_t = max(abs(k_lo), abs(k_hi)), e_big - 38
    ht = Fraction(2) ** e_t
    term_sens = f * c.max_groups * c.max_rows * row
    e = _floor_log2(min(term_sens * ht / eps_target, c.max_rows * row * ht)) - 10
    e = min(max(e, -1000), 900)
    s = e - e_t
    sens = term_sens // 2**s + f * c.max_groups if s > 0 else term_sens * 2 ** (-s)
    return dict(term_exponent=e_t, term_low=k_lo, term_high=k_hi, row_bound=row,
                changed_groups=f * c.max_groups, term_sensitivity=term_sens, exponent=e,
                sensitivity=sens)


@pytest.mark.parametrize("c", CONTRIBUTIONS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_count_plan_known_answers(c, eps):
    """Δ = ℓ0·ℓ∞ (×2 replace), t = Δ/ε (ε rounded down to a float), k = exact 95 % quantile,
    reported ε = Δ/t <= ε."""
    p = gb.count_plan(epsilon=eps, contribution=c)
    f = 2 if c.replace else 1
    assert p.sensitivity == f * c.max_groups * c.max_rows
    target = _float_down(eps)
    assert p.target == target
    assert p.scale == _scale(p.sensitivity, target)
    assert p.scale >= p.sensitivity / eps
    assert p.epsilon == p.sensitivity / p.scale <= eps
    assert p.half_width == _dlap_quantile(p.scale, Fraction(1, 20))


def test_literal_known_answers():
    """Hand-computed: [−1, 3], ε = 1, ℓ0 = 2, ℓ∞ = 3, add/remove: E = 2, h = 2^−36,
    M = 3·2^36, Δ_h = 18·2^36; release e = floor(log2 min(18, 9)) − 10 = −7, s = 29,
    Δ = 18·2^7 + 2 = 2306 = t; replace doubles Δ_h and the changed groups: 2·2304 + 4."""
    p = gb.sum_plan(lower=-1, upper=3, epsilon=Fraction(1), contribution=Contribution(2, 3))
    assert (p.term_exponent, p.row_bound, p.exponent, p.sensitivity, p.scale) == (
        -36, 3 * 2**36, -7, 2306, Fraction(2306))
    r = gb.sum_plan(lower=-1, upper=3, epsilon=Fraction(1), contribution=Contribution(2, 3, True))
    # replace: min(36, 9) = 9 → e = −7 again; Δ = 36·2^7 + 4
    assert (r.exponent, r.sensitivity) == (-7, 36 * 128 + 4)
    m = gb.count_plan(epsilon=Fraction(1), contribution=Contribution(2, 3, True))
    assert (m.sensitivity, m.scale) == (12, Fraction(12))


@pytest.mark.parametrize("c", CONTRIBUTIONS)
@pytest.mark.parametrize("bounds", BOUNDS)
@pytest.mark.parametrize("eps", EPSILONS[:3])
def test_sum_plan_known_answers(c, bounds, eps):
    lo, hi = bounds
    p = gb.sum_plan(lower=lo, upper=hi, epsilon=eps, contribution=c)
    want = _expected_sum_plan(lo, hi, _float_down(eps), c)
    assert {k: getattr(p, k) for k in want} == want
    assert p.scale == _scale(p.sensitivity, _float_down(eps))
    assert p.epsilon == p.sensitivity / p.scale <= eps
    assert p.half_width == _dlap_quantile(p.scale, Fraction(1, 20))
    # the real sensitivity (f·ℓ0·ℓ∞·max(|lo|, |hi|)) is covered, rounding included
    real = (2 if c.replace else 1) * c.max_groups * c.max_rows * max(abs(Fraction(lo)), abs(Fraction(hi)))
    assert p.sensitivity * Fraction(2) ** p.exponent >= real
    # and not by much (the rounding costs at most ~2^-10 relative)
    assert p.sensitivity * Fraction(2) ** p.exponent <= real * (1 + Fraction(1, 2**9))


@pytest.mark.parametrize("c", CONTRIBUTIONS)
@pytest.mark.parametrize("bounds", BOUNDS)
def test_mean_plan_known_answers(c, bounds):
    lo, hi = bounds
    eps = Fraction(1)
    p = gb.mean_plan(lower=lo, upper=hi, epsilon=eps, contribution=c)
    half = _float_down(eps / 2)
    want = _expected_sum_plan(lo, hi, half, c, centered=True)
    assert {k: getattr(p.centered, k) for k in want} == want
    f = 2 if c.replace else 1
    assert p.count.sensitivity == f * c.max_groups * c.max_rows
    assert p.count.scale == _scale(p.count.sensitivity, half)
    assert p.centered.scale == _scale(p.centered.sensitivity, half)
    assert p.epsilon == p.count.epsilon + p.centered.epsilon <= eps
    assert p.count.half_width == _dlap_quantile(p.count.scale, Fraction(1, 40))
    assert p.centered.half_width == _dlap_quantile(p.centered.scale, Fraction(1, 40))
    h = Fraction(2) ** (p.centered.term_exponent + 1)
    assert Fraction(p.mid) == (want["term_low"] + want["term_high"]) * h / 2
    assert abs(Fraction(p.mid) - (Fraction(lo) + Fraction(hi)) / 2) <= h / 2
    # the per-row centered bound W·h/2 is (hi − lo)/2 up to the rounding of the two bounds
    assert abs(want["row_bound"] * h / 2 - (Fraction(hi) - Fraction(lo)) / 2) <= h / 2


# ----------------------------------------------------------------- releases with noise removed
@pytest.fixture
def no_noise(monkeypatch):
    calls = []

    def zeros(scale, n, gen):
        calls.append((scale, n))
        return np.zeros(n, dtype=np.int64)

    monkeypatch.setattr(grid_mod, "_laplace_flat", zeros)
    return calls


def _gv(groups, values, g):
    order = np.argsort(groups, kind="stable")
    return GroupedValues(np.asarray(groups, np.int64)[order], np.asarray(values, np.float64)[order], g)


def _ref_terms(values, lo, hi):
    h = Fraction(2) ** (_least_e(max(abs(Fraction(lo)), abs(Fraction(hi)))) - 38)
    return [round(Fraction(min(max(v, lo), hi)) / h) for v in values], h


def test_counts_without_noise(no_noise):
    c = Contribution(2, 3)
    counts = np.array([0, 5, 17, 2**40], dtype=np.int64)
    r = gb.noisy_counts(counts, epsilon=Fraction(1, 2), contribution=c, rng=np.random.default_rng(1))
    assert r.value.tolist() == [0.0, 5.0, 17.0, float(2**40)]
    assert no_noise == [(Fraction(12), 4)]
    k = _dlap_quantile(Fraction(12), Fraction(1, 20))
    assert (r.high - r.value).tolist() == [k] * 4 and (r.value - r.low).tolist() == [k] * 4
    assert r.ok.all() and r.epsilon == 0.5 and r.delta == 0.0


def test_sums_without_noise(no_noise):
    """value = round(S/2^s)·g (half up) with S = Σ round(clamp(x)/h) (half even), per group,
    empty groups 0, and the interval (k + ½)·g either side."""
    lo, hi = -1.0, 3.0
    groups = [0, 0, 0, 2, 2, 3]
    values = [1e300, -7.0, 0.3, 2.9999999, 1.0, -0.999]
    c = Contribution(1, 1)
    p = gb.sum_plan(lower=lo, upper=hi, epsilon=Fraction(1), contribution=c)
    r = gb.clamped_sums(_gv(groups, values, 4), lower=lo, upper=hi, epsilon=Fraction(1),
                        contribution=c, rng=np.random.default_rng(0))
    terms, h = _ref_terms(values, lo, hi)
    s = p.exponent - p.term_exponent
    want = []
    for g in range(4):
        tot = sum(t for t, gg in zip(terms, groups) if gg == g)
        want.append(float(math.floor(Fraction(tot, 2**s) + Fraction(1, 2)) * Fraction(2) ** p.exponent))
    assert r.value.tolist() == want
    assert no_noise == [(p.scale, 4)]
    w = (p.half_width + 0.5) * 2.0**p.exponent
    assert np.array_equal(r.high - r.value, np.full(4, w))
    assert r.epsilon == 1.0


def test_means_without_noise(no_noise):
    """mean = clamp(mid + S̃/n̂), n̂ = n; an empty group is ⊥ with a reason; extra n_hat."""
    lo, hi = 0.0, 10.0
    groups = [0, 0, 0, 1, 3, 3]
    values = [1.0, 2.0, 100.0, -5.0, 4.25, 4.75]
    c = Contribution(1, 1)
    r = gb.bounded_means(_gv(groups, values, 4), lower=lo, upper=hi, epsilon=Fraction(1),
                         contribution=c, rng=np.random.default_rng(0))
    assert r.extra["n_hat"].tolist() == [3.0, 1.0, 0.0, 2.0]
    assert r.ok.tolist() == [True, True, False, True]
    assert r.reason[2] is not None and "below 1" in r.reason[2]
    assert r.reason[0] is None
    assert np.isnan(r.value[2]) and np.isnan(r.low[2]) and np.isnan(r.high[2])
    np.testing.assert_allclose(r.value[[0, 1, 3]], [13 / 3, 0.0, 4.5], rtol=0, atol=1e-6)
    assert np.all(r.low[[0, 1, 3]] <= r.value[[0, 1, 3]])
    assert np.all(r.value[[0, 1, 3]] <= r.high[[0, 1, 3]])
    assert np.all((r.low[[0, 1, 3]] >= lo) & (r.high[[0, 1, 3]] <= hi))
    # n̂ − b < 1 for every group here (b = 95 %/2 count quantile at ε/2 >= 1): interval [lo, hi]
    assert r.low[0] == lo and r.high[0] == hi
    p = gb.mean_plan(lower=lo, upper=hi, epsilon=Fraction(1), contribution=c)
    assert no_noise == [(p.count.scale, 4), (p.centered.scale, 4)]
    assert Fraction(r.epsilon) >= p.epsilon and r.epsilon <= 1.0


def test_mean_interval_large_group(no_noise):
    """With n large the interval is the corner formula: (mid + (S ± a)/(n ∓ b)) — checked in
    rationals."""
    lo, hi = 0.0, 10.0
    n = 1000
    values = np.full(n, 7.0)
    c = Contribution(1, 1)
    p = gb.mean_plan(lower=lo, upper=hi, epsilon=Fraction(1), contribution=c)
    r = gb.bounded_means(GroupedValues(np.zeros(n, np.int64), values, 1), lower=lo, upper=hi,
                         epsilon=Fraction(1), contribution=c, rng=np.random.default_rng(0))
    assert r.value[0] == 7.0
    a = (p.centered.half_width + Fraction(1, 2)) * Fraction(2) ** p.centered.exponent
    b = p.count.half_width
    s = Fraction(2 * n)  # n·(7 − 5)
    low = Fraction(p.mid) + (s - a) / (n + b)
    high = Fraction(p.mid) + (s + a) / (n - b)
    assert abs(Fraction(r.low[0]) - low) < Fraction(1, 10**12)
    assert abs(Fraction(r.high[0]) - high) < Fraction(1, 10**12)
    assert Fraction(r.low[0]) <= low and Fraction(r.high[0]) >= high  # rounded outward


def test_reported_epsilon_never_exceeds_given():
    """ε = 1/3 is not a float: every part is calibrated to floats <= it, and the float reported
    is >= the exact guarantee and <= the float nearest below 1/3."""
    eps = Fraction(1, 3)
    gv = GroupedValues(np.zeros(3, np.int64), np.array([1.0, 2.0, 3.0]), 1)
    c = Contribution(2, 3, True)
    for res, plan_eps in [
        (gb.noisy_counts(np.array([3]), epsilon=eps, contribution=c, rng=np.random.default_rng(0)),
         gb.count_plan(epsilon=eps, contribution=c).epsilon),
        (gb.clamped_sums(gv, lower=0, upper=4, epsilon=eps, contribution=c, rng=np.random.default_rng(0)),
         gb.sum_plan(lower=0, upper=4, epsilon=eps, contribution=c).epsilon),
        (gb.bounded_means(gv, lower=0, upper=4, epsilon=eps, contribution=c, rng=np.random.default_rng(0)),
         gb.mean_plan(lower=0, upper=4, epsilon=eps, contribution=c).epsilon),
    ]:
        assert plan_eps <= Fraction(res.epsilon) <= eps
        assert res.delta == 0.0


def test_empty_group_set():
    gv = GroupedValues(np.zeros(0, np.int64), np.zeros(0), 0)
    rng = np.random.default_rng(0)
    c = Contribution()
    assert gb.noisy_counts(np.zeros(0, np.int64), epsilon=1, contribution=c, rng=rng).value.size == 0
    assert gb.clamped_sums(gv, lower=0, upper=1, epsilon=1, contribution=c, rng=rng).value.size == 0
    assert gb.bounded_means(gv, lower=0, upper=1, epsilon=1, contribution=c, rng=rng).value.size == 0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(lower=1.0, upper=1.0), "lower"),
        (dict(lower=2.0, upper=1.0), "lower"),
        (dict(lower=float("nan"), upper=1.0), "lower"),
        (dict(lower=0.0, upper=float("inf")), "upper"),
        (dict(lower=0.0, upper=2.0**1001), "upper"),
        (dict(lower=0.0, upper=True), "upper"),
        (dict(epsilon=0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("inf")), "epsilon"),
        (dict(epsilon="1"), "epsilon"),
        (dict(contribution=(1, 1)), "contribution"),
        (dict(contribution=Contribution(0, 1)), "contribution.max_groups"),
        (dict(contribution=Contribution(1, 0)), "contribution.max_rows"),
    ],
)
@pytest.mark.parametrize("fn", ["sum_plan", "mean_plan"])
def test_parameter_errors_name_the_parameter(kwargs, name, fn):
    args = dict(lower=0.0, upper=1.0, epsilon=Fraction(1), contribution=Contribution())
    args.update(kwargs)
    with pytest.raises(ParameterError, match=f"'{name}'"):
        getattr(gb, fn)(**args)


def test_count_errors():
    with pytest.raises(ParameterError, match="'counts'"):
        gb.noisy_counts(np.array([1.5]), epsilon=1, contribution=Contribution(),
                        rng=np.random.default_rng(0))
    with pytest.raises(ParameterError, match="'epsilon'"):
        gb.count_plan(epsilon=0, contribution=Contribution())
