"""The small-group plan's refinement (docs/proofs/aggregate_mean.md §8, step 3b): the pooled cell
refined to s/32 and a second pooled spread around its center, used when the first spread was
mostly the cell center's offset (data far from 0 relative to their spread: 10⁶ ± 10, years).

Before it, five groups of N(10⁶, 10²) with 300 rows each were released 150–200 sd off (their
pooled cell [2¹⁹, 2²⁰), the spread ≈ 2·10⁵ = the offset, the clipping range as wide). Known
answers of the budget, then utility tests with the refinement switched off as negative control.
Seeds fixed and printed; false-failure rates stated per test."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import Contribution, GroupedValues

EPS = Fraction(1, 3)  # the unbounded mean's share in the benchmark (public partitions)
DLT = Fraction(1, 10**6)
SEED = 20261207


def test_refine_budget_known_answers():
    """With refinement the levels take ``min(e, ε_r/15)`` and the second spread ``min(e/2,
    ε_r/30)`` from the sums; the cell, first spread and clip range keep their shares (they run
    before the public decision); the plan still spends exactly ε'_g; the sums keep at least
    ε_r/3 − ε_r/10."""
    fp = gm.friendly_means_plan(EPS, DLT)
    eg = fp.epsilon / fp.steps
    rest = eg - fp.group.eps_count
    for n_low in (10, 400, 1500, 10**6):
        b0, b = gm.small_budget(fp, n_low), gm.small_budget(fp, n_low, refine=True)
        e = b0.eps_cell
        assert (b.eps_count2, b.eps_cell, b.eps_spread, b.eps_clip) == (b0.eps_count2, e, e, e / 2)
        assert b.eps_levels == min(e, rest / 15) and b.eps_spread2 == min(e / 2, rest / 30)
        assert b.eps_sum == b0.eps_sum - b.eps_levels - b.eps_spread2
        assert fp.group.eps_count + b.total == eg and b.eps_sum >= rest / 3 - rest / 10
        assert (b0.eps_levels, b0.eps_spread2) == (0, 0)
    ext = gm.small_budget(fp, 400, external=True, refine=True)  # the query's count() pair (§8.1)
    assert ext.total == eg and ext.eps_levels == min(ext.eps_cell, eg / 15)


def _worst(make, n_g: int, seeds) -> np.ndarray:
    """Per seed the largest |error|/sd over five groups of ``n_g`` rows (⊥ infinite)."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng([SEED, n_g, seed])
        g = np.repeat(np.arange(5), n_g).astype(np.int64)
        x = make(rng, 5 * n_g)
        res = gm.friendly_means(GroupedValues(g, x, 5), epsilon=EPS, delta=DLT, contribution=Contribution(),
                                rng=np.random.default_rng([SEED, seed]))
        truth = np.bincount(g, weights=x) / n_g
        sd = np.sqrt(np.bincount(g, weights=(x - truth[g]) ** 2) / n_g)
        out.append(float(np.max(np.where(res.ok, np.abs(res.value - truth), np.inf) / sd)))
    return np.array(out)


def _far(rng, n):
    return rng.normal(1e6, 10.0, n)


def _years(rng, n):
    return rng.integers(2007, 2010, n).astype(np.float64)


def test_far_groups():
    """Five N(10⁶, 10²) groups of 300 rows at ε = 1/3, 10 seeds: the median over seeds of the
    worst group's |error| <= 1 sd, and at most 2 seeds beyond 5 sd. Measured on seeds 10–69: median
    0.18 sd, 2 of 60 seeds beyond 1 sd, none beyond 5 (seeds 0–9: one at 10.3); so 5 of 10 seeds
    beyond 1 sd, or 3 beyond 5, has a probability below 10⁻⁴. Control below (940–5681 sd)."""
    worst = _worst(_far, 300, range(10))
    print(f"seeds [{SEED}, 300, 0..9]: worst group per seed (sd) {np.round(worst, 3)}")
    assert np.median(worst) <= 1.0 and (worst > 5.0).sum() <= 2


def test_years_groups():
    """Five groups of 300 integers 2007–2009 at ε = 1/3, 10 seeds: median worst group <= 0.5 sd
    (measured on seeds 10–69: median 0.16, 1 of 60 seeds beyond 0.5; false failure below 10⁻⁴)."""
    worst = _worst(_years, 300, range(10))
    print(f"seeds [{SEED}, 300, 0..9]: worst group per seed (sd) {np.round(worst, 3)}")
    assert np.median(worst) <= 0.5


def test_far_groups_control(monkeypatch):
    """Without step 3b (``SMALL_REFINE = False``, the plan before it) the same groups are off by
    more than 20 sd in most seeds."""
    monkeypatch.setattr(gm, "SMALL_REFINE", False)
    worst = _worst(_far, 300, range(10))
    years = _worst(_years, 300, range(10))
    print(f"control: far {np.round(worst, 1)}; years {np.round(years, 2)}")
    assert (worst > 20).sum() >= 8 and np.median(years) > 1.0


def test_too_few_pooled_rows_skip_the_step(monkeypatch):
    """Three groups of 100 rows of N(4200, 800²) (penguin body masses' scale) at ε = 1/3: the
    levels' ε times the pooled rows is below REFINE_ROWS per level, so step 2b does not run and
    the release equals, bit for bit, the plan without it (same seed). Control: REFINE_ROWS = 0
    runs the step (more draws, other budget): the release differs. Deterministic."""
    rng = np.random.default_rng(SEED)
    g = np.repeat(np.arange(3), 100).astype(np.int64)
    x = np.round(rng.normal(4200.0, 800.0, 300) / 25.0) * 25.0

    def release():
        res = gm.friendly_means(GroupedValues(g, x, 3), epsilon=EPS, delta=DLT, contribution=Contribution(),
                                rng=np.random.default_rng([SEED, 1]))
        return res.value.tolist()

    with_step = release()
    monkeypatch.setattr(gm, "SMALL_REFINE", False)
    assert release() == with_step
    monkeypatch.setattr(gm, "SMALL_REFINE", True)
    monkeypatch.setattr(gm, "REFINE_ROWS", 0)
    assert release() != with_step
