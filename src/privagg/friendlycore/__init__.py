"""FriendlyCore (Tsfadia et al., ICML 2022), the framework: predicates, friend counting, BasicFilter,
conversion, radius selection. The releases built on it (mean, k-means) live in :mod:`privagg.mechanisms`."""

from __future__ import annotations

from . import predicates
from .conversion import (
    FriendlyMechanism,
    FriendlyRelease,
    end_to_end_budget,
    friendly,
    friendly_budget,
)
from .filter import basic_filter, keep_probabilities
from .kernel import friend_counts
from .predicates import ball, tuple_match

__all__ = [
    "FriendlyMechanism",
    "FriendlyRelease",
    "ball",
    "basic_filter",
    "end_to_end_budget",
    "friend_counts",
    "friendly",
    "friendly_budget",
    "keep_probabilities",
    "predicates",
    "tuple_match",
]
