"""Numerical privacy conversions, rounded in the pessimistic direction.

zCDP → (ε, δ)-DP uses the conversion of Canonne, Kamath & Steinke (2020, Proposition 12 /
Corollary 13): a ρ-zCDP mechanism is (ε, δ)-DP for every α > 1 with

    ε(α) = αρ + (ln(1/δ) + (α − 1)·ln(1 − 1/α) − ln α) / (α − 1),

so ε* = max(0, inf_{α>1} ε(α)). Every α gives a *valid* ε, so the minimisation may be inexact
without ever being optimistic: we search α in floating point (log-spaced grid, then golden section)
and then evaluate ε(α) at the α found in interval arithmetic (mpmath, 128 bits), returning the
upper end rounded up to a float. The simple bound ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016,
Proposition 1.3) is the same expression without the two non-positive terms, hence never smaller;
it is exposed as a check. Statements and references: ``docs/proofs/accounting.md``.
"""

from __future__ import annotations

import math
from fractions import Fraction

from mpmath.ctx_iv import MPIntervalContext

__all__ = ["zcdp_to_epsilon", "simple_zcdp_epsilon", "pure_to_rho"]

_IV = MPIntervalContext()
_IV.prec = 128
_GRID = 241  # log-spaced grid points for α − 1 in [e^-30, e^40]
_T_LOW, _T_HIGH = -30.0, 40.0


def pure_to_rho(epsilon: Fraction) -> Fraction:
    """ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Proposition 1.4); exact."""
    return epsilon * epsilon / 2


def _objective(t: float, rho: float, log_inv_delta: float) -> float:
    """ε(α) at α = 1 + e^t, in floating point (only used to *choose* α)."""
    am1 = math.exp(t)
    alpha = 1.0 + am1
    return alpha * rho + (log_inv_delta + am1 * math.log1p(-1.0 / alpha) - math.log(alpha)) / am1


def _best_t(rho: float, log_inv_delta: float) -> float:
    step = (_T_HIGH - _T_LOW) / (_GRID - 1)
    ts = [_T_LOW + i * step for i in range(_GRID)]
    values = [_objective(t, rho, log_inv_delta) for t in ts]
    i = min(range(_GRID), key=values.__getitem__)
    lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, _GRID - 1)]
    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo + (1 - inv_phi) * (hi - lo), lo + inv_phi * (hi - lo)
    fa, fb = _objective(a, rho, log_inv_delta), _objective(b, rho, log_inv_delta)
    for _ in range(80):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = lo + (1 - inv_phi) * (hi - lo)
            fa = _objective(a, rho, log_inv_delta)
        else:
            lo, a, fa = a, b, fb
            b = lo + inv_phi * (hi - lo)
            fb = _objective(b, rho, log_inv_delta)
    return (lo + hi) / 2


def _iv_fraction(x: Fraction):  # noqa: ANN202 - an mpmath interval
    return _IV.mpf(x.numerator) / x.denominator


def _upper_to_fraction(value) -> Fraction:  # noqa: ANN001 - an mpmath interval
    """The interval's upper end, rounded up to a float, as an exact Fraction."""
    sign, man, exp, _ = value._mpi_[1]
    upper = Fraction(-man if sign else man) * (Fraction(2) ** exp)
    f = float(upper)
    if Fraction(f) < upper:
        f = math.nextafter(f, math.inf)
    return Fraction(f)


def zcdp_epsilon_at(rho: Fraction, delta: Fraction, alpha: Fraction) -> Fraction:
    """A rigorous upper bound on ε(α) (the CKS expression at one α > 1), ≥ 0."""
    a = _iv_fraction(alpha)
    value = a * _iv_fraction(rho) + (
        _IV.log(_iv_fraction(1 / delta)) + (a - 1) * _IV.log(1 - 1 / a) - _IV.log(a)
    ) / (a - 1)
    return max(Fraction(0), _upper_to_fraction(value))


def zcdp_to_epsilon(rho: Fraction, delta: Fraction) -> Fraction:
    """The smallest ε with ρ-zCDP ⇒ (ε, δ)-DP, up to the search's accuracy, never below it.

    Parameters
    ----------
    rho : Fraction
        ρ ≥ 0.
    delta : Fraction
        δ in (0, 1).

    Returns
    -------
    Fraction
        An exact value ≥ max(0, inf_α ε(α)), a float's value, at most the simple bound.
    """
    if rho == 0:
        return Fraction(0)
    t = _best_t(float(rho), -math.log(float(delta)))
    alpha = 1 + Fraction(math.exp(t))
    eps = zcdp_epsilon_at(rho, delta, alpha)
    return min(eps, simple_zcdp_epsilon(rho, delta))


def simple_zcdp_epsilon(rho: Fraction, delta: Fraction) -> Fraction:
    """ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Proposition 1.3), rounded up."""
    r = _iv_fraction(rho)
    value = r + 2 * _IV.sqrt(r * _IV.log(_iv_fraction(1 / delta)))
    return _upper_to_fraction(value)
