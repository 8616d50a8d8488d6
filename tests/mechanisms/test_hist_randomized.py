"""threshold="randomized": the tight T, and a noisy count of T − 1 kept with probability b.

Proof: docs/proofs/histograms.md §2.5. Known answers against an independent mpmath transcription;
statistical checks with fixed printed seeds at level α = 1e-6 each (6 checks: this file fails
spuriously with probability < 1e-5), each with a negative control that must be rejected
(the coin ignored, b + 0.3, ℓ0 understated by one, the tight rule's rate).
"""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

import privagg
from privagg.cli.main import cli
from privagg.engines import duckdb as dd
from privagg.engines.base import Bounding, draw_secret
from privagg.engines.duckdb_bounding import DuckDBEngine
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.noise.distributions import DiscreteLaplace
from privagg.testing import wilson_interval
from privagg.testing.fixtures import new_key_hits

ALPHA = 1e-6


def _sf(t: Fraction, k: int) -> mpmath.mpf:
    """P[Z ≥ k], Z ~ DL(t), any integer k (an independent transcription of (F2))."""
    q = mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)
    return q**k / (1 + q) if k >= 1 else 1 - q ** (1 - k) / (1 + q)


CASES = [  # (ε, δ, neighbours, share, bounds, T, b)  b = None: only checked against mpmath
    (1.0, 1e-6, "add_remove", 0, None, 15, Fraction(403066857, 2**30)),
    (1.0, 1e-6, "replace", None, None, 28, None),
    (1.0, 1e-6, "add_remove", None, None, 16, None),
    (1.0, 1e-6, "add_remove", 0, (3, 2), 88, None),
    (1.0, 1e-6, "add_remove", 0, (16, 1), 256, None),
    (0.3, 1e-9, "add_remove", 0, (4, 3), None, None),
    (5.0, 0.3, "add_remove", 0, None, None, None),  # large δ: T small
]


@pytest.mark.parametrize(("eps", "delta", "neighbors", "share", "bounds", "t_expected", "b_expected"), CASES)
def test_boundary_probability_known_answers(eps, delta, neighbors, share, bounds, t_expected, b_expected):
    p = H.StableHistogramParams.build(eps, delta, neighbors, "randomized", total_epsilon_share=share, bounds=bounds)
    tight = H.StableHistogramParams.build(eps, delta, neighbors, "tight", total_epsilon_share=share, bounds=bounds)
    assert p.threshold == tight.threshold and p.scale == tight.scale  # same T, same noise
    assert t_expected is None or p.threshold == t_expected
    assert b_expected is None or p.boundary_probability == b_expected
    b = p.boundary_probability
    assert 0 <= b < 1 and (b * 2**32).denominator == 1
    l0, linf = bounds or (1, 1)
    k = p.threshold - linf
    with mpmath.workdps(60):
        d1 = 1 - (1 - mpmath.mpf(delta)) ** (mpmath.mpf(1) / l0)
        lo, hi = _sf(p.scale, k), _sf(p.scale, k - 1)

        def rate(x: Fraction) -> mpmath.mpf:
            return (1 - mpmath.mpf(x.numerator) / x.denominator) * lo + mpmath.mpf(x.numerator) / x.denominator * hi

        assert rate(b) <= d1 < hi  # valid, and T − 1 alone would not be
        if p.threshold > 1:
            assert rate(b + Fraction(1, 2**32)) > d1  # the largest such multiple of 2^-32
        assert float(rate(b)) == pytest.approx(p.release_probability, rel=1e-9)
    assert p.public_parameters()["boundary_probability"] == str(b)
    assert tight.boundary_probability is None and "boundary_probability" not in tight.public_parameters()


def test_no_boundary_at_T_equal_one():
    p = H.StableHistogramParams.build(0.1, 0.9, "add_remove", "randomized", total_epsilon_share=0)
    assert p.threshold == 1 and p.boundary_probability == 0  # no noisy count ≤ 0 is ever released


def test_gaussian_refuses_randomized():
    with pytest.raises(ParameterError, match="threshold"):
        H.StableHistogramParams.build(1.0, 1e-6, "add_remove", "randomized", bounds=(4, 1), noise="gaussian")


@pytest.mark.parametrize("rule", ["randomized", "tight"])
def test_boundary_value_kept_at_rate_b(monkeypatch, rule):
    # noise replaced by zeros: counts T always kept, T − 2 never, T − 1 at rate b (0 for "tight":
    # the negative control, a coin that is ignored or never drawn)
    seed = 4242
    print("seed", seed)
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))
    p = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", rule, total_epsilon_share=0)
    t, m = p.threshold, 50_000
    counts = np.r_[np.full(m, t), np.full(m, t - 1), np.full(m, t - 2), np.zeros(m, dtype=np.int64)]
    noisy, keep = H.stable_noise_threshold(p, counts, np.random.default_rng(seed))
    assert keep[:m].all() and not keep[2 * m:].any()
    hits = int(keep[m:2 * m].sum())
    b = float(p.boundary_probability or 0)
    if rule == "tight":
        assert hits == 0
    else:
        assert stats.binomtest(hits, m, b).pvalue > ALPHA
        assert stats.binomtest(hits, m, 0.0001).pvalue < ALPHA  # control: "kept iff ≥ T" is rejected


def _count_one_rate(params: H.StableHistogramParams, seed: int, m: int) -> tuple[float, float]:
    counts = np.ones(m, dtype=np.int64)
    _, keep = H.stable_noise_threshold(params, counts, np.random.default_rng(seed))
    return wilson_interval(int(keep.sum()), m, ALPHA)


def test_release_rate_of_count_one_keys_spends_delta():
    # 200,000 independent count-1 keys (record level, add/remove, share 0): the rate is p_b = δ up to
    # 2^-32, two-sided; the tight rule's rate is below the interval; b + 0.3 is flagged above δ
    seed = 20261202
    print("seed", seed)
    eps, delta, m = 1.0, 0.02, 200_000
    p = H.StableHistogramParams.build(eps, delta, "add_remove", "randomized", total_epsilon_share=0)
    lo, hi = _count_one_rate(p, seed, m)
    assert lo <= delta <= hi
    tight = H.StableHistogramParams.build(eps, delta, "add_remove", "tight", total_epsilon_share=0)
    assert tight.release_probability < lo  # the boundary releases more, measurably
    worse = dataclasses.replace(p, boundary_probability=min(Fraction(1), p.boundary_probability + Fraction(3, 10)))
    lo_w, _ = _count_one_rate(worse, seed + 1, m)
    assert lo_w > delta  # negative control


@pytest.mark.parametrize(("declared_l0", "violates"), [(2, False), (1, True)])
def test_new_keys_of_one_unit_at_user_level(declared_l0, violates):
    # units that each create ℓ0 = 2 new keys with ℓ∞ = 2 rows: "one of its keys is released" has
    # probability 1 − (1 − p_b)² = δ; declaring ℓ0 = 1 (understated by one) must exceed δ
    seed = 778
    print("seed", seed, "declared ℓ0", declared_l0)
    eps, delta, l0, linf, m = 5.0, 0.01, 2, 2, 40_000
    params = H.StableHistogramParams.build(eps, delta, "add_remove", "randomized", bounds=(declared_l0, linf))
    hits = new_key_hits(params, m, l0, linf, seed)
    lo, hi = wilson_interval(hits, m, ALPHA)
    if violates:
        assert lo > delta
    else:
        assert lo <= delta <= hi
        assert params.appearance_probability <= delta * (1 + 1e-9)


def test_numpy_and_duckdb_identical(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    u = rng.integers(0, 3000, 20_000)
    k = rng.zipf(1.4, 20_000) % 400
    pq.write_table(pa.table({"u": u, "k": k}), tmp_path / "t.parquet")
    kw = dict(epsilon=1.0, delta=1e-6, max_keys_per_unit=2, max_rows_per_key=1, threshold="randomized")
    r1 = privagg.stable_histogram(k, units=u, rng=42, **kw)
    gen = np.random.default_rng(42)
    engine = DuckDBEngine(dd.describe_column(tmp_path / "t.parquet", "k"), dd.describe_column(tmp_path / "t.parquet", "u"))
    bc = engine.bounded_counts(Bounding(2, 1, draw_secret(gen)))
    r2 = H.stable_histogram_from_counts(bc.key_counts, rng=gen, unit="u", **kw)
    assert r1.keys.tolist() == r2.keys.tolist() and r1.counts.tolist() == r2.counts.tolist()
    assert r1.counts.min() >= r1.threshold - 1 and r1.params.threshold_rule == "randomized"


def test_cli_randomized_json(tmp_path):
    rng = np.random.default_rng(8)
    f = tmp_path / "t.csv"
    f.write_text("k\n" + "".join(f"{x}\n" for x in rng.zipf(1.5, 5000) % 300))
    runner = CliRunner()
    res = runner.invoke(cli, ["histogram", str(f), "--column", "k", "--epsilon", "1", "--delta", "1e-6",
                              "--threshold", "randomized", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    p = H.StableHistogramParams.build(1.0, 1e-6, "replace", "randomized")
    assert out["threshold"] == 28 and out["boundary_probability"] == str(p.boundary_probability)
    assert min(out["counts"]) >= 27
    res = runner.invoke(cli, ["histogram", str(f), "--column", "k", "--epsilon", "1", "--delta", "1e-6"])
    assert res.exit_code == 0 and "randomized" not in res.output
    res = runner.invoke(cli, ["histogram", str(f), "--column", "k", "--epsilon", "1", "--delta", "1e-6",
                              "--threshold", "randomized"])
    assert res.exit_code == 0 and "with probability 0.265" in res.output
    tight = json.loads(runner.invoke(cli, ["histogram", str(f), "--column", "k", "--epsilon", "1", "--delta",
                                           "1e-6", "--json"]).output)
    assert tight["boundary_probability"] is None


def test_dl_boundary_probability_edges():
    d = DiscreteLaplace(Fraction(1))
    k = d.upper_quantile(1e-6)
    assert d.boundary_probability(k + 3, 1e-6) == 1  # already below δ one step lower
    assert d.boundary_probability(k - 1, 1e-6) == 0  # the tail alone exceeds δ
    assert 0 < d.boundary_probability(k, 1e-6) < 1


@pytest.mark.parametrize(("delta", "bounds"), [(0.5, None), (0.75, (2, 1)), (0.875, (3, 2))])
def test_delta_one_half_per_key(delta, bounds):
    # δ₁ = 1/2: the one case where the mix equals δ₁ exactly (k = 1, b = 1/2); it must not crash
    neighbors = "replace" if bounds is None else "add_remove"
    p = H.StableHistogramParams.build(1.0, delta, neighbors, "randomized", bounds=bounds)
    assert p.boundary_probability == Fraction(1, 2) and p.threshold - (bounds or (1, 1))[1] == 1
    assert p.appearance_probability <= delta * (1 + 1e-9)


def test_wrong_guess_still_gives_the_answer(monkeypatch):
    from privagg.noise import distributions as D

    t, beta = Fraction(1), Fraction(1, 10**6)
    right = D._dl_boundary_probability(t, 14, beta, 32)
    for guess in (0, 2**32 - 1, right.numerator * (2**32 // right.denominator) + 12345):
        D._dl_boundary_probability.cache_clear()
        monkeypatch.setattr(D, "_dl_boundary_guess", lambda *a, g=guess: g)
        assert D._dl_boundary_probability(t, 14, beta, 32) == right
    D._dl_boundary_probability.cache_clear()


def test_coins_drawn_for_every_key_whatever_the_counts():
    # the generator's state after the step depends on the batch size only (the number of coins
    # must not depend on how many noisy counts land on T − 1); mutant "coins only at T − 1" in
    # tools/mutants.py is the negative control
    p = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", "randomized", total_epsilon_share=0)
    states = []
    for counts in (np.full(5000, p.threshold - 1), np.full(5000, 10**6), np.arange(5000)):
        gen = np.random.default_rng(99)
        H.stable_noise_threshold(p, counts, gen)
        states.append(gen.bit_generator.state["state"]["state"])
    assert states[0] == states[1] == states[2]


def test_zero_count_keys_never_kept_at_T_minus_1(monkeypatch):
    p = H.StableHistogramParams.build(1.0, 1e-6, "add_remove", "randomized", total_epsilon_share=0)
    t = p.threshold
    # noise puts count-0 keys exactly on T − 1 and T; the coin is forced to 1
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.r_[np.full(size // 2, t - 1),
                                                                               np.full(size - size // 2, t)])
    monkeypatch.setattr(H, "bernoulli_fraction", lambda b, size, rng: np.ones(size, dtype=bool))
    noisy, keep = H.stable_noise_threshold(p, np.zeros(1000, dtype=np.int64), np.random.default_rng(0))
    assert not keep.any()
    noisy, keep = H.stable_noise_threshold(p, np.ones(1000, dtype=np.int64), np.random.default_rng(0))
    assert keep.all()  # control: the same noise on count-1 keys keeps them (the coin path is live)


def test_randomized_refused_with_a_selection():
    k = np.arange(100) % 7
    with pytest.raises(ParameterError, match="threshold"):
        privagg.stable_histogram(k, units=np.arange(100), epsilon=1.0, delta=1e-6, selection="optimal",
                                 threshold="randomized")
