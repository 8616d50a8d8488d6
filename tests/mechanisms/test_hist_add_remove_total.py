"""The stable histogram under add/remove: a separately released noisy total (issue 10, item 9).

Under add/remove n is private. The release spends ε_n = share·ε (default share 0.1) on a noisy
total n̂ = n + Z_n, Z_n ~ DL(1/ε_n), and ε_c = ε − ε_n on the counts and the threshold; the
frequencies are counts / n̂ and the bounds account for both noises (docs/proofs/histograms.md
§2.4, §4.4, §4.5). Before, the frequencies were shares among the *released* keys (biased
upwards by the suppressed mass), every interval was [0, 1] and ``error_bound`` was 1.0.

Known-answer checks are exact (mpmath, 50 digits). Statistical checks draw from fixed, printed
seeds; each is a Wilson interval or a chi-square test at level α = 1e-6, or an audit at
confidence 1 − 1e-6 (a correct mechanism is flagged with probability ≤ 1e-6), or one release
checked against its own bound at β = 1e-6. There are 12 such checks, so this file fails
spuriously with probability < 2e-5. Every statistical harness is also run on a deliberately
broken variant (total with half its scale; bound × 0.8; intervals × 0.8 and × 1.25; a bound
that ignores the total's noise; counts and total each at the full ε) and must reject it.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli
from privagg.engines.counting import KeyCounts
from privagg.errors import ParameterError
from privagg.mechanisms import histogram as H
from privagg.mechanisms.histogram import StableHistogramParams, stable_histogram, stable_histogram_from_counts
from privagg.noise.samplers import discrete_laplace
from privagg.testing import chisquare_gof, discrete_laplace_pmf, wilson_interval, wilson_lower, wilson_upper
from privagg.testing.audit import audit_samples

ALPHA = 1e-6
mpmath.mp.dps = 50


# ------------------------------------------------------------- independent exact computations


def _q(t: Fraction) -> mpmath.mpf:
    return mpmath.exp(-mpmath.mpf(t.denominator) / t.numerator)


def tight_T(t: Fraction, delta: float) -> int:
    """Smallest integer T ≥ 1 with P[Z ≥ T − 1] ≤ δ, from P[Z ≥ k] = q^k/(1+q) (k ≥ 1)."""
    q, d = _q(t), mpmath.mpf(delta)
    k = 1
    while q**k / (1 + q) > d:
        k += 1
    return k + 1  # every δ used here is < q/(1+q), so T − 1 ≥ 1


def seed_T(t: Fraction, delta: float) -> int:
    return int(mpmath.ceil(1 + mpmath.mpf(t.numerator) / t.denominator * mpmath.log(2 / mpmath.mpf(delta))))


def abs_tail(t: Fraction, k: int) -> mpmath.mpf:
    q = _q(t)
    return 2 * q ** (k + 1) / (1 + q)


def abs_q(t: Fraction, beta: float) -> int:
    """Smallest k ≥ 0 with P[|Z| > k] ≤ β."""
    k = 0
    while abs_tail(t, k) > beta:
        k += 1
    return k


def all_within(t: Fraction, m: int, beta: float) -> int:
    """Smallest k with P[max of m iid |Z| > k] = 1 − (1 − P[|Z| > k])^m ≤ β."""
    k = 0
    while 1 - (1 - abs_tail(t, k)) ** m > beta:
        k += 1
    return k


def expected_error_bound(r, beta: float) -> float:
    """docs/proofs/histograms.md §4.4, written out independently of the code."""
    p = r.params
    s = abs_q(p.total_scale, beta / 2)
    nh = r.noisy_total
    if nh <= s:
        return math.inf
    k = all_within(p.scale, max(1, nh + s), beta / 2)
    top = int(r.counts.max()) if r.counts.size else 0
    f_up = min(Fraction(1), Fraction(top + k, nh - s))
    released = (k + s * f_up) / nh
    suppressed = Fraction(p.threshold - 1 + k, nh - s)
    return float(max(released, suppressed))


def zipf_counts(n_target: int = 123_000, m: int = 2700) -> np.ndarray:
    """Zipf(1) counts over m keys: the top key has frequency ≈ 0.118, ≈ 13 % of the mass is in
    keys below the threshold (the case of the issue: shares among released keys are ≈ 15 % high)."""
    w = 1.0 / np.arange(1, m + 1)
    return np.floor(n_target * w / w.sum()).astype(np.int64)


def fake_noise(total: int = 0, counts: int = 0):
    """A stand-in for H.discrete_laplace: constant noise, ``total`` on the total's draw (size 1,
    scale 10 at ε = 1), ``counts`` on the counts."""

    def draw(scale, size, rng):
        value = total if Fraction(scale) == 10 else counts
        return np.full(size, value, dtype=np.int64)

    return draw


# ----------------------------------------------------------------- known answers: the split


@pytest.mark.parametrize(
    ("epsilon", "share", "eps_c", "eps_n"),
    [
        (1.0, None, Fraction(9, 10), Fraction(1, 10)),
        (1.0, 0.1, Fraction(9, 10), Fraction(1, 10)),
        (0.5, 0.25, Fraction(3, 8), Fraction(1, 8)),
        (Fraction(1, 3), None, Fraction(3, 10), Fraction(1, 30)),
        (2.0, 0.5, Fraction(1), Fraction(1)),
    ],
)
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_split_and_threshold_at_the_counts_epsilon(epsilon, share, eps_c, eps_n, delta) -> None:
    """t_c = 1/ε_c, t_n = 1/ε_n, ε_c + ε_n = ε charged, T computed for t_c (tight and seed)."""
    p = StableHistogramParams.build(epsilon, delta, "add_remove", total_epsilon_share=share)
    assert p.scale == 1 / eps_c and p.total_scale == 1 / eps_n
    assert p.counts_epsilon == eps_c and p.total_epsilon == eps_n
    assert p.epsilon_exact == eps_c + eps_n == p.privacy_loss.epsilon
    assert p.privacy_loss.delta >= Fraction(delta)
    assert p.threshold == tight_T(1 / eps_c, delta)
    assert H.stable_threshold(epsilon, delta, "add_remove", total_epsilon_share=share) == p.threshold
    seed = StableHistogramParams.build(epsilon, delta, "add_remove", "seed", total_epsilon_share=share)
    assert seed.threshold == seed_T(1 / eps_c, delta)


def test_known_thresholds_at_eps1_delta1e6() -> None:
    """ε = 1, δ = 1e-6: t_c = 10/9 gives T = 16 (tight) and 18 (seed); 15 was T at t = 1."""
    assert H.stable_threshold(1.0, 1e-6, "add_remove") == 16
    assert H.stable_threshold(1.0, 1e-6, "add_remove", "seed") == 18
    assert tight_T(Fraction(10, 9), 1e-6) == 16 and tight_T(Fraction(1), 1e-6) == 15
    assert H.stable_threshold(1.0, 1e-6, "replace") == 28  # replace-one: unchanged, nothing split


def test_ledger_is_charged_once_with_the_whole_epsilon(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "b.ledger", epsilon=3, delta=1e-5) as ledger:
        stable_histogram(["a"] * 50, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=1, ledger=ledger)
        (charge,) = ledger.charges()
    assert charge.loss.epsilon == 1 and charge.loss.delta >= Fraction(1e-6)
    assert charge.parameters["total_epsilon_share"] == 0.1
    assert charge.parameters["total_scale"] == "10" and charge.parameters["scale"] == "10/9"


@pytest.mark.parametrize("share", [1, 1.5, -0.1, float("nan"), "0.1", True])
def test_bad_share_is_refused_before_the_ledger_is_charged(tmp_path: Path, share) -> None:
    with Ledger.create(tmp_path / "b.ledger", epsilon=3, delta=1e-5) as ledger:
        with pytest.raises(ParameterError, match="total_epsilon_share"):
            stable_histogram(
                ["a"] * 50, epsilon=1.0, delta=1e-6, neighbors="add_remove", total_epsilon_share=share,
                rng=1, ledger=ledger,
            )
        assert ledger.charges() == []


def test_share_under_replace_is_an_error_and_nothing_is_split() -> None:
    with pytest.raises(ParameterError, match="total_epsilon_share.*replace"):
        stable_histogram(["a"] * 50, epsilon=1.0, delta=1e-6, total_epsilon_share=0.1, rng=1)
    r = stable_histogram(["a"] * 50, epsilon=1.0, delta=1e-6, rng=1)
    assert r.noisy_total is None and r.params.total_scale is None and r.params.scale == 2


# ------------------------------------------------------- known answers: frequencies and bounds


@pytest.mark.parametrize("beta", [0.01, 0.05, 0.3])
def test_frequencies_divide_by_the_noisy_total_and_bounds_match_the_proof(beta: float) -> None:
    counts = zipf_counts(20_000, 500)
    kc = KeyCounts(keys=np.arange(counts.size), counts=counts, n=int(counts.sum()) + 37)  # 37 missing keys
    r = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=11)
    assert r.n is None and isinstance(r.noisy_total, int)
    np.testing.assert_array_equal(r.frequencies, r.counts / r.noisy_total)
    assert r.error_bound(beta) == pytest.approx(expected_error_bound(r, beta), rel=1e-12)
    assert 0 < r.error_bound(beta) < 0.01
    p = r.params
    s = abs_q(p.total_scale, beta / 2)
    k = all_within(p.scale, r.noisy_total + s, beta / 2)
    assert r.count_error_bound(beta) == p.threshold - 1 + k
    assert r.count_error_bound(beta, max_keys=1000) == p.threshold - 1 + all_within(p.scale, 1000, beta)
    a = abs_q(p.scale, beta / 2)
    low, high = r.confidence_intervals(beta)
    c = r.counts.astype(float)
    np.testing.assert_allclose(low, np.clip((c - a) / (r.noisy_total + s), 0, 1), rtol=1e-15)
    np.testing.assert_allclose(high, np.clip((c + a) / (r.noisy_total - s), 0, 1), rtol=1e-15)
    assert (low < r.frequencies).all() and (r.frequencies < high).all()
    lc, hc = r.confidence_intervals(beta, unit="count")
    np.testing.assert_array_equal(lc, np.clip(c - abs_q(p.scale, beta), 0, None))


def test_noise_free_frequencies_are_the_true_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """With zero noise n̂ = n (missing keys included) and frequency = F/n for every released key."""
    monkeypatch.setattr(H, "discrete_laplace", fake_noise())
    counts = zipf_counts()
    data = np.concatenate([np.repeat(np.arange(counts.size), counts).astype(float), np.full(40, np.nan)])
    r = stable_histogram(data, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=0)
    n = int(counts.sum()) + 40
    assert r.noisy_total == n
    kept = counts >= r.threshold
    assert 0.8 < counts[kept].sum() / n < 0.9  # ≈ 13 % of the mass is suppressed
    np.testing.assert_allclose(r.frequencies, counts[kept] / n, rtol=1e-15)


@pytest.mark.parametrize(("total_noise", "frequencies_nan"), [(-10**6, True), (-(10**6) + 20, False)])
def test_small_or_negative_noisy_total_gives_no_bound(monkeypatch, total_noise, frequencies_nan) -> None:
    """n̂ ≤ 0: frequencies NaN, error_bound inf; 0 < n̂ ≤ s: finite frequencies, error_bound inf."""
    monkeypatch.setattr(H, "discrete_laplace", fake_noise(total=total_noise))
    r = stable_histogram(np.repeat([1, 2], [10**6 - 30, 30]), epsilon=1.0, delta=1e-6, neighbors="add_remove",
                         rng=0)
    assert r.noisy_total == 10**6 + total_noise and r.keys.tolist() == [1, 2]
    assert np.isnan(r.frequencies).all() == frequencies_nan
    assert r.error_bound(0.05) == math.inf
    low, high = r.confidence_intervals(0.05)
    assert (low == 0).all() and (high == 1).all()
    assert math.isfinite(r.count_error_bound(0.05))
    frame = r.to_pandas()
    assert frame.shape == (2, 5)


def test_cli_json_add_remove_error_bound_is_real_or_null(tmp_path: Path, monkeypatch) -> None:
    """``privagg histogram f.csv --column k ... --neighbors add_remove --json``: a finite bound from
    the proof (secure noise), never 1.0 by construction; null (and null frequencies) when n̂ ≤ 0."""
    path = tmp_path / "f.csv"
    counts = zipf_counts(5000, 200)
    keys = np.repeat(np.arange(counts.size), counts)
    path.write_text("k\n" + "\n".join(f"key{k}" for k in keys) + "\n", encoding="utf-8")
    args = ["histogram", str(path), "--column", "k", "--epsilon", "1", "--delta", "1e-6",
            "--neighbors", "add_remove", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert isinstance(out["noisy_total"], int) and out["n"] is None
    assert out["frequencies"] == pytest.approx([c / out["noisy_total"] for c in out["counts"]], rel=1e-12)
    assert out["error_bound"] is not None and 0 < out["error_bound"] < 0.05
    assert out["error_bound"] != 1.0

    monkeypatch.setattr(H, "discrete_laplace", fake_noise(total=-(10**6)))
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["noisy_total"] < 0 and out["keys"]
    assert out["error_bound"] is None and out["frequencies"] == [None] * len(out["keys"])


# ----------------------------------------------------------------------- statistical checks


def test_noisy_total_follows_the_exact_law_and_half_its_scale_is_rejected(monkeypatch) -> None:
    """n̂ − n over 4000 releases ~ DL(t_n = 10) (chi-square p ≥ 1e-6), centred on n *with* the
    missing keys; the same harness on a total drawn with scale t_n/2 must give p < 1e-6."""
    seed = 909
    print(f"seed={seed}")
    kc = KeyCounts(keys=np.array(["a", "b"]), counts=np.array([300, 20]), n=400)  # 80 missing keys
    params = StableHistogramParams.build(1.0, 1e-6, "add_remove")
    assert params.total_scale == 10

    def residuals() -> np.ndarray:
        g = np.random.default_rng(seed)
        return np.array([
            stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=g).noisy_total
            for _ in range(4000)
        ]) - kc.n

    p = chisquare_gof(residuals(), discrete_laplace_pmf(params.total_scale))
    assert p >= ALPHA, f"seed={seed}: p={p}"

    def half_total(scale, size, rng):
        factor = Fraction(1, 2) if Fraction(scale) == params.total_scale else 1
        return discrete_laplace(Fraction(scale) * factor, size, rng=rng)

    monkeypatch.setattr(H, "discrete_laplace", half_total)
    p_bad = chisquare_gof(residuals(), discrete_laplace_pmf(params.total_scale))
    assert p_bad < ALPHA, f"seed={seed}: a total of half the scale was not rejected, p={p_bad}"


def test_zipf_top_frequency_is_within_the_bound_of_the_true_value() -> None:
    """Zipf(1) over 2700 keys, n ≈ 1.2e5 (true top frequency 0.118): one release at β = 1e-6.

    The old frequencies were shares among the released keys, ≈ 0.136 here (+0.018); the bound is
    ≈ 5e-4, so the biased value is 30 bounds away.
    """
    seed = 1182
    print(f"seed={seed}")
    counts = zipf_counts()
    n = int(counts.sum())
    true_top = counts[0] / n
    assert 0.118 < true_top < 0.12
    data = np.repeat(np.arange(counts.size), counts)
    r = stable_histogram(data, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=seed)
    bound = r.error_bound(1e-6)
    assert bound < 1e-3, f"seed={seed}: bound {bound}"
    assert r.keys[0] == 0
    assert abs(r.frequencies[0] - true_top) <= bound, f"seed={seed}: {r.frequencies[0]} vs {true_top}"
    share_among_released = r.counts[0] / r.counts.sum()  # what the old code released
    assert abs(share_among_released - true_top) > 20 * bound
    released = np.zeros(counts.size)
    released[r.keys] = r.frequencies
    assert np.max(np.abs(released - counts / n)) <= bound, f"seed={seed}"


def _bound_misses(kc: KeyCounts, *, delta: float, beta: float, trials: int, seed: int, bound) -> int:
    """Number of releases where some key of the domain is off by more than ``bound(release)``."""
    g = np.random.default_rng(seed)
    true = kc.counts / kc.n
    misses = 0
    for _ in range(trials):
        r = stable_histogram_from_counts(kc, epsilon=1.0, delta=delta, neighbors="add_remove", rng=g)
        released = np.zeros(true.size)
        released[r.keys] = r.frequencies
        misses += bool(np.max(np.abs(released - true)) > bound(r, beta))
    return misses


def test_error_bound_holds_and_a_bound_shrunk_by_0_8_fails() -> None:
    """1000 keys of count 44 just above T = 39 (δ = 1e-15 makes T large against the union's slack):
    in most releases a key is suppressed and its error 44/n is ≈ 0.83 of the bound.

    Check: misses ≤ β (Wilson lower bound of the miss rate ≤ β, α = 1e-6) over 500 releases at
    β = 0.1; with the bound × 0.8 the Wilson lower bound must exceed β.
    """
    seed, beta, trials, delta = 4404, 0.1, 500, 1e-15
    print(f"seed={seed}")
    kc = KeyCounts(keys=np.arange(1000), counts=np.full(1000, 44), n=44_000)
    assert StableHistogramParams.build(1.0, delta, "add_remove").threshold == 39

    def run(shrink: float) -> int:
        return _bound_misses(kc, delta=delta, beta=beta, trials=trials, seed=seed,
                             bound=lambda r, b: shrink * r.error_bound(b))

    misses = run(1.0)
    assert wilson_lower(misses, trials, ALPHA) <= beta, f"seed={seed}: {misses}/{trials}"
    misses_bad = run(0.8)
    assert wilson_lower(misses_bad, trials, ALPHA) > beta, f"seed={seed}: ×0.8 not rejected ({misses_bad})"


def test_error_bound_covers_the_total_noise_and_a_bound_without_it_fails() -> None:
    """One key holds every record (f = 1, n = 200, δ = 0.3 so T is small): the error is driven by
    Z_n (scale 10). The bound holds (Wilson lower bound of the miss rate ≤ β = 0.2, 1000 releases);
    a bound that ignores the total's noise (k/n̂ and (T − 1 + k)/n̂, the count noise alone at β)
    misses ≈ 40 % of the time and must be rejected."""
    seed, beta, trials, delta = 200, 0.2, 1000, 0.3
    print(f"seed={seed}")
    kc = KeyCounts(keys=np.array([0]), counts=np.array([200]), n=200)

    def without_total(r, b):
        k = H._abs_quantile_all(r.params.scale, max(1, r.noisy_total), b)
        return max(k, r.threshold - 1 + k) / r.noisy_total

    misses = _bound_misses(kc, delta=delta, beta=beta, trials=trials, seed=seed,
                           bound=lambda r, b: r.error_bound(b))
    assert wilson_lower(misses, trials, ALPHA) <= beta, f"seed={seed}: {misses}/{trials}"
    misses_bad = _bound_misses(kc, delta=delta, beta=beta, trials=trials, seed=seed, bound=without_total)
    assert wilson_lower(misses_bad, trials, ALPHA) > beta, f"seed={seed}: not rejected ({misses_bad})"


def _interval_misses(seed: int, beta: float, width: float) -> tuple[int, int, float]:
    """Per-key misses of the frequency intervals (half-widths × ``width`` around f̂) over 2·10^5
    keys of count 1000 in one release (all released; f = 5e-6 so the total moves no interval end
    by a whole count), and the exact per-key miss rate P[|Z| > a'], a' = abs_quantile(t_c, β/2)."""
    m, F = 200_000, 1000
    kc = KeyCounts(keys=np.arange(m), counts=np.full(m, F), n=m * F)
    r = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=seed)
    assert r.keys.size == m
    low, high = r.confidence_intervals(beta)
    f_hat, f = r.frequencies, F / kc.n
    low, high = f_hat - width * (f_hat - low), f_hat + width * (high - f_hat)
    misses = int(np.count_nonzero((f < low) | (f > high)))
    exact = float(abs_tail(r.params.scale, abs_q(r.params.scale, beta / 2)))
    return misses, m, exact


def test_interval_coverage_is_exact_two_sided() -> None:
    """The per-key miss rate equals P[|Z| > a'] (≤ β/2) within a Wilson interval; intervals × 0.8
    (too narrow) and × 1.25 (too wide) must both fail the check, and × 0.8 misses more than β."""
    seed, beta = 5150, 0.001
    print(f"seed={seed}")
    misses, m, exact = _interval_misses(seed, beta, 1.0)
    assert exact <= beta / 2
    lo, hi = wilson_interval(misses, m, ALPHA)
    assert lo <= exact <= hi, f"seed={seed}: {misses}/{m}, exact {exact}"
    for width in (0.8, 1.25):
        bad, _, _ = _interval_misses(seed, beta, width)
        lo, hi = wilson_interval(bad, m, ALPHA)
        assert not lo <= exact <= hi, f"seed={seed}: ×{width} not detected ({bad}/{m})"
        if width < 1:
            assert lo > beta, f"seed={seed}: ×0.8 does not miss more than β ({bad}/{m})"


def test_audit_total_and_counts_together_stay_within_epsilon(monkeypatch) -> None:
    """Audit of (ε = 1, δ = 1e-6) on D = {a × 100} (n = 100) and D' = D + one record of a.

    Output (post-processing, so it inherits the guarantee): 1 iff count_a ≥ 101 and n̂ ≥ 101, the
    event where both noises push the same way: its log-ratio is exactly ε_c + ε_n = 1. Audit
    confidence 1 − 1e-6 (privagg.testing.audit). Negative control: a total drawn at the full ε
    (scale 1/ε_c, so ε_c + ε_c = 1.8 is spent while 1 is claimed) must be flagged.
    """
    seed, trials = 31, 8000
    print(f"seed={seed}")
    d0 = KeyCounts(keys=np.array(["a"]), counts=np.array([100]), n=100)
    d1 = KeyCounts(keys=np.array(["a"]), counts=np.array([101]), n=101)

    def outputs(kc: KeyCounts, g: np.random.Generator) -> np.ndarray:
        out = np.zeros(trials, dtype=np.int64)
        for i in range(trials):
            r = stable_histogram_from_counts(kc, epsilon=1.0, delta=1e-6, neighbors="add_remove", rng=g)
            out[i] = int(r.counts.size == 1 and r.counts[0] >= 101 and r.noisy_total >= 101)
        return out

    def audit():
        g0, g1 = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
        return audit_samples(outputs(d0, g0), outputs(d1, g1), delta=1e-6, confidence=1 - ALPHA)

    res = audit()
    assert not res.violates(1.0), f"seed={seed}: {res}"

    t_c = StableHistogramParams.build(1.0, 1e-6, "add_remove").scale

    def total_at_full_epsilon(scale, size, rng):
        return discrete_laplace(t_c if Fraction(scale) == 10 else scale, size, rng=rng)

    monkeypatch.setattr(H, "discrete_laplace", total_at_full_epsilon)
    res_bad = audit()
    assert res_bad.violates(1.0), f"seed={seed}: over-spending not flagged: {res_bad}"
