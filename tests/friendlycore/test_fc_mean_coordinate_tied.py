"""Tied (binary / lattice) columns in the small-sample coordinate plan (docs/proofs/mean.md §11).

Found in issue 11 item 4: the spread step targeted the median of ALL consecutive-pair distances,
so a column with more than half of its pairs tied (a 0/1 column with p = 0.2: 68 % of the pairs
tied) got the grid's bottom spread 2⁻¹⁰⁷⁴; its clip radius then underflowed the sum's grid and
``private_mean`` raised ParameterError AFTER the charge (3 of these 5 seeds on commit 4bd1e9f),
or released the median 0 (about 16 SE off). Then the spread was the median of the UNTIED pairs;
since issue 11's mean-low fix it is the median of the UNTIED distances to the released center
(``centred_spread_utility``, sensitivity 1; around the cell at 0, ``annulus_spread_utility``: the
untied rows outside an annulus), and the spread grid is bounded to 2⁻⁹⁰⁰ … 2⁸⁰⁰.
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
    the spread is 1 … 2^(5/4) (the untied distances to the center 0 are all 1; COORD_SPREAD_TOL)
    and the error is below 30 SE (the sum's discrete Laplace has scale at most about 3.8 SE here:
    P[> 30 SE] < 5·e^−7.9 < 2e-3 over the 5 runs; measured 0.3–5.2 SE at SEED)."""
    print(f"seed={SEED}")
    errs = _errors_se(_binary())
    print("errors (SE):", np.round(errs, 2))
    assert max(errs) < 30.0, errs


def test_negative_control_plain_median_spread_is_far(monkeypatch):
    """The plain median of the distances to the center (ties included: 80 % of the rows sit on
    the center 0) instead of the untied one, on the same column: the spread is the grid's bottom,
    every value is clipped to the centre (the median 0) and the release is far off (about 16 SE:
    the mean 0.2 over SE 0.0126; asserted > 5 in every run)."""
    def plain(below_hi, below_lo, n):
        c = np.asarray(below_hi, np.int64) - np.asarray(below_lo, np.int64)
        prev = np.zeros_like(c)
        prev[..., 1:] = c[..., :-1]
        return -np.maximum(np.maximum(n - 2 * c, 2 * prev - n), 0)

    monkeypatch.setattr(S, "centred_spread_utility", plain)
    monkeypatch.setattr(S, "annulus_spread_utility", plain)  # the center 0's step (issue 11)
    errs = _errors_se(_binary())
    print(f"seed={SEED} control errors (SE):", np.round(errs, 2))
    assert min(errs) > 5.0, errs
