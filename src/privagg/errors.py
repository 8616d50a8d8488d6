"""Exceptions raised by privagg.

Every message names the parameter, the rule and the value that was given. Messages depend only on
public inputs (parameters, schema, domain) and never echo private data.
"""

from __future__ import annotations

__all__ = ["PrivaggError", "ParameterError", "BudgetExceededError"]


class PrivaggError(Exception):
    """Base class of every error privagg raises on purpose."""


class ParameterError(PrivaggError, ValueError):
    """A public input (parameter, schema, domain, file) breaks a documented rule."""


class BudgetExceededError(PrivaggError):
    """A charge would exceed a ledger's total privacy budget; nothing was released."""
