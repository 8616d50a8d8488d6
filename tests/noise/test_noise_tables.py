"""Certified inversion tables: thresholds against mpmath, and the exact slow path (forced)."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from privagg.noise._laws import (
    gaussian_half,
    gaussian_table,
    geometric_plan,
    laplace_half,
    laplace_table,
)
from privagg.noise._tables import invert
from privagg.testing import binomial_two_sided_p

SEED = 20261130
TWO64 = mpmath.mpf(2) ** 64


def _mp(fr: Fraction) -> mpmath.mpf:
    return mpmath.mpf(fr.numerator) / fr.denominator


def _laplace_cdf(t: Fraction, k: int) -> mpmath.mpf:
    q = mpmath.exp(-1 / _mp(t))
    if k <= -1:
        return q ** (-k) / (1 + q)
    return 1 - q ** (k + 1) / (1 + q)


def _gauss_cdf(s2: Fraction, k: int) -> mpmath.mpf:
    s2m = _mp(s2)
    w = lambda j: mpmath.exp(-(mpmath.mpf(j) ** 2) / (2 * s2m))
    norm = mpmath.nsum(w, [-mpmath.inf, mpmath.inf])
    if k <= -1:
        return mpmath.nsum(w, [-k, mpmath.inf]) / norm
    return 1 - mpmath.nsum(w, [k + 1, mpmath.inf]) / norm


@pytest.mark.parametrize(
    "t", [Fraction(1, 100), Fraction(1, 3), Fraction(2), Fraction(77, 10)]
)
def test_laplace_thresholds_match_mpmath(t):
    table = laplace_table(t)
    half = laplace_half(t)
    with mpmath.workprec(400):
        expected = [
            int(mpmath.floor(_laplace_cdf(t, j - half - 1) * TWO64))
            for j in range(2 * half + 2)
        ]
    assert [int(v) for v in table.thresholds] == expected


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(5, 2), Fraction(1, 2000)])
def test_geometric_thresholds_match_mpmath(gamma):
    table, truncated, size, sub = geometric_plan(gamma)
    with mpmath.workprec(400):
        q = mpmath.exp(-_mp(gamma))
        top = 1 - q ** (size + 1) if truncated else 1
        for j in [0, 1, size // 2, size - 1]:
            exact = (1 - q ** (j + 1)) / top
            assert int(table.thresholds[j]) == int(mpmath.floor(exact * TWO64))
    assert truncated == (gamma == Fraction(1, 2000))
    if truncated:
        assert sub == gamma * (size + 1)


@pytest.mark.parametrize("s2", [Fraction(9, 100), Fraction(4), Fraction(10, 3)])
def test_gaussian_thresholds_match_mpmath(s2):
    table = gaussian_table(s2)
    half = gaussian_half(s2)
    with mpmath.workdps(60):
        for j in sorted({0, 1, half, half + 1, 2 * half, 2 * half + 1}):
            exact = _gauss_cdf(s2, j - half - 1)
            assert int(table.thresholds[j]) == int(mpmath.floor(exact * TWO64)), j


def _resolution_rate(invert_fn, table, j: int, trials: int, seed: int) -> int:
    """How often a draw whose first word equals T_j is mapped to j (i.e. U < C_j)."""
    gen = np.random.default_rng(seed)
    u = np.full(trials, table.thresholds[j], dtype=np.uint64)
    return int(np.count_nonzero(invert_fn(table, u, gen) == j))


def _broken_invert(table, u, gen):
    """Negative control: ignores the undecided case (treats u == T_j as 'U >= C_j')."""
    return np.searchsorted(table.thresholds, u, side="right").astype(np.int64)


def test_forced_undecided_draws_follow_the_exact_conditional_law():
    """u == T_j forces the slow path: then P[I = j] = frac(C_j · 2^64) exactly.

    Two-sided exact binomial test at level 1e-6 (false-failure rate 1e-6); the negative
    control (a resolver that skips the slow path) must be rejected by the same harness.
    """
    print(f"seed={SEED}")
    t = Fraction(2)
    table = laplace_table(t)
    half = laplace_half(t)
    with mpmath.workprec(400):
        fracs = [
            float(mpmath.frac(_laplace_cdf(t, j - half - 1) * TWO64))
            for j in range(table.size)
        ]
    j = next(i for i, f in enumerate(fracs) if 0.25 < f < 0.75)
    trials = 4000
    hits = _resolution_rate(invert, table, j, trials, SEED)
    p = binomial_two_sided_p(hits, trials, fracs[j])
    assert p > 1e-6, f"seed={SEED}: slow path off: {hits}/{trials} vs {fracs[j]}"
    broken_hits = _resolution_rate(_broken_invert, table, j, trials, SEED)
    assert binomial_two_sided_p(broken_hits, trials, fracs[j]) < 1e-6, (
        f"seed={SEED}: control passed"
    )


def test_below_first_threshold_is_not_flagged():
    table = laplace_table(Fraction(2))
    u = np.array([0, 1, int(table.thresholds[0]) - 1], dtype=np.uint64)
    assert (invert(table, u, np.random.default_rng(0)) == 0).all()


def test_point_mass_scale_uses_the_slow_path_only_at_the_extremes():
    """At t = 1/100 the table is [0, 0, 2^64−1, 2^64−1]: only u = 0 or u = 2^64−1 is undecided."""
    table = laplace_table(Fraction(1, 100))
    assert [int(v) for v in table.thresholds] == [0, 0, 2**64 - 1, 2**64 - 1]
    u = np.array([0, 2**64 - 1, 12345], dtype=np.uint64)
    got = invert(table, u, np.random.default_rng(SEED))
    # P[U < C_0 | u = 0] = C_0·2^64 ≈ 2^64 e^{-200} ≈ 0: the exact answer is index 2 (Z = 0)
    assert got.tolist() == [2, 2, 2]
