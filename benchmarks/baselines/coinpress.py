"""CoinPress mean estimation (Biswas, Dong, Kamath, Ullman, NeurIPS 2020) — a benchmark baseline.

Our own implementation, re-derived from the paper's statement (known covariance ``I``). Not part of
the privagg package: float noise from numpy is fine for a baseline, not for a release.

Algorithm (one step, ``MVM`` in the paper). Given a public ball ``B(c, r)`` believed to hold the
mean ``μ`` and a per-step budget ``ρ_i``:

1. ``γ = g(d, n/β_i)`` with ``g(d, m) = sqrt(d + 2·sqrt(d·ln m) + 2·ln m)`` (Laurent–Massart:
   ``P[χ²_d ≥ d + 2√(dx) + 2x] ≤ e^{-x}``); if ``μ ∈ B(c, r)``, every ``x_j ~ N(μ, I)`` lies in
   ``B(c, r + γ)`` except with probability ``β_i`` (union bound over the ``n`` points).
2. Clip every point to ``B(c, R)``, ``R = r + γ``; the clipped mean has replace-one ℓ2
   sensitivity ``Δ = 2R/n``.
3. Release ``c' = clipped mean + N(0, σ² I)`` with ``σ = Δ / sqrt(2ρ_i)`` (Gaussian mechanism:
   ``Δ²/(2σ²)``-zCDP, Bun & Steinke 2016, Proposition 1.6).
4. If nothing was clipped, ``c' − μ ~ N(0, (1/n + σ²) I)``, so
   ``r' = sqrt(1/n + σ²) · g(d, 1/β_i)`` bounds ``‖c' − μ‖`` except with probability ``β_i``.

The radii and noise scales depend only on public inputs ``(n, d, r_0, ρ, t, β)``, so the whole
schedule is a :class:`Plan` computed before any data is seen. ``t`` steps compose to
``Σ ρ_i = ρ``-zCDP (Bun & Steinke 2016, Lemma 2.3); each step uses ``β_i = β/(2t)``, so the final
ball holds ``μ`` with probability ``≥ 1 − β``. The final estimate is the last step's ``c'``.

Privacy: replace-one neighbours (``n`` public), ``ρ``-zCDP, hence ``(ε, δ)``-DP with
``ε = privagg.accounting.conversions.zcdp_to_epsilon(ρ, δ)``; :func:`rho_for` finds the largest
such ``ρ`` (on a float grid) for a target ``(ε, δ)``. Public: ``n``, ``d``, the prior ball, ``t``,
``β``, the split. The guarantee holds for every input (clipping enforces the sensitivity); the
Gaussian assumption only affects accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from privagg.accounting.conversions import zcdp_to_epsilon

__all__ = ["SPLITS", "Plan", "best_plan", "chi_radius", "coinpress_mean", "make_plan", "rho_for"]

SPLITS = ("equal", "final-heavy")


def chi_radius(d: int, m: float) -> float:
    """``sqrt(d + 2√(d ln m) + 2 ln m)``: ``‖N(0, I_d)‖`` exceeds it with probability ``≤ 1/m``."""
    lm = math.log(m)
    return math.sqrt(d + 2.0 * math.sqrt(d * lm) + 2.0 * lm)


@lru_cache(maxsize=256)
def rho_for(epsilon: float, delta: float) -> float:
    """The largest float ``ρ`` (to 1e-12 relative) with ``zcdp_to_epsilon(ρ, δ) ≤ ε``.

    ``zcdp_to_epsilon`` is increasing in ``ρ``, so bisection finds the boundary; the returned end
    always satisfies the constraint (the conversion rounds pessimistically).
    """
    d = Fraction(delta)
    target = Fraction(epsilon)
    lo, hi = 0.0, epsilon
    while zcdp_to_epsilon(Fraction(hi), d) <= target:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if zcdp_to_epsilon(Fraction(mid), d) <= target:
            lo = mid
        else:
            hi = mid
    return lo


def _split(rho: Fraction, steps: int, split: str) -> tuple[Fraction, ...]:
    """Per-step budgets, exact: they sum to ``rho`` exactly."""
    if split == "equal":
        return (rho / steps,) * steps
    if split == "final-heavy":  # 1/4 shared by the shrinking steps, 3/4 on the final estimate
        return (rho / (4 * (steps - 1)),) * (steps - 1) + (rho * 3 / 4,)
    raise ValueError(f"split must be one of {SPLITS}; got {split!r}")


def _sigma(clip_radius: float, n: int, rho_i: Fraction) -> float:
    """``Δ/√(2ρ_i)``, ``Δ = 2R/n``, rounded up until ``Δ²/(2σ²) ≤ ρ_i`` holds exactly."""
    delta_l2 = Fraction(clip_radius) * 2 / n
    sigma = float(delta_l2) / math.sqrt(2.0 * float(rho_i))
    while delta_l2**2 / (2 * Fraction(sigma) ** 2) > rho_i:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


@dataclass(frozen=True)
class Plan:
    """A data-independent CoinPress schedule (everything here is public).

    ``clip[i]`` is the clipping radius ``R_i = r_i + γ_i`` of step ``i``, ``sigma[i]`` its noise
    scale, ``rhos[i]`` its zCDP budget, ``radius[i]`` the prior radius ``r_i`` it starts from;
    ``final_radius`` bounds ``‖estimate − μ‖`` with probability ``≥ 1 − β`` for ``N(μ, I)`` data
    with ``μ`` in the prior ball.
    """

    n: int
    d: int
    rho: Fraction
    beta: float
    rhos: tuple[Fraction, ...]
    radius: tuple[float, ...]
    clip: tuple[float, ...]
    sigma: tuple[float, ...]
    final_radius: float

    @property
    def steps(self) -> int:
        return len(self.rhos)

    def spent_rho(self) -> Fraction:
        """``Σ Δ_i²/(2σ_i²)`` exactly, with ``Δ_i = 2R_i/n``: the zCDP actually spent (``≤ ρ``)."""
        return sum(
            (
                (Fraction(c) * 2 / self.n) ** 2 / (2 * Fraction(s) ** 2)
                for c, s in zip(self.clip, self.sigma, strict=True)
            ),
            Fraction(0),
        )


def make_plan(
    n: int,
    d: int,
    *,
    rho: float,
    prior_radius: float,
    steps: int = 4,
    beta: float = 0.01,
    split: str = "final-heavy",
) -> Plan:
    """The CoinPress schedule for ``n`` points in ``R^d``, total budget ``rho`` (zCDP)."""
    if n < 1 or d < 1 or steps < 1 or not rho > 0 or not prior_radius > 0 or not 0 < beta < 1:
        raise ValueError("need n, d, steps >= 1 and rho, prior_radius > 0, beta in (0, 1)")
    if split == "final-heavy" and steps < 2:
        split = "equal"
    rho_f = Fraction(rho)
    rhos = _split(rho_f, steps, split)
    beta_i = beta / (2 * steps)
    gamma = chi_radius(d, n / beta_i)
    gamma_noise = chi_radius(d, 1.0 / beta_i)
    radius, clip, sigma = [], [], []
    r = float(prior_radius)
    for rho_i in rhos:
        radius.append(r)
        big_r = r + gamma
        s = _sigma(big_r, n, rho_i)
        clip.append(big_r)
        sigma.append(s)
        r = math.sqrt(1.0 / n + s * s) * gamma_noise
    return Plan(n, d, rho_f, beta, rhos, tuple(radius), tuple(clip), tuple(sigma), r)


def best_plan(
    n: int,
    d: int,
    *,
    rho: float,
    prior_radius: float,
    beta: float = 0.01,
    steps_range: range = range(2, 11),
) -> Plan:
    """The plan with the smallest ``final_radius`` over ``steps_range`` and both splits.

    A choice made from public inputs only, so it costs no privacy.
    """
    plans = [
        make_plan(n, d, rho=rho, prior_radius=prior_radius, steps=t, beta=beta, split=sp)
        for t in steps_range
        for sp in SPLITS
    ]
    return min(plans, key=lambda p: p.final_radius)


def _clip(points: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    diff = points - center
    norms = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    scale = np.minimum(1.0, radius / np.maximum(norms, np.finfo(float).tiny))
    return center + diff * scale[:, None]


def coinpress_mean(
    points: np.ndarray,
    plan: Plan,
    *,
    center: np.ndarray | None = None,
    rng: np.random.Generator,
) -> np.ndarray:
    """Run ``plan`` on ``points`` (shape ``(n, d)``) from the prior ball around ``center`` (0).

    Returns the private mean estimate, shape ``(d,)``. ``ρ``-zCDP under replace-one neighbours
    (``ρ = plan.rho``), whatever the data.
    """
    x = np.asarray(points, dtype=np.float64)
    if x.shape != (plan.n, plan.d):
        raise ValueError(f"points must have shape {(plan.n, plan.d)}; got {x.shape}")
    c = np.zeros(plan.d) if center is None else np.asarray(center, dtype=np.float64).copy()
    for big_r, s in zip(plan.clip, plan.sigma, strict=True):
        c = _clip(x, c, big_r).mean(axis=0) + rng.normal(0.0, s, size=plan.d)
    return c
