"""Analytic functions of the discrete Laplace and discrete Gaussian laws.

Floats are returned **rounded up**: ``pmf``, ``sf``, ``abs_tail`` and ``variance`` of the
discrete Laplace give the smallest float ``>=`` the true value (certified with integer interval
arithmetic, :mod:`privagg.noise._exact`), so a bound built from them is never optimistic.
Quantiles are integers decided exactly (a decision ``P <= β`` is made only when a certified
enclosure of ``P`` lies on one side of ``β``). All results are cached per parameter, so a
repeated call costs a dictionary look-up.

Laws (``q = e^{−1/t}`` for the Laplace scale ``t``):

* ``DiscreteLaplace(t)``: ``P[Z = k] = (1 − q)/(1 + q) · q^{|k|}``; for ``k >= 1``,
  ``P[Z >= k] = q^k/(1 + q)``; ``P[|Z| > k] = 2 q^{k+1}/(1 + q)`` for ``k >= 0``;
  ``Var Z = 2q/(1 − q)²``.
* ``DiscreteGaussian(σ²)``: ``P[Z = k] = e^{−k²/(2σ²)} / Σ_j e^{−j²/(2σ²)}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import mpmath
import numpy as np

from .._validate import check_beta, check_positive_int
from ._exact import (
    Interval,
    ceil_div,
    decide_le,
    div_iv,
    exp_neg_fixed,
    float_up,
    mul_iv,
)
from ._laws import gaussian_tail_sums
from .rational import to_fraction
from .samplers import discrete_gaussian, discrete_laplace

__all__ = ["DiscreteGaussian", "DiscreteLaplace"]

_LN_TINY = 746  # e^{-746} < 2^{-1075}: below the smallest subnormal float


def _step_search(decide, start: int) -> int:
    """Smallest integer k with ``decide(k)`` true, for a monotone predicate (false below some
    k, true from it on), from a guess: doubling steps until the answer is bracketed, then
    bisection — O(log |answer − start|) decisions (a walk one step at a time took about 0.5·σ
    decisions for a discrete Gaussian of large σ, whose guess overshoots)."""
    step = 1
    if decide(start):
        hi = start
        while decide(start - step):
            hi = start - step
            step *= 2
        lo = start - step
    else:
        lo = start
        while not decide(start + step):
            lo = start + step
            step *= 2
        hi = start + step
    while hi - lo > 1:  # decide(lo) false, decide(hi) true
        mid = (lo + hi) // 2
        if decide(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ============================================================================ Laplace
def _dl_ratio(t: Fraction, k: int, prec: int) -> Interval:
    """Enclosure of ``R_k = q^k / (1 + q)`` (``k >= 0``)."""
    work = prec + 8
    q = exp_neg_fixed(t.denominator, t.numerator, work)
    qk = exp_neg_fixed(t.denominator * k, t.numerator, work)
    one = 1 << work
    lo, hi = div_iv(qk, (one + q[0], one + q[1]), work)
    return lo >> 8, ceil_div(hi, 256)


def _dl_sf_enclosure(t: Fraction, k: int):
    if k >= 1:
        return lambda prec: _dl_ratio(t, k, prec)

    def complement(prec: int) -> Interval:
        lo, hi = _dl_ratio(t, 1 - k, prec)
        return (1 << prec) - hi, (1 << prec) - lo

    return complement


def _dl_tiny(t: Fraction, k: int) -> bool:
    """Certified: ``q^k <= e^{-746}`` (so R_k is below every positive float)."""
    return k > 0 and Fraction(k) / t >= _LN_TINY


@lru_cache(maxsize=4096)
def _dl_pmf(t: Fraction, k: int) -> float:
    k = abs(k)
    if _dl_tiny(t, k):
        return 5e-324

    def enc(prec: int) -> Interval:
        work = prec + 8
        q = exp_neg_fixed(t.denominator, t.numerator, work)
        qk = exp_neg_fixed(t.denominator * k, t.numerator, work)
        one = 1 << work
        num = mul_iv((one - q[1], one - q[0]), qk, work)
        lo, hi = div_iv(num, (one + q[0], one + q[1]), work)
        return lo >> 8, ceil_div(hi, 256)

    return float_up(enc)


@lru_cache(maxsize=4096)
def _dl_sf(t: Fraction, k: int) -> float:
    if _dl_tiny(t, k):
        return 5e-324
    return float_up(_dl_sf_enclosure(t, k))


@lru_cache(maxsize=4096)
def _dl_abs_tail(t: Fraction, k: int) -> float:
    if k < 0:
        return 1.0
    if _dl_tiny(t, k + 1):
        return 5e-324

    def enc(prec: int) -> Interval:
        lo, hi = _dl_ratio(t, k + 1, prec)
        return 2 * lo, 2 * hi

    return float_up(enc)


@lru_cache(maxsize=4096)
def _dl_sf_le(t: Fraction, k: int, beta: Fraction) -> bool:
    if _dl_tiny(t, k):
        return True
    return decide_le(_dl_sf_enclosure(t, k), beta)


@lru_cache(maxsize=4096)
def _dl_abs_tail_le(t: Fraction, k: int, beta: Fraction) -> bool:
    if k < 0:
        return False  # P[|Z| > k] = 1 > beta
    if _dl_tiny(t, k + 1):
        return True
    return decide_le(lambda prec: tuple(2 * v for v in _dl_ratio(t, k + 1, prec)), beta)  # type: ignore[misc]


@lru_cache(maxsize=4096)
def _dl_upper_quantile(t: Fraction, beta: Fraction) -> int:
    tf, bf = float(t), float(beta)
    q = math.exp(-1 / tf)
    if bf < q / (1 + q):  # the answer is >= 1: q^k/(1+q) <= β
        guess = math.ceil(-tf * math.log(bf * (1 + q)))
    else:
        guess = 0
    return _step_search(lambda k: _dl_sf_le(t, k, beta), guess)


def _dl_mix_enclosure(t: Fraction, k: int, j: int, bits: int):
    """Enclosure of ``(1 − b)·P[Z >= k] + b·P[Z >= k − 1]``, ``b = j / 2**bits``."""
    upper, lower = _dl_sf_enclosure(t, k), _dl_sf_enclosure(t, k - 1)
    one = 1 << bits

    def enc(prec: int) -> Interval:
        lo_k, hi_k = upper(prec)
        lo_1, hi_1 = lower(prec)
        return ((one - j) * lo_k + j * lo_1) >> bits, ceil_div((one - j) * hi_k + j * hi_1, one)

    return enc


def _dl_mix_le(t: Fraction, k: int, j: int, bits: int, beta: Fraction) -> bool:
    """Decide ``(1 − b)·P[Z >= k] + b·P[Z >= k − 1] <= beta`` exactly, ``b = j / 2**bits``.

    Times ``1 + q`` the two sides differ by a polynomial in the transcendental ``q = e^{−1/t}``
    with rational coefficients; it is the zero polynomial only for ``k = 1`` and ``b = 1 − beta``
    (then both sides are ``beta·q + b`` against ``beta·q + beta``), decided by ``b <= beta``.
    Otherwise the value is never ``beta`` and the enclosures separate them."""
    if k == 1 and Fraction(j, 1 << bits) + beta == 1:
        return Fraction(j, 1 << bits) <= beta
    return decide_le(_dl_mix_enclosure(t, k, j, bits), beta)


def _dl_boundary_guess(t: Fraction, k: int, beta: Fraction, bits: int) -> int:
    """A 60-digit estimate of the answer's ``j`` (only a starting point: the answer is decided exactly)."""
    with mpmath.workdps(60):
        q = mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)

        def sf(m: int) -> Any:
            return q ** m / (1 + q) if m >= 1 else 1 - q ** (1 - m) / (1 + q)

        hi, lo = sf(k - 1), sf(k)
        return int(mpmath.floor((mpmath.mpf(beta.numerator) / beta.denominator - lo) / (hi - lo) * (1 << bits)))


@lru_cache(maxsize=1024)
def _dl_boundary_probability(t: Fraction, k: int, beta: Fraction, bits: int) -> Fraction:
    if not _dl_sf_le(t, k, beta):
        return Fraction(0)
    if _dl_sf_le(t, k - 1, beta):
        return Fraction(1)
    # the largest j with le(j) (le is monotone: true at 0, false at 2**bits); two decisions when the
    # guess is right, a bisection over [0, 2**bits) otherwise
    top = 1 << bits
    j = min(max(_dl_boundary_guess(t, k, beta, bits), 0), top - 1)
    if _dl_mix_le(t, k, j, bits, beta) and not _dl_mix_le(t, k, j + 1, bits, beta):
        return Fraction(j, top)
    lo, hi = 0, top  # le(lo) true, le(hi) false
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _dl_mix_le(t, k, mid, bits, beta):
            lo = mid
        else:
            hi = mid
    return Fraction(lo, top)


@lru_cache(maxsize=4096)
def _dl_abs_quantile(t: Fraction, beta: Fraction) -> int:
    tf, bf = float(t), float(beta)
    q = math.exp(-1 / tf)
    guess = max(math.ceil(-tf * math.log(bf * (1 + q) / 2)) - 1, 0)
    k = _step_search(lambda k: _dl_abs_tail_le(t, k, beta), guess)
    return max(k, 0)


def _chernoff_enclosure(t: Fraction, lam: Fraction, m: int, k: int):
    """Enclosure of ``2 e^{−λ(k+1)} M(λ)^m``, ``M(λ) = (1−q)² / ((1 − q e^λ)(1 − q e^{−λ}))``."""
    gamma = 1 / t
    a, b = gamma - lam, gamma + lam  # q e^{λ} = e^{−a}, q e^{−λ} = e^{−b}

    def enc(prec: int) -> Interval:
        work = prec + 2 * m.bit_length() + 32
        one = 1 << work
        q = exp_neg_fixed(gamma.numerator, gamma.denominator, work)
        ea = exp_neg_fixed(a.numerator, a.denominator, work)
        eb = exp_neg_fixed(b.numerator, b.denominator, work)
        one_minus_q = (one - q[1], one - q[0])
        den = mul_iv((one - ea[1], one - ea[0]), (one - eb[1], one - eb[0]), work)
        mgf = div_iv(mul_iv(one_minus_q, one_minus_q, work), den, work)
        power = (one, one)
        base, e = mgf, m
        while e:
            if e & 1:
                power = mul_iv(power, base, work)
            base = mul_iv(base, base, work)
            e >>= 1
        x = lam * (k + 1)
        decay = exp_neg_fixed(x.numerator, x.denominator, work)
        lo, hi = mul_iv(decay, power, work)
        shift = work - prec
        return (2 * lo) >> shift, ceil_div(2 * hi, 1 << shift)

    return enc


@lru_cache(maxsize=1024)
def _dl_sum_abs_quantile(t: Fraction, m: int, beta: Fraction) -> int:
    if m == 1:
        return _dl_abs_quantile(t, beta)
    gamma = 1 / float(t)
    q = math.exp(-gamma)
    log_bound = math.log(2 / float(beta))

    def k_of(lam: float) -> float:
        log_m = (
            2 * math.log1p(-q)
            - math.log1p(-q * math.exp(lam))
            - math.log1p(-q * math.exp(-lam))
        )
        return (m * log_m + log_bound) / lam

    # golden-section search for the best λ in (0, γ) (the bound is convex in λ on that range)
    lo, hi = 1e-12 * gamma, gamma * (1 - 1e-9)
    for _ in range(200):
        a, b = lo + 0.382 * (hi - lo), lo + 0.618 * (hi - lo)
        if k_of(a) < k_of(b):
            hi = b
        else:
            lo = a
    lam = Fraction((lo + hi) / 2).limit_denominator(1 << 30)
    lam = min(lam, Fraction(1, 1) / t * Fraction(999_999, 1_000_000))
    k = max(math.ceil(k_of(float(lam))) - 1, 0)
    while not decide_le(_chernoff_enclosure(t, lam, m, k), beta):
        k += max(1, k // 1000)
    return k


@dataclass(frozen=True)
class DiscreteLaplace:
    """The discrete Laplace law ``P[Z = k] = (1 − q)/(1 + q) · q^{|k|}``, ``q = e^{−1/scale}``.

    Parameters
    ----------
    scale : Fraction (an int or float is converted, floats rounded up)

    Examples
    --------
    >>> d = DiscreteLaplace(2)
    >>> 1 + d.upper_quantile(1e-6)
    28
    """

    scale: Fraction

    def __post_init__(self) -> None:
        if not isinstance(self.scale, Fraction) or self.scale <= 0:
            object.__setattr__(
                self,
                "scale",
                to_fraction(
                    self.scale, where="DiscreteLaplace", name="scale", direction="up"
                ),
            )

    def pmf(self, k: int) -> float:
        """``P[Z = k]``, rounded up."""
        return _dl_pmf(self.scale, int(k))

    def sf(self, k: int) -> float:
        """``P[Z >= k]``, rounded up (an upper bound for large σ²)."""
        return _dl_sf(self.scale, int(k))

    def abs_tail(self, k: int) -> float:
        """``P[|Z| > k]``, rounded up (an upper bound for large σ²)."""
        return _dl_abs_tail(self.scale, int(k))

    @property
    def variance(self) -> float:
        """``Var Z = 2q/(1 − q)²``, rounded up."""
        return _dl_variance(self.scale)

    def upper_quantile(self, beta: float) -> int:
        """The smallest integer ``k`` with ``P[Z >= k] <= beta`` (exact decision); for large σ²
        the smallest ``k`` whose certified bound is ``<= beta`` (never below the exact one)."""
        b = Fraction(check_beta("DiscreteLaplace.upper_quantile", beta))
        return _dl_upper_quantile(self.scale, b)

    def abs_quantile(self, beta: float) -> int:
        """The smallest integer ``k >= 0`` with ``P[|Z| > k] <= beta`` (exact decision); for large
        σ² the smallest ``k`` whose certified bound is ``<= beta`` (never below the exact one)."""
        b = Fraction(check_beta("DiscreteLaplace.abs_quantile", beta))
        return _dl_abs_quantile(self.scale, b)

    def boundary_probability(self, k: int, beta: float, bits: int = 32) -> Fraction:
        """The largest ``b = j / 2**bits`` in ``[0, 1]`` with ``P[Z >= k] + b·P[Z = k − 1] <= beta``
        (decided exactly), i.e. ``(1 − b)·P[Z >= k] + b·P[Z >= k − 1] <= beta``.

        With ``k`` = :meth:`upper_quantile` ``(beta)`` it is below 1 and spends what the integer
        ``k`` leaves of ``beta``: the tail of a threshold at ``k`` whose boundary value ``k − 1``
        passes with probability ``b`` (the stable histogram's ``threshold="randomized"``). 0 where
        ``P[Z >= k] > beta``."""
        b = Fraction(check_beta("DiscreteLaplace.boundary_probability", beta))
        return _dl_boundary_probability(self.scale, int(k), b, check_positive_int(
            "DiscreteLaplace.boundary_probability", "bits", bits))

    def sum_abs_quantile(self, m: int, beta: float) -> int:
        """A ``k`` with ``P[|Z_1 + … + Z_m| > k] <= beta`` for ``m`` iid copies.

        ``m = 1`` gives :meth:`abs_quantile`. Otherwise the Chernoff bound
        ``P[|S| > k] = 2 P[S >= k+1] <= 2 e^{−λ(k+1)} M(λ)^m`` with the exact MGF
        ``M(λ) = (1−q)²/((1 − q e^λ)(1 − q e^{−λ}))`` at a rational ``λ`` in ``(0, 1/t)``
        (numerically optimised), the inequality ``<= beta`` decided exactly.
        """
        mm = check_positive_int("DiscreteLaplace.sum_abs_quantile", "m", m)
        b = Fraction(check_beta("DiscreteLaplace.sum_abs_quantile", beta))
        return _dl_sum_abs_quantile(self.scale, mm, b)

    def sample(self, size: Any = None, *, rng: Any = None) -> np.ndarray:
        """Exact draws (int64), see :func:`privagg.noise.samplers.discrete_laplace`."""
        return discrete_laplace(self.scale, size, rng=rng)


@lru_cache(maxsize=1024)
def _dl_variance(t: Fraction) -> float:
    def enc(prec: int) -> Interval:
        work = prec + 16
        one = 1 << work
        q = exp_neg_fixed(t.denominator, t.numerator, work)
        omq = (one - q[1], one - q[0])
        lo, hi = div_iv((2 * q[0], 2 * q[1]), mul_iv(omq, omq, work), work)
        return lo >> 16, ceil_div(hi, 1 << 16)

    return float_up(enc)


# ============================================================================ Gaussian
def _bucket(k: int) -> int:
    """Share cached tail-sum tables: round ``k`` up to a power of two (>= 64)."""
    return max(64, 1 << (k - 1).bit_length())


#: From this σ² on, tail decisions and values of the discrete Gaussian use the certified analytic
#: bound :func:`_dg_tail_upper` instead of the exact tail sums, whose table grows like σ (at
#: σ² = 2³⁶ one quantile took 10 s; from about 2⁴⁰ the tables exhausted memory — a k-means
#: plan at ε = 10⁻⁹ was killed at 24 GB).
LARGE_SIGMA2 = Fraction(2**24)
#: A rational lower bound on √(2π) = 2.50662827463…
_SQRT_2PI_LO = Fraction(25066282746, 10**10)


def _dg_norm_lo(s2: Fraction) -> Fraction:
    """A lower bound on ``N = Σ_{j∈ℤ} e^{−j²/(2σ²)}``: ``√(2π)·σ − 1`` (for the unimodal weight
    ``f``, ``Σ_{j>=1} f(j) >= ∫_1^∞ f >= ∫_0^∞ f − 1``, so ``N >= 1 + 2(σ√(π/2) − 1)``), with σ
    rounded down to a multiple of 2⁻²⁰ and √(2π) to :data:`_SQRT_2PI_LO`."""
    sigma_lo = Fraction(math.isqrt(s2.numerator * 2**40 // s2.denominator), 2**20)
    return _SQRT_2PI_LO * sigma_lo - 1


def _dg_tail_upper(s2: Fraction, k: int, beta: Fraction | None = None) -> Fraction:
    """Certified upper bound on ``P[Z >= k]`` for ``k >= 1`` and ``σ² >= LARGE_SIGMA2``:
    ``e^{−k²/(2σ²)}·(1 + σ²/k) / (√(2π)σ − 1)`` (``Σ_{j>=k} f(j) <= f(k) + ∫_k^∞ f`` and
    ``∫_k^∞ e^{−x²/(2σ²)} dx <= (σ²/k)·e^{−k²/(2σ²)}``; the normalizer by :func:`_dg_norm_lo`).
    Above the true tail by a factor of about ``1 + σ²/k²`` (≈ 1.04 at the usual thresholds, a
    quantile ≈ 0.01σ higher). ``beta``: the precision of the exponential is set so that its
    rounding is far below ``beta``."""
    # about log2(1/beta) bits more, from the integers (a float 1/beta overflows below 2^-1074)
    prec = 64 if beta is None or beta <= 0 else 64 + max(0, beta.denominator.bit_length() - beta.numerator.bit_length() + 1)
    hi = exp_neg_fixed(k * k * s2.denominator, 2 * s2.numerator, prec)[1]
    return Fraction(hi, 1 << prec) * (1 + s2 / k) / _dg_norm_lo(s2)


def _large(s2: Fraction) -> bool:
    return s2 >= LARGE_SIGMA2


def _fraction_up(v: Fraction) -> float:
    """The smallest float ``>= v`` (``v`` in [0, 1]; 5e-324 for a positive ``v`` below it)."""
    return max(_fraction_up_any(v), 5e-324) if v > 0 else 0.0


def _fraction_up_any(v: Fraction) -> float:
    """The smallest float ``>= v`` (``v > 0`` finite in float range)."""
    f = float(v)
    return f if Fraction(f) >= v else math.nextafter(f, math.inf)


def _dg_tiny(s2: Fraction, k: int) -> bool:
    """Certified: ``P[Z >= k] <= e^{-k²/(2σ²)} (1 + σ²/k) <= e^{-746}``."""
    if k <= 0:
        return False
    return Fraction(k * k) / (2 * s2) - s2 / k >= _LN_TINY


def _dg_tail_enclosure(s2: Fraction, k: int):
    """Enclosure of ``P[Z >= k] = S_k / N`` (k >= 1), or ``1 − S_{1−k}/N`` (k <= 0)."""
    j = k if k >= 1 else 1 - k

    def enc(prec: int) -> Interval:
        work = prec + 8
        sums, norm = gaussian_tail_sums(s2, _bucket(j), work)
        lo, hi = div_iv(sums[j], norm, work)
        lo, hi = lo >> 8, ceil_div(hi, 256)
        if k >= 1:
            return lo, hi
        return (1 << prec) - hi, (1 << prec) - lo

    return enc


@lru_cache(maxsize=4096)
def _dg_pmf(s2: Fraction, k: int) -> float:
    k = abs(k)
    if _dg_tiny(s2, k):
        return 5e-324
    if _large(s2):  # e^{−k²/(2σ²)} / N, N >= √(2π)σ − 1
        hi = exp_neg_fixed(k * k * s2.denominator, 2 * s2.numerator, 96)[1]
        return _fraction_up(min(Fraction(1), Fraction(hi, 1 << 96) / _dg_norm_lo(s2)))

    def enc(prec: int) -> Interval:
        work = prec + 8
        _, norm = gaussian_tail_sums(s2, 64, work)
        w = exp_neg_fixed(k * k * s2.denominator, 2 * s2.numerator, work)
        lo, hi = div_iv(w, norm, work)
        return lo >> 8, ceil_div(hi, 256)

    return float_up(enc)


@lru_cache(maxsize=4096)
def _dg_sf(s2: Fraction, k: int) -> float:
    if _dg_tiny(s2, k):
        return 5e-324
    if _large(s2):
        return 1.0 if k <= 0 else _fraction_up(min(Fraction(1), _dg_tail_upper(s2, k)))
    return float_up(_dg_tail_enclosure(s2, k))


@lru_cache(maxsize=4096)
def _dg_sf_le(s2: Fraction, k: int, beta: Fraction) -> bool:
    if _dg_tiny(s2, k):
        return True
    if _large(s2):  # certified: the bound is <= beta (k <= 0: not decided as true)
        return k >= 1 and _dg_tail_upper(s2, k, beta) <= beta
    return decide_le(_dg_tail_enclosure(s2, k), beta)


@lru_cache(maxsize=4096)
def _dg_abs_tail_le(s2: Fraction, k: int, beta: Fraction) -> bool:
    if k < 0:
        return False
    if _dg_tiny(s2, k + 1):
        return True
    if _large(s2):  # P[|Z| > k] = 2·P[Z >= k + 1]
        return 2 * _dg_tail_upper(s2, k + 1, beta) <= beta
    enc = _dg_tail_enclosure(s2, k + 1)
    return decide_le(lambda prec: tuple(2 * v for v in enc(prec)), beta)  # type: ignore[misc]


@lru_cache(maxsize=4096)
def _dg_abs_tail(s2: Fraction, k: int) -> float:
    if k < 0:
        return 1.0
    if _dg_tiny(s2, k + 1):
        return 5e-324
    if _large(s2):
        return _fraction_up(min(Fraction(1), 2 * _dg_tail_upper(s2, k + 1)))
    enc = _dg_tail_enclosure(s2, k + 1)
    return float_up(lambda prec: tuple(2 * v for v in enc(prec)))  # type: ignore[arg-type,misc]


def _dg_guess(s2: Fraction, beta: Fraction) -> int:
    return math.ceil(math.sqrt(2 * float(s2) * math.log(1 / float(beta))))


@lru_cache(maxsize=4096)
def _dg_upper_quantile(s2: Fraction, beta: Fraction) -> int:
    guess = _dg_guess(s2, beta) if beta < Fraction(1, 2) else 0
    return _step_search(lambda k: _dg_sf_le(s2, k, beta), guess)


@lru_cache(maxsize=4096)
def _dg_abs_quantile(s2: Fraction, beta: Fraction) -> int:
    k = _step_search(lambda k: _dg_abs_tail_le(s2, k, beta), _dg_guess(s2, beta / 2))
    return max(k, 0)


@lru_cache(maxsize=1024)
def _dg_variance(s2: Fraction) -> float:
    """``Σ k² P[Z = k]`` by summation by parts: ``E[Z²] = 2 Σ_{k>=1} (2k − 1) S_k / N``."""

    def enc(prec: int) -> Interval:
        work = prec + 16
        sigma = math.sqrt(s2)
        upto = _bucket(math.ceil(sigma * 40) + 64)
        sums, norm = gaussian_tail_sums(s2, upto, work)
        # Remainder: for k > upto, S_k <= S_upto ρ^{k−upto}, ρ = e^{−upto/σ²} <= e^{−40/σ}
        # (consecutive weights shrink at least by ρ beyond upto), so
        # Σ_{k>upto} (2k−1) S_k <= S_upto Σ_{i>=1} 2(upto+i) ρ^i
        #                       <= S_upto (2·upto/(1−ρ)² + 2/(1−ρ)²) <= S_upto · 2(upto+1)(1 + σ²/upto)².
        c = (1 + s2 / upto) ** 2
        tail = sums[upto][1] * 2 * (upto + 1) * (c.numerator // c.denominator + 1)
        lo = sum((2 * k - 1) * sums[k][0] for k in range(1, upto + 1))
        hi = sum((2 * k - 1) * sums[k][1] for k in range(1, upto + 1)) + tail
        v = div_iv((2 * lo, 2 * hi), norm, work)
        return v[0] >> 16, ceil_div(v[1], 1 << 16)

    # E[Z²] is within e^{-2π²σ²} of σ² for σ >= 1, closer to a float than any cheap
    # precision separates: return an upper bound (at most a few ulps above) at 128 bits.
    if _large(s2):  # E[Z²] <= σ² (Canonne, Kamath & Steinke 2020); the sums would take O(σ)
        return _fraction_up_any(s2)
    return float_up(enc, start=128, max_prec=128)


@dataclass(frozen=True)
class DiscreteGaussian:
    """The discrete Gaussian law ``P[Z = k] ∝ e^{−k²/(2σ²)}`` over the integers.

    For ``σ² >=`` :data:`LARGE_SIGMA2` (2²⁴) every function below is a certified upper bound from
    the analytic tail bound (docs/proofs/noise.md §6, "Large σ"; O(1) work instead of O(σ)):
    the quantiles are then at least the exact ones: by about 0.01σ for β <= 10⁻³, more for large β
    (the bound is loose near the center: measured +0.10σ at β = 0.05, +0.63σ at β = 0.49, σ² = 2²⁴).

    Parameters
    ----------
    sigma2 : Fraction (an int or float is converted, floats rounded up)
    """

    sigma2: Fraction

    def __post_init__(self) -> None:
        if not isinstance(self.sigma2, Fraction) or self.sigma2 <= 0:
            object.__setattr__(
                self,
                "sigma2",
                to_fraction(
                    self.sigma2, where="DiscreteGaussian", name="sigma2", direction="up"
                ),
            )

    def pmf(self, k: int) -> float:
        """``P[Z = k]``, rounded up (an upper bound for large σ²)."""
        return _dg_pmf(self.sigma2, int(k))

    def sf(self, k: int) -> float:
        """``P[Z >= k]``, rounded up."""
        return _dg_sf(self.sigma2, int(k))

    def abs_tail(self, k: int) -> float:
        """``P[|Z| > k]``, rounded up."""
        return _dg_abs_tail(self.sigma2, int(k))

    @property
    def variance(self) -> float:
        """``E[Z²]`` (``<= σ²``): an upper bound at most a few ulps above the true value."""
        return _dg_variance(self.sigma2)

    def upper_quantile(self, beta: float) -> int:
        """The smallest integer ``k`` with ``P[Z >= k] <= beta`` (exact decision)."""
        b = Fraction(check_beta("DiscreteGaussian.upper_quantile", beta))
        return _dg_upper_quantile(self.sigma2, b)

    def abs_quantile(self, beta: float) -> int:
        """The smallest integer ``k >= 0`` with ``P[|Z| > k] <= beta`` (exact decision)."""
        b = Fraction(check_beta("DiscreteGaussian.abs_quantile", beta))
        return _dg_abs_quantile(self.sigma2, b)

    def sample(self, size: Any = None, *, rng: Any = None) -> np.ndarray:
        """Exact draws (int64), see :func:`privagg.noise.samplers.discrete_gaussian`."""
        return discrete_gaussian(self.sigma2, size, rng=rng)
