"""Float numerics of the released averages and clipped sums of private_mean / private_kmeans,
against exact rational computations (docs/proofs/mean.md §5–6, kmeans.md §5–6, noise.md §7).

* Averages (`_anchored_mean` then `_exact_grid`): every coordinate within
  `anchored_rounding(S, e)` grid steps of the exact average (no clip), where `S` bounds every
  point's distance to the anchor, at magnitudes 1 … 1.7e308, both signs; the naive float mean and
  the un-anchored faithful mean (error relative to the magnitude) do not meet this (negative
  controls).
* Neighbouring cores far from the origin: `‖k − k'‖₂ <= 2κr/(m g) + 2λ√d`, for any summation
  order; the naive float mean breaks it for some order (negative control).
* `_faithful_mean` (applied to the anchored differences): relative error at every magnitude.
* Clipped sums: the integer sum equals the exact sum of the rounded terms for any n (Python
  integers, no overflow), every rounded term has norm `<= R/h + √d/2`, and the released sum of
  a neighbouring data set moves by at most the stated grid sensitivity (controls: a sum without
  the exact integer step, a clip without its margin, a sum without clipping).

All inputs are fixed (seeded); nothing here is statistical.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.mechanisms.kmeans as K
import privagg.mechanisms.mean as M
from privagg.noise.grid import _sqrt_up, grid_integers

SEED = 20261130
U = Fraction(1, 2**53)


def exact_mean(points: np.ndarray) -> list[Fraction]:
    m = points.shape[0]
    return [sum(map(Fraction, points[:, j].tolist()), Fraction(0)) / m for j in range(points.shape[1])]


def max_error(k: np.ndarray, avg: list[Fraction], e: int) -> Fraction:
    g = Fraction(2) ** e
    return max(abs(int(kj) - a / g) for kj, a in zip(k.tolist(), avg))


def lattice_core(mag: float, m: int, rng: np.random.Generator) -> tuple[np.ndarray, Fraction]:
    """``m`` points near ``(mag, −mag, 0.7·mag, −0.6·mag)`` on a lattice of 512 float ulps (so
    sums produce ties), plus a column of mixed signs around 0 of the same spread; and the spread
    bound ``S`` (every coordinate within ``S`` of every other point's)."""
    c = np.array([mag, -mag, 0.7 * mag, -0.6 * mag])
    ulp = float(np.spacing(np.abs(c)).max())
    pts = np.concatenate([c + rng.integers(0, 512, (m, 4)) * ulp,
                          rng.integers(-256, 256, (m, 1)) * ulp], axis=1)
    return np.sort(pts, axis=0), 512 * Fraction(ulp)  # ascending: worst order for a float sum


def grid_for(spread: Fraction, m: int) -> int:
    """The exponent of a locate release for this spread: ``g ≈ 2⁻¹⁰·S/m`` (as for ``2r/m``)."""
    return max(-1000, min(900, math.frexp(float(spread) / m)[1] - 11))


@pytest.mark.parametrize("mag", [1.0, 1e8, 1e15, -1e15, 1e100, 1e300, 1.7e308, 1e-300])
def test_average_within_rounding_bound_at_every_magnitude(mag):
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    pts, spread = lattice_core(mag, 4096, rng)
    e = grid_for(spread, 4096)
    k = M._exact_grid(M._anchored_mean(pts), e)
    err = max_error(k, exact_mean(pts), e)
    lam = M.anchored_rounding(spread, e)
    assert err <= lam, (float(err), float(lam), mag, f"seed={SEED}")
    if e < 900:  # beyond, the exponent range caps the grid: S/g and λ grow, the bound still holds
        assert lam < Fraction(51, 100), (float(lam), mag)


@pytest.mark.parametrize("mean", ["naive", "unanchored"])
def test_average_negative_controls(mean):
    """At 1e15 the plain float mean and the faithful mean of the absolute values (relative error
    on the magnitude) both miss the anchored bound by many grid steps."""
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    pts, spread = lattice_core(1e15, 16384, rng)
    e = grid_for(spread, 16384)
    avg = pts.mean(axis=0) if mean == "naive" else M._faithful_mean(pts)
    err = max_error(M._exact_grid(avg, e), exact_mean(pts), e)
    assert err > 4 * M.anchored_rounding(spread, e), (float(err), f"seed={SEED}")


def test_old_clipped_rounding_misses_far_averages():
    """The former path (`grid_integers`, clipped to 2⁵⁰ grid steps) caps a far average."""
    rng = np.random.default_rng(SEED)
    pts, spread = lattice_core(1e15, 512, rng)
    e = grid_for(spread, 512)
    err = max_error(grid_integers(M._faithful_mean(pts), exponent=e), exact_mean(pts), e)
    assert err > 2**60


def _neighbour_pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float, int]:
    """A core of 16384 lattice points near 1e15 (diameter <= 2r) in ascending order, and the
    same plus one point within 2r in descending order: both are possible shuffles."""
    c = np.array([1e15, -1e15, 0.9e15, -0.8e15])
    ulp = np.spacing(1e15)
    pts = c + rng.integers(0, 512, (16384, 4)) * ulp
    r = float(512 * ulp * 2)  # per-coordinate spread 64: ℓ2 diameter <= 128 <= 2r
    e = math.frexp(2 * r / 16384)[1] - 12
    z = c + 17 * ulp
    d0 = np.sort(pts, axis=0)
    d1 = np.sort(np.concatenate([pts, z[None]]), axis=0)[::-1]
    return d0, d1, r, e


def _sensitivity_bound(r: float, m: int, e: int, d: int) -> Fraction:
    spread = 2 * Fraction(r) * M._ball_slack(d)
    return spread / m / Fraction(2) ** e + 2 * M.anchored_rounding(spread, e) * _sqrt_up(d)


def test_neighbouring_cores_far_from_origin():
    print(f"seed={SEED}")
    d0, d1, r, e = _neighbour_pair(np.random.default_rng(SEED))
    k0 = M._exact_grid(M._anchored_mean(d0), e)
    k1 = M._exact_grid(M._anchored_mean(d1), e)
    dist2 = sum(int(v) ** 2 for v in (k0 - k1).tolist())
    bound = _sensitivity_bound(r, d1.shape[0], e, d0.shape[1])
    assert dist2 <= bound**2, (dist2, float(bound), f"seed={SEED}")


def test_neighbouring_cores_negative_control_naive_mean():
    print(f"seed={SEED}")
    d0, d1, r, e = _neighbour_pair(np.random.default_rng(SEED))
    k0 = M._exact_grid(d0.mean(axis=0), e)
    k1 = M._exact_grid(d1.mean(axis=0), e)
    dist2 = sum(int(v) ** 2 for v in (k0 - k1).tolist())
    bound = _sensitivity_bound(r, d1.shape[0], e, d0.shape[1])
    assert dist2 > bound**2, (dist2, float(bound), f"seed={SEED}")


def test_faithful_mean_relative_error_and_no_overflow():
    """Column means of values near the float maximum (the sum overflows float64) and of tiny
    subnormal-range values: relative error <= 3u + 2u² plus the stated absolute term."""
    rng = np.random.default_rng(SEED)
    big = np.full((1000, 2), 1.7e308) - rng.integers(0, 1000, (1000, 2)) * np.spacing(1.7e308)
    tiny = rng.integers(1, 2**20, (1000, 2)) * 5e-324
    for pts in (big, -big, tiny, np.concatenate([big[:, :1], -big[:, 1:]], axis=1)):
        got = M._faithful_mean(pts)
        assert np.all(np.isfinite(got))
        for j, a in enumerate(exact_mean(pts)):
            assert abs(Fraction(got[j]) - a) <= (3 * U + 2 * U * U) * abs(a) + 1000 * Fraction(2) ** -1070


def test_anchored_mean_survives_overflowing_differences():
    """Points at ±1.7e308 (not a friendly core: their differences overflow) give a finite,
    exact-rational result (never raises on data)."""
    pts = np.array([[1.7e308, 1.0], [-1.7e308, 2.0], [1.7e308, 3.0]])
    got = M._anchored_mean(pts)
    assert all(isinstance(v, Fraction) for v in got) and got[1] == 2


def test_aligned_average_far_from_origin_is_faithful():
    """k-means: relabelled tuples near 1e15; the aligned average is within the anchored bound
    (spread 64 ulps per coordinate) of the exact average of the relabelled tuples."""
    rng = np.random.default_rng(SEED + 1)
    base = np.array([[1e15, 1e15], [1e15 + 4096.0, 1e15]])
    core = base + rng.integers(0, 64, (300, 2, 2)) * np.spacing(1e15)
    swapped = core.copy()
    swapped[::2] = core[::2, ::-1]
    swapped[0] = core[0]  # the reference keeps its labels
    avg = K._aligned_average(swapped)
    spread = 64 * Fraction(float(np.spacing(1e15)))
    for j, a in enumerate(exact_mean(core.reshape(300, -1))):
        assert abs(avg[j] - a) <= 5 * U * spread + Fraction(1, 2**1007)


# --- clipped sums ---------------------------------------------------------------------------


def _reference_terms(x: np.ndarray, c: np.ndarray, big_r: float, e: int, unit: float) -> np.ndarray:
    """The rounded terms of all rows at once (no blocks), as int64 (the independent reference;
    sums are taken over Python integers)."""
    keep = big_r * (1.0 - M._clip_margin(x.shape[1]))
    with np.errstate(over="ignore", invalid="ignore"):
        y = x - c
        nu = np.sqrt((y * y).sum(axis=1))
        far = ~np.isfinite(nu)  # overflowing squared norm: the direction from y·2⁻⁶⁰⁰
        small = y[far] * 2.0**-600
        y[far] = small / np.sqrt((small * small).sum(axis=1))[:, None] * keep
        nu[far] = keep
        f = np.minimum(1.0, keep / np.maximum(nu, np.finfo(float).tiny))
        w = np.rint(y * np.ldexp(f / unit, -e)[:, None])
    assert np.isfinite(w).all()
    return w.astype(np.int64)


def _exact_sum(terms: np.ndarray) -> list[int]:
    return [sum(col) for col in terms.T.tolist()]


def _far_rows(rng: np.random.Generator, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    c = np.full(d, 1e15)
    x = c + rng.normal(0.0, 600.0, (n, d)) + 400.0
    x[0, 0], x[1, 0] = 1e9, -1e9  # far outliers: clipped
    x[3, 0] = 1.7e308  # the squared norm overflows: clipped to the boundary all the same
    return x, c


@pytest.mark.parametrize(("d", "unit"), [(1, 1.0), (3, 1.0), (50, 1.0), (3, 700.0)])
def test_integer_sum_is_exact_and_terms_bounded(d, unit):
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED + d)
    x, c = _far_rows(rng, 9000, d)
    big_r = 1000.0
    e = M._sum_exponent(big_r) - (0 if unit == 1.0 else math.frexp(unit)[1])
    got = M._clipped_integer_sum(x, c, big_r, e, unit=unit)
    terms = _reference_terms(x, c, big_r, e, unit)
    assert got.tolist() == _exact_sum(terms)
    # every rounded term: ‖K_i‖ <= R/(unit·h) + √d/2 (exact integer norms vs a rational bound)
    limit = Fraction(big_r) / Fraction(unit) / Fraction(2) ** e + _sqrt_up(d) / 2
    norms2 = [sum(int(v) ** 2 for v in row) for row in terms.tolist()]  # Python integers
    assert max(norms2) <= limit**2
    assert max(norms2) > (limit * (1 - Fraction(1, 2**29))) ** 2  # clipped rows reach R
    # the row whose squared distance overflows is clipped onto the boundary (it was 0 before)
    assert norms2[3] > (limit * (1 - Fraction(1, 2**29)) - _sqrt_up(d)) ** 2


def test_term_bound_negative_control_without_margin(monkeypatch):
    """Clipping to 1.001·R instead of R(1 − μ_d): the same norm check rejects the terms."""
    monkeypatch.setattr(M, "_clip_margin", lambda d: -1e-3)
    rng = np.random.default_rng(SEED)
    x, c = _far_rows(rng, 500, 3)
    e = M._sum_exponent(1000.0)
    terms = _reference_terms(x, c, 1000.0, e, 1.0)
    limit = Fraction(1000) / Fraction(2) ** e + _sqrt_up(3) / 2
    assert max(sum(int(v) ** 2 for v in row) for row in terms.tolist()) > limit**2


def test_float_sum_negative_control():
    """A float64 sum of the same rounded terms is not exact (sums beyond 2^53 steps)."""
    rng = np.random.default_rng(SEED)
    c = np.full(3, 1e15)
    x = c + 5000.0 + rng.normal(0.0, 600.0, (60000, 3))  # all clipped: sums beyond 2^53
    e = M._sum_exponent(1000.0)
    terms = _reference_terms(x, c, 1000.0, e, 1.0)
    exact = _exact_sum(terms)
    assert M._clipped_integer_sum(x, c, 1000.0, e).tolist() == exact
    naive = np.cumsum(terms.astype(np.float64), axis=0)[-1]
    assert any(Fraction(a) != b for a, b in zip(naive.tolist(), exact))


def test_clipped_sum_is_the_correctly_rounded_exact_sum():
    rng = np.random.default_rng(SEED)
    x, c = _far_rows(rng, 9000, 3)
    e = M._sum_exponent(1000.0)
    exact = M._clipped_integer_sum(x, c, 1000.0, e)
    got = M._clipped_sum(x, c, 1000.0)
    for g, k in zip(got.tolist(), exact.tolist()):
        assert Fraction(g) == Fraction(float(k)) * Fraction(2) ** e  # one rounding of the int
        assert abs(Fraction(g) - k * Fraction(2) ** e) <= U * abs(k * Fraction(2) ** e)


def test_integer_sum_beyond_int64_is_exact(monkeypatch):
    """Blocks are added as Python integers: with blocks of 4 rows and terms near 2^50 (4 terms
    still sum exactly in float64), 2^14 rows at the clip radius sum beyond 2^63, exactly."""
    monkeypatch.setattr(M, "_SUM_ROWS", 4)
    n = 1 << 14
    x = np.broadcast_to(np.array([[5e15]]), (n, 1))
    e = math.frexp(1000.0)[1] - 50
    got = M._clipped_integer_sum(x, np.array([1e15]), 1000.0, e)
    one = M._clipped_integer_sum(x[:1], np.array([1e15]), 1000.0, e)
    assert int(got[0]) == n * int(one[0]) and int(got[0]) > 2**63


@pytest.mark.parametrize("big_r", [2.0**-450, 1e-9, 0.75, 1.0, 1000.0, 3.0**300, 2.0**600])
def test_term_grid_is_public_and_within_int64(big_r):
    """The term grid depends on R alone; R/h < 2^SUM_BITS, and a block of rounded terms sums
    exactly in float64."""
    e = M._sum_exponent(big_r)
    assert 2.0 ** (M.SUM_BITS - 1) <= big_r / math.ldexp(1.0, e) < 2.0**M.SUM_BITS
    assert M._SUM_ROWS * (2**M.SUM_BITS + 1) < 2**53


def test_released_sum_sensitivity_far_from_origin():
    """D and D ∪ {z} near 1e15 (z far outside the clip ball): the rounded released sums differ
    by at most ``(R + √d·h/2)/g + 2·SUM_ROUNDING·√d`` grid steps."""
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    x, c = _far_rows(rng, 9000, 3)
    z = c + 1e9
    big_r = 1000.0
    e = math.frexp(big_r)[1] - 20  # R/g about 2^20, as in a release
    h = Fraction(2) ** M._sum_exponent(big_r)
    g = Fraction(2) ** e
    bound = (Fraction(big_r) + _sqrt_up(3) * h / 2) / g + 2 * M.SUM_ROUNDING * _sqrt_up(3)

    def dist2(f) -> int:
        k0 = grid_integers(f(x, c, big_r), exponent=e)
        k1 = grid_integers(f(np.concatenate([x, z[None]]), c, big_r), exponent=e)
        return sum(int(v) ** 2 for v in (k0 - k1).tolist())

    assert dist2(M._clipped_sum) <= bound**2, f"seed={SEED}"
    # negative control: the same harness on a sum without clipping
    assert dist2(lambda x, c, r: (x - c).sum(axis=0)) > bound**2, f"seed={SEED}"


def _lloyd_pair(monkeypatch, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray, Fraction]:
    """Production Lloyd step on D and D ∪ {center_1 + offset} (centers near 1e15), histogram
    noise removed so that both runs use the same public radii; the integer vectors passed to the
    release and the sensitivity passed with them."""
    rng = np.random.default_rng(SEED)
    centers = np.array([[1e15, 1e15], [1e15 + 1e4, 1e15], [1e15, 1e15 + 1e4]])
    x = (centers[:, None, :] + rng.normal(0.0, 50.0, (3, 3000, 2))).reshape(-1, 2)
    z = centers[1] + offset
    plan = K.kmeans_plan(1.0, 1e-6)
    monkeypatch.setattr(K, "discrete_laplace", lambda scale, size, rng: np.zeros(size, np.int64))
    calls = []
    real = K.grid_gaussian_integers

    def capture(k, **kwargs):
        calls.append((np.asarray(k).copy(), kwargs["l2_sensitivity_grid"]))
        return real(k, **kwargs)

    monkeypatch.setattr(K, "grid_gaussian_integers", capture)
    for data in (x, np.concatenate([x, z[None]])):
        K._lloyd_step(data, centers, 5000.0, plan, np.random.default_rng(SEED))
    (k0, sens), (k1, sens1) = calls
    assert sens == sens1
    return k0, k1, sens


@pytest.mark.parametrize("offset", [(3.0, -2.0), (4000.0, 0.0)])
def test_lloyd_step_integer_sums_change_one_cluster_within_sensitivity(monkeypatch, offset):
    """Adding one row (inside, or far outside, its cluster's clip radius) changes only its
    cluster's d grid coordinates, by at most the sensitivity passed to the release."""
    print(f"seed={SEED}")
    k0, k1, sens = _lloyd_pair(monkeypatch, np.array(offset))
    diff = (k1 - k0).reshape(3, 2)
    assert np.all(diff[[0, 2]] == 0) and np.any(diff[1] != 0)
    assert sum(int(v) ** 2 for v in diff.ravel().tolist()) <= sens**2
    if offset[0] > 1000:  # clipped: the move is close to the bound (the check is tight)
        assert sum(int(v) ** 2 for v in diff.ravel().tolist()) > (sens * Fraction(99, 100)) ** 2


def test_lloyd_step_negative_control_clip_too_wide(monkeypatch):
    """Clipping to 1.01·R_c: the far row moves its cluster's sum beyond the sensitivity."""
    monkeypatch.setattr(M, "_clip_margin", lambda d: -0.01)
    k0, k1, sens = _lloyd_pair(monkeypatch, np.array([4000.0, 0.0]))
    assert sum(int(v) ** 2 for v in (k1 - k0).tolist()) > sens**2
