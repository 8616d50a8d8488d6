"""FriendlyCore (Tsfadia et al., ICML 2022): predicates, friend counting, BasicFilter, conversion."""

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
from .mean import MeanRelease, private_mean
from .predicates import ball

__all__ = [
    "FriendlyMechanism",
    "FriendlyRelease",
    "MeanRelease",
    "ball",
    "basic_filter",
    "end_to_end_budget",
    "friend_counts",
    "friendly",
    "friendly_budget",
    "keep_probabilities",
    "predicates",
    "private_mean",
]
