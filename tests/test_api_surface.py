"""The public names of api.md exist and every name in ``privagg.__all__`` resolves."""

import subprocess
import sys

import pytest

import privagg

API_NAMES = [
    "laplace_histogram",
    "stable_histogram",
    "HistogramRelease",
    "predicates",
    "friend_counts",
    "basic_filter",
    "friendly_budget",
    "end_to_end_budget",
    "PrivaggError",
    "ParameterError",
    "BudgetExceededError",
    "accounting",
    "private_mean",
    "private_kmeans",
]


@pytest.mark.parametrize("name", sorted(set(privagg.__all__) | set(API_NAMES)))
def test_public_name_resolves(name):
    assert getattr(privagg, name) is not None


def test_error_hierarchy():
    assert issubclass(privagg.ParameterError, privagg.PrivaggError)
    assert issubclass(privagg.ParameterError, ValueError)
    assert issubclass(privagg.BudgetExceededError, privagg.PrivaggError)
    assert privagg.predicates.ball(1.0).radius == 1.0
    assert privagg.accounting.Ledger is not None


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError):
        privagg.no_such_name  # noqa: B018


def test_import_is_light():
    """`import privagg` must not pull in the heavy layers (the CLI starts fast)."""
    code = "import sys, privagg; print(sorted(m for m in ('duckdb', 'pandas', 'matplotlib', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
