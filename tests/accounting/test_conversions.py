"""zCDP → (ε, δ) conversion against an independent mpmath computation.

Known answers: ε* = max(0, inf_{α>1} ε(α)) with the CKS expression, minimised at 40 digits by
bisection on its derivative (an independent route from the library's float search + interval
evaluation). "Never optimistic" is checked two ways: ε ≥ ε* (CKS) and the exact privacy profile of
the Gaussian mechanism (a ρ-zCDP mechanism; Balle & Wang 2018) stays ≤ δ at the returned ε. Each
harness is run on a deliberately optimistic conversion and must reject it. All checks are
deterministic (no sampling), so the false-failure rate is 0.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privagg.accounting import PrivacyLoss, simple_zcdp_epsilon, zcdp_to_epsilon
from privagg.accounting.conversions import zcdp_epsilon_at

CTX = mp.MPContext()
CTX.dps = 40


def _eps_of_alpha(alpha, rho, delta):  # noqa: ANN001, ANN202 - mpmath numbers
    return alpha * rho + (CTX.log(1 / delta) + (alpha - 1) * CTX.log(1 - 1 / alpha)
                          - CTX.log(alpha)) / (alpha - 1)


def _derivative(alpha, rho, delta):  # noqa: ANN001, ANN202
    # d/dα [αρ + (L − ln α)/(α − 1) + ln(1 − 1/α)],  L = ln(1/δ)
    L = CTX.log(1 / delta)
    return (rho + (-(alpha - 1) / alpha - (L - CTX.log(alpha))) / (alpha - 1) ** 2
            + 1 / (alpha * (alpha - 1)))


def reference_epsilon(rho: Fraction, delta: Fraction):  # noqa: ANN201
    """ε* and its α at 40 digits: bisection in s = ln(α − 1) on the derivative's sign."""
    r, d = CTX.mpf(rho.numerator) / rho.denominator, CTX.mpf(delta.numerator) / delta.denominator
    lo, hi = CTX.mpf(-80), CTX.mpf(80)
    for _ in range(300):
        mid = (lo + hi) / 2
        if _derivative(1 + CTX.exp(mid), r, d) < 0:
            lo = mid
        else:
            hi = mid
    alpha = 1 + CTX.exp((lo + hi) / 2)
    return max(CTX.mpf(0), _eps_of_alpha(alpha, r, d)), alpha


def gaussian_delta(eps: Fraction, rho: Fraction):  # noqa: ANN201
    """Exact δ(ε) of the Gaussian mechanism with Δ/σ = √(2ρ) (Balle & Wang 2018, Thm 8)."""
    mu = CTX.sqrt(2 * CTX.mpf(rho.numerator) / rho.denominator)
    e = CTX.mpf(eps.numerator) / eps.denominator
    return CTX.ncdf(mu / 2 - e / mu) - CTX.exp(e) * CTX.ncdf(-mu / 2 - e / mu)


def cks_valid_and_tight(eps: Fraction, rho: Fraction, delta: Fraction) -> tuple[bool, bool]:
    ref, _ = reference_epsilon(rho, delta)
    e = CTX.mpf(eps.numerator) / eps.denominator
    return e >= ref, e - ref <= CTX.mpf("1e-11") * max(1, ref)


def gaussian_valid(eps: Fraction, rho: Fraction, delta: Fraction) -> bool:
    return gaussian_delta(eps, rho) <= CTX.mpf(delta.numerator) / delta.denominator


CASES = [(Fraction(r), Fraction(d)) for r in ("1e-8", "1e-4", "1/32", "0.5", "10", "1000")
         for d in ("1e-15", "1e-9", "1e-3", "0.25")]


@pytest.mark.parametrize(("rho", "delta"), CASES)
def test_known_answers_against_mpmath(rho: Fraction, delta: Fraction) -> None:
    eps = zcdp_to_epsilon(rho, delta)
    valid, tight = cks_valid_and_tight(eps, rho, delta)
    assert valid, (float(eps), float(reference_epsilon(rho, delta)[0]))
    assert tight, (float(eps), float(reference_epsilon(rho, delta)[0]))
    assert gaussian_valid(eps, rho, delta)
    assert eps <= simple_zcdp_epsilon(rho, delta)


def test_published_value() -> None:
    # ρ = 1/32 (Gaussian, scale 4, sensitivity 1), δ = 1e-3: 0.68800245548780 (OpenDP's test value)
    eps = zcdp_to_epsilon(Fraction(1, 32), Fraction(1, 1000))
    assert abs(float(eps) - 0.6880024554878086) < 1e-12


def test_negative_controls_reject_optimistic_conversions() -> None:
    rho, delta = Fraction(1, 100), Fraction(1, 10**9)
    eps = zcdp_to_epsilon(rho, delta)
    valid, _ = cks_valid_and_tight(eps - Fraction(1, 10**9), rho, delta)
    assert not valid  # a conversion 1e-9 too small is caught by the CKS harness
    forgot_factor_two = rho + Fraction(CTX.sqrt(rho * CTX.log(1 / CTX.mpf(1e-9)))
                                       .__float__())
    assert not gaussian_valid(forgot_factor_two, rho, delta)  # ρ + √(ρ ln 1/δ) is optimistic
    _, tight = cks_valid_and_tight(simple_zcdp_epsilon(rho, delta), rho, delta)
    assert not tight  # the simple bound is valid but loose: the tightness check can fail


def test_simple_bound_is_rounded_up() -> None:
    for rho, delta in CASES:
        r, d = CTX.mpf(rho.numerator) / rho.denominator, CTX.mpf(delta.numerator) / delta.denominator
        exact = r + 2 * CTX.sqrt(r * CTX.log(1 / d))
        got = simple_zcdp_epsilon(rho, delta)
        assert CTX.mpf(got.numerator) / got.denominator >= exact
        assert CTX.mpf(got.numerator) / got.denominator - exact <= CTX.mpf("1e-15") * exact


def test_every_alpha_gives_an_upper_bound() -> None:
    rho, delta = Fraction(1, 32), Fraction(1, 1000)
    best = zcdp_to_epsilon(rho, delta)
    for alpha in (Fraction(11, 10), Fraction(3), Fraction(10), Fraction(1000)):
        assert zcdp_epsilon_at(rho, delta, alpha) >= best


def test_zero_rho_is_free() -> None:
    assert zcdp_to_epsilon(Fraction(0), Fraction(1, 10**6)) == 0


log_rho = st.floats(min_value=-8, max_value=3)
log_delta = st.floats(min_value=-15, max_value=-0.31)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(log_rho, log_delta)
def test_conversion_never_optimistic(lr: float, ld: float) -> None:
    rho, delta = Fraction(10 ** lr), Fraction(10 ** ld)
    eps = zcdp_to_epsilon(rho, delta)
    valid, tight = cks_valid_and_tight(eps, rho, delta)
    assert valid and tight
    assert gaussian_valid(eps, rho, delta)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(log_rho, st.floats(min_value=1.0001, max_value=10), log_delta, st.floats(0.0, 0.5))
def test_conversion_monotone(lr: float, factor: float, ld: float, shrink: float) -> None:
    """More ρ never costs less ε; a smaller δ never costs less ε (up to float rounding)."""
    rho, delta = Fraction(10 ** lr), Fraction(10 ** ld)
    eps = zcdp_to_epsilon(rho, delta)
    slack = Fraction(1, 10**12) * max(1, eps)
    assert zcdp_to_epsilon(rho * Fraction(factor), delta) >= eps - slack
    assert zcdp_to_epsilon(rho, delta * Fraction(1 - shrink)) >= eps - slack


def test_to_approx_uses_the_conversion() -> None:
    z = PrivacyLoss.zcdp(Fraction(1, 32), delta=Fraction(1, 10**6))
    a = z.to_approx(Fraction(1, 1000) + Fraction(1, 10**6))
    assert a.kind == "approx" and a.delta == Fraction(1, 1000) + Fraction(1, 10**6)
    assert a.epsilon == zcdp_to_epsilon(Fraction(1, 32), Fraction(1, 1000))
    pure = PrivacyLoss.pure(Fraction(1, 4))
    assert pure.to_zcdp().rho == Fraction(1, 32)
