"""Tied (binary / lattice) columns in the small-sample coordinate plan (docs/proofs/mean.md §11).

Found in issue 11 item 4: the spread step targeted the median of ALL consecutive-pair distances,
so a column with more than half of its pairs tied (a 0/1 column with p = 0.2: 68 % of the pairs
tied) got the grid's bottom spread 2⁻¹⁰⁷⁴; its clip radius then underflowed the sum's grid and
``private_mean`` raised ParameterError AFTER the charge (3 of these 5 seeds on commit 4bd1e9f),
or released the median 0 (about 16 SE off). Now the spread is the median of the UNTIED pairs
(``spread_utility``, sensitivity 4) and the spread grid is bounded to 2⁻⁹⁰⁰ … 2⁸⁰⁰.
"""

from __future__ import annotations

import math

import numpy as np

import privagg.mechanisms.mean_small as S
from privagg.mechanisms.mean import interval_utility, private_mean

SEED = 3
N = 1000


def _binary() -> np.ndarray:
    return (np.random.default_rng(SEED).random((N, 1)) < 0.2).astype(float)


def _errors_se(x: np.ndarray) -> list[float]:
    se = x.std() / math.sqrt(N)
    out = []
    for s in range(5):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=s)  # must not raise (after the charge)
        assert rel.ok and rel.clip_rule == "coordinate", rel.reason
        out.append(float(abs(rel.mean[0] - x.mean()) / se))
    return out


def test_binary_column_releases_near_its_mean():
    """d = 1, n = 1000, ε = 1 (the coordinate plan: n̂·ε < 2500), seeds 0–4: every run releases,
    the spread is exactly 1 (untied pairs all differ by 1; the utility margin is about 680 doubled
    ranks against noise of scale 21) and the error is below 20 SE (the sum's discrete Laplace has
    scale about 2.4 SE here: P[> 20 SE] < 5·e^−8 < 2e-3 over the 5 runs; measured 2.0–3.0 SE)."""
    print(f"seed={SEED}")
    errs = _errors_se(_binary())
    print("errors (SE):", np.round(errs, 2))
    assert max(errs) < 20.0, errs


def test_negative_control_plain_median_spread_is_far(monkeypatch):
    """The old spread utility (interval utility of the plain median) on the same column: with the
    bounded grid it no longer raises, but the spread is the grid's bottom, every value is clipped
    to the centre (the median 0) and the release is far off (measured 8.7–16.2 SE; asserted > 5 in
    every run)."""
    def plain(counts, n_hat):
        return 2 * interval_utility(counts, (int(n_hat) - 1) // 2)  # doubled: Δ = 4 units

    monkeypatch.setattr(S, "spread_utility", plain)
    errs = _errors_se(_binary())
    print(f"seed={SEED} control errors (SE):", np.round(errs, 2))
    assert min(errs) > 5.0, errs


def test_spread_grid_keeps_the_sum_grid_valid():
    """Deterministic: every candidate spread of the bounded grid gives a clip radius whose
    Laplace grid exponent lies in the sampler's [−1000, 900] (at the smallest step ε of the plan
    and at ε = 1)."""
    from fractions import Fraction

    from privagg.mechanisms.mean import _grid_up, _sum_exponent
    from privagg.noise.grid import laplace_exponent

    grid = S.positive_grid()
    for s in (grid[0], grid[-1]):
        r = _grid_up(S.COORD_K * float(s))
        assert math.isfinite(r) and r > 0
        for eps in (Fraction(1), S.STEP_EPS_MIN):
            e = laplace_exponent(r * (1 + 2.0**-40), float(eps), 1)
            assert -1000 <= e <= 900 and -1000 <= _sum_exponent(r) <= 900, (s, e)
