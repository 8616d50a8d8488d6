"""Speed work on the radius-selection bins, the scale step's row order and counts, and the
thread pool: the faster code gives exactly the old results.

Deterministic known-answer tests (no statistics, so no false failures):

* the bin upper edges and the in-place bin formula against exact rational comparisons;
* ``_pair_bins`` against a slow reference (the direct formula on every pair, binned with the
  rational-checked levels) on adversarial data: squared distances exactly at, one and two ulps
  beside grid edges, far from the origin (the product expansion is inexact there), duplicates,
  several 512-row blocks (diagonal and off-diagonal), a far row (direct path), both thread
  counts; negative control: without the screening margin the same harness sees a difference;
* ``_keyed_row_order`` against ``np.lexsort`` (also with a 2-bit hash, so most rows tie) and
  ``sorted_scale_counts`` against the sort/searchsorted reference (negative control: a level
  off by one is detected);
* ``private_mean`` releases recorded from commit 83876dc (before the speed work), bit for bit,
  for fixed seeds on four datasets (``radius=None``: AboveThreshold radius selection, per-column
  scales, a Laplace calibration, far rows), and the exact radius queries (hash);
* the thread pool runs its tasks with one BLAS thread (on 83876dc the BLAS kept its default:
  on a loaded 2-core machine a 512 x 512 x 10 product took 30 ms instead of 0.1 ms).
"""

from __future__ import annotations

import hashlib
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import privagg.friendlycore.radius as R
import privagg.mechanisms.mean as M
import privagg.mechanisms.mean_small as mean_small
from privagg import private_mean
from privagg.friendlycore.kernel import _map
from privagg.friendlycore.predicates import squared_distance

SEED = 20261201
K = R.GRID_EXPONENTS.size


def exact_bin(v: float) -> int:
    """The least grid index b with v <= 2^{j_b/2} (v² <= 2^{j_b}, on rationals), clipped to [0, K]."""
    if v <= 0:
        return 0
    if math.isinf(v):
        return K
    f = Fraction(v)
    j = math.floor(2 * math.log2(v)) - 3
    while not f * f <= Fraction(2) ** j:
        j += 1
    return min(max(j - int(R.GRID_EXPONENTS[0]), 0), K)


def largest_at_most_edge(j: int) -> float:
    """The largest float v with v² <= 2^j (exact rationals), found from a float guess."""
    v = math.ldexp(math.sqrt(2.0) if j % 2 else 1.0, j // 2)
    while Fraction(v) ** 2 > Fraction(2) ** j:
        v = math.nextafter(v, 0.0)
    while Fraction(math.nextafter(v, math.inf)) ** 2 <= Fraction(2) ** j:
        v = math.nextafter(v, math.inf)
    return v


EDGES = np.array([largest_at_most_edge(j) for j in R.GRID_EXPONENTS.tolist()])


def edge_values() -> np.ndarray:
    t = EDGES
    return np.concatenate([t, np.nextafter(t, 0.0), np.nextafter(t, np.inf),
                           np.nextafter(np.nextafter(t, np.inf), np.inf)])


def test_upper_edges_exact():
    """T[b] is the largest float <= 2^{j_b/2} (rationals), and the last one is +inf."""
    t = R._UPPER
    assert t.size == K + 1 and t[-1] == math.inf
    assert np.array_equal(t[:-1], EDGES)


def test_bins_inplace_exact_at_edges():
    """The in-place bit formula equals the rational bin at, below and above every edge, for
    random magnitudes, the least positive float, huge values and +inf."""
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    v = np.concatenate([edge_values(), np.exp2(rng.uniform(-40, 100, 3000)),
                        [5e-324, 1e-310, 2.0**-20, 1e300, np.finfo(float).max, np.inf]])
    want = np.array([exact_bin(float(a)) for a in v])
    got = R._bins_inplace(v.copy())
    assert np.array_equal(got, want), f"seed={SEED}"


def slow_bins(x: np.ndarray) -> np.ndarray:
    """Reference: the direct formula on every unordered pair, binned with grid_levels (checked
    against rationals in test_fc_radius_bins.py), credited to both ends."""
    m = x.shape[0]
    out = np.zeros((m, K + 1), dtype=np.int64)
    i, j = np.triu_indices(m, 1)
    with np.errstate(all="ignore"):
        sq = squared_distance(x[i], x[j])
    b = np.clip(R.grid_levels(sq) - R.GRID_EXPONENTS[0], 0, K)
    np.add.at(out, (i, b), 1)
    np.add.at(out, (j, b), 1)
    return out


def adversarial(offset: float, d: int, far: bool) -> np.ndarray:
    """Rows whose pairs have squared distances exactly at and next to grid edges: along the
    first axis, steps y with fl(y²) on an edge or one ulp off (searched exactly), around
    ``offset`` (far from the origin the product expansion errs by far more than an ulp);
    duplicates; Gaussian rows; a far row first (the shell anchor) when ``far``."""
    rng = np.random.default_rng(SEED)
    steps = []
    for t in EDGES[::3]:
        y = math.sqrt(float(t))
        for k in range(-3, 4):
            steps.append(y)
            y = math.nextafter(y, math.inf)
    steps = np.array(steps)
    steps = steps[(steps > 1e-3) & (steps < 1e6)]
    base = np.zeros((steps.size, d))
    base[:, 0] = steps
    pairs = np.concatenate([np.zeros((1, d)), base])  # row 0 against every step
    g = np.stack(np.meshgrid(*[np.arange(4.0)] * 2, indexing="ij"), -1).reshape(-1, 2)
    lat = np.zeros((g.shape[0], d))
    lat[:, : min(d, 2)] = g[:, : min(d, 2)]  # squared distances 1, 2, 4, 5, 8, 9, 10, 13, 18: on and off the edges
    gauss = rng.normal(size=(700, d)) * 3.0
    x = np.concatenate([pairs, lat, lat[:5], gauss]) + offset
    if far:
        x = np.concatenate([np.full((1, d), 1e200), x])
    return x


@pytest.mark.parametrize("offset,d,far", [(0.0, 1, False), (0.0, 10, False), (1e7, 3, False),
                                           (-3e9, 10, False), (1e4, 4, True), (0.0, 2, False),
                                           (1e7, 2, True)])
def test_pair_bins_equal_slow_reference(offset, d, far):
    print(f"seed={SEED}")
    x = adversarial(offset, d, far)
    want = slow_bins(x)
    for threads in (1, 2):
        with np.errstate(all="ignore"):
            got = R._pair_bins(x, threads=threads)
        assert np.array_equal(got, want), f"seed={SEED} offset={offset} d={d} far={far}"


def test_pair_bins_negative_control_without_margin(monkeypatch):
    """Without the screening margin (c = 0) the same harness finds a difference: it can fail."""
    x = adversarial(-3e9, 10, False)
    monkeypatch.setattr(R, "_U", 0.0)
    assert not np.array_equal(R._pair_bins(x, threads=1), slow_bins(x))


def lexsort_order(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x).view(np.uint64)
    return np.lexsort([bits[:, j] for j in range(x.shape[1] - 1, -1, -1)] + [h])


def datasets_for_order() -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    dup = rng.integers(0, 3, size=(2000, 3)).astype(float)
    mixed = np.concatenate([rng.normal(size=(300, 2)) * 1e300, rng.normal(size=(300, 2)) * 2.0**-70,
                            [[0.0, -0.0], [-0.0, 0.0], [0.0, 0.0]]])
    return [rng.normal(size=(3000, 5)), dup, mixed, np.zeros((1, 4)), np.zeros((2, 3))]


@pytest.mark.parametrize("coarse", [False, True])
def test_keyed_row_order_equals_lexsort(monkeypatch, coarse):
    """The same permutation as the full lexsort (hash of (row, j), then the bits, then j, then the
    index; j the occurrence index among identical rows), also when most hashes collide (a 2-bit
    hash, so ties between distinct rows are sorted by their bits)."""
    rng = np.random.default_rng(SEED)
    if coarse:
        full = M.row_hash
        monkeypatch.setattr(M, "row_hash", lambda a, k, occ=None: full(a, k, occ) & np.uint64(3))
    for x in datasets_for_order():
        keys = M.row_keys(x.shape[1], rng)
        bits = np.ascontiguousarray(x).view(np.uint64)
        j = M.occurrence_index([bits[:, c] for c in range(x.shape[1])])
        want = np.lexsort([j] + [bits[:, c] for c in range(x.shape[1] - 1, -1, -1)]
                          + [M.row_hash(x, keys, j)])
        assert np.array_equal(M._keyed_row_order(x, keys), want), f"seed={SEED}"
        if not j.any():  # duplicate-free: the order of the row alone (83876dc)
            assert np.array_equal(want, lexsort_order(x, M.row_hash(x, keys)))


def sort_scale_counts(xs: np.ndarray) -> np.ndarray:
    """The 83876dc implementation: sorted levels, searchsorted at 2k."""
    n, d = xs.shape
    out = np.zeros((d, M.SCALE_EXPONENTS.size), dtype=np.int64)
    if n < 2:
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.abs(xs[1:] - xs[:-1]).T
    for j in range(d):
        out[j] = np.searchsorted(np.sort(R.grid_levels(diff[j])), 2 * M.SCALE_EXPONENTS, side="right")
    return out


def test_sorted_scale_counts_equal_sort_reference(monkeypatch):
    """Differences of every magnitude (below 2⁻⁵⁰, beyond 2⁷⁰, overflowing to inf, exact powers
    of two and their neighbours); negative control: levels one too high are detected."""
    rng = np.random.default_rng(SEED)
    p = np.exp2(np.arange(-52, 73, 0.5))
    col = np.cumsum(np.concatenate([p, np.nextafter(p, 0), np.nextafter(p, np.inf), [0.0, 0.0]]))
    cases = datasets_for_order() + [np.stack([col, col[::-1]], 1), np.array([[1e308], [-1e308], [1e308]])]
    for xs in cases:
        with np.errstate(over="ignore"):
            assert np.array_equal(M.sorted_scale_counts(xs), sort_scale_counts(xs)), f"seed={SEED}"
    levels = R.grid_levels
    monkeypatch.setattr(R, "grid_levels", lambda v: levels(v) + 1)
    xs = cases[-2]
    with np.errstate(over="ignore"):
        bad = M.sorted_scale_counts(xs)
    monkeypatch.setattr(R, "grid_levels", levels)
    assert not np.array_equal(bad, sort_scale_counts(xs))


def release_datasets():
    g = np.random.default_rng(SEED)
    lat = g.integers(0, 41, size=(6000, 3)).astype(float)  # squared distances on the grid edges
    yield "gauss_d10", g.normal(size=(4000, 10)) * 3.0 + 1.0, dict(epsilon=1.0, delta=1e-6, m_locate=2500)
    yield "lattice_d3", lat, dict(epsilon=1.0, delta=1e-6, m_locate=2000)
    yield "offset_d4_laplace", g.normal(size=(6000, 4)) + 1e6, dict(epsilon=2.0, delta=1e-7,
                                                                     calibration="laplace", m_locate=2000)
    far = g.normal(size=(3000, 6))
    far[0] = 1e200
    far[1, ::2] = -1e150
    yield "far_rows_d6", far, dict(epsilon=1.0, delta=1e-6, alpha=0.1, m_locate=2000)


#: Recorded with commit 83876dc (before the speed work): n̂, radius, clip radius, mean (float.hex),
#: and the first 16 hex digits of the SHA-256 of the JSON list of radius_queries(x[:1500]).
#: Re-recorded after the interval utility of the pair-quantile selections (docs/proofs/mean.md
#: §2b): lattice_d3/1, lattice_d3/2 (integer data: ties in the consecutive differences change
#: the scale / pair-radius utilities, hence the picks) and offset_d4_laplace/2 (the utility of the
#: cells above the median changed: same noise, another pick); the other five are still 83876dc's.
#: offset_d4_laplace/2 again after the scale step's untied median and public prior (mean.md §2b).
#: All eight releases again at the spread floor (mean.md §8c: a new ε/20 step before the clipping
#: radius, from the final sum); the radius queries' digests are unchanged. All eight again at the
#: default calibration "auto" and the count's share ε/20 (mean.md §13: lattice_d3 now runs Laplace
#: noise; every radius unchanged, the clip radius of lattice_d3 one grid step apart).
#: offset_d4_laplace/1 and /2 again at the large-sample shares (mean.md §7 "Large samples", 2026-12-06: the locate
#: step's ε/10, its need fits twice into m_locate = 2000): clip radius 3.668 → 4.000 and 3.364, the
#: means within 0.0015 of their old values (n̂ and radius unchanged); the other six are unchanged.
EXPECTED = json.loads('''{
"gauss_d10/1": [
true,
4000,
"0x1.306fe0a31b715p+4",
"0x1.d5818dcfba488p+3",
[
"0x1.fda854fdf3b65p-1",
"0x1.066592f1a9fbep+0",
"0x1.07f79a1cac082p+0",
"0x1.0382578d4fdf4p+0",
"0x1.e00e395810625p-1",
"0x1.c4d0cac083126p-1",
"0x1.078d6b851eb85p+0",
"0x1.dfe4a2d0e5603p-1",
"0x1.e7eef0a3d70a5p-1",
"0x1.0098fdf3b645ap+0"
]
],
"gauss_d10/2": [
true,
3987,
"0x1.306fe0a31b715p+4",
"0x1.d5818dcfba488p+3",
[
"0x1.0509c6d695dcfp+0",
"0x1.0dc623cbdcd04p+0",
"0x1.03e341bfeb741p+0",
"0x1.119ef8cae640ap+0",
"0x1.cd06d139569e1p-1",
"0x1.e5a137dc8e8b2p-1",
"0x1.063707c4ed928p+0",
"0x1.f74759067c2dfp-1",
"0x1.fdb9db771b6aap-1",
"0x1.ea3329bc52f54p-1"
]
],
"gauss_d10/queries": "c1a5f96e9a840996",
"lattice_d3/1": [
true,
6000,
"0x1.6a09e667f3bcdp+1",
"0x1.fffffffffffffp+0",
[
"0x1.41e4f43958107p+4",
"0x1.3e74c90b9af72p+4",
"0x1.402cd33333333p+4"
]
],
"lattice_d3/2": [
true,
5987,
"0x1.306fe0a31b715p+1",
"0x1.0000000000001p+1",
[
"0x1.41c26534b8e42p+4",
"0x1.3dee39794ee41p+4",
"0x1.3ef733f27cf15p+4"
]
],
"lattice_d3/queries": "e9bd1f4cd1ab5cbd",
"offset_d4_laplace/1": [
true,
6000,
"0x1.0000000000000p+2",
"0x1.fffffffffffffp+1",
[
"0x1.e848003a00470p+19",
"0x1.e847ffc0d6099p+19",
"0x1.e847ffea62cb7p+19",
"0x1.e848005dca223p+19"
]
],
"offset_d4_laplace/2": [
true,
5994,
"0x1.0000000000000p+2",
"0x1.ae89f995ad3aep+1",
[
"0x1.e848002d3209cp+19",
"0x1.e847ffc8107bbp+19",
"0x1.e847ffe3740aap+19",
"0x1.e848005ca6947p+19"
]
],
"offset_d4_laplace/queries": "e4780bdd4f63691f",
"far_rows_d6/1": [
true,
3000,
"0x1.306fe0a31b715p+2",
"0x1.d5818dcfba488p+1",
[
"0x1.778c131d5acb4p-7",
"-0x1.fc45f92c5f920p-7",
"0x1.f8ca94d242e60p-9",
"0x1.025ba5e353f68p-8",
"-0x1.98b4b17e4b188p-7",
"0x1.d780f5c28f5c4p-6"
]
],
"far_rows_d6/2": [
true,
2987,
"0x1.306fe0a31b715p+2",
"0x1.d5818dcfba488p+1",
[
"0x1.7e438fe5f21d5p-6",
"-0x1.3fec1dd343194p-8",
"0x1.eabcd1765bb94p-8",
"0x1.fed661306c530p-8",
"-0x1.faf740b502248p-6",
"0x1.9f77762fd2bf8p-7"
]
],
"far_rows_d6/queries": "75e88fc61c88be47"
}''')


def test_private_mean_releases_bit_identical_to_83876dc(monkeypatch):
    # The FriendlyCore plans' releases: gauss_d10 and far_rows_d6 (d = 10, 6 at n̂·ε/d < 1500)
    # take the coordinate plan by default since it runs up to d = 20 (docs/proofs/mean.md §11).
    monkeypatch.setattr(mean_small, "COORD_SAMPLE", 0)
    for name, x, kw in release_datasets():
        for seed in (1, 2):
            rel = private_mean(x, rng=seed, **kw)
            got = [rel.ok, rel.n_hat, float(rel.radius).hex() if rel.radius else None,
                   float(rel.clip_radius).hex() if rel.clip_radius else None,
                   [float(v).hex() for v in rel.mean] if rel.ok else None]
            assert got == EXPECTED[f"{name}/{seed}"], f"{name} rng={seed}"
        q = R.radius_queries(x[:1500], alpha=kw.get("alpha", 0.0))
        assert hashlib.sha256(json.dumps(q).encode()).hexdigest()[:16] == EXPECTED[f"{name}/queries"], name


def test_pool_tasks_run_with_one_blas_thread():
    """While the pool runs, each task sees one BLAS thread (the pool itself uses the cores)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    if not blas or max(i["num_threads"] for i in blas) < 2:
        pytest.skip("the BLAS runs one thread here anyway: nothing to show")

    def task(_: int) -> int:
        return max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")

    assert _map(task, [(0,), (1,), (2,)], 2) == [1, 1, 1]
    assert max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas") >= 2
