"""The coreset strategy's private Lloyd steps on real data (issue 11 item 5; docs/proofs/kmeans.md §10, §12).

On real tables the coreset drops the rows of cells below the threshold T (sparse tails: Alaska,
Hawaii and the territories in airports), so the centers of the non-private k-means on the
coreset are far from a local optimum of the full data; the private Lloyd steps on all rows have
to move them. Three steps (the code of 83876dc) stopped short: airports lat/long, k = 5, cost
2.6× scikit-learn's (n_init=3); eight steps (``CORESET_STEPS``): 1.6–2.2×.

Statistic: the median over 5 runs (seeds ``SEED + i``, i = 0…4) of the cost ratio to
scikit-learn's, bound 2.3. Measured over 30 groups of 5 seeds (``SEED + 10g + i``): with 8 steps
the median is 1.63–2.19 (0/30 above 2.3: false-failure rate about 1/30 or less for another
seed); with the old 3 steps it is above 2.3 in 28/30 groups (2.37–2.79), and 2.6 at the fixed
seeds — the negative control below, which patches the old schedule back in.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.kmeans as K

SEED = 551_100
BOUND = 2.3


def cost(x: np.ndarray, c: np.ndarray) -> float:
    d2 = (x * x).sum(1)[:, None] + (c * c).sum(1)[None] - 2 * x @ c.T
    return float(np.maximum(d2.min(1), 0).sum())


def airports() -> np.ndarray:
    local_data = pytest.importorskip("vega_datasets").local_data
    return local_data.airports()[["latitude", "longitude"]].to_numpy(float)


def median_ratio(x: np.ndarray, k: int) -> float:
    from sklearn.cluster import KMeans

    base = cost(x, KMeans(k, n_init=3, random_state=0).fit(x).cluster_centers_)
    print(f"seeds={SEED}..{SEED + 4}")
    ratios = []
    for i in range(5):
        rel = K.private_kmeans(x, k, epsilon=1.0, delta=1e-6, rng=SEED + i)
        ratios.append(cost(x, rel.centers) / base if rel.ok else np.inf)
    return float(np.median(ratios))


def test_coreset_lloyd_schedule_is_the_documented_one():
    assert K.CORESET_STEPS == len(K._STEP_WEIGHTS) == 8
    assert sum(K._STEP_WEIGHTS) == 1
    plan = K.coreset_plan(1.0, 1e-6, 2)
    assert plan.steps == 8 and plan.rho_steps[0] * 16 == sum(plan.rho_steps)


def test_airports_k5_cost_ratio():
    x = airports()
    ratio = median_ratio(x, 5)
    assert ratio <= BOUND, (ratio, f"seed={SEED}")


def test_airports_k5_negative_control_three_steps(monkeypatch):
    x = airports()
    old = (Fraction(1, 4), Fraction(1, 4), Fraction(1, 2))
    monkeypatch.setattr(K, "_STEP_WEIGHTS", old)
    monkeypatch.setattr(K, "CORESET_STEPS", 3)
    K._coreset_plan.cache_clear()
    try:
        ratio = median_ratio(x, 5)
    finally:
        K._coreset_plan.cache_clear()
    assert ratio > BOUND, (ratio, f"seed={SEED}")
