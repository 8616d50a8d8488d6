"""The small-group plan reads every row of its groups from the locate subsample, whose rate is 1
in those groups (docs/proofs/aggregate_mean.md §1 step 2: an engine that keeps the rows, Spark,
collects them once). Known answer: the rows ``_small_means`` receives are exactly the small
groups' rows (as multisets), including a group whose ``n̂ < 1`` (rate 0 under the old rule) —
the test checks that such a group is present, so it can fail (mutant ``agg-small-rate-old``)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np

import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import Contribution, GroupedValues

SEED = 20261206


def test_small_plan_reads_all_rows_of_its_groups(monkeypatch) -> None:
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    sizes = [3, 2, 40, 300, 900, 5000]
    g = np.repeat(np.arange(len(sizes)), sizes).astype(np.int64)
    x = rng.normal(10.0, 2.0, g.size)
    gv = GroupedValues(group=g, values=x, n_groups=len(sizes))
    seen = {}
    real = gm._small_means

    def spy(xs, gs, sizes_, n_hat, small, *a, **k):
        seen.update(x=xs.copy(), g=gs.copy(), n_hat=np.asarray(n_hat).copy(), small=small.copy())
        return real(xs, gs, sizes_, n_hat, small, *a, **k)

    monkeypatch.setattr(gm, "_small_means", spy)
    fp = gm.friendly_means_plan(Fraction(1, 4), Fraction(1, 10**6), Contribution())
    gm._friendly_means(gv, fp, gm._Draws(np.random.default_rng(SEED)))
    small, n_hat = seen["small"], seen["n_hat"]
    m_loc = np.asarray(fp.m_locates)[fp.choose(n_hat)]
    old_rate = np.where(n_hat >= 1, np.minimum(1.0, m_loc / np.maximum(n_hat, 1)), 0.0)
    assert (small & (old_rate < 1)).any(), (n_hat, old_rate)  # the old rule would drop rows here
    for k in range(len(sizes)):
        got = Counter(seen["x"][seen["g"] == k].tolist())
        want = Counter(x[g == k].tolist()) if small[k] else Counter()
        assert got == want, k
