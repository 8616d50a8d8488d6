"""selection="optimal": the truncated-geometric partition selection (Desfontaines et al. 2022).

Known answers against the paper's closed form (crossovers n₁, n₂) at several (ε, δ); the exact
DP constraints of every step of the table, in rationals with the true e^ε bounded from above
(negative control: the table without rounding down, ε rounded up, violates them); the keep rate of keys with
n units matches p(n) (binomial, fixed seed, false-failure rate 1e-4); API errors.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import privagg
import privagg.mechanisms.partition_selection as PS
from privagg.errors import ParameterError


def _closed_form(n: int, e: float, d: float) -> float:
    if n == 0:
        return 0.0
    c1 = 1 + math.floor(math.log1p(math.tanh(e / 2) * (1 / d - 1)) / e)
    if n <= c1:
        return math.expm1(n * e) / math.expm1(e) * d
    p1 = _closed_form(c1, e, d)
    c2 = c1 + math.floor(math.log1p(math.expm1(e) / d * (1 - p1)) / e)
    if n > c2:
        return 1.0
    return p1 - (1 - p1 + d / math.expm1(e)) * math.expm1(-(n - c1) * e)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.5, 1e-5), (0.1, 1e-3), (2.0, 1e-10)])
def test_probability_of_keep_known_answers(eps, delta):
    ns = np.arange(400)
    mine = PS.probability_of_keep(ns, eps, delta)
    ref = np.array([_closed_form(int(n), eps, delta) for n in ns])
    assert np.all(mine <= ref * (1 + 1e-12) + 1e-15)  # rounded down, never above the optimum
    assert np.allclose(mine, ref, rtol=1e-8, atol=1e-15)
    assert PS.probability_of_keep(0, eps, delta) == 0.0 and PS.probability_of_keep(10**9, eps, delta) == 1.0
    assert PS.probability_of_keep(1, eps, delta) == pytest.approx(delta, rel=1e-8)


def _constraints_hold(table: np.ndarray, eps: float, delta: float) -> bool:
    one = 1 << PS.GRID_BITS
    e_up = Fraction(math.exp(eps))  # the nearest float: within half an ulp of e^ε, L is two ulps below
    p = [Fraction(int(v), one) for v in table]
    d = Fraction(delta)
    ok = p[0] == 0 and p[-1] == 1 and all(b >= a for a, b in zip(p, p[1:]))
    for a, b in zip(p, p[1:]):
        ok &= b <= e_up * a + d and 1 - a <= e_up * (1 - b) + d
    return bool(ok)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.3, 1e-8)])
def test_table_satisfies_the_dp_constraints(eps, delta):
    assert _constraints_hold(PS.keep_numerators(eps, delta), eps, delta)


def test_constraints_negative_control_epsilon_rounded_up(monkeypatch):
    monkeypatch.setattr(PS, "_exp_down", lambda x: Fraction(math.exp(float(x))) * Fraction(1001, 1000))
    assert not _constraints_hold(PS.keep_numerators(1.0, 1e-6), 1.0, 1e-6)


def test_keep_rate_matches_probability_of_keep():
    seed = 99
    print("seed", seed)
    eps, delta, n, keys = 1.0, 1e-3, 5, 20000  # selection at ε_c/2: ε_c = 0.9 (share 0.1)
    units = np.arange(keys * n)
    data = units // n  # every key has exactly n distinct units
    r = privagg.stable_histogram(data, units=units, epsilon=eps, delta=delta, selection="optimal", rng=seed)
    p = PS.probability_of_keep(n, Fraction(9, 20), delta)
    assert r.threshold == 0 and 0.01 < p < 0.99
    assert stats.binomtest(len(r.keys), keys, p).pvalue > 1e-4


def test_optimal_selection_api_errors():
    k, u = np.arange(100) % 7, np.arange(100)
    with pytest.raises(ParameterError, match="selection"):
        privagg.stable_histogram(k, epsilon=1.0, delta=1e-6, selection="optimal")
    r = privagg.stable_histogram(k, units=u, max_keys_per_unit=2, epsilon=1.0, delta=1e-6, selection="optimal",
                                 rng=0)  # ℓ0 > 1: per-key (ε_c/(2ℓ0), δ/ℓ0), test_hist_user_selection.py
    assert r.selection == "optimal"
    with pytest.raises(ParameterError, match="selection"):
        privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, selection="best")
    r = privagg.stable_histogram(np.zeros(5000, dtype=int), units=np.arange(5000), epsilon=1.0, delta=1e-6,
                                 selection="optimal", rng=0)
    assert r.keys.tolist() == [0] and abs(int(r.counts[0]) - 5000) < 100


def test_optimal_release_accuracy_uses_its_own_count_noise() -> None:
    """The counts of selection="optimal" carry DL(2ℓ∞/ε_c) noise (their own half of ε_c): the
    intervals are built from that law (not the threshold release's half-as-wide one), and no
    threshold bounds the suppressed keys, so the all-keys bounds are inf. Control: the intervals
    of the same release read with the threshold release's law are narrower."""
    import dataclasses

    keys = [f"k{i % 50}" for i in range(20_000)]
    units = list(range(20_000))
    r = privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, selection="optimal", rng=3)
    assert r.selection == "optimal" and len(r.keys) > 0
    assert r.counts_law.scale == 2 * r.params.scale
    assert math.isinf(r.error_bound(0.05)) and math.isinf(r.count_error_bound(0.05))
    low, high = r.confidence_intervals(0.05, unit="count")
    a = float(np.median(high - low)) / 2
    narrow = dataclasses.replace(r, counts_law=None)  # the law of the threshold release
    lo2, hi2 = narrow.confidence_intervals(0.05, unit="count")
    assert a > float(np.median(hi2 - lo2)) / 2 * 1.5, a
