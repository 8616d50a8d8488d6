"""The coordinate plan on real columns at small n (issue 11 item 4; docs/proofs/mean.md §11,
"Step 4 on every column, and the spread used").

Real tables put a column's median far from 0 relative to its spread (breast_cancer's area:
654 ± 350; concavity 0.09 ± 0.01). On f47d2e6 a third of the releases at d = 5, n = 300 had a
column more than 10 standard deviations off (a wild octave cell or spread at ε_i·n ≈ 13), which
a median over runs hides: the garbage-rate test below fails there (its negative control).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from privagg import private_mean
from privagg.mechanisms import mean_small as S

SEEDS = range(30)


def _bc(n: int, d: int, seed: int) -> np.ndarray:
    from sklearn.datasets import load_breast_cancer

    x = load_breast_cancer().data[:, :d]
    return x[np.random.default_rng(seed).choice(len(x), n, replace=False)]


def _garbage(d: int = 5, n: int = 300) -> int:
    """Releases (of 30, seeds 0–29, ε = 1, δ = 1e-6) with a column more than 10 standard deviations
    from the subsample's mean; ⊥ counts as garbage too (none is expected at n̂·ε/d = 60)."""
    bad = 0
    for seed in SEEDS:
        x = _bc(n, d, seed)
        r = private_mean(x, epsilon=1.0, delta=1e-6, rng=seed)
        bad += (not r.ok) or bool(np.any(np.abs(r.mean - x.mean(axis=0)) > 10 * x.std(axis=0, ddof=1)))
    return bad


def test_real_columns_small_n_no_wild_releases():
    """breast_cancer, first 5 columns, 300 rows: measured 0 of 30 (f47d2e6: 10 of 30); at most 2.
    Deterministic (fixed seeds; on 30 more seeds, 30–59, 0 of 30 too, and 0 of 30 at d = 10 with
    400 rows)."""
    got = _garbage()
    print("seeds 0-29: wild releases", got)
    assert got <= 2


def test_real_columns_negative_control(monkeypatch):
    """The selections' ρ/d in fifths again and the median utilities of the cell, level and spread
    steps (``cell_utility_of_counts``, ``centred_spread_utility``: the plan before the mass
    utilities of 2026-12-06; the spread bound and the integer point cells kept): measured 13 of 30
    (fails). Fifths alone: 1 of 30 (the mass utilities' margin covers the smaller cell share here;
    8 of 30 with the median utilities before the integer point cells)."""
    monkeypatch.setattr(S, "COORD_SHARES", (Fraction(1, 5),) * 5)
    monkeypatch.setattr(S, "cell_mass_utility_of_counts", S.cell_utility_of_counts)
    monkeypatch.setattr(S, "centred_spread_mass_utility", S.centred_spread_utility)
    got = _garbage()
    print("control, fifths: wild releases", got)
    assert got > 2


def _spreads(monkeypatch, wild_second: bool = False) -> list:
    """Record ``(center, spread)`` of every spread step of ``coordinate_mean`` (the first, then the
    second); ``wild_second``: the second step's release replaced by 1e9."""
    real = S.centred_spread
    seen: list = []

    def spread(source, center, n, eps, anchor, gen, *a, **k):
        out = real(source, center, n, eps, anchor, gen, *a, **k)
        seen.append((np.asarray(center, float).copy(), out.copy()))
        return np.full_like(out, 1e9) if wild_second and len(seen) == 2 else out

    monkeypatch.setattr(S, "centred_spread", spread)
    return seen


def test_spread_is_bounded_by_the_first_spread_plus_the_move(monkeypatch):
    """Known answer: with the second spread step forced to a wild 1e9, the spread used is
    ``s1 + |c1 − c|`` (the first spread around the cell's midpoint plus the center's move)."""
    seen = _spreads(monkeypatch, wild_second=True)
    x = np.random.default_rng(3).normal(13.0, 0.8, size=(3000, 2))
    out = S.coordinate_mean(x, 3000, Fraction(1), np.random.default_rng(4), may_switch=False)
    (c1, s1), (c, _) = seen
    assert np.all(out["spread"] == s1 + np.abs(c1 - c))
    assert np.all(out["spread"] < 10)  # not the wild draw


@pytest.mark.parametrize("d", [1, 2])
def test_spread_bound_never_raises_the_second_spread(monkeypatch, d):
    """Post-processing only lowers: the spread used is at most the second spread's release and at
    most ``s1 + |c1 − c|`` (seeds 0–19, N(21, 1) columns, n = 1000; the second spread runs in every
    seed: none of these columns takes the annulus path)."""
    for seed in range(20):
        seen = _spreads(monkeypatch)
        x = np.random.default_rng(seed).normal(21.0, 1.0, size=(1000, d))
        out = S.coordinate_mean(x, 1000, Fraction(1), np.random.default_rng(seed), may_switch=False)
        assert len(seen) == 2, seed
        (c1, s1), (c, s2) = seen
        assert np.all(out["spread"] <= s2) and np.all(out["spread"] <= s1 + np.abs(c1 - c))


def _wine(seeds, monkeypatch=None, per_dim=None):
    from sklearn.datasets import load_wine

    if per_dim is not None:
        monkeypatch.setattr(S, "COORD_MIN", per_dim)
    x = load_wine().data[:, :10]
    rels = [private_mean(x, epsilon=1.0, delta=1e-6, rng=s) for s in seeds]
    wild = sum(r.ok and bool(np.any(np.abs(r.mean - x.mean(0)) > 10 * x.std(0, ddof=1))) for r in rels)
    return rels, wild


def test_wine_d10_is_bottom_with_its_reason():
    """wine (178 rows, d = 10, ε = 1): ⊥ in every one of 40 seeds, the reason naming the 350 rows
    (max(35·d, 200)/ε) the plan needs (n̂ >= 350 needs the count's DLap(20) noise to add 172:
    probability about 10⁻⁴ per seed)."""
    rels, _ = _wine(range(40))
    assert not any(r.ok for r in rels)
    assert all("350 rows" in r.reason for r in rels), rels[0].reason


def test_wine_d10_negative_control(monkeypatch):
    """The former floor 20·d: some seeds release (n̂ >= 200), and those releases are wild (a column
    more than 10 standard deviations off; measured: 8 of 40 release, all 8 wild)."""
    rels, wild = _wine(range(40), monkeypatch, per_dim=20)
    released = sum(r.ok for r in rels)
    print("control: released", released, "wild", wild)
    assert released >= 1 and wild >= 1
