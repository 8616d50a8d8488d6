"""An audit with power: the exact privacy loss of FriendlyCore's conversion on tiny inputs.

The sampling audits (test_fc_mean_audit.py, test_fc_kmeans_audit.py, test_fc_audit.py) cannot
show a loss above about 2 with a few hundred runs, so they cannot see a leak of 1.3–2× at the
claimed ε of 1–1.5. Here no sampling is involved: the mechanism is

    D ↦ |BasicFilter(D)| + Z,   Z ~ discrete Laplace of scale 1/ε₀,

an ε₀-friendly-DP algorithm (the core size changes by at most 1 between friendly neighbours)
after privagg's own BasicFilter, so the conversion theorem claims
``end_to_end_budget(ε₀, 0, α) = (ε', 0)``: pure ε'-DP. Its output law is computed exactly from
privagg's keep probabilities (the core size is Poisson-binomial; convolved with Z's pmf, written
here), and the loss ``max_o |ln P_D(o)/P_D'(o)|`` over all outputs is compared with ε'.

What it detects: any pair on which the true loss exceeds the claim, with no false failures (the
computation is exact up to float rounding, 1e-9 here). The adversarial pair (two cliques of n/2
and a z friend of all) comes within 2 % of the claim at ε₀ = 0.05 and α = 0 (within 10 % at
α = 0.25), so a conversion constant L, or a filter keeping more than it should (e.g. a larger α
than claimed), that is off by more than that on this pair is caught. What it does not
cover: the noise and rounding inside private_mean / private_kmeans themselves (their own audits
and exact tests do), pairs other than those listed, and property P2 (a core size does not need
a friendly union; the c >= n/2 keep rule is caught by test_fc_filter.py).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.friendlycore.filter as F
from privagg.friendlycore import ball, end_to_end_budget, friend_counts, keep_probabilities

TOL = 1e-9


def core_size_law(points: np.ndarray, r: float, alpha) -> np.ndarray:
    """Exact law of |BasicFilter(points)| (Poisson-binomial of privagg's keep probabilities)."""
    num, den = keep_probabilities(friend_counts(points, ball(r)), alpha=alpha)
    law = np.array([1.0])
    for u, v in zip(num.tolist(), den.tolist()):
        p = float(Fraction(u, v))
        law = np.convolve(law, [1 - p, p])
    return law


def exact_loss(d0: np.ndarray, d1: np.ndarray, r: float, alpha, eps0: float) -> float:
    """max over outputs o of |ln P[M(D) = o] − ln P[M(D') = o]|, M = core size + DLap(1/ε₀).

    Outside [−1, max size + 1] both laws are a constant times q^{|o|}, so their ratio is that
    at the window's ends: the window covers every ratio."""
    q = math.exp(-eps0)
    a, b = core_size_law(d0, r, alpha), core_size_law(d1, r, alpha)
    size = max(a.size, b.size)
    a, b = np.pad(a, (0, size - a.size)), np.pad(b, (0, size - b.size))
    outputs = np.arange(-1, size + 1)
    noise = (1 - q) / (1 + q) * q ** np.abs(outputs[:, None] - np.arange(size)[None, :])
    pa, pb = noise @ a, noise @ b
    return float(np.max(np.abs(np.log(pa) - np.log(pb))))


def cliques_pair(n: int) -> tuple[np.ndarray, np.ndarray]:
    """D: n/2 points at 0 and n/2 at 4 (r = 2: every point has exactly n/2 friends, p = 0);
    D' = D ∪ {2}, a friend of all: p'_z = 1 and every other p' = 1/(n + 1) (α = 0)."""
    d0 = np.array([[0.0]] * (n // 2) + [[4.0]] * (n // 2))
    return d0, np.concatenate([d0, [[2.0]]])


def complete_pair(n: int) -> tuple[np.ndarray, np.ndarray]:
    """D: n points at 0 (complete, all kept); D' = D ∪ {100}, a friend of nobody."""
    d0 = np.zeros((n, 1))
    return d0, np.concatenate([d0, [[100.0]]])


def random_pairs(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    g = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        d0 = np.round(g.normal(size=(int(g.integers(3, 25)), 1)) * float(g.choice([0.5, 1.5])), 1)
        out.append((d0, np.concatenate([d0, [[float(np.round(g.normal() * 2, 1))]]])))
    return out


PAIRS = [cliques_pair(n) for n in (2, 10, 40, 200)] + [complete_pair(n) for n in (1, 10, 200)]


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.25, 0.4])
@pytest.mark.parametrize("eps0", [0.05, 0.5, 2.0])
def test_exact_loss_within_the_conversion_claim(alpha: float, eps0: float) -> None:
    claim, delta = end_to_end_budget(eps0, 0.0, alpha=alpha)
    assert delta == 0.0
    for d0, d1 in PAIRS + random_pairs(9001, 40):
        loss = exact_loss(d0, d1, 2.0 if d0.max() == 4.0 else 1.0, alpha, eps0)
        assert loss <= claim + TOL, (len(d0), alpha, eps0, loss, claim)


def test_the_claim_is_nearly_tight_so_this_has_power() -> None:
    """On the cliques pair at ε₀ = 0.05 the exact loss is within 2 % of ε' (α = 0) and 10 %
    (α = 0.25). So a claim 2 % too small at α = 0 (L(0) too small, or the filter keeping more)
    fails the test above."""
    d0, d1 = cliques_pair(200)
    for alpha, share in ((0.0, 0.98), (0.25, 0.9)):
        claim, _ = end_to_end_budget(0.05, 0.0, alpha=alpha)
        loss = exact_loss(d0, d1, 2.0, alpha, 0.05)
        assert share * claim < loss <= claim, (alpha, loss, claim)


def test_negative_control_filter_with_a_larger_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter run with α̃ = 0.25 while α = 0 is claimed keeps more (p = 2/(n + 1) on the
    cliques pair): the exact loss exceeds ε'(α = 0)."""
    claim, _ = end_to_end_budget(0.05, 0.0, alpha=0.0)
    real = F.alpha_fraction
    monkeypatch.setattr(F, "alpha_fraction", lambda alpha, where="basic_filter": real(0.25, where))
    d0, d1 = cliques_pair(200)
    assert exact_loss(d0, d1, 2.0, 0.0, 0.05) > claim
