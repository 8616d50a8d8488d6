"""Two bugs found by the invariance / mutation review of issue 13, now fixed (both failed on the
code before the fix): a metric's own parameter check raised after the ledger charge, and sum
bounds near 2^1000 made the plan hang for minutes. Deterministic; each well under a second (the
hang test is cut off at 3 s by SIGALRM)."""

from __future__ import annotations

import signal

import numpy as np
import pandas as pd
import pytest

import privagg
from privagg.accounting import Ledger
from privagg.mechanisms.grouped import Contribution

DF = pd.DataFrame({"k": ["a"] * 50, "x": np.linspace(0.0, 1.0, 50)})


@pytest.mark.parametrize(("metric", "epsilon", "delta"), [
    (privagg.sum("x", (0, 1)), 1e-40, 0.0),
    (privagg.mean("x", (0, 1)), 1e-40, 0.0),
    (privagg.count(), 1e-40, 0.0),
    (privagg.quantile("x", 0.5), 1e-16, 0.0),
    (privagg.mean("x"), 1e-40, 1e-6),
    (privagg.mean("x"), 1.0, 1e-300),
], ids=["sum", "bounded-mean", "count", "quantile", "friendly-eps", "friendly-delta"])
def test_metric_parameter_errors_come_before_the_charge(tmp_path, metric, epsilon, delta):
    with Ledger.create(tmp_path / "l.ledger", epsilon=10, delta=0.5) as ledger:
        with pytest.raises(privagg.ParameterError):
            privagg.aggregate(DF, by="k", metrics=[metric], domain=["a"], epsilon=epsilon, delta=delta,
                              rng=1, ledger=ledger)
        assert ledger.charges() == [], "charged, then failed"


class _Slow(Exception):
    pass


def _alarm(signum, frame):
    raise _Slow


def test_huge_sum_bounds_plan_quickly_or_refuse():
    from privagg.mechanisms.grouped_bounded import MAX_BOUND_BITS, mean_plan, sum_plan

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 3.0)
    try:
        with pytest.raises(privagg.ParameterError, match="upper|lower"):
            sum_plan(lower=-1e300, upper=1e300, epsilon=0.5, contribution=Contribution())
        with pytest.raises(privagg.ParameterError, match="upper|lower"):
            mean_plan(lower=-1e300, upper=1e300, epsilon=0.5, contribution=Contribution())
        big = 2.0**MAX_BOUND_BITS  # the largest bounds allowed plan fast, at any ε and ℓ∞
        for c in (Contribution(), Contribution(3, 1000, True)):
            sum_plan(lower=-big, upper=big, epsilon=2.0**-30, contribution=c)
            mean_plan(lower=-big, upper=big, epsilon=2.0**-30, contribution=c)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
