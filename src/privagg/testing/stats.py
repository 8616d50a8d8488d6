"""Goodness-of-fit and binomial confidence tools with explicit error rates."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "binomial_two_sided_p",
    "chisquare_gof",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "discrete_gaussian_pmf",
    "discrete_laplace_pmf",
    "wilson_interval",
    "wilson_lower",
    "wilson_upper",
]

PmfLike = Callable[[np.ndarray], np.ndarray]


def chisquare_gof(samples: Any, pmf: PmfLike, *, min_expected: float = 5.0) -> float:
    """p-value of Pearson's chi-square test that integer ``samples`` follow ``pmf``.

    Bins are the integers where the expected count ``n·pmf(k)`` is at least ``min_expected``,
    plus two tail bins (``< lo`` and ``> hi``) holding the remaining mass; a tail bin whose
    expected count is below ``min_expected`` is merged into its neighbour. Degrees of freedom:
    bins − 1. The pmf is evaluated on a window around the most frequent observed value, grown
    until its edges carry expected counts ``<= 1e-9``; mass beyond is neglected (fine for laws
    with geometric or faster tails, which is what this tester is for).

    Parameters
    ----------
    samples : array-like of int
    pmf : callable
        Maps an int64 array of support points to their probabilities (float64); a scalar
        function ``pmf(k: int) -> float`` (such as ``DiscreteLaplace(t).pmf``) also works,
        more slowly. The law must be supported on the integers and unimodal with geometric or
        lighter tails (discrete Laplace, Gaussian, geometric).
    min_expected : float
        Smallest expected count per bin (5 is the usual rule).

    Returns
    -------
    float
        The p-value; under the null it is uniform, so ``p < α`` happens with probability α.
    """
    pmf = _vectorized(pmf)
    x = np.asarray(samples).ravel().astype(np.int64)
    n = x.size
    if n == 0:
        raise ValueError("chisquare_gof: no samples")
    values, counts = np.unique(x, return_counts=True)
    center = int(values[np.argmax(counts)])
    # Grow a window around the mode until its edges carry negligible expected counts
    # (<= 1e-9 each), so the mass outside it is negligible for laws with geometric tails.
    width = 64
    while True:
        ks = np.arange(center - width, center + width + 1, dtype=np.int64)
        expected = n * np.asarray(pmf(ks), dtype=np.float64)
        if expected[0] <= 1e-9 and expected[-1] <= 1e-9:
            break
        width *= 4
    big = np.flatnonzero(expected >= min_expected)
    if big.size == 0:
        raise ValueError("chisquare_gof: no bin reaches min_expected")
    lo_i, hi_i = big[0], big[-1]
    ks = ks[lo_i : hi_i + 1]
    exp_mid = expected[lo_i : hi_i + 1]
    left_mass = math.fsum(expected[:lo_i])
    right_mass = math.fsum(expected[hi_i + 1 :])
    obs_mid = np.zeros(ks.size, dtype=np.float64)
    inside = (x >= ks[0]) & (x <= ks[-1])
    np.add.at(obs_mid, x[inside] - ks[0], 1.0)
    obs_left = float(np.count_nonzero(x < ks[0]))
    obs_right = float(np.count_nonzero(x > ks[-1]))
    obs = list(obs_mid)
    exp = list(exp_mid)
    # left tail bin (merged into the first bin if too small)
    if left_mass >= min_expected:
        obs.insert(0, obs_left)
        exp.insert(0, left_mass)
    else:
        obs[0] += obs_left
        exp[0] += left_mass
    if right_mass >= min_expected:
        obs.append(obs_right)
        exp.append(right_mass)
    else:
        obs[-1] += obs_right
        exp[-1] += right_mass
    o = np.asarray(obs)
    e = np.asarray(exp)
    if o.size < 2:
        raise ValueError("chisquare_gof: fewer than two bins; use more samples")
    stat = float(np.sum((o - e) ** 2 / e))
    return float(stats.chi2.sf(stat, o.size - 1))


def _vectorized(pmf: Callable[..., Any]) -> PmfLike:
    """Accept scalar pmfs (e.g. ``DiscreteLaplace(t).pmf``) as well as vectorized ones."""

    def vec(ks: np.ndarray) -> np.ndarray:
        try:
            out = np.asarray(pmf(ks), dtype=np.float64)
            if out.shape == ks.shape:
                return out
        except (TypeError, ValueError):
            pass
        return np.fromiter((pmf(int(k)) for k in ks), dtype=np.float64, count=ks.size)

    return vec


def binomial_two_sided_p(successes: int, trials: int, p: float) -> float:
    """Exact two-sided binomial test p-value of ``successes`` in ``trials`` at rate ``p``."""
    return float(stats.binomtest(int(successes), int(trials), float(p)).pvalue)


def _z(alpha: float) -> float:
    return float(stats.norm.isf(alpha))


def _wilson(successes: int, trials: int, z: float) -> tuple[float, float]:
    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError("wilson: need 0 <= successes <= trials and trials >= 1")
    n = float(trials)
    phat = successes / n
    denom = 1 + z * z / n
    center = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def wilson_upper(successes: int, trials: int, alpha: float = 1e-6) -> float:
    """One-sided Wilson score upper confidence bound for a binomial rate at level 1 − α.

    ``P[rate > wilson_upper] <= α`` (approximately, the Wilson interval's coverage is close to
    nominal, and conservative for small rates when α is small).
    """
    return _wilson(successes, trials, _z(alpha))[1]


def wilson_lower(successes: int, trials: int, alpha: float = 1e-6) -> float:
    """One-sided Wilson score lower confidence bound at level 1 − α."""
    return _wilson(successes, trials, _z(alpha))[0]


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """Exact (Clopper–Pearson) one-sided lower confidence bound for a binomial rate:
    ``P[rate < bound] <= α``; 0 when there is no success."""
    k, n = int(successes), int(trials)
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """Exact (Clopper–Pearson) one-sided upper confidence bound: ``P[rate > bound] <= α``; 1 when
    every trial succeeded."""
    k, n = int(successes), int(trials)
    return 1.0 if k == n else float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def wilson_interval(
    successes: int, trials: int, alpha: float = 1e-6
) -> tuple[float, float]:
    """Two-sided Wilson score interval at level 1 − α (α/2 on each side)."""
    return _wilson(successes, trials, _z(alpha / 2))


def discrete_laplace_pmf(scale: Any) -> PmfLike:
    """Independent float reference: ``pmf(k) = tanh(1/(2t)) · e^{−|k|/t}`` (numpy)."""
    t = float(Fraction(scale))
    c = math.tanh(1 / (2 * t))  # (1 − q)/(1 + q)

    def pmf(ks: np.ndarray) -> np.ndarray:
        return c * np.exp(-np.abs(ks.astype(np.float64)) / t)

    return pmf


def discrete_gaussian_pmf(sigma2: Any) -> PmfLike:
    """Independent float reference ``e^{−k²/(2σ²)} / N`` with ``N`` an fsum over ``|k| <= 40σ + 40``."""
    s2f = float(Fraction(sigma2))
    reach = int(40 * math.sqrt(s2f)) + 40
    ks = np.arange(-reach, reach + 1, dtype=np.float64)
    norm = math.fsum(np.exp(-ks * ks / (2 * s2f)))

    def pmf(ks: np.ndarray) -> np.ndarray:
        k = ks.astype(np.float64)
        return np.exp(-k * k / (2 * s2f)) / norm

    return pmf
