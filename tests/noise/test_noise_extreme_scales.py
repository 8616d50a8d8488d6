"""Extreme (tiny) scales: tables whose CDF values sit within 2^-700000 of 1 still certify.

Regression: at scale 2e-6 (ε = 1e6 in a histogram) certification used to double its precision
until the cap and raise ArithmeticError.
"""

from fractions import Fraction

import numpy as np
import pytest

from privagg.noise import DiscreteLaplace, discrete_laplace
from privagg.noise._laws import laplace_table


@pytest.mark.parametrize("scale", [Fraction(1, 500_000), Fraction(1, 10**9)])
def test_tiny_scale_table_certifies_and_samples_zero(scale):
    table = laplace_table(scale)
    # [R_2, R_1, 1 - R_1, 1 - R_2]: floors are 0, 0, 2^64 - 1, 2^64 - 1.
    assert table.thresholds.tolist() == [0, 0, 2**64 - 1, 2**64 - 1]
    draws = discrete_laplace(scale, 10_000, rng=7)
    assert draws.dtype == np.int64 and not draws.any()
    assert DiscreteLaplace(scale).upper_quantile(1e-6) == 1
