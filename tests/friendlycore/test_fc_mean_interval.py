"""The interval (cell) utility of the consecutive-pair quantile selections (docs/proofs/mean.md §2b).

``u(k) = −max(0, t − C_k, C_{k−1} − t)``, ``C_{−1} := 0``: 0 on the cells where the cumulative
counts cross the public target ``t``. The form before, ``−|C_k − t|``, let a plateau of equal counts
(ties: many consecutive differences exactly 0) come nearer to ``t`` than the cell that crosses it.

* Known answers (plateaus, the grid ends, broadcasting) and, by brute force over all small
  nondecreasing count vectors and their neighbours (each count moved by at most 2, still
  nondecreasing), the sensitivity 2 (reached: not loose).
* Penguins (year, flipper_length_mm; 342 rows), ε = 10, seeds 0–4: the FriendlyCore plan (§2b
  scale step) was ⊥ in every seed before (year's scale ~2⁻³⁰); now ok, year's scale 1 and the
  means within 0.15 year / 2 mm of the sample mean (year sd 0.82, flipper sd 14). The default
  (coordinate) plan switched to the isotropic FriendlyCore plan before, year errors up to 0.37 in
  these seeds; now it stays coordinate-wise (its spreads are the scales: year's 1). Measured over
  seeds 0–49 once: FriendlyCore plan ⊥ in 2 of 50 (its small-n locate; 38 of 50 before), errors
  at most 0.021 / 0.34; coordinate plan never ⊥, errors at most 0.093 / 1.20. So a random seed
  fails this test with probability about 4 % (the FriendlyCore ⊥); the seeds here are fixed.
* Binary lattice {0, 1}², m = 300, the pair-radius step at ε_sel = 1, 60 seeds: the squared
  pair distances are 0 (1/4), 1 (1/2), 2 (1/4), target 149 of 299 pairs: the old utility tied
  every tiny radius (C ≈ 75) with r² = 1 (C ≈ 225) and the first maximum picked a tiny radius
  in most seeds; now r ∈ [1, √2) in every seed. False-failure rate: a tiny radius needs one of
  the ~40 tiny candidates' DLap(4) noise to beat the right one's by the gap t − C_0 >= 49
  (C_0 ~ Bin(299, 1/4) <= 100 except with probability < 1e-3): < 60·40·e^{−49/4} < 2e-2 as a
  crude union bound, about 1e-5 at the typical gap 74. (On {0..3}², the brief's example, the
  tiny picks are noise-limited, not tie-limited: measured 2/100 now against 4/100 before at the
  small plan's ε_sel = 1/5; not a test.)
* Audit (privagg.testing.audit, confidence 0.9999) of the scale step with the interval utility
  on 40 equal rows against the same plus a far row (the far row raises C from 39 to 40 above it
  and lowers it to 38 below: the utility of the cell (2⁹, 2¹⁰] rises, that of [0, 2⁹] falls),
  on the public grid {2⁸, 2⁹, 2¹⁰} (few candidates: the events are not spread thin), claimed
  ε = 1. Negative control: the noise of sensitivity 1/4 (8× understated) is flagged. (On this
  pair the loss of the correct step is about a third of ε; at most one of the utility's two
  terms moves against a candidate, so noise for sensitivity 1 measures about 0.7 ε here.)
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.mean as M
import privagg.mechanisms.mean_small as S
from privagg.mechanisms.mean import private_mean
from privagg.testing.audit import audit_mechanism

SEED = 2024


def interval_reference(c, t):
    """The definition, one candidate at a time."""
    out = []
    for k in range(len(c)):
        below = c[k - 1] if k > 0 else 0
        out.append(-max(0, t - c[k], below - t))
    return out


def test_interval_utility_known_answers():
    # penguins-like plateau: 115 for the tiny candidates, 266 at the right one, 341 above
    c = np.array([115, 115, 115, 266, 341, 341])
    assert M.pair_utility(c, 341).tolist() == [-55, -55, -55, 0, -96, -171]  # t = ⌊340/2⌋
    assert M.interval_utility(c, 170).tolist() == [-55, -55, -55, 0, -96, -171]
    # first cell [0, g_0] (C_{−1} = 0): 0 when the target is at most C_0
    assert M.interval_utility(np.array([5, 9]), 0).tolist() == [0, -5]
    assert M.interval_utility(np.array([5, 9]), 5).tolist() == [0, 0]  # both border t
    # beyond the last candidate: the last one is the nearest
    assert M.interval_utility(np.array([1, 2, 3]), 10).tolist() == [-9, -8, -7]
    # all counts 0 (too few pairs): every candidate −t
    assert M.interval_utility(np.zeros(4, np.int64), 3).tolist() == [-3] * 4
    # batched: rows of counts, one target per row (grouped_mean's radius step)
    cc = np.array([[0, 2, 4, 6], [3, 3, 3, 9]])
    got = M.pair_utility(cc, np.array([7, 7]))  # t = 3
    assert got.tolist() == [interval_reference(r, 3) for r in cc.tolist()]
    assert got.tolist() == [[-3, -1, 0, -1], [0, 0, 0, 0]]
    assert M.interval_utility(cc, 3).dtype == np.int64


def test_interval_utility_sensitivity_two_by_brute_force():
    """All nondecreasing C in {0..6}⁴, all neighbours C' (|C' − C| <= 2 elementwise,
    nondecreasing), all targets 0..8: |u(C) − u(C')| <= 2, and 2 is reached."""
    vecs = [np.array(v) for v in itertools.product(range(7), repeat=4) if list(v) == sorted(v)]
    steps = np.array(list(itertools.product(range(-2, 3), repeat=4)))
    worst = 0
    for t in range(9):
        for c in vecs:
            u = M.interval_utility(c, t)
            assert u.tolist() == interval_reference(c.tolist(), t)
            nb = c + steps
            nb = nb[(nb >= 0).all(1) & (np.diff(nb, axis=1) >= 0).all(1)]
            worst = max(worst, int(np.abs(M.interval_utility(nb, np.full(len(nb), t)) - u).max()))
    assert worst == 2, worst


def penguins_year_flipper():
    pp = pytest.importorskip("palmerpenguins")
    return pp.load_penguins()[["year", "flipper_length_mm"]].dropna().to_numpy(float)


@pytest.mark.parametrize("plan", ["friendlycore", "coordinate"])
def test_penguins_year_flipper_released(plan, monkeypatch):
    x = penguins_year_flipper()
    if plan == "friendlycore":
        monkeypatch.setattr(S, "COORD_SAMPLE", 0)  # the §2b scale step runs
    seen = []  # the coordinate plan's released values (its release's scales are K_j·s_j, §11)

    def spy(*args, **kw):
        out = S.coordinate_mean(*args, **kw)
        seen.append(out)
        return out

    monkeypatch.setattr(M, "coordinate_mean", spy)
    for seed in range(5):
        seen.clear()
        rel = private_mean(x, epsilon=10.0, delta=1e-6, rng=seed)
        err = None if not rel.ok else np.abs(rel.mean - x.mean(0))
        print(f"seed={seed} plan={plan} ok={rel.ok} clip_rule={rel.clip_rule} "
              f"scales={rel.scales} error={err} reason={rel.reason}")
        assert rel.ok, rel.reason
        assert rel.scales is not None
        if plan == "friendlycore":
            assert rel.scales[0] == 1.0  # year's differences: 0, 1, 2
        else:  # the untied distances of 2007–2009 to the refined center (2008.5 at these seeds:
            # median 0.5, good spreads 0.5 … 0.5·2^(5/4)): a spread of 2^(-1) … 2 (was 2^(-1/2) … 2,
            # a band of the draws before the clip-multiple step, which re-split the selections' ρ).
            # Since step 4 ties the rows on the refined cell's left edge (2008, issue 11 atoms) the
            # untied ones are 2009 (119 rows, distance 0.5) and 2007 (109, distance 1.5): a median
            # 0.5 by 10 rows, so spreads up to 1.5·2^(5/4) (2.38 at seed 1).
            spread = seen[-1]["spread"]
            assert 2.0**-1 <= spread[0] <= 1.5 * 2.0**1.25, spread
            assert np.array_equal(rel.scales, seen[-1]["multiple"] * spread)
        if plan == "coordinate":
            assert rel.clip_rule == "coordinate"  # no switch to the FriendlyCore plan
        assert err[0] < 0.15 and err[1] < 2.0, err


def test_binary_lattice_pair_radius():
    bad = []
    for seed in range(60):
        sub = np.random.default_rng(SEED + seed).integers(0, 2, size=(300, 2)).astype(float)
        r = M._pair_radius(sub, 300, Fraction(1), np.random.default_rng(seed)) / M.pair_factor(2)
        if not 1.0 <= r < 2**0.5:
            bad.append((seed, r))
    print(f"seeds {SEED}+0..59: radii outside [1, √2): {bad}")
    assert not bad, bad


# -------------------------------------------------------------- audit of the scale-step selection
AUDIT_EPS = 1.0


def scale_pair():
    d0 = np.zeros((40, 1))
    return d0, np.concatenate([d0, [[1e3]]])


def scale_run(noise_sensitivity):
    """The scale step (target ⌊(81 − 1)/2⌋ = 40) with the noise of ``noise_sensitivity`` at the
    claimed ε: DLap(2Δ/ε) = DLap(4/ε_noise), ``ε_noise = 2ε/Δ``."""
    eps_noise = Fraction(2) * Fraction(AUDIT_EPS) / noise_sensitivity

    def run(data, gen):
        return int(M._column_scales(data, 81, eps_noise, gen)[0])
    return run


@pytest.mark.parametrize("sensitivity, flagged", [(Fraction(2), False), (Fraction(1, 4), True)])
def test_scale_selection_audit(sensitivity, flagged, monkeypatch):
    monkeypatch.setattr(M, "SCALE_EXPONENTS", np.array([8, 9, 10]))
    d0, d1 = scale_pair()
    res = audit_mechanism(scale_run(sensitivity), d0, d1, trials=6000, seed=SEED,
                          confidence=0.9999)
    print(f"seed={SEED} noise for sensitivity {sensitivity}: {res}")
    assert res.violates(AUDIT_EPS) == flagged, res
