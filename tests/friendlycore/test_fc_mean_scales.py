"""private_mean with per-column scales (issue 11, item 2): every column in its own units.

* The scale step's counts move by at most 2 when a row is added (the proof's sensitivity), with
  the random order stable under insertion (the row keeps its place relative to the others).
* Mixed units (n = 10⁴, column sds 1 and 1000, ε = 1, δ = 1e-6, m_locate = 3000): per column the
  root mean squared error over the runs divided by the column's sd is within 2× that of the
  1-D mean of a N(0, 1) column at the same n, ε. The squared error of each run is computed exactly
  given the run's n̂, center and clip radius (bias² + the final noise's variance, from its stated
  law), so the comparison does not ride on a few noise draws; over 8 runs each the ratio is about
  1.4 (printed). Negative control: the isotropic mean (scale step switched off) misses it by about
  three orders of magnitude on the sd-1 column.
* Penguins (bill_length_mm, body_mass_g; 342 rows without NaN), ε = 10: the bill-length mean has
  root mean squared error <= 0.5 mm (exact given 5 runs, as above; measured about 0.05 mm) and is
  within 1 mm of 43.92 in each run (the noise sd is below 0.1 mm: false-failure rate < 1e-6).
  Control: isotropic, the root mean squared error exceeds 1 mm (measured about 5 mm). At ε = 1
  (n̂·ε/(10d) = 17 < SCALE_MIN) the scale step does not run: isotropic (docs/proofs/mean.md §2b).
* Audits (privagg.testing.audit, confidence 0.9999: a correct step is flagged with probability
  <= 1e-4) of the two new report-noisy-max steps, the per-column scale and the small-sample
  radius, on 40 equal rows against the same plus a far row; negative controls: the noise of
  ε = 8 while claiming 0.25 (scales) or 0.05 (radius) is flagged.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import privagg.mechanisms.mean as M
import privagg.mechanisms.mean_small as mean_small
from privagg.mechanisms.mean import private_mean
from privagg.testing.audit import audit_mechanism


@pytest.fixture(autouse=True)
def _friendlycore_plan(monkeypatch):
    """These tests are about the FriendlyCore plan's scale step (§2b); at their sizes the
    small-sample coordinate plan (§11) would run instead, so it is switched off here."""
    import privagg.mechanisms.mean_small as S

    monkeypatch.setattr(S, "COORD_SAMPLE", 0)

SEED = 1111


def test_scale_counts_move_by_at_most_two_and_the_order_is_stable():
    rng = np.random.default_rng(SEED)
    base = np.round(rng.normal(size=(60, 3)) * np.array([1.0, 10.0, 1000.0]), 1)
    worst = 0
    for trial in range(40):
        x = base[rng.permutation(60)[: 30 + trial % 20]]
        extra = x[rng.integers(x.shape[0])] if trial % 3 == 0 else rng.normal(size=3) * 50
        y = np.vstack([x, extra])[rng.permutation(x.shape[0] + 1)]  # any position in the input
        o_x = M._row_order(x, np.random.default_rng(trial))
        o_y = M._row_order(y, np.random.default_rng(trial))
        seq_x = x[o_x]
        seq_y = y[o_y]
        drop = next(i for i in range(len(seq_y)) if i == len(seq_x) or (seq_y[i] != seq_x[i]).any())
        assert (np.delete(seq_y, drop, axis=0) == seq_x).all()  # y's order is x's with one insert
        c_x, c_y = M.scale_counts(x, o_x), M.scale_counts(y, o_y)
        worst = max(worst, int(np.abs(c_y - c_x).max()))
    assert worst <= 2, worst
    assert worst == 2  # the bound is reached: it is not loose


def test_scales_follow_each_column():
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(20000, 3)) * np.array([1e-3, 1.0, 1e4]) + np.array([5.0, -1e6, 0.0])
    k = M._column_scales(x, 20000, M.Fraction(1, 30), np.random.default_rng(SEED))
    # the median |difference| of two N(0, σ²) rows is 0.95σ; the chosen power of two is within 2×
    assert (np.abs(np.ldexp(1.0, k) / np.array([1e-3, 1.0, 1e4]) - 1.0) < 1.0).all(), k


def expected_sq_error(x, rel):
    """Per column, E[(mean − x̄)²] over the final sum's noise, given the run (exact: bias² plus
    the stated noise variance), in the data's units."""
    kind, param, step, *_ = rel.noise
    assert kind == rel.calibration in ("gaussian", "laplace")  # "auto" runs Laplace at d = 2
    sc = np.ones(x.shape[1]) if rel.scales is None else rel.scales
    y, c = x / sc, rel.center / sc
    bias = c + M._clipped_sum(y, c, rel.clip_radius) / rel.n_hat - y.mean(0)
    if kind == "gaussian":
        var_grid = param  # the discrete Gaussian's variance is below σ² = param
    else:  # DLap(t): variance 2q/(1 − q)², q = e^{−1/t}
        q = math.exp(-1.0 / param)
        var_grid = 2.0 * q / (1.0 - q) ** 2
    var = var_grid * (step / rel.n_hat) ** 2
    return (bias**2 + var) * sc**2


def rms_relative(x, runs):
    sq = []
    for s in range(runs):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, m_locate=3000, rng=SEED * 100 + s)
        assert rel.ok, f"seed={SEED * 100 + s}"
        sq.append(expected_sq_error(x, rel))
    return np.sqrt(np.mean(sq, axis=0)) / x.std(0), rel


@pytest.fixture(scope="module")
def one_d():
    """The 1-D FriendlyCore plan's error (the d = 1 gate would run the coordinate plan at this
    n̂·ε; the reference is the plan the mixed-unit release runs, per column)."""
    x = np.random.default_rng([SEED, 1]).normal(size=(10_000, 1))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mean_small, "COORD_SAMPLE_1D", mean_small.COORD_SAMPLE)
        return float(rms_relative(x, 8)[0][0])


MIXED = np.random.default_rng([SEED, 2]).normal(size=(10_000, 2)) * np.array([1.0, 1000.0]) + 50.0


def test_mixed_units_each_column_within_twice_the_1d_error(one_d):
    rel_err, rel = rms_relative(MIXED, 8)
    print(f"seed={SEED}: rms error/sd per column {rel_err}, 1-D {one_d:.3g}, scales {rel.scales}")
    assert rel.scales is not None
    assert (rel_err <= 2.0 * one_d).all(), (rel_err, one_d)


def test_negative_control_isotropic_fails_mixed_units(one_d, monkeypatch):
    monkeypatch.setattr(M, "SCALE_MIN", math.inf)
    rel_err, rel = rms_relative(MIXED, 2)
    print(f"seed={SEED}: isotropic rms error/sd per column {rel_err}, 1-D {one_d:.3g}")
    assert rel.scales is None and rel_err[0] > 20 * one_d, (rel_err, one_d)


def penguins():
    pp = pytest.importorskip("palmerpenguins")
    return pp.load_penguins()[["bill_length_mm", "body_mass_g"]].dropna().to_numpy(float)


def penguin_rms(x, runs=5):
    sq, errs = [], []
    for s in range(runs):
        rel = private_mean(x, epsilon=10.0, delta=1e-6, rng=SEED + s)
        assert rel.ok, f"seed={SEED + s}"
        sq.append(expected_sq_error(x, rel)[0])
        errs.append(abs(rel.mean[0] - x[:, 0].mean()))
    return math.sqrt(np.mean(sq)), np.round(errs, 3)


def test_penguins_bill_length_in_its_own_units():
    rms, errs = penguin_rms(penguins())
    print(f"seed={SEED}: bill length: rms error {rms:.3g} mm (exact given the runs), errors {errs}")
    assert rms <= 0.5 and max(errs) <= 1.0, (rms, errs)


def test_negative_control_penguins_isotropic(monkeypatch):
    monkeypatch.setattr(M, "SCALE_MIN", math.inf)
    rms, errs = penguin_rms(penguins())
    print(f"seed={SEED}: isotropic bill length: rms error {rms:.3g} mm, errors {errs}")
    assert rms > 1.0, (rms, errs)


def test_no_scales_with_a_radius_or_one_column():
    x = np.random.default_rng(SEED).normal(size=(20000, 2)) * np.array([1.0, 100.0])
    assert private_mean(x, epsilon=1.0, delta=1e-6, radius=400.0, rng=SEED).scales is None
    assert private_mean(x[:, :1], epsilon=1.0, delta=1e-6, m_locate=3000, rng=SEED).scales is None
    assert private_mean(x, epsilon=1.0, delta=1e-6, m_locate=3000, rng=SEED).scales is not None
    # below the public size n̂·ε/(10d) >= SCALE_MIN: isotropic
    assert private_mean(x[:700], epsilon=1.0, delta=1e-6, rng=SEED).scales is None


# ------------------------------------------------------------------ audits of the noisy-max steps
AUDIT_EPS = 0.25  # claimed per-column ε of the audited selection
CONTROL_EPS = 8.0  # the control draws the noise of this ε while claiming AUDIT_EPS


def scale_pair():
    """40 equal rows (every difference 0) and the same with a far row: inserted inside the order
    it turns one 0-pair into two pairs of 10³, so every count below 2¹⁰ drops by one and every
    count from 2¹⁰ up rises by one (the target ⌊(81 − 1)/2⌋ = 40 makes the winner move)."""
    d0 = np.zeros((40, 1))
    return d0, np.concatenate([d0, [[1e3]]])


def scale_run(claimed_noise_eps):
    def run(data, gen):
        k = M._column_scales(data, 81, M.Fraction(claimed_noise_eps), gen)
        return int(k[0])
    return run


def test_scale_selection_audit_within_budget():
    d0, d1 = scale_pair()
    res = audit_mechanism(scale_run(AUDIT_EPS), d0, d1, trials=6000, seed=SEED, confidence=0.9999)
    print(f"seed={SEED}: {res}")
    assert not res.violates(AUDIT_EPS), res


def test_scale_selection_audit_negative_control():
    """Noise for ε_col = CONTROL_EPS while claiming AUDIT_EPS: flagged (its loss on this pair is
    about 2)."""
    d0, d1 = scale_pair()
    res = audit_mechanism(scale_run(CONTROL_EPS), d0, d1, trials=6000, seed=SEED, confidence=0.9999)
    print(f"seed={SEED}: control {res}")
    assert res.violates(AUDIT_EPS), res


def pair_radius_run(eps_sel):
    def run(data, gen):
        r = M._pair_radius(data, 81, M.Fraction(eps_sel), gen) / M.pair_factor(1)
        return int(round(4 * math.log2(r)) >= 40)  # post-processing: is r >= 2^10 (the far pairs)?
    return run


def test_pair_radius_audit_within_budget_and_control():
    """The small-sample radius (report-noisy-max over 201 radii) at a claimed ε = 0.05; control:
    the noise of ε = 8 (on this pair the winner moves to the radii >= 2^10: loss about 0.5)."""
    d0, d1 = scale_pair()
    res = audit_mechanism(pair_radius_run(0.05), d0, d1, trials=6000, seed=SEED, confidence=0.9999)
    ctrl = audit_mechanism(pair_radius_run(CONTROL_EPS), d0, d1, trials=6000, seed=SEED,
                           confidence=0.9999)
    print(f"seed={SEED}: {res}; control {ctrl}")
    assert not res.violates(0.05), res
    assert ctrl.violates(0.05), ctrl
