"""Tests that kill the aggregate mutations of ``tools/mutants.py`` no other test kills.

- ``agg-ledger-after-noise``: a ledger without budget left stops :func:`privagg.aggregate`
  before any metric runs and before the generator is touched (nothing is drawn before the charge).
- ``agg-fc-core-sens-half``: the unbounded mean's core average is released with noise of at least
  the proven sensitivity ``2r/m_low`` (data units), checked on the recorded draws.

Deterministic (no statistics).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privagg
from privagg.accounting import Ledger
from privagg.mechanisms import grouped_bounded, grouped_mean
from privagg.mechanisms.grouped import Contribution, GroupedValues

DF = pd.DataFrame({"k": ["a"] * 40 + ["b"] * 30, "x": np.linspace(0.0, 1.0, 70)})


def test_exhausted_ledger_stops_before_any_metric_or_draw(tmp_path, monkeypatch):
    calls: list[str] = []
    real_counts, real_sums = grouped_bounded.noisy_counts, grouped_bounded.clamped_sums

    def counts(*a, **k):
        calls.append("count")
        return real_counts(*a, **k)

    def sums(*a, **k):
        calls.append("sum")
        return real_sums(*a, **k)

    monkeypatch.setattr(grouped_bounded, "noisy_counts", counts)
    monkeypatch.setattr(grouped_bounded, "clamped_sums", sums)
    gen = np.random.default_rng(20261201)
    before = gen.bit_generator.state
    with Ledger.create(tmp_path / "l.ledger", epsilon=0.5, delta=1e-6) as ledger:
        with pytest.raises(privagg.BudgetExceededError):
            privagg.aggregate(DF, by="k", metrics=[privagg.count(), privagg.sum("x", (0, 1))],
                              domain=["a", "b"], epsilon=1.0, rng=gen, ledger=ledger)
        assert ledger.charges() == []
    assert calls == [], "a metric ran before the ledger was charged"
    assert gen.bit_generator.state == before, "randomness was drawn before the ledger was charged"
    # positive control: with budget, the same call runs both metrics
    privagg.aggregate(DF, by="k", metrics=[privagg.count(), privagg.sum("x", (0, 1))], domain=["a", "b"],
                      epsilon=1.0, rng=gen)
    assert calls == ["count", "sum"]


class _Recorder(grouped_mean._Draws):
    seen: dict[str, tuple[np.ndarray, object]] = {}

    def dlap_scaled(self, name, sens, eps, which):
        type(self).seen[name] = (np.array(sens), eps, np.array(which))
        return super().dlap_scaled(name, sens, eps, which)


@pytest.mark.parametrize("replace", [False, True])
def test_core_average_noise_at_least_the_proven_sensitivity(monkeypatch, replace):
    """Seed 7; groups of 4000 / 6000 standard normals (every group released, not ⊥), in the
    FriendlyCore plan (``SMALL_SWITCH = 1``)."""
    monkeypatch.setattr(grouped_mean, "SMALL_SWITCH", 1)
    monkeypatch.setattr(grouped_mean, "_Draws", _Recorder)
    _Recorder.seen = {}
    rng = np.random.default_rng(7)
    sizes = [4000, 6000]
    g = np.repeat(np.arange(2, dtype=np.int64), sizes)
    gv = GroupedValues(g, rng.normal(size=g.size), 2)
    c = Contribution(max_groups=1, max_rows=1, replace=replace)
    res = grouped_mean.friendly_means(gv, epsilon=1.0, delta=1e-6, contribution=c, rng=np.random.default_rng(7))
    assert res.ok.all()
    sens, eps_cm, which = _Recorder.seen["core_mean"]
    fp = grouped_mean.friendly_means_plan(1.0, 1e-6, c)
    assert eps_cm == tuple(p.eps_core_mean for p in fp.plans)
    plans = [fp.plans[int(k)] for k in which]  # the plan each group's released n̂ chose
    r = res.extra["radius"]
    m_low = res.extra["m_hat"] - np.array([p.core_count_shift for p in plans])
    sens_m = 2.0 * r / m_low * grouped_mean._SAFETY
    eps_lo = np.array([grouped_mean._float_down(p.eps_core_mean) for p in plans])
    e_c = grouped_mean._grid_exponent(np.minimum(sens_m / eps_lo, sens_m))
    data_units = sens.astype(np.float64) * np.ldexp(1.0, e_c)
    assert np.all(data_units >= 2.0 * r / m_low), (data_units, 2.0 * r / m_low)
