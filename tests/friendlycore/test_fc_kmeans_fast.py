"""The k-means time work (issue 11 item 6): faster passes over the rows, the same releases.

* Seeded releases are bit-identical to those of commit 4bd1e9f (before the speed-up): SHA-256 of
  the released centers' float64 bytes, recorded on 4bd1e9f with this venv's numpy/OpenBLAS and
  scikit-learn (a different BLAS or scikit-learn may round the coreset's k-means++ differently:
  re-record then, from 4bd1e9f). The cases cover the coreset strategy unprojected (d <= D_CORE,
  with and without far rows), projected (d > D_CORE: the anchor's column bins) and the aggregate
  strategy (``_nearest`` in its Lloyd steps). The projected case is recorded on 4bd1e9f plus the
  anchor's privacy fix (commit 1104b5c), which changed that release on purpose.
* The fast helpers equal the plain definitions they replace, including rows without a cell,
  a forced hash collision and the int64 flush of the cluster sums.
* Regression: the coreset histogram sorts only the distinct cells lexicographically, not the n
  rows (on 4bd1e9f ``np.lexsort`` got all n rows: that sort was most of its time).

Deterministic (no statistical test here). The timing target itself is measured by
``python benchmarks/utility.py --section kmeans-time`` (not in the suite: wall time on shared
cores is noise).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

import privagg.mechanisms.kmeans as K
from privagg.mechanisms.kmeans import private_kmeans

SEED = 4242


def sample(n: int, k: int, d: int, seed: list[int]) -> np.ndarray:
    g = np.random.default_rng(seed)
    c = g.normal(size=(k, d))
    a, b = np.triu_indices(k, 1)
    c *= 8.0 * math.sqrt(d) / np.linalg.norm(c[a] - c[b], axis=1).min()
    return c[g.integers(0, k, size=n)] + g.normal(size=(n, d))


# (name, k, d, n, keywords, sha256 of the centers on 4bd1e9f, their first two coordinates)
PINNED = [
    ("coreset", 20, 10, 20_000, {}, "3c71f08415f3390d5f0c504025fa92b2487cbe1fbf45ee8741e71e9d64c2c011",
     (-21.222199319012233, 3.3171322022625924)),
    ("coreset-far", 5, 3, 5_000, {}, "e94dbd9c3569408449f05d3ed0599dcbbbb2f6b3da27af5f7c01158fb2b8b98c",
     (-21.480621002134868, -18.077697252127606)),
    # projected: recorded on 4bd1e9f + the anchor fix (1104b5c; 4bd1e9f's anchor could pick an
    # unreleased bin, test_fc_kmeans_anchor.py), the release of the code before the speed-up
    ("projected", 6, 30, 20_000, {}, "0947d42d67a9e37f24edb348980956479bfd217d75ae70588b95f4c855e9ea98",
     (-9.369670966031325, 7.464705266765013)),
    ("aggregate", 3, 3, 12_000, {"strategy": "aggregate"},
     "cde33d1ac57a8dc09a2e25c16333262dc2275c2264d5684da4926ac47b59e63e",
     (-5.934934966578171, -12.199888256916006)),
]


@pytest.mark.parametrize("name,k,d,n,kw,digest,head", PINNED, ids=[p[0] for p in PINNED])
def test_seeded_release_bit_identical_to_4bd1e9f(name, k, d, n, kw, digest, head):
    """The seeded release equals, bit for bit, the one commit 4bd1e9f made (the law unchanged)."""
    print(f"seed={SEED}")
    x = sample(n, k, d, [7, k, d])
    if name == "coreset-far":
        x[:50] *= 1e12  # far rows: the overflow paths of the distances and sums
    rel = private_kmeans(x, k, epsilon=1.0, delta=1e-6, rng=SEED, **kw)
    assert rel.ok, rel
    c = np.ascontiguousarray(rel.centers, dtype=np.float64)
    assert tuple(c[0, :2]) == head, (name, c[0, :2].tolist())
    assert hashlib.sha256(c.tobytes()).hexdigest() == digest, name


def rows_with_edges(n: int, dc: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    y = g.normal(0.0, 3.0, size=(n, dc))
    y[::97, 0] = 1e300  # no cell at small sides (|coordinate| >= 2^52)
    y[5::101, -1] = -1e17
    y[7::89] = 0.0
    return y


@pytest.mark.parametrize("side", [2.0**-3, 0.7, 2.0**5])
@pytest.mark.parametrize("block", [256, 1 << 14])
def test_row_hashes_equal_cell_hashes(side, block, monkeypatch):
    """``_row_hashes`` (blocks of rows, one column at a time; several blocks and a partial last
    one when ``block = 256``) equals ``cell_hashes(*_cell_coordinates(...))``, rows without a
    cell dropped; and ``cell_scores`` agrees with the counts of those hashes."""
    monkeypatch.setattr(K, "_ROWS", block)
    y = rows_with_edges(3000, 4, 1)
    g = np.random.default_rng(2)
    shift = g.random(4)
    mult = g.integers(1, 2**63, size=4, dtype=np.uint64) | np.uint64(1)
    z, ok = K._cell_coordinates(y, shift, side)
    assert 0 < ok.sum() < len(y) or side > 1
    want = K.cell_hashes(z, ok, mult)
    got = K._row_hashes(y, shift, side, mult)
    assert got.dtype == np.uint64 and np.array_equal(got, want)
    _, counts = np.unique(want, return_counts=True)
    excess, heavy = K.cell_scores(y, shift, np.array([side]), mult, 3)
    assert excess[0] == np.maximum(counts - 3, 0).sum() and heavy[0] == (counts >= 3).sum()


@pytest.mark.parametrize("collide", [False, True])
def test_grouped_cell_counts_equal_lexsorted(collide, monkeypatch):
    """The in-memory source's cell histogram (rows grouped by a hash, checked) equals the plain
    lexicographic one, also when every row's hash collides (the fallback)."""
    y = rows_with_edges(4000, 3, 3)
    shift = np.array([0.25, 0.5, 0.125])
    if collide:
        monkeypatch.setattr(K, "_GROUP_MULT", np.zeros(64, dtype=np.uint64))
    src = K.ArrayKMeansPoints(y)
    for side in (0.5, 4.0):
        cells, counts = src.cell_counts(None, shift, side)
        want_cells, want_counts = K.cell_counts(y, shift, side)
        assert np.array_equal(cells, want_cells) and np.array_equal(counts, want_counts)
        assert counts.sum() == K._cell_coordinates(y, shift, side)[1].sum()


def test_cell_histogram_lexsorts_only_distinct_cells(monkeypatch):
    """Regression (time): the coreset histogram of n = 20,000 rows in 13 cells sorts only
    the distinct cells lexicographically (on 4bd1e9f: all n rows, most of its time)."""
    x = sample(20_000, 4, 3, [9])
    shift = np.array([0.5, 0.25, 0.75])
    seen: list[int] = []
    real = np.lexsort

    def spy(keys, *a, **kw):
        seen.append(int(np.asarray(keys).shape[-1]))
        return real(keys, *a, **kw)

    want = K.cell_counts(x, shift, 16.0)  # the plain definition (its own lexsort of all rows)
    monkeypatch.setattr(np, "lexsort", spy)
    cells, counts = K.ArrayKMeansPoints(x).cell_counts(None, shift, 16.0)
    assert np.array_equal(cells, want[0]) and np.array_equal(counts, want[1])
    assert len(cells) < 200 and seen and max(seen) == len(cells), (seen, len(cells))


@pytest.mark.parametrize("flush", [1, 2, 1 << 8])
def test_cluster_integer_sums_blocks_and_flush(flush, monkeypatch):
    """The bincount sums of many blocks (int64 flushed every ``flush`` blocks) equal the Python-
    integer sum of every row's own term (each row summed alone)."""
    x = sample(1500, 5, 4, [11])
    x[:3] *= 1e200  # rows whose norm overflows
    refs = x[[0, 400, 800, 1200, 1400]] * 0.5
    with np.errstate(all="ignore"):  # the far rows overflow the Gram expansion (handled)
        label = K._nearest(x, refs)
    radii = np.array([2.0, 5.0, 0.5, 10.0, 3.0])
    monkeypatch.setattr(K, "_SUM_ROWS", 128)
    monkeypatch.setattr(K, "_SUM_FLUSH", flush)
    got = K.cluster_integer_sums(x, label, refs, radii, -38)
    want = np.zeros((5, 4), dtype=np.int64).astype(object)
    for i in range(len(x)):
        want += K.cluster_integer_sums(x[i:i + 1], label[i:i + 1], refs, radii, -38)
    assert got.dtype == object and (got == want).all()
    assert max(abs(int(v)) for v in got.reshape(-1)) > 2**40  # the terms are large: a real sum
