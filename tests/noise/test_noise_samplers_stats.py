"""Goodness of fit of the exact samplers (10^6 draws), each with a negative control.

Every chi-square test uses a fixed, printed seed and rejects at p < 1e-6, so the false-failure
rate of each assertion is 1e-6 (about 3e-5 for the whole file). Each negative control draws
from the same sampler at 0.8 × the scale (less noise, the typical bug) and asserts that the
same harness rejects it; at the scales chosen 10^6 draws separate t from 0.8t by far.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from privagg.noise import (
    DiscreteLaplace,
    discrete_gaussian,
    discrete_laplace,
    geometric,
)
from privagg.noise.samplers import _gaussian_cks, _gaussian_tail
from privagg.testing import chisquare_gof, discrete_gaussian_pmf, discrete_laplace_pmf

N = 10**6
ALPHA = 1e-6
SEED = 7_2026


def _check(sampler, pmf, seed: int) -> float:
    return chisquare_gof(sampler(np.random.default_rng(seed)), pmf)


@pytest.mark.slow
@pytest.mark.parametrize(
    "scale", [Fraction(1, 10), Fraction(1, 2), 2, 10, 100, 1000, 5000]
)
def test_discrete_laplace_fits_exact_pmf(scale):
    """Scales 0.1 … 1000 use the two-sided table, 5000 the G1 − G2 path with split geometrics."""
    print(f"seed={SEED} scale={scale}")
    pmf = discrete_laplace_pmf(scale)
    p = _check(lambda g: discrete_laplace(scale, N, rng=g), pmf, SEED)
    assert p > ALPHA, f"seed={SEED} scale={scale}: p={p}"
    p_bad = _check(
        lambda g: discrete_laplace(Fraction(scale) * Fraction(4, 5), N, rng=g),
        pmf,
        SEED + 1,
    )
    assert p_bad < ALPHA, (
        f"seed={SEED} negative control not rejected at scale={scale}: p={p_bad}"
    )


@pytest.mark.slow
def test_discrete_laplace_point_mass_scale():
    """At t = 0.01, P[Z != 0] = 2e^{-100}/(1+e^{-100}) < 1e-43: 10^6 draws must all be 0.

    A chi-square cannot tell t from 0.8t here (both are point masses in 10^6 draws); what can
    fail is a non-zero output, and the negative control (t = 0.5) shows the check detects noise.
    """
    print(f"seed={SEED}")
    assert DiscreteLaplace(Fraction(1, 100)).abs_tail(0) < 1e-43
    assert not np.any(discrete_laplace(0.01, N, rng=SEED))
    assert np.any(discrete_laplace(0.5, N, rng=SEED)), (
        "negative control: noise must be visible"
    )


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [Fraction(3, 10), 1, 2, 10, 100, 1000])
def test_discrete_gaussian_fits_exact_pmf(sigma):
    s2 = Fraction(sigma) ** 2
    print(f"seed={SEED} sigma={sigma}")
    pmf = discrete_gaussian_pmf(s2)
    p = _check(lambda g: discrete_gaussian(s2, N, rng=g), pmf, SEED)
    assert p > ALPHA, f"seed={SEED} sigma={sigma}: p={p}"
    bad = s2 * Fraction(16, 25)  # σ × 0.8
    p_bad = _check(lambda g: discrete_gaussian(bad, N, rng=g), pmf, SEED + 1)
    assert p_bad < ALPHA, (
        f"seed={SEED} negative control not rejected at sigma={sigma}: p={p_bad}"
    )


@pytest.mark.slow
def test_cks_fallback_fits_exact_pmf():
    """The Canonne–Kamath–Steinke path (used beyond the table range), tested at σ = 3."""
    s2 = Fraction(9)
    print(f"seed={SEED}")
    pmf = discrete_gaussian_pmf(s2)
    p = _check(lambda g: _gaussian_cks(s2, N // 4, g), pmf, SEED)
    assert p > ALPHA, f"seed={SEED}: p={p}"
    p_bad = _check(
        lambda g: _gaussian_cks(s2 * Fraction(16, 25), N // 4, g), pmf, SEED + 1
    )
    assert p_bad < ALPHA, f"seed={SEED}: negative control p={p_bad}"


def test_gaussian_tail_sampler_fits_conditional_law():
    """|Z| − K given |Z| >= K (the table's tail, probability ~1e-8 in normal use), σ = 2, K = 3."""
    s2, start = Fraction(4), 3
    print(f"seed={SEED}")
    ks = np.arange(0, 200)
    w = np.exp(-((ks + start) ** 2) / 8.0)
    cond = w / w.sum()

    def pmf(k):
        return np.where((k >= 0) & (k < 200), cond[np.clip(k, 0, 199)], 0.0)

    p = _check(lambda g: _gaussian_tail(s2, start, 200_000, g), pmf, SEED)
    assert p > ALPHA, f"seed={SEED}: p={p}"
    p_bad = _check(
        lambda g: _gaussian_tail(s2, start + 1, 200_000, g) + 0, pmf, SEED + 1
    )
    assert p_bad < ALPHA, f"seed={SEED}: negative control p={p_bad}"


@pytest.mark.parametrize("gamma", [Fraction(1, 4), Fraction(3), Fraction(1, 3000)])
def test_geometric_fits_exact_pmf(gamma):
    """Full table with memoryless rounds (γ = 1/4, 3) and the quotient/remainder split (1/3000)."""
    print(f"seed={SEED} gamma={gamma}")
    q = float(np.exp(-float(gamma)))

    def pmf_for(qq):
        return lambda k: np.where(
            k >= 0, (1 - qq) * qq ** np.maximum(k, 0).astype(float), 0.0
        )

    p = _check(lambda g: geometric(gamma, 200_000, rng=g), pmf_for(q), SEED)
    assert p > ALPHA, f"seed={SEED}: p={p}"
    p_bad = _check(
        lambda g: geometric(gamma * Fraction(5, 4), 200_000, rng=g),
        pmf_for(q),
        SEED + 1,
    )
    assert p_bad < ALPHA, f"seed={SEED}: negative control p={p_bad}"
