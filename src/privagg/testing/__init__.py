"""Reusable statistical testers for privagg's own test-suite (and for users auditing it).

Every tester here is itself tested both ways in ``tests/noise/test_testers.py``: it accepts a
correct mechanism and rejects a deliberately broken one. This package imports scipy (a test
dependency); the core package never imports it. ``fixtures`` holds two small helpers of the
user-level histogram tests (a recording ledger, worst-case unit copies).
"""

from .fixtures import RecordingLedger, unit_copies
from .stats import (
    binomial_two_sided_p,
    chisquare_gof,
    clopper_pearson_lower,
    clopper_pearson_upper,
    discrete_gaussian_pmf,
    discrete_laplace_pmf,
    wilson_interval,
    wilson_lower,
    wilson_upper,
)

__all__ = [
    "RecordingLedger",
    "binomial_two_sided_p",
    "chisquare_gof",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "discrete_gaussian_pmf",
    "discrete_laplace_pmf",
    "wilson_interval",
    "wilson_lower",
    "unit_copies",
    "wilson_upper",
]
