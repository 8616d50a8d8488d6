"""Small fixtures shared by privagg's statistical tests (user-level releases, recorded sampler calls)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np


class RecordingLedger:
    """A ledger stand-in: records every charge as ``(loss, parameters)`` in :attr:`charges` and
    checks, as :class:`privagg.accounting.Ledger` does, that the parameters are JSON (no NaN)."""

    def __init__(self) -> None:
        self.charges: list[tuple[Any, dict]] = []

    def charge(self, loss: Any, *, mechanism: str, parameters: dict) -> None:
        json.dumps(parameters, allow_nan=False)
        self.charges.append((loss, parameters))


def unit_copies(units_per_copy: Any, l0: int, rows: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Keys and units of independent copies of one worst-case configuration: copy ``c`` (with
    ``units_per_copy[c]`` units) has the keys ``l0·c … l0·c + l0 − 1`` and each of its units holds
    all ``l0`` of them with ``rows`` rows each. Returns ``(keys, units)`` (int64, aligned)."""
    m = np.asarray(units_per_copy, dtype=np.int64)
    unit_copy = np.repeat(np.arange(m.size), m)  # one entry per unit
    keys = (unit_copy[:, None] * l0 + np.arange(l0)[None, :]).repeat(rows, axis=1).ravel()
    units = np.repeat(np.arange(unit_copy.size), l0 * rows)
    return keys, units


def new_key_hits(params: Any, units: int, l0: int, linf: int, seed: int) -> int:
    """The stable histogram's appearance audit at user level: ``units`` units each holding ``l0``
    keys of their own with ``linf`` rows each (every key new: absent without the unit), bounded at
    (``l0``, ``linf``) and released with ``params`` (a :class:`~privagg.mechanisms.histogram.
    StableHistogramParams`, possibly deliberately wrong). Returns how many units had at least one
    key released: ``units`` independent trials of an event of probability 0 on the neighbour."""
    from privagg.mechanisms import histogram as H

    keys = np.repeat(np.arange(units * l0), linf)
    owners = np.repeat(np.arange(units), l0 * linf)
    gen = np.random.default_rng(seed)
    kc = H._bounded("stable_histogram", keys, owners, (l0, linf), gen)
    if not (np.asarray(kc.counts) == linf).all():
        raise AssertionError("new_key_hits: bounding dropped rows of a unit holding exactly (ℓ0, ℓ∞)")
    r = H._stable_release(kc, params, gen, None)
    return int(np.unique(np.asarray(r.keys) // l0).size)


def record_exponential_mechanism(monkeypatch: Any, module: Any) -> list[tuple[np.ndarray, np.ndarray, Any, int]]:
    """Wrap ``module.exponential_mechanism`` (with pytest's ``monkeypatch``) so that every call
    is recorded as ``(first utility row, its base measure row, ε, the pick)``; returns the list."""
    calls: list[tuple[np.ndarray, np.ndarray, Any, int]] = []
    real = module.exponential_mechanism

    def recorder(utility: Any, mu: Any, eps: Any, gen: Any, size: Any = None) -> Any:
        out = real(utility, mu, eps, gen, size)
        calls.append((np.array(utility)[0], np.broadcast_to(np.asarray(mu), np.shape(utility))[0].copy(),
                      eps, int(out[0])))
        return out

    monkeypatch.setattr(module, "exponential_mechanism", recorder)
    return calls


def wild_mean_releases(column: Any, runs: int, seed: int, d: int = 1, n: int = 300) -> int:
    """How many of ``runs`` releases of ``private_mean`` (ε = 1, δ = 10⁻⁶) on ``column(rng, n, d)``
    (data seed ``[seed, s]``, release seed ``[seed, s, 1]``) have a column more than 10× the range
    oracle's median error away (each column clamped to its true range, the Gaussian mechanism with
    the budget split over the d columns; a constant column counts a range of 1). ⊥ counts as not
    wild. The small-n tests of the coordinate plan (atoms, far data) count these."""
    from ..mechanisms.mean import private_mean

    z = np.sqrt(2 * np.log(1.25 * d / 1e-6)) * d / n  # the oracle's sd over the column's range
    wild = 0
    for s in range(runs):  # over seeded runs (a test harness)
        x = column(np.random.default_rng([seed, s]), n, d)
        r = private_mean(x, epsilon=1.0, delta=1e-6, rng=np.random.default_rng([seed, s, 1]))
        if r.ok:
            span = np.where(x.max(0) > x.min(0), x.max(0) - x.min(0), 1.0)
            wild += int((np.abs(r.mean - x.mean(0)) / (0.674 * span * z)).max() > 10)
    return wild


def mixed_type_table(n: int, seed: int) -> np.ndarray:
    """A survey-like table of three column types: 0/1 (20 % ones), 100·lognormal(0, 1) and
    N(50, 10), float64 ``(n, 3)`` (the mean's tests of one heavy column beside a 0/1 column)."""
    g = np.random.default_rng(seed)
    return np.column_stack([(g.random(n) < 0.2).astype(float), 100 * g.lognormal(0.0, 1.0, n),
                            g.normal(50.0, 10.0, n)])


#: Bounds for the clamped-sum equality tests of the engines: ordinary, unit, near 2^±850 (scaling
#: by powers of two in two steps), a negative range, and a bound with 16 significant digits.
CLAMP_BOUNDS = [(-3.0, 10.0), (0.0, 1.0), (-2.0**800, 2.0**800), (-1e-300, 3e-300), (-7.25, -0.5),
                (280.124, 1656.459000000001)]


def hostile_term_values(seed: int = 5, n: int = 20_000) -> Any:
    """A pandas DataFrame ``g`` (7 keys as strings), ``x`` (nullable Float64): half the values exact
    ties ``(k + 1/2)·h`` on the term grid ``h`` of one of :data:`CLAMP_BOUNDS` (so half-to-even
    rounding is exercised), the others normal; 10 % of ±0, ±inf, NaN, ±1e300, 1e-300, the least
    subnormal, 2^799; 3 % NULL. Used by the DuckDB and Spark engines' clamped-sum tests."""
    import math

    import pandas as pd

    from ..mechanisms.grouped_bounded import _term_exponent

    rng = np.random.default_rng(seed)
    grids = [math.ldexp(1.0, _term_exponent(lo, hi)) for lo, hi in CLAMP_BOUNDS]
    h = rng.choice(grids, n)
    ties = (rng.integers(-2**20, 2**20, n) + 0.5) * h
    x = np.where(rng.random(n) < 0.5, ties, rng.normal(2.0, 5.0, n))
    special = rng.random(n) < 0.1
    x[special] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 1e-300, 5e-324, 2.0**799],
                            special.sum())
    xs = pd.array(x, dtype="Float64")
    xs[rng.random(n) < 0.03] = pd.NA
    return pd.DataFrame({"g": rng.integers(0, 7, n).astype(str), "x": xs})
