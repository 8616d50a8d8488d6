"""Step 4′ of the coordinate plan (the continuation, docs/proofs/mean.md §11): a refined cell
wider than a quarter of its second spread is refined further from the second spread, with a third
spread, at the ε the switch to FriendlyCore would get (:func:`continuation_budget`).

Known answers of the budget and the loss (exact fractions), then two utility tests on data far from
0 relative to their spread, with negative controls: ``CONT_RESOLVE`` tiny (no column ever
continues: the plan before step 4′) must fail them. Seeds are fixed and printed; the false-failure
rates are stated per test. The calls step 4′ makes are replayed in
``test_fc_mean_coordinate_audit.py::test_steps_match_coordinate_mean_calls``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import privagg.mechanisms.mean_small as S
from privagg import private_mean
from privagg.accounting import zcdp_to_epsilon
from privagg.mechanisms.mean import mean_privacy_loss, rho_for

SEED = 20261206


def test_continuation_budget_known_answers():
    """ε = 1, δ = 10⁻⁶, d = 3, two unresolved columns: ε_rest = 1 − 1/20 − 1/2 = 9/20 (the switch's,
    δ_rest = δ/2); ε_out = ε_rest/40, ε_sel = ε_rest/4, δ_sel = δ_rest/2, each sum (ε_rest − ε_out −
    ε_sel)/3 = 87/800; ρ/2 per unresolved column, half to the levels and half to the third spread;
    the clip multiple keeps the plan's e_clip; count, cell and first spread 0."""
    eps, dlt = Fraction(1), Fraction(1, 10**6)
    _, _, rest_e, rest_d = S.switch_budget(eps, dlt)
    assert rest_e == Fraction(9, 20) and rest_d == dlt / 2
    c = S.continuation_budget(eps, dlt, 3, False, 2)
    assert (c.eps_out, c.eps_sel, c.delta_sel) == (Fraction(9, 800), Fraction(9, 80), dlt / 4)
    assert c.eps_sum == Fraction(87, 800)
    rho = rho_for(Fraction(9, 80), dlt / 4)
    assert c.rho == rho and c.rho_levels == rho / 2 / 2 and c.e_s2 == S.em_epsilon(rho / 2 / 2)
    assert c.e_clip == S.coordinate_budget(eps, dlt, 3).e_clip
    assert (c.eps_n, c.e_cell, c.e_s1, c.e_s1_zero) == (0, 0, 0, 0)
    low = S.continuation_budget(eps, dlt, 1, True, 1)  # the low-sample share: ε_rest = 1 − 1/20 − 3/5
    assert low.eps_sum == Fraction(7, 20) * (1 - Fraction(1, 40) - Fraction(1, 4))
    assert low.e_clip == S.coordinate_budget(eps, dlt, 1, True).e_clip


def test_continuation_loss_within_the_guarantee():
    """The continued plan's (ε, δ): the switch's spent part plus the continuation's Laplace steps
    and its selections' zCDP conversion; at most (ε, δ) and at most the guarantee private_mean
    reports, at several ε and both selection shares."""
    for e in (Fraction(1, 10), Fraction(1), Fraction(10)):
        dlt = Fraction(1, 10**6)
        rep = mean_privacy_loss(e, dlt, calibration="laplace", select_radius=True)
        for low in (False, True):
            spent_e, spent_d, _, _ = S.switch_budget(e, dlt, low)
            c = S.continuation_budget(e, dlt, 1, low)
            got = S.continuation_loss(e, dlt, low)
            want = (spent_e + c.eps_out + c.eps_sum + zcdp_to_epsilon(c.rho, c.delta_sel), spent_d + c.delta_sel)
            assert got == want and got[0] <= e and got[1] <= dlt
            assert got[0] <= rep.epsilon and got[1] <= rep.delta


def _median_error(make, n: int, runs: int, base: int) -> float:
    """Median over ``runs`` seeded releases (data seed [base, s], release seed base·1000 + s) of
    the largest |error|/sd over the columns (⊥ infinite)."""
    errs = []
    for s in range(runs):
        x, sd = make(np.random.default_rng([base, s]), n)
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=base * 1000 + s)
        errs.append(float(np.max(np.abs(rel.mean - x.mean(axis=0)) / sd)) if rel.ok else np.inf)
    return float(np.median(errs))


def _far(g, n):
    return g.normal(1e6, 10.0, size=(n, 1)), np.array([10.0])


def _far_and_near(g, n):
    return np.column_stack([g.normal(1e6, 10.0, n), g.normal(0.0, 1.0, n)]), np.array([10.0, 1.0])


def test_far_column_at_small_n(monkeypatch):
    """N(10⁶, 10²), n = 400 < the switch's 433 rows at ε = 1 (the plan cannot hand over): 30
    releases, median |error| <= 0.2 sd. Measured (6 seed families of 20): medians 0.015–0.054 sd
    (the range oracle's noise sd, computed: about 0.08), 90 % quantiles 0.10–2.15: if a run
    exceeds 0.2 sd with probability at most 1/5, the median of 30 does with probability below
    10⁻³. Control (no continuation, the plan
    before step 4′: the levels stop at a 512-wide cell and the second spread is the center's
    offset): medians 0.55–1.47 sd; asserted >= 0.3."""
    got = _median_error(_far, 400, 30, SEED)
    monkeypatch.setattr(S, "CONT_RESOLVE", 1e-300)
    control = _median_error(_far, 400, 30, SEED)
    print(f"seed={SEED}: median |error| {got:.3f} sd; control (no continuation) {control:.3f} sd")
    assert got <= 0.2, got
    assert control >= 0.3, control


def test_far_and_near_columns_at_d2(monkeypatch):
    """d = 2: N(10⁶, 10²) beside N(0, 1), n = 400; only the far column continues (k = 1), both sums
    at the continuation's ε. 30 releases, the median of the worse column's |error|/sd <= 0.25.
    Measured (6 seed families of 20): 0.067–0.091; control (no continuation) 0.78–1.56, asserted
    >= 0.5. False failure: the measured 90 % quantiles are 0.15–0.27, so a run's worse error
    exceeds 0.25 with probability about 1/10, and the median of 30 does with probability below 10⁻⁴."""
    got = _median_error(_far_and_near, 400, 30, SEED + 1)
    monkeypatch.setattr(S, "CONT_RESOLVE", 1e-300)
    control = _median_error(_far_and_near, 400, 30, SEED + 1)
    print(f"seed={SEED + 1}: median worse-column |error| {got:.3f} sd; control {control:.3f} sd")
    assert got <= 0.25, got
    assert control >= 0.5, control


def test_resolved_columns_do_not_continue(monkeypatch):
    """N(7, 1) and N(300, 5) at n = 1000: their cells are refined to s1/32, far below a quarter of
    the second spread, so step 4′ never runs (no call of continuation_budget) over 20 seeds —
    these releases are the plan's as before. Control: with CONT_RESOLVE = 10⁶ every refined column
    continues."""
    seen = []
    real = S.continuation_budget
    # (plan_possible also reads it, at d = COORD_DMAX: only the calls at this table's d = 2 count)
    monkeypatch.setattr(S, "continuation_budget", lambda *a, **k: (a[2] == 2 and seen.append(a)) or real(*a, **k))
    g = np.random.default_rng(SEED)
    x = np.column_stack([g.normal(7.0, 1.0, 1000), g.normal(300.0, 5.0, 1000)])
    for s in range(20):
        private_mean(x, epsilon=1.0, delta=1e-6, rng=s)
    assert seen == []
    monkeypatch.setattr(S, "CONT_RESOLVE", 1e6)
    private_mean(x, epsilon=1.0, delta=1e-6, rng=0)
    assert len(seen) == 1
