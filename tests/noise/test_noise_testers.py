"""The statistical testers of privagg.testing, each tested both ways.

Independent references: scipy.stats.dlaplace (sampler and pmf) and textbook Wilson intervals.
False-failure rates: each assertion at level 1e-6 unless stated.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from privagg.testing import (
    binomial_two_sided_p,
    chisquare_gof,
    clopper_pearson_lower,
    clopper_pearson_upper,
    discrete_gaussian_pmf,
    discrete_laplace_pmf,
    wilson_interval,
    wilson_lower,
    wilson_upper,
)

SEED = 99_2026


def test_chisquare_accepts_an_independent_correct_sampler_and_rejects_a_narrow_one():
    print(f"seed={SEED}")
    t = 3.0
    good = stats.dlaplace(1 / t).rvs(size=200_000, random_state=SEED)
    assert chisquare_gof(good, discrete_laplace_pmf(t)) > 1e-6, f"seed={SEED}"
    narrow = stats.dlaplace(1 / (0.8 * t)).rvs(size=200_000, random_state=SEED + 1)
    assert chisquare_gof(narrow, discrete_laplace_pmf(t)) < 1e-6, f"seed={SEED}"


def test_chisquare_is_calibrated_under_the_null():
    """Under the null, P[p < 0.05] = 0.05: 400 small replications, exact binomial test at 1e-6.

    Fails for an anti-conservative tester (too many small p) and for a tester that never
    rejects (zero small p would give a binomial p-value ~1e-9).
    """
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    pmf = discrete_laplace_pmf(2.0)
    small = 0
    reps = 400
    for _ in range(reps):
        x = stats.dlaplace(0.5).rvs(size=3000, random_state=rng)
        small += chisquare_gof(x, pmf) < 0.05
    assert binomial_two_sided_p(small, reps, 0.05) > 1e-6, (
        f"seed={SEED}: {small}/{reps}"
    )


def test_reference_pmfs_match_mpmath():
    lap = discrete_laplace_pmf(2.5)
    gau = discrete_gaussian_pmf(2.25)
    ks = np.array([-3, 0, 4])
    q = mpmath.exp(-1 / mpmath.mpf(2.5))
    norm = mpmath.nsum(lambda k: mpmath.exp(-k * k / 4.5), [-mpmath.inf, mpmath.inf])
    for k, a, b in zip(ks, lap(ks), gau(ks)):
        assert math.isclose(
            a, float((1 - q) / (1 + q) * q ** abs(int(k))), rel_tol=1e-13
        )
        assert math.isclose(
            b, float(mpmath.exp(-(int(k) ** 2) / 4.5) / norm), rel_tol=1e-13
        )


def test_wilson_textbook_values():
    lo, hi = wilson_interval(5, 10, 0.05)
    assert math.isclose(lo, 0.236593, abs_tol=1e-6) and math.isclose(
        hi, 0.763407, abs_tol=1e-6
    )
    assert math.isclose(wilson_interval(0, 10, 0.05)[1], 0.277533, abs_tol=1e-6)
    assert wilson_upper(0, 10, 0.025) == pytest.approx(wilson_interval(0, 10, 0.05)[1])


def test_wilson_bounds_detect_a_rate_above_the_claim():
    """A mechanism claiming rate <= 0.02 is accepted at true rate 0.02 and rejected at 0.03."""
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    n = 100_000
    ok = int((rng.random(n) < 0.02).sum())
    assert wilson_lower(ok, n) <= 0.02 <= wilson_upper(ok, n), f"seed={SEED}"
    bad = int((rng.random(n) < 0.03).sum())
    assert wilson_lower(bad, n) > 0.02, f"seed={SEED}: control"


def test_wilson_coverage():
    """Coverage of the 1 − α upper bound, α = 0.05, 1000 replications (binomial test at 1e-6)."""
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    hits = rng.binomial(2000, 0.01, size=1000)
    misses = sum(0.01 > wilson_upper(int(h), 2000, 0.05) for h in hits)
    assert misses <= 50 + 6 * math.sqrt(1000 * 0.05), f"seed={SEED}: {misses}"
    # a deliberately broken bound (the point estimate) misses about half the time
    assert sum(0.01 > h / 2000 for h in hits) > 300


def test_errors():
    with pytest.raises(ValueError):
        wilson_upper(3, 2)
    with pytest.raises(ValueError):
        chisquare_gof([], discrete_laplace_pmf(1))


def test_chisquare_accepts_scalar_pmfs():
    """The certified scalar pmf of DiscreteLaplace works too (same verdicts both ways)."""
    from privagg.noise import DiscreteLaplace, discrete_laplace

    print(f"seed={SEED}")
    pmf = DiscreteLaplace(2).pmf
    assert chisquare_gof(discrete_laplace(2, 100_000, rng=SEED), pmf) > 1e-6, (
        f"seed={SEED}"
    )
    assert chisquare_gof(discrete_laplace(1.6, 100_000, rng=SEED), pmf) < 1e-6, (
        f"seed={SEED}"
    )


def test_clopper_pearson_known_answers():
    """Closed forms at the edges: ``k = 0`` gives the upper bound ``1 − α^{1/n}``, ``k = n`` the
    lower bound ``α^{1/n}``; 0 and 1 on the other side; the bounds bracket the point estimate."""
    assert clopper_pearson_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** 0.1, rel=1e-12)
    assert clopper_pearson_lower(10, 10, 0.05) == pytest.approx(0.05 ** 0.1, rel=1e-12)
    assert clopper_pearson_lower(0, 10, 0.05) == 0.0 and clopper_pearson_upper(10, 10, 0.05) == 1.0
    lo, hi = clopper_pearson_lower(30, 100, 0.025), clopper_pearson_upper(30, 100, 0.025)
    assert lo < 0.3 < hi and lo == pytest.approx(0.2124, abs=1e-4) and hi == pytest.approx(0.3998, abs=1e-4)


def test_clopper_pearson_coverage():
    """Coverage of the 1 − α bounds, α = 0.05, 1000 replications at rate 0.01 (binomial test at
    about 1e-6 as for Wilson's); a broken bound (the point estimate) misses about half the time."""
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    hits = rng.binomial(2000, 0.01, size=1000)
    over = sum(0.01 > clopper_pearson_upper(int(h), 2000, 0.05) for h in hits)
    under = sum(0.01 < clopper_pearson_lower(int(h), 2000, 0.05) for h in hits)
    limit = 50 + 6 * math.sqrt(1000 * 0.05)
    assert over <= limit and under <= limit, f"seed={SEED}: {over}, {under}"
    assert sum(0.01 > h / 2000 for h in hits) > 300
