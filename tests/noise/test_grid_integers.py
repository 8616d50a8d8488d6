"""The integer path of grid releases: rounding-error lemma, exact rescaling, the integer
releases' calibration, parameter checks and noise law (docs/proofs/noise.md, "Integer path")."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privagg.errors import ParameterError
from privagg.noise.grid import (
    gaussian_exponent,
    grid_exponent,
    grid_gaussian,
    grid_gaussian_integers,
    grid_integers,
    grid_laplace,
    grid_laplace_integers,
    laplace_exponent,
    rescale_integers,
    rounding_error,
)
from privagg.testing import chisquare_gof, discrete_gaussian_pmf, discrete_laplace_pmf

SEED = 4242
U = Fraction(1, 2**53)
B = 2**50


def _clip(v: Fraction, b: Fraction) -> Fraction:
    return max(-b, min(b, v))


# --- Lemma F: rounding a float with a relative error, at every magnitude ------------------------


def test_rounding_error_formula():
    assert rounding_error() == Fraction(1, 2)
    assert rounding_error(2 * U) == Fraction(1, 2) + 2 * U * B / (1 - 2 * U)
    assert rounding_error(3 * U, Fraction(1, 64), bound_steps=8) == (
        Fraction(1, 2) + (3 * U * 8 + Fraction(1, 64)) / (1 - 3 * U))
    assert rounding_error(3 * U + 2 * U * U, Fraction(1, 64)) < 1
    with pytest.raises(ValueError):
        rounding_error(1)


@pytest.mark.parametrize("e", [-1000, -60, 0, 7, 900])
def test_rounding_lemma_against_fractions(e):
    """Adversarial perturbations ``x̃ = fl(x(1 ± θ))`` at the edge of the allowed error, for values
    from tiny to beyond the clip bound, and ±inf: the rounding stays within λ of clip(x)/g."""
    g = Fraction(2) ** e
    theta = 3 * U
    lam = rounding_error(theta + U)  # fl() of the perturbed value adds one more rounding
    rng = np.random.default_rng(SEED)
    # magnitudes 2^E grid steps with random 53-bit mantissas (all fractional bits used)
    mags = np.concatenate([rng.integers(-60, 52, 200), rng.integers(47, 50, 300), [50, 51]])
    worst = Fraction(0)
    for mag in mags:
        steps = math.ldexp(float(rng.integers(2**52, 2**53)), int(mag) - 52)
        x = math.ldexp(steps, e) * (1 if rng.random() < 0.5 else -1)
        if not math.isfinite(x) or x == 0:
            continue
        for sign in (-1, 1):
            xt = float(Fraction(x) * (1 + sign * theta))
            k = int(grid_integers(np.array([xt]), exponent=e)[0])
            err = abs(k - _clip(Fraction(x) / g, Fraction(B)))
            worst = max(worst, err)
    assert worst <= lam, (float(worst), f"seed={SEED}")
    assert worst > Fraction(1, 2)  # the relative error does show beyond the plain rounding
    # ±inf of the right sign beyond the bound: both sides clip to ±B
    assert grid_integers(np.array([np.inf, -np.inf]), exponent=e).tolist() == [B, -B]


def test_rounding_lemma_negative_control_absolute_error_is_not_covered():
    """An error proportional to the spread (not to |x|) breaks the bound near the clip: a value
    off by 3 grid steps at 2^49 steps is reported 3 steps off, more than λ(3u)."""
    e = 0
    x = Fraction(2**49)
    xt = float(x + 3)
    k = int(grid_integers(np.array([xt]), exponent=e)[0])
    assert abs(k - x) > rounding_error(3 * U)


# --- exact rescaling -----------------------------------------------------------------------------


@pytest.mark.parametrize("shift", [-70, -3, 0, 1, 5, 40, 80])
def test_rescale_integers_exact(shift):
    rng = np.random.default_rng(SEED + shift)
    ks = [int(v) for v in rng.integers(-2**62, 2**62, size=200)] + [
        2**100 + 1, -(2**90) - 7, 0, 1, -1, 2**shift if shift > 0 else 3]
    arr = np.array(ks, dtype=object)
    out = rescale_integers(arr, from_exponent=10, to_exponent=10 + shift)
    assert out.dtype == np.int64
    for k, o in zip(ks, out.tolist()):
        exact = Fraction(k) * Fraction(2) ** (-shift)
        if abs(exact) >= B + 1:
            assert o == (B if exact > 0 else -B)
        elif shift > 0:
            assert abs(o - _clip(exact, Fraction(B))) <= Fraction(1, 2)
            assert o == math.floor(exact + Fraction(1, 2)) or abs(exact) > B
        else:
            assert o == _clip(exact, Fraction(B))


def test_rescale_is_coordinatewise():
    """A coordinate's result depends on that coordinate alone (the Lloyd-step sensitivity)."""
    a = np.array([5, 2**45 + 3, -17], dtype=np.int64)
    b = a.copy()
    b[1] += 2**40
    ra = rescale_integers(a, from_exponent=-40, to_exponent=-12)
    rb = rescale_integers(b, from_exponent=-40, to_exponent=-12)
    assert ra[0] == rb[0] and ra[2] == rb[2] and ra[1] != rb[1]


# --- the integer releases ------------------------------------------------------------------------


def test_exponent_helpers_match_the_float_releases():
    for l2, sd, d in [(0.3, 1.1, 50), (2.0, 0.01, 3), (1e-3, 0.07, 1000)]:
        assert gaussian_exponent(l2, sd, d) == grid_exponent(min(sd, l2 / math.sqrt(d)))
        r = grid_gaussian(np.zeros(d), l2_sensitivity=l2, sigma=sd, rng=SEED)
        assert r.exponent == gaussian_exponent(l2, sd, d)
        r = grid_laplace(np.zeros(d), l1_sensitivity=l2, epsilon=sd, rng=SEED)
        assert r.exponent == laplace_exponent(l2, sd, d)


def test_gaussian_integers_calibration_and_grid():
    k = np.arange(-50, 50, dtype=np.int64)
    sens, rho = Fraction(1234567, 10000), Fraction(1, 7)
    rel = grid_gaussian_integers(k, exponent=-12, l2_sensitivity_grid=sens, rho=rho, rng=SEED)
    assert rel.sensitivity_grid == sens and rel.mechanism == "gaussian"
    assert rel.noise_grid == math.ceil(sens * sens / (2 * rho))  # in the table range: exact
    assert Fraction(rel.rho) >= sens * sens / (2 * rel.noise_grid) and rel.rho <= float(rho)
    ints = np.ldexp(rel.values, 12)
    assert np.array_equal(ints, np.rint(ints)) and rel.secure is False
    assert rel.bound == math.ldexp(1.0, 50 - 12)


def test_laplace_integers_calibration():
    k = np.zeros(20, dtype=np.int64)
    rel = grid_laplace_integers(k, exponent=3, l1_sensitivity_grid=Fraction(1001, 10),
                                epsilon=Fraction(1, 3), rng=SEED)
    assert rel.sensitivity_grid == 100 and rel.noise_grid >= 300 and rel.epsilon == 1 / 3
    assert np.all(np.ldexp(rel.values, -3) == np.rint(np.ldexp(rel.values, -3)))


def test_integer_input_is_clipped_to_the_public_bound():
    k = np.array([2**62, -(2**62), 5], dtype=np.int64)
    rel = grid_gaussian_integers(k, exponent=0, l2_sensitivity_grid=1.0, rho=1e6, bound=100.0,
                                 rng=SEED)
    ints = rel.integers
    assert abs(ints[0] - 100) < 40 and abs(ints[1] + 100) < 40 and rel.bound == 100.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"k": np.array([1.5])}, "k"),
        ({"k": np.array([1], dtype=np.uint64)}, "k"),
        ({"exponent": 901}, "exponent"),
        ({"exponent": 1.0}, "exponent"),
        ({"l2_sensitivity_grid": 0}, "l2_sensitivity_grid"),
        ({"rho": -1}, "rho"),
        ({"bound": 2.0**60}, "bound"),
    ],
)
def test_gaussian_integers_public_errors(kwargs, name):
    args = {"k": np.array([1]), "exponent": 0, "l2_sensitivity_grid": 1.0, "rho": 0.5}
    args.update(kwargs)
    with pytest.raises(ParameterError, match=name):
        grid_gaussian_integers(args.pop("k"), **args, rng=SEED)


def test_laplace_integers_public_errors():
    with pytest.raises(ParameterError, match="l1_sensitivity_grid"):
        grid_laplace_integers(np.array([1]), exponent=0, l1_sensitivity_grid=0.5, epsilon=1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        grid_laplace_integers(np.array([1]), exponent=0, l1_sensitivity_grid=2, epsilon=0)


def _residuals(mechanism: str, factor: float) -> tuple[np.ndarray, object]:
    """Residuals ``released − k`` of 200 000 coordinates, with noise ``factor`` × the claimed one
    (factor 0.8 is the broken variant), and the pmf of the *claimed* law."""
    k = np.random.default_rng(SEED).integers(-1000, 1000, size=200_000)
    if mechanism == "gaussian":
        sens, rho = Fraction(3), Fraction(1, 2)
        claimed = grid_gaussian_integers(k[:1], exponent=0, l2_sensitivity_grid=sens, rho=rho,
                                         rng=SEED)
        rel = grid_gaussian_integers(k, exponent=0, l2_sensitivity_grid=sens,
                                     rho=rho / Fraction(factor) ** 2, rng=SEED + 1)
        pmf = discrete_gaussian_pmf(claimed.noise_grid)
    else:
        claimed = grid_laplace_integers(k[:1], exponent=0, l1_sensitivity_grid=4, epsilon=1,
                                        rng=SEED)
        rel = grid_laplace_integers(k, exponent=0, l1_sensitivity_grid=4,
                                    epsilon=1 / Fraction(factor), rng=SEED + 1)
        pmf = discrete_laplace_pmf(claimed.noise_grid)
    return rel.integers - k, pmf


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_integer_release_noise_law(mechanism):
    """Chi-square goodness of fit of the residuals against the claimed discrete law at level
    1e-6 (false-failure rate 1e-6); the same harness rejects 0.8 × the noise."""
    print(f"seed={SEED}")
    res, pmf = _residuals(mechanism, 1.0)
    assert chisquare_gof(res, pmf) > 1e-6, f"seed={SEED}"
    bad, pmf = _residuals(mechanism, 0.8)
    assert chisquare_gof(bad, pmf) < 1e-6, f"seed={SEED}: control"
