"""Parsing of numeric command-line options.

Options arrive as text and are validated by the same functions as the Python API
(:mod:`privagg._validate`), so ``--epsilon abc``, ``--epsilon nan`` and ``--epsilon -1`` give the
very message ``stable_histogram(..., epsilon=...)`` would.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import _validate

__all__ = ["as_number", "number_option"]


def as_number(text: str) -> float | str:
    """``float(text)`` when the text is a number (``"nan"`` and ``"inf"`` included), else the text.

    The text is returned unchanged otherwise, so that the validator reports the value as typed.
    """
    try:
        return float(text)
    except ValueError:
        return text


def number_option(
    where: str, name: str, text: str, check: Callable[..., float] = _validate.check_epsilon
) -> float:
    """Validate a numeric option with one of :mod:`privagg._validate`'s checks."""
    return check(where, as_number(text), name)
