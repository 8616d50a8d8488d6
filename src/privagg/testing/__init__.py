"""Reusable statistical testers for privagg's own test-suite (and for users auditing it).

Every tester here is itself tested both ways in ``tests/noise/test_testers.py``: it accepts a
correct mechanism and rejects a deliberately broken one. This package imports scipy (a test
dependency); the core package never imports it.
"""

from .stats import (
    binomial_two_sided_p,
    chisquare_gof,
    discrete_gaussian_pmf,
    discrete_laplace_pmf,
    wilson_interval,
    wilson_lower,
    wilson_upper,
)

__all__ = [
    "binomial_two_sided_p",
    "chisquare_gof",
    "discrete_gaussian_pmf",
    "discrete_laplace_pmf",
    "wilson_interval",
    "wilson_lower",
    "wilson_upper",
]
