"""Data far from the origin: the located center and the k-means aggregate are released where the
data lie (docs/proofs/mean.md §5, kmeans.md §5, noise.md §7.2), not clipped at 2⁵⁰ grid steps.

* ``private_mean`` (radius 6, and ``radius=None``) on 4000 points ``N(μ, I₃)`` with offsets up to
  ±1e15: the error to the sample mean is within the public noise bound of the final sum (plus
  the float spacing at ``μ``); ``private_kmeans`` with two separated clusters at 1e12. Negative
  control: the former clipped release (``bound`` = 2⁵⁰ grid steps) misses by more than 1e6.
* The unbounded integer release (``bound=math.inf``): Python integers beyond int64 and beyond
  the float range, public input errors, and its noise law by chi-square.

Every mechanism run uses a fixed seed (printed); the end-to-end checks are deterministic given
it. The chi-square tests have false-failure rate 1e-6 each; their 0.8×-noise controls must be
rejected.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.kmeans as K
import privagg.mechanisms.mean as M
import privagg.mechanisms.mean_small as mean_small
from privagg.errors import ParameterError
from privagg.noise.grid import grid_gaussian_integers, grid_laplace_integers
from privagg.testing import chisquare_gof, discrete_gaussian_pmf, discrete_laplace_pmf

SEED = 515151
EPS, DELTA = 1.0, 1e-6


def clipped_release(monkeypatch, module) -> None:
    """Negative control: the former path, the located integers clipped to 2⁵⁰ grid steps (both
    calibrations' release functions, where the module has them)."""
    for name in ("grid_gaussian_integers", "grid_laplace_integers"):
        real = getattr(module, name, None)
        if real is None:
            continue

        def old(k, _real=real, **kw):
            kw["bound"] = None
            return _real(np.clip(np.asarray(k), -2**62, 2**62).astype(np.int64), **kw)

        monkeypatch.setattr(module, name, old)


def far_data(offset: float) -> tuple[np.ndarray, np.ndarray]:
    mu = np.array([offset, -0.5 * offset, 0.3 * offset])
    return mu + np.random.default_rng(SEED).normal(size=(4000, 3)), mu


def exact_mean(x: np.ndarray) -> np.ndarray:
    return np.array([float(sum(map(Fraction, col.tolist())) / len(col)) for col in x.T])


def noise_bound(rel: M.MeanRelease, mu: np.ndarray, n: int) -> float:
    """Public ``1 − 10⁻³`` bound on the final sum's noise over ``n`` (its ρ is at least half the
    sums' ρ), plus the float spacing of the output at ``μ``."""
    plan = M.mean_plan(EPS, DELTA, select_radius=rel.radius is None)
    noise = M._noise_norm(rel.clip_radius, plan.rho_sum / 2, plan, 3) / n
    return noise + float(np.linalg.norm(np.spacing(np.abs(mu))))


@pytest.mark.parametrize("offset", [1e10, 1e12, 1e15, -1e15])
def test_private_mean_far_from_origin(offset):
    print(f"seed={SEED}")
    x, mu = far_data(offset)
    rel = M.private_mean(x, epsilon=EPS, delta=DELTA, radius=6.0, rng=SEED)
    assert rel.ok, f"seed={SEED}"
    err = float(np.linalg.norm(rel.mean - exact_mean(x)))
    assert err <= noise_bound(rel, mu, len(x)), (err, offset, f"seed={SEED}")
    assert np.linalg.norm(rel.center - mu) < 1.0, (rel.center - mu, f"seed={SEED}")


def test_private_mean_far_from_origin_selected_radius(monkeypatch):
    # The FriendlyCore plans (the bound is theirs at the full ε): d = 3, n = 4000 would take the
    # coordinate plan, which switches to FriendlyCore here with less ε (docs/proofs/mean.md §11;
    # that path: test_fc_mean_coordinate.py::test_far_data_switch_to_friendlycore).
    monkeypatch.setattr(mean_small, "COORD_SAMPLE", 0)
    print(f"seed={SEED}")
    x, mu = far_data(1e12)
    rel = M.private_mean(x, epsilon=EPS, delta=DELTA, rng=SEED)
    assert rel.ok, f"seed={SEED}"
    err = float(np.linalg.norm(rel.mean - exact_mean(x)))
    assert err <= noise_bound(rel, mu, len(x)), (err, f"seed={SEED}")


@pytest.mark.parametrize("calibration", ["auto", "gaussian"])  # auto: Laplace at d = 3
def test_private_mean_negative_control_clipped_center(monkeypatch, calibration):
    print(f"seed={SEED}")
    clipped_release(monkeypatch, M)
    x, mu = far_data(1e12)
    rel = M.private_mean(x, epsilon=EPS, delta=DELTA, radius=6.0, rng=SEED, calibration=calibration)
    assert rel.ok and np.linalg.norm(rel.mean - mu) > 1e6, f"seed={SEED}"


def kmeans_data() -> tuple[np.ndarray, np.ndarray]:
    centers = np.array([[1e12, 1e12], [1e12 + 100.0, 1e12]])
    z = np.random.default_rng(SEED).normal(size=(2, 10000, 2))
    return np.concatenate([centers[0] + z[0], centers[1] + z[1]]), centers


def test_private_kmeans_far_from_origin():
    """Centers within 0.25 of the true ones (the Lloyd noise per center is about 0.01)."""
    print(f"seed={SEED}")
    x, centers = kmeans_data()
    rel = K.private_kmeans(x, 2, epsilon=EPS, delta=DELTA, radius=4.0, rng=SEED)
    assert rel.ok, f"seed={SEED}"
    assert np.abs(rel.centers - centers).max() < 0.25, (rel.centers - centers, f"seed={SEED}")


def test_private_kmeans_negative_control_clipped_aggregate(monkeypatch):
    print(f"seed={SEED}")
    clipped_release(monkeypatch, K)
    x, centers = kmeans_data()
    rel = K.private_kmeans(x, 2, epsilon=EPS, delta=DELTA, radius=4.0, rng=SEED)
    assert rel.ok and np.abs(rel.centers - centers).max() > 1e6, f"seed={SEED}"


# --- the unbounded integer release -------------------------------------------------------------


def test_unbounded_release_of_huge_integers():
    k = np.empty(4, dtype=object)
    k[:] = [3 * 2**1000, -(2**70) - 1, 10**400, -(10**400)]
    rel = grid_gaussian_integers(k, exponent=-3, l2_sensitivity_grid=1, rho=Fraction(1, 2),
                                 bound=math.inf, rng=SEED)
    assert rel.bound == math.inf
    assert rel.values[0] == math.ldexp(3.0, 997)  # noise of a few steps vanishes in the rounding
    assert abs(rel.values[1] + 2.0**67) < 2.0**20
    assert rel.values[2] == math.inf and rel.values[3] == -math.inf  # post-processing
    lap = grid_laplace_integers(np.array([2**60, -(2**62)], dtype=np.int64), exponent=0,
                                l1_sensitivity_grid=1, epsilon=1, bound=math.inf, rng=SEED)
    assert abs(lap.values[0] - 2.0**60) < 2.0**10 and lap.bound == math.inf


def test_bounded_release_still_clips():
    """The default keeps its behaviour: 2⁵⁰ grid steps."""
    rel = grid_gaussian_integers(np.array([2**60]), exponent=0, l2_sensitivity_grid=1, rho=1,
                                 rng=SEED)
    assert abs(rel.values[0] - 2.0**50) < 100


@pytest.mark.parametrize("k", [np.array([1.5], dtype=object), np.array([True], dtype=object),
                               np.array([1.0]), np.array([1], dtype=np.uint8)])
def test_unbounded_release_public_errors(k):
    with pytest.raises(ParameterError, match="parameter 'k'"):
        grid_gaussian_integers(k, exponent=0, l2_sensitivity_grid=1, rho=1, bound=math.inf)


def _residuals(mechanism: str, factor: float) -> tuple[np.ndarray, object]:
    """Residuals ``released − k`` of 100 000 coordinates at ``k ≈ 2⁵¹`` (beyond the clipped
    path's bound; ``k + Z`` is exact in float64), with noise ``factor`` × the claimed one."""
    k = (2**51 + np.random.default_rng(SEED).integers(-1000, 1000, size=100_000)).astype(object)
    if mechanism == "gaussian":
        sens, rho = Fraction(3), Fraction(1, 2)
        claimed = grid_gaussian_integers(k[:1], exponent=0, l2_sensitivity_grid=sens, rho=rho,
                                         bound=math.inf, rng=SEED)
        rel = grid_gaussian_integers(k, exponent=0, l2_sensitivity_grid=sens, bound=math.inf,
                                     rho=rho / Fraction(factor) ** 2, rng=SEED + 1)
        pmf = discrete_gaussian_pmf(claimed.noise_grid)
    else:
        claimed = grid_laplace_integers(k[:1], exponent=0, l1_sensitivity_grid=4, epsilon=1,
                                        bound=math.inf, rng=SEED)
        rel = grid_laplace_integers(k, exponent=0, l1_sensitivity_grid=4, bound=math.inf,
                                    epsilon=1 / Fraction(factor), rng=SEED + 1)
        pmf = discrete_laplace_pmf(claimed.noise_grid)
    return rel.values.astype(np.int64) - k.astype(np.int64), pmf


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_unbounded_release_noise_law(mechanism):
    """Chi-square goodness of fit of the residuals against the claimed law at level 1e-6
    (false-failure rate 1e-6); the same harness rejects 0.8 × the noise."""
    print(f"seed={SEED}")
    res, pmf = _residuals(mechanism, 1.0)
    assert chisquare_gof(res, pmf) > 1e-6, f"seed={SEED}"
    bad, pmf = _residuals(mechanism, 0.8)
    assert chisquare_gof(bad, pmf) < 1e-6, f"seed={SEED}: control"
