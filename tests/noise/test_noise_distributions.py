"""Analytic functions: known answers against mpmath (independent, 60+ digits)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privagg.errors import ParameterError
from privagg.noise import DiscreteGaussian, DiscreteLaplace
from privagg.noise import distributions as dist

mpmath.mp.prec = 300  # references at 300 bits: far below float resolution


def _mp(fr: Fraction) -> mpmath.mpf:
    return mpmath.mpf(fr.numerator) / fr.denominator


def _assert_rounded_up(got: float, exact: mpmath.mpf) -> None:
    """``got`` is the smallest float >= exact (or the smallest subnormal for tinier values)."""
    assert mpmath.mpf(got) >= exact
    if got > 5e-324:
        assert mpmath.mpf(math.nextafter(got, 0.0)) < exact


class LaplaceRef:
    """Closed forms of the geometric series (checked against direct summation below)."""

    def __init__(self, t: Fraction):
        self.q = mpmath.exp(-1 / _mp(t))

    def pmf(self, k):
        return (1 - self.q) / (1 + self.q) * self.q ** abs(k)

    def sf(self, k):  # P[Z >= k]
        if k >= 1:
            return self.q**k / (1 + self.q)
        return 1 - self.q ** (1 - k) / (1 + self.q)

    def abs_tail(self, k):
        return 1 if k < 0 else 2 * self.q ** (k + 1) / (1 + self.q)


class GaussRef:
    """Direct finite sums over |k| <= reach; the omitted mass is < 1e-80 of the total."""

    def __init__(self, s2: Fraction):
        self.s2 = _mp(s2)
        self.reach = int(20 * math.sqrt(s2)) + 20
        self.norm = self.w(0) + 2 * mpmath.fsum(self.w(k) for k in range(1, self.reach))

    def w(self, k):
        return mpmath.exp(-(mpmath.mpf(k) ** 2) / (2 * self.s2))

    def pmf(self, k):
        return self.w(k) / self.norm

    def _upper(self, k):  # sum_{j>=k} w_j for k >= 1
        return mpmath.fsum(self.w(j) for j in range(k, max(k, self.reach) + self.reach))

    def sf(self, k):
        if k >= 1:
            return self._upper(k) / self.norm
        return 1 - self._upper(1 - k) / self.norm

    def abs_tail(self, k):
        return 1 if k < 0 else 2 * self._upper(k + 1) / self.norm

    def variance(self):
        return (
            2 * mpmath.fsum(k * k * self.w(k) for k in range(1, self.reach)) / self.norm
        )


def test_laplace_closed_forms_against_direct_summation():
    for t in [Fraction(1, 2), Fraction(3)]:
        ref = LaplaceRef(t)
        with mpmath.workprec(120):
            for k in [-4, 0, 1, 5]:
                direct = mpmath.nsum(ref.pmf, [k, mpmath.inf])
                assert mpmath.almosteq(ref.sf(k), direct, rel_eps=mpmath.mpf(2) ** -100)


LAPLACE_SCALES = [
    Fraction(1, 100),
    Fraction(1, 2),
    Fraction(1),
    Fraction(2),
    Fraction(10, 3),
    Fraction(1000),
]
GAUSS_S2 = [Fraction(9, 100), Fraction(1, 3), Fraction(1), Fraction(4), Fraction(100)]
BETAS = [0.9, 0.5, 0.3, 0.05, 1e-3, 1e-6, 1e-12]


def test_histogram_thresholds_known_answer():
    """The stable histogram uses T = 1 + upper_quantile(δ): ε = 1, δ = 1e-6 → 28 and 15."""
    assert 1 + DiscreteLaplace(Fraction(2)).upper_quantile(1e-6) == 28
    assert 1 + DiscreteLaplace(Fraction(1)).upper_quantile(1e-6) == 15


@pytest.mark.parametrize("t", LAPLACE_SCALES)
def test_laplace_functions_are_rounded_up(t):
    d, ref = DiscreteLaplace(t), LaplaceRef(t)
    for k in [-3, -1, 0, 1, 2, 7, 40]:
        _assert_rounded_up(d.pmf(k), ref.pmf(k))
        _assert_rounded_up(d.sf(k), ref.sf(k))
        _assert_rounded_up(d.abs_tail(k), ref.abs_tail(k))
    q = ref.q
    _assert_rounded_up(d.variance, 2 * q / (1 - q) ** 2)


@pytest.mark.parametrize("t", LAPLACE_SCALES)
def test_laplace_quantiles_are_the_smallest_valid_integers(t):
    d, ref = DiscreteLaplace(t), LaplaceRef(t)
    for beta in BETAS:
        k = d.upper_quantile(beta)
        assert ref.sf(k) <= beta < ref.sf(k - 1), (t, beta, k)
        a = d.abs_quantile(beta)
        assert ref.abs_tail(a) <= beta and (a == 0 or ref.abs_tail(a - 1) > beta), (
            t,
            beta,
            a,
        )


@pytest.mark.parametrize("s2", GAUSS_S2)
def test_gaussian_functions_are_rounded_up(s2):
    g, ref = DiscreteGaussian(s2), GaussRef(s2)
    for k in [-3, -1, 0, 1, 2, 7, 40]:
        _assert_rounded_up(g.pmf(k), ref.pmf(k))
        _assert_rounded_up(g.sf(k), ref.sf(k))
        _assert_rounded_up(g.abs_tail(k), ref.abs_tail(k))
    assert mpmath.mpf(g.variance) >= ref.variance()
    assert g.variance <= float(s2) * (1 + 1e-12)


@pytest.mark.parametrize("s2", GAUSS_S2)
def test_gaussian_quantiles_are_the_smallest_valid_integers(s2):
    g, ref = DiscreteGaussian(s2), GaussRef(s2)
    for beta in BETAS:
        k = g.upper_quantile(beta)
        assert ref.sf(k) <= beta < ref.sf(k - 1), (s2, beta, k)
        a = g.abs_quantile(beta)
        assert ref.abs_tail(a) <= beta and (a == 0 or ref.abs_tail(a - 1) > beta), (
            s2,
            beta,
            a,
        )


def _sum_abs_tail(t: float, m: int, k: int) -> float:
    """P[|Z_1+…+Z_m| > k] by exact convolution of the (truncated) pmf in float64."""
    q = math.exp(-1 / t)
    reach = int(60 * t) + 60
    ks = np.arange(-reach, reach + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(ks)
    total = np.array([1.0])
    for _ in range(m):
        total = np.convolve(total, pmf)
    support = np.arange(total.size) - m * reach
    return float(total[np.abs(support) > k].sum())


@pytest.mark.parametrize("t, m", [(2.0, 1), (2.0, 5), (1.0, 20), (0.5, 10)])
def test_sum_abs_quantile_is_valid_and_not_loose(t, m):
    d = DiscreteLaplace(t)
    for beta in [0.05, 1e-3]:
        k = d.sum_abs_quantile(m, beta)
        assert _sum_abs_tail(t, m, k) <= beta
        # Chernoff is within a modest factor of the exact quantile
        exact = next(j for j in range(10 * k + 10) if _sum_abs_tail(t, m, j) <= beta)
        assert k <= 1.6 * exact + 3, (k, exact)
    assert d.sum_abs_quantile(1, 0.05) == d.abs_quantile(0.05)


def test_repeated_calls_hit_the_cache():
    d = DiscreteLaplace(Fraction(7, 3))
    d.upper_quantile(1e-6)
    before = dist._dl_upper_quantile.cache_info().hits
    for _ in range(10):
        DiscreteLaplace(Fraction(7, 3)).upper_quantile(1e-6)
    assert dist._dl_upper_quantile.cache_info().hits == before + 10


def test_constructor_normalises_and_validates():
    assert DiscreteLaplace(2.0).scale == Fraction(2)
    assert DiscreteGaussian(0.5).sigma2 == Fraction(1, 2)
    assert DiscreteLaplace(0.1).scale >= Fraction(0.1)
    with pytest.raises(ParameterError):
        DiscreteLaplace(-1)
    with pytest.raises(ParameterError):
        DiscreteGaussian(float("nan"))
    with pytest.raises(ParameterError, match="beta"):
        DiscreteLaplace(2).upper_quantile(1.5)


def test_tiny_tails_round_up_to_the_smallest_subnormal():
    assert DiscreteLaplace(1).sf(10**6) == 5e-324
    assert DiscreteGaussian(1).sf(10**4) == 5e-324
    assert DiscreteLaplace(Fraction(1, 100)).abs_tail(0) > 0


@settings(max_examples=40, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 20), max_value=Fraction(200)),
    st.floats(min_value=1e-12, max_value=0.45),
    st.floats(min_value=1.01, max_value=100.0),
)
def test_quantiles_are_monotone(scale, beta, factor):
    """Smaller β or a wider law never gives a smaller threshold (calibration never undershoots)."""
    d = DiscreteLaplace(scale)
    assert d.upper_quantile(beta / factor) >= d.upper_quantile(beta)
    assert DiscreteLaplace(scale * 2).upper_quantile(beta) >= d.upper_quantile(beta)
    assert d.abs_quantile(beta / factor) >= d.abs_quantile(beta)
    g = DiscreteGaussian(scale)
    assert g.upper_quantile(beta / factor) >= g.upper_quantile(beta)
    assert DiscreteGaussian(scale * 2).upper_quantile(beta) >= g.upper_quantile(beta)
