"""Seeded releases of the unbounded grouped mean are pinned to recorded values (first recorded
on 4bd1e9f: the speed-ups of issue 13 must not change the mechanism's law, nor any seeded
release; re-recorded once when the law changed on purpose: the spread floor and the
fallback center of docs/proofs/aggregate_mean.md §1.9 add a draw before the clipping-range
selection and move its base ``U``; and again when the clipped sum's center moved toward the
longer side of its range, §7 ``recentre_shift``, 2026-12-06; and when the subsample took every
row of the small-plan groups, rate 1 where it was 0 for ``n̂ < 1`` — here the 5-row group —, so
that the small plan reads its rows from the subsample (an engine that keeps the rows, Spark,
then collects them once), 2026-12-06: the FriendlyCore steps of those groups, whose results
the small plan replaces, draw more filter coins, which shifts the later draws); and when the
small-group plan took the groups up to ``SMALL_SWITCH = 5`` times plan 0's floor and its second
pass a scale per group (docs/proofs/aggregate_mean.md §8, §8.2 b0), 2026-12-06: the groups of
2,500 and 4,000 rows moved to the small plan.

The draws come from :class:`_FakeDraws`: plain numpy noise of the same shapes, drawn from a fixed
generator in the mechanism's call order, so the pin checks the data path (subsample, sort orders,
occurrence indices, friend counts, histograms, exact sums) independently of the samplers in
``privagg.noise`` (whose streams may change). The table has duplicate values (rounded and
clipped, like the perf benchmark's ``x``), ±0.0, groups of several sizes (empty, tiny, below and
above every locate plan's subsample size) and one far outlier. Not through
``privagg.aggregate``: its seeded unbounded mean is not reproducible run to run on 4bd1e9f
(DuckDB's ``ORDER BY i`` returns a group's rows in a varying order, and the subsample draws one
uniform per row position). Recorded with
``python tests/aggregate/test_friendly_mean_golden.py --record``.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

import privagg.mechanisms.grouped_mean as gm
from privagg.mechanisms.grouped import Contribution, GroupedValues

GOLDEN = Path(__file__).with_name("data") / "friendly_means_golden.json"
SEED = 20261201


class _FakeDraws(gm._Draws):
    """Integer noise of the right shapes from ``self.gen`` (not the exact samplers)."""

    def dlap(self, name, scale, shape):
        return np.rint(self.gen.laplace(0.0, float(scale), size=shape)).astype(np.int64)

    def dlap_by(self, name, scales, which, width=None):
        shape = which.shape + (() if width is None else (width,))
        sc = np.array([float(s) for s in scales])[which]
        sc = sc if width is None else sc[:, None]
        return np.rint(self.gen.laplace(0.0, 1.0, size=shape) * sc).astype(np.int64)

    def dlap_scaled(self, name, sens, eps, which):
        sc = sens / np.array([float(e) for e in eps])[which]
        return np.rint(self.gen.laplace(0.0, 1.0, size=sens.shape) * sc).astype(np.int64)

    def bernoulli(self, name, num, den, groups):
        return self.gen.random(num.size) * den.astype(np.float64) < num


def _table():
    rng = np.random.default_rng(SEED)
    sizes = [0, 5, 300, 2500, 9000, 16000, 40000, 1200, 70000, 0, 4000]
    g = np.repeat(np.arange(len(sizes)), sizes)
    level = rng.uniform(-20, 120, len(sizes))
    x = np.clip(np.round(rng.normal(level[g], 15.0), 1), 0.0, 100.0)  # many duplicates
    x[rng.random(x.size) < 0.01] = -0.0
    x[x.size // 2] = 1e12  # one far outlier
    return g, x


def _release():
    g, x = _table()
    gv = GroupedValues(group=g.astype(np.int64), values=x, n_groups=int(g.max()) + 1)
    fp = gm.friendly_means_plan(Fraction(1), Fraction(1, 10**6), Contribution())
    res = gm._friendly_means(gv, fp, _FakeDraws(np.random.default_rng(SEED + 1)))
    out = {k: getattr(res, k) for k in ("value", "low", "high")} | dict(res.extra)
    out = {k: [float(v).hex() for v in np.asarray(a, dtype=np.float64)] for k, a in out.items()}
    out["ok"] = [bool(v) for v in res.ok]
    out["small_plan"] = [bool(v) for v in fp.small(res.extra["n_hat"])]
    return out


def test_friendly_means_matches_the_recorded_release():
    print(f"seed {SEED}")
    got = _release()
    want = json.loads(GOLDEN.read_text())["friendly_means"]
    assert any(want["ok"]) and not all(want["ok"])  # released and ⊥ groups both pinned
    # issue 13 item 4: the groups below plan 0's radius selection (the empty, 5-, 300- and
    # 1200-row groups, ⊥ on 4bd1e9f) now run the small-group plan, drawn after every
    # FriendlyCore draw: the FriendlyCore groups stay pinned bit for bit
    small = got.pop("small_plan")
    fc = [i for i, s in enumerate(small) if not s]
    assert len(fc) >= 5 and sum(small) >= 3
    for k in want:
        assert [got[k][i] for i in fc] == [want[k][i] for i in fc], k


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    rec = {"friendly_means": _release()}
    rec["friendly_means"].pop("small_plan")
    GOLDEN.write_text(json.dumps(rec, indent=0) + "\n")
    print("ok groups:", sum(rec["friendly_means"]["ok"]), "of", len(rec["friendly_means"]["ok"]))
