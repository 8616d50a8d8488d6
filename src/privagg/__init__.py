"""privagg — practical differentially private aggregation.

Layers (one sub-package each): ``noise`` (secure exact samplers) → ``mechanisms`` (histograms)
and ``friendlycore`` (FriendlyCore filter, mean, k-means) → ``accounting`` (privacy-loss types,
ledger) → ``engines`` (numpy / DuckDB counting) → ``cli``.

Public names are imported lazily so that ``import privagg`` stays fast for the command line.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import BudgetExceededError, ParameterError, PrivaggError

__version__ = "0.1.0"

_LAZY = {
    # histograms
    "laplace_histogram": "privagg.mechanisms.histogram",
    "stable_histogram": "privagg.mechanisms.histogram",
    "HistogramRelease": "privagg.mechanisms.histogram",
    "stable_threshold": "privagg.mechanisms.histogram",
    # FriendlyCore
    "predicates": "privagg.friendlycore",
    "friend_counts": "privagg.friendlycore",
    "basic_filter": "privagg.friendlycore",
    "friendly_budget": "privagg.friendlycore",
    "end_to_end_budget": "privagg.friendlycore",
    "friendly": "privagg.friendlycore",
    "private_mean": "privagg.friendlycore",
    "MeanRelease": "privagg.friendlycore",
    "private_kmeans": "privagg.friendlycore",
    "KMeansRelease": "privagg.friendlycore",
    # randomness
    "SecureGenerator": "privagg.noise.rng",
}
_SUBMODULES = {"noise", "mechanisms", "accounting", "engines", "friendlycore", "cli"}

__all__ = [
    "PrivaggError",
    "ParameterError",
    "BudgetExceededError",
    "__version__",
    *_LAZY,
    *sorted(_SUBMODULES),
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"privagg.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'privagg' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
