"""The small-sample coordinate-wise plan of :func:`privagg.private_mean` (issue 11, items 1, 2, 4).

Chosen from the released count (public, like every plan switch of ``private_mean``): when
``radius=None``, the rows are in memory and ``n̂·ε/d <`` :data:`COORD_SAMPLE`. Proof:
docs/proofs/mean.md §11. After the count ``n̂`` (ε_n = ε/40), a noisy count of the rows outside
the clipping box takes ε/40 and the rest, ``ε_j = (ε − ε/20)/d`` per coordinate (basic
composition, pure ε, δ unused), is spent per coordinate ``j`` on

1. a coarse center ``c0_j``: report-noisy-max of the rank utility ``u(c) = −|#{x < c} − #{x > c}|``
   (sensitivity 1) over the public grid :func:`center_grid` (0 and ``±2^{k/4}``: every float64
   magnitude), with the public base measure :func:`log_prior` (heavy-tailed over octaves, centred
   at magnitude 1) added as offsets;
2. a spread ``s0_j``: the same over the positive grid for ``|x_j − c0_j|`` (prior centred at the
   octave of ``|c0_j|``);
3. a refined center ``c_j``: the same over ``c0_j + s0_j·i/16``, ``i = −32 … 32`` (uniform prior;
   the data median is within about ``s0_j`` of ``c0_j``: median ``|x − c0| >= |median − c0|``);
4. a spread ``s_j`` around ``c_j`` (prior centred at the octave of ``s0_j``);
5. the sum of ``x_ij − c_j`` clipped to ``[−R_j, R_j]``, ``R_j = K·s_j`` on the radius grid,
   released with discrete Laplace noise on its grid (``_noisy_clipped_release`` with d = 1); the
   mean is ``c_j + sum_j/n̂``.

Report-noisy-max: ``argmax_c (u(c) + a(c) + ν_c)``, ``ν_c ~ DLap(2/ε_step)`` i.i.d., ``a`` public
offsets ``(2/ε_step)·ln prior(c)`` (the discrete-Laplace analogue of the exponential mechanism with a
base measure): ε_step-DP for any data-independent offsets (docs/proofs/mean.md §11). Vectorized over
the candidates (sorted column, ``searchsorted``); loops run over the d columns only.
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..noise.samplers import discrete_laplace

#: The coordinate plan runs when the released ``n̂·ε/d`` is below this (public). **0: disabled**
#: (work in progress, issue 11): with 2500 it met the small-n targets on the mean-real benchmark,
#: but data whose spread is far below their magnitude (1e12 ± 1, ``test_fc_far``) all fall inside
#: one cell of the center grid, the rank utility is then flat (``−n`` everywhere) and the center
#: falls back to the prior (errors of 1e12). Needs a cell utility and repeated refinement first.
COORD_SAMPLE = 0
#: Share of ε of the noisy count of rows outside the clipping box.
COORD_SHARE_OUTSIDE = Fraction(1, 40)
#: Shares of each coordinate's ε_j: coarse center, refined center, spread, sum.
COORD_SHARES = (Fraction(2, 5), Fraction(1, 10), Fraction(1, 4), Fraction(1, 4))
#: Clipping half-width in released spreads (``R_j = K·s_j``; s_j about the median absolute deviation).
COORD_K = 10.0
#: Exponents ``k`` of the grid ``±2^{k/4}`` (2⁻¹⁰⁷⁴ … 2^1023.75: every finite float64 magnitude).
GRID_K = np.arange(-4296, 4096)
#: Refined center candidates ``c0 + c0·o``, ``o`` in :func:`refine_offsets` (0 and
#: ``±2^{−k/4}/4``, ``k = 0 … REFINE_STEPS``): relative resolution about 19 % of ``|median − c0|``.
REFINE_STEPS = 48
#: The spread's prior is centred this many octaves below the refined center's octave.
PRIOR_SPREAD = 2
#: Base measure over octaves ``o`` (relative to the centre octave): ``∝ (1 + |o|)^{−PRIOR_POWER}``.
PRIOR_POWER = 1.5

_LAPLACE = SimpleNamespace(gaussian=False)  # the only plan attribute _noisy_clipped_release reads


def refine_offsets() -> np.ndarray:
    """0 and ``±2^{−k/4}/4``, ``k = 0 … REFINE_STEPS`` (public, ascending)."""
    p = 0.25 * np.exp2(-np.arange(REFINE_STEPS + 1) / 4.0)
    return np.concatenate([-p, [0.0], p[::-1]])


def positive_grid() -> np.ndarray:
    """``2^{k/4}`` for ``k`` in :data:`GRID_K` (ascending; float64, public)."""
    return np.exp2(GRID_K / 4.0)


def center_grid() -> np.ndarray:
    """``−2^{k/4}`` (descending k), 0, ``2^{k/4}`` (ascending k): ascending, 2·8392 + 1 points."""
    p = positive_grid()
    return np.concatenate([-p[::-1], [0.0], p])


def log_prior(octaves: np.ndarray, centre: float) -> np.ndarray:
    """``ln((1 + |o − centre|)^{−PRIOR_POWER})`` for the (integer) octaves ``o`` of the candidates
    (unnormalized: a constant does not change an argmax)."""
    return -PRIOR_POWER * np.log1p(np.abs(octaves - centre))


def _center_offsets(scale: float) -> np.ndarray:
    """Offsets ``scale·ln prior`` over :func:`center_grid`: octave ``⌊k/4⌋`` on each side, and 0
    gets the weight of a point in octave 0 (public)."""
    oct_pos = np.floor(GRID_K / 4.0)
    lp = log_prior(oct_pos, 0.0)
    return scale * np.concatenate([lp[::-1], [0.0], lp])


def _spread_offsets(scale: float, centre: np.ndarray) -> np.ndarray:
    """Offsets over :func:`positive_grid` per column, prior centred at the octaves ``centre`` (d,)."""
    oct_pos = np.floor(GRID_K / 4.0)
    return scale * log_prior(oct_pos[None, :], centre[:, None])


def _octave(v: np.ndarray) -> np.ndarray:
    """``⌊log2 |v|⌋`` (0 for v = 0), public post-processing of released values."""
    a = np.abs(np.asarray(v, dtype=np.float64))
    out = np.zeros(a.shape)
    nz = a > 0
    out[nz] = np.frexp(a[nz])[1] - 1
    return out


def rank_utility(sorted_col: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """``u(c) = −|#{x < c} − #{x > c}|`` for each candidate ``c`` (one sorted column). Adding a row
    changes one of the two counts by at most one (none when ``x = c``): sensitivity 1."""
    n = sorted_col.size
    below = np.searchsorted(sorted_col, cand, side="left")
    above = n - np.searchsorted(sorted_col, cand, side="right")
    return -np.abs(below - above)


def noisy_max(utility: np.ndarray, offsets: np.ndarray, eps: Fraction, gen: np.random.Generator,
              sensitivity: int = 1) -> np.ndarray:
    """Report-noisy-max per row of ``utility`` (d, K) with public ``offsets`` (broadcast):
    ``argmax_k (u_k + a_k + ν_k)``, ``ν ~ DLap(2Δ/ε)`` i.i.d. (exact sampler), first maximum.
    ε-DP per row when each ``u_k`` moves by at most the integer ``Δ = sensitivity``."""
    nu = discrete_laplace(Fraction(2 * sensitivity) / eps, size=utility.shape, rng=gen)
    return np.argmax(utility + offsets + nu, axis=1)


def _medians(cols: list[np.ndarray], cands: np.ndarray, offsets: np.ndarray, eps: Fraction,
             gen: np.random.Generator) -> np.ndarray:
    """Per column ``j``, the index of the candidate (``cands[j]``) chosen by :func:`noisy_max` of
    the rank utility of ``cols[j]`` (ε-DP per column)."""
    cands = np.broadcast_to(cands, (len(cols), cands.shape[-1]))
    util = np.stack([rank_utility(np.sort(c), cands[j]) for j, c in enumerate(cols)])  # over columns
    return noisy_max(util, offsets, eps, gen)


def coordinate_shares(epsilon: Fraction, d: int) -> tuple[Fraction, Fraction, tuple[Fraction, ...]]:
    """``(ε_n, ε_out, per-coordinate step budgets)``; ``ε_n + ε_out + d·Σ steps = ε`` exactly."""
    from .mean import _SHARE_COUNT

    eps_n = epsilon * _SHARE_COUNT
    eps_out = epsilon * COORD_SHARE_OUTSIDE
    per = (epsilon - eps_n - eps_out) / d
    return eps_n, eps_out, tuple(per * s for s in COORD_SHARES)


def coordinate_mean(x: np.ndarray, n_hat: int, epsilon: Fraction, gen: np.random.Generator
                    ) -> dict[str, Any]:
    """Steps 1–5 of the module docstring on the finite rows ``x`` (n, d), given the released
    ``n̂ >= 1``. Returns the released values (mean, center, spreads, radii, outside count, and the
    public noise description for the confidence intervals)."""
    from .mean import _finite, _grid_up, _noisy_clipped_release, _sum_exponent

    n, d = x.shape
    _, eps_out, (e_c0, e_c1, e_s, e_sum) = coordinate_shares(epsilon, d)
    cols = [np.ascontiguousarray(x[:, j]) for j in range(d)]
    grid_c, grid_p = center_grid(), positive_grid()
    # 1. coarse center
    c0 = grid_c[_medians(cols, grid_c, _center_offsets(float(2 / e_c0)), e_c0, gen)]
    # 2. refined center on the geometric window c0 ± |c0|·2^{-k/4}/4 (and c0)
    cand = _finite(c0[:, None] + np.abs(c0)[:, None] * refine_offsets()[None, :])
    center = cand[np.arange(d), _medians(cols, cand, np.zeros(1), e_c1, gen)]
    # 3. spread around the refined center (prior centred PRIOR_SPREAD octaves below |center|)
    with np.errstate(all="ignore"):
        dev = [np.abs(cols[j] - center[j]) for j in range(d)]
    spread = grid_p[_medians(dev, grid_p, _spread_offsets(float(2 / e_s), _octave(center) - PRIOR_SPREAD),
                             e_s, gen)]
    # 5. clipped sums, one coordinate at a time (discrete Laplace, ε-DP each)
    radii = np.array([_grid_up(COORD_K * s) for s in spread.tolist()])
    mean = np.empty(d)
    params, steps_g = np.empty(d), np.empty(d)
    for j in range(d):  # over columns
        rel = _noisy_clipped_release(cols[j][:, None], center[j : j + 1], float(radii[j]), e_sum,
                                     _LAPLACE, gen)
        mean[j] = _finite(center[j] + rel.values[0] / n_hat)
        params[j], steps_g[j] = float(rel.noise_grid), rel.step
    # noisy count of the rows beyond the box (any coordinate): sensitivity 1
    with np.errstate(all="ignore"):
        out_rows = int((np.abs(x - center) > radii).any(axis=1).sum()) if n else 0
    outside = out_rows + int(discrete_laplace(1 / eps_out, rng=gen))
    q = math.exp(-float(eps_out))
    h = np.ldexp(1.0, [_sum_exponent(float(r)) for r in radii])
    return {"mean": mean, "center": center, "spread": spread, "radii": radii,
            "outside": float(outside), "outside_sd": math.sqrt(2.0 * q) / (1.0 - q),
            "noise": ("laplace-coordinate", params, steps_g, None,
                      h / 2.0 + 8.0 * 2.0**-53 * radii, steps_g)}
