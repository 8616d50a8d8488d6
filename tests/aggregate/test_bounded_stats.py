"""The noise law of the bounded metrics, and privacy audits on worst-case neighbours.

Noise law: Pearson chi-square of the released noise against the exact discrete Laplace law of
the plan's scale, at α = 1e-6 (false-failure rate 1e-6 per check). Negative control: the same
test on the mechanism with its sensitivity understated 2× (half the scale) must reject.

Audits (privagg.testing.audit_samples, confidence 0.999: a correct mechanism fails with
probability <= 1e-3 per audit). Trials are blocks of groups in ONE call: the noise of every
group is independent and its scale and grid are functions of the public parameters only (not of
the number of groups), so each block's output has the law of one run on that block's rows. The
statistic of a block is the privacy-loss direction ``L = Σ_g |o_g − a_g| − |o_g − b_g|`` (a, b:
the noise-free releases on the two neighbours; post-processing, so its loss is at most the
release's). The worst-case neighbours: one record at a clamp bound (beyond it, clamped);
a unit with ℓ∞ rows at the bound in each of ℓ0 groups; replace: a record at ``hi`` moved to
another group with value ``lo = −hi``. Negative control: sensitivity understated 2× (so the true
loss is 2ε): the audit must show a loss above ε. What the audits cannot detect: losses within
about 0.15 of ε (sampling error of 20 000 blocks), or rare events of probability below ~1e-3.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import privagg.noise.grid as grid_mod
from privagg.mechanisms import grouped_bounded as gb
from privagg.mechanisms.grouped import Contribution, GroupedValues
from privagg.testing import chisquare_gof, discrete_laplace_pmf
from privagg.testing.audit import audit_samples

SEED = 777013
ALPHA = 1e-6
CONFIDENCE = 0.999
BLOCKS = 20_000


@pytest.fixture
def understated(monkeypatch):
    """Break the mechanism: every sensitivity understated 2× (counts and sums)."""

    def apply():
        orig_sum, orig_count = gb._sum_plan, gb._count_plan

        def half_sum(where, lo, hi, e_t, row_bound, eps, c, beta):
            return orig_sum(where, lo, hi, e_t, row_bound // 2, eps, c, beta)

        def half_count(where, eps, c, beta):
            p = orig_count(where, eps, c, beta)
            t, e = gb._laplace_scale(where, max(p.sensitivity // 2, 1), eps)
            return gb.CountPlan(max(p.sensitivity // 2, 1), t, e, p.target, p.half_width, p.beta)

        monkeypatch.setattr(gb, "_sum_plan", half_sum)
        monkeypatch.setattr(gb, "_count_plan", half_count)

    return apply


def _dlap_binned_p(z: np.ndarray, t: float, bins: int = 60) -> float:
    """Chi-square p-value of integer draws against DLap(t), in bins equiprobable under the
    continuous approximation; expected counts from the exact law's CDF."""
    q = np.exp(-1.0 / t)

    def cdf(k):  # P[Z <= k]
        k = np.asarray(k, dtype=np.float64)
        return np.where(k >= 0, 1 - q ** (k + 1) / (1 + q), q ** (-k) / (1 + q))

    u = np.linspace(0, 1, bins + 1)[1:-1]
    edges = np.unique(np.round(np.where(u < 0.5, t * np.log(2 * u), -t * np.log(2 * (1 - u)))))
    probs = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]]))
    obs = np.bincount(np.searchsorted(edges, z, side="left"), minlength=edges.size + 1)
    return float(stats.chisquare(obs, probs * z.size).pvalue)


def _noise_counts(c):
    g = 100_000
    counts = np.arange(g, dtype=np.int64) % 97
    r = gb.noisy_counts(counts, epsilon=Fraction(1), contribution=c, rng=np.random.default_rng(SEED))
    return (r.value - counts).astype(np.int64)


def test_count_noise_law():
    print(f"seed={SEED}")
    c = Contribution(1, 3)
    t = gb.count_plan(epsilon=1, contribution=c).scale
    assert t == 3
    p = chisquare_gof(_noise_counts(c), discrete_laplace_pmf(t))
    assert p > ALPHA, f"seed={SEED} p={p}"


def test_count_noise_law_negative_control(understated):
    print(f"seed={SEED}")
    c = Contribution(1, 3)
    t = gb.count_plan(epsilon=1, contribution=c).scale
    understated()
    p = chisquare_gof(_noise_counts(c), discrete_laplace_pmf(t))
    assert p < ALPHA, f"seed={SEED} p={p}: the chi-square test has no power"


def _noise_sums(c):
    """The released noise of clamped_sums in real units (release minus the noise-free release
    of the plan in force), for 50 000 groups."""
    g = 50_000
    rng = np.random.default_rng(SEED)
    gv = GroupedValues(np.sort(rng.integers(0, g, 4 * g)), rng.uniform(-2, 5, 4 * g), g)
    p = gb.sum_plan(lower=-1, upper=3, epsilon=1, contribution=c)
    exact = gb.group_integer_sums(gv.group, gb.clamped_terms(gv.values, -1.0, 3.0), g)
    base = grid_mod.rescale_integers(exact, from_exponent=p.term_exponent, to_exponent=p.exponent,
                                     bound_steps=2**50)
    r = gb.clamped_sums(gv, lower=-1, upper=3, epsilon=1, contribution=c,
                        rng=np.random.default_rng(SEED + 1))
    return r.value - np.ldexp(base.astype(np.float64), p.exponent)


#: The correct plan, computed before any test breaks the mechanism.
SUM_PLAN = gb.sum_plan(lower=-1, upper=3, epsilon=1, contribution=Contribution(2, 3))


def _sum_noise_p(z_real: np.ndarray) -> float:
    """p-value of the noise against DLap(t) of the *correct* plan, on its grid."""
    z = np.rint(np.ldexp(z_real, -SUM_PLAN.exponent)).astype(np.int64)
    return _dlap_binned_p(z, float(SUM_PLAN.scale))


def test_sum_noise_law():
    print(f"seed={SEED}")
    p = _sum_noise_p(_noise_sums(Contribution(2, 3)))
    assert p > ALPHA, f"seed={SEED} p={p}"


def test_sum_noise_law_negative_control(understated):
    print(f"seed={SEED}")
    understated()
    p = _sum_noise_p(_noise_sums(Contribution(2, 3)))
    assert p < ALPHA, f"seed={SEED} p={p}: the chi-square test has no power"


# ------------------------------------------------------------------------------------- audits
def _blocks(base_rows, extra_rows, width):
    """BLOCKS copies of a block of ``width`` groups: base rows (group, value) and the neighbour's
    extra rows, as one GroupedValues each."""
    def build(rows):
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0)
        g = np.array([r[0] for r in rows], np.int64)
        v = np.array([r[1] for r in rows], np.float64)
        offs = np.repeat(np.arange(BLOCKS, dtype=np.int64) * width, g.size)
        gg = np.tile(g, BLOCKS) + offs
        vv = np.tile(v, BLOCKS)
        order = np.argsort(gg, kind="stable")
        return gg[order], vv[order]

    g0, v0 = build(base_rows)
    g1, v1 = build(base_rows + extra_rows)
    n = BLOCKS * width
    return GroupedValues(g0, v0, n), GroupedValues(g1, v1, n)


def _stat(out, a, b, width):
    """L per block: Σ_g |o − a| − |o − b| over the block's groups, divided by its maximum
    Σ_g |a − b| and rounded to 1/8 (17 values, so that the auditor's events have large counts)."""
    d = (np.abs(out - a) - np.abs(out - b)).reshape(BLOCKS, width).sum(axis=1)
    top = np.abs(a - b).reshape(BLOCKS, width).sum(axis=1)
    return np.round(8 * d / top)


def _noise_free(fn, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(grid_mod, "_laplace_flat", lambda scale, n, gen: np.zeros(n, np.int64))
        return fn()


SUM_CASES = {
    # name: (contribution, bounds, base rows, extra rows of the neighbour, D' rows replace D's)
    "record_at_bound": (Contribution(1, 1), (-1.0, 3.0), [(0, 0.5), (0, 2.0)], [(0, 1e300)], False),
    "unit_l0_2_linf_3": (Contribution(2, 3), (-1.0, 3.0), [(0, 0.5), (1, -0.7)],
                         [(0, 3.0)] * 3 + [(1, 3.0)] * 3, False),
    "replace_across_groups": (Contribution(1, 1, True), (-3.0, 3.0), [(0, 0.5), (1, 1.0)], None, True),
}


def _sum_pair(case):
    c, (lo, hi), base, extra, replace = SUM_CASES[case]
    if replace:  # D: a record at hi in group 0; D': at lo in group 1
        d0, _ = _blocks(base + [(0, hi)], [], 2)
        d1, _ = _blocks(base + [(1, lo)], [], 2)
        return c, lo, hi, d0, d1, 2
    width = c.max_groups
    d0, d1 = _blocks(base, extra, width)
    return c, lo, hi, d0, d1, width


def _audit_sums(case, monkeypatch):
    c, lo, hi, d0, d1, width = _sum_pair(case)

    def run(gv, seed):
        return gb.clamped_sums(gv, lower=lo, upper=hi, epsilon=Fraction(1), contribution=c,
                               rng=np.random.default_rng(seed)).value

    a = _noise_free(lambda: run(d0, 0), monkeypatch)
    b = _noise_free(lambda: run(d1, 0), monkeypatch)
    s0 = _stat(run(d0, SEED), a, b, width)
    s1 = _stat(run(d1, SEED + 1), a, b, width)
    return audit_samples(s0, s1, confidence=CONFIDENCE)


@pytest.mark.parametrize("case", sorted(SUM_CASES))
def test_audit_sums(case, monkeypatch):
    print(f"seed={SEED}")
    res = _audit_sums(case, monkeypatch)
    assert not res.violates(1.0), f"{case} seed={SEED} {res}"
    assert res.epsilon_lower > 0.7, f"{case}: the audit is too weak to mean anything ({res})"


@pytest.mark.parametrize("case", sorted(SUM_CASES))
def test_audit_sums_negative_control(case, monkeypatch, understated):
    print(f"seed={SEED}")
    understated()
    res = _audit_sums(case, monkeypatch)
    assert res.violates(1.0), f"{case} seed={SEED}: understated sensitivity not detected ({res})"


COUNT_CASES = {"unit_l0_2_linf_3": (Contribution(2, 3), 2, False),
               "replace_record": (Contribution(1, 1, True), 2, True)}


def _audit_counts(case):
    c, width, replace = COUNT_CASES[case]
    base = np.tile([4, 9], BLOCKS).astype(np.int64)
    if replace:  # a record moves from group 0 to group 1
        other = base + np.tile([-1, 1], BLOCKS)
    else:
        other = base + np.tile([c.max_rows] * width, BLOCKS)
    run = lambda x, s: gb.noisy_counts(x, epsilon=Fraction(1), contribution=c,  # noqa: E731
                                       rng=np.random.default_rng(s)).value
    a, b = base.astype(float), other.astype(float)
    return audit_samples(_stat(run(base, SEED), a, b, width), _stat(run(other, SEED + 1), a, b, width),
                         confidence=CONFIDENCE)


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_audit_counts(case):
    print(f"seed={SEED}")
    res = _audit_counts(case)
    assert not res.violates(1.0), f"{case} seed={SEED} {res}"
    assert res.epsilon_lower > 0.7, f"{case}: audit too weak ({res})"


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_audit_counts_negative_control(case, understated):
    print(f"seed={SEED}")
    understated()
    res = _audit_counts(case)
    assert res.violates(1.0), f"{case} seed={SEED}: not detected ({res})"


def _audit_means(monkeypatch):
    """One record at hi (beyond it: 1e300) added to a group of 40 rows at the midpoint, record
    level; the block statistic is the loss direction of the pair (n̂, S̃) — S̃ recovered from the
    mean as (value − mid)·n̂ (post-processing), each term scaled by its plan's noise scale."""
    c, lo, hi = Contribution(1, 1), 0.0, 10.0
    d0, d1 = _blocks([(0, 5.0)] * 40, [(0, 1e300)], 1)
    plan = gb.mean_plan(lower=lo, upper=hi, epsilon=1, contribution=c)
    g = 2.0**plan.centered.exponent

    def run(gv, seed):
        r = gb.bounded_means(gv, lower=lo, upper=hi, epsilon=Fraction(1), contribution=c,
                             rng=np.random.default_rng(seed))
        n_hat = r.extra["n_hat"]
        return n_hat, np.rint((r.value - plan.mid) * n_hat / g)

    (na, sa), (nb, sb) = (_noise_free(lambda: run(d, 0), monkeypatch) for d in (d0, d1))

    def stat(out):
        n, s = out
        ln = ((np.abs(n - na) - np.abs(n - nb)) / float(plan.count.scale)
              + (np.abs(s - sa) - np.abs(s - sb)) / float(plan.centered.scale))
        top = np.abs(na - nb) / float(plan.count.scale) + np.abs(sa - sb) / float(plan.centered.scale)
        return np.round(8 * ln / top)

    return audit_samples(stat(run(d0, SEED)), stat(run(d1, SEED + 1)), confidence=CONFIDENCE)


def test_audit_means(monkeypatch):
    print(f"seed={SEED}")
    res = _audit_means(monkeypatch)
    assert not res.violates(1.0), f"seed={SEED} {res}"
    assert res.epsilon_lower > 0.6, f"audit too weak ({res})"


def test_audit_means_negative_control(monkeypatch, understated):
    print(f"seed={SEED}")
    understated()
    res = _audit_means(monkeypatch)
    assert res.violates(1.0), f"seed={SEED}: not detected ({res})"
