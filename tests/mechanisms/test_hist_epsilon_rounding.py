"""ε is rounded down, so the noise is never below nominal (histogram.py, ``_exact_epsilon``).

The ledger records ε as the float's shortest decimal (0.1 → 1/10); the mechanisms turn it into a
rational of denominator <= 2**40 rounded *down*, so the scale t = sensitivity/ε̃ is at least the
nominal sensitivity/ε. Values with long decimal expansions force the rounding (a short decimal
such as 0.5 or 0.1 is kept exactly and cannot tell the two directions apart)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from privagg.mechanisms import histogram as H

SEED = 73_89

LONG = [1 / 3, 2 / 3, 0.1 + 0.2, 0.7071067811865476, 1.2345678901234567, 3.141592653589793,
        0.123456789012345, 7.777777777777779, 1e-3 / 3, 19.99999999999999]


def epsilons() -> list[float]:
    g = np.random.default_rng(SEED)
    return LONG + [float(v) for v in g.uniform(0.01, 20.0, 200)]


@pytest.mark.parametrize(("neighbors", "sensitivity"), [("replace", 2), ("add_remove", 1)])
def test_noise_scale_is_never_below_nominal(neighbors: str, sensitivity: int) -> None:
    print(f"seed={SEED}")
    rounded = 0
    for eps in epsilons():
        nominal = Fraction(sensitivity) / Fraction(repr(eps))  # what the ledger's ε implies
        t = H.noise_scale(eps, neighbors)
        assert t >= nominal, (eps, t, nominal)
        assert t - nominal <= nominal * Fraction(1, 2**30), eps  # and only just above
        rounded += t != nominal
    assert rounded > 150  # most of these values really were rounded (else the test is idle)


def test_epsilon_exact_of_the_params_never_exceeds_the_given_epsilon() -> None:
    for eps in epsilons():
        lap = H.LaplaceHistogramParams.build(eps, "replace", 3)
        stable = H.StableHistogramParams.build(eps, 1e-6, "add_remove")
        assert lap.epsilon_exact <= Fraction(repr(eps)) and stable.epsilon_exact <= Fraction(repr(eps))
        assert lap.privacy_loss.epsilon <= Fraction(repr(eps))
