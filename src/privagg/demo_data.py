"""A deterministic synthetic dataset for the demo and the examples: diagnosis codes.

Records are 3-character codes shaped like ICD-10 categories (a letter and two digits, ``"A00"``
to ``"Z99"``: 2,600 codes, the *public code list*). Their frequencies follow a Zipf law with a
long tail — a few codes are very common, most are rare, and some never occur — which is what
makes private histograms interesting: common codes are released accurately, rare ones are lost
in the noise (and suppressed by the stable histogram's threshold).

Everything is generated at run time from a fixed numpy seed (no download, no bundled file), so
the demo shows the same data on every machine. Only the *noise* of the demo is random.
"""

from __future__ import annotations

import string

import numpy as np

__all__ = ["DEMO_SEED", "icd10_like_codes", "diagnosis_records", "zipf_probabilities"]

#: numpy seed of the synthetic data (not of the noise: the demo uses the secure generator).
DEMO_SEED = 20_240_611


def icd10_like_codes() -> np.ndarray:
    """The public code list: ``"A00"`` … ``"Z99"`` (2,600 strings, sorted)."""
    letters = np.array(list(string.ascii_uppercase))
    digits = np.char.zfill(np.arange(100).astype(str), 2)
    return np.char.add(np.repeat(letters, digits.size), np.tile(digits, letters.size))


def zipf_probabilities(m: int, exponent: float = 1.1, offset: float = 2.7) -> np.ndarray:
    """Zipf–Mandelbrot probabilities ``p_r ∝ (r + offset)^(−exponent)`` for ranks r = 1..m."""
    weights = (np.arange(1, m + 1) + offset) ** -exponent
    return weights / weights.sum()


def diagnosis_records(n: int = 100_000, seed: int = DEMO_SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, records)``: the public code list and ``n`` records drawn from it.

    The codes are ranked by a seeded random permutation (so common codes are spread over the
    alphabet) and drawn with Zipf–Mandelbrot probabilities. Deterministic for a given ``seed``.
    """
    rng = np.random.default_rng(seed)
    codes = icd10_like_codes()
    ranked = codes[rng.permutation(codes.size)]
    records = rng.choice(ranked, size=n, p=zipf_probabilities(codes.size))
    return codes, records
