"""private_mean's estimate step: the public refinement schedule (known answers against an
independent mpmath evaluation), the distance histogram behind the final clipping radius, and an
empirical audit of that ε_q-DP step with a negative control (its noise removed)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import privagg.mechanisms.mean as M
from privagg.mechanisms.mean import dlap_tail_shift, estimate_schedule, mean_plan
from privagg.testing.audit import audit_mechanism

mpmath.mp.dps = 40
SEED = 4242


def reference_score(parts, plan, n_hat, r, bound, d):
    """Predicted final error of a schedule, re-derived in mpmath from the proof's formulas."""
    tail = mpmath.sqrt(2 * mpmath.log(1000))
    k_n = dlap_tail_shift(1 / plan.eps_count, Fraction(1, 1000))

    def noise(big_r, part):
        p = mpmath.mpf(part.numerator) / part.denominator
        if plan.gaussian:
            return big_r / mpmath.sqrt(2 * p) * (mpmath.sqrt(d) + tail)
        return mpmath.sqrt(d) * big_r / p * (mpmath.sqrt(2 * d) + 2 * mpmath.log(1000))

    b = mpmath.mpf(bound)
    for part in parts[:-1]:
        b = (noise(r + b, part) + b * k_n) / n_hat
    return (noise(r + b, parts[-1]) + b * k_n) / n_hat


@pytest.mark.parametrize("calibration", ["gaussian", "laplace"])
@pytest.mark.parametrize(("n_hat", "r", "bound", "d"),
                         [(1000, 21.0, 125.0, 100), (10_000, 16.0, 4.0, 100), (500, 3.0, 0.01, 2),
                          (100_000, 30.0, 300.0, 1000)])
def test_schedule_sums_exactly_and_is_the_argmin(calibration, n_hat, r, bound, d):
    plan = mean_plan(1.0, 1e-6, calibration=calibration)
    parts = estimate_schedule(plan, n_hat, r, bound, d)
    total = plan.rho_sum if plan.gaussian else plan.eps_sum
    assert sum(parts) == total and all(p > 0 for p in parts)  # exact composition: Σ = budget
    steps = len(parts) - 1
    assert steps in M.REFINE_STEPS
    if steps:
        share = 1 - parts[-1] / total
        assert share in M.REFINE_SHARES and len(set(parts[:-1])) == 1
    # Independent: every candidate schedule's score; the chosen one is minimal (to 1e-12).
    scores = [reference_score((total,), plan, n_hat, r, bound, d)]
    for t in M.REFINE_STEPS[1:]:
        for s in M.REFINE_SHARES:
            scores.append(reference_score((total * s / t,) * t + (total * (1 - s),),
                                          plan, n_hat, r, bound, d))
    chosen = reference_score(parts, plan, n_hat, r, bound, d)
    assert chosen <= min(scores) * (1 + mpmath.mpf(10) ** -12)


def test_schedule_refines_only_when_the_located_center_is_poor():
    plan = mean_plan(1.0, 1e-6)
    assert len(estimate_schedule(plan, 1000, 21.0, 125.0, 100)) == 4  # locate error 6× r
    assert len(estimate_schedule(plan, 10_000, 16.0, 1e-6, 100)) == 1  # located exactly


def test_clip_edges_are_public_and_reach_sqrt_n():
    e = M.clip_edges(2.0, 10_000)
    assert np.all(np.diff(e) < 0) and e[-1] == 2.0 * 2.0 ** (-M.QUANTILE_GRID / M.QUANTILE_OCTAVE)
    assert e[0] >= 2.0 * M.TOP_FACTOR * math.sqrt(10_000)  # T >= U·4·√n̂
    assert 2.0 in e.tolist()


def test_distance_bins_match_exact_reference_and_partition():
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(400, 3)) * np.exp(rng.uniform(-6, 5, size=(400, 1)))
    x[:5] = 0.0
    center, edges = np.zeros(3), M.clip_edges(2.0, 400)
    got = M._distance_bins(x, center, edges)
    assert got.sum() == x.shape[0]  # every row in exactly one bin: sensitivity 1
    ref = np.zeros(edges.size + 1, dtype=np.int64)
    exact_edges = [Fraction(e) ** 2 for e in edges.tolist()]
    for row in x:  # bin = index of the first (largest) edge below u, from exact rationals
        u2 = sum(Fraction(float(a)) ** 2 for a in row)
        ref[next((k for k, e2 in enumerate(exact_edges) if u2 > e2), edges.size)] += 1
    assert np.array_equal(got, ref), f"seed={SEED}"


def test_quantile_radius_leaves_about_tau_rows_outside():
    """Noise-free in effect (ε_q = 50): the radius is the least edge with at most τ + 2·sd rows
    beyond it (sd < 0.01 here); the released outside count is that tail."""
    rng = np.random.default_rng(SEED)
    u = rng.uniform(0.0, 1.0, size=4000)
    x = np.stack([u, np.zeros_like(u)], axis=1)
    for tau in (1.0, 40.0):
        ch = M._quantile_radius(x, np.zeros(2), 1.0, 4000, Fraction(50), rng, tau)
        edges = M.clip_edges(1.0, 4000)
        beyond = np.array([(u > e).sum() for e in edges])
        expect = edges[np.flatnonzero(beyond <= tau)[-1]]
        assert ch.rule == "tail" and ch.radius == expect, f"seed={SEED}"
        assert ch.outside == beyond[np.flatnonzero(beyond <= tau)[-1]]


def test_quantile_radius_robust_fallback_on_far_mass():
    """5 % of the rows far beyond the top edge: the median-distance (robust) rule."""
    rng = np.random.default_rng(SEED)
    u = rng.uniform(0.0, 1.0, size=4000)
    u[:200] = 1e9
    x = np.stack([u, np.zeros_like(u)], axis=1)
    ch = M._quantile_radius(x, np.zeros(2), 1.0, 4000, Fraction(50), rng, 1.0)
    assert ch.rule == "robust" and 0.4 < ch.radius < 0.7, (ch, f"seed={SEED}")


# ------------------------------------------------------------------ audit of the quantile step
EPS_Q, DELTA_AUDIT, CONF = 1.0, 1e-6, 0.999


def quantile_pair():
    """d = 1, U = 1, n̂ = 200, τ = 1 (public here). At ε_q = 1 the tail test at the edge
    2^{-1/4} (index 13, sd = √14·1.357) passes with at most 1 + 3·5.08 = 16.2 rows beyond
    (``TAIL_SD = 3``): 16 rows at 0.9 pass, 17 fail; 50 rows at 0.78 make every deeper edge fail."""
    assert M.TAIL_SD == 3
    base = np.concatenate([np.full(16, 0.9), np.full(50, 0.78), np.zeros(60)])[:, None]
    return base, np.concatenate([base, [[0.9]]])


def run_quantile(data, gen):
    return M._quantile_radius(data, np.zeros(1), 1.0, 200, Fraction(EPS_Q), gen, 1.0).radius


def test_quantile_step_within_its_epsilon():
    """ε_q-DP (discrete Laplace per bin, one row in one bin). False-failure rate <= 10⁻³."""
    print(f"seed={SEED}")
    res = audit_mechanism(run_quantile, *quantile_pair(), trials=3000, seed=SEED,
                          delta=DELTA_AUDIT, confidence=CONF)
    print(res)
    assert not res.violates(EPS_Q), (res, f"seed={SEED}")


def test_quantile_step_negative_control_without_noise(monkeypatch):
    print(f"seed={SEED}")
    monkeypatch.setattr(M, "discrete_laplace",
                        lambda scale, size=None, rng=None: np.zeros(size, dtype=np.int64))
    d0, d1 = quantile_pair()
    assert run_quantile(d0, None) != run_quantile(d1, None)
    res = audit_mechanism(run_quantile, d0, d1, trials=300, seed=SEED, delta=DELTA_AUDIT,
                          confidence=CONF)
    print(res)
    assert res.violates(EPS_Q), (res, f"seed={SEED}")


def test_release_reports_final_center_and_radius():
    rng = np.random.default_rng(SEED)
    x = rng.normal(size=(3000, 4)) + 40.0
    rel = M.private_mean(x, epsilon=1.0, delta=1e-6, radius=8.0, rng=SEED)
    assert rel.ok and rel.center.shape == (4,)
    assert 0 < rel.clip_radius <= 8.0 + 10.0  # at most U = r + bound
    assert np.linalg.norm(rel.center - x.mean(0)) < 2.0, f"seed={SEED}"
