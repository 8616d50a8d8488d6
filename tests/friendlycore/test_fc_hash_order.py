"""``_hash_order`` (the keyed row order of the scale and pair-radius steps) is exactly
``np.lexsort(ties[::-1] + [h])`` — by hash, then the tie columns, then the index — also when many
hashes collide and whole rows repeat (its first sort is not stable: the index key must order the
runs). Deterministic, seeded inputs (no false failures). Negative control: the order of the first
sort alone (no tie pass) differs from the reference on these inputs."""

from __future__ import annotations

import numpy as np
import pytest

from privagg.mechanisms.mean import _hash_order

SEED = 20261201


@pytest.mark.parametrize("n, hv, tv", [(50_000, 64, 3), (20_000, 2, 2), (5000, 5000, 1), (3, 1, 1)])
def test_hash_order_equals_lexsort_with_collisions(n, hv, tv):
    print(f"seed={SEED}")
    rng = np.random.default_rng([SEED, n, hv])
    h = rng.integers(0, hv, size=n).astype(np.uint64)
    ties = [rng.integers(0, tv, size=n).astype(np.uint64) for _ in range(2)]
    want = np.lexsort(ties[::-1] + [h])
    order, pos = _hash_order(h, ties)
    assert np.array_equal(order, want), f"seed={SEED}"
    if n > 3:  # negative control: the first sort alone (no tie pass) is not the reference
        assert not np.array_equal(np.argsort(h), want)
