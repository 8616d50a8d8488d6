"""Certified CDF enclosures and cached inversion tables of the three discrete laws.

* Geometric ``Geom(γ)``: ``P[G = k] = (1 − q) q^k``, ``q = e^{−γ}``, ``k >= 0``.
* Discrete Laplace ``DL(t)``: ``P[Z = k] = (1 − q)/(1 + q) · q^{|k|}``, ``q = e^{−1/t}``.
* Discrete Gaussian ``DG(σ²)``: ``P[Z = k] = w_k / N``, ``w_k = e^{−k²/(2σ²)}``, ``N = Σ_k w_k``.

All parameters are exact :class:`~fractions.Fraction`. Tables are cached per parameter
(``functools.lru_cache``, a few hundred), so a parameter is analysed once per process; the
big-integer enclosures behind them (needed again only on the rare exact slow path) are kept
for fewer parameters and recomputed on demand.

For a few draws at a new parameter, :func:`geometric_lazy` and :func:`laplace_lazy` give the
same laws as :class:`~._tables.LazyTable` objects: each threshold is certified alone, from an
enclosure of its own closed form (one certified exponential), when a draw reaches it. The
thresholds are exact integers, so they equal the full table's entry for entry.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from ._exact import Interval, ceil_div, div_iv, exp_neg_fixed, mul_iv
from ._tables import InversionTable, LazyTable, certify_thresholds

__all__ = [
    "GEOM_TABLE_MAX",
    "SYM_HALF_MAX",
    "gaussian_half",
    "gaussian_table",
    "gaussian_tail_sums",
    "geometric_lazy",
    "geometric_plan",
    "geometric_shape",
    "laplace_half",
    "laplace_lazy",
    "laplace_table",
]

#: Largest geometric table (entries); beyond it the quotient/remainder split is used.
GEOM_TABLE_MAX = 8192
#: Largest half-width K of a two-sided (symmetric) table (2K + 2 entries).
SYM_HALF_MAX = 8192
#: Tables cover the law up to a tail mass of about e^{-TAIL_NATS}.
TAIL_NATS = 6


def _down(iv: Interval, shift: int) -> Interval:
    return iv[0] >> shift, ceil_div(iv[1], 1 << shift)


def _powers(q: Interval, count: int, work: int) -> list[Interval]:
    """Enclosures of ``q^1 … q^count`` at precision ``work`` (repeated multiplication)."""
    out = [q]
    p = q
    for _ in range(count - 1):
        p = mul_iv(p, q, work)
        out.append(p)
    return out


# ----------------------------------------------------------------------------- geometric
@lru_cache(maxsize=32)
def _geom_enclosures(
    gamma: Fraction, size: int, truncated: bool, prec: int
) -> list[Interval]:
    """``C_k = 1 − q^{k+1}`` (k < size) or, truncated to ``[0, size]``,
    ``C_b = (1 − q^{b+1}) / (1 − q^{size+1})`` (b < size)."""
    work = prec + size.bit_length() + 16
    one = 1 << work
    q = exp_neg_fixed(gamma.numerator, gamma.denominator, work)
    pw = _powers(q, size + 1, work)
    comp = [(one - hi, one - lo) for lo, hi in pw]  # 1 − q^{k+1}
    if truncated:
        den = comp[size]
        comp = [div_iv(c, den, work) for c in comp[:size]]
    else:
        comp = comp[:size]
    shift = work - prec
    return [_down(c, shift) for c in comp]


def geometric_shape(gamma: Fraction) -> tuple[bool, int, Fraction | None]:
    """``(truncated, K, sub_gamma)`` of :func:`geometric_plan`, without building the table."""
    need = math.ceil(TAIL_NATS / gamma)
    if need <= GEOM_TABLE_MAX:
        return False, max(need, 1), None
    size = GEOM_TABLE_MAX - 1
    return True, size, gamma * (size + 1)


@lru_cache(maxsize=512)
def geometric_plan(
    gamma: Fraction,
) -> tuple[InversionTable, bool, int, Fraction | None]:
    """How ``Geom(γ)`` is sampled: ``(table, truncated, K, sub_gamma)``.

    * Full table (``truncated=False``): thresholds of ``C_k``, ``k < K``; index ``K`` means
      ``G >= K``, and then ``G − K ~ Geom(γ)`` again (memorylessness) — drawn in rounds.
    * Truncated (``truncated=True``, huge scales): ``G = (K+1)·A + B`` with ``B`` on
      ``[0, K]`` from the table and ``A ~ Geom((K+1)γ)`` (``sub_gamma``), independent.
    """
    truncated, size, sub = geometric_shape(gamma)

    def enclosures(prec: int) -> list[Interval]:
        return _geom_enclosures(gamma, size, truncated, prec)

    table = InversionTable(certify_thresholds(enclosures), enclosures)
    return table, truncated, size, sub


@lru_cache(maxsize=64)
def _exp_iv(num: int, den: int, prec: int) -> Interval:
    """:func:`exp_neg_fixed`, cached (the shared factors of the per-entry enclosures)."""
    return exp_neg_fixed(num, den, prec)


def _geom_entry(
    gamma: Fraction, size: int, truncated: bool, j: int, prec: int
) -> Interval:
    """Enclosure of one ``C_j · 2^prec`` of :func:`_geom_enclosures`, from its closed form.

    ``1 − q^{j+1}`` with ``q^{j+1} = e^{−(j+1)γ}`` certified directly; truncated, divided by
    ``D = 1 − q^{K+1}``. ``K + 1 = 8192`` and ``(K+1)γ < 6`` there, so ``D >= (K+1)γ/7`` and
    ``extra = bits(7/((K+1)γ))`` guard bits keep the quotient's error below ``2^{-prec-16}``.
    Lower ends are clamped at 0 (``C_j >= 0``), which keeps every enclosure valid.
    """
    extra = 0
    if truncated:
        extra = math.ceil(Fraction(7) / (gamma * (size + 1))).bit_length()
    work = prec + 16 + extra
    one = 1 << work
    lo, hi = exp_neg_fixed((j + 1) * gamma.numerator, gamma.denominator, work)
    c = (max(one - hi, 0), one - lo)
    if truncated:
        d_lo, d_hi = _exp_iv((size + 1) * gamma.numerator, gamma.denominator, work)
        c = div_iv(c, (one - d_hi, one - d_lo), work)
    return _down(c, work - prec)


def _geom_approx(gamma: Fraction, size: int, truncated: bool) -> np.ndarray:
    """Float64 approximations of ``C_j · 2^64`` (a search hint only)."""
    g = float(gamma)
    k = np.arange(1, size + 1, dtype=np.float64)
    with np.errstate(all="ignore"):  # γ below the float range: any hint is still correct
        c = -np.expm1(-k * g)
        if truncated:
            c = c / -np.expm1(-(size + 1) * g)
    return np.nan_to_num(c * 2.0**64, nan=0.0)


@lru_cache(maxsize=128)
def geometric_lazy(gamma: Fraction) -> LazyTable:
    """The table of :func:`geometric_plan` as a :class:`LazyTable` (entries on demand)."""
    truncated, size, _ = geometric_shape(gamma)

    def enclosures(prec: int) -> list[Interval]:
        return _geom_enclosures(gamma, size, truncated, prec)

    return LazyTable(
        size,
        lambda j, prec: _geom_entry(gamma, size, truncated, j, prec),
        lambda: _geom_approx(gamma, size, truncated),
        enclosures,
    )


# ----------------------------------------------------------------------------- Laplace
def laplace_half(scale: Fraction) -> int:
    """Half-width ``K`` of the two-sided Laplace table, or 0 when the law is too wide."""
    k = max(math.ceil(TAIL_NATS * scale), 1)
    return k if k <= SYM_HALF_MAX else 0


@lru_cache(maxsize=32)
def _laplace_enclosures(scale: Fraction, half: int, prec: int) -> list[Interval]:
    """``C_j = P[Z <= j − K − 1]`` for ``j = 0 … 2K+1`` (K = half).

    ``P[Z <= −k] = R_k = q^k/(1+q)`` for ``k >= 1`` and ``P[Z <= k−1] = 1 − R_k``.
    """
    work = prec + half.bit_length() + 16
    one = 1 << work
    q = exp_neg_fixed(scale.denominator, scale.numerator, work)  # e^{−1/t}
    one_plus_q = (one + q[0], one + q[1])
    r = [
        div_iv(p, one_plus_q, work) for p in _powers(q, half + 1, work)
    ]  # R_1 … R_{K+1}
    shift = work - prec
    left = [_down(r[half - j], shift) for j in range(half + 1)]  # R_{K+1-j}
    top = 1 << prec
    right = [
        (top - hi, top - lo)
        for lo, hi in (
            _down(r[j - half - 1], shift) for j in range(half + 1, 2 * half + 2)
        )
    ]
    return left + right


@lru_cache(maxsize=512)
def laplace_table(scale: Fraction) -> InversionTable:
    """Two-sided table of ``DL(t)`` over ``[−K, K]`` (``K = laplace_half(t) >= 1``)."""
    half = laplace_half(scale)

    def enclosures(prec: int) -> list[Interval]:
        return _laplace_enclosures(scale, half, prec)

    return InversionTable(certify_thresholds(enclosures), enclosures)


def _laplace_entry(scale: Fraction, half: int, j: int, prec: int) -> Interval:
    """Enclosure of one ``C_j · 2^prec`` of :func:`_laplace_enclosures`, from its closed form.

    ``R_k = q^k/(1+q)`` with ``q^k = e^{−k/t}`` certified directly: ``C_j = R_{K+1−j}`` for
    ``j <= K`` and ``1 − R_{j−K}`` above.
    """
    work = prec + 16
    one = 1 << work
    k = half + 1 - j if j <= half else j - half
    qk = exp_neg_fixed(k * scale.denominator, scale.numerator, work)
    q_lo, q_hi = _exp_iv(scale.denominator, scale.numerator, work)
    lo, hi = _down(div_iv(qk, (one + q_lo, one + q_hi), work), 16)
    if j <= half:
        return lo, hi
    top = 1 << prec
    return top - hi, top - lo


def _laplace_approx(scale: Fraction, half: int) -> np.ndarray:
    """Float64 approximations of ``C_j · 2^64`` (a search hint only)."""
    inv = float(1 / scale)  # a lazy Laplace table has K >= 4, so 1/t <= 2
    q = math.exp(-inv)
    k = np.arange(half + 1, 0, -1, dtype=np.float64)  # K+1 … 1
    left = np.exp(-k * inv) / (1 + q)
    right = 1 - left[::-1]
    return np.concatenate([left, right]) * 2.0**64


@lru_cache(maxsize=128)
def laplace_lazy(scale: Fraction) -> LazyTable:
    """The table of :func:`laplace_table` as a :class:`LazyTable` (entries on demand)."""
    half = laplace_half(scale)

    def enclosures(prec: int) -> list[Interval]:
        return _laplace_enclosures(scale, half, prec)

    return LazyTable(
        2 * half + 2,
        lambda j, prec: _laplace_entry(scale, half, j, prec),
        lambda: _laplace_approx(scale, half),
        enclosures,
    )


# ----------------------------------------------------------------------------- Gaussian
def gaussian_half(sigma2: Fraction) -> int:
    """Half-width ``K`` of the Gaussian table (0 if too wide for a table)."""
    k = max(math.ceil(6 * math.sqrt(sigma2)), 2)
    return k if k <= SYM_HALF_MAX else 0


@lru_cache(maxsize=16)
def gaussian_tail_sums(
    sigma2: Fraction, upto: int, prec: int
) -> tuple[list[Interval], Interval]:
    """Enclosures of ``S_k = Σ_{j>=k} w_j`` for ``k = 0 … upto`` and of ``N = w_0 + 2 S_1``.

    Weights by the recurrence ``w_{j+1} = w_j r_j``, ``r_j = e^{−(2j+1)/(2σ²)}``,
    ``r_{j+1} = r_j e^{−1/σ²}``, summed up to ``M``; the rest is bounded by
    ``Σ_{j>M} w_j <= w_{M+1} / (1 − e^{−(M+1)/σ²})`` (since ``(M+1+i)² >= (M+1)² + 2(M+1)i``).
    """
    p, q = sigma2.numerator, sigma2.denominator
    sigma = math.sqrt(sigma2)
    m = max(upto + 1, math.ceil(sigma * math.sqrt(2 * math.log(2) * (prec + 40))) + 2)
    work = prec + 2 * m.bit_length() + 24
    one = 1 << work
    r = exp_neg_fixed(q, 2 * p, work)  # r_0 = e^{-1/(2σ²)}
    step = exp_neg_fixed(q, p, work)  # e^{-1/σ²}
    w = [(one, one)]
    for _ in range(m + 1):
        w.append(mul_iv(w[-1], r, work))
        r = mul_iv(r, step, work)
    # tail beyond m: w_{m+1} / (1 − e^{−(m+1)/σ²})
    e_m = exp_neg_fixed((m + 1) * q, p, work)
    tail_hi = div_iv(w[m + 1], (one - e_m[1], one - e_m[0]), work)[1]
    sums: list[Interval] = [(0, 0)] * (m + 1)
    acc_lo, acc_hi = 0, tail_hi
    for j in range(m, -1, -1):
        acc_lo += w[j][0]
        acc_hi += w[j][1]
        sums[j] = (acc_lo, acc_hi)
    norm = (w[0][0] + 2 * sums[1][0], w[0][1] + 2 * sums[1][1])
    shift = work - prec
    return [_down(s, shift) for s in sums[: upto + 1]], _down(norm, shift)


@lru_cache(maxsize=16)
def _gaussian_enclosures(sigma2: Fraction, half: int, prec: int) -> list[Interval]:
    """``C_j = P[Z <= j − K − 1]`` for ``j = 0 … 2K+1``; ``P[Z <= −k] = S_k / N``."""
    work = prec + 8
    sums, norm = gaussian_tail_sums(sigma2, half + 1, work)
    ratio = [div_iv(s, norm, work) for s in sums]  # P[Z >= k] = P[Z <= −k]
    left = [_down(ratio[half + 1 - j], 8) for j in range(half + 1)]
    top = 1 << prec
    right = [
        (top - hi, top - lo)
        for lo, hi in (_down(ratio[j - half], 8) for j in range(half + 1, 2 * half + 2))
    ]
    return left + right


@lru_cache(maxsize=256)
def gaussian_table(sigma2: Fraction) -> InversionTable:
    """Two-sided table of ``DG(σ²)`` over ``[−K, K]`` (``K = gaussian_half(σ²) >= 2``)."""
    half = gaussian_half(sigma2)

    def enclosures(prec: int) -> list[Interval]:
        return _gaussian_enclosures(sigma2, half, prec)

    return InversionTable(certify_thresholds(enclosures), enclosures)
