"""The privacy-loss value type: pure ε-DP, approximate (ε, δ)-DP and (approximate) ρ-zCDP.

A :class:`PrivacyLoss` says what a release spent; it is immutable, holds exact rationals, and
knows how to compose (sequential composition) and convert (pure → zCDP, zCDP → (ε, δ)). The
statements used, with references, are in ``docs/proofs/accounting.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .._validate import fail
from ._exact import as_float, exact, show
from .conversions import pure_to_rho, zcdp_to_epsilon

__all__ = ["PrivacyLoss", "compose"]

_KINDS = ("pure", "approx", "zcdp")
_ZERO, _ONE = Fraction(0), Fraction(1)


def _nonneg(where: str, name: str, value: Any) -> Fraction:
    return exact(where, name, value, rule="a finite number >= 0", low=_ZERO, high=None, low_open=False)


def _delta(where: str, name: str, value: Any) -> Fraction:
    return exact(where, name, value, rule="a number in [0, 1)", low=_ZERO, high=_ONE, low_open=False)


@dataclass(frozen=True)
class PrivacyLoss:
    """What one release (or a composition of releases) spent, held as exact rationals.

    Build with :meth:`pure`, :meth:`approx` or :meth:`zcdp`. Numbers given as floats are read
    as the shortest decimal that round-trips (``0.1`` → ``Fraction(1, 10)``), so ten charges of
    ``0.1`` compose to exactly ``1``; ints, Fractions and Decimals are exact. Hence
    ``PrivacyLoss.pure(0.1).epsilon == Fraction(1, 10)`` but ``!= 0.1`` (the float is not one
    tenth): compare losses with losses, or use ``float(...)`` / :meth:`to_dict` for display and JSON.

    Attributes
    ----------
    kind : {"pure", "approx", "zcdp"}
        ε-DP; (ε, δ)-DP; δ-approximate ρ-zCDP (``delta == 0``: plain ρ-zCDP).
    epsilon : Fraction or None
        ε ≥ 0 (None for ``"zcdp"``).
    delta : Fraction
        δ in [0, 1) (always 0 for ``"pure"``).
    rho : Fraction or None
        ρ ≥ 0 (None unless ``"zcdp"``).

    Composition (``a + b`` or :func:`compose`) is sequential and adaptive:

    - pure + pure → pure, Σε;
    - pure/approx + pure/approx (at least one approx) → approx, (Σε, Σδ);
    - zcdp + zcdp → zcdp, (Σρ, Σδ);
    - pure (or approx with δ = 0) + zcdp → zcdp, with ε ↦ ε²/2;
    - approx with δ > 0 + zcdp → ParameterError: convert one side explicitly first
      (``z.to_approx(delta)``), because the right δ split is the caller's decision.

    Examples
    --------
    >>> a = PrivacyLoss.pure(0.1) + PrivacyLoss.approx(0.2, 1e-6)
    >>> str(a)
    'ε=0.3, δ=1e-06'
    >>> PrivacyLoss.pure(1).to_zcdp().rho
    Fraction(1, 2)
    """

    kind: str
    epsilon: Fraction | None
    delta: Fraction
    rho: Fraction | None

    def __post_init__(self) -> None:
        where = "PrivacyLoss"
        if self.kind not in _KINDS:
            raise fail(where, "kind", "one of " + ", ".join(map(repr, _KINDS)), self.kind)
        delta = _delta(where, "delta", self.delta)
        if self.kind == "zcdp":
            if self.epsilon is not None:
                raise fail(where, "epsilon", "None for a zCDP loss", self.epsilon)
            eps, rho = None, _nonneg(where, "rho", self.rho)
        else:
            if self.rho is not None:
                raise fail(where, "rho", f"None for a {self.kind} loss", self.rho)
            eps, rho = _nonneg(where, "epsilon", self.epsilon), None
            if self.kind == "pure" and delta != 0:
                raise fail(where, "delta", "0 for a pure loss", self.delta)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "rho", rho)

    # constructors --------------------------------------------------------------------------
    @classmethod
    def pure(cls, epsilon: Any) -> PrivacyLoss:
        """ε-DP, ε ≥ 0."""
        return cls("pure", _nonneg("PrivacyLoss.pure", "epsilon", epsilon), _ZERO, None)

    @classmethod
    def approx(cls, epsilon: Any, delta: Any) -> PrivacyLoss:
        """(ε, δ)-DP, ε ≥ 0, δ in [0, 1)."""
        where = "PrivacyLoss.approx"
        return cls("approx", _nonneg(where, "epsilon", epsilon), _delta(where, "delta", delta), None)

    @classmethod
    def zcdp(cls, rho: Any, delta: Any = 0.0) -> PrivacyLoss:
        """δ-approximate ρ-zCDP (ρ ≥ 0, δ in [0, 1)); ``delta=0`` is plain ρ-zCDP."""
        where = "PrivacyLoss.zcdp"
        return cls("zcdp", None, _delta(where, "delta", delta), _nonneg(where, "rho", rho))

    # composition ----------------------------------------------------------------------------
    @property
    def is_pure(self) -> bool:
        """True for ε-DP, including (ε, 0)-DP."""
        return self.kind != "zcdp" and self.delta == 0

    def __add__(self, other: object) -> PrivacyLoss:
        if not isinstance(other, PrivacyLoss):
            return NotImplemented
        return _compose2(self, other)

    def to_zcdp(self) -> PrivacyLoss:
        """ε-DP ⇒ (ε²/2)-zCDP (exact); a zCDP loss is returned unchanged.

        Raises ParameterError for (ε, δ)-DP with δ > 0 (no general conversion to zCDP).
        """
        if self.kind == "zcdp":
            return self
        if not self.is_pure:
            raise fail("PrivacyLoss.to_zcdp", "self", "a pure or zCDP loss", str(self))
        return PrivacyLoss.zcdp(pure_to_rho(self.epsilon))

    def to_approx(self, delta: Any = None) -> PrivacyLoss:
        """The loss as (ε, δ)-DP.

        pure → (ε, 0); approx → itself (``delta`` must be None). For δ₀-approximate ρ-zCDP,
        ``delta`` is the *total* δ wanted, δ > δ₀: the result is (ε, δ) with
        ε = CKS(ρ, δ − δ₀) computed numerically and rounded up (never optimistic).
        """
        where = "PrivacyLoss.to_approx"
        if self.kind != "zcdp":
            if delta is not None:
                raise fail(where, "delta", "None for a pure or approximate loss", delta)
            return PrivacyLoss.approx(self.epsilon, self.delta)
        if delta is None:
            raise fail(where, "delta", "given (a number in (0, 1)) to convert a zCDP loss", delta)
        total = exact(where, "delta", delta, rule=f"a number in ({show(self.delta)}, 1)",
                      low=self.delta, high=_ONE, low_open=True)
        return PrivacyLoss.approx(zcdp_to_epsilon(self.rho, total - self.delta), total)

    def fits_within(self, budget: PrivacyLoss) -> bool:
        """True when this loss is within ``budget`` component by component.

        pure/approx against a pure/approx budget compares (ε, δ); zcdp against zcdp compares
        (ρ, δ). Mixing zCDP with (ε, δ) raises ParameterError: convert explicitly first.
        """
        if not isinstance(budget, PrivacyLoss):
            raise fail("PrivacyLoss.fits_within", "budget", "a PrivacyLoss", budget)
        if (self.kind == "zcdp") != (budget.kind == "zcdp"):
            raise fail("PrivacyLoss.fits_within", "budget",
                       f"of the same family as {self} (convert explicitly)", str(budget))
        if self.kind == "zcdp":
            return self.rho <= budget.rho and self.delta <= budget.delta
        return self.epsilon <= budget.epsilon and self.delta <= budget.delta

    # display / serialisation ---------------------------------------------------------------
    def __str__(self) -> str:
        if self.kind == "zcdp":
            head = f"ρ={show(self.rho)}"
            return head if self.delta == 0 else f"{head}, δ={show(self.delta)}"
        head = f"ε={show(self.epsilon)}"
        return head if self.kind == "pure" else f"{head}, δ={show(self.delta)}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``kind`` plus each parameter as a float and as an exact ``"p/q"`` string."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in ("epsilon", "delta", "rho"):
            value = getattr(self, name)
            if value is not None:
                out[name] = as_float(value)
                out[f"{name}_exact"] = str(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyLoss:
        """Inverse of :meth:`to_dict` (reads the exact strings)."""
        def get(name: str) -> Fraction | None:
            text = data.get(f"{name}_exact")
            return None if text is None else Fraction(text)

        delta = get("delta")
        return cls(data["kind"], get("epsilon"), _ZERO if delta is None else delta, get("rho"))


def _compose2(a: PrivacyLoss, b: PrivacyLoss) -> PrivacyLoss:
    if a.kind != "zcdp" and b.kind != "zcdp":
        if a.kind == "pure" and b.kind == "pure":
            return PrivacyLoss.pure(a.epsilon + b.epsilon)
        return PrivacyLoss.approx(a.epsilon + b.epsilon, a.delta + b.delta)
    for x in (a, b):
        if x.kind != "zcdp" and not x.is_pure:
            raise fail("compose", "losses",
                       "all zCDP/pure, or all pure/approx (convert zCDP with to_approx(delta) first)",
                       f"{a} + {b}")
    za, zb = a.to_zcdp(), b.to_zcdp()
    return PrivacyLoss.zcdp(za.rho + zb.rho, za.delta + zb.delta)


def compose(*losses: PrivacyLoss) -> PrivacyLoss:
    """Sequential (adaptive) composition of one or more losses; see :class:`PrivacyLoss`."""
    if not losses or not all(isinstance(x, PrivacyLoss) for x in losses):
        raise fail("compose", "losses", "one or more PrivacyLoss values", losses)
    total = losses[0]
    for x in losses[1:]:
        total = _compose2(total, x)
    return total
