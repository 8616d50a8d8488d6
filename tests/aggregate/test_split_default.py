"""The default split of the benchmark's query (issue 13 utility): count(), sum(v, b), mean(v, b),
quantile(v, 0.5, b) with public keys (src/privagg/mechanisms/aggregate.py, docs/proofs/aggregate.md
§5, docs/proofs/aggregate_bounded.md §8).

Known answers (rationals): the quantile's default weight 3/2 gives it ε/3 and the joint step
count + sum + mean 2ε/3; inside it the centered sum gets ε_S = ε_G/2 + min(ε_count, ε_sum)/2 = ε/3,
the present-rows count p̃ the rest (ε/3), the missing-rows count m̃ ≈ 2ε/3. On 2dd438f the split
was 3ε/4 and ε/4, with ε_S = ε/4 and p̃ = m̃ at ε/2.

Statistical (fixed seed, printed): the bounded mean's error on 4000 groups of 100 rows at the
bounds' midpoint (so the error is the centered sum's noise over n, up to p̃'s second-order term):
its root mean square must be within 12 % of the plan's √2·t_S·g/n. The RMS of 4000 such errors
has a relative standard deviation of about 1.8 % (Laplace: Var Z² = 5 (E Z²)², so √(5/4000)/2),
so a correct release fails with probability far below 10⁻⁶ (6 standard deviations). Negative
control: the same harness on the previous stop's split (the quantile at weight 1 and ε_S = ε_G/2:
the mean's noise √2·4·0.5/n instead of √2·3·0.5/n, 1.33× larger) must fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import privagg
from privagg.mechanisms import aggregate as agg
from privagg.mechanisms import grouped_bounded as gb
from privagg.mechanisms.grouped import Contribution

SEED = 20_251_202
GROUPS, ROWS = 4000, 100


def _query(lo=0.0, hi=1.0):
    return [privagg.count(), privagg.sum("v", (lo, hi)), privagg.mean("v", (lo, hi)),
            privagg.quantile("v", 0.5, (lo, hi))]


def test_benchmark_query_split():
    """Old code (2dd438f): {"count+sum_v+mean_v": 3/4, "q0.5_v": 1/4}."""
    df = pd.DataFrame({"g": np.repeat(np.arange(3), 50), "v": np.linspace(0, 1, 150)})
    r = privagg.aggregate(df, by="g", metrics=_query(), epsilon=1, domain=[0, 1, 2], rng=1)
    assert r.split_exact == {"count+sum_v+mean_v": (Fraction(2, 3), 0), "q0.5_v": (Fraction(1, 3), 0)}
    assert agg.QUANTILE_WEIGHT == Fraction(3, 2)
    # inside the joint step: ε_count = ε_sum = ε_mean = 2/9, ε_G = 4/9
    e_s = gb.centered_share(Fraction(2, 9), Fraction(4, 9), Fraction(2, 9))
    assert e_s == Fraction(1, 3)
    p = gb.count_share_plan(lower=0, upper=1, epsilon_count=Fraction(2, 9), epsilon_group=Fraction(4, 9),
                            epsilon_sum=Fraction(2, 9), contribution=Contribution())
    assert p.shared and p.mean.centered.target == Fraction(gb._float_down(Fraction(1, 3)))
    assert abs(p.mean.count.target - Fraction(1, 3)) < Fraction(1, 10**15)
    assert Fraction(2, 3) * (1 - Fraction(1, 512)) < p.missing.epsilon <= p.mean.epsilon <= Fraction(2, 3)


def test_split_budget_default_weights_and_overrides():
    steps = [("count", False), ("sum_v", False, 1), ("q0.5_v", False, Fraction(3, 2))]
    assert agg.split_budget(steps, 7) == {"count": (2, 0), "sum_v": (2, 0), "q0.5_v": (3, 0)}
    assert agg.split_budget(steps, 3, weights={"q0.5_v": 1}) == {"count": (1, 0), "sum_v": (1, 0), "q0.5_v": (1, 0)}
    # user weights still rule: the previous stop's split
    r = privagg.aggregate(pd.DataFrame({"g": [0, 1], "v": [0.2, 0.4]}), by="g", metrics=_query(), epsilon=1,
                          domain=[0, 1], rng=1, weights={"q0.5_v": 1})
    assert r.split_exact == {"count+sum_v+mean_v": (Fraction(3, 4), 0), "q0.5_v": (Fraction(1, 4), 0)}


#: √2·t_S/n with t_S = (hi − lo)/2 / ε_S = (1/2)/(1/3) in value units (test_benchmark_query_split
#: checks it against the plan): the root mean square of the mean's noise at ε_S = 1/3, n = 100.
PREDICTED = math.sqrt(2) * 1.5 / ROWS


def test_the_predicted_error_is_the_plans():
    p = gb.count_share_plan(lower=0, upper=1, epsilon_count=Fraction(2, 9), epsilon_group=Fraction(4, 9),
                            epsilon_sum=Fraction(2, 9), contribution=Contribution())
    from_plan = math.sqrt(2) * float(p.mean.centered.scale) * 2.0**p.mean.centered.exponent / ROWS
    assert abs(from_plan / PREDICTED - 1) < 1e-3


def _mean_rms() -> float:
    """The RMS of the mean's error over the groups for the benchmark query (values at the midpoint)."""
    df = pd.DataFrame({"g": np.repeat(np.arange(GROUPS), ROWS), "v": np.full(GROUPS * ROWS, 0.5)})
    r = privagg.aggregate(df, by="g", metrics=_query(), epsilon=1, domain=list(range(GROUPS)), rng=SEED)
    assert r.groups["mean_v_ok"].all()
    return float(np.sqrt(np.mean((r.groups["mean_v"].to_numpy(float) - 0.5) ** 2)))


def test_seeded_mean_error_matches_the_new_split():
    """Old code (2dd438f): rms 0.0277 (ε_S = 1/4), 1.30× the prediction."""
    print(f"seed={SEED}")
    rms = _mean_rms()
    print(f"rms={rms:.5f} predicted={PREDICTED:.5f}")
    assert abs(rms / PREDICTED - 1) < 0.12, rms


@pytest.fixture
def previous_split(monkeypatch):
    """The previous stop's split: a quantile at weight 1, the centered sum at ε_G/2."""
    monkeypatch.setattr(agg.Quantile, "default_weight", property(lambda self: Fraction(1)))
    monkeypatch.setattr(gb, "centered_share", lambda e_c, e_g, e_s: e_g / 2)


def test_seeded_mean_error_negative_control(previous_split):
    print(f"seed={SEED}")
    rms = _mean_rms()
    print(f"rms={rms:.5f} predicted(new split)={PREDICTED:.5f}")
    assert not abs(rms / PREDICTED - 1) < 0.12, rms


def test_unbounded_mean_default_weight_known_answers():
    """The benchmark's unbounded query count(), sum(v, b), mean(v), quantile(v, 0.5): weights
    1, 1, 2, 3/2 (UNBOUNDED_MEAN_WEIGHT, 2026-12-06): ε/5.5 each for the count and the sum, 4ε/11
    for the mean with all of δ, 3ε/11 for the median; with a key selection the selection (weight 1)
    and the mean share δ 1 : 2. Negative control: the weight-1 split (2/9 for the mean) differs."""
    df = pd.DataFrame({"g": np.repeat(np.arange(3), 50), "v": np.linspace(0, 1, 150)})
    m = [privagg.count(), privagg.sum("v", (0.0, 1.0)), privagg.mean("v"), privagg.quantile("v", 0.5)]
    r = privagg.aggregate(df, by="g", metrics=m, epsilon=1, delta=Fraction(1, 10**6), domain=[0, 1, 2], rng=1)
    assert agg.UNBOUNDED_MEAN_WEIGHT == 2
    assert r.split_exact == {"count": (Fraction(2, 11), 0), "sum_v": (Fraction(2, 11), 0),
                             "mean_v": (Fraction(4, 11), Fraction(1, 10**6)), "q0.5_v": (Fraction(3, 11), 0)}
    steps = [("selection", True, 1)] + [(x.name, x.needs_delta, x.default_weight) for x in m]
    got = agg.split_budget(steps, 13, Fraction(3, 10**6))
    assert got["selection"] == (2, Fraction(1, 10**6)) and got["mean_v"] == (4, Fraction(2, 10**6))
    old = agg.split_budget(steps, 13, Fraction(3, 10**6), weights={"mean_v": 1})
    assert old["mean_v"] != got["mean_v"] and old["mean_v"][0] == Fraction(26, 11)
    assert privagg.mean("v", (0.0, 1.0)).default_weight == 1
