"""The noisy tails of the distance histogram and the tail rule's top edge (docs/proofs/mean.md §6).

Before, the tails were the histogram summed from the top only (sd growing like √j: about 95 rows at
the lowest edges at n = 3·10⁴, ε = 1), and an only-passing top edge always sent the release to
the robust rule; a 0/1 column's 300 ones at distance 1, just below the top edge, were then clipped.

* Known answers of :func:`noisy_tails` (both estimates, their inverse-variance average, the sds).
* Its sds are the real ones: 20000 noisy histograms (seed printed), the empirical variance of
  every tail within 5 % of ``sd_j²`` (the sample variance of 20000 draws has relative sd
  ``√(2/19999) = 1 %``: a false failure needs a 5-sd deviation in one of 45 edges, < 3·10⁻⁵);
  control: the top-down sds claimed for the combined tails must fail.
* :func:`tail_rule` known answers at the top edge (``TAIL_TOP_SD``).
* ``_quantile_radius`` on 29700 zeros and 300 ones (ε_q = 1/10, the count at 1/20, τ = 3.2):
  the radius reaches the ones (the top edge 1.09) in at least 55 of 60 runs (seed printed;
  measured 1975 of 2000 with seed 20261305, a miss rate of 1.25 %, 95 % upper bound 1.8 %: false
  failure about 10⁻³ at that bound). Controls, each must fail: the top edge never taken
  (``TAIL_TOP_SD = ∞``: 0 of 2000 measured) and the tails from the top only (979 of 2000).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.mean as M
from privagg.noise.samplers import discrete_laplace

SEED = 20261305


def test_dlap_variance_known_answer():
    q = math.exp(-0.5)
    assert M.dlap_variance(Fraction(1, 2)) == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-15)


def test_noisy_tails_known_answers():
    noisy = np.array([1, 2, 3, 4])  # J + 2 = 4 bins, 3 edges
    v, w = M.dlap_variance(Fraction(1)), M.dlap_variance(Fraction(1, 2))
    top, sd_top = M.noisy_tails(noisy, 12, Fraction(1), None)
    assert top.tolist() == [1, 3, 6] and np.allclose(sd_top, np.sqrt([v, 2 * v, 3 * v]))
    tails, sd = M.noisy_tails(noisy, 12, Fraction(1), Fraction(1, 2))
    bottom = np.array([12 - 9, 12 - 7, 12 - 4])  # n̂ minus the bins below each edge
    var_a, var_b = np.array([1, 2, 3]) * v, w + np.array([3, 2, 1]) * v
    want = (top / var_a + bottom / var_b) / (1 / var_a + 1 / var_b)
    assert np.allclose(tails, want, rtol=1e-14) and np.allclose(sd ** 2, 1 / (1 / var_a + 1 / var_b))
    assert np.all(sd < sd_top)


def _empirical_variances(n_draws, rng):
    bins = np.array([0, 0, 5, 40, 300, 2000, 7000, 655] + [0] * 37 + [10_000])  # 46 bins
    n, eps_q, eps_n = int(bins.sum()), Fraction(1, 10), Fraction(1, 20)
    noisy = bins + discrete_laplace(1 / eps_q, size=(n_draws, bins.size), rng=rng)
    n_hat = n + discrete_laplace(1 / eps_n, size=n_draws, rng=rng)
    tails = np.array([M.noisy_tails(noisy[i], int(n_hat[i]), eps_q, eps_n)[0] for i in range(n_draws)])
    truth = np.cumsum(bins[:-1])
    _, sd = M.noisy_tails(noisy[0], n, eps_q, eps_n)
    return tails.var(axis=0) / sd ** 2, tails.mean(axis=0) - truth, sd


def test_noisy_tail_sds_are_the_real_ones():
    print(f"seed {SEED}")
    ratio, bias, sd = _empirical_variances(20_000, np.random.default_rng(SEED))
    assert np.all(np.abs(ratio - 1) < 0.05), ratio
    assert np.all(np.abs(bias) < 5 * sd / math.sqrt(20_000))  # unbiased (5 sd of the mean)


def test_noisy_tail_sds_control_top_down_claim_fails():
    ratio, _, sd = _empirical_variances(20_000, np.random.default_rng(SEED))
    top_sd = M.noisy_tails(np.zeros(sd.size + 1), 0, Fraction(1, 10), None)[1]
    assert np.any(np.abs(ratio * sd ** 2 / top_sd ** 2 - 1) > 0.05)


def test_tail_rule_takes_the_top_edge_only_on_a_clear_failure():
    sd = np.array([10.0, 14.0, 17.0])
    valid = np.ones((3, 3), dtype=bool)
    tau, n_hat = np.full(3, 3.0), np.full(3, 1000.0)
    # only the top passes; the next edge fails clearly (300 > 3 + 6·14), marginally (50), or the
    # deeper edges pass (the least passing edge wins)
    tails = np.array([[0.0, 300.0, 320.0], [0.0, 50.0, 330.0], [0.0, 300.0, 40.0]])
    j, robust = M.tail_rule(tails, sd, tau, n_hat, valid)
    assert j.tolist()[0] == 0 and robust.tolist() == [False, True, False] and j.tolist()[2] == 2


def _reach_ones(runs, rng, eps_count=Fraction(1, 20)):
    x = np.zeros((30_000, 1))
    x[:300] = 1.0
    upper = M._grid_up(1.0e-3)
    assert M.clip_edges(upper, 30_000)[1] < 1.0 <= M.clip_edges(upper, 30_000)[0]  # ones in the top bin
    return sum(M._quantile_radius(x, np.zeros(1), upper, 30_000, Fraction(1, 10), rng, 3.2,
                                  eps_count).radius >= 1.0 for _ in range(runs))


def test_minority_just_below_the_top_edge_is_not_clipped():
    print(f"seed {SEED}")
    assert _reach_ones(60, np.random.default_rng(SEED)) >= 55


def test_minority_control_without_the_top_edge(monkeypatch):
    monkeypatch.setattr(M, "TAIL_TOP_SD", math.inf)
    assert _reach_ones(60, np.random.default_rng(SEED)) < 55


def test_minority_control_tails_from_the_top_only():
    assert _reach_ones(60, np.random.default_rng(SEED), eps_count=None) < 55
