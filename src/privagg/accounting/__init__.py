"""Privacy accounting: the privacy-loss value type, its composition and conversions, and a
persistent budget ledger.

- :class:`PrivacyLoss` — immutable pure ε / approximate (ε, δ) / (approximate) ρ-zCDP loss with
  exact rational parameters; ``a + b`` and :func:`compose` are sequential composition;
  ``to_zcdp()`` (ε²/2) and ``to_approx(delta)`` (Canonne–Kamath–Steinke, rounded up).
- :class:`Ledger` — a dataset's total budget and every charge, in one SQLite file; ``charge``
  raises :class:`privagg.BudgetExceededError` before any noise is drawn.

Statements and references: ``docs/proofs/accounting.md``.
"""

from .conversions import pure_to_rho, simple_zcdp_epsilon, zcdp_to_epsilon
from .ledger import Charge, Ledger
from .loss import PrivacyLoss, compose

__all__ = [
    "PrivacyLoss",
    "compose",
    "Ledger",
    "Charge",
    "zcdp_to_epsilon",
    "simple_zcdp_epsilon",
    "pure_to_rho",
]
