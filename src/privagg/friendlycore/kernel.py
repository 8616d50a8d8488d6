"""Friend counting, the O(n²) heart of FriendlyCore.

``friend_counts(points, predicate)`` returns ``c_i = Σ_j f(x_i, x_j)`` (self included) as int64.
Every unordered pair ``i < j`` is decided once and credited to both ends, and the diagonal is
counted without evaluating ``f``. Three paths, all returning the counts of the same decision:

``gemm`` (:class:`~privagg.friendlycore.predicates.Ball`, any ``d``)
    Rows are sorted by their distance ``ρ_i`` to an anchor row and cut into *shells*: blocks of
    at most ``block_size <= 4096`` consecutive rows whose ``ρ`` lies in ``[ρ_p, 2ρ_p + 4r]``
    (:func:`_shell_blocks`). By the triangle inequality ``|ρ_x − ρ_y| <= ‖x − y‖``, a block
    pair whose ``ρ`` ranges are more than ``r`` apart (with a proven float margin) has no
    friend pair and is skipped unseen; so a far row meets only the rows near it, and the work
    and memory do not grow with one far record. The remaining upper-triangular block pairs are
    screened on rows shifted by a *local* anchor (the first row of the pair's first block), so
    the margin is relative to the pair's own spread, not to the distance from the origin or
    from a far first row (never an ``n × n`` matrix). For each block pair the float64 product
    ``G = X_I X_Jᵀ`` screens pairs against
    separable thresholds: with ``s_i = fl(‖x_i‖²)`` and ``c = 16 (d + 4) 2⁻⁵³``, a pair is surely
    inside if ``fl(G_ij − α_j) ≥ α_i`` and surely outside if ``fl(G_ij − β_j) < β_i`` where
    ``α_i = ((1+c) s_i − (1−c) r²/2)/2`` and ``β_i = ((1−c) s_i − (1+c) r²/2)/2``. These are the
    tests ``s_i + s_j − 2G ≤ r² ∓ c (s_i + s_j + r²)``; the proof in ``docs/proofs/friendlycore.md``
    shows the error of the expansion and of the direct formula together stay below the margin, so
    the screen never disagrees with the direct formula. The remaining band is rechecked with
    :func:`~privagg.friendlycore.predicates.squared_distance`; a block pair whose shifted rows
    leave the proof's range (``s_i > 2⁹⁰⁰``: only when many rows are astronomically far apart)
    is decided directly, in chunks. Block pairs run on a thread pool
    (numpy releases the GIL), so both cores are busy; counts are exact integers, hence identical
    for every block size and thread count.
``tree`` (:class:`Ball`, meant for ``d <= 8``)
    A balanced k-d tree (median splits on the widest side, bounding boxes computed from the
    points themselves) and a dual-tree traversal over node pairs at the same depth. A node pair
    whose largest possible squared distance (the direct formula applied to the per-coordinate
    box spans) is ``<= r²`` credits every point of each node with the size of the other,
    without visiting points; a pair whose smallest possible squared distance is ``> r²`` is
    dropped. The direct formula is monotone in every ``|x_k − y_k|``, so both box tests agree
    exactly with it. Only leaf pairs straddling the boundary are checked point by point.
``generic`` (any :class:`Predicate` or callable)
    Blocks of index pairs ``i < j`` decided through :meth:`Predicate.pairs` (for a plain
    callable: one Python call per pair; meant for ``n`` up to a few thousand).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._validate import check_choice, check_positive_int, fail, quiet_numerics
from .predicates import Ball, Predicate, as_predicate, squared_distance

__all__ = ["friend_counts"]

_U = 2.0**-53
_MARGIN = 16.0  # screening margin c = _MARGIN·(d + 4)·u (proof: docs/proofs)
_MAX_BLOCK = 4096
_LOW_D = 8
_GEMM_TILE = 32  # rows per tile of a gemm block pair's element-wise work (in cache)
_TREE_MIN_N = 4096
_CHUNK_ELEMS = 1 << 20
_TREE_CHUNK_ELEMS = 1 << 17
_TRAVERSAL_CHUNK = 1 << 18
#: Anchor distances are kept below this cap (a valid lower bound for the rows beyond it).
_RHO_CAP = 2.0**1000


@quiet_numerics
def friend_counts(
    points: Any,
    predicate: Any,
    *,
    method: str = "auto",
    block_size: int = 2048,
    n_threads: int | None = None,
) -> np.ndarray:
    """Friend counts ``c_i = Σ_j f(x_i, x_j)``, self included (not a private release).

    Parameters
    ----------
    points : array_like
        The items, one per row: a 2-D float array ``(n, d)`` for :func:`~privagg.predicates.ball`
        (converted to float64; rows with a NaN or an infinity are friends of each other only,
        see :mod:`privagg.friendlycore.predicates`); any array for a custom predicate.
    predicate : Predicate or callable
        A privagg predicate, or a symmetric callable ``f(x, y) -> bool`` with ``f(x, x) = 1``
        (called once per unordered pair ``i < j``; slow path for small ``n``).
    method : {"auto", "gemm", "tree", "generic"}
        Counting path for the ball predicate. ``"auto"``: ``"tree"`` when ``d <= 8`` and
        ``n >= 4096``, else ``"gemm"``. Custom predicates always use ``"generic"``. All paths
        return identical counts.
    block_size : int
        Rows per block of the pair work, 1 to 4096.
    n_threads : int or None
        Worker threads (``None``: the number of CPUs). Does not change the result.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        ``c_i``, each between 1 and ``n``.

    Raises
    ------
    ParameterError
        On an invalid predicate, points of the wrong shape/dtype (the message never shows data),
        or invalid options. Never because of the values of the points.

    Examples
    --------
    >>> import numpy as np
    >>> from privagg.friendlycore import ball
    >>> friend_counts(np.array([[0.0], [1.0], [3.0]]), ball(1.0)).tolist()
    [2, 2, 1]
    """
    where = "friend_counts"
    pred = as_predicate(predicate, where)
    check_choice(where, "method", method, ("auto", "gemm", "tree", "generic"))
    block = check_positive_int(where, "block_size", block_size)
    if block > _MAX_BLOCK:
        raise fail(where, "block_size", f"an integer in [1, {_MAX_BLOCK}]", block_size)
    threads = (os.cpu_count() or 1) if n_threads is None else n_threads
    threads = check_positive_int(where, "n_threads", threads)
    items = pred.prepare(points, where)
    n = items.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if not isinstance(pred, Ball):
        if method in ("gemm", "tree"):
            raise fail(
                where, "method", "'auto' or 'generic' for a custom predicate", method
            )
        return _generic_counts(items, pred, block)
    finite = np.isfinite(items).all(axis=1)
    if not finite.all():  # the ⊥ rows: friends of each other only (predicates module)
        counts = np.full(n, n - int(finite.sum()), dtype=np.int64)
        counts[finite] = friend_counts(
            items[finite], pred, method=method, block_size=block, n_threads=threads
        )
        return counts
    d = items.shape[1]
    if method == "auto":
        method = "tree" if d <= _LOW_D and n >= _TREE_MIN_N else "gemm"
    if method == "generic":
        return _generic_counts(items, pred, block)
    if method == "tree":
        return _tree_counts(items, pred.radius_sq, threads)
    return _gemm_counts(items, pred, block, threads)


def _map(func: Any, tasks: list, threads: int) -> list:
    """``[func(*t) for t in tasks]`` on a thread pool (the BLAS limited to one thread meanwhile).
    ``np.errstate`` is per thread (a context variable that new threads do not inherit), so every
    task runs under ``errstate(all="ignore")`` itself (:func:`privagg._validate.quiet_numerics`)."""

    def call(t: tuple) -> Any:
        with np.errstate(all="ignore"):
            return func(*t)

    if not tasks:
        return []
    from threadpoolctl import threadpool_limits  # (a dependency of scikit-learn)

    # The pool already keeps every core busy: a BLAS that also threads each block product
    # oversubscribes the cores (on a loaded 2-core machine a 512 x 512 x 10 product took 30 ms
    # instead of 0.1 ms). One BLAS thread per task while the pool runs — and also on one thread:
    # the tasks' products are tiles of a few dozen rows, far too small to gain from BLAS threads
    # (they lost 2x to them). Results do not change.
    with threadpool_limits(1, user_api="blas"):
        if threads == 1 or len(tasks) <= 1:
            return [call(t) for t in tasks]
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return list(pool.map(call, tasks))


def _anchor_distances(x: np.ndarray) -> np.ndarray:
    """``ρ̂_i ≈ ‖x_i − x_0‖`` for finite rows, within relative ``(d + 8)·2⁻⁵⁴`` plus an absolute
    ``2⁻⁵⁰⁰``, capped at :data:`_RHO_CAP` (never inf or NaN). A row whose squared distance
    overflows is measured on ``(x/4 − x_0/4)·2⁻⁵³⁰`` (exact power-of-two scalings; the
    underflow of tiny entries is far below the relative bound for such a row)."""
    a = x[0]
    rho = np.empty(x.shape[0])
    for s in range(0, x.shape[0], _ROWS_RHO):
        y = x[s : s + _ROWS_RHO] - a
        rho[s : s + _ROWS_RHO] = np.sqrt(np.einsum("ij,ij->i", y, y))
    bad = ~np.isfinite(rho)
    if bad.any():
        z = (x[bad] * 0.25 - a * 0.25) * 2.0**-530
        rho[bad] = np.sqrt(np.einsum("ij,ij->i", z, z)) * 2.0**532
    return np.minimum(rho, _RHO_CAP)


_ROWS_RHO = 1 << 14


def _shell_blocks(points: np.ndarray, r: float, block: int) -> tuple:
    """Rows sorted by anchor distance and cut into shells; the block pairs that may hold
    friends at radius ``r``.

    Returns ``(order, xs, bounds, last)``: ``xs = points[order]`` sorted by ``ρ̂``; block ``I``
    is ``xs[bounds[I]:bounds[I+1]]``, at most ``block`` rows with ``ρ̂ <= 2ρ̂_start + 4r``; block
    pairs ``I <= J <= last[I]`` may hold friends, every ``J > last[I]`` surely holds none.

    Skip rule (docs/proofs/friendlycore.md §7, "Shells"): ``J`` is skipped for ``I`` iff
    ``lo_J > hi_I + r + μ(4hi_I + 4r) + 2⁻⁵⁰⁰`` with ``μ = (d + 8)·2⁻⁵²`` (``lo``, ``hi`` the
    least and largest ``ρ̂`` of a block). A friend pair ``x ∈ I``, ``y ∈ J`` has
    ``ρ_y − ρ_x <= ‖x − y‖ <= r(1 + (d + 4)u)`` (the direct formula's decision
    ``sqdist <= fl(r²)``), and the error of ``ρ̂`` moves ``ρ̂_y − ρ̂_x`` by far less than the
    ``μ`` term, so it is never skipped. The short shells (fewer than ``block`` rows) start at
    radii that more than double each time, so there are at most about 1500 of them.
    """
    n, d = points.shape
    rho = _anchor_distances(points)
    order = np.argsort(rho, kind="stable")
    rs = rho[order]
    xs = points[order]
    starts = []
    p = 0
    while p < n:  # one iteration per block: n/block + (at most ~1500 short shells)
        q = int(np.searchsorted(rs, 2.0 * rs[p] + 4.0 * r, side="right"))
        starts.append(p)
        p = max(p + 1, min(p + block, q))
    bounds = np.array(starts + [n], dtype=np.int64)
    lo, hi = rs[bounds[:-1]], rs[bounds[1:] - 1]
    mu = (d + 8) * 2.0**-52
    reach = hi + r + mu * (4.0 * hi + 4.0 * r) + 2.0**-500
    last = np.searchsorted(lo, reach, side="right") - 1
    return order, xs, bounds, np.maximum(last, np.arange(lo.size))


def _credit_pairs(
    counts: np.ndarray, ii: np.ndarray, jj: np.ndarray, ok: np.ndarray
) -> None:
    n = counts.shape[0]
    counts += np.bincount(ii[ok], minlength=n)
    counts += np.bincount(jj[ok], minlength=n)


def _generic_counts(items: np.ndarray, pred: Predicate, block: int) -> np.ndarray:
    """Each unordered pair once, through ``pred.pairs``, block by block."""
    n = items.shape[0]
    counts = np.ones(n, dtype=np.int64)
    for i0 in range(0, n, block):
        for j0 in range(i0, n, block):
            ii, jj = np.meshgrid(
                np.arange(i0, min(i0 + block, n)),
                np.arange(j0, min(j0 + block, n)),
                indexing="ij",
            )
            upper = ii < jj
            ii, jj = ii[upper], jj[upper]
            if ii.size == 0:
                continue
            ok = np.asarray(pred.pairs(items[ii], items[jj]), dtype=bool)
            _credit_pairs(counts, ii, jj, ok)
    return counts


# ---------------------------------------------------------------------------------------------
# Blocked matrix products with a proven screening margin and a direct recheck of the band.
# ---------------------------------------------------------------------------------------------


def _gemm_counts(points: np.ndarray, pred: Ball, block: int, threads: int) -> np.ndarray:
    n, d = points.shape
    r2 = pred.radius_sq
    order, xs, bounds, last = _shell_blocks(points, pred.radius, block)
    c = _MARGIN * (d + 4) * _U
    width = int(np.diff(bounds).max())
    strict_upper = np.triu(np.ones((width, width), dtype=bool), 1)
    local = threading.local()

    def work(bi: int, bj: int) -> tuple:
        i0, i1, j0, j1 = bounds[bi], bounds[bi + 1], bounds[bj], bounds[bj + 1]
        # Screen on rows shifted by a local anchor (the proof allows any shift shared by both
        # blocks): the band stays relative to the pair's spread. Rechecks use the rows themselves.
        anchor = xs[i0]
        yi, yj = xs[i0:i1] - anchor, xs[j0:j1] - anchor
        si, sj = np.einsum("ij,ij->i", yi, yi), np.einsum("ij,ij->i", yj, yj)
        if not max(si.max(), sj.max()) <= 2.0**900:
            # Outside the screening proof's range (overflow): decide this block pair directly.
            return i0, j0, None, None, _direct_pairs(xs, r2, i0, i1, j0, j1)
        alpha_i = ((1.0 + c) * si - (1.0 - c) * 0.5 * r2) * 0.5
        alpha_j = ((1.0 + c) * sj - (1.0 - c) * 0.5 * r2) * 0.5
        beta_i = ((1.0 - c) * si - (1.0 + c) * 0.5 * r2) * 0.5
        # Out-test with one row vector: T_ij < β_i − m_J, m_J >= max_j (α_j − β_j).
        widen = (alpha_j - ((1.0 - c) * sj - (1.0 + c) * 0.5 * r2) * 0.5).max() * (1.0 + 4.0 * _U)
        ni, nj = i1 - i0, j1 - j0
        if not hasattr(local, "t"):  # per-thread flat tile buffers (views are C-contiguous)
            local.t = np.empty(_GEMM_TILE * block)
            local.sure = np.empty(_GEMM_TILE * block, dtype=bool)
            local.maybe = np.empty(_GEMM_TILE * block, dtype=bool)
        rows = np.empty(ni, dtype=np.int64)
        cols = np.zeros(nj, dtype=np.int64)
        low = beta_i - widen
        band_i, band_j = [], []
        # Tiles of _GEMM_TILE rows against the block's columns (the passes stay in the cache);
        # the decisions are those of the whole block pair, pair by pair.
        for t0 in range(0, ni, _GEMM_TILE):
            t1 = min(t0 + _GEMM_TILE, ni)
            nt = t1 - t0
            t = local.t[: nt * nj].reshape(nt, nj)
            sure = local.sure[: nt * nj].reshape(nt, nj)
            maybe = local.maybe[: nt * nj].reshape(nt, nj)
            np.matmul(yi[t0:t1], yj.T, out=t)
            np.subtract(t, alpha_j[None, :], out=t)
            np.greater_equal(t, alpha_i[t0:t1, None], out=sure)
            np.greater_equal(t, low[t0:t1, None], out=maybe)
            if i0 == j0:
                upper = strict_upper[t0:t1, :nj]
                sure &= upper
                maybe &= upper
            u8 = sure.view(np.uint8)  # sums in uint16 (fast): at most 4096 per row, 32 per column
            rows[t0:t1] = np.add.reduce(u8, axis=1, dtype=np.uint16)
            cols += np.add.reduce(u8, axis=0, dtype=np.uint16)
            if np.count_nonzero(maybe) > rows[t0:t1].sum():
                bi_, bj_ = np.nonzero(maybe & ~sure)
                band_i.append(bi_ + (i0 + t0))
                band_j.append(bj_ + j0)
        band = (np.concatenate(band_i), np.concatenate(band_j)) if band_i else None
        return i0, j0, rows, cols, band

    tasks = [(bi, bj) for bi in range(bounds.size - 1) for bj in range(bi, int(last[bi]) + 1)]
    tasks = [t for t in tasks if t[0] != t[1] or bounds[t[0] + 1] - bounds[t[0]] > 1]
    counts = np.ones(n, dtype=np.int64)
    band_i: list[np.ndarray] = []
    band_j: list[np.ndarray] = []
    for i0, j0, rows, cols, band in _map(work, tasks, threads):
        if rows is not None:
            counts[i0 : i0 + rows.size] += rows
            counts[j0 : j0 + cols.size] += cols
        if band is not None:
            band_i.append(band[0])
            band_j.append(band[1])
    if band_i:
        ii = np.concatenate(band_i)
        jj = np.concatenate(band_j)
        step = max(1, _CHUNK_ELEMS // d)
        for k in range(0, ii.size, step):
            a, b = ii[k : k + step], jj[k : k + step]
            _credit_pairs(counts, a, b, squared_distance(xs[a], xs[b]) <= r2)
    out = np.empty(n, dtype=np.int64)
    out[order] = counts
    return out


def _direct_pairs(xs: np.ndarray, r2: float, i0: int, i1: int, j0: int,
                  j1: int) -> tuple[np.ndarray, np.ndarray]:
    """The friend pairs ``(i, j)``, ``i < j``, of rows ``[i0, i1) × [j0, j1)`` by the direct
    formula, in chunks of about ``_CHUNK_ELEMS`` entries (the fallback for overflowing blocks)."""
    d = xs.shape[1]
    out_i, out_j = [], []
    step = max(1, _CHUNK_ELEMS // max(1, (j1 - j0) * d))
    cols = np.arange(j0, j1)
    for a in range(i0, i1, step):
        rows = np.arange(a, min(a + step, i1))
        ok = squared_distance(xs[rows, None, :], xs[None, j0:j1, :]) <= r2
        ok &= rows[:, None] < cols[None, :]
        p, q = np.nonzero(ok)
        out_i.append(rows[p])
        out_j.append(cols[q])
    # returned as a "band" whose pairs are all friends: rechecked once more by the caller
    return np.concatenate(out_i), np.concatenate(out_j)


# ---------------------------------------------------------------------------------------------
# Low dimension: k-d tree, dual traversal, whole node pairs credited without visiting points.
# ---------------------------------------------------------------------------------------------

_LEAF = 32


def _seq_sumsq(t: np.ndarray) -> np.ndarray:
    """The direct formula's summation (index order, no FMA) of ``t_k²`` over the last axis."""
    acc = t[..., 0] * t[..., 0]
    for k in range(1, t.shape[-1]):
        acc += t[..., k] * t[..., k]
    return acc


def _build_tree(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, list, list, int]:
    """Balanced k-d tree: returns (perm, leaf bounds, per-level box lows, highs, depth).

    Level ``l`` has ``2**l`` nodes; node ``k`` holds the permuted positions
    ``[bounds_l[k], bounds_l[k+1])`` and its children are nodes ``2k`` and ``2k+1`` of level
    ``l+1``. Boxes are the coordinate-wise min/max of the node's points (exact).
    """
    n = x.shape[0]
    depth = 0
    while (n >> depth) > _LEAF:
        depth += 1
    perm = np.arange(n)
    bounds = np.array([0, n], dtype=np.int64)
    rows = np.arange(n)
    for _ in range(depth):
        xp = x[perm]
        starts = bounds[:-1]
        lo = np.minimum.reduceat(xp, starts, axis=0)
        hi = np.maximum.reduceat(xp, starts, axis=0)
        dim = np.argmax(hi - lo, axis=1)
        node_of = np.repeat(np.arange(starts.size), np.diff(bounds))
        order = np.lexsort((xp[rows, dim[node_of]], node_of))
        perm = perm[order]
        nb = np.empty(2 * starts.size + 1, dtype=np.int64)
        nb[0::2] = bounds
        nb[1::2] = (bounds[:-1] + bounds[1:]) // 2
        bounds = nb
    xp = x[perm]
    lows = [np.minimum.reduceat(xp, bounds[:-1], axis=0)]
    highs = [np.maximum.reduceat(xp, bounds[:-1], axis=0)]
    for _ in range(depth):
        lo, hi = lows[0], highs[0]
        lows.insert(0, np.minimum(lo[0::2], lo[1::2]))
        highs.insert(0, np.maximum(hi[0::2], hi[1::2]))
    return perm, bounds, lows, highs, depth


def _tree_counts(x: np.ndarray, r2: float, threads: int) -> np.ndarray:
    n, d = x.shape
    perm, bounds, lows, highs, depth = _build_tree(x)
    leaf_sizes = np.diff(bounds)
    sizes = [leaf_sizes]
    for _ in range(depth):
        sizes.insert(0, sizes[0][0::2] + sizes[0][1::2])
    node_credit = [np.zeros(1 << lvl, dtype=np.int64) for lvl in range(depth + 1)]

    a = np.zeros(1, dtype=np.int64)
    b = np.zeros(1, dtype=np.int64)
    leaf_a: list[np.ndarray] = []
    leaf_b: list[np.ndarray] = []
    for lvl in range(depth + 1):
        lo, hi, sz = lows[lvl], highs[lvl], sizes[lvl]
        next_a: list[np.ndarray] = []
        next_b: list[np.ndarray] = []
        for k0 in range(0, a.size, _TRAVERSAL_CHUNK):
            ac, bc = a[k0 : k0 + _TRAVERSAL_CHUNK], b[k0 : k0 + _TRAVERSAL_CHUNK]
            gap = np.maximum(lo[bc] - hi[ac], lo[ac] - hi[bc])
            np.maximum(gap, 0.0, out=gap)
            span = np.maximum(hi[bc] - lo[ac], hi[ac] - lo[bc])
            inside = _seq_sumsq(span) <= r2
            undecided = ~inside & ~(_seq_sumsq(gap) > r2)
            ai, bi = ac[inside], bc[inside]
            off = ai != bi
            np.add.at(node_credit[lvl], ai, sz[bi])
            np.add.at(node_credit[lvl], bi[off], sz[ai[off]])
            ua, ub = ac[undecided], bc[undecided]
            if lvl == depth:
                leaf_a.append(ua)
                leaf_b.append(ub)
                continue
            same = ua == ub
            sa, da, db = ua[same], ua[~same], ub[~same]
            next_a.append(
                np.concatenate(
                    [2 * sa, 2 * sa, 2 * sa + 1, 2 * da, 2 * da, 2 * da + 1, 2 * da + 1]
                )
            )
            next_b.append(
                np.concatenate(
                    [
                        2 * sa,
                        2 * sa + 1,
                        2 * sa + 1,
                        2 * db,
                        2 * db + 1,
                        2 * db,
                        2 * db + 1,
                    ]
                )
            )
        if lvl == depth or not next_a:
            break
        a, b = np.concatenate(next_a), np.concatenate(next_b)

    # Push node credits down to the leaves, then to the points.
    for lvl in range(depth):
        node_credit[lvl + 1] += np.repeat(node_credit[lvl], 2)
    pos_counts = np.repeat(node_credit[depth], leaf_sizes)

    # Leaf pairs on the boundary: point by point with the direct formula.
    la = np.concatenate(leaf_a) if leaf_a else np.zeros(0, dtype=np.int64)
    lb = np.concatenate(leaf_b) if leaf_b else np.zeros(0, dtype=np.int64)
    if la.size:
        width = int(leaf_sizes.max())
        slot = np.arange(width)
        leaf_pos = bounds[:-1, None] + slot[None, :]
        leaf_pos[slot[None, :] >= leaf_sizes[:, None]] = (
            n  # padding: a NaN row, never a friend
        )
        coords = np.full((d, n + 1), np.nan)
        coords[:, :n] = x[perm].T
        strict_upper = np.triu(np.ones((width, width), dtype=bool), 1)
        step = max(1, _TREE_CHUNK_ELEMS // (width * width))

        local = threading.local()
        accumulators: list[np.ndarray] = []

        ones = np.ones(width, dtype=np.float32)

        def work(k0: int) -> None:
            if not hasattr(local, "acc"):
                local.acc = np.zeros(n + 1, dtype=np.int64)
                local.buf = np.empty((2, step, width, width))
                local.m = np.empty((step, width, width), dtype=bool)
                accumulators.append(local.acc)
            ka, kb = la[k0 : k0 + step], lb[k0 : k0 + step]
            pa, pb = leaf_pos[ka], leaf_pos[kb]
            t, acc = local.buf[0, : ka.size], local.buf[1, : ka.size]
            np.subtract(coords[0][pa][:, :, None], coords[0][pb][:, None, :], out=t)
            np.multiply(t, t, out=acc)
            for k in range(1, d):
                np.subtract(coords[k][pa][:, :, None], coords[k][pb][:, None, :], out=t)
                np.multiply(t, t, out=t)
                np.add(acc, t, out=acc)
            m = np.less_equal(acc, r2, out=local.m[: ka.size])
            same = ka == kb
            m[same] &= strict_upper
            mf = m.astype(np.float32)  # row/column sums <= width: exact in float32
            np.add.at(
                local.acc, pa.ravel(), np.rint(mf @ ones).astype(np.int64).ravel()
            )
            np.add.at(
                local.acc, pb.ravel(), np.rint(ones @ mf).astype(np.int64).ravel()
            )
            # A leaf paired with itself reaches here only undecided: add its points' self pairs.
            np.add.at(local.acc, pa[same].ravel(), 1)

        _map(work, [(k0,) for k0 in range(0, la.size, step)], threads)
        for acc_pos in accumulators:
            pos_counts += acc_pos[:n]
    counts = np.empty(n, dtype=np.int64)
    counts[perm] = pos_counts
    return counts
