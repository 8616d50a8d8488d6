"""private_mean / private_kmeans / aggregate's friendly mean: the ε floor 2⁻⁴⁰ (EPS_FLOOR) keeps
the count's discrete Laplace scale 40/ε below MAX_NOISE_SCALE = 2^50, refused before the charge.

Regression for 4bd1e9f (floor 2⁻¹⁰⁰): at ε = 2⁻⁵⁰ the count's scale is 40·2^50 and, with the
samplers' bound, the release raised ParameterError after the ledger charge (before the bound the
noise at scales near 2^63 wrapped). Deterministic; about a second.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import privagg
from privagg.accounting import Ledger

PTS = np.random.default_rng(3).normal(size=(60, 2))
DF = pd.DataFrame({"k": ["a"] * 50, "x": np.linspace(0.0, 1.0, 50)})
SMALLEST_OK = 2.0**-40
LARGEST_REFUSED = math.nextafter(2.0**-40, 0.0)

CASES = {
    "private_mean": lambda e, led: privagg.private_mean(PTS, epsilon=e, delta=1e-6, rng=1, ledger=led),
    "private_kmeans": lambda e, led: privagg.private_kmeans(PTS, k=2, epsilon=e, delta=1e-6, rng=1,
                                                            ledger=led),
}


def test_floor_value():
    from privagg.mechanisms.mean import EPS_FLOOR

    assert EPS_FLOOR == 2**-40 and 40 / EPS_FLOOR <= 2**50


@pytest.mark.parametrize("name", sorted(CASES))
def test_floor_refused_before_charge_and_accepted_at_floor(tmp_path, name):
    run = CASES[name]
    with Ledger.create(tmp_path / "l.ledger", epsilon=10, delta=0.5) as ledger:
        for eps in (LARGEST_REFUSED, 2.0**-50):
            with pytest.raises(privagg.ParameterError, match="epsilon"):
                run(eps, ledger)
        assert ledger.charges() == []
        run(SMALLEST_OK, ledger)
        assert len(ledger.charges()) == 1


def test_aggregate_friendly_mean_refused_before_charge(tmp_path):
    with Ledger.create(tmp_path / "l.ledger", epsilon=10, delta=0.5) as ledger:
        with pytest.raises(privagg.ParameterError):
            privagg.aggregate(DF, by="k", metrics=[privagg.mean("x")], domain=["a"], epsilon=1e-16,
                              delta=1e-6, rng=1, ledger=ledger)
        assert ledger.charges() == []
