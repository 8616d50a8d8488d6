"""From friendly DP to DP: the conversion theorem, its inverse, and the wrapper for user algorithms.

Conversion theorem (proof: ``docs/proofs/friendlycore.md``). If ``A`` is (ε, δ)-f-friendly-DP on
multisets, then ``D ↦ A(BasicFilter(D, f, α))`` is (ε', δ')-DP under add/remove neighbours with::

    L  = 2(1 − α)/(1 − 2α) + α
    ε' = L·(e^ε − 1)
    δ' = δ·(e^ε' − 1)/(e^ε − 1)

:func:`end_to_end_budget` computes (ε', δ') and :func:`friendly_budget` its inverse; both work in
60-digit arithmetic and round toward the safe side (ε', δ' up; ε, δ down), so
``end_to_end_budget(*friendly_budget(ε', δ'))`` never exceeds ``(ε', δ')``.

The one way to wrap your own friendly algorithm::

    mech = privagg.friendlycore.friendly(
        my_algorithm,               # my_algorithm(core, rng) -> output; (ε, δ)-friendly-DP
        eps_friendly=ε, delta_friendly=δ, predicate=privagg.predicates.ball(r), alpha=0.0)
    mech.epsilon, mech.delta        # end-to-end guarantee, known before any data is seen
    release = mech(points)          # FriendlyRelease(output, epsilon, delta, secure)

``my_algorithm`` receives the core as a uniformly shuffled array (the proof needs a multiset)
and the generator to draw its own noise from. To spend a target end-to-end budget, get the
friendly parameters first: ``eps, delta = privagg.friendly_budget(target_eps, target_delta)``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from .._validate import check_finite_positive, fail, quiet_numerics
from ..noise.rng import resolve_rng
from .filter import alpha_fraction, core_mask
from .predicates import Predicate, as_predicate

__all__ = [
    "FriendlyMechanism",
    "FriendlyRelease",
    "end_to_end_budget",
    "friendly",
    "friendly_budget",
    "movement_bound",
]

_DPS = 60


def _alpha_mp(where: str, alpha: Any) -> mpmath.mpf:
    """The given α exactly (not the filter's α̃ <= α: L is increasing, so L(α) is safe)."""
    alpha_fraction(alpha, where)  # validates
    frac = Fraction(alpha)
    return mpmath.mpf(frac.numerator) / frac.denominator


def _check_delta0(where: str, name: str, value: Any) -> float:
    rule = "a number in [0, 1)"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise fail(where, name, rule, value)
    x = float(value)
    if not 0.0 <= x < 1.0:
        raise fail(where, name, rule, value)
    return x


def _round(x: mpmath.mpf, up: bool) -> float:
    f = float(x)
    if up and mpmath.mpf(f) < x:
        f = math.nextafter(f, math.inf)
    elif not up and mpmath.mpf(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _movement(alpha: mpmath.mpf) -> mpmath.mpf:
    return 2 * (1 - alpha) / (1 - 2 * alpha) + alpha


def movement_bound(alpha: Any = 0.0) -> float:
    """``L(α) = 2(1 − α)/(1 − 2α) + α`` (rounded up): the worst-case total movement of the keep
    probabilities between add/remove neighbours, the new element included."""
    where = "movement_bound"
    with mpmath.workdps(_DPS):
        return _round(_movement(_alpha_mp(where, alpha)), up=True)


def end_to_end_budget(
    eps_friendly: Any, delta_friendly: Any, *, alpha: Any = 0.0
) -> tuple[float, float]:
    """End-to-end (ε', δ') of ``A ∘ BasicFilter`` for an (ε, δ)-friendly-DP ``A``.

    Parameters
    ----------
    eps_friendly : float
        ε of the friendly algorithm, finite and > 0.
    delta_friendly : float
        δ of the friendly algorithm, in [0, 1) (0: pure DP is preserved).
    alpha : float
        The filter's α, in [0, 1/2).

    Returns
    -------
    (float, float)
        ``ε' = L(e^ε − 1)`` and ``δ' = δ(e^ε' − 1)/(e^ε − 1)``, both rounded up.

    Examples
    --------
    >>> eps, delta = end_to_end_budget(0.5, 0.0)
    >>> round(eps, 6), delta
    (1.297443, 0.0)
    """
    where = "end_to_end_budget"
    eps = check_finite_positive(where, "eps_friendly", eps_friendly)
    delta = _check_delta0(where, "delta_friendly", delta_friendly)
    with mpmath.workdps(_DPS):
        big_l = _movement(_alpha_mp(where, alpha))
        growth = mpmath.expm1(mpmath.mpf(eps))
        eps_out = big_l * growth
        delta_out = mpmath.mpf(delta) * mpmath.expm1(eps_out) / growth
        return _round(eps_out, up=True), _round(delta_out, up=True)


def friendly_budget(
    epsilon: Any, delta: Any, *, alpha: Any = 0.0
) -> tuple[float, float]:
    """The friendly (ε, δ) that a friendly algorithm may use for an end-to-end (ε', δ') target.

    Inverse of :func:`end_to_end_budget`: ``ε = ln(1 + ε'/L)`` and
    ``δ = δ'(e^ε − 1)/(e^ε' − 1)``, both rounded down (so the pair never overshoots).

    Parameters
    ----------
    epsilon : float
        Target end-to-end ε', finite and > 0.
    delta : float
        Target end-to-end δ', in [0, 1).
    alpha : float
        The filter's α, in [0, 1/2).

    Returns
    -------
    (float, float)
        ``(eps_friendly, delta_friendly)``.

    Examples
    --------
    >>> eps, delta = friendly_budget(1.0, 1e-6)
    >>> round(eps, 6)
    0.405465
    """
    where = "friendly_budget"
    target_eps = check_finite_positive(where, "epsilon", epsilon)
    target_delta = _check_delta0(where, "delta", delta)
    with mpmath.workdps(_DPS):
        big_l = _movement(_alpha_mp(where, alpha))
        eps = _round(mpmath.log1p(mpmath.mpf(target_eps) / big_l), up=False)
        ratio = mpmath.expm1(mpmath.mpf(eps)) / mpmath.expm1(mpmath.mpf(target_eps))
        return eps, _round(mpmath.mpf(target_delta) * ratio, up=False)


@dataclass(frozen=True)
class FriendlyRelease:
    """What a wrapped friendly algorithm released, with its end-to-end guarantee.

    Attributes: ``output`` (whatever the algorithm returned), ``epsilon`` and ``delta`` (the
    end-to-end (ε', δ') under add/remove neighbours), ``secure`` (drawn from the secure
    generator). Holds no core, counts or mask.
    """

    output: Any
    epsilon: float
    delta: float
    secure: bool

    @property
    def privacy_loss(self) -> Any:
        """The end-to-end guarantee as a :class:`privagg.accounting.PrivacyLoss` (exact floats)."""
        return _loss(self.epsilon, self.delta)


def _loss(epsilon: float, delta: float) -> Any:
    from ..accounting import PrivacyLoss

    if delta == 0:
        return PrivacyLoss.pure(Fraction(epsilon))
    return PrivacyLoss.approx(Fraction(epsilon), Fraction(delta))


@dataclass(frozen=True)
class FriendlyMechanism:
    """``D ↦ algorithm(shuffle(BasicFilter(D, predicate, alpha)), rng)`` with its guarantee.

    Build it with :func:`friendly`. ``epsilon`` and ``delta`` are the end-to-end (ε', δ') and are
    known without data.
    """

    algorithm: Callable[..., Any]
    predicate: Predicate
    eps_friendly: float
    delta_friendly: float
    alpha: Any
    epsilon: float
    delta: float

    @quiet_numerics
    def __call__(self, points: Any, *, rng: Any = None, ledger: Any = None) -> FriendlyRelease:
        """Filter ``points``, shuffle the core, run the algorithm; see :func:`friendly`.

        Runs, the algorithm included, with numpy floating-point errors ignored and
        RuntimeWarnings silenced (:func:`privagg._validate.quiet_numerics`): a record must not
        raise or print through them. Other exceptions of the algorithm propagate.

        A ``ledger`` (:class:`privagg.accounting.Ledger`) is charged the end-to-end (ε', δ')
        after validation and before any randomness is drawn; it raises
        :class:`privagg.BudgetExceededError` when the budget would be exceeded.
        """
        where = "friendly"
        gen, secure = resolve_rng(rng, where)
        items = self.predicate.prepare(points, where)
        if ledger is not None:
            ledger.charge(
                _loss(self.epsilon, self.delta),
                mechanism="friendly",
                parameters={
                    "algorithm": getattr(self.algorithm, "__qualname__", repr(self.algorithm)),
                    "predicate": repr(self.predicate),
                    "eps_friendly": self.eps_friendly,
                    "delta_friendly": self.delta_friendly,
                    "alpha": str(self.alpha),
                },
            )
        mask = core_mask(items, self.predicate, self.alpha, gen)
        core = items[np.flatnonzero(mask)]
        core = core[gen.permutation(core.shape[0])]
        return FriendlyRelease(
            self.algorithm(core, gen), self.epsilon, self.delta, secure
        )


def friendly(
    algorithm: Callable[..., Any],
    *,
    eps_friendly: Any,
    delta_friendly: Any = 0.0,
    predicate: Any,
    alpha: Any = 0.0,
) -> FriendlyMechanism:
    """Turn an (ε, δ)-f-friendly-DP algorithm into an end-to-end (ε', δ')-DP mechanism.

    Parameters
    ----------
    algorithm : callable ``algorithm(core, rng) -> output``
        Must be (``eps_friendly``, ``delta_friendly``)-f-friendly-DP for add/remove neighbours
        of multisets: its output distribution may depend on ``core`` only as a multiset.
        ``core`` is an array of the kept items (uniformly shuffled); ``rng`` is the generator to
        draw noise from (secure unless the caller passed a seed).
    eps_friendly, delta_friendly : float
        The algorithm's friendly guarantee (ε > 0, δ in [0, 1)).
    predicate : Predicate or callable
        The friendship predicate ``f`` the algorithm is friendly for.
    alpha : float
        BasicFilter's α, in [0, 1/2).

    Returns
    -------
    FriendlyMechanism
        Call it as ``mech(points, rng=None) -> FriendlyRelease``.

    Privacy
    -------
    Add/remove neighbours ``D' = D ∪ {z}``. The release is (ε', δ')-DP with
    ``ε' = L(e^ε − 1)``, ``δ' = δ(e^ε' − 1)/(e^ε − 1)``, ``L = 2(1 − α)/(1 − 2α) + α``
    (:func:`end_to_end_budget`). Public: the predicate, α, the budgets. The dataset size and the
    core are not released.

    Examples
    --------
    >>> import numpy as np
    >>> from privagg.friendlycore import ball
    >>> mech = friendly(lambda core, rng: int(core.shape[0] > 0), eps_friendly=0.5,
    ...                 predicate=ball(1.0))
    >>> round(mech.epsilon, 4), mech(np.zeros((5, 2)), rng=1).output
    (1.2974, 1)
    """
    where = "friendly"
    if not callable(algorithm):
        raise fail(where, "algorithm", "a callable algorithm(core, rng)", algorithm)
    pred = as_predicate(predicate, where)
    eps = check_finite_positive(where, "eps_friendly", eps_friendly)
    delta = _check_delta0(where, "delta_friendly", delta_friendly)
    alpha_fraction(alpha, where)
    eps_out, delta_out = end_to_end_budget(eps, delta, alpha=alpha)
    return FriendlyMechanism(algorithm, pred, eps, delta, alpha, eps_out, delta_out)
