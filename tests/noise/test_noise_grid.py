"""Grid release: exact grid multiples, inflated sensitivity, no errors on data, noise law."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privagg.errors import ParameterError
from privagg.noise import GridRelease, grid_exponent, grid_gaussian, grid_laplace
from privagg.testing import chisquare_gof, discrete_gaussian_pmf, discrete_laplace_pmf

SEED = 31337


def _is_grid(values: np.ndarray, exponent: int) -> bool:
    k = np.ldexp(values, -exponent)
    return bool(np.all(k == np.rint(k)) and np.all(np.ldexp(k, exponent) == values))


@pytest.mark.parametrize(
    "scale, e", [(1.0, -10), (1.5, -10), (0.999, -11), (2.0**-30, -40), (3000.0, 1)]
)
def test_grid_exponent(scale, e):
    assert grid_exponent(scale) == e
    assert 2.0**e <= scale * 2.0**-10 < 2.0 ** (e + 1)


@pytest.mark.parametrize("release", ["laplace", "gaussian"])
def test_outputs_are_exact_grid_multiples(release):
    x = np.random.default_rng(SEED).normal(scale=100, size=(50, 7))
    if release == "laplace":
        r = grid_laplace(x, l1_sensitivity=0.3, epsilon=0.7, rng=SEED)
    else:
        r = grid_gaussian(x, l2_sensitivity=0.3, sigma=1.1, rng=SEED)
    assert (
        isinstance(r, GridRelease)
        and r.values.shape == x.shape
        and r.values.dtype == np.float64
    )
    assert _is_grid(r.values, r.exponent)
    assert np.array_equal(np.ldexp(r.integers.astype(np.float64), r.exponent), r.values)
    assert r.secure is False


def test_laplace_sensitivity_and_scale():
    x = np.zeros(12)
    r = grid_laplace(x, l1_sensitivity=0.3, epsilon=0.5, rng=SEED)
    g = Fraction(2) ** r.exponent
    assert r.sensitivity_grid == math.floor(Fraction(0.3) / g) + 12
    assert r.noise_grid >= r.sensitivity_grid / Fraction(0.5)
    assert r.epsilon == 0.5 and r.rho is None and r.mechanism == "laplace"


def test_gaussian_sensitivity_and_rho():
    x = np.zeros(9)
    r = grid_gaussian(x, l2_sensitivity=0.2, sigma=0.9, rng=SEED)
    g = Fraction(2) ** r.exponent
    assert r.sensitivity_grid >= Fraction(0.2) / g + 3  # sqrt(9) = 3
    assert r.sensitivity_grid <= Fraction(0.2) / g + 3 + Fraction(1, 2**29)
    assert r.rho <= 0.2**2 / (2 * 0.9**2)
    assert r.noise_grid.denominator == 1


def test_non_finite_and_huge_data_never_raise():
    x = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300, 0.5])
    r = grid_laplace(x, l1_sensitivity=1.0, epsilon=1.0, bound=10.0, rng=SEED)
    assert np.all(np.isfinite(r.values)) and _is_grid(r.values, r.exponent)
    assert r.bound == 10.0
    r2 = grid_gaussian(x, l2_sensitivity=1.0, sigma=1.0, rng=SEED)  # default bound
    assert np.all(np.isfinite(r2.values))


def test_public_parameter_errors():
    with pytest.raises(ParameterError, match="bound"):
        grid_laplace([1.0], l1_sensitivity=1.0, epsilon=1.0, bound=1e30)
    with pytest.raises(ParameterError, match="epsilon"):
        grid_laplace([1.0], l1_sensitivity=1.0, epsilon=0)
    with pytest.raises(ParameterError, match="sigma"):
        grid_gaussian([1.0], l2_sensitivity=1.0, sigma=-1)


def test_secure_default_and_reproducible_seed():
    x = np.arange(5.0)
    assert grid_laplace(x, l1_sensitivity=1, epsilon=1).secure is True
    a = grid_gaussian(x, l2_sensitivity=1, sigma=1, rng=SEED).values
    b = grid_gaussian(x, l2_sensitivity=1, sigma=1, rng=SEED).values
    assert np.array_equal(a, b)


def test_rounding_moves_each_coordinate_by_at_most_half_a_step():
    """With the noise removed (its known draws subtracted), the grid point is within g/2 of x."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(-5, 5, size=10_000)
    r = grid_laplace(x, l1_sensitivity=1.0, epsilon=1.0, rng=SEED)
    from privagg.noise.samplers import _laplace_flat

    z = _laplace_flat(r.noise_grid, x.size, np.random.default_rng(SEED))
    rounded = np.ldexp((r.integers - z).astype(np.float64), r.exponent)
    assert np.max(np.abs(rounded - x)) <= 2.0 ** (r.exponent - 1)


@pytest.mark.slow
@pytest.mark.parametrize("release", ["laplace", "gaussian"])
def test_grid_noise_follows_the_stated_law(release):
    """Residuals (released integers − rounded input) of 300 releases of a 1000-vector fit the
    stated noise law (p > 1e-6, false-failure rate 1e-6); negative control: releases with
    0.8 × the noise are rejected by the same harness."""
    print(f"seed={SEED}")
    x = np.random.default_rng(SEED).uniform(-1, 1, size=1000)
    rounded = np.rint(np.ldexp(x, 3)).astype(np.int64)

    def residuals(factor):
        out = []
        for i in range(300):
            if release == "laplace":
                r = grid_laplace(
                    x,
                    l1_sensitivity=1.0,
                    epsilon=1.0 / factor,
                    exponent=-3,
                    rng=SEED + i,
                )
            else:
                r = grid_gaussian(
                    x, l2_sensitivity=1.0, sigma=3.0 * factor, exponent=-3, rng=SEED + i
                )
            out.append(r.integers - rounded)
        return r, np.concatenate(out)

    r, res = residuals(1.0)
    pmf = (
        discrete_laplace_pmf(r.noise_grid)
        if release == "laplace"
        else discrete_gaussian_pmf(r.noise_grid)
    )
    assert chisquare_gof(res, pmf) > 1e-6, f"seed={SEED}"
    _, bad = residuals(0.8)
    assert chisquare_gof(bad, pmf) < 1e-6, f"seed={SEED}: control"


@pytest.mark.parametrize(
    "target", [1, 100, 1_864_000, 1_864_135, 10**12 + 7, 10**16 + 3]
)
def test_cks_friendly_variance(target):
    from privagg.noise._laws import gaussian_half
    from privagg.noise.grid import _cks_friendly

    s2 = _cks_friendly(target)
    assert s2 >= target
    if gaussian_half(Fraction(target)):
        assert s2 == target
    else:
        t = math.isqrt(s2) + 1
        assert s2 % t == 0 and s2 - target < 2 * t


def test_wide_grid_gaussian_uses_small_numbers():
    """d = 10^4 puts σ_g beyond the table: the CKS path must run (no ParameterError)."""
    r = grid_gaussian(np.zeros(10_000), l2_sensitivity=1.0, sigma=5.0, rng=SEED)
    assert r.noise_grid > 1365**2 and _is_grid(r.values, r.exponent)
    assert (
        abs(float(np.std(r.values)) / 5.0 - 1) < 0.05
    )  # inflation <= 2^-10, sd error ~1%
