"""Inputs, bad inputs, the release object, and the ledger hook of the histogram mechanisms."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import privagg
from privagg import BudgetExceededError, ParameterError
from privagg.engines.counting import KeyCounts, align_to_domain, as_domain, count_keys
from privagg.mechanisms import histogram as H
from privagg.mechanisms.histogram import (
    HistogramRelease,
    laplace_histogram,
    laplace_histogram_from_counts,
    stable_histogram,
    stable_histogram_from_counts,
)

SECRET = "SECRET-record-7f3a"


@pytest.fixture
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))


# ------------------------------------------------------------------------------ input types

KEYS = ["b", "a", "c", "a", "b", "a"]
EXPECTED = {"a": 3, "b": 2, "c": 1}


@pytest.mark.parametrize(
    "make",
    [
        list,
        tuple,
        np.array,
        lambda v: np.array(v, dtype=object),
        pd.Series,
        lambda v: pd.Series(v, dtype="category"),
        lambda v: pd.Series(v, dtype="string"),
        pl.Series,
        pa.array,
        lambda v: pa.chunked_array([v[:2], v[2:]]),
        lambda v: pa.array(v).dictionary_encode(),
    ],
)
def test_string_inputs_of_every_kind_count_the_same(make, no_noise) -> None:
    data = make(KEYS)
    r = laplace_histogram(data, epsilon=1.0, domain=["a", "b", "c", "d"], rng=0)
    assert r.counts.tolist() == [3, 2, 1, 0]
    assert r.n == 6
    s = stable_histogram(data, epsilon=1.0, delta=0.5, rng=0)
    assert dict(zip(s.keys.tolist(), s.counts.tolist(), strict=True)) == {
        k: v for k, v in EXPECTED.items() if v >= s.threshold
    }


@pytest.mark.parametrize(
    "data",
    [
        [5, 3, 5, -2, 5],
        np.array([5, 3, 5, -2, 5], dtype=np.int8),
        np.array([5, 3, 5, -2, 5], dtype=np.int64),
        pd.Series([5, 3, 5, -2, 5]),
        pd.Series([5, 3, 5, -2, 5, None], dtype="Int64"),
        pl.Series([5, 3, 5, -2, 5, None]),
        pa.array([5, 3, 5, -2, 5, None]),
        np.array([5.0, 3.0, 5.0, -2.0, 5.0, np.nan]),
    ],
)
def test_integer_like_inputs_and_missing_keys(data, no_noise) -> None:
    r = laplace_histogram(data, epsilon=1.0, domain=[-2, 3, 5, 7], rng=0)
    assert r.counts.tolist() == [1, 1, 3, 0]
    assert r.n == len(data)  # missing keys count in n (replace-one denominator)
    np.testing.assert_allclose(r.frequencies, np.array([1, 1, 3, 0]) / len(data))


def test_tuple_keys_and_mixed_types(no_noise) -> None:
    data = [(1, "x"), (2, "y"), (1, "x"), None, "z", 3]
    r = laplace_histogram(data, epsilon=1.0, domain=[(1, "x"), (2, "y"), "z", 3, (9, 9)], rng=0)
    assert r.counts.tolist() == [2, 1, 1, 1, 0]
    s = stable_histogram(data, epsilon=1.0, delta=0.99, neighbors="add_remove", rng=0)
    assert s.threshold == 1
    assert set(s.keys.tolist()) == {(1, "x"), (2, "y"), "z", 3}


def test_large_and_negative_integer_ranges_are_sorted_not_binned() -> None:
    kc = count_keys(np.array([10**15, -(10**15), 10**15, 0]))
    assert kc.keys.tolist() == [-(10**15), 0, 10**15]
    assert kc.counts.tolist() == [1, 1, 2]
    big = np.array([2**64 - 1, 1, 2**64 - 1], dtype=np.uint64)
    kc = count_keys(big)
    assert kc.keys.tolist() == [1, 2**64 - 1] and kc.counts.tolist() == [1, 2]


def test_out_of_domain_records_are_not_an_error_and_go_to_other(no_noise) -> None:
    data = ["a", "a", SECRET, "b", None]
    r = laplace_histogram(data, epsilon=1.0, domain=["a", "b"], other=True, rng=0)
    assert r.counts.tolist() == [2, 1]
    assert r.other_count == 2  # the out-of-domain record and the missing key
    assert r.n == 5
    assert r.to_dict() == {"a": 0.4, "b": 0.2, None: 0.4}
    assert SECRET not in repr(r)
    r2 = laplace_histogram(data, epsilon=1.0, domain=["a", "b"], neighbors="add_remove", rng=0)
    assert r2.frequencies.tolist() == [2 / 3, 1 / 3]  # denominator: released total


def test_domain_order_and_types_are_kept(no_noise) -> None:
    r = laplace_histogram([3, 1, 1], epsilon=1.0, domain=np.array([3, 2, 1]), rng=0)
    assert r.keys.tolist() == [3, 2, 1] and r.counts.tolist() == [1, 0, 2]
    r = laplace_histogram([3, 1, 1], epsilon=1.0, domain=pd.Series([1.0, 3.0]), rng=0)
    assert r.counts.tolist() == [2, 1]


def test_engine_key_counts_as_arrow_in_any_order(no_noise) -> None:
    kc = KeyCounts(keys=pa.array(["z", "a", "m"]), counts=np.array([40, 30, 1]), n=75)
    s = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, rng=0)
    assert s.keys.tolist() == ["a", "z"] and s.counts.tolist() == [30, 40] and s.n == 75
    r = laplace_histogram_from_counts(kc, epsilon=1.0, domain=pa.array(["m", "q", "z"]), rng=0)
    assert r.counts.tolist() == [1, 0, 40]
    kc_int = KeyCounts(keys=pa.array([7, 3]), counts=np.array([2, 5]), n=7)
    r = laplace_histogram_from_counts(kc_int, epsilon=1.0, domain=[3, 5, 7], rng=0)
    assert r.counts.tolist() == [5, 0, 2]


def test_engine_keys_of_count_zero_are_never_released() -> None:
    kc = KeyCounts(keys=np.array([1, 2]), counts=np.array([0, 10**6]), n=10**6)
    for seed in range(20):
        s = stable_histogram_from_counts(kc, epsilon=1.0, delta=0.99, neighbors="add_remove", rng=seed)
        assert s.threshold == 1 and s.keys.tolist() == [2]


def test_pandas_series_of_tuples_and_of_lists() -> None:
    kc = count_keys(pd.Series([(1, 2), (1, 2), (3, 4)]))
    assert kc.keys.tolist() == [(1, 2), (3, 4)] and kc.counts.tolist() == [2, 1]
    with pytest.raises(ParameterError, match="hashable keys"):
        count_keys(pd.Series([[SECRET], ["a"]]))


def test_align_to_domain_reports_records_outside() -> None:
    kc = count_keys(["a", "b", "b", "zz", None])
    aligned, outside = align_to_domain(kc, ["b", "c", "a"])
    assert aligned.tolist() == [2, 0, 1] and outside == 2


# -------------------------------------------------------------------------------- bad inputs


def _assert_parameter_error(excinfo: pytest.ExceptionInfo, where: str, name: str) -> None:
    msg = str(excinfo.value)
    assert msg.startswith(f"{where}: parameter '{name}' must be "), msg
    assert "; got " in msg and "\n" not in msg
    assert SECRET not in msg


BAD_EPSILONS = [0, -1.0, float("nan"), float("inf"), "1", None, True, 1j]


@pytest.mark.parametrize("epsilon", BAD_EPSILONS)
def test_bad_epsilon(epsilon) -> None:
    with pytest.raises(ParameterError) as e:
        laplace_histogram([1], epsilon=epsilon, domain=[1])
    _assert_parameter_error(e, "laplace_histogram", "epsilon")
    with pytest.raises(ParameterError) as e:
        stable_histogram([1], epsilon=epsilon, delta=1e-6)
    _assert_parameter_error(e, "stable_histogram", "epsilon")


def test_epsilon_below_the_rational_grid_names_the_value_given() -> None:
    with pytest.raises(ParameterError) as e:
        laplace_histogram([1], epsilon=1e-13, domain=[1])
    _assert_parameter_error(e, "laplace_histogram", "epsilon")
    assert str(e.value).endswith("got 1e-13.")


@pytest.mark.parametrize("delta", [0, 1, 1.5, -0.1, float("nan"), float("inf"), "0.1", None])
def test_bad_delta(delta) -> None:
    with pytest.raises(ParameterError) as e:
        stable_histogram([1], epsilon=1.0, delta=delta)
    _assert_parameter_error(e, "stable_histogram", "delta")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"neighbors": "replace_one"}, "neighbors"),
        ({"threshold": "loose"}, "threshold"),
        ({"rng": "seed"}, "rng"),
        ({"rng": -1}, "rng"),
    ],
)
def test_bad_choices(kwargs, name) -> None:
    with pytest.raises(ParameterError) as e:
        stable_histogram([1], epsilon=1.0, delta=1e-6, **kwargs)
    _assert_parameter_error(e, "stable_histogram", name)


@pytest.mark.parametrize(
    "data",
    [
        np.array([[SECRET, "a"], ["b", "c"]]),
        np.zeros((3, 2)),
        [[SECRET], ["a"]],
        [{"k": SECRET}],
        [{SECRET}],
        pa.array([[1, 2], [3]]),
        pd.DataFrame({"a": [SECRET]}),
        pl.DataFrame({"a": [SECRET]}),
        42,
    ],
)
def test_bad_data_shape_or_unhashable_keys(data) -> None:
    for call in (
        lambda: laplace_histogram(data, epsilon=1.0, domain=["a"]),
        lambda: stable_histogram(data, epsilon=1.0, delta=1e-6),
    ):
        with pytest.raises(ParameterError) as e:
            call()
        assert "parameter 'data' must be a 1-D array-like of hashable keys" in str(e.value)
        assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    "domain", [[1, 1], [], [None, 1], [1.0, float("nan")], {1, 2}, [[1], [2]], np.zeros((2, 2))]
)
def test_bad_domain(domain) -> None:
    with pytest.raises(ParameterError) as e:
        laplace_histogram([1], epsilon=1.0, domain=domain)
    _assert_parameter_error(e, "laplace_histogram", "domain")


def test_bad_other() -> None:
    with pytest.raises(ParameterError) as e:
        laplace_histogram([1], epsilon=1.0, domain=[1], other="yes")
    _assert_parameter_error(e, "laplace_histogram", "other")


@pytest.mark.parametrize(
    "empty", [[], np.array([], dtype=np.int64), pa.array([], pa.string()), pd.Series([], dtype=float)]
)
def test_empty_data_replace_is_an_error_add_remove_is_a_release(empty) -> None:
    with pytest.raises(ParameterError) as e:
        stable_histogram(empty, epsilon=1.0, delta=1e-6)
    _assert_parameter_error(e, "stable_histogram", "data")
    with pytest.raises(ParameterError):
        laplace_histogram(empty, epsilon=1.0, domain=[1, 2])
    s = stable_histogram(empty, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=0)
    assert s.keys.size == 0 and s.counts.dtype == np.int64 and s.frequencies.dtype == np.float64
    assert s.n is None and s.to_dict() == {}
    r = laplace_histogram(empty, epsilon=1.0, domain=[1, 2], neighbors="add_remove", rng=0)
    assert r.keys.tolist() == [1, 2] and r.counts.shape == (2,)


def test_bad_beta_in_bounds() -> None:
    r = laplace_histogram([1], epsilon=1.0, domain=[1], rng=0)
    for beta in (0, 1, float("nan"), "0.1"):
        with pytest.raises(ParameterError, match="parameter 'beta'"):
            r.error_bound(beta)
        with pytest.raises(ParameterError, match="parameter 'beta'"):
            r.confidence_intervals(beta)


# --------------------------------------------------------------------------- release object


def test_release_fields_and_immutability() -> None:
    r = stable_histogram(["a"] * 100 + ["b"] * 60 + ["c"], epsilon=1.0, delta=1e-6, rng=1)
    assert isinstance(r, HistogramRelease)
    assert (r.mechanism, r.epsilon, r.delta, r.neighbors, r.threshold, r.n, r.secure) == (
        "stable_histogram",
        1.0,
        1e-6,
        "replace",
        28,
        161,
        False,
    )
    assert r.scale == 2.0
    assert r.keys.tolist() == ["a", "b"]
    assert r.counts.dtype == np.int64 and r.frequencies.dtype == np.float64
    for arr in (r.keys, r.counts, r.frequencies):
        with pytest.raises(ValueError):
            arr[0] = arr[0]
    with pytest.raises(AttributeError):
        r.epsilon = 2.0  # type: ignore[misc]
    assert not hasattr(r, "true_counts")
    assert str(r.privacy_loss) == "ε=1, δ=1e-06"


def test_default_rng_is_secure() -> None:
    r = laplace_histogram([1, 2], epsilon=1.0, domain=[1, 2])
    assert r.secure is True
    s = stable_histogram([1, 2], epsilon=1.0, delta=1e-6, rng=np.random.default_rng(0))
    assert s.secure is False


def test_seeded_runs_are_reproducible() -> None:
    a = laplace_histogram(np.arange(100) % 10, epsilon=0.5, domain=range(10), rng=123)
    b = laplace_histogram(np.arange(100) % 10, epsilon=0.5, domain=range(10), rng=123)
    np.testing.assert_array_equal(a.counts, b.counts)


def test_to_pandas_and_plot(tmp_path) -> None:
    r = stable_histogram(["a"] * 100 + ["b"] * 60, epsilon=1.0, delta=1e-6, rng=1)
    df = r.to_pandas()
    assert list(df.columns) == ["key", "count", "frequency", "ci_low", "ci_high"]
    assert (df["ci_low"] <= df["frequency"]).all() and (df["frequency"] <= df["ci_high"]).all()
    fig = r.plot(tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    ax = fig.axes[0]
    assert any(abs(line.get_ydata()[0] - 28 / 160) < 1e-12 for line in ax.get_lines())  # threshold line
    lap = laplace_histogram(np.arange(1000) % 100, epsilon=1.0, domain=range(100), other=True, rng=2)
    df = lap.to_pandas(beta=0.1)
    assert len(df) == 101 and df["key"].iloc[-1] is None
    fig = lap.plot(max_keys=10)
    assert len(fig.axes[0].patches) == 10


def test_privacy_loss_of_laplace_is_pure() -> None:
    r = laplace_histogram([1], epsilon=0.25, domain=[1], rng=0)
    assert r.privacy_loss.is_pure and str(r.privacy_loss).startswith("ε=0.25")


def test_public_names_are_exported() -> None:
    assert privagg.laplace_histogram is laplace_histogram
    assert privagg.stable_histogram is stable_histogram
    assert privagg.HistogramRelease is HistogramRelease


# ---------------------------------------------------------------------------------- ledger


class _RecordingLedger:
    def __init__(self, events: list[str], fail: bool = False) -> None:
        self.events, self.fail, self.calls = events, fail, []

    def charge(self, loss, *, mechanism, parameters):
        self.events.append("charge")
        self.calls.append((loss, mechanism, parameters))
        if self.fail:
            raise BudgetExceededError("over budget")


def test_ledger_is_charged_after_validation_and_before_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real = H.discrete_laplace

    def spy(scale, size, rng):
        events.append("noise")
        return real(scale, size, rng=rng)

    monkeypatch.setattr(H, "discrete_laplace", spy)
    ledger = _RecordingLedger(events)
    stable_histogram(["a"] * 40, epsilon=1.0, delta=1e-6, rng=0, ledger=ledger)
    laplace_histogram(["a"], epsilon=0.5, domain=["a"], rng=0, ledger=ledger)
    assert events == ["charge", "noise", "charge", "noise"]
    (l1, m1, p1), (l2, m2, p2) = ledger.calls
    assert m1 == "stable_histogram" and p1["threshold"] == 28 and str(l1) == "ε=1, δ=1e-06"
    assert m2 == "laplace_histogram" and l2.is_pure
    with pytest.raises(ParameterError):  # invalid parameters: nothing charged
        stable_histogram(["a"], epsilon=-1, delta=1e-6, ledger=ledger)
    assert len(ledger.calls) == 2


def test_budget_exceeded_propagates_and_no_noise_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(H, "discrete_laplace", lambda *a, **k: events.append("noise"))
    with pytest.raises(BudgetExceededError):
        stable_histogram(["a"], epsilon=1.0, delta=1e-6, ledger=_RecordingLedger(events, fail=True))
    assert events == ["charge"]


def test_real_ledger(tmp_path) -> None:
    from privagg.accounting import Ledger

    ledger = Ledger.create(tmp_path / "budget.db", epsilon=1.5, delta=1e-5)
    stable_histogram(["a"] * 50, epsilon=1.0, delta=1e-6, rng=0, ledger=ledger)
    with pytest.raises(BudgetExceededError):
        laplace_histogram(["a"], epsilon=1.0, domain=["a"], rng=0, ledger=ledger)
    laplace_histogram(["a"], epsilon=0.5, domain=["a"], rng=0, ledger=ledger)
    assert len(ledger.charges()) == 2


def test_domain_object_is_validated_once() -> None:
    dom = as_domain(range(5), "test")
    assert dom.size == 5 and not dom.keys.flags.writeable
    r = laplace_histogram([1, 1, 4, 9], epsilon=1.0, domain=dom, rng=0)
    assert r.keys.tolist() == [0, 1, 2, 3, 4] and r.n == 4
