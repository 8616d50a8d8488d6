"""Exact samplers, vectorized over arrays (loops only over rejection rounds).

Every sampler draws uniform 64-bit words from the generator that ``rng`` resolves to
(:func:`privagg.noise.rng.resolve_rng`) and turns them into exact draws; no floating-point
number is involved anywhere. Parameters are exact rationals (:func:`to_fraction` rounds floats
so that the noise is never smaller than asked). Proofs: ``docs/proofs/noise.md``.

Shapes: ``size`` is an int or a tuple (or list) of ints; ``size=None`` returns a 0-d array.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import fail
from ._laws import (
    gaussian_half,
    gaussian_table,
    geometric_lazy,
    geometric_plan,
    geometric_shape,
    laplace_half,
    laplace_lazy,
    laplace_table,
)
from ._tables import invert, random_words
from .rational import to_fraction
from .rng import resolve_rng

__all__ = [
    "MAX_NOISE_SCALE",
    "bernoulli_exp",
    "bernoulli_fraction",
    "bernoulli_rational",
    "check_noise_scale",
    "discrete_gaussian",
    "discrete_laplace",
    "geometric",
]

_INT64_MAX = np.iinfo(np.int64).max

#: Largest discrete Laplace scale ``t`` (and largest ``1/γ`` of a geometric law) the int64
#: samplers accept; larger ones raise ParameterError (a property of the public parameter).
#: At ``t <= 2^50``: ``P[|Z| >= 2^62] = 2q^{2^62}/(1+q) <= 2e^{−2^12}`` (``q = e^{−1/t}``),
#: and a geometric draw reaches ``2^63`` with probability ``<= e^{−2^13}``; so a released
#: count ``c + Z`` with ``|c| < 2^62`` fits int64 except with probability below 10^−1700.
#: (Draws are also saturated at ``2^63 − 1`` instead of wrapping, docs/proofs/noise.md §7.3.)
#: Above ~2^63 the int64 result used to wrap silently (4bd1e9f).
MAX_NOISE_SCALE = Fraction(2**50)


def _approx(t: Fraction) -> Any:
    """A short public rendering of a (possibly enormous) positive rational, for messages."""
    if t < 2**1000:
        return float(t)
    return f"about 2**{t.numerator.bit_length() - t.denominator.bit_length()}"


def check_noise_scale(where: str, name: str, scale: Any, value: Any = None) -> Fraction:
    """``scale`` as an exact Fraction, or ParameterError if it exceeds :data:`MAX_NOISE_SCALE`.

    For the parameter checks of mechanisms (run before the ledger is charged): ``name`` and
    ``value`` (default: ``scale``) name the public parameter the message reports.
    """
    t = Fraction(scale)
    if t > MAX_NOISE_SCALE:
        shown = _approx(t) if value is None else value
        raise fail(where, name, f"a value whose noise scale is <= 2**50 (scale {_approx(t)})",
                   shown)
    return t

#: A table of ``m`` entries is certified whole when ``LAZY_RATIO · n >= m`` for ``n`` draws,
#: else entry by entry as the draws reach it (:class:`~._tables.LazyTable`; same output, same
#: words drawn). A lazy draw (one or two entries certified alone) costs about as much as 8
#: entries of a whole table (measured: 40-50 µs against 4-6 µs per entry). Once a lazy table
#: holds ``m / LAZY_RATIO`` entries (many small calls at one scale) the whole table is built,
#: so the total never exceeds about twice the whole-table cost. The choice depends only on
#: the public ``n`` and parameter and on earlier calls, never on the data.
LAZY_RATIO = 8


def _pick_table(lazy: Any, whole: Any, param: Fraction, n: int, m: int) -> Any:
    """The lazy table of ``param`` for few draws, else the whole (cached) table."""
    if LAZY_RATIO * n < m:
        table = lazy(param)
        if LAZY_RATIO * table.certified < m:
            return table
    return whole(param)


def _shape(where: str, size: Any) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        dims: tuple[Any, ...] = (size,)
    elif isinstance(size, (tuple, list)):
        dims = tuple(size)
    else:
        raise fail(where, "size", "None, an int >= 0 or a tuple of them", size)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or int(d) < 0:
            raise fail(where, "size", "None, an int >= 0 or a tuple of them", size)
    return tuple(int(d) for d in dims)


# ----------------------------------------------------------------------------- Bernoulli
def bernoulli_rational(
    numerator: Any, denominator: Any, size: Any = None, *, rng: Any = None
) -> np.ndarray:
    """Exact Bernoulli(numerator / denominator) draws, elementwise.

    ``numerator`` and ``denominator`` are integers or int64 arrays (broadcast together and with
    ``size``) with ``0 <= numerator <= denominator`` and ``1 <= denominator < 2**63``. Each
    draw is ``U < numerator`` for ``U`` uniform on ``{0, …, denominator − 1}``; numpy's
    bounded-integer routine is exact (rejection), so ``P[True] = numerator / denominator``
    exactly. For a rational with a larger denominator use :func:`bernoulli_fraction`.

    Returns a bool array of the broadcast shape (or of ``size``).
    """
    gen, _ = resolve_rng(rng, "bernoulli_rational")
    num = np.asarray(numerator, dtype=np.int64)
    den = np.asarray(denominator, dtype=np.int64)
    if np.any(den < 1) or np.any(num < 0) or np.any(num > den):
        raise ValueError(
            "bernoulli_rational: need 1 <= denominator and 0 <= numerator <= denominator"
        )
    if size is None:
        size = np.broadcast_shapes(num.shape, den.shape)
    u = gen.integers(0, den, size=size, dtype=np.int64)
    return u < num


def bernoulli_fraction(p: Fraction, size: Any = None, *, rng: Any = None) -> np.ndarray:
    """Exact Bernoulli(p) for a scalar rational ``p`` in [0, 1] of any size.

    Denominators below ``2**63`` use :func:`bernoulli_rational`; larger ones compare uniform
    64-bit words with the binary expansion of ``p`` word by word (exact: ``U < p`` is decided
    at the first word where the uniform bits differ from the bits of ``p``, and ``p`` is
    rational so its expansion is computed exactly).
    """
    p = Fraction(p)
    if not 0 <= p <= 1:
        raise ValueError("bernoulli_fraction: need 0 <= p <= 1")
    if p.denominator <= _INT64_MAX:
        return bernoulli_rational(p.numerator, p.denominator, size, rng=rng)
    gen, _ = resolve_rng(rng, "bernoulli_fraction")
    shape = _shape("bernoulli_fraction", size)
    n = math.prod(shape)
    out = np.zeros(n, dtype=bool)
    active = np.arange(n)
    rest = p  # the remaining expansion of p, in [0, 1)
    while active.size:
        word = rest * (1 << 64)
        digit = min(int(word), (1 << 64) - 1)
        rest = word - digit
        u = random_words(gen, active.size)
        d = np.uint64(digit)
        out[active[u < d]] = True
        active = active[u == d]
    return out.reshape(shape)


def bernoulli_exp(
    gamma_num: Any, gamma_den: Any, size: Any = None, *, rng: Any = None
) -> np.ndarray:
    """Exact Bernoulli(exp(−γ)) for rational ``γ = gamma_num / gamma_den >= 0``, elementwise.

    Canonne, Kamath & Steinke (2020), Algorithm 1, vectorized over rounds: for ``γ <= 1`` draw
    ``A_k ~ Bernoulli(γ/k)`` for ``k = 1, 2, …`` until the first ``A_k = 0``; the result is
    ``True`` iff that ``k`` is odd (``P = Σ_k (−1)^{k−1} … = e^{−γ}``). For ``γ > 1`` it is the
    AND of ``floor(γ)`` independent Bernoulli(exp(−1)) and one Bernoulli(exp(−(γ − floor γ))).

    ``gamma_num``, ``gamma_den`` are ints or int64 arrays (broadcast together and with
    ``size``), ``gamma_num >= 0``, ``1 <= gamma_den < 2**63``. Returns a bool array.
    """
    gen, _ = resolve_rng(rng, "bernoulli_exp")
    num = np.asarray(gamma_num, dtype=np.int64)
    den = np.asarray(gamma_den, dtype=np.int64)
    if np.any(den < 1) or np.any(num < 0):
        raise ValueError("bernoulli_exp: need gamma_num >= 0 and gamma_den >= 1")
    shape = (
        np.broadcast_shapes(num.shape, den.shape)
        if size is None
        else _shape("bernoulli_exp", size)
    )
    num = np.broadcast_to(num, shape).ravel()
    den = np.broadcast_to(den, shape).ravel()
    whole, frac = np.divmod(num, den)
    out = np.ones(num.size, dtype=bool)
    # floor(γ) factors of Bernoulli(e^{-1}): an element stays while all its factors succeed.
    active = np.flatnonzero(whole > 0)
    done = np.zeros(num.size, dtype=np.int64)
    while active.size:
        ok = _bern_exp_le1(
            np.ones(active.size, np.int64), np.ones(active.size, np.int64), gen
        )
        out[active[~ok]] = False
        done[active] += 1
        active = active[ok & (done[active] < whole[active])]
    rest = np.flatnonzero(out & (frac > 0))
    if rest.size:
        out[rest] = _bern_exp_le1(frac[rest], den[rest], gen)
    return out.reshape(shape)


def _bern_exp_le1(
    num: np.ndarray, den: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for ``0 <= num <= den`` (CKS Algorithm 1, rounds over k).

    ``Bernoulli(γ/k)`` is one bounded integer draw when ``den·k`` fits int64, else the AND of
    independent ``Bernoulli(num/den)`` and ``Bernoulli(1/k)`` (same probability, exactly).
    """
    n = num.size
    stop_k = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    k = 1
    while active.size:
        d, m = den[active], num[active]
        if int(d.max()) <= _INT64_MAX // k:
            a = gen.integers(0, d * k, dtype=np.int64) < m
        else:
            a = (gen.integers(0, d, dtype=np.int64) < m) & (
                gen.integers(0, k, size=active.size, dtype=np.int64) == 0
            )
        stop_k[active[~a]] = k
        active = active[a]
        k += 1
    return (stop_k & 1) == 1


def _bern_exp_scalar(num: int, den: int, gen: np.random.Generator) -> bool:
    """Bernoulli(exp(−num/den)) for Python integers of any size (one draw, rare paths).

    Same algorithm as :func:`bernoulli_exp`, with :func:`bernoulli_fraction` for each
    ``Bernoulli(γ/k)``, so no fixed-width arithmetic is involved.
    """
    whole, frac = divmod(num, den)
    for _ in range(whole):  # AND of Bernoulli(e^{-1}) draws; ends at the first failure
        if not _bern_exp_scalar_le1(1, 1, gen):
            return False
    return frac == 0 or _bern_exp_scalar_le1(frac, den, gen)


def _bern_exp_scalar_le1(num: int, den: int, gen: np.random.Generator) -> bool:
    """Bernoulli(exp(−num/den)) for ``0 <= num <= den`` (CKS Algorithm 1, one element)."""
    k = 1
    while bool(bernoulli_fraction(Fraction(num, den * k), rng=gen)):
        k += 1
    return k % 2 == 1


# ----------------------------------------------------------------------------- geometric
def _geometric_flat(gamma: Fraction, n: int, gen: np.random.Generator) -> np.ndarray:
    """``n`` exact draws of ``Geom(γ)``: ``P[G = k] = (1 − e^{−γ}) e^{−γk}``.

    ``γ >= 1/MAX_NOISE_SCALE`` (else ParameterError). A draw is saturated at ``2^63 − 1``
    instead of wrapping (probability ``<= e^{−2^13}``, see :data:`MAX_NOISE_SCALE`).
    """
    if gamma * MAX_NOISE_SCALE < 1:
        raise fail("geometric", "gamma", "a rational >= 2**-50 (noise scale 1/gamma <= 2**50)",
                   _approx(gamma) if gamma > 0 else gamma)
    truncated, size, sub = geometric_shape(gamma)
    table = _pick_table(
        geometric_lazy, lambda g: geometric_plan(g)[0], gamma, n, size
    )
    if truncated:
        assert sub is not None
        b = invert(table, random_words(gen, n), gen)
        a = np.minimum(_geometric_flat(sub, n, gen), (_INT64_MAX - size) // (size + 1))
        return a * (size + 1) + b  # <= 2^63 − 1: saturated, never wrapped
    out = invert(table, random_words(gen, n), gen)
    pending = np.flatnonzero(out == size)  # G >= size: add a fresh Geom(γ) (memoryless)
    while pending.size:
        extra = invert(table, random_words(gen, pending.size), gen)
        out[pending] += extra
        pending = pending[extra == size]
    return out


def geometric(gamma: Any, size: Any = None, *, rng: Any = None) -> np.ndarray:
    """Exact geometric draws ``P[G = k] = (1 − e^{−γ}) e^{−γk}``, ``k >= 0`` (int64).

    ``gamma`` is a positive rational (a float is rounded *down*, i.e. to more noise).
    Inversion with a certified table (see :mod:`privagg.noise._tables`); the tail beyond the
    table uses memorylessness, very small ``γ`` the split ``G = (K+1)A + B``.
    """
    g = to_fraction(gamma, where="geometric", name="gamma", direction="down")
    gen, _ = resolve_rng(rng, "geometric")
    shape = _shape("geometric", size)
    return _geometric_flat(g, math.prod(shape), gen).reshape(shape)


# ----------------------------------------------------------------------------- Laplace
def _laplace_flat(scale: Fraction, n: int, gen: np.random.Generator) -> np.ndarray:
    """``n`` exact draws of ``DL(t)``; ParameterError if ``t > MAX_NOISE_SCALE`` (any ``n``)."""
    if scale > MAX_NOISE_SCALE:
        raise fail("discrete_laplace", "scale", "a number <= 2**50 (MAX_NOISE_SCALE)",
                   _approx(scale))
    half = laplace_half(scale)
    if half == 0:  # very wide law: Z = G1 − G2 with G_i ~ Geom(1/t)
        g = _geometric_flat(1 / scale, 2 * n, gen)
        return g[:n] - g[n:]
    table = _pick_table(laplace_lazy, laplace_table, scale, n, 2 * half + 2)
    idx = invert(table, random_words(gen, n), gen)
    z = idx - (half + 1)
    left = np.flatnonzero(idx == 0)
    right = np.flatnonzero(idx == 2 * half + 2)
    if left.size or right.size:  # tails: Z <= −K−1 or Z >= K+1, memoryless beyond
        g = np.minimum(_geometric_flat(1 / scale, left.size + right.size, gen),
                       _INT64_MAX - half - 1)  # saturated, never wrapped (t <= 1365 here)
        z[left] -= g[: left.size]
        z[right] += g[left.size :]
    return z


def discrete_laplace(scale: Any, size: Any = None, *, rng: Any = None) -> np.ndarray:
    """Exact discrete Laplace noise: ``P[Z = k] ∝ exp(−|k|/scale)`` over the integers.

    Parameters
    ----------
    scale : int, Fraction or float
        ``t > 0``. A float is rounded *up* to a rational (never less noise than asked).
    size : None, int or tuple of ints
        Output shape; ``None`` gives a 0-d array.
    rng : None, int, SeedSequence or Generator
        ``None`` (default) draws from the secure generator; see :func:`resolve_rng`.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Notes
    -----
    One 64-bit word per draw is inverted through a certified table of the CDF on
    ``[−K, K]`` (``K ≈ 6t``); draws beyond go to ``±(K+1) ± Geom(1/t)``. Scales above ~1365
    use ``Z = G1 − G2`` with two geometric draws. Exact: see docs/proofs/noise.md. For a few
    draws at a new scale only the table entries the draws reach are certified (about
    0.2 ms per new scale instead of about 7 ms, benchmarks/noise.py; same outputs).

    Raises
    ------
    ParameterError
        If ``scale`` is not a finite number > 0, or exceeds :data:`MAX_NOISE_SCALE` (``2^50``;
        larger scales would overflow int64, docs/proofs/noise.md §7.3), for any ``size``.

    Examples
    --------
    >>> discrete_laplace(2, size=3, rng=1).dtype
    dtype('int64')
    """
    t = to_fraction(scale, where="discrete_laplace", name="scale", direction="up")
    gen, _ = resolve_rng(rng, "discrete_laplace")
    shape = _shape("discrete_laplace", size)
    return _laplace_flat(t, math.prod(shape), gen).reshape(shape)


# ----------------------------------------------------------------------------- Gaussian
def _gaussian_tail(
    sigma2: Fraction, start: int, n: int, gen: np.random.Generator
) -> np.ndarray:
    """``n`` draws of ``J = |Z| − start`` given ``|Z| >= start`` for ``Z ~ DG(σ²)``.

    Rejection: with ``k = start + J``, ``w_k ∝ e^{−start·J/σ²} · e^{−J²/(2σ²)}``; propose
    ``J ~ Geom(start/σ²)``, accept with probability ``e^{−J²/(2σ²)}``.
    """
    p, q = sigma2.numerator, sigma2.denominator
    # Elements whose exponent j²q/(2p) does not fit int64 take the exact big-integer path.
    limit = math.isqrt(_INT64_MAX // q) if 2 * p <= _INT64_MAX else -1
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        j = _geometric_flat(Fraction(start * q, p), pending.size, gen)
        ok = np.zeros(j.size, dtype=bool)
        small = np.flatnonzero(j <= limit)
        if small.size:
            js = j[small]
            ok[small] = bernoulli_exp(js * js * q, 2 * p, rng=gen)
        for i in np.flatnonzero(j > limit):
            ok[i] = _bern_exp_scalar(int(j[i]) ** 2 * q, 2 * p, gen)
        out[pending[ok]] = j[ok]
        pending = pending[~ok]
    return out


def _cks_constants(sigma2: Fraction) -> tuple[int, int, int, int]:
    """``(t, a, b, den)`` of :func:`_gaussian_cks` for ``σ² = p/q``: ``t = floor(σ) + 1``,
    ``g = gcd(qt, p)``, ``a = qt/g``, ``b = p/g``, ``den = 2abt``."""
    p, q = sigma2.numerator, sigma2.denominator
    t = math.isqrt(p // q) + 1
    g = math.gcd(q * t, p)
    a, b = q * t // g, p // g
    return t, a, b, 2 * a * b * t


def _check_gaussian(sigma2: Fraction) -> None:
    """ParameterError unless the exact sampler takes ``σ²`` (public: the parameter only).

    A table (``σ <~ 1365``) always works; wider, the CKS constants must satisfy
    ``b² <= 2^63 − 1`` and ``den <= (2^63 − 1)/2^8``, which also bounds ``σ² < 2^54`` and the
    Laplace proposal's scale ``t < 2^28`` (far below :data:`MAX_NOISE_SCALE`). Checked before
    any word is drawn, so a refused ``σ²`` fails the same way for every ``size`` (also 0).
    """
    if gaussian_half(sigma2) != 0:
        return
    _, _, b, den = _cks_constants(sigma2)
    if b * b > _INT64_MAX or den > _INT64_MAX >> 8:
        raise fail(
            "discrete_gaussian",
            "sigma2",
            "a rational whose reduced CKS acceptance fits int64 (e.g. an integer multiple of floor(sigma)+1)",
            sigma2,
        )


def _gaussian_cks(sigma2: Fraction, n: int, gen: np.random.Generator) -> np.ndarray:
    """Canonne–Kamath–Steinke Algorithm 3 (for σ too wide for a table), in rounds.

    Propose ``Y ~ DL(t)``, ``t = floor(σ) + 1``; accept with probability
    ``exp(−(|Y| − σ²/t)² / (2σ²))``. With σ² = p/q, ``a = qt/g``, ``b = p/g``,
    ``g = gcd(qt, p)``, the exponent is ``γ = (|Y|·a − b)² / (2·a·b·t)`` (reduced exactly), so
    a σ² that is a multiple of ``t`` keeps every number small. The parameter check
    (:func:`_check_gaussian`) runs before any draw; a proposal ``|Y|`` whose numerator
    ``(|Y|a − b)²`` does not fit int64 (rare) is accepted by the exact big-integer path, so
    nothing here depends on the draws but the draws themselves.
    """
    _check_gaussian(sigma2)
    t, a, b, den = _cks_constants(sigma2)
    # |Y| <= limit  ⇒  |(|Y|·a − b)| <= max(b, isqrt(MAX)) and its square fits int64.
    limit = (b + math.isqrt(_INT64_MAX)) // a
    out = np.empty(n, dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        y = _laplace_flat(Fraction(t), pending.size, gen)
        ay = np.abs(y)
        ok = np.zeros(y.size, dtype=bool)
        small = np.flatnonzero(ay <= limit)
        if small.size:
            s = ay[small]
            ok[small] = bernoulli_exp((s * a - b) ** 2, den, rng=gen)
        for i in np.flatnonzero(ay > limit):
            ok[i] = _bern_exp_scalar((int(ay[i]) * a - b) ** 2, den, gen)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    return out


def _gaussian_flat(sigma2: Fraction, n: int, gen: np.random.Generator) -> np.ndarray:
    half = gaussian_half(sigma2)
    if half == 0:
        return _gaussian_cks(sigma2, n, gen)
    idx = invert(gaussian_table(sigma2), random_words(gen, n), gen)
    z = idx - (half + 1)
    left = np.flatnonzero(idx == 0)
    right = np.flatnonzero(idx == 2 * half + 2)
    if left.size or right.size:  # |Z| >= K+1: exact tail rejection sampler
        j = _gaussian_tail(sigma2, half + 1, left.size + right.size, gen)
        z[left] -= j[: left.size]
        z[right] += j[left.size :]
    return z


def discrete_gaussian(sigma2: Any, size: Any = None, *, rng: Any = None) -> np.ndarray:
    """Exact discrete Gaussian noise: ``P[Z = k] ∝ exp(−k²/(2σ²))`` over the integers.

    Parameters
    ----------
    sigma2 : int, Fraction or float
        The variance parameter ``σ² > 0`` (a float is rounded *up*).
    size : None, int or tuple of ints
        Output shape; ``None`` gives a 0-d array.
    rng : None, int, SeedSequence or Generator
        ``None`` (default) draws from the secure generator.

    Returns
    -------
    numpy.ndarray of int64, shape ``size``

    Notes
    -----
    For ``σ <= ~1365``: inversion of one 64-bit word through a certified table of the CDF on
    ``[−K, K]`` (``K = ceil(6σ)``), and an exact rejection sampler for ``|Z| > K``
    (probability ~1e-8); about 30 M draws/s. Wider: Canonne, Kamath & Steinke (2020)
    Algorithm 3 (about 1 M draws/s), whose exact acceptance exponent must fit int64 after
    reduction: integer σ² up to about 10^8, or σ² a multiple of ``floor(σ) + 1`` up to about
    10^16 (:func:`privagg.noise.grid.grid_gaussian` rounds its σ² that way).

    Raises
    ------
    ParameterError
        If ``sigma2`` is not a finite number > 0, or is too wide for a table and its CKS
        acceptance exponent does not fit int64 (a property of the public parameter only).

    Examples
    --------
    >>> discrete_gaussian(4, size=(2, 2), rng=1).shape
    (2, 2)
    """
    s2 = to_fraction(sigma2, where="discrete_gaussian", name="sigma2", direction="up")
    _check_gaussian(s2)
    gen, _ = resolve_rng(rng, "discrete_gaussian")
    shape = _shape("discrete_gaussian", size)
    return _gaussian_flat(s2, math.prod(shape), gen).reshape(shape)
