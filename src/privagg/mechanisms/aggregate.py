"""Group-by aggregates: :func:`aggregate` with the metrics :func:`count`, :func:`sum`, :func:`mean`
and :func:`quantile`.

One call reads the table once (:mod:`privagg.engines.grouped`), bounds each privacy unit's
contribution, fixes the released groups — a public ``domain``, or one private key selection shared
by every metric — and releases every metric for every released group, vectorized across groups
(:mod:`privagg.mechanisms.grouped` and the per-metric modules).

Budget split. The user gives one (ε, δ). The steps are ``"selection"`` (only without a domain)
and one per metric, named by its output column (``count``, ``sum_<col>``, ``mean_<col>`` (with or
without bounds; one of each for one column is refused as a duplicate name), ``q<q>_<col>``). Each has a weight:
``weights={name: w}`` when given, else the default — w = 3/2 for a quantile (:data:`QUANTILE_WEIGHT`),
w = 2 for a mean without bounds (:data:`UNBOUNDED_MEAN_WEIGHT`), w = 1 for every other step. ε is split in proportion to the weights over all steps; δ in
proportion to the weights over the steps that need δ — the selection and each mean without
bounds; every other step is pure ε-DP. Exact rationals throughout, so the parts add up to exactly
(ε, δ).

Sharing. A ``sum(col, b)`` and a ``mean(col, b)`` with the same column and bounds are released
together from ONE noisy count and ONE noisy centered sum (mean = mid + S̃/n̂, sum = S̃ + mid·n̂)
at the two shares added up, ε_sum + ε_mean, when the public rule of
:func:`~privagg.mechanisms.grouped_bounded.share_plan` says the sum is no noisier that way (always
with equal weights); the two steps are then one, reported as ``"sum_<col>+mean_<col>"`` with that
ε (their weights stay the keys of ``weights``). ``count()`` counts rows, while the mean's count
counts the rows with a present value in the column (which rows those are is data), so ``count()``
joins a bounded mean by the pair (present rows, missing rows) per group — p̃ with the
sensitivity of one count, m̃ at a present row's cost; count = p̃ + m̃ where m̃ exceeds its 2.5 % quantile, else p̃, the mean (and its
shared sum) use p̃; inside the step the centered sum gets ε_S = ε_G/2 + min(ε_count, ε_sum)/2 and
p̃ the rest (:func:`~privagg.mechanisms.grouped_bounded.centered_share`) — for the FIRST
bounded mean in the query's order for which the public rule of
:func:`~privagg.mechanisms.grouped_bounded.count_share_plan` says the count is no noisier
(always with equal weights): one step ``"count+mean_<col>"`` or ``"count+sum_<col>+mean_<col>"``
at ε_count + ε_G (docs/proofs/aggregate_bounded.md §8). Otherwise, with an unbounded ``mean(col)`` (the first), ``count()`` is
released as the same kind of pair (p̃, m̃) at its own ε (drawn first) and the mean reads p̃ as its
noisy count instead of drawing one (docs/proofs/aggregate_mean.md §8.1). ``delta`` must be > 0 when some step needs it;
a δ that no step needs is not spent (the release and the ledger say δ = 0). The steps compose
sequentially (all read the same rows); each metric is itself a parallel composition over the
disjoint groups. The metrics draw in the query's order, except that quantiles draw last: a
bounded quantile sizes each group's grid from the query's released ``count()`` when it has one
(post-processing of that release; docs/proofs/aggregate_quantile.md §4), and an unbounded one
releases every group over the clipping range of the query's unbounded ``mean`` of the same column
where that mean has released one (with ``count()``'s counts, or that mean's own without it; §5c). Proofs:
``docs/proofs/aggregate.md``.

Key selection (no domain): each group with n ≥ 1 distinct units after bounding (record level: rows)
is kept independently with the probability p(n) of the optimal partition selection
(:mod:`privagg.mechanisms.partition_selection`) at (ε_sel/k, δ_sel/k), where k = ℓ0 (add/remove)
or 2ℓ0 (replace) is the number of groups whose unit count a neighbour can change (each by 1):
basic composition over those groups' independent decisions.
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import check_choice, check_positive_int, fail
from ..errors import ParameterError
from ..accounting._exact import exact
from ..accounting.loss import PrivacyLoss
from .grouped import Contribution, MetricResult

__all__ = [
    "QUANTILE_WEIGHT", "UNBOUNDED_MEAN_WEIGHT", "AggregateRelease", "Count", "Mean", "Quantile", "Sum", "aggregate", "count", "mean",
    "quantile", "selection_parameters", "split_budget", "sum",
]

NEIGHBORS = ("add_remove", "replace")
#: The default weight of a quantile step (every other step: 1). A quantile is chosen by a
#: report-noisy-max over a grid, which needs more ε than a count for the same error; 3/2 gives
#: the benchmark's query count + sum + mean + median the median ε/3 (OpenDP's share for it).
QUANTILE_WEIGHT = Fraction(3, 2)
#: The default weight of an unbounded mean step (``mean(col)`` without bounds). It is several
#: releases where a bounded mean is one (a location and a scale found privately before the
#: clipped sum; docs/proofs/aggregate_mean.md), and at weight 1 its relative error was 2–6× the
#: query's count's and sum's on real tables. Measured (2026-12-06, the benchmark's query count +
#: sum(v, b) + mean(v) + median(v) at ε = 1, δ = 1e-6, public keys, 20 runs, median relative error
#: of the mean, weight 1 → 2): cars 0.054 → 0.042, seattle-weather 0.037 → 0.017, sf-temps 0.0022 →
#: 0.0016, stocks 0.185 → 0.138, penguins species 0.041 → 0.026 and island 0.0105 → 0.0062, wine
#: 0.38 → 0.083, diabetes 0.063 → 0.043, airports 0.040 → 0.028, synthetic 0.080 → 0.077; the
#: count's and the bounded sum's errors grow about 1.2× (their share 2/9 → 2/11).
UNBOUNDED_MEAN_WEIGHT = Fraction(2)
#: Largest accepted ``max_groups_per_unit`` / ``max_rows_per_group``.
MAX_BOUND = 1_000_000
_BOUNDS_RULE = "a pair (lo, hi) of finite numbers with lo < hi"


def _check_column(where: str, column: Any) -> str:
    if not isinstance(column, str) or not column:
        raise fail(where, "column", "a non-empty column name (str)", column)
    return column


def _check_bounds(where: str, bounds: Any, required: bool) -> tuple[float, float] | None:
    if bounds is None:
        if required:
            raise fail(where, "bounds", _BOUNDS_RULE, bounds)
        return None
    if isinstance(bounds, (str, bytes)) or not isinstance(bounds, Sequence) or len(bounds) != 2:
        raise fail(where, "bounds", _BOUNDS_RULE, bounds)
    out = []
    for b in bounds:
        if isinstance(b, bool) or not isinstance(b, numbers.Real) or not math.isfinite(float(b)):
            raise fail(where, "bounds", _BOUNDS_RULE, bounds)
        out.append(float(b))
    if not out[0] < out[1]:
        raise fail(where, "bounds", _BOUNDS_RULE, bounds)
    return out[0], out[1]


def _q_text(q: float) -> str:
    text = repr(float(q))
    return text[:-2] if text.endswith(".0") else text


class _Metric:
    """Common interface of the metric specifications (frozen dataclasses below; all but
    :class:`Count` have a ``column``)."""

    @property
    def name(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def needs_delta(self) -> bool:
        return False

    @property
    def default_weight(self) -> Fraction:
        """The step's weight when ``weights`` does not name it: 1, a quantile :data:`QUANTILE_WEIGHT`,
        a mean without bounds :data:`UNBOUNDED_MEAN_WEIGHT`."""
        return Fraction(1)

    @property
    def can_fail(self) -> bool:
        """Whether a group's release can be ⊥ (then ``<name>_ok`` / ``<name>_reason`` columns)."""
        return False

    @property
    def interval(self) -> str:
        """What ``<name>_low`` / ``<name>_high`` are: ``"noise95"`` (a 95 % interval of the noise
        only: not the clamping bias nor the sampling error) or ``"grid_cell"`` (the resolution
        cell of the released value; it does not bound the noise)."""
        return "noise95"

    def plan(self, eps: Fraction, dlt: Fraction, contribution: Contribution) -> None:
        """Every public check of the metric's primitive at its share (ε, δ) (ParameterError), so
        that :meth:`run` cannot fail after the ledger is charged."""
        raise NotImplementedError  # pragma: no cover - overridden


@dataclass(frozen=True)
class Count(_Metric):
    """``count()``: rows per group (with units: bounded rows; distinct units when
    ``max_rows_per_group=1``). Pure ε-DP (discrete Laplace)."""

    @property
    def name(self) -> str:
        return "count"

    def plan(self, eps: Fraction, dlt: Fraction, contribution: Contribution) -> None:
        from .grouped_bounded import count_plan

        count_plan(epsilon=eps, contribution=contribution)

    def run(self, cand: Any, eps: Fraction, dlt: Fraction, contribution: Contribution, gen: Any) -> MetricResult:
        from .grouped_bounded import noisy_counts

        return noisy_counts(cand.rows, epsilon=eps, contribution=contribution, rng=gen)


@dataclass(frozen=True)
class Sum(_Metric):
    """``sum(column, bounds=(lo, hi))``: Σ clamp(x, lo, hi) per group, released on a grid. Pure ε-DP."""

    column: str
    bounds: tuple[float, float]

    def __post_init__(self) -> None:
        _check_column("sum", self.column)
        object.__setattr__(self, "bounds", _check_bounds("sum", self.bounds, required=True))

    @property
    def name(self) -> str:
        return f"sum_{self.column}"

    def plan(self, eps: Fraction, dlt: Fraction, contribution: Contribution) -> None:
        from .grouped_bounded import sum_plan

        sum_plan(lower=self.bounds[0], upper=self.bounds[1], epsilon=eps, contribution=contribution)

    def run(self, cand: Any, eps: Fraction, dlt: Fraction, contribution: Contribution, gen: Any) -> MetricResult:
        from .grouped_bounded import clamped_sums

        lo, hi = self.bounds
        return clamped_sums(cand.values[self.column], lower=lo, upper=hi, epsilon=eps, contribution=contribution,
                            rng=gen)


@dataclass(frozen=True)
class Mean(_Metric):
    """``mean(column, bounds=None)``: with bounds, a bounded mean (pure ε); without, a FriendlyCore
    mean per group ((ε, δ)-DP, no bounds needed). ⊥ per group when too small."""

    column: str
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _check_column("mean", self.column)
        object.__setattr__(self, "bounds", _check_bounds("mean", self.bounds, required=False))

    @property
    def name(self) -> str:
        """``mean_<col>``, with or without bounds (the spec's name): a bounded and an unbounded
        mean of one column in the same query are refused as two metrics of one name."""
        return f"mean_{self.column}"

    @property
    def needs_delta(self) -> bool:
        return self.bounds is None

    @property
    def can_fail(self) -> bool:
        return True

    @property
    def default_weight(self) -> Fraction:
        return UNBOUNDED_MEAN_WEIGHT if self.bounds is None else Fraction(1)

    def plan(self, eps: Fraction, dlt: Fraction, contribution: Contribution) -> None:
        if self.bounds is None:
            from .grouped_mean import friendly_means_plan

            friendly_means_plan(eps, dlt, contribution)
        else:
            from .grouped_bounded import mean_plan

            mean_plan(lower=self.bounds[0], upper=self.bounds[1], epsilon=eps, contribution=contribution)

    def run(self, cand: Any, eps: Fraction, dlt: Fraction, contribution: Contribution, gen: Any,
            n_hat: Any = None, n_scale: Any = None, medians: Any = None) -> MetricResult:
        """``n_hat``/``n_scale`` (unbounded only): the query's released ``count()`` pair's
        present-row counts and their noise scale (:func:`~privagg.mechanisms.grouped_bounded.count_pair`);
        ``medians`` (unbounded only): releases the query's median of the column from the mean's
        ranges (:func:`~privagg.mechanisms.grouped_mean.friendly_means`)."""
        gv = cand.values[self.column]
        if self.bounds is None:
            from .grouped_mean import friendly_means

            return friendly_means(gv, epsilon=eps, delta=dlt, contribution=contribution, rng=gen,
                                  n_hat=n_hat, n_scale=n_scale, medians=medians)
        from .grouped_bounded import bounded_means

        lo, hi = self.bounds
        return bounded_means(gv, lower=lo, upper=hi, epsilon=eps, contribution=contribution, rng=gen)


@dataclass(frozen=True)
class Quantile(_Metric):
    """``quantile(column, q, bounds=None)``: the q-quantile per group, pure ε-DP."""

    column: str
    q: float
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        _check_column("quantile", self.column)
        q = self.q
        if isinstance(q, bool) or not isinstance(q, numbers.Real) or not (0.0 <= float(q) <= 1.0):
            raise fail("quantile", "q", "a number in [0, 1]", q)
        object.__setattr__(self, "q", float(q))
        object.__setattr__(self, "bounds", _check_bounds("quantile", self.bounds, required=False))

    @property
    def name(self) -> str:
        return f"q{_q_text(self.q)}_{self.column}"

    @property
    def can_fail(self) -> bool:
        return True

    @property
    def interval(self) -> str:
        return "grid_cell"

    @property
    def default_weight(self) -> Fraction:
        return QUANTILE_WEIGHT

    def plan(self, eps: Fraction, dlt: Fraction, contribution: Contribution) -> None:
        from . import grouped_quantile as gq

        a, b = gq.rational_q(self.q)
        box = gq._check_bounds(self.bounds)
        gq.stage_scales(a, b, eps, contribution, bounded=box is not None)

    def run(self, cand: Any, eps: Fraction, dlt: Fraction, contribution: Contribution, gen: Any,
            n_hat: Any = None, windows: Any = None) -> MetricResult:
        """``n_hat``: released noisy counts (the query's ``count()``, or for an unbounded quantile its
        column's unbounded mean's), which size the grid;
        ``windows``: released per-group ranges for the unbounded search to use instead of its
        octave search (the clipping range of the query's unbounded mean of this column)."""
        from .grouped_quantile import quantiles

        return quantiles(cand.values[self.column], self.q, bounds=self.bounds, epsilon=eps,
                         contribution=contribution, rng=gen, n_hat=n_hat, windows=windows)


def count() -> Count:
    """The number of rows per group (with ``units``: bounded rows, = distinct units when
    ``max_rows_per_group=1``)."""
    return Count()


def sum(column: str, bounds: tuple[float, float]) -> Sum:  # noqa: A001 - the public name (api.md)
    """Σ of ``column`` clamped to ``bounds`` = (lo, hi) per group (bounds required)."""
    return Sum(column, bounds)


def mean(column: str, bounds: tuple[float, float] | None = None) -> Mean:
    """The mean of ``column`` per group: bounded with ``bounds`` (output column ``mean_<col>``),
    FriendlyCore without (``mean_<col>``)."""
    return Mean(column, bounds)


def quantile(column: str, q: float, bounds: tuple[float, float] | None = None) -> Quantile:
    """The ``q``-quantile (0 ≤ q ≤ 1) of ``column`` per group."""
    return Quantile(column, q, bounds)


# ------------------------------------------------------------------------------------------------
# the budget split and the selection's parameters (public: functions of the parameters only)
# ------------------------------------------------------------------------------------------------


def split_budget(steps: Sequence[tuple[str, bool] | tuple[str, bool, Any]], epsilon: Any, delta: Any = 0,
                 weights: Mapping[str, Any] | None = None, *, where: str = "aggregate"
                 ) -> dict[str, tuple[Fraction, Fraction]]:
    """{step: (ε_step, δ_step)} for ``steps`` = [(name, needs_delta[, default_weight]), …] in order
    (exact rationals).

    ε_step = ε·w/Σw over all steps; δ_step = δ·w/Σw over the steps that need δ (0 for the others,
    and for all when none needs δ). A step's weight is ``weights[name]`` when given, else its
    default weight (1 when the step does not give one; :func:`aggregate` gives a quantile
    :data:`QUANTILE_WEIGHT` and a mean without bounds :data:`UNBOUNDED_MEAN_WEIGHT`).

    Raises
    ------
    ParameterError
        ``weights`` not a mapping of step names to finite numbers > 0 (an unknown name is refused);
        ``delta`` = 0 while a step needs δ.
    """
    eps = exact(where, "epsilon", epsilon, rule="a finite number > 0", low=Fraction(0), high=None, low_open=True)
    dlt = exact(where, "delta", delta, rule="a number in [0, 1)", low=Fraction(0), high=Fraction(1), low_open=False)
    steps = [(s[0], s[1]) + ((Fraction(s[2]),) if len(s) > 2 else (Fraction(1),)) for s in steps]
    names = [s for s, _, _ in steps]
    w = {s: d for s, _, d in steps}
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise fail(where, "weights", "a mapping {step: weight} or None", weights)
        for key, value in weights.items():
            if key not in w:
                raise fail(where, "weights", "keys among the steps " + ", ".join(map(repr, names)), key)
            w[key] = exact(where, "weights", value, rule="finite numbers > 0", low=Fraction(0), high=None,
                           low_open=True)
    delta_steps = [s for s, need, _ in steps if need]
    if delta_steps and dlt == 0:
        rule = f"a number in (0, 1): the step(s) {', '.join(map(repr, delta_steps))} need δ > 0"
        raise fail(where, "delta", rule, delta)
    total_w = builtins.sum(w.values(), Fraction(0))
    total_dw = builtins.sum((w[s] for s in delta_steps), Fraction(0))
    return {s: (eps * w[s] / total_w, dlt * w[s] / total_dw if need else Fraction(0)) for s, need, _ in steps}


def selection_parameters(epsilon: Any, delta: Any, max_groups: int, replace: bool) -> tuple[Fraction, Fraction]:
    """The (ε, δ) at which each group's keep decision is drawn: (ε_sel/k, δ_sel/k), k = ℓ0 (add/remove)
    or 2ℓ0 (replace), the number of groups whose distinct-unit count one neighbour changes (by ≤ 1)."""
    k = int(max_groups) * (2 if replace else 1)
    return Fraction(epsilon) / k, Fraction(delta) / k


# ------------------------------------------------------------------------------------------------
# the release
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AggregateRelease:
    """The result of :func:`aggregate`.

    Attributes
    ----------
    groups : pandas.DataFrame
        One row per released group: the ``by`` columns, then per metric ``<name>``, ``<name>_low``,
        ``<name>_high`` (the metric's interval), for an unbounded mean ``<name>_clip_low`` /
        ``<name>_clip_high`` (the range the group's values were clamped to, chosen privately: the
        interval covers the mean of the clamped values, so a group whose rows lie beyond the
        range is released biased toward it), and for means and quantiles ``<name>_ok`` /
        ``<name>_reason`` (⊥ and why; NaN clipping range). Rows in the domain's order, or in the
        canonical order of the keys (never record order).
    by : tuple of str
    metrics : tuple of str
        The metric names (output columns), in order.
    epsilon, delta : float
        The guarantee of the whole release (what a ledger is charged); δ = 0 when no step needs δ.
    split : dict
        {step: (ε, δ)} as floats (exact values: :attr:`split_exact`): the selection, one step per
        metric, one step ``"sum_<col>+mean_<col>"`` for a shared sum and mean, and
        ``"count+[sum_<col>+]mean_<col>"`` for a count shared with them (module docstring); the
        values add up to (:attr:`epsilon`, :attr:`delta`).
    privacy_loss : PrivacyLoss
    secure : bool
        Whether the noise came from the secure generator (``rng=None``).
    neighbors : {"add_remove", "replace"}
    unit : bool
        User level (``units`` given).
    max_groups_per_unit, max_rows_per_group : int
    selection : {"domain", "optimal"}
    split_exact : dict
        {step: (Fraction, Fraction)}.
    extra : dict
        {metric: {name: array}}: further public per-group arrays of the metrics (e.g. ``n_hat``).
    intervals : dict
        {metric: kind}: what its ``_low`` / ``_high`` columns are — ``"noise95"`` (counts, sums,
        means: holds the value without noise with probability ≥ 95 % per group; noise only, not
        the clamping bias nor the sampling error) or ``"grid_cell"`` (quantiles: the neighbouring
        candidates of the released one, its resolution; it does not bound the noise).
    """

    groups: Any
    by: tuple[str, ...]
    metrics: tuple[str, ...]
    epsilon: float
    delta: float
    split: dict[str, tuple[float, float]]
    privacy_loss: PrivacyLoss
    secure: bool
    neighbors: str
    unit: bool
    max_groups_per_unit: int
    max_rows_per_group: int
    selection: str
    split_exact: dict[str, tuple[Fraction, Fraction]] = field(default_factory=dict, repr=False)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    intervals: dict[str, str] = field(default_factory=dict, repr=False)

    def to_pandas(self) -> Any:
        """A copy of :attr:`groups`."""
        return self.groups.copy()

    def to_polars(self) -> Any:
        """:attr:`groups` as a polars DataFrame."""
        import polars as pl

        return pl.from_pandas(self.groups)

    def plot(self, path: Any = None) -> Any:
        """A bar chart per metric: the released value and its interval (labelled ``95% noise
        interval`` or ``grid cell``, see :attr:`intervals`) for the first 40 groups, keys escaped.
        Saves to ``path`` when given (format from its suffix) and returns the matplotlib Figure."""
        from ._aggregate_plot import figure

        fig = figure(self)
        if path is not None:
            from ..cli._output import literal_text

            with literal_text():
                fig.savefig(path, dpi=120)
        return fig

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"mechanism": "aggregate", "epsilon", "delta", "by", "split", "groups": [...]}``
        (NaN → None, numpy scalars → Python, dates → ISO text) plus the other public fields, among
        them ``"intervals"``: {metric: ``"noise95"`` | ``"grid_cell"``} (:attr:`intervals`)."""
        columns = {c: _json_column(self.groups[c].to_numpy()) for c in self.groups.columns}
        n = len(self.groups)
        rows = [{c: columns[c][i] for c in self.groups.columns} for i in range(n)]  # released rows only
        return {
            "mechanism": "aggregate",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "by": list(self.by),
            "metrics": list(self.metrics),
            "split": {k: {"epsilon": e, "delta": d} for k, (e, d) in self.split.items()},
            "intervals": {m: self.intervals.get(m, "noise95") for m in self.metrics},
            "neighbors": self.neighbors,
            "unit": self.unit,
            "max_groups_per_unit": self.max_groups_per_unit,
            "max_rows_per_group": self.max_rows_per_group,
            "selection": self.selection,
            "secure": self.secure,
            "groups": rows,
        }


def _json_column(values: np.ndarray) -> list[Any]:
    out = []
    for v in values.tolist():
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        elif isinstance(v, np.generic):
            v = v.item()
        if hasattr(v, "isoformat"):
            v = v.isoformat()
        elif isinstance(v, (bytes, bytearray)):
            v = v.decode("utf-8", "backslashreplace")
        out.append(v)
    return out


# ------------------------------------------------------------------------------------------------
# aggregate
# ------------------------------------------------------------------------------------------------


def _check_by(where: str, by: Any) -> tuple[str, ...]:
    cols = (by,) if isinstance(by, str) else tuple(by) if isinstance(by, (list, tuple)) else None
    rule = "a column name or a non-empty list of distinct column names"
    if not cols or any(not isinstance(c, str) or not c for c in cols) or len(set(cols)) != len(cols):
        raise fail(where, "by", rule, by)
    return cols


def _check_metrics(where: str, metrics: Any) -> tuple[_Metric, ...]:
    rule = "a non-empty list of metrics (privagg.count(), sum(), mean(), quantile()) with distinct names"
    if isinstance(metrics, _Metric):
        metrics = [metrics]
    if not isinstance(metrics, (list, tuple)) or not metrics or not all(isinstance(m, _Metric) for m in metrics):
        raise fail(where, "metrics", rule, metrics)
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise fail(where, "metrics", rule, f"{dup!r} twice")
    return tuple(metrics)


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return isinstance(v, (float, np.floating)) and math.isnan(v)
    except TypeError:
        return False


def _frame_rows(where: str, domain: Any, by: tuple[str, ...], rule: str) -> list[Any]:
    """The rows of a pandas/polars DataFrame or pyarrow Table domain, its ``by`` columns in
    ``by``'s order (keys, or ``len(by)``-tuples); a frame without every ``by`` column is refused."""
    names = [str(c) for c in domain.columns] if hasattr(domain, "columns") else []
    if type(domain).__module__.split(".")[0] == "pyarrow":
        names = list(domain.column_names)
    missing = [c for c in by if c not in names]
    if missing:
        raise fail(where, "domain", rule + f" (a table domain needs the columns {list(by)})",
                   f"a table with columns {names}")
    if type(domain).__module__.split(".")[0] == "pandas":
        cols = [domain[c].tolist() for c in by]
    elif type(domain).__module__.split(".")[0] == "polars":
        cols = [domain.get_column(c).to_list() for c in by]
    else:
        cols = [domain.column(c).to_pylist() for c in by]
    return cols[0] if len(by) == 1 else list(zip(*cols, strict=True))


def _check_domain(where: str, domain: Any, by: tuple[str, ...]) -> list[list[Any]] | None:
    """The public domain as one list per ``by`` column (validated shape; cast later, in DuckDB).

    A list of keys (of ``len(by)``-tuples for several ``by`` columns), a numpy array, a pandas /
    polars Series or pyarrow Array of keys, or a pandas / polars DataFrame or pyarrow Table holding
    the ``by`` columns (its rows, in its order)."""
    if domain is None:
        return None
    width = len(by)
    rule = ("a non-empty list of keys" if width == 1 else f"a non-empty list of {width}-tuples of keys") + \
        " (no None/NaN), in the order of the release"
    if isinstance(domain, (set, frozenset, dict, str, bytes)):
        raise fail(where, "domain", rule + " (not a set)", type(domain).__name__)
    if isinstance(domain, np.ndarray):
        domain = domain.tolist() if domain.ndim == 1 else [tuple(r) for r in domain.tolist()]
    elif type(domain).__module__.split(".")[0] in ("pandas", "polars", "pyarrow"):
        if hasattr(domain, "columns") or hasattr(domain, "column_names"):
            domain = _frame_rows(where, domain, by, rule)
        else:
            domain = list(domain.to_list() if hasattr(domain, "to_list") else domain.to_pylist())
    if not isinstance(domain, (list, tuple, range)) or len(domain) == 0:
        raise fail(where, "domain", rule, domain)
    cols: list[list[Any]] = [[] for _ in range(width)]
    for key in domain:  # the domain is public: a loop over its keys reveals nothing
        parts = (key,) if width == 1 else key
        if width > 1 and (not isinstance(key, tuple) or len(key) != width):
            raise fail(where, "domain", rule, key)
        for j, v in enumerate(parts):
            if _missing(v) or isinstance(v, (list, dict, set, tuple)):
                raise fail(where, "domain", rule, key)
            cols[j].append(v.item() if isinstance(v, np.generic) else v)
    return cols


def _check_unit_bounds(where: str, units: Any, l0: Any, linf: Any) -> tuple[int, int]:
    if units is None:
        for name, v in (("max_groups_per_unit", l0), ("max_rows_per_group", linf)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) != 1:
                raise fail(where, name, "left at 1 without units (it bounds a privacy unit's contribution)", v)
        return 1, 1
    return (check_positive_int(where, "max_groups_per_unit", l0, 1, MAX_BOUND),
            check_positive_int(where, "max_rows_per_group", linf, 1, MAX_BOUND))


def aggregate(
    table: Any,
    *,
    by: str | Sequence[str],
    metrics: Sequence[Any],
    epsilon: Any,
    delta: Any = 0.0,
    domain: Any = None,
    units: Any = None,
    max_groups_per_unit: int = 1,
    max_rows_per_group: int = 1,
    neighbors: str = "add_remove",
    weights: Mapping[str, Any] | None = None,
    where: str | None = None,
    rng: Any = None,
    ledger: Any = None,
    csv: Any = None,
) -> AggregateRelease:
    """Differentially private group-by: every metric for every released group, in one pass.

    Parameters
    ----------
    table : str, Path, pandas/polars DataFrame, pyarrow Table or DuckDB relation
        A CSV/Parquet path is read by DuckDB as :mod:`privagg.engines.duckdb` reads files (CSV
        columns are text: keys as written, metric columns parsed as numbers).
    by : str or list of str
        The key column(s); rows with a NULL key (in any of them) are dropped (declared, 1-stable).
    metrics : list
        :func:`count`, :func:`sum`, :func:`mean`, :func:`quantile` (distinct names). In a metric
        column a missing, non-numeric, NaN or ±inf value drops the row for that metric only.
    epsilon, delta : float
        The whole release's budget, split across the steps (module docstring; ``weights``). δ > 0 is
        needed without a domain (key selection) and for a mean without bounds.
    domain : list, array, Series or table, optional
        The public keys (tuples for several ``by`` columns), all released, in this order, absent
        ones included; rows with other keys are dropped. A pandas/polars DataFrame or pyarrow
        Table gives its rows' ``by`` columns (by name). None: keys chosen privately (one
        selection shared by all metrics).
    units : str or array, optional
        The privacy-unit column (or, for in-memory tables, an array aligned with the rows). Each
        unit keeps at most ``max_groups_per_unit`` groups (chosen at random by a keyed priority)
        and at most ``max_rows_per_group`` rows in each (chosen by a keyed hash of the row's own
        values). None: record level.
    max_groups_per_unit, max_rows_per_group : int
        ℓ0 and ℓ∞ (only with ``units``).
    neighbors : {"add_remove", "replace"}
        Add/remove one unit (record), or replace one by another.
    weights : dict, optional
        {step: weight > 0} for the split (steps: ``"selection"`` and the metric names; a shared
        sum and mean get the sum of their two weights, a shared count, sum and mean the three).
        A step not named keeps its default: 3/2 for a quantile, 2 for a mean without bounds, 1
        for the others.
    where : str, optional
        A public SQL filter over the table's columns (checked by
        :func:`privagg.engines.where.check_where`; 1-stable; a row whose evaluation fails is
        dropped). It is bound to the table's column types before anything is read, so a type
        error is a ParameterError naming ``'where'``. Every column of a CSV file is text
        (VARCHAR, by design: keys are kept as written), so compare it with a string
        (``"city = 'Oslo'"``) or CAST it for a numeric comparison:
        ``where="TRY_CAST(age AS DOUBLE) >= 18"`` (``"age >= 18"`` is refused for a CSV file).
    rng : None, int, SeedSequence or Generator
        ``None``: the secure generator (``secure=True``).
    ledger : privagg.accounting.Ledger, optional
        Charged once with the total (ε, δ) after every check and every read of the data, before
        any noise; after the charge nothing can fail.
    csv : privagg.engines.duckdb.CsvOptions, optional
        The dialect of a CSV file (delimiter, encoding, quote); None: the default (``,``, UTF-8,
        ``"``). Only for a file path.

    Returns
    -------
    AggregateRelease

    Raises
    ------
    ParameterError
        Naming the parameter; never because of a value of the data. Raised before the ledger is
        charged — including a metric that refuses its share of the budget (e.g. an ε share so
        small that the noise scale would overflow) or its bounds.
    BudgetExceededError
        From ``ledger``; nothing is released.

    Privacy
    -------
    (ε, δ)-DP (δ = 0 when no step needs δ) for the chosen neighbour relation, of records or (with
    ``units``) of privacy units: docs/proofs/aggregate.md.
    """
    caller = "aggregate"
    by_cols = _check_by(caller, by)
    mets = _check_metrics(caller, metrics)
    out_names = [m.name for m in mets]
    for c in by_cols:
        if any(c == n or c.startswith(n + "_") and c[len(n) + 1:] in ("low", "high", "ok", "reason")
               for n in out_names):
            raise fail(caller, "by", "columns whose names differ from the output columns", c)
    eps = exact(caller, "epsilon", epsilon, rule="a finite number > 0", low=Fraction(0), high=None, low_open=True)
    dlt = exact(caller, "delta", delta, rule="a number in [0, 1)", low=Fraction(0), high=Fraction(1), low_open=False)
    l0, linf = _check_unit_bounds(caller, units, max_groups_per_unit, max_rows_per_group)
    check_choice(caller, "neighbors", neighbors, NEIGHBORS)
    replace = neighbors == "replace"
    dom = _check_domain(caller, domain, by_cols)
    if where is not None and not isinstance(where, str):
        raise fail(caller, "where", "a SQL boolean expression (str) or None", where)
    steps = ([("selection", True, 1)] if dom is None else []) + [(m.name, m.needs_delta, m.default_weight)
                                                                  for m in mets]
    shares = split_budget(steps, eps, dlt, weights, where=caller)  # per metric (weights by metric name)
    contribution = Contribution(max_groups=l0, max_rows=linf, replace=replace)
    shared = _shared_pairs(mets, shares, contribution)
    joint = _count_joint(mets, shares, shared, contribution)
    split = _merge_split(shares, shared, joint)
    if dom is None:
        from .partition_selection import keep_numerators

        sel_eps, sel_dlt = selection_parameters(*split["selection"], l0, replace)
        keep_numerators(sel_eps, sel_dlt, where=caller)  # validates ε_sel/k (a public parameter)
    for m in mets:  # every metric's own public checks at its share: after the charge nothing fails
        if m.name in shared or joint is not None and m.name in joint.names:
            continue  # planned by share_plan / count_share_plan at the shared step's ε
        try:
            m.plan(*split[m.name], contribution)
        except ParameterError as exc:
            e_m, d_m = split[m.name]
            share = f"ε = {float(e_m):.6g}" + (f", δ = {float(d_m):.6g}" if m.needs_delta else "")
            raise ParameterError(f"{caller}: the metric {m.name!r} cannot run at its share of the budget "
                                 f"({share}) with these parameters (raise epsilon/delta or its weight, "
                                 f"or change its bounds): {exc}") from None
    from ..noise.rng import resolve_rng

    gen, secure = resolve_rng(rng, caller)
    columns = list(dict.fromkeys(m.column for m in mets if getattr(m, "column", None) is not None))
    from ..engines.base import draw_secret
    from ..engines.grouped import open_table

    with open_table(table, by=by_cols, units=units, columns=columns, where=where, caller=caller,
                    csv=csv) as tab:
        secrets = (draw_secret(gen), draw_secret(gen)) if units is not None else (0, 0)
        cand = tab.prepare(domain=dom, max_groups=l0, max_rows=linf, secrets=secrets,
                           sums=_sums_only(mets), kept_rows=_kept_rows(mets))
    # rows an engine keeps where they live (Spark: the unbounded means' and quantiles' columns), freed at the end
    kept = [v for v in cand.values.values() if hasattr(v, "close")]
    try:
        if not secure:  # seeded: the same release for the same seed, whatever order the engine's rows came in
            cand = _canonical(cand, [m.column for m in mets if isinstance(m, Mean) and m.bounds is None])
        total_eps = builtins.sum((e for e, _ in split.values()), Fraction(0))
        total_dlt = builtins.sum((d for _, d in split.values()), Fraction(0))
        loss = PrivacyLoss.approx(total_eps, total_dlt) if total_dlt > 0 else PrivacyLoss.pure(total_eps)
        if ledger is not None:
            ledger.charge(loss, mechanism=caller, parameters={
                "by": list(by_cols), "metrics": out_names, "epsilon": total_eps, "delta": total_dlt,
                "split": {k: [str(e), str(d)] for k, (e, d) in split.items()}, "neighbors": neighbors,
                "unit": units is not None, "max_groups_per_unit": l0, "max_rows_per_group": linf,
                "domain_size": None if dom is None else len(dom[0])})
        # ---- after the charge: numpy and noise only (and, on Spark, the passes over kept rows) -------
        if dom is None:
            from .partition_selection import select

            keep = select(cand.units, sel_eps, sel_dlt, gen)
            cand = cand.restrict(keep)
        results: dict[str, MetricResult] = {}
        feed = _count_feed(mets, joint)
        fed: tuple[Any, Fraction] | None = None
        # in the query's order (the draws' order is public), except that quantiles come last: a bounded
        # quantile sizes its grid from the released count() when the query has one (post-processing),
        # an unbounded one takes its groups' windows from an unbounded mean of its column,
        # and a count() that feeds an unbounded mean comes first (docs/proofs/aggregate_mean.md §8.1);
        # an unbounded mean whose column has an unbounded median in the query comes after the other
        # metrics, and releases that median between its ranges and its sums (§8.3)
        centred = _centred_medians(mets)

        def medians(m: _Metric) -> Any:
            q = centred.get(m.name)
            if q is None:
                return None

            def release(n_hat: Any, low: Any, high: Any) -> Any:
                n_q = _quantile_counts(q, mets, results, n_hat)
                results[q.name] = (q.run(cand, *split[q.name], contribution, gen, n_hat=n_q, windows=(low, high))
                                   if n_q is not None else q.run(cand, *split[q.name], contribution, gen))
                return results[q.name].value
            return release

        for m in sorted(mets, key=lambda m: (isinstance(m, Quantile), m.name in centred,
                                             not (feed is not None and isinstance(m, Count)))):
            if m.name in results:
                continue
            if feed is not None and isinstance(m, Count):
                if cand.size:
                    from .grouped_bounded import count_pair

                    results[m.name], fed = count_pair(cand.rows, cand.values[feed.column], split[m.name][0],
                                                      contribution, gen)
                else:
                    results[m.name] = _empty(m)
                continue
            if m is feed and fed is not None:
                results[m.name] = m.run(cand, *split[m.name], contribution, gen, n_hat=fed[0], n_scale=fed[1],
                                        medians=medians(m))
                continue
            if joint is not None and m.name in joint.names:
                if cand.size:
                    from .grouped_bounded import shared_count_means

                    lo, hi = joint.mean.bounds
                    r_c, r_s, r_m = shared_count_means(
                        cand.rows, cand.values[joint.mean.column], lower=lo, upper=hi,
                        epsilon_count=joint.epsilon_count, epsilon_group=joint.epsilon_group,
                        contribution=contribution, rng=gen, with_sum=joint.sum is not None,
                        epsilon_sum=joint.epsilon_sum)
                else:
                    r_c, r_s, r_m = _empty(joint.count), _empty(joint.mean), _empty(joint.mean)
                results[joint.count.name], results[joint.mean.name] = r_c, r_m
                if joint.sum is not None:
                    results[joint.sum.name] = r_s
                continue
            if m.name in shared:
                s_m, b_m = shared[m.name]
                if cand.size:
                    from .grouped_bounded import shared_sums_means

                    lo, hi = s_m.bounds
                    results[s_m.name], results[b_m.name] = shared_sums_means(
                        cand.values[s_m.column], lower=lo, upper=hi, epsilon=split[_joined(s_m, b_m)][0],
                        contribution=contribution, rng=gen)
                else:
                    results[s_m.name], results[b_m.name] = _empty(s_m), _empty(b_m)
                continue
            n_hat = _quantile_counts(m, mets, results) if isinstance(m, Quantile) else None
            if n_hat is not None:
                results[m.name] = (m.run(cand, *split[m.name], contribution, gen, n_hat=n_hat,
                                         windows=_mean_window(m, mets, results))
                                   if cand.size else _empty(m))
                continue
            if m.name in centred:
                results[m.name] = (m.run(cand, *split[m.name], contribution, gen, medians=medians(m))
                                   if cand.size else _empty(m))
                continue
            results[m.name] = m.run(cand, *split[m.name], contribution, gen) if cand.size else _empty(m)
        return _release(cand, by_cols, mets, results, split, loss, secure, neighbors, units is not None, l0, linf,
                        "domain" if dom is not None else "optimal")
    finally:
        for v in kept:
            v.close()


def _quantile_counts(q: Quantile, mets: tuple[_Metric, ...], results: dict[str, MetricResult],
                     mean_n_hat: Any = None) -> Any:
    """The released noisy counts a quantile reads (post-processing; None: none): the query's
    ``count()``; else, for an unbounded quantile, the ``n_hat`` its column's unbounded ``mean`` has
    released (its own count of the column's rows), so that it takes that mean's windows too
    (``mean_n_hat``: that count, from inside the mean, §8.3 of aggregate_mean.md)."""
    if "count" in results:
        return results["count"].value
    if q.bounds is None and mean_n_hat is not None:
        return mean_n_hat
    if q.bounds is None:
        mean = _unbounded_mean(q, mets, results)
        if mean is not None and "n_hat" in (mean.extra or {}):
            return mean.extra["n_hat"]
    return None


def _unbounded_mean(q: Quantile, mets: tuple[_Metric, ...], results: dict[str, MetricResult]) -> Any:
    """The release of the query's first unbounded ``mean(col)`` of the quantile's column (already
    drawn: quantiles come last), or None."""
    for m in mets:
        if isinstance(m, Mean) and m.bounds is None and m.column == q.column and m.name in results:
            return results[m.name]
    return None


def _centred_medians(mets: tuple[_Metric, ...]) -> dict[str, Quantile]:
    """The unbounded ``mean(col)`` names whose column has an unbounded ``quantile(col, 0.5)`` in
    the query, each with that quantile (public: the query): the mean's small groups take their
    sums around the released medians (docs/proofs/aggregate_mean.md §8.3)."""
    out: dict[str, Quantile] = {}
    for m in mets:
        if isinstance(m, Mean) and m.bounds is None:
            for q in mets:
                if isinstance(q, Quantile) and q.bounds is None and q.q == 0.5 and q.column == m.column:
                    out[m.name] = q
                    break
    return out


def _mean_window(q: Quantile, mets: tuple[_Metric, ...], results: dict[str, MetricResult]) -> Any:
    """The released clipping range ``(clip_low, clip_high)`` per group of the query's first
    unbounded ``mean(col)`` of the quantile's column (already drawn: quantiles come last), for an
    unbounded quantile; else None. Post-processing of that mean's release (docs/proofs/
    aggregate_quantile.md §5c)."""
    if q.bounds is not None:
        return None
    mean = _unbounded_mean(q, mets, results)
    extra = {} if mean is None else (mean.extra or {})
    if "window_low" in extra and "window_high" in extra:  # the ranges the query's median had (§8.3)
        return extra["window_low"], extra["window_high"]
    if "clip_low" in extra and "clip_high" in extra:
        return extra["clip_low"], extra["clip_high"]
    return None


def _count_feed(mets: tuple[_Metric, ...], joint: _Joint | None) -> Mean | None:
    """The first unbounded ``mean(col)`` in the query's order when the query has ``count()`` and
    the count is not joined with a bounded mean (:func:`_count_joint`), else None (public). Its
    count is then released as the pair :func:`~privagg.mechanisms.grouped_bounded.count_pair` and the mean reads that pair's ``p̃``
    instead of a count of its own (docs/proofs/aggregate_mean.md §8.1)."""
    if joint is not None or not any(isinstance(m, Count) for m in mets):
        return None
    return next((m for m in mets if isinstance(m, Mean) and m.bounds is None), None)


def _joined(s: Sum, m: Mean) -> str:
    """The name of the step a shared sum and mean are released by: ``sum_<col>+mean_<col>``."""
    return f"{s.name}+{m.name}"


def _shared_pairs(mets: tuple[_Metric, ...], shares: dict[str, tuple[Fraction, Fraction]],
                  contribution: Contribution) -> dict[str, tuple[Sum, Mean]]:
    """{metric name: (sum, mean)} for every ``sum(col, b)`` and bounded ``mean(col, b)`` of the
    same column and bounds that :func:`~privagg.mechanisms.grouped_bounded.share_plan` shares
    (public: the metrics, their ε shares and the contribution; ParameterError before the charge
    when neither way can run). count() is not shared here (it counts rows, the mean's count the rows
    whose value in the column is present, and which rows those are is data): see
    :func:`_count_joint`."""
    from .grouped_bounded import share_plan

    sums = {(m.column, m.bounds): m for m in mets if isinstance(m, Sum)}
    out: dict[str, tuple[Sum, Mean]] = {}
    for m in mets:
        if not isinstance(m, Mean) or m.bounds is None or (m.column, m.bounds) not in sums:
            continue
        s = sums[(m.column, m.bounds)]
        try:
            plan = share_plan(lower=m.bounds[0], upper=m.bounds[1], epsilon_sum=shares[s.name][0],
                              epsilon_mean=shares[m.name][0], contribution=contribution)
        except ParameterError as exc:
            raise ParameterError(f"aggregate: the metrics {s.name!r} and {m.name!r} cannot run at their "
                                 f"shares of the budget (ε = {float(shares[s.name][0]):.6g} and "
                                 f"{float(shares[m.name][0]):.6g}) with these parameters (raise epsilon "
                                 f"or their weights, or change their bounds): {exc}") from None
        if plan.shared:
            out[s.name] = out[m.name] = (s, m)
    return out


@dataclass(frozen=True)
class _Joint:
    """``count()`` released with a bounded mean (and its shared sum): one step (§8 of
    docs/proofs/aggregate_bounded.md)."""

    count: Count
    sum: Sum | None
    mean: Mean
    epsilon_count: Fraction
    epsilon_group: Fraction
    epsilon_sum: Fraction = Fraction(0)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in (self.count, self.sum, self.mean) if m is not None)

    @property
    def step(self) -> str:
        """``count+mean_<col>`` or ``count+sum_<col>+mean_<col>``."""
        return "+".join(self.names)


def _count_joint(mets: tuple[_Metric, ...], shares: dict[str, tuple[Fraction, Fraction]],
                 shared: dict[str, tuple[Sum, Mean]], contribution: Contribution) -> _Joint | None:
    """``count()`` with the FIRST bounded ``mean(col, b)`` in the query's order (with its sum when
    :func:`_shared_pairs` shares them) for which
    :func:`~privagg.mechanisms.grouped_bounded.count_share_plan` says the count is no noisier;
    None if there is no count, no such mean, or the rule says no. Public: the metrics, their ε
    shares and the contribution. A step that refuses its parameters is not shared (the metrics'
    own checks then decide)."""
    from .grouped_bounded import count_share_plan

    cnt = next((m for m in mets if isinstance(m, Count)), None)
    if cnt is None:
        return None
    for m in mets:
        if not isinstance(m, Mean) or m.bounds is None:
            continue
        s = shared[m.name][0] if m.name in shared else None
        e_g = shares[m.name][0] + (shares[s.name][0] if s is not None else 0)
        e_c = shares[cnt.name][0]
        e_s = shares[s.name][0] if s is not None else Fraction(0)
        try:
            plan = count_share_plan(lower=m.bounds[0], upper=m.bounds[1], epsilon_count=e_c,
                                    epsilon_group=e_g, contribution=contribution, epsilon_sum=e_s)
        except ParameterError:
            continue
        if plan.shared:
            return _Joint(cnt, s, m, e_c, e_g, e_s)
    return None


def _merge_split(shares: dict[str, tuple[Fraction, Fraction]], shared: dict[str, tuple[Sum, Mean]],
                 joint: _Joint | None = None) -> dict[str, tuple[Fraction, Fraction]]:
    """The steps as released: ``joint``'s metrics become one step ``count+[sum_<col>+]mean_<col>``
    with ε = ε_count + ε_G; each other shared pair's two shares one step ``sum_<col>+mean_<col>``
    with ε = their sum; each at its first member's place, pure ε (δ = 0); the others as they are."""
    out: dict[str, tuple[Fraction, Fraction]] = {}
    for name, (e, d) in shares.items():
        if joint is not None and name in joint.names:
            if joint.step not in out:
                out[joint.step] = (joint.epsilon_count + joint.epsilon_group, Fraction(0))
            continue
        if name not in shared:
            out[name] = (e, d)
            continue
        s, m = shared[name]
        key = _joined(s, m)
        if key not in out:
            out[key] = (shares[s.name][0] + shares[m.name][0], Fraction(0))
    return out


def _sums_only(mets: tuple[_Metric, ...]) -> dict[str, list[tuple[float, float]]]:
    """{column: [bounds, …]} for the columns that only bounded sums and means read (their present
    counts and clamped integer sums): the engines compute those where the rows live instead of
    fetching the values (DuckDB, Spark). A column that a quantile or an unbounded mean reads is not here."""
    raw = {m.column for m in mets
           if isinstance(m, Quantile) or (isinstance(m, Mean) and m.bounds is None)}
    out: dict[str, list[tuple[float, float]]] = {}
    for m in mets:
        if isinstance(m, (Sum, Mean)) and m.column not in raw:
            out.setdefault(m.column, []).append(m.bounds)
    return out


def _kept_rows(mets: tuple[_Metric, ...]) -> dict[str, list[tuple[float, float]]]:
    """{column: [bounds, …]} for the columns that unbounded means or quantiles read, with the bounds
    of the column's bounded sums and means: an engine that keeps rows where they live (Spark)
    serves these through :class:`~privagg.mechanisms.grouped.KeptRows` (the unbounded mean's
    per-row passes, the quantile's bin counts) plus present counts and clamped integer sums,
    without fetching the column; the local engines fetch it."""
    raw = sorted({m.column for m in mets
                  if isinstance(m, Quantile) or (isinstance(m, Mean) and m.bounds is None)})
    out: dict[str, list[tuple[float, float]]] = {c: [] for c in raw}
    for m in mets:
        if isinstance(m, (Sum, Mean)) and m.column in out and m.bounds is not None:
            out[m.column].append(m.bounds)
    return out


def _empty(metric: _Metric) -> MetricResult:
    z = np.zeros(0, dtype=np.float64)
    return MetricResult(value=z, low=z, high=z, ok=np.zeros(0, dtype=bool), reason=np.zeros(0, dtype=object),
                        epsilon=0.0)


def _canonical(cand: Any, columns: list[str]) -> Any:
    """``cand`` with each group's values of ``columns`` (the unbounded means': their subsample
    draws one uniform per row position) in ascending order of their bits' total order (−0.0
    before +0.0): a function of each group's multiset of values, not of the order the engine
    returned them in (DuckDB's parallel ``ORDER BY i`` and Spark vary it). Seeded mode only: with
    the CSPRNG the order changes nothing (i.i.d. draws). The other metrics do not depend on row
    order (counts, exact integer sums, per-candidate counts)."""
    import dataclasses

    from .grouped import GroupedValues
    from .grouped_mean import _group_value_sort

    values = dict(cand.values)
    for c in dict.fromkeys(columns):
        gv = values[c]
        if not isinstance(gv, GroupedValues):  # rows kept by the engine (Spark): it orders them itself
            continue
        gdt = np.int16 if gv.n_groups < 2**15 else np.int32 if gv.n_groups < 2**31 else np.int64
        values[c] = GroupedValues(group=gv.group, values=_group_value_sort(gv.values, gv.group, gv.n_groups, gdt),
                                  n_groups=gv.n_groups)
    return dataclasses.replace(cand, values=values)


def _release(cand: Any, by: tuple[str, ...], mets: tuple[_Metric, ...], results: dict[str, MetricResult],
             split: dict[str, tuple[Fraction, Fraction]], loss: PrivacyLoss, secure: bool, neighbors: str,
             unit: bool, l0: int, linf: int, selection: str) -> AggregateRelease:
    import pandas as pd

    data: dict[str, Any] = {c: k for c, k in zip(by, cand.keys, strict=True)}
    extra: dict[str, dict[str, Any]] = {}
    for m in mets:
        r = results[m.name]
        data[m.name] = np.asarray(r.value, dtype=np.float64)
        data[m.name + "_low"] = np.asarray(r.low, dtype=np.float64)
        data[m.name + "_high"] = np.asarray(r.high, dtype=np.float64)
        if isinstance(m, Mean) and m.bounds is None and "clip_low" in (r.extra or {}):
            # the range each group's values were clamped to, chosen privately (released values)
            data[m.name + "_clip_low"] = np.asarray(r.extra["clip_low"], dtype=np.float64)
            data[m.name + "_clip_high"] = np.asarray(r.extra["clip_high"], dtype=np.float64)
        if m.can_fail:
            data[m.name + "_ok"] = np.asarray(r.ok, dtype=bool)
            data[m.name + "_reason"] = np.asarray(r.reason, dtype=object)
        if r.extra:
            extra[m.name] = dict(r.extra)
    groups = pd.DataFrame(data)
    return AggregateRelease(
        groups=groups, by=by, metrics=tuple(m.name for m in mets), epsilon=float(loss.epsilon),
        delta=float(loss.delta), split={k: (float(e), float(d)) for k, (e, d) in split.items()},
        privacy_loss=loss, secure=secure, neighbors=neighbors, unit=unit, max_groups_per_unit=l0,
        max_rows_per_group=linf, selection=selection, split_exact=dict(split), extra=extra,
        intervals={m.name: m.interval for m in mets})

