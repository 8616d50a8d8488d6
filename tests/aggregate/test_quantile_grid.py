"""The bounded quantile's grid size from the released group count (grouped_quantile.grid_bits;
docs/proofs/aggregate_quantile.md §4–5, §7).

Known answers of the rule; the release on the per-group grids; an exact audit of the adaptive
composition (the count released, then the quantile on the grid its noisy value picks) with a
negative control (the grid picked from the TRUE count leaks it: infinite loss); the regression
(a 10^4-row group on a wide heavy-tailed range was resolution-limited on the fixed 2^14 grid);
small groups no worse (with a negative control).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import privagg
from privagg.mechanisms import grouped_quantile as gq
from privagg.mechanisms.grouped import Contribution, GroupedValues


# --------------------------------------------------------------------------- known answers
@pytest.mark.parametrize("n_hat, q, eps, con, bits", [
    # q = 1/2, ε_g = 1, Δ = 1: GRID_RHO·n̂·ε_g·b/(2Δ) = 32·n̂
    (1, 0.5, 1, Contribution(), 10),          # 32 → 5, clipped up to 10
    (-7, 0.5, 1, Contribution(), 10),         # a negative noisy count acts as 1
    (32, 0.5, 1, Contribution(), 10),         # 1024 = 2^10 exactly
    (33, 0.5, 1, Contribution(), 11),         # 1056 → 11
    (1000, 0.5, 1, Contribution(), 15),       # 32000 → 15
    (2048, 0.5, 1, Contribution(), 16),       # 65536 = 2^16
    (10**6, 0.5, 1, Contribution(), 16),      # clipped down to 16
    (60, 0.5, Fraction(1, 4), Contribution(), 10),     # wine scale: 480 → 9 → 10
    (1000, 0.5, Fraction(1, 4), Contribution(), 13),   # 8000 → 13
    # q = 0.9: b/(2Δ) = 10/18; 32·1000·10/18 = 17777.8 → 15
    (1000, 0.9, 1, Contribution(), 15),
    # max_rows = 2: Δ = 2 → 32·1000·2/4 = 16000 → 14
    (1000, 0.5, 1, Contribution(max_rows=2), 14),
    # replace, ℓ0 = 2: ε_g = ε/4 → 32·4096/4 = 32768 → 15
    (4096, 0.5, 1, Contribution(max_groups=2, replace=True), 15),
    (5, 0.5, Fraction(10**300), Contribution(), 16),   # huge ε: capped before the float product
    (10**9, 0.5, Fraction(1, 10**300), Contribution(), 10),
])
def test_grid_bits_known_answers(n_hat, q, eps, con, bits):
    a, b = gq.rational_q(q)
    got = gq.grid_bits(np.array([float(n_hat)]), a, b, eps, con)
    assert got.dtype == np.int64 and got.tolist() == [bits]


def test_grid_bits_vectorized_and_monotone():
    n = np.arange(-5, 5000, dtype=np.float64)
    bits = gq.grid_bits(n, 1, 2, Fraction(1), Contribution())
    assert bits.min() == gq.GRID_BITS_MIN and bits.max() == gq.GRID_BITS_MAX
    assert np.all(np.diff(bits) >= 0)
    # the least bits with 2^bits >= 32·n, clipped
    exact = [min(16, max(10, max(0, math.ceil(math.log2(32 * max(v, 1)))))) for v in n.tolist()]
    assert bits.tolist() == exact


def test_release_on_per_group_grids():
    """Groups with different released counts get different dyadic grids of the same bounds; the
    value, low/high and step follow each group's grid; rank_error is per group."""
    rng = np.random.default_rng(3)
    sizes = [40, 5000]
    x = np.concatenate([rng.uniform(0, 10, s) for s in sizes])
    gv = GroupedValues(np.repeat(np.arange(2), sizes), x, 2)
    r = gq.quantiles(gv, 0.5, bounds=(0.0, 10.0), epsilon=Fraction(1), contribution=Contribution(),
                     rng=np.random.default_rng(1), n_hat=np.array([40.0, 5000.0]))
    # bits 11 (32·40 = 1280) and 16 (clipped): steps 2^-7 and 2^-12 on [0, 10] (width < 2^4)
    assert gq.dyadic_grid(0.0, 10.0, 11)[0] == -7 and gq.dyadic_grid(0.0, 10.0, 16)[0] == -12
    assert r.extra["step"].tolist() == [2.0**-7, 2.0**-12]
    for g, e in enumerate((-7, -12)):
        v = r.value[g]
        assert v == math.ldexp(round(math.ldexp(v, -e)), e) and 0.0 <= v <= 10.0
        assert r.low[g] == max(0.0, v - 2.0**e) and r.high[g] == min(10.0, v + 2.0**e)
    k_small, k_big = gq.dyadic_grid(0.0, 10.0, 11)[2], gq.dyadic_grid(0.0, 10.0, 16)[2]
    scale = gq.stage_scales(1, 2, Fraction(1), Contribution(), bounded=True)[0]
    assert r.extra["rank_error"].tolist() == [2.0 * gq._max_abs_noise_bound(scale, k, 0.05) / 2
                                              for k in (k_small, k_big)]
    assert r.extra["rank_error"][0] < r.extra["rank_error"][1]
    # without n_hat: the fixed 2^BOUNDED_BITS grid for both groups (as before)
    r0 = gq.quantiles(gv, 0.5, bounds=(0.0, 10.0), epsilon=Fraction(1), contribution=Contribution(),
                      rng=np.random.default_rng(1))
    assert r0.extra["step"].tolist() == [2.0**-10, 2.0**-10]
    with pytest.raises(ValueError, match="n_hat"):
        gq.quantiles(gv, 0.5, bounds=(0.0, 10.0), epsilon=Fraction(1), contribution=Contribution(),
                     rng=np.random.default_rng(1), n_hat=np.array([1.0]))


def test_aggregate_passes_the_released_count():
    """In aggregate, a bounded quantile's step follows the query's released count (also when the
    count comes after it in the query); without a count() it is the fixed 2^14 grid."""
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"g": np.repeat(["a", "b"], [50, 20000]), "v": rng.uniform(0, 10, 20050)})
    q = privagg.quantile("v", 0.5, bounds=(0.0, 10.0))
    for metrics in ([privagg.count(), q], [q, privagg.count()]):
        rel = privagg.aggregate(df, by="g", metrics=metrics, epsilon=2, domain=["a", "b"], rng=5)
        frame = rel.to_pandas()
        n_hat = frame["count"].to_numpy(float)
        bits = gq.grid_bits(n_hat, 1, 2, Fraction(1), Contribution())
        steps = [2.0 ** gq.dyadic_grid(0.0, 10.0, int(bt))[0] for bt in bits]
        width = (frame["q0.5_v_high"] - frame["q0.5_v_low"]).to_numpy(float)
        assert bits.tolist() == [11, 16]
        assert np.all(width <= 2 * np.array(steps) + 1e-15) and width[1] < width[0]
    rel = privagg.aggregate(df, by="g", metrics=[q], epsilon=1, domain=["a", "b"], rng=5).to_pandas()
    width = (rel["q0.5_v_high"] - rel["q0.5_v_low"]).to_numpy(float)
    assert np.all(width <= 2 * 2.0**-10) and np.all(width >= 2.0**-10)


# --------------------------------------------------------------------------- exact audit
def _dlap_pmf(scale: float, z: np.ndarray) -> np.ndarray:
    r = math.exp(-1.0 / scale)
    return (1 - r) / (1 + r) * r ** np.abs(z)


def _rnm(u: np.ndarray, scale: float) -> np.ndarray:
    """Exact P[k = first argmax of u + ν], ν i.i.d. DLap(scale) (truncated tail < 1e-30)."""
    span = int(80 * scale + 4 * (u.max() - u.min()) + 10)
    z = np.arange(-span, span + 1)
    pmf = _dlap_pmf(scale, z)
    cdf = np.cumsum(pmf)

    def cdf_at(v):
        return np.where(v < -span, 0.0, cdf[np.clip(v + span, 0, 2 * span)])

    out = np.zeros(u.size)
    for k in range(u.size):  # test-only loop over a handful of candidates
        p = pmf.copy()
        for j in range(u.size):
            if j != k:
                thr = u[k] + z - u[j]
                p = p * (cdf_at(thr - 1) if j < k else cdf_at(thr))
        out[k] = p.sum()
    return out


def _joint_law(rows: np.ndarray, eps_count: Fraction, eps_q: Fraction, n_lo: int, n_hi: int,
               oracle: bool = False) -> dict[tuple[int, float], float]:
    """P[(n̂, value)] of count-then-quantile on one group with bounds [0, 1]: n̂ = n + DLap(1/ε_c)
    for n̂ in [n_lo, n_hi] (the rest of the line is lumped per grid size, below), the quantile on
    the grid of grid_bits(n̂) (``oracle``: of grid_bits(n), the true count — the negative control)."""
    n = rows.size
    s_c = float(1 / eps_count)
    s_q = float(gq.stage_scales(1, 2, eps_q, Contribution(), bounded=True)[0])
    law: dict[tuple[int, float], float] = {}
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for v in range(n_lo, n_hi + 1):
        bits = int(gq.grid_bits(np.array([float(n if oracle else v)]), 1, 2, eps_q, Contribution())[0])
        if bits not in cache:
            e, m0, k = gq.dyadic_grid(0.0, 1.0, bits)
            cands = np.ldexp(m0 + np.arange(k, dtype=np.float64), e)
            srt = np.sort(rows)
            below = np.searchsorted(srt, cands, side="left")[None, :]
            cum = np.searchsorted(srt, cands, side="right")[None, :]
            cache[bits] = (cands, _rnm(gq._point_utility(below, cum, np.array([n]), 1, 2)[0], s_q))
        cands, p = cache[bits]
        pc = float(_dlap_pmf(s_c, np.array([v - n]))[0])
        for t, pt in zip(cands.tolist(), p.tolist(), strict=True):
            law[(v, t)] = law.get((v, t), 0.0) + pc * pt
    return law


def _max_loss(p1: dict, p2: dict) -> float:
    keys = set(p1) | set(p2)
    worst = 0.0
    for k in keys:
        a, b = p1.get(k, 0.0), p2.get(k, 0.0)
        if (a == 0.0) != (b == 0.0):
            return math.inf
        if a > 0:
            worst = max(worst, abs(math.log(a) - math.log(b)))
    return worst


def test_audit_count_then_grid_exact_with_negative_control(monkeypatch):
    """The grid rule made small (GRID_RHO = 2 at ε_q = 1/2: 2^bits >= n̂; bits in [1, 3]: 2, 3 or
    5 candidates on [0, 1]), so that the grid changes between n̂ = 4 and 5, exactly between D
    (4 rows) and D' (5 rows, an added row at 0.9: the utilities of candidates up to the median
    fall by 1, those above rise by 1 — not a uniform shift). The exact joint law of (n̂, value)
    over n̂ in [−40, 50] (every grid size occurs; the tails beyond carry < e^-18 of mass each
    way, where the loss is the count's own ≤ ε_c plus the quantile's on the 5-point grid) has
    loss ≤ ε_c + ε_q both ways (measured 0.9395 of 1: the count's 1/2 and most of the
    quantile's 1/2). Negative control: the grid from the TRUE count puts D's and D''s values on
    different grids — the step tells n (infinite loss)."""
    monkeypatch.setattr(gq, "GRID_RHO", 2)
    monkeypatch.setattr(gq, "GRID_BITS_MIN", 1)
    monkeypatch.setattr(gq, "GRID_BITS_MAX", 3)
    eps_c, eps_q = Fraction(1, 2), Fraction(1, 2)
    d = np.array([0.1, 0.3, 0.6, 0.8])
    d2 = np.concatenate([d, [0.9]])
    assert [int(gq.grid_bits(np.array([v]), 1, 2, eps_q, Contribution())[0]) for v in (2.0, 4.0, 5.0)] == [1, 2, 3]
    bound = float(eps_c + eps_q)
    p1, p2 = _joint_law(d, eps_c, eps_q, -40, 50), _joint_law(d2, eps_c, eps_q, -40, 50)
    assert abs(sum(p1.values()) - 1) < 1e-6 and abs(sum(p2.values()) - 1) < 1e-6
    loss = _max_loss(p1, p2)
    print(f"loss={loss:.9f} bound={bound}")
    assert float(eps_c) + 0.25 < loss <= bound * (1 + 1e-9), loss
    bad = _max_loss(_joint_law(d, eps_c, eps_q, -40, 50, oracle=True),
                    _joint_law(d2, eps_c, eps_q, -40, 50, oracle=True))
    assert bad == math.inf


# --------------------------------------------------------------------------- regression, accuracy
_HEAVY_BOUNDS = (-413.0, 577.0)  # the wide heavy-tailed range of docs/proofs/aggregate_quantile.md §6


def _large_group_errors(seed: int, epsilon: float, G: int = 20, n: int = 10_000) -> float:
    """count() + quantile(v, 0.5, bounds) through privagg.aggregate at ε = ``epsilon`` (half
    each), public domain, on G groups of 50 + 10·t(1.5) (IQR ≈ 17) with the fixed bounds
    [−413, 577]; the median over the groups of |err|/IQR. Group g is shifted by g/G of the 2^14
    grid's step (2^-4), so that the groups' medians sit at spread phases of that grid."""
    rng = np.random.default_rng(seed)
    lo, hi = _HEAVY_BOUNDS
    step14 = 2.0 ** gq.dyadic_grid(lo, hi, 14)[0]
    v = (50 + 10 * rng.standard_t(1.5, (G, n)) + (np.arange(G) / G * step14)[:, None]).ravel()
    iqr = float(np.subtract(*np.quantile(v, [0.75, 0.25])))
    df = pd.DataFrame({"g": np.repeat(np.arange(G), n), "v": v})
    true = df.groupby("g")["v"].median().to_numpy()
    rel = privagg.aggregate(df, by="g", metrics=[privagg.count(), privagg.quantile("v", 0.5, bounds=(lo, hi))],
                            epsilon=epsilon, domain=list(range(G)), rng=seed).to_pandas()
    return float(np.median(np.abs(rel["q0.5_v"].to_numpy() - true)) / iqr)


#: median |err|/IQR over 20 groups of 10^4 rows, ε_q = 1 (issue 13: 4× worse than the two-stage
#: plan on this wide heavy range, resolution-limited on the fixed 2^14 grid).
_LARGE_LIMIT = 0.0007


def test_large_groups_resolution_regression():
    """Seed 20250801 (printed). The fixed 2^14 grid of 261742a (step 2^-4 on [−413, 577] against
    an IQR of 17: rounding alone is about step/4 = 0.0009 IQR) gives 0.00103 here (fails); over
    seeds 0–29 its median is 0.000865 (min 0.000434: it passes at some seeds, not at this one).
    With the released count (2^16 points): 0.000256 here; over seeds 0–99 median 0.000253, worst
    0.000393 (no failure: false-failure rate < 1/100 per run). Negative control: ε = 2^-10 must
    fail (min 8.9 over seeds 0–9)."""
    seed = 20250801
    print(f"seed={seed}")
    err = _large_group_errors(seed, 2.0)
    assert err < _LARGE_LIMIT, (seed, err)
    bad = _large_group_errors(seed, 2.0**-10)
    assert bad > _LARGE_LIMIT, (seed, bad)


def test_small_groups_no_worse_with_count():
    """Wine scale (groups of 59, 71, 48 rows, normal with sd 20 % of the center, range about 5×
    a group's spread, ε_q = 1/4): with the released count (here the true count, a public input
    of quantiles) the grid is 2^10 (not 2^14); the median over 200 seeded releases of the median
    relative error over the 3 groups stays below 0.06 (seed 20250802 printed; over seeds 0–99:
    median 0.0269, worst 0.0360, no failure). Negative control: ε_q = 2^-12 must fail."""
    seed = 20250802
    print(f"seed={seed}")
    rng = np.random.default_rng(seed)
    sizes, centers = [59, 71, 48], np.array([1100.0, 500.0, 630.0])
    x = np.concatenate([rng.normal(c, 0.2 * c, s) for c, s in zip(centers, sizes, strict=True)])
    lo, hi = (float(t) for t in np.quantile(x, [0.001, 0.999]))
    gv = GroupedValues(np.repeat(np.arange(3), sizes), x, 3)
    true = np.array([np.quantile(x[gv.offsets[g]:gv.offsets[g + 1]], 0.5, method="inverted_cdf")
                     for g in range(3)])
    n_hat = np.array(sizes, dtype=np.float64)
    assert gq.grid_bits(n_hat, 1, 2, Fraction(1, 4), Contribution()).tolist() == [10, 10, 10]

    def error(eps_q: Fraction) -> float:
        per_run = [np.median(np.abs(gq.quantiles(gv, 0.5, bounds=(lo, hi), epsilon=eps_q,
                                                 contribution=Contribution(), rng=rng, n_hat=n_hat).value
                                    - true) / true) for _ in range(200)]
        return float(np.median(per_run))

    good = error(Fraction(1, 4))
    assert good < _SMALL_LIMIT, good
    assert error(Fraction(1, 2**12)) > _SMALL_LIMIT


_SMALL_LIMIT = 0.06
