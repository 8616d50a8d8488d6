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
from .kmeans import KMeansRelease, private_kmeans
from .mean import MeanRelease, private_mean
from .predicates import ball, tuple_match

__all__ = [
    "FriendlyMechanism",
    "FriendlyRelease",
    "KMeansRelease",
    "MeanRelease",
    "ball",
    "basic_filter",
    "end_to_end_budget",
    "friend_counts",
    "friendly",
    "friendly_budget",
    "keep_probabilities",
    "predicates",
    "private_kmeans",
    "private_mean",
    "tuple_match",
]
