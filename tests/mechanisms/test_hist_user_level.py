"""User-level histograms (issue 12): contribution bounding, calibration, thresholds, engines.

Every statistical check uses a fixed, printed seed and level α = 1e-6 (Wilson intervals or a
chi-square p-value threshold); there are 9 such checks, so this file fails spuriously with
probability < 1e-5. Each harness also runs on a deliberately broken mechanism (bounding off, ℓ0
understated by one, threshold − 1, a priority not keyed by the unit, code-based hashes) and must
reject it. Proofs: docs/proofs/histograms.md §7.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import privagg
from privagg.engines import duckdb as dd
from privagg.engines import numpy_engine
from privagg.engines.base import Bounding, draw_secret
from privagg.engines.duckdb_bounding import DuckDBEngine
from privagg.engines.numpy_engine import NumpyEngine
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.testing import wilson_interval
from privagg.testing.fixtures import new_key_hits

ALPHA = 1e-6


def _wilson(k: int, n: int) -> tuple[float, float]:
    return wilson_interval(k, n, ALPHA)


# ------------------------------------------------------------------ known answers (mpmath)


def _dl_sf(t: Fraction, k: int) -> mpmath.mpf:
    """P[Z ≥ k] for Z ~ DL(t), k ≥ 1: q^k / (1 + q), q = e^{−1/t} (an independent transcription)."""
    q = mpmath.exp(-1 / mpmath.mpf(t.numerator) * t.denominator)
    return q**k / (1 + q)


def _tight(t: Fraction, delta: float, l0: int, linf: int) -> int:
    with mpmath.workdps(50):
        target = 1 - (1 - mpmath.mpf(delta)) ** (mpmath.mpf(1) / l0)
        k = 1
        while _dl_sf(t, k) > target:
            k += 1
        return max(1, linf + k)


@pytest.mark.parametrize(("eps", "delta", "l0", "linf"), [(1, 1e-6, 1, 1), (1, 1e-6, 4, 3), (0.5, 1e-8, 10, 1),
                                                          (2, 1e-5, 1, 5), (1, 1e-3, 32, 2)])
def test_user_level_threshold_known_answers(eps, delta, l0, linf):
    p = H.StableHistogramParams.build(eps, delta, "add_remove", bounds=(l0, linf))
    eps_c = Fraction(repr(float(eps))) * Fraction(9, 10)
    assert p.scale == Fraction(l0 * linf) / eps_c  # t = ℓ0ℓ∞/ε_c
    assert p.total_scale == Fraction(l0 * linf) / (Fraction(repr(float(eps))) / 10)
    assert p.threshold == _tight(p.scale, delta, l0, linf)
    with mpmath.workdps(50):
        def appear(T: int) -> mpmath.mpf:
            return 1 - (1 - _dl_sf(p.scale, T - linf)) ** l0
        assert appear(p.threshold) <= delta < appear(p.threshold - 1)  # tight: T − 1 is not enough
    assert p.appearance_probability <= delta
    assert p.epsilon_exact <= Fraction(repr(float(eps)))


def test_user_level_with_unit_bounds_one_is_record_level_add_remove():
    assert privagg.stable_threshold(1.0, 1e-6, "add_remove", max_keys_per_unit=1, max_rows_per_key=1) == 16
    assert H.stable_threshold(1.0, 1e-6, "add_remove", "seed", max_keys_per_unit=1, max_rows_per_key=1) == 18


def test_user_level_tighter_than_union_bound():
    # union bound: P[Z ≥ T − ℓ∞] ≤ δ/ℓ0; ours 1 − (1 − δ)^{1/ℓ0} > δ/ℓ0 never gives a larger T
    for l0 in (2, 10, 100, 1000):
        assert H.per_key_delta(1e-3, l0) >= 1e-3 / l0
    assert H.per_key_delta(0.3, 4) > 0.3 / 4 * 1.05


@pytest.mark.parametrize(("neighbors", "factor"), [("add_remove", 1), ("replace", 2)])
def test_laplace_sensitivity_known_answers(neighbors, factor):
    p = H.LaplaceHistogramParams.build(0.5, neighbors, 10, bounds=(3, 4))
    assert p.sensitivity == factor * 12
    assert p.scale == Fraction(factor * 12) / Fraction(1, 2)
    assert p.privacy_loss.epsilon == Fraction(1, 2)


# ------------------------------------------------------------------ data helpers


def _ratings(seed: int, n: int = 20000, units: int = 2000, keys: int = 300):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, units, n)
    k = rng.zipf(1.5, n) % keys
    return k, u


# ------------------------------------------------------------------ stability, sensitivity


@pytest.mark.parametrize(("l0", "linf"), [(1, 1), (3, 2), (5, 4)])
def test_adding_a_unit_changes_only_its_own_rows(l0, linf):
    k, u = _ratings(11)
    heavy_keys = np.repeat(np.arange(50), 20)  # a unit with 1000 rows over 50 keys
    heavy_unit = np.full(heavy_keys.size, -7)  # sorts first: shifts every other unit's code
    b = Bounding(l0, linf, 987654321)
    dom = np.arange(300)

    def counts(keys, units):
        return NumpyEngine(keys, units).bounded_counts(b, domain=dom).key_counts

    def dense(kc):
        out = np.zeros(300, dtype=np.int64)
        out[np.asarray(kc.keys, dtype=np.int64)] = kc.counts
        return out

    before = dense(counts(k, u))
    after = dense(counts(np.r_[heavy_keys, k], np.r_[heavy_unit, u]))
    alone = dense(counts(heavy_keys, heavy_unit))
    assert np.array_equal(after - before, alone)  # no other unit's kept rows changed
    assert alone.sum() == l0 * linf and (alone <= linf).all() and (alone > 0).sum() == l0


def test_stability_negative_control_code_based_priority(monkeypatch):
    # priorities from factorization codes (not values): adding a unit shifts other units' codes
    k, u = _ratings(12)
    monkeypatch.setattr(numpy_engine, "value_hashes",
                        lambda v: np.arange(len(v) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    b = Bounding(2, 1, 5)
    dom = np.arange(300)

    def dense(keys, units):
        kc = NumpyEngine(keys, units).bounded_counts(b, domain=dom).key_counts
        out = np.zeros(300, dtype=np.int64)
        out[np.asarray(kc.keys, dtype=np.int64)] = kc.counts
        return out

    diff = dense(np.r_[[0, 1, 2], k], np.r_[[-7, -7, -7], u]) - dense(k, u)
    assert not np.array_equal(diff, dense(np.array([0, 1, 2]), np.array([-7, -7, -7])))


# ------------------------------------------------------------------ uniformity (chi-square)


def _kept_pairs(n_units: int, secret: int) -> np.ndarray:
    """Each of n_units units holds the same 6 keys (one row each); ℓ0 = 2: which pair is kept?"""
    keys = np.tile(np.arange(6), n_units)
    units = np.repeat(np.arange(n_units), 6)
    hu = numpy_engine.value_hashes(np.arange(n_units))[:-1]
    hk = numpy_engine.value_hashes(np.arange(6))[:-1]
    prio = numpy_engine.pair_priorities(hu[units], hk[keys], secret).reshape(n_units, 6)
    kept = np.sort(np.argsort(prio, axis=1, kind="stable")[:, :2], axis=1)
    # cross-check the engine: its per-key totals are these pairs' totals
    total = NumpyEngine(keys, units).bounded_counts(Bounding(2, 1, secret)).key_counts
    assert np.array_equal(total.counts, np.bincount(kept.ravel(), minlength=6))
    return kept[:, 0] * 6 + kept[:, 1]


def test_bounding_is_uniform_over_kept_key_sets():
    seed = 20250101
    print("seed", seed)
    secret = draw_secret(np.random.default_rng(seed))
    codes = _kept_pairs(6000, secret)
    pairs = sorted({a * 6 + b for a in range(6) for b in range(a + 1, 6)})
    observed = np.array([(codes == c).sum() for c in pairs])
    assert observed.sum() == 6000
    assert stats.chisquare(observed).pvalue > ALPHA  # 15 key sets, each 1/15


def test_uniformity_negative_control_unkeyed_priority(monkeypatch):
    # priority = hash(key) only (not keyed by unit): every unit keeps the same pair
    monkeypatch.setattr(numpy_engine, "pair_priorities", lambda hu, hk, s: hk)
    keys = np.tile(np.arange(6), 600)
    units = np.repeat(np.arange(600), 6)
    counts = NumpyEngine(keys, units).bounded_counts(Bounding(2, 1, 1)).key_counts.counts
    assert stats.chisquare(np.r_[counts, np.zeros(6 - counts.size)] + 0.0).pvalue < ALPHA


# ------------------------------------------------------------------ numpy and DuckDB agree


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    k, u = _ratings(3)
    d = tmp_path_factory.mktemp("units")
    pq.write_table(pa.table({"u": u, "k": k}), d / "t.parquet")
    with open(d / "t.csv", "w") as fh:
        fh.write("u,k\n")
        fh.writelines(f"{a},{b}\n" for a, b in zip(u, k, strict=True))
    return k, u, d


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize(("l0", "linf"), [(1, 1), (3, 2)])
def test_numpy_and_duckdb_identical_releases(files, fmt, l0, linf):
    k, u, d = files
    if fmt == "csv":
        k, u = k.astype(str), u.astype(str)
    r1 = privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, max_keys_per_unit=l0,
                                  max_rows_per_key=linf, rng=42)
    path = d / f"t.{fmt}"
    gen = np.random.default_rng(42)  # what rng=42 resolves to: the secret first, then the noise
    engine = DuckDBEngine(dd.describe_column(path, "k"), dd.describe_column(path, "u"))
    bc = engine.bounded_counts(Bounding(l0, linf, draw_secret(gen)))
    r2 = H.stable_histogram_from_counts(bc.key_counts, epsilon=1.0, delta=1e-6, rng=gen,
                                        max_keys_per_unit=l0, max_rows_per_key=linf, unit="u")
    assert r1.keys.tolist() == r2.keys.tolist()
    assert r1.counts.tolist() == r2.counts.tolist() and r1.noisy_total == r2.noisy_total
    dom = np.unique(k)[:40]
    a = NumpyEngine(k, u).bounded_counts(Bounding(l0, linf, 9), domain=dom, keep_other=True)
    b = engine.bounded_counts(Bounding(l0, linf, 9), domain=dom, keep_other=True)
    order = np.argsort(b.key_counts.keys)
    assert np.array_equal(np.asarray(a.key_counts.keys), np.asarray(b.key_counts.keys)[order])
    assert np.array_equal(a.key_counts.counts, b.key_counts.counts[order]) and a.other == b.other
    assert np.array_equal(NumpyEngine(k, u).keys_per_unit(8), engine.keys_per_unit(8))


# ------------------------------------------------------------------ audits on neighbouring units


def _audit_ratio(counts_d: np.ndarray, counts_d1: np.ndarray, scale: Fraction, cut: np.ndarray, seed: int,
                 trials: int = 40000) -> tuple[float, float]:
    """Wilson bounds on P_D'[E] / P_D[E], E = {Y ≥ cut on every changed key}."""
    rng = np.random.default_rng(seed)
    from privagg.noise.samplers import discrete_laplace

    z = discrete_laplace(scale, size=(2, trials, counts_d.size), rng=rng)
    hit_d = int(((counts_d + z[0]) >= cut).all(axis=1).sum())
    hit_d1 = int(((counts_d1 + z[1]) >= cut).all(axis=1).sum())
    lo_d, hi_d = _wilson(hit_d, trials)
    lo_d1, hi_d1 = _wilson(hit_d1, trials)
    return lo_d1 / hi_d, hi_d1 / lo_d


def _neighbours(l0: int, linf: int, bounding: bool):
    """Bounded counts on D and D' = D + one unit with 20 rows on each of 50 keys (the changed keys)."""
    k, u = _ratings(5, n=5000, units=500, keys=60)
    heavy_k = np.repeat(np.arange(50), 20)
    heavy_u = np.full(heavy_k.size, 10**6)
    b = Bounding(l0, linf, 31337)
    dom = np.arange(60)

    def dense(keys, units):
        if not bounding:  # negative control: counts of rows, no bounding
            return np.bincount(keys, minlength=60)
        kc = NumpyEngine(keys, units).bounded_counts(b, domain=dom).key_counts
        out = np.zeros(60, dtype=np.int64)
        out[np.asarray(kc.keys, dtype=np.int64)] = kc.counts
        return out

    d, d1 = dense(k, u), dense(np.r_[k, heavy_k], np.r_[u, heavy_u])
    changed = np.flatnonzero(d1 != d)
    return d[changed], d1[changed]


@pytest.mark.parametrize(("case", "l0_calibrated", "bounding", "violates"), [
    ("calibrated", 2, True, False),
    ("bounding off", 2, False, True),
    ("l0 understated by one", 1, True, True),
])
def test_laplace_audit_neighbouring_units(case, l0_calibrated, bounding, violates):
    seed = 4242
    print("seed", seed, case)
    eps, l0, linf = 1.0, 2, 3
    scale = H.LaplaceHistogramParams.build(eps, "add_remove", 60, bounds=(l0_calibrated, linf)).scale
    d, d1 = _neighbours(l0, linf, bounding)
    assert d.size == l0 if bounding else d.size == 50
    if not bounding:  # one key suffices: it moved by 20 rows instead of ≤ ℓ∞
        d, d1 = d[:1], d1[:1]
    lo, hi = _audit_ratio(d, d1, scale, d1, seed)
    if violates:
        assert lo > math.exp(eps)  # the audit sees a loss above ε
    else:
        assert lo <= math.exp(eps) <= hi * 1.0001 or hi <= math.exp(eps)  # the loss is at most ε
        assert lo <= math.exp(eps)


@pytest.mark.parametrize(("shift", "violates"), [(0, False), (-1, True)])
def test_stable_audit_new_keys_of_one_unit(shift, violates):
    # D' adds units that each create ℓ0 new keys with ℓ∞ rows: each unit is an independent trial
    # of "one of its new keys is released" (impossible on D); it must be ≤ δ at T, > δ at T − 1.
    seed = 777
    print("seed", seed, "shift", shift)
    eps, delta, l0, linf, m = 5.0, 0.01, 2, 2, 40000
    params = H.StableHistogramParams.build(eps, delta, "add_remove", bounds=(l0, linf))
    params = dataclasses.replace(params, threshold=params.threshold + shift)
    hits = new_key_hits(params, m, l0, linf, seed)  # units with at least one key released
    lo, hi = _wilson(hits, m)
    if violates:
        assert lo > delta
    else:
        assert lo <= delta


def test_stable_user_level_compares_with_ge(monkeypatch):
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))
    p = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", bounds=(2, 3))
    t = p.threshold
    # key 0 gets exactly T (T distinct units, one row each); key 1 gets T − 1
    keys = np.r_[np.zeros(t, dtype=np.int64), np.ones(t - 1, dtype=np.int64)]
    units = np.arange(keys.size)
    r = privagg.stable_histogram(keys, units=units, epsilon=1.0, delta=1e-6, max_keys_per_unit=2,
                                 max_rows_per_key=3, rng=0)
    assert r.keys.tolist() == [0] and r.counts.tolist() == [t]


# ------------------------------------------------------------------ API


def test_units_api_and_errors():
    k, u = _ratings(8, n=3000, units=300, keys=20)
    r = privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, rng=1)
    assert r.neighbors == "add_remove" and r.unit == "units" and r.n is None
    assert (r.max_keys_per_unit, r.max_rows_per_key) == (1, 1)
    assert r.counts.sum() <= 300 + 50 * len(r.keys)  # distinct units, ≈ at most 300 in all
    lap = privagg.laplace_histogram(k, units=u, epsilon=1.0, domain=range(20), neighbors="replace", rng=1,
                                    max_keys_per_unit=2, other=True)
    assert lap.n is None and lap.scale == 4.0 and lap.other_count is not None
    assert math.isfinite(lap.error_bound())
    with pytest.raises(ParameterError, match="max_keys_per_unit"):
        privagg.stable_histogram(k, epsilon=1.0, delta=1e-6, max_keys_per_unit=2)
    with pytest.raises(ParameterError, match="neighbors"):
        privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, neighbors="replace")
    with pytest.raises(ParameterError, match="units"):
        privagg.stable_histogram(k, units=u[:-1], epsilon=1.0, delta=1e-6)
    with pytest.raises(ParameterError, match="max_rows_per_key"):
        privagg.stable_histogram(k, units=u, epsilon=1.0, delta=1e-6, max_rows_per_key=0)
    # without units: exactly today's release
    a = privagg.stable_histogram(k, epsilon=1.0, delta=1e-6, rng=3)
    assert a.unit is None and a.neighbors == "replace" and a.threshold == 28
