"""Empirical privacy auditing: a lower confidence bound on a mechanism's privacy loss.

Given outputs of a mechanism ``M`` on two neighbouring inputs, ``M(D)`` and ``M(D')`` (many
independent runs each), the auditor estimates, for a few events ``S``,
``ln((P[M(D) ∈ S] − δ) / P[M(D') ∈ S])`` and its mirror, and returns a **lower** confidence
bound ``epsilon_lower`` on the largest of them. If ``M`` is (ε, δ)-DP on this pair then
``P[epsilon_lower > ε] <= 1 − confidence``; so ``epsilon_lower > ε`` is a violation shown with
that confidence, and a correct mechanism passes except with probability ``1 − confidence``.

How: each sample is split in two halves. The first halves *choose* the candidate events (the
``n_events`` singletons ``{o}`` and threshold sets ``{<= t}``, ``{>= t}`` over the observed output
values with the largest plug-in log-ratios, in either direction); the second halves, independent
of that choice, give exact Clopper–Pearson bounds — a lower bound on the numerator probability
and an upper bound on the denominator probability — each at level
``(1 − confidence)/(2·n_events)`` (Bonferroni over the events and the two bounds).

Outputs may be any values numpy can sort (ints, floats, strings); threshold events use that
order. Requires scipy (the ``test`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import fail
from .stats import clopper_pearson_lower, clopper_pearson_upper

__all__ = ["AuditResult", "audit_mechanism", "audit_samples"]


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an audit.

    Attributes
    ----------
    epsilon_lower : float
        Lower confidence bound on the privacy loss at the given δ (0.0 if nothing is shown).
    epsilon_estimate : float
        Plug-in log-ratio of the chosen event on the second halves (no confidence attached).
    event : str
        The event that gave ``epsilon_lower``, e.g. ``"D: output <= 3"``.
    trials : int
        Runs per input.
    confidence : float
    delta : float
    """

    epsilon_lower: float
    epsilon_estimate: float
    event: str
    trials: int
    confidence: float
    delta: float

    def violates(self, epsilon: float) -> bool:
        """True iff the audit shows, with the stated confidence, a loss larger than ``epsilon``."""
        return self.epsilon_lower > epsilon


def _event_counts(codes: np.ndarray, k: int) -> np.ndarray:
    """Counts of every candidate event: k singletons, k prefixes (<=), k suffixes (>=)."""
    single = np.bincount(codes, minlength=k)
    prefix = np.cumsum(single)
    suffix = np.cumsum(single[::-1])[::-1]
    return np.concatenate([single, prefix, suffix])


def _describe(index: int, values: np.ndarray) -> str:
    k = values.size
    kind, j = divmod(index, k)
    return (
        f"output == {values[j]!r}",
        f"output <= {values[j]!r}",
        f"output >= {values[j]!r}",
    )[kind]


def audit_samples(
    out0: Any,
    out1: Any,
    *,
    delta: float = 0.0,
    confidence: float = 0.99,
    n_events: int = 8,
) -> AuditResult:
    """Audit from samples: ``out0`` are outputs of ``M(D)``, ``out1`` of ``M(D')``.

    Parameters
    ----------
    out0, out1 : array_like, 1-D
        Independent outputs on the two inputs (same length, at least 20 each).
    delta : float
        The δ of the claim being audited, in [0, 1).
    confidence : float
        In (0, 1): a correct mechanism is flagged with probability at most ``1 − confidence``.
    n_events : int
        Candidate events per direction chosen on the first halves.

    Returns
    -------
    AuditResult
    """
    where = "audit_samples"
    a0, a1 = np.asarray(out0).ravel(), np.asarray(out1).ravel()
    if a0.size != a1.size or a0.size < 20:
        raise fail(
            where, "out0/out1", "1-D samples of equal length >= 20", (a0.size, a1.size)
        )
    if not 0.0 < confidence < 1.0:
        raise fail(where, "confidence", "a number in (0, 1)", confidence)
    if not 0.0 <= delta < 1.0:
        raise fail(where, "delta", "a number in [0, 1)", delta)
    values, codes = np.unique(np.concatenate([a0, a1]), return_inverse=True)
    k = values.size
    c0, c1 = codes[: a0.size], codes[a0.size :]
    half = a0.size // 2
    m = a0.size - half
    sel0, sel1 = _event_counts(c0[:half], k), _event_counts(c1[:half], k)
    test0, test1 = _event_counts(c0[half:], k), _event_counts(c1[half:], k)

    # Choose events on the first halves: plug-in ratios with +1 smoothing.
    score = np.log((sel0 + 1.0) / (sel1 + 1.0))
    chosen = [("D", i) for i in np.argsort(-score)[:n_events]]
    chosen += [("D'", i) for i in np.argsort(score)[:n_events]]
    level = (1.0 - confidence) / (2 * len(chosen))

    best = (0.0, 0.0, "none")
    for side, i in chosen:
        num, den = (test0[i], test1[i]) if side == "D" else (test1[i], test0[i])
        p_num_lo = clopper_pearson_lower(num, m, level)
        p_den_hi = clopper_pearson_upper(den, m, level)
        estimate = math.log((num + 0.5) / (den + 0.5))
        if p_num_lo - delta > 0.0:
            bound = math.log((p_num_lo - delta) / p_den_hi)
            if bound > best[0]:
                best = (bound, estimate, f"{side}: {_describe(int(i), values)}")
    return AuditResult(best[0], best[1], best[2], a0.size, confidence, delta)


def audit_mechanism(
    mechanism: Callable[[Any, np.random.Generator], Any],
    data0: Any,
    data1: Any,
    *,
    trials: int,
    seed: int,
    delta: float = 0.0,
    confidence: float = 0.99,
    n_events: int = 8,
) -> AuditResult:
    """Run ``mechanism(data, rng)`` ``trials`` times on each input and audit the outputs.

    ``seed`` seeds one :class:`numpy.random.SeedSequence` whose two children drive the two
    inputs' runs (reproducible; print the seed in the test).
    """
    g0, g1 = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    out0 = np.array([mechanism(data0, g0) for _ in range(trials)])
    out1 = np.array([mechanism(data1, g1) for _ in range(trials)])
    return audit_samples(
        out0, out1, delta=delta, confidence=confidence, n_events=n_events
    )
