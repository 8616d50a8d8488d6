"""Noise scales beyond int64: refused (ParameterError) instead of wrapping.

Regression for 4bd1e9f: ``discrete_laplace`` at scale ``3^80/(2^60+1)`` (~1.3e20) returned
wrapped int64 values (e.g. 8304740181910315742), at ``10^400`` it raised ZeroDivisionError
(whole table) or wrapped (lazy path); ``discrete_gaussian`` with an unsupported σ² passed at
``size=0`` and could fail *after* drawing (a random proposal whose exponent overflowed).
Bound and argument: ``MAX_NOISE_SCALE`` in privagg.noise.samplers, docs/proofs/noise.md §8.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.noise.samplers as samplers
from privagg.errors import ParameterError
from privagg.noise.samplers import discrete_gaussian, discrete_laplace

BOUND = Fraction(2**50)
SEED = 20261201
N = 4000


@pytest.mark.parametrize("scale", [BOUND + Fraction(1, 2**30), Fraction(3**80, 2**60 + 1),
                                   Fraction(10**30 + 1, 7), Fraction(10**400)])
@pytest.mark.parametrize("n", [0, 1, 5, 100_000])  # lazy tables (n < 1024) and whole tables
def test_scale_above_bound_raises(scale, n):
    with pytest.raises(ParameterError, match="scale"):
        discrete_laplace(scale, size=n, rng=1)


def test_bound_is_public():
    assert samplers.MAX_NOISE_SCALE == BOUND


def _sign_symmetry_ok(z: np.ndarray) -> bool:
    """Positives among the nonzero draws ~ Binomial(m, 1/2); |pos − m/2| <= 4.5·√m/2.
    False-failure rate about 7e-6 (normal approximation, m ≈ N)."""
    nz = z[z != 0]
    m = nz.size
    return abs(int((nz > 0).sum()) - m / 2) <= 4.5 * math.sqrt(m) / 2


@pytest.mark.parametrize("scale", [BOUND, BOUND - 1, Fraction(2**49 + 3, 3)])
def test_scales_at_the_bound_are_in_the_law(scale):
    print(f"seed {SEED}")
    z = discrete_laplace(scale, size=N, rng=SEED)
    assert z.dtype == np.int64
    assert int(np.abs(z).max()) < 2**62
    assert _sign_symmetry_ok(z)
    # E|Z| = 2q/(1 − q²) ≈ t; sd(|Z|/t) ≈ 1, so the mean of N lies within ±0.1 (6 sd;
    # false-failure rate < 1e-8).
    assert 0.9 <= float(np.abs(z).mean()) / float(scale) <= 1.1


def test_sign_symmetry_harness_rejects_a_broken_sampler():
    """Negative control: |Z| (one-sided) and a wrapped shift fail the same checks."""
    z = discrete_laplace(BOUND, size=N, rng=SEED)
    assert not _sign_symmetry_ok(np.abs(z))
    assert not _sign_symmetry_ok(z + np.int64(2**62))  # what a wrap toward one side looks like


def test_geometric_saturates_instead_of_wrapping(monkeypatch):
    """With the bound lifted, the split ``G = (K+1)A + B`` at 1/γ ~ 1.3e20 saturates at
    2^63 − 1: draws stay >= 0 (4bd1e9f wrapped them to negative values)."""
    monkeypatch.setattr(samplers, "MAX_NOISE_SCALE", Fraction(10**100), raising=False)
    g = samplers._geometric_flat(Fraction(2**60 + 1, 3**80), 2000, np.random.default_rng(SEED))
    assert g.min() >= 0
    # ~93% of draws exceed 2^63 here; a saturated A gives (A_max)(K+1) + B > 2^63 − 1 − 2^14.
    assert int(g.max()) > np.iinfo(np.int64).max - 2**14


# ----------------------------------------------------------------------------- Gaussian
_T = 2**27
_LARGEST_S2 = Fraction(_T * (_T - 1))  # CKS: t = 2^27, a = 1, b = t − 1, den = 2t(t−1) < 2^55
_REFUSED_S2 = Fraction((_T + 1) * _T)  # den = 2t(t+1) > (2^63 − 1) >> 8


@pytest.mark.parametrize("n", [0, 3])
def test_gaussian_unsupported_variance_refused_before_any_draw(n):
    gen = np.random.default_rng(SEED)
    before = gen.bit_generator.state
    for s2 in (_REFUSED_S2, Fraction(10**40)):
        with pytest.raises(ParameterError, match="sigma2"):
            discrete_gaussian(s2, size=n, rng=gen)
    assert gen.bit_generator.state == before


def test_gaussian_largest_supported_variance_runs():
    z = discrete_gaussian(_LARGEST_S2, size=200, rng=SEED)
    assert z.dtype == np.int64 and int(np.abs(z).max()) < 2**40
    assert 0.7 < float(np.std(z)) / _T < 1.3  # σ ≈ 2^27; 200 draws: sd of the ratio ≈ 0.05


def test_gaussian_huge_proposal_does_not_raise(monkeypatch):
    """A CKS proposal |Y| whose exponent (|Y|·a − b)² exceeds int64 (probability ~e^-23 per
    draw at σ ≈ 2^27) is decided by the exact big-integer path; 4bd1e9f raised ParameterError
    here, after the draws (and after a mechanism's charge)."""
    real = samplers._laplace_flat
    calls = {"n": 0}

    def first_huge(scale, n, gen):
        calls["n"] += 1
        y = real(scale, n, gen)
        if calls["n"] == 1:
            y[0] = 10**10  # (10^10 − b)² ≈ 1e20 > 2^63
        return y

    monkeypatch.setattr(samplers, "_laplace_flat", first_huge)
    z = samplers._gaussian_cks(_LARGEST_S2, 8, np.random.default_rng(SEED))
    assert z.shape == (8,) and int(np.abs(z).max()) < 10**10
