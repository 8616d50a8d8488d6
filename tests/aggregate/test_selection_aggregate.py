"""Audit of aggregate's key selection: a group with one unit is released with probability p(1) of
the optimal partition selection at (ε_sel/k, δ_sel/k) (k = ℓ0, add/remove).

One release holds G = 4000 groups of one unit each; their keep decisions are independent
Bernoulli(p(1)), so the number released is Binomial(G, p(1)). The check is a two-sided binomial
test at α = 1e-6 (false-failure rate ≤ 1e-6 per check; fixed seed, printed). Negative control: the
same harness on a selection that forgets the division by ℓ0 (p(1) at (ε_sel, δ_sel) instead of
(ε_sel/2, δ_sel/2), i.e. twice the keep rate) must be rejected. What it can detect: a keep rate off
by more than ≈ 4.9·sqrt(p(1)(1−p(1))/G) ≈ 0.03 absolute at p(1) ≈ 0.1; it cannot see errors in p(n)
for n ≥ 2 (those are checked exactly in tests/mechanisms/test_hist_optimal_selection.py).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privagg
from privagg.mechanisms import aggregate as agg
from privagg.mechanisms.partition_selection import probability_of_keep

SEED = 20261201
G = 4000
ALPHA = 1e-6


def _released(l0: int, seed: int) -> int:
    # unit u has one row, in group g<u>; with ℓ0 = 2 bounding keeps it (one group per unit)
    df = pd.DataFrame({"k": [f"g{i}" for i in range(G)], "u": np.arange(G)})
    kw = dict(units="u", max_groups_per_unit=l0) if l0 > 1 else {}
    r = privagg.aggregate(df, by="k", metrics=[privagg.count()], epsilon=1.0, delta=0.4, rng=seed,
                          weights={"selection": 1, "count": 1}, **kw)
    return len(r.groups)


def _p_value(k: int, p: float) -> float:
    return float(stats.binomtest(k, G, p).pvalue)


@pytest.mark.parametrize("l0", [1, 2])
def test_one_unit_group_release_rate_matches_p1(l0):
    print(f"seed={SEED}")
    eps_sel, dlt_sel = Fraction(1, 2), Fraction(2, 5)  # the selection's share of (1, 0.4)
    p1 = probability_of_keep(1, eps_sel / l0, dlt_sel / l0)
    assert abs(p1 - float(dlt_sel / l0)) < 1e-15  # p(1) = δ on the grid
    k = _released(l0, SEED)
    assert _p_value(k, p1) > ALPHA, f"seed={SEED}: {k} of {G} released, p(1)={p1}"


def test_negative_control_selection_without_division_by_l0(monkeypatch):
    print(f"seed={SEED}")
    monkeypatch.setattr(agg, "selection_parameters", lambda e, d, l0, replace: (Fraction(e), Fraction(d)))
    k = _released(2, SEED)
    p1 = probability_of_keep(1, Fraction(1, 4), Fraction(1, 5))  # what a correct ℓ0 = 2 selection keeps
    assert _p_value(k, p1) <= ALPHA, f"seed={SEED}: the broken selection was not detected ({k} of {G})"
