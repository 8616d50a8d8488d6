"""Utility of privagg.private_mean against the oracle Gaussian mechanism, side by side.

Setting of the issue: d = 100, n = 10^4, ε = 1, δ = 1e-6, x ~ N(μ, I_d), ‖μ‖ = 10^4 (unknown to
private_mean). Prints the median ℓ2 error over RUNS data sets (fresh data each run), measured
against μ and against the sample mean x̄, and the ratios to the oracle.

Oracle: knows μ, clips to B(μ, √d + 3), n public (replace-one sensitivity 2R/n), continuous
Gaussian noise with ρ = rho_for(ε, δ) (the largest ρ whose CKS conversion is <= ε).

Run: ``.venv/bin/python benchmarks/mean_tuning.py [runs]``.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from privagg.mechanisms.mean import private_mean, rho_for

D, N, EPS, DELTA, NORM = 100, 10_000, 1.0, 1e-6, 1e4


def oracle(x: np.ndarray, mu: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    big_r = math.sqrt(D) + 3.0
    y = x - mu
    norms = np.linalg.norm(y, axis=1)
    y *= np.minimum(1.0, big_r / norms)[:, None]
    sigma = (2 * big_r / N) / math.sqrt(2 * float(rho_for(EPS, DELTA)))
    return mu + y.mean(0) + rng.normal(scale=sigma, size=D)


def main(runs: int = 20) -> None:
    configs = {
        "oracle (B(μ, √d+3), replace-one)": None,
        "private_mean r=16 (m_locate=8000)": {"radius": 16.0},
        "private_mean r=24": {"radius": 24.0},
        "private_mean r=16 m_locate=2000": {"radius": 16.0, "m_locate": 2000},
        "private_mean r=16 m_locate=4000": {"radius": 16.0, "m_locate": 4000},
        "private_mean radius=None": {"radius": None},
    }
    err_mu = {k: [] for k in configs}
    err_bar = {k: [] for k in configs}
    secs = {k: 0.0 for k in configs}
    bottoms = {k: 0 for k in configs}
    sampling = []
    for run in range(runs):
        rng = np.random.default_rng(1000 + run)
        mu = rng.normal(size=D)
        mu *= NORM / np.linalg.norm(mu)
        x = rng.normal(size=(N, D)) + mu
        xbar = x.mean(0)
        sampling.append(np.linalg.norm(xbar - mu))
        for name, kw in configs.items():
            t = time.perf_counter()
            if kw is None:
                est = oracle(x.copy(), mu, rng)
            else:
                rel = private_mean(x, epsilon=EPS, delta=DELTA, rng=rng, **kw)
                est = rel.mean if rel.ok else None
            secs[name] += time.perf_counter() - t
            if est is None:
                bottoms[name] += 1
                continue
            err_mu[name].append(np.linalg.norm(est - mu))
            err_bar[name].append(np.linalg.norm(est - xbar))
    base_mu = np.median(err_mu["oracle (B(μ, √d+3), replace-one)"])
    base_bar = np.median(err_bar["oracle (B(μ, √d+3), replace-one)"])
    print(f"d={D} n={N} eps={EPS} delta={DELTA} |mu|={NORM:g} runs={runs}")
    print(f"sampling error |x̄ − μ| median: {np.median(sampling):.4f}")
    print(f"{'method':36s} {'med |est−μ|':>12s} {'ratio':>6s} {'med |est−x̄|':>12s} {'ratio':>6s} "
          f"{'⊥':>3s} {'s/run':>6s}")
    for name in configs:
        m_mu, m_bar = np.median(err_mu[name]), np.median(err_bar[name])
        print(f"{name:36s} {m_mu:12.4f} {m_mu / base_mu:6.2f} {m_bar:12.4f} {m_bar / base_bar:6.2f} "
              f"{bottoms[name]:3d} {secs[name] / runs:6.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
