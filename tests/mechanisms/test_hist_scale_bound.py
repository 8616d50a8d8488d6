"""Histogram noise scales above MAX_NOISE_SCALE (2^50) are refused before the ledger charge.

Regression for 4bd1e9f: user-level histograms accept ε down to 2^-40 and ℓ0·ℓ∞ up to 2^20, so
the discrete Laplace scale ℓ0ℓ∞/ε reached 2^60 and the int64 noise could wrap (now: a
ParameterError from the parameter check, ledger untouched). Deterministic, well under a second.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import privagg
from privagg.accounting import Ledger
from privagg.mechanisms import histogram as H

KEYS = np.array(["a", "b", "a"])
UNITS = np.array([1, 2, 3])
EPS_OK = Fraction(1, 2**30)  # add/remove, ℓ0ℓ∞ = 2^20: scale exactly 2^50 (accepted)
EPS_REFUSED = Fraction(2**40 - 1, 2**70)  # scale 2^50 · (1 + 2^-40) (refused)


def _run(eps, ledger, **kw):
    return privagg.laplace_histogram(KEYS, epsilon=eps, domain=["a", "b"], units=UNITS,
                                     max_keys_per_unit=1, max_rows_per_key=2**20,
                                     neighbors="add_remove", rng=1, ledger=ledger, **kw)


def test_scale_bound_params():
    assert H.LaplaceHistogramParams.build(EPS_OK, "add_remove", 2, bounds=(1, 2**20)).scale == 2**50
    with pytest.raises(privagg.ParameterError, match="epsilon"):
        H.LaplaceHistogramParams.build(EPS_REFUSED, "add_remove", 2, bounds=(1, 2**20))
    with pytest.raises(privagg.ParameterError, match="epsilon"):
        H.StableHistogramParams.build(EPS_REFUSED, 1e-6, "add_remove", bounds=(1, 2**20),
                                      total_epsilon_share=0)


def test_refused_before_the_charge_and_largest_accepted_runs(tmp_path):
    with Ledger.create(tmp_path / "l.ledger", epsilon=10, delta=0.5) as ledger:
        with pytest.raises(privagg.ParameterError, match="epsilon"):
            _run(EPS_REFUSED, ledger)
        assert ledger.charges() == []
        rel = _run(EPS_OK, ledger)
        assert len(ledger.charges()) == 1
        assert np.abs(np.asarray(rel.counts, dtype=np.int64)).max() < 2**62
