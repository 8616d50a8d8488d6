"""The coordinate plan at 3 <= d <= 5 (issue 11 item 4; docs/proofs/mean.md §11): on for
``d <= COORD_DMAX = 20`` when ``n̂·ε < COORD_WIDE_MAX·d`` (d >= 3; 8192·d, 1500·d until 2026-12-05). On commit
4bd1e9f (COORD_DMAX = 2) these ran the isotropic FriendlyCore plans.

Statistical tests (fixed seed, printed): mixed units (column scales 1 … 1000) at d = 3 and 5,
n = 1000, ε = 1, 10 runs each, with a negative control: the same runs with COORD_DMAX = 2 (the
old plan choice: the isotropic FriendlyCore plans), which must be far worse. (For isotropic data
the FriendlyCore plans are better at these n: N(7, 1), d = 3, n = 1000: 0.30× the range oracle
against the coordinate plan's 1.4×; both within the issue's 3×. benchmarks/mean_small_n.py.)
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.mean_small as S
from privagg.mechanisms.mean import private_mean
from privagg.testing.fixtures import mixed_type_table

SEED = 4242


def _runs(d: int, n: int, runs: int, make):
    g = np.random.default_rng(SEED)
    worst, rules = [], []
    for s in range(runs):
        x = make(g, n, d)
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED * 1000 + s)
        rules.append(rel.clip_rule if rel.ok else "⊥")
        worst.append(float(np.max(np.abs(rel.mean - x.mean(0)) / (x.std(0) / math.sqrt(n))))
                     if rel.ok else math.inf)
    return float(np.median(worst)), rules


def _mixed(g, n, d):
    return (g.normal(size=(n, d)) + 5.0) * np.logspace(0.0, 3.0, d)


def test_plan_runs_is_a_public_gate():
    """Deterministic: the plan choice from (n̂, ε, d). Since issue 11's mean-low fix there is no
    lower gate at d >= 3 (was n̂·ε/d >= 150) and COORD_DMAX = 20 (was 5)."""
    one = Fraction(1)
    assert S.plan_runs(300, one, 2) and S.plan_runs(450, one, 3) and S.plan_runs(449, one, 3)
    assert S.plan_runs(300, one, 5) and S.plan_runs(60, one, 3)  # the ⊥ floor is separate
    assert S.plan_runs(300, one, 10) and S.plan_runs(1000, one, 20) and not S.plan_runs(1000, one, 21)
    assert S.plan_runs(75, Fraction(10), 5)
    assert S.plan_runs(7500, one, 3) and S.plan_runs(1000, one, 6)
    # d >= 3: only below COORD_WIDE_MAX·d = 8192·d (1500·d until 2026-12-05: mixed column types)
    assert S.COORD_WIDE_MAX == 8192
    assert S.plan_runs(24575, one, 3) and not S.plan_runs(24576, one, 3) and not S.plan_runs(30000, one, 3)
    assert S.plan_runs(81919, one, 10) and not S.plan_runs(81920, one, 10) and S.plan_runs(20190, one, 10)
    assert S.plan_runs(8191, Fraction(10), 10) and not S.plan_runs(8192, Fraction(10), 10)
    assert S.plan_runs(4999, one, 2) and not S.plan_runs(5000, one, 2)  # d = 2 keeps COORD_SAMPLE·d
    # d = 1: below COORD_SAMPLE_1D = 32768 (12000 until 2026-12-03; before that COORD_SAMPLE = 2500)
    assert S.plan_runs(32767, one, 1) and not S.plan_runs(32768, one, 1) and S.plan_runs(12000, one, 1)
    assert S.plan_runs(3276, Fraction(10), 1) and not S.plan_runs(3277, Fraction(10), 1)
    assert S.plan_runs(150, one, 2)


@pytest.mark.parametrize("d", [3, 5])
def test_mixed_units_n1000(d):
    """Column scales 1 … 1000 at n = 1000, 10 runs: every run takes the coordinate plan and the
    median worst-coordinate error is <= 25 SE (measured 2.76 (d = 3) and 5.56 (d = 5) at SEED).
    The sum's noise is discrete Laplace of scale about 2.8 (d = 3) / 4.7 (d = 5) SE per
    coordinate; a median above 25 SE needs >= 5 of 10 runs with some coordinate beyond 5.3 scales
    (p <= 5·e^−5.3 < 0.03 per run: P < 1e-5) or with a missed spread (rare at n̂ε/d >= 150)."""
    med, rules = _runs(d, 1000, 10, _mixed)
    print(f"seed={SEED} mixed units d={d} n=1000: median worst error {med:.3g} SE, rules {rules}")
    assert rules.count("coordinate") == 10 and med <= 25.0, (med, rules)


@pytest.mark.parametrize("d", [3, 5])
def test_mixed_units_negative_control(monkeypatch, d):
    """COORD_DMAX = 2 (the plan choice of 4bd1e9f): the isotropic FriendlyCore plans are far off
    on the small-scale column (measured 168 (d = 3) and 396 (d = 5) SE at SEED); asserted > 25."""
    monkeypatch.setattr(S, "COORD_DMAX", 2)
    med, rules = _runs(d, 1000, 10, _mixed)
    print(f"seed={SEED} control (COORD_DMAX = 2) d={d}: median worst error {med:.3g} SE")
    assert "coordinate" not in rules and med > 25.0, (med, rules)


ATOM_SEED = 20261303


def test_binary_column_between_the_plans_is_not_its_atom(monkeypatch):
    """d = 1, a 0/1 column with 2 % ones, n = 5000, ε = 1 (n̂·ε ≈ 5000: the coordinate plan since
    COORD_SAMPLE_1D = 12000; 32768 now). The FriendlyCore plan there keeps the clip at the atom 0 (100 ones
    are fewer than the spread floor detects at ε = 1 with its tied share: measured, 240 ones at
    n = 12000 were found, 150 at n = 15000 not; 250 were below its former cap K = 561) and releases about 0 (error ≈ −0.02, 10 SE). Statistical test,
    seed ATOM_SEED (printed): 12 runs, at most 3 may be off by more than 0.01 (5 SE). Measured rate
    of such a run: 5 of 300 (seed 20261303; 95 % upper bound 0.038) with the clip ladder of that
    time, 0 of 300 with today's (annulus path, docs/proofs/mean.md §11 step 5a), so the
    false-failure probability is below 10⁻³. Negative control (must fail): the same
    runs with the former gate (COORD_SAMPLE_1D = 2500, the FriendlyCore plan): measured 60 of 60
    runs off by more than 0.01."""
    print("seed", ATOM_SEED)

    def off_runs() -> int:
        g = np.random.default_rng(ATOM_SEED)
        off = 0
        for _ in range(12):
            x = (g.random((5000, 1)) < 0.02).astype(np.float64)
            rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=g)
            off += (not rel.ok) or abs(float(rel.mean[0]) - float(x.mean())) > 0.01
        return off

    assert off_runs() <= 3
    monkeypatch.setattr(S, "COORD_SAMPLE_1D", 2500)
    assert off_runs() > 3


def _binary_errors(x: np.ndarray, seeds: range) -> tuple[list[float], set]:
    se = x.std(0) / np.sqrt(x.shape[0])
    errs, rules = [], set()
    for s in seeds:
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=s)
        rules.add(rel.clip_rule)
        errs.append(float(abs(rel.mean[0] - x[:, 0].mean()) / se[0]))
    return errs, rules


@pytest.mark.parametrize("gate, must_pass", [(None, True), (1500, False)])
def test_binary_column_beside_a_heavy_tail(monkeypatch, gate, must_pass):
    """Why the d >= 3 gate is 8192 (mean_small.COORD_WIDE_MAX): at n·ε/d = 3000 the FriendlyCore
    plan's isotropic clip is set by the lognormal column and the 0/1 column pays its noise. Table
    seed 20261406 (n = 9000, d = 3, ε = 1), release seeds 0–23 (printed): the median of the 0/1
    column's |error| is <= 0.45 SE. Measured over seeds 0–29: median 0.20 SE, 5 of 30 above 0.45
    (a false-failure rate, 12 or more of 24 above, below 10⁻³ at that per-release rate); control,
    the former gate 1500 (the FriendlyCore plan): median 0.70 SE, 17 of 30 above 0.45, must fail."""
    if gate is not None:
        monkeypatch.setattr(S, "COORD_WIDE_MAX", gate)
    errs, rules = _binary_errors(mixed_type_table(9000, 20261406), range(24))
    med = float(np.median(errs))
    print(f"gate={S.COORD_WIDE_MAX} rules={rules} 0/1 column err/SE: median {med:.3f}, {np.round(errs, 2).tolist()}")
    assert rules == ({"coordinate"} if gate is None else {"tail"}), rules
    assert (med <= 0.45) == must_pass, med
