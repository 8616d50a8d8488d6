"""Exact (ε, δ) calibration of Gaussian thresholding (``stable_histogram(noise="gaussian")``).

docs/proofs/histograms.md §11.1. Adding one privacy unit u changes a set A of present keys by a
shift vector s (|A| = a coordinates, each an integer in [1, ℓ∞]) and creates b new keys, a + b ≤ ℓ0.
Every present key's bounded count gets an independent N_Z(0, σ²); a key is kept iff its noisy
count ≥ T. With H_L(P‖Q) = sup_E P(E) − L·Q(E) and q_b = 1 − (1 − P[Z ≥ T − ℓ∞])^b, the pair
(D + u, D) is (ε, δ)-indistinguishable in both directions if, for every b = 0..ℓ0 and every s with
ℓ0 − b coordinates,

    q_b + H_{e^ε}(s) ≤ δ            (D + u against D)
    H_{e^ε (1 − q_b)}(s) ≤ δ        (D against D + u),

where H_L(s) is the hockey-stick divergence of the multivariate discrete Gaussian shifted by s
(the same in both directions by symmetry). It is

    H_L(s) = max_v  P[W ≥ v − ‖s‖²] − L·P[W ≥ v],    W = Σ_i s_i Z_i  (integer valued),

because the likelihood ratio of N_Z(s, σ²I) against N_Z(0, σ²I) at x is exp((2⟨s, x⟩ − ‖s‖²)/(2σ²)),
increasing in the integer ⟨s, x⟩. This module computes a rigorous *upper* bound of H_L(s) for every
multiset s (no monotonicity in s is assumed: all multisets over {1..ℓ∞} of size ≤ ℓ0 are taken),
from certified enclosures of the discrete Gaussian's pmf (integer fixed point, ``noise._exact``),
convolved in float64 with the rounding accounted for by a relative factor (nonnegative sums of n
terms in any order: relative error ≤ γ_n = n·u/(1 − n·u) ≤ 2⁻²⁹·⁹ for n ≤ 2²³), truncation
|Z_i| ≤ M accounted for by a·P[|Z| > M], and flushed tiny entries accounted for by their mass.

Everything here depends on public parameters only (ε, δ, ℓ0, ℓ∞).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from ..noise._exact import ceil_div, exp_neg_fixed, mul_iv
from ..noise._laws import gaussian_half, gaussian_tail_sums
from ..noise.distributions import DiscreteGaussian, _dg_abs_quantile, _dg_abs_tail

__all__ = ["Calibration", "calibrate", "calibrate_noise", "profile_bounds", "MAX_SHIFT_SETS", "MAX_WORK"]

#: At most this many shift multisets (C(ℓ0 + ℓ∞, ℓ0) − 1) for the exact calibration.
MAX_SHIFT_SETS = 512
#: At most this many multiply-adds per σ² evaluation (else the zCDP calibration is used).
MAX_WORK = 4 * 10**8
#: Smallest δ of the exact path (below, float64 tails would underflow).
MIN_DELTA = Fraction(1, 2**200)
_REL = 2.0**-28  # covers γ_n (n ≤ 2^23) and the rounding of the multiplication by (1 ± _REL)
_FLUSH = 2.0**-600  # entries below are flushed to 0 (their mass goes to the slack)
_MAX_LEN = 1 << 23


def _float_up(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _float_down(x: Fraction) -> float:
    f = float(x)
    return math.nextafter(f, 0.0) if Fraction(f) > x else f


def exp_down(x: Fraction) -> Fraction:
    """A rational lower bound of e^x for x ≥ 0 (certified fixed point: e^x = 1/e^{−x})."""
    prec = 96
    _, hi = exp_neg_fixed(x.numerator, x.denominator, prec)
    return Fraction(1 << prec, hi)


@functools.lru_cache(maxsize=64)
def _pmf_bounds(sigma2: Fraction, cut_bits: int) -> tuple[np.ndarray, np.ndarray, int, float]:
    """(lo, hi, M, τ): float arrays with lo[j] ≤ P[Z = j − M] ≤ hi[j] for |j − M| ≤ M, and
    τ ≥ P[|Z| > M], M the smallest with P[|Z| > M] ≤ 2^−cut_bits (certified)."""
    m = max(1, _dg_abs_quantile(sigma2, Fraction(1, 1 << cut_bits)))
    tau = _dg_abs_tail(sigma2, m)
    p, q = sigma2.numerator, sigma2.denominator
    work = cut_bits + 96 + 2 * m.bit_length()
    r = exp_neg_fixed(q, 2 * p, work)  # w_{j+1} = w_j · e^{−(2j+1)/(2σ²)}
    step = exp_neg_fixed(q, p, work)
    w = [(1 << work, 1 << work)]
    for _ in range(m):
        w.append(mul_iv(w[-1], r, work))
        r = mul_iv(r, step, work)
    _, norm = gaussian_tail_sums(sigma2, 64, 128)  # lo ≤ N·2^128 ≤ hi
    lo = np.array([_float_down(Fraction(a << 128, norm[1] << work)) for a, _ in w])
    hi = np.array([_float_up(Fraction(b << 128, norm[0] << work)) for _, b in w])
    lo = np.concatenate([lo[:0:-1], lo])
    hi = np.concatenate([hi[:0:-1], hi])
    lo[lo < 2.0**-500] = 0.0  # lowering a lower bound; no product below 2^-1100 is formed
    return lo, np.minimum(hi, 1.0), m, tau


class _Node:
    """One shift multiset s: enclosures of the tails of W = Σ s_i Z_i (over |Z_i| ≤ M)."""

    __slots__ = ("s2", "a", "radius", "tail_hi", "tail_lo", "slack")

    def __init__(self, s2: int, a: int, radius: int, pmf_lo: np.ndarray, pmf_hi: np.ndarray, slack: float) -> None:
        self.s2, self.a, self.radius, self.slack = s2, a, radius, slack
        self.tail_hi = np.cumsum(pmf_hi[::-1])[::-1] * (1 + _REL)  # ≥ Σ_{w ≥ −R + i} (upper pmf)
        self.tail_lo = np.cumsum(pmf_lo[::-1])[::-1] * (1 - _REL)

    def hockey(self, big_l: float) -> float:
        """An upper bound of H_L(s) (big_l ≤ the true L)."""
        r, s2 = self.radius, self.s2
        v = np.arange(-r, r + s2 + 2)

        def up(x: np.ndarray) -> np.ndarray:
            i = x + r
            inside = np.where((i >= 0) & (i <= 2 * r), self.tail_hi[np.clip(i, 0, 2 * r)] + self.slack, self.slack)
            return np.minimum(np.where(i < 0, 1.0, inside), 1.0)

        def down(x: np.ndarray) -> np.ndarray:
            i = x + r
            inside = np.where(i <= 2 * r, self.tail_lo[np.clip(i, 0, 2 * r)], 0.0)
            return np.where(i < 0, self.tail_lo[0], inside)

        a, b = up(v - s2), down(v)
        lb = big_l * b
        # fl(a − fl(L·b)) is within 2^-52 (a + L b) of a − L b; 2^-50 (a + lb) also covers fl(L·b)
        return float(max(0.0, np.max(a - lb + (a + lb) * 2.0**-50)))


def _shift_sets(l0: int, linf: int) -> int:
    return math.comb(l0 + linf, l0) - 1


def _work(sigma2: float, l0: int, linf: int, cut_bits: int) -> float:
    """A public estimate of the multiply-adds of one σ² evaluation (M from the Gaussian tail)."""
    m = math.sqrt(sigma2 * 2 * math.log(2) * (cut_bits + 2)) + 2
    return _shift_sets(l0, linf) * (2 * l0 * linf * m + 1) * (2 * linf * m + 1)


def _cut_bits(delta: Fraction, l0: int) -> int:
    # truncation mass ≤ ℓ0·2^-cut ≤ δ·2^-40
    return max(64, math.ceil(math.log2(delta.denominator / delta.numerator)) + 40 + l0.bit_length())


@functools.lru_cache(maxsize=64)
def profile_bounds(sigma2: Fraction, l0: int, linf: int, cut_bits: int) -> list[list[_Node]]:
    """nodes[a] = the shift multisets of size a (a = 0..ℓ0), each with its certified tails."""
    lo, hi, m, tau = _pmf_bounds(sigma2, cut_bits)
    nodes: list[list[_Node]] = [[] for _ in range(l0 + 1)]

    def grow(plo: np.ndarray, phi: np.ndarray, radius: int, s2: int, a: int, last: int, flushed: float) -> None:
        for si in range(last, linf + 1):
            glo, ghi = np.zeros(2 * si * m + 1), np.zeros(2 * si * m + 1)
            glo[::si], ghi[::si] = lo, hi
            if plo.size + glo.size > _MAX_LEN:  # pragma: no cover - excluded by MAX_WORK
                raise OverflowError("shift profile too wide")
            clo = np.convolve(plo, glo) * (1 - _REL)
            chi = np.convolve(phi, ghi) * (1 + _REL)
            small = chi < _FLUSH
            fl = flushed + float(np.count_nonzero(small & (chi > 0))) * _FLUSH
            chi[small], clo[clo < _FLUSH] = 0.0, 0.0
            node = _Node(s2 + si * si, a + 1, radius + si * m, clo, chi, (a + 1) * tau + 2 * fl)
            nodes[a + 1].append(node)
            if a + 1 < l0:
                grow(clo, chi, radius + si * m, s2 + si * si, a + 1, si, fl)

    grow(np.ones(1), np.ones(1), 0, 0, 0, 1, 0.0)
    return nodes


def _h(nodes: list[_Node], big_l: float) -> Fraction:
    return max((Fraction(n.hockey(big_l)) for n in nodes), default=Fraction(0))


class Calibration:
    """The exact calibration's result (all Fractions certified; see the module docstring)."""

    __slots__ = ("sigma2", "threshold", "noise_delta", "new_keys_delta", "delta")

    def __init__(self, sigma2: Fraction, threshold: int, noise_delta: Fraction, new_keys_delta: Fraction,
                 delta: Fraction) -> None:
        self.sigma2, self.threshold = sigma2, threshold
        self.noise_delta, self.new_keys_delta, self.delta = noise_delta, new_keys_delta, delta


def certified_delta(sigma2: Fraction, t: int, epsilon: Fraction, l0: int, linf: int,
                    target: Fraction) -> Fraction | None:
    """The certified δ of (σ², T) at ε (max over b of both directions; every multiset), or None
    if some part exceeds ``target`` (then the value is not computed further)."""
    cut = _cut_bits(target, l0)
    big_l = exp_down(epsilon)
    nodes, h_full = _evaluate(sigma2, l0, linf, cut, _float_down(big_l))
    return _threshold_ok(nodes, sigma2, t, l0, linf, big_l, target, h_full)


def _threshold_ok(nodes: list[list[_Node]], sigma2: Fraction, t: int, l0: int, linf: int, big_l: Fraction,
                  target: Fraction, h_full: list[Fraction]) -> Fraction | None:
    p = Fraction(DiscreteGaussian(sigma2).sf(t - linf))  # rounded up
    worst = h_full[l0]
    if worst > target:
        return None
    for b in range(1, l0 + 1):
        qb = 1 - (1 - p) ** b
        d1 = qb + h_full[l0 - b]
        if d1 > target:
            return None
        d2 = _h(nodes[l0 - b], _float_down(big_l * (1 - qb))) if l0 - b > 0 else Fraction(0)
        if d2 > target:
            return None
        worst = max(worst, d1, d2)
    return worst


def _evaluate(sigma2: Fraction, l0: int, linf: int, cut_bits: int,
              big_lf: float) -> tuple[list[list[_Node]], list[Fraction]]:
    nodes = profile_bounds(sigma2, l0, linf, cut_bits)
    return nodes, [_h(nodes[a], big_lf) for a in range(l0 + 1)]


def feasible(l0: int, linf: int, delta: Fraction, sigma2_hi: Fraction) -> bool:
    """Whether the exact path applies (public: parameters and the zCDP σ² bracket only)."""
    if not (delta >= MIN_DELTA and _shift_sets(l0, linf) <= MAX_SHIFT_SETS and gaussian_half(sigma2_hi)):
        return False
    return _work(float(sigma2_hi), l0, linf, _cut_bits(delta, l0)) <= MAX_WORK


@functools.lru_cache(maxsize=128)
def calibrate_noise(epsilon: Fraction, delta: Fraction, l0: int, linf: int,
                    sigma2_hi: Fraction) -> tuple[Fraction, Fraction] | None:
    """(σ², H): the smallest σ² (bisection, 2⁻¹² relative) on the grid of rationals the sampler
    takes whose profile is certified ≤ δ at e^ε for every shift vector of ≤ ℓ0 coordinates in
    [1, ℓ∞] (the noise part alone, b = 0), and that certified H. None when the exact path does not
    apply or cannot certify at ``sigma2_hi`` (the zCDP calibration's σ², a valid upper bracket).
    Used alone by the Laplace histogram's Gaussian option (every domain key noised: no threshold),
    docs/proofs/histograms.md §10.1; by :func:`calibrate` before it sets T."""
    found = _smallest_sigma2(epsilon, delta, l0, linf, sigma2_hi)
    return None if found is None else (found[0], found[2][l0])


def _smallest_sigma2(epsilon: Fraction, delta: Fraction, l0: int, linf: int, sigma2_hi: Fraction
                     ) -> tuple[Fraction, list[list[_Node]], list[Fraction]] | None:
    from ..noise.rational import to_fraction

    if not feasible(l0, linf, delta, sigma2_hi):
        return None
    cut = _cut_bits(delta, l0)
    big_lf = _float_down(exp_down(epsilon))

    def ok(s2: Fraction) -> bool:
        return _evaluate(s2, l0, linf, cut, big_lf)[1][l0] <= delta

    def snap(x: float) -> Fraction:
        return to_fraction(Fraction(x), where="stable_histogram", name="epsilon", direction="up")

    if not ok(sigma2_hi):
        return None
    lo_f, hi_f = float(sigma2_hi) / 4, float(sigma2_hi)
    if ok(snap(lo_f)):
        hi_f = lo_f
    while hi_f - lo_f > hi_f * 2.0**-12:
        mid = (lo_f + hi_f) / 2
        if ok(snap(mid)):
            hi_f = mid
        else:
            lo_f = mid
    sigma2 = snap(hi_f) if hi_f < float(sigma2_hi) else sigma2_hi
    nodes, h_full = _evaluate(sigma2, l0, linf, cut, big_lf)
    return sigma2, nodes, h_full


@functools.lru_cache(maxsize=128)
def calibrate(epsilon: Fraction, delta: Fraction, l0: int, linf: int, sigma2_hi: Fraction) -> Calibration | None:
    """σ², T for (ε, δ): the smallest σ² of :func:`calibrate_noise` (the noise part alone, b = 0,
    certified ≤ δ), then the smallest T with every mix (b new keys, ℓ0 − b changed ones) certified
    ≤ δ in both directions. None when the exact path does not apply or cannot certify (the caller
    then uses the zCDP calibration).

    ``sigma2_hi``: the zCDP calibration's σ² at (ε, δ), a valid upper bracket.
    """
    from .histogram import per_key_delta

    found = _smallest_sigma2(epsilon, delta, l0, linf, sigma2_hi)
    if found is None:
        return None
    sigma2, nodes, h_full = found
    big_l = exp_down(epsilon)
    law = DiscreteGaussian(sigma2)
    t = max(1, linf + law.upper_quantile(per_key_delta(float(delta), l0)))
    for _ in range(64 + 4 * math.isqrt(int(sigma2) + 1)):
        worst = _threshold_ok(nodes, sigma2, t, l0, linf, big_l, delta, h_full)
        if worst is not None:
            qmax = 1 - (1 - Fraction(law.sf(t - linf))) ** l0
            return Calibration(sigma2, t, h_full[l0], qmax, worst)
        t += 1
    return None  # pragma: no cover - T grows past the noise's reach only if δ is mis-set
