"""Step 5b′ of the small-sample coordinate plan: a column of the annulus path at d = 1 spends its
sum's ε in two passes (privagg.mechanisms.mean_small.two_pass_sum, docs/proofs/mean.md §11).

Pass (a) releases the clipped sum around step 5a's center ``c`` (the atom) with radius ``R`` at
``ε_sum/10``; pass (b) the clipped sum around ``f' = clamp(c + S̃_1/n̂, c ± R)`` with radius
``R' = _grid_up(R + |f' − c|)`` (its range covers ``[c − R, c + R]``) at ``9·ε_sum/10``; the release
is ``f' + S̃_2/n̂``. Around the atom the count's noise (ε/20) entered the release times the offset
``|x̄ − c|``: binary50 (a 0/1 column, half ones, d = 1, n = 300–10⁴) was 2.20–2.49× the range oracle
over 200 runs of benchmarks/mean_atoms_small_n.py, 1.26–1.45× with the two passes
(docs/utility/mean.md, tenth stop).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

import privagg.mechanisms.mean as M
import privagg.mechanisms.mean_small as S
from privagg import private_mean
from privagg.mechanisms.mean import _grid_up
from privagg.noise.grid import grid_integers
from privagg.testing.audit import audit_samples

SEED = 20261206
CONF = 0.999


def test_second_pass_range_known_answers():
    """The second center is the first release clamped into [c − R, c + R]; the radius is
    _grid_up(R + |f' − c|): the range covers the first one, and R' <= _grid_up(2R)."""
    assert S.second_pass_range(0.5, 0.0, 1.0) == (0.5, _grid_up(1.5))
    assert S.second_pass_range(3.0, 0.0, 1.0) == (1.0, 2.0)
    assert S.second_pass_range(-7.0, 2.0, 1.0) == (1.0, 2.0)
    assert S.second_pass_range(2.0, 2.0, 1.0) == (2.0, 1.0)  # f = c: the first range itself
    g = np.random.default_rng(SEED)
    for _ in range(3000):
        c = float(g.normal() * 10.0 ** g.integers(-3, 4))
        r = _grid_up(float(abs(g.normal()) * 10.0 ** g.integers(-3, 4)) + 1e-9)
        f, r2 = S.second_pass_range(float(c + g.normal() * 2 * r), c, r)
        tol = 1e-12 * (abs(c) + r)
        assert c - r <= f <= c + r
        assert f - r2 <= c - r + tol and f + r2 >= c + r - tol, (c, r, f, r2)
        assert r <= r2 <= _grid_up(2.0 * r)


def _spy_sums(monkeypatch) -> list:
    calls = []
    orig = M._noisy_clipped_release

    def spy(x, center, big_r, part, plan, gen):
        rel = orig(x, center, big_r, part, plan, gen)
        calls.append((float(center[0]), float(big_r), part, rel))
        return rel

    monkeypatch.setattr(M, "_noisy_clipped_release", spy)
    return calls


def test_two_passes_as_called(monkeypatch):
    """coordinate_mean on a 0/1 column (d = 1, n = n̂ = 400, ε = 20: the atom 0 or 1 is released):
    two sums, the first around the atom with step 5a's radius at ε_sum/10, the second around
    second_pass_range(c + S̃_1/n̂, c, R) at 9·ε_sum/10 (ε_1 + ε_2 = ε_sum exactly); the release is
    f' + S̃_2/n̂ with center f', radius R', and _grid_up(clip_scale) = R'. Deterministic."""
    calls = _spy_sums(monkeypatch)
    x = (np.random.default_rng(SEED).random(400) < 0.5).astype(np.float64)
    eps, dlt = Fraction(20), Fraction(1, 10**6)
    out = S.coordinate_mean(x[:, None], 400, eps, np.random.default_rng(7), dlt, may_switch=False)
    b = S.coordinate_budget(eps, dlt, 1, S.low_sample(400, eps, 1))
    assert out is not None and len(calls) == 2
    (c1, r1, e1, rel1), (c2, r2, e2, rel2) = calls
    assert e1 == b.eps_sum / 10 and e2 == 9 * b.eps_sum / 10 and e1 + e2 == b.eps_sum
    assert c1 in (0.0, 1.0) and r1 >= 1.0  # the atom; the range covers the other one
    first = float(M._finite(c1 + rel1.values[0] / 400))
    assert (c2, r2) == S.second_pass_range(first, c1, r1)
    assert out["center"][0] == c2 and out["radii"][0] == r2
    assert out["mean"][0] == float(M._finite(c2 + rel2.values[0] / 400))
    assert _grid_up(float(out["clip_scale"][0])) == r2


def test_one_pass_at_two_columns(monkeypatch):
    """At d = 2 (TWO_PASS_DMAX = 1) each column of the annulus path keeps one sum at ε_sum."""
    calls = _spy_sums(monkeypatch)
    g = np.random.default_rng(SEED)
    x = (g.random((400, 2)) < 0.5).astype(np.float64)
    eps, dlt = Fraction(20), Fraction(1, 10**6)
    out = S.coordinate_mean(x, 400, eps, np.random.default_rng(7), dlt, may_switch=False)
    b = S.coordinate_budget(eps, dlt, 2, S.low_sample(400, eps, 2))
    assert out is not None and len(calls) == 2 and all(c[2] == b.eps_sum for c in calls)
    assert np.array_equal(out["center"], [c[0] for c in calls])


# ------------------------------------------------------------------ audit of the two passes
# Worst-case pair for the second pass: D = five rows at 1 around the public atom c = 0 with R = 1
# (the first release lands near 1, so R' = 2 and the second range is [−1, 3]); D' adds a row at
# −1, two radii from the second center: each pass's sum moves by its full radius. ε_sum = 2 so the
# outputs' probabilities are far apart; n̂ = 5 public.
AUD_D = np.ones((5, 1))
AUD_Z = -1.0
AUD_EPS = Fraction(2)
AUD_TRIALS = 20_000


def _two_pass_outputs(x: np.ndarray, seed: int, second_factor: int = 1) -> np.ndarray:
    """The release of two_pass_sum (center 0, radius 1, n̂ = 5, ε_sum = 2) over AUD_TRIALS runs,
    binned to the public grid 1/8 (post-processing: any event of the binned output is one of the
    release; the auditor's events need repeated values); ``second_factor`` 2: the negative control,
    the second pass's ε doubled (its noise for half the sensitivity)."""
    g = np.random.default_rng(seed)
    out = np.empty(AUD_TRIALS)
    orig = M._noisy_clipped_release
    state = {"k": 0}

    def doubled(xx, center, big_r, part, plan, gen):
        state["k"] += 1
        return orig(xx, center, big_r, part * (second_factor if state["k"] % 2 == 0 else 1), plan, gen)

    M._noisy_clipped_release = doubled
    try:
        for t in range(AUD_TRIALS):
            out[t] = S.two_pass_sum(x, 0.0, 1.0, 5, AUD_EPS, g)[0]
    finally:
        M._noisy_clipped_release = orig
    return np.floor(out * 8.0)


def test_two_pass_audit_within_epsilon():
    """The two passes as run (production two_pass_sum and _noisy_clipped_release) on the
    worst-case pair: no violation of ε_sum = 2 (false-failure rate 10⁻³ at confidence 0.999)."""
    s0, s1 = np.random.SeedSequence(SEED).spawn(2)
    a = _two_pass_outputs(AUD_D, s0)
    b = _two_pass_outputs(np.vstack([AUD_D, [[AUD_Z]]]), s1)
    res = audit_samples(a, b, confidence=CONF)
    print(f"seed={SEED} {res}")
    assert not res.violates(float(AUD_EPS)), (res, f"seed={SEED}")
    assert res.epsilon_lower >= 0.3, (res, f"seed={SEED}")  # power: 0.56–1.45 over 11 seeds


def test_two_pass_audit_negative_control_second_pass_doubled():
    """Negative control: the second pass at 2·ε_2 (loss up to ε_1 + 2·ε_2 = 3.8 on this pair) must
    be flagged as violating ε_sum = 2."""
    s0, s1 = np.random.SeedSequence(SEED).spawn(2)
    a = _two_pass_outputs(AUD_D, s0, 2)
    b = _two_pass_outputs(np.vstack([AUD_D, [[AUD_Z]]]), s1, 2)
    res = audit_samples(a, b, confidence=CONF)
    print(f"seed={SEED} {res}")
    assert res.violates(float(AUD_EPS)), (res, f"seed={SEED}")


# ------------------------------------------------------------------ utility, able to fail
def _median_ratio(kind: str, n: int, runs: int, seed: int) -> float:
    """Median |error| of ``runs`` releases (d = 1, ε = 1, δ = 1e-6) over the range oracle's
    median |error| 0.6745·(max − min)/n·√(2 ln(1.25/δ))."""
    g = np.random.default_rng(seed)
    assert kind == "binary50"
    x = (g.random((n, 1)) < 0.5).astype(np.float64)
    sig = float(x.max() - x.min()) / n * math.sqrt(2 * math.log(1.25 / 1e-6))
    errs = []
    for r in range(runs):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=np.random.default_rng([seed, r]))
        assert rel.clip_rule == "coordinate"
        errs.append(abs(rel.mean[0] - x.mean()) if rel.ok else np.inf)
    return float(np.median(errs)) / (0.6745 * sig)


def test_binary50_within_oracle_target(monkeypatch):
    """binary50 of docs/utility/mean_real.md (0/1, p = 0.5, n = 1000, d = 1, ε = 1): the median
    |error| of 120 releases is at most 1.8× the range oracle's (issue 11's target is 1.5 for the
    benchmark's median over runs; 1.8 leaves room for the seed). Negative control: one pass around
    the atom (TWO_PASS_DMAX = 0), which must exceed 1.8. Measured at 60 releases over data seeds
    0–19: 0.85–1.77 (mean 1.24) with two passes, 1.55–2.96 (mean 2.46) with one; at 120 releases the
    spread is about 1/√2 of that, so each side misses with probability below 0.5 % (normal
    approximation). Seed and both ratios printed."""
    seed = BINARY_SEED
    ratio = _median_ratio("binary50", 1000, 120, seed)
    print(f"seed={seed}: binary50 median |error| / oracle = {ratio:.2f}")
    assert ratio <= 1.8, (ratio, f"seed={seed}")
    monkeypatch.setattr(S, "TWO_PASS_DMAX", 0)
    old = _median_ratio("binary50", 1000, 120, seed)
    print(f"control (one pass): {old:.2f}")
    assert old > 1.8, (old, f"seed={seed}")


def test_rating_column_covered_range(monkeypatch):
    """A rating column (1 … 5, 55 % threes, n = 10⁴, d = 1, ε = 1): at most 4 of 48 releases err
    by more than 4× the range oracle's median |error| (the second range covers the first: no extreme
    atom is clipped). Negative control: the second pass with radius R around f' (the first range
    shifted by the offset, which clips the 1s or the 5s when R is tight), at least 5 of 48. Measured
    over data seeds 0–11: 0–2 of 48 with the covering radius, 10–22 of 48 with the shifted one
    (binomial tails at the pooled rates, 5 and 183 of 576: 6·10⁻⁵ and 1.2·10⁻⁴; at the extreme
    seeds' rates, 2 and 10 of 48, up to 0.05 and 0.017). Seed printed."""
    seed = RATING_SEED
    far = _far_releases(seed)
    print(f"seed={seed}: rating releases beyond 4× the oracle: {far} of 48")
    assert far <= 4, (far, f"seed={seed}")
    orig = S.second_pass_range
    monkeypatch.setattr(S, "second_pass_range", lambda f, c, r: (orig(f, c, r)[0], r))
    old = _far_releases(seed)
    print(f"control (radius R around f'): {old} of 48")
    assert old >= 5, (old, f"seed={seed}")


def _far_releases(seed: int, n: int = 10_000, runs: int = 48) -> int:
    g = np.random.default_rng(seed)
    x = g.choice([1.0, 2.0, 3.0, 4.0, 5.0], size=(n, 1), p=[0.05, 0.1, 0.55, 0.2, 0.1])
    sig = 4.0 / n * math.sqrt(2 * math.log(1.25 / 1e-6))
    far = 0
    for r in range(runs):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=np.random.default_rng([seed, r]))
        assert rel.clip_rule == "coordinate" and rel.ok
        far += abs(rel.mean[0] - x.mean()) > 4 * 0.6745 * sig
    return far


# ------------------------------------------------------------------ intervals of the two-pass release
COVER_BETA = 0.2


def _exact_misses(x: np.ndarray, rel, shrink: float = 1.0) -> float:
    """The exact probability over the second pass's noise (discrete Laplace of scale t in grid
    units, every integer within ±45t: the rest has mass < e⁻⁴⁵) that the release's own interval
    (``confidence_intervals`` on every possible release at once), shrunk by ``shrink``, misses
    θ = f' + mean(clip(x − f', ±R')), given this run's n̂, first pass, center f' and radius R'."""
    kind, param, step, *_ = rel.noise
    assert kind == "laplace-coordinate"
    t, h = float(param[0]), float(step[0])
    r2 = _grid_up(float(rel.clip_radius * rel.scales[0]))
    g = grid_integers(M._clipped_sum(x, rel.center, r2), exponent=int(round(math.log2(h))))[0]
    k = np.arange(-math.ceil(45 * t), math.ceil(45 * t) + 1, dtype=np.float64)
    w = np.exp(-np.abs(k) / t)
    w /= w.sum()
    means = M._finite(rel.center[0] + h * (g + k) / rel.n_hat)[:, None]
    low, high = dataclasses.replace(rel, mean=means).confidence_intervals(COVER_BETA)
    half = (high - means)[:, 0] * shrink
    theta = rel.center[0] + float(np.mean(np.clip(x[:, 0] - rel.center[0], -r2, r2)))
    return float(w @ (np.abs(means[:, 0] - theta) > half))


def test_two_pass_intervals_cover_the_clipped_mean():
    """The release's intervals (β = 0.2) on a 0/1 column with half ones (d = 1, n = 1000, ε = 1,
    30 releases, every one two passes): given a count within k_c, the exact probability that the
    interval misses the second pass's clipped mean is at most 0.9β in every run (deterministic
    given the runs: false-failure rate 0). Negative control: the intervals ×0.5 miss with
    probability above β on average over the runs (×0.8 is not enough here: where the first pass
    left an offset, the count's term of the interval is a third of its width). Seed printed."""
    x = (np.random.default_rng(SEED).random((1000, 1)) < 0.5).astype(np.float64)
    worst, shrunk, inside = 0.0, [], 0
    for s in range(30):
        rel = private_mean(x, epsilon=1.0, delta=1e-6, rng=SEED + s)
        assert rel.ok and rel.clip_rule == "coordinate"
        if abs(rel.n_hat - x.shape[0]) > M._dlap_two_sided(rel.noise[3], 0.1 * COVER_BETA):
            continue
        inside += 1
        worst = max(worst, _exact_misses(x, rel))
        shrunk.append(_exact_misses(x, rel, 0.5))
    print(f"seed={SEED}: {inside} runs with the count inside; worst miss {worst:.4f} (limit "
          f"{0.9 * COVER_BETA}); ×0.5: mean miss {np.mean(shrunk):.4f}, least {min(shrunk):.4f}")
    assert inside >= 20 and worst <= 0.9 * COVER_BETA, (inside, worst)
    assert np.mean(shrunk) > COVER_BETA, shrunk


BINARY_SEED = 7
RATING_SEED = 7
