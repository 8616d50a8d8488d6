"""Samplers: shapes, dtypes, reproducibility, secure defaults, Bernoulli exactness."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privagg.errors import ParameterError
from privagg.noise import (
    SecureGenerator,
    bernoulli_exp,
    bernoulli_fraction,
    bernoulli_rational,
    discrete_gaussian,
    discrete_laplace,
    geometric,
)
from privagg.testing import binomial_two_sided_p

SEED = 424242
SAMPLERS = [
    lambda size, rng: discrete_laplace(2, size, rng=rng),
    lambda size, rng: discrete_laplace(5000, size, rng=rng),
    lambda size, rng: discrete_gaussian(4, size, rng=rng),
    lambda size, rng: discrete_gaussian(10**8, size, rng=rng),  # CKS path
    lambda size, rng: geometric(Fraction(1, 3), size, rng=rng),
]


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize(
    "size, shape",
    [(None, ()), (0, (0,)), (5, (5,)), ((2, 3), (2, 3)), ((4, 0, 2), (4, 0, 2))],
)
def test_shapes_and_dtype(sampler, size, shape):
    out = sampler(size, SEED)
    assert isinstance(out, np.ndarray)
    assert out.shape == shape and out.dtype == np.int64


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_seeded_runs_reproduce(sampler):
    a = sampler(1000, SEED)
    b = sampler(1000, np.random.default_rng(SEED))
    c = sampler(1000, np.random.SeedSequence(SEED))
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert not np.array_equal(a, sampler(1000, SEED + 1))


def test_default_generators_differ():
    """rng=None draws from the secure generator; two SecureGenerators have different keys."""
    a = discrete_laplace(1000, 1000)
    b = discrete_laplace(1000, 1000)
    assert not np.array_equal(a, b)
    g1, g2 = SecureGenerator(), SecureGenerator()
    assert not np.array_equal(
        discrete_gaussian(10**6, 100, rng=g1), discrete_gaussian(10**6, 100, rng=g2)
    )


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "2", None, True])
def test_bad_scale_is_a_parameter_error(bad):
    with pytest.raises(
        ParameterError, match=r"^discrete_laplace: parameter 'scale' must be"
    ):
        discrete_laplace(bad, 3, rng=1)
    with pytest.raises(
        ParameterError, match=r"^discrete_gaussian: parameter 'sigma2' must be"
    ):
        discrete_gaussian(bad, 3, rng=1)


@pytest.mark.parametrize("bad", [-1, 2.5, "3", (2, -1), [3.0]])
def test_bad_size_is_a_parameter_error(bad):
    with pytest.raises(ParameterError, match="size"):
        discrete_laplace(2, bad, rng=1)


def test_bad_rng_is_a_parameter_error():
    with pytest.raises(ParameterError, match="rng"):
        discrete_laplace(2, 3, rng="secure")


def test_float_scale_is_rounded_up_not_down():
    """0.1 → a rational >= 0.1: the draws equal those of that rational exactly."""
    a = discrete_laplace(0.1, 100, rng=SEED)
    from privagg.noise import to_fraction

    t = to_fraction(0.1, where="x", name="x")
    assert t >= Fraction(0.1)
    assert np.array_equal(a, discrete_laplace(t, 100, rng=SEED))


def test_symmetry_and_integers_small_sample():
    z = discrete_laplace(3, 200_000, rng=SEED)
    assert abs(np.mean(z)) < 0.1  # sd of the mean ~ 4.2/447 ≈ 0.01: 10 sd
    assert np.abs(z).max() < 200


@pytest.mark.parametrize("num, den", [(1, 3), (0, 5), (7, 7), (123456789, 987654321)])
def test_bernoulli_rational_rate(num, den):
    """Exact binomial test (false-failure rate 1e-6); the control uses num+1 (or num−1)."""
    print(f"seed={SEED}")
    n = 100_000
    hits = int(bernoulli_rational(num, den, n, rng=SEED).sum())
    p = num / den
    if p in (0.0, 1.0):
        assert hits == p * n
        return
    assert binomial_two_sided_p(hits, n, p) > 1e-6, f"seed={SEED}"
    other = min(den, int(num * 1.05) + 1)
    hits_bad = int(bernoulli_rational(other, den, n, rng=SEED + 1).sum())
    assert binomial_two_sided_p(hits_bad, n, p) < 1e-6, f"seed={SEED}: control"


def test_bernoulli_fraction_big_denominator():
    """p = (2^70 + 1)/2^72 ≈ 1/4 needs the word-by-word path (denominator > 2^63)."""
    print(f"seed={SEED}")
    p = Fraction(2**70 + 1, 2**72)
    n = 200_000
    hits = int(bernoulli_fraction(p, n, rng=SEED).sum())
    assert binomial_two_sided_p(hits, n, float(p)) > 1e-6, f"seed={SEED}"
    assert binomial_two_sided_p(hits, n, 0.26) < 1e-6, f"seed={SEED}: control"
    assert bernoulli_fraction(Fraction(1, 2**80), 1000, rng=SEED).sum() == 0
    assert bernoulli_fraction(Fraction(2**80 - 1, 2**80), 1000, rng=SEED).all()


@pytest.mark.parametrize("num, den", [(0, 1), (1, 2), (1, 1), (5, 3), (4, 1), (3, 7)])
def test_bernoulli_exp_rate(num, den):
    """P[True] = e^{−γ}: exact binomial test at 1e-6, control with γ × 1.1."""
    print(f"seed={SEED} gamma={num}/{den}")
    n = 200_000
    hits = int(bernoulli_exp(num, den, n, rng=SEED).sum())
    p = math.exp(-num / den)
    if num == 0:
        assert hits == n
        return
    assert binomial_two_sided_p(hits, n, p) > 1e-6, f"seed={SEED}"
    bad = int(bernoulli_exp(num * 11, den * 10, n, rng=SEED + 1).sum())
    assert binomial_two_sided_p(bad, n, p) < 1e-6, f"seed={SEED}: control"


def test_bernoulli_exp_elementwise_arrays():
    nums = np.array([0, 1, 2, 40])
    out = bernoulli_exp(nums, 1, rng=SEED)
    assert out.shape == (4,) and out.dtype == bool and out[0]
    grid = bernoulli_exp(np.array([[1], [2]]), np.array([1, 3]), rng=SEED)
    assert grid.shape == (2, 2)


@settings(max_examples=30, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 50), max_value=Fraction(3000)),
    st.integers(0, 2**32),
)
def test_laplace_any_rational_scale_runs(scale, seed):
    z = discrete_laplace(scale, 64, rng=seed)
    assert z.dtype == np.int64 and z.shape == (64,)


def test_bernoulli_exp_huge_denominator_splits_rounds():
    """den·k overflowing int64 uses Bernoulli(num/den) ∧ Bernoulli(1/k): rate still e^{-γ}."""
    print(f"seed={SEED}")
    den = 2**62 + 1
    num = den // 2  # γ ≈ 1/2
    n = 200_000
    hits = int(bernoulli_exp(np.full(n, num), den, rng=SEED).sum())
    p = math.exp(-num / den)
    assert binomial_two_sided_p(hits, n, p) > 1e-6, f"seed={SEED}"
    assert binomial_two_sided_p(hits, n, math.exp(-0.55)) < 1e-6, (
        f"seed={SEED}: control"
    )


def test_scalar_big_integer_bernoulli_exp():
    """The big-integer path (used for huge tail exponents) has rate e^{-γ} (γ = 3/2 here)."""
    from privagg.noise.samplers import _bern_exp_scalar

    print(f"seed={SEED}")
    gen = np.random.default_rng(SEED)
    big = 10**30
    n = 20_000
    hits = sum(_bern_exp_scalar(3 * big, 2 * big, gen) for _ in range(n))
    assert binomial_two_sided_p(hits, n, math.exp(-1.5)) > 1e-6, f"seed={SEED}"
    assert binomial_two_sided_p(hits, n, math.exp(-1.7)) < 1e-6, f"seed={SEED}: control"


def test_gaussian_tail_with_big_denominator_does_not_overflow():
    from privagg.noise.samplers import _gaussian_tail

    s2 = Fraction(3**41, 3**39 + 1)  # σ² ≈ 9, denominator > 2^62
    j = _gaussian_tail(s2, 5, 2000, np.random.default_rng(SEED))
    assert j.min() >= 0 and j.dtype == np.int64
