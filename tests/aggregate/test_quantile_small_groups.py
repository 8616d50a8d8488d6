"""The unbounded quantile's ⊥ rule for small groups (grouped_quantile.rows_needed;
docs/proofs/aggregate_quantile.md §5b).

Without bounds, stage 1 picks an octave cell; on a group too small for its noise it picks a cell
holding none of the group's rows (values 10⁻⁷ or 10¹⁵ for data near 50) and, before this rule,
released it marked ``ok``. With a released count ``n̂`` (``count()`` in the same query) a group
with ``n̂ < rows_needed`` is now ⊥ with a public reason. Known answers of the tail formula and the
rule (against a brute-force convolution), the rule applied in ``aggregate`` and the CLI, and a
statistical test (fixed seeds, stated false-failure rate) with a negative control that must fail.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privagg
from privagg.mechanisms import grouped_quantile as gq
from privagg.mechanisms.grouped import Contribution, GroupedValues


def _difference_pmf(scale: Fraction, support: int) -> tuple[np.ndarray, np.ndarray]:
    """The law of ν' − ν, ν, ν' i.i.d. DLap(scale), by numerical convolution on ±support."""
    p = np.exp(-1.0 / float(scale))
    k = np.arange(-support, support + 1)
    pmf = (1 - p) / (1 + p) * p ** np.abs(k)
    return np.arange(-2 * support, 2 * support + 1), np.convolve(pmf, pmf[::-1])


@pytest.mark.parametrize("scale", [Fraction(7), Fraction(80, 9), Fraction(1, 3)])
def test_difference_tail_matches_convolution(scale):
    d, pmf = _difference_pmf(scale, 2000)
    for m in (1, 2, 5, 20, 60, 150):
        assert gq._difference_tail(scale, m) == pytest.approx(pmf[d >= m].sum(), rel=1e-9, abs=1e-300)


def _brute_rows_needed(q: Fraction, eps: Fraction, c: Contribution) -> int:
    a, b = q.numerator, q.denominator
    scale = gq.stage_scales(a, b, eps, c, bounded=False)[0]
    d, pmf = _difference_pmf(scale, 4000)
    tail = np.cumsum(pmf[::-1])[::-1]  # tail[i] = P[D >= d[i]]
    gap = min(a, b - a)
    for n in range(1, 10**5):
        if 210 * tail[np.searchsorted(d, n * gap)] <= gq.FAR_BETA:
            return n
    raise AssertionError  # pragma: no cover


@pytest.mark.parametrize("q, eps, c, known", [
    (Fraction(1, 2), Fraction(3, 5), Contribution(), 78),   # count + median at ε = 1 (0.4 / 0.6)
    (Fraction(1, 2), Fraction(1), Contribution(), 47),
    (Fraction(9, 10), Fraction(1), Contribution(), 415),   # the gap is (b − a)·n = n, the noise 2·9/ε
    (Fraction(1, 4), Fraction(1, 2), Contribution(max_groups=2, max_rows=3), None),
])
def test_rows_needed_known_answers(q, eps, c, known):
    need = gq.rows_needed(q, eps, c)
    assert need == _brute_rows_needed(q, eps, c)
    if known is not None:
        assert need == known
    assert gq.rows_needed(0, eps, c) == gq.rows_needed(1, eps, c) == 1


def _far(values: np.ndarray) -> np.ndarray:
    """Released outside [25, 100] for data ~ N(50, 10): a cell holding none of the rows (or NaN)."""
    return ~((values >= 25) & (values <= 100))


def _groups(n: int, G: int, seed: int) -> GroupedValues:
    x = np.random.default_rng(seed).normal(50, 10, (G, n))
    return GroupedValues(np.repeat(np.arange(G), n), x.ravel(), G)


SEED = 20261202  # printed on failure through the assertion messages
EPS = Fraction(3, 5)
G = 400
#: The union bound caps P[far] at FAR_BETA = 0.1 at n = rows_needed (measured about 0.05 at
#: n = 78, ε = 3/5); a count of far releases above Binomial(G, 0.1)'s 0.999 quantile fails:
#: false-failure rate <= 1e-3.
LIMIT = int(stats.binom.ppf(0.999, G, gq.FAR_BETA))


def test_released_groups_at_the_rule_size_are_rarely_far():
    need = gq.rows_needed(0.5, EPS, Contribution())
    gv = _groups(need, G, SEED)
    r = gq.quantiles(gv, 0.5, bounds=None, epsilon=EPS, contribution=Contribution(),
                     rng=np.random.default_rng(SEED), n_hat=np.full(G, float(need)))
    assert r.ok.all()
    far = int(_far(r.value).sum())
    assert far <= LIMIT, f"seed {SEED}: {far} of {G} releases far from the data at n = {need} (limit {LIMIT})"


def test_negative_control_half_the_size_is_far_too_often():
    """The same check on groups of half the rule's size, released without the rule (no n̂): must
    fail (about 2/3 of them land in a cell without rows at n = 39, ε = 3/5)."""
    need = gq.rows_needed(0.5, EPS, Contribution())
    gv = _groups(need // 2, G, SEED)
    r = gq.quantiles(gv, 0.5, bounds=None, epsilon=EPS, contribution=Contribution(),
                     rng=np.random.default_rng(SEED))
    assert r.ok.all()  # nothing is ⊥ without a released count
    assert int(_far(r.value).sum()) > LIMIT, f"seed {SEED}: the control did not detect far releases"


def test_rule_marks_groups_below_the_size_and_keeps_the_draws():
    need = gq.rows_needed(0.5, EPS, Contribution())
    gv = _groups(60, 6, SEED)
    n_hat = np.array([need - 1, need, 1, 0, -3, 10**6], dtype=float)
    with_rule = gq.quantiles(gv, 0.5, bounds=None, epsilon=EPS, contribution=Contribution(),
                             rng=np.random.default_rng(7), n_hat=n_hat)
    without = gq.quantiles(gv, 0.5, bounds=None, epsilon=EPS, contribution=Contribution(),
                           rng=np.random.default_rng(7))
    ok = n_hat >= need
    assert with_rule.ok.tolist() == ok.tolist()
    assert np.isnan(with_rule.value[~ok]).all() and np.isnan(with_rule.low[~ok]).all()
    assert np.array_equal(with_rule.value[ok], without.value[ok])  # post-processing: same draws
    assert all(f"below {need}" in s for s in with_rule.reason[~ok])
    assert all(s is None for s in with_rule.reason[ok])
    assert with_rule.extra["rows_needed"].tolist() == [float(need)] * 6
    # bounded quantiles are never ⊥ (the value stays in [lo, hi]); n_hat only sizes the grid
    b = gq.quantiles(gv, 0.5, bounds=(0.0, 100.0), epsilon=EPS, contribution=Contribution(),
                     rng=np.random.default_rng(7), n_hat=n_hat)
    assert b.ok.all() and "rows_needed" not in b.extra


def test_aggregate_and_cli_mark_small_groups(tmp_path):
    rng = np.random.default_rng(SEED)
    g = np.repeat(["small", "large"], [20, 3000])
    df = pd.DataFrame({"g": g, "x": rng.normal(50, 10, g.size)})
    r = privagg.aggregate(df, by="g", metrics=[privagg.count(), privagg.quantile("x", 0.5)],
                          epsilon=1, domain=["small", "large"], rng=SEED)
    out = r.groups.set_index("g")
    assert out.loc["small", "q0.5_x_ok"] == False  # noqa: E712 - numpy bool
    assert "too small for the unbounded quantile" in out.loc["small", "q0.5_x_reason"]
    assert np.isnan(out.loc["small", "q0.5_x"])
    assert out.loc["large", "q0.5_x_ok"] and abs(out.loc["large", "q0.5_x"] - 50) < 2
    # without count(): nothing is ⊥, and the CLI's table says from which size to distrust a value
    from click.testing import CliRunner

    from privagg.cli.main import cli as main

    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    dom = tmp_path / "d.csv"
    dom.write_text("g\nsmall\nlarge\n")
    res = CliRunner().invoke(main, ["aggregate", str(path), "--by", "g", "--quantile", "x:0.5",
                                    "--epsilon", "1", "--domain", str(dom)])
    assert res.exit_code == 0, res.output
    need = gq.rows_needed(0.5, Fraction(1), Contribution())
    assert f"fewer than about {need} rows may be released far" in " ".join(res.output.split())
    res = CliRunner().invoke(main, ["aggregate", str(path), "--by", "g", "--quantile", "x:0.5", "--count",
                                    "--epsilon", "1", "--domain", str(dom)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "⊥ in q0.5_x: group too small for the unbounded quantile" in text
    assert "may be released far" not in text
