"""privagg — practical differentially private aggregation.

Layers (one sub-package each): ``noise`` (secure exact samplers) → ``friendlycore`` (the
framework: predicates, friend counting, BasicFilter, conversion, radius) → ``mechanisms`` (every
release: histograms, mean, k-means) → ``accounting`` (privacy-loss types, ledger) → ``engines``
(numpy, DuckDB, Spark behind one interface) → ``cli``.

**The rule of public inputs.** The exit code, stderr, warnings, the set of exceptions, memory and,
as far as practical, running time are functions of public inputs only — the parameters, the
file's path, format and schema, the public domain, and ``n`` where it is public — never of a
record. Nothing derived from a record is printed except released values, and those are escaped.
Every parameter and output path is validated before a ledger is charged; after the charge nothing
may fail. What this covers and what it does not: ``docs/threat-model.md``; the check:
:mod:`privagg.testing.invariance`.

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
    "private_mean": "privagg.mechanisms.mean",
    "MeanRelease": "privagg.mechanisms.mean",
    "private_kmeans": "privagg.mechanisms.kmeans",
    "KMeansRelease": "privagg.mechanisms.kmeans",
    # group-by aggregates
    "aggregate": "privagg.mechanisms.aggregate",
    "count": "privagg.mechanisms.aggregate",
    "sum": "privagg.mechanisms.aggregate",
    "mean": "privagg.mechanisms.aggregate",
    "quantile": "privagg.mechanisms.aggregate",
    "AggregateRelease": "privagg.mechanisms.aggregate",
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
