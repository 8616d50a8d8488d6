"""Property tests (hypothesis): counting, alignment, shapes, dtypes and key alignment of releases."""

from __future__ import annotations

from collections import Counter

import math

import mpmath
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privagg.engines.counting import align_to_domain, count_keys
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.mechanisms.histogram import laplace_histogram, stable_histogram
from privagg.noise.distributions import DiscreteLaplace

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

ints = st.lists(
    st.integers(min_value=-(2**40), max_value=2**40) | st.integers(min_value=-5, max_value=30), max_size=60
)
strings = st.lists(st.text(alphabet="abcxyzé", max_size=3), max_size=60)
containers = st.sampled_from(["list", "numpy", "arrow"])


def k_all(scale: float, m: int, beta: float) -> int:
    """Smallest k >= 0 with P[max of m iid |Z_i| <= k] >= 1 − β, Z discrete Laplace of scale t,
    from the closed form P[|Z| > k] = 2q^{k+1}/(1 + q), q = e^{−1/t} (written independently of
    privagg; 50 digits, so no tie at the β used here)."""
    with mpmath.workdps(50):
        q = mpmath.exp(-1 / mpmath.mpf(scale))
        per_draw = -mpmath.expm1(mpmath.log1p(-mpmath.mpf(beta)) / m)  # 1 − (1 − β)^{1/m}
        k = int(mpmath.ceil(mpmath.log(per_draw * (1 + q) / 2) / mpmath.log(q))) - 1
        return max(0, k)


def _as(kind: str, values: list):
    if kind == "list":
        return list(values)
    if kind == "numpy":
        return np.array(values) if values else np.array([], dtype=np.int64)
    return pa.array(values)


@SETTINGS
@given(values=ints | strings, kind=containers)
def test_count_keys_matches_counter(values: list, kind: str) -> None:
    kc = count_keys(_as(kind, values))
    expected = Counter(values)
    assert kc.n == len(values)
    assert kc.counts.dtype == np.int64
    assert dict(zip(kc.keys.tolist(), kc.counts.tolist(), strict=True)) == dict(expected)
    assert kc.keys.tolist() == sorted(expected)


@SETTINGS
@given(
    values=ints,
    domain=st.lists(st.integers(min_value=-5, max_value=30), min_size=1, max_size=40, unique=True),
)
def test_align_to_domain_matches_counter(values: list, domain: list) -> None:
    kc = count_keys(values)
    aligned, outside = align_to_domain(kc, domain)
    expected = Counter(values)
    assert aligned.tolist() == [expected.get(k, 0) for k in domain]
    assert outside == len(values) - sum(expected.get(k, 0) for k in domain)


@SETTINGS
@given(
    values=strings,
    domain=st.lists(st.text(alphabet="abcxyz", max_size=2), min_size=1, max_size=20, unique=True),
    neighbors=st.sampled_from(["replace", "add_remove"]),
    other=st.booleans(),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_laplace_release_shapes_dtypes_alignment(values, domain, neighbors, other, seed, monkeypatch) -> None:
    if neighbors == "replace" and not values:
        with pytest.raises(ParameterError, match="'data'"):
            laplace_histogram(values, epsilon=1.0, domain=domain, neighbors=neighbors, other=other, rng=seed)
        return
    r = laplace_histogram(values, epsilon=1.0, domain=domain, neighbors=neighbors, other=other, rng=seed)
    m = len(domain)
    assert r.keys.tolist() == domain
    assert r.counts.shape == r.frequencies.shape == (m,)
    assert r.counts.dtype == np.int64 and r.frequencies.dtype == np.float64
    assert (r.other_count is not None) == other
    denominator = len(values) if neighbors == "replace" else max(1, r.total)
    np.testing.assert_allclose(r.frequencies, r.counts / denominator, rtol=1e-15)
    low, high = r.confidence_intervals(0.1)
    assert low.shape == high.shape == (m,) and (low <= high).all()
    # The error bound, exactly (docstring of HistogramRelease.error_bound): m + other bins.
    bins = m + int(other)
    if neighbors == "replace":
        assert r.error_bound(0.1) == k_all(2.0, bins, 0.1) / len(values)
    else:
        k = k_all(1.0, bins, 0.05)
        s = DiscreteLaplace(1).sum_abs_quantile(bins, 0.05)
        expected = (k + s) / r.total if r.total > s else math.inf
        assert r.error_bound(0.1) == expected


@SETTINGS
@given(
    values=ints | strings,
    neighbors=st.sampled_from(["replace", "add_remove"]),
    delta=st.sampled_from([1e-9, 1e-3, 0.2]),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_stable_release_keys_are_present_sorted_and_above_threshold(values, neighbors, delta, seed) -> None:
    if neighbors == "replace" and not values:
        with pytest.raises(ParameterError, match="'data'"):
            stable_histogram(values, epsilon=2.0, delta=delta, neighbors=neighbors, rng=seed)
        return
    r = stable_histogram(values, epsilon=2.0, delta=delta, neighbors=neighbors, rng=seed)
    present = Counter(values)
    keys = r.keys.tolist()
    assert set(keys) <= set(present)
    assert keys == sorted(keys)
    assert (r.counts >= r.threshold).all()
    assert r.counts.shape == r.frequencies.shape == r.keys.shape
    if neighbors == "replace":  # (T − 1 + k_n(β))/n exactly: at most n keys are present
        n = len(values)
        assert r.error_bound(0.05) == (r.threshold - 1 + k_all(1.0, n, 0.05)) / n
    # add/remove: pinned against the proof's formulas in test_hist_add_remove_total.py.


@SETTINGS
@given(values=st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=60))
def test_noise_free_release_recovers_the_counts(values, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))
    r = laplace_histogram(np.array(values), epsilon=1.0, domain=range(10), rng=0)
    assert r.counts.tolist() == [values.count(k) for k in range(10)]
    s = stable_histogram(values, epsilon=1.0, delta=0.4, rng=0)
    assert dict(zip(s.keys.tolist(), s.counts.tolist(), strict=True)) == {
        k: c for k, c in Counter(values).items() if c >= s.threshold
    }


@SETTINGS
@given(
    epsilon=st.floats(min_value=0.01, max_value=20),
    d1=st.floats(min_value=1e-12, max_value=0.5),
    d2=st.floats(min_value=1e-12, max_value=0.5),
)
def test_threshold_is_monotone_and_the_seed_rule_never_below_tight(epsilon, d1, d2) -> None:
    lo, hi = sorted((d1, d2))
    for nb in ("replace", "add_remove"):
        assert H.stable_threshold(epsilon, lo, nb) >= H.stable_threshold(epsilon, hi, nb)
        assert H.stable_threshold(epsilon, lo, nb, "seed") >= H.stable_threshold(epsilon, lo, nb)
    assert H.stable_threshold(epsilon, lo, "replace") >= H.stable_threshold(epsilon, lo, "add_remove")
