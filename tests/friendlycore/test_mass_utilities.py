"""The coordinate plan's monotone "mass" utilities (docs/proofs/mean.md §11, steps 1–4; 2026-12-06).

Steps 1 and 3 (cells, refinement levels) use ``u = −max(2·below, 2·above, n + τ − rows)`` and steps
2 and 4 off the annulus path ``u_k = −max(2·(n − C_k), 2·(C_{k−1−τ} − Z))``: a row moves every
candidate by 0, −1 or −2, so the weights ``exp(ε·u/2)`` are ε-bounded-range. Off the median (or
good-spread) candidates they equal the median utilities minus a constant (the same weights); on
them they are larger, by the rows the candidate holds. Known answers, those identities on random
data, and the monotone sensitivity on 3000 random neighbour pairs each (deterministic, seed
printed). The audits of the steps on worst-case pairs are in test_fc_mean_coordinate_audit.py.
"""

from __future__ import annotations

import numpy as np

from privagg.mechanisms import mean_small as S
from privagg.testing.fixtures import wild_mean_releases

SEED = 20261208


def test_cell_mass_utility_known_answers():
    # n = 10; cells (below_lo, below_hi): a median cell of 6 rows, a 1-row cell and an empty cell
    # at the median, an empty cell below everything
    lo, hi = np.array([2, 4, 5, 0]), np.array([8, 5, 5, 0])
    assert S.cell_mass_utility_of_counts(lo, hi, 10).tolist() == [-4, -10, -10, -20]
    # τ = 3: n + τ − rows = 7, 12, 13, 13
    assert S.cell_mass_utility_of_counts(lo, hi, 10, 3).tolist() == [-7, -12, -13, -20]
    # the median utility: 0, 0, 0, −10 (τ = 0); 0, −2, −3, −10 (τ = 3)
    assert S.cell_utility_of_counts(lo, hi, 10).tolist() == [0, 0, 0, -10]
    x = np.array([0.0] * 3 + [1.0] * 7)
    cells_lo, cells_hi = np.array([-1.0, 0.0, 1e-300, 1.0]), np.array([0.0, 1e-300, 1.0, 2.0])
    # [−1, 0): 0 below, 10 above; [0, 1e-300): the 3 zeros; (0, 1): empty; [1, 2): the 7 ones
    assert S.cell_mass_utility(x, cells_lo, cells_hi).tolist() == [-20, -14, -14, -6]
    assert S.cell_utility(x, cells_lo, cells_hi).tolist() == [-10, -4, -4, 0]


def test_cell_mass_utility_equals_the_median_utility_off_the_median_cells():
    """``mass = −n − M`` and ``median = −max(0, M)`` with ``M = max(2b − n, 2a − n, τ − rows)``:
    equal up to −n where the median utility is below 0, larger than −n only on median cells."""
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    lo, hi, *_ = S.point_cells(S.CELL_E_MIN)
    for _ in range(200):
        x = np.sort(rng.choice([0.0, 1.0, 3.0, 7.5, 1000.0, -2.0, 2.0**-40], size=int(rng.integers(1, 30))))
        tau = int(rng.integers(0, 6))
        mass, med = S.cell_mass_utility(x, lo, hi, tau), S.cell_utility(x, lo, hi, tau)
        off = med < 0
        assert np.array_equal(mass[off], med[off] - x.size)
        assert (mass[~off] >= -x.size).all() and (mass <= 0).all()


def test_cell_mass_utility_monotone_sensitivity():
    """3000 random add-one pairs over step 1's cells (octave, point and integer point cells) with
    τ = 0 … 7: every utility moves by 0, −1 or −2."""
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    lo, hi, *_ = S.point_cells(S.CELL_E_MIN)
    atoms = np.array([0.0, 1.0, -1.0, 3.0, 5.5, 1000.0, 2.0**-60, 0.5])
    for _ in range(3000):
        x = rng.choice(atoms, size=int(rng.integers(0, 12)))
        z = float(rng.choice(atoms))
        tau = int(rng.integers(0, 8))
        du = S.cell_mass_utility(np.sort(np.append(x, z)), lo, hi, tau) - S.cell_mass_utility(np.sort(x), lo, hi, tau)
        assert du.min() >= -2 and du.max() <= 0, (x, z, tau)


def _spread_counts(y: np.ndarray, c: float, edge: float | None = None):
    grid = S.positive_grid()
    ys = np.sort(y)
    with np.errstate(over="ignore"):
        lo_e = c - grid
        extra = [] if edge is None else [edge, np.nextafter(edge, np.inf)]
        b = np.searchsorted(ys, np.concatenate([lo_e, S.spread_upper_edges(c, grid), extra]), side="left")
    if edge is not None:
        b = S.edge_tied_counts(b, lo_e, edge)
    return b[grid.size:], b[: grid.size]


def test_spread_mass_utility_known_answers():
    """Around c = 0: the rows 0, 0 (tied), 1, 1, 1, 4 (untied distances 1, 1, 1, 4; n = 6, Z = 2;
    the intervals ``[−g, g)`` are half open, so a row at distance g lies beyond g). Untied rows
    beyond g_k: 4 for k <= 0 (g <= 1), 1 for k = 1 … 8 (g <= 4), 0 above; within g_{k−5}: 0 for
    k <= 5, 3 for k = 6 … 13, 4 from k = 14 (g_{k−5} > 4). So u = −8, −2 (k = 1 … 5),
    −6 (k = 6 … 13), −8: no band ``(g_{k−5}, g_k]`` (a factor 2^{5/4}) holds both 1 and 4."""
    x = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 4.0])
    u = S.centred_spread_mass_utility(*_spread_counts(x, 0.0), x.size)
    k = S.GRID_K
    want = np.select([k <= 0, k <= 5, k <= 13], [-8, -2, -6], -8)
    assert np.array_equal(u, want)
    med = S.centred_spread_utility(*_spread_counts(x, 0.0), x.size)
    off = med < 0
    assert np.array_equal(u[off], med[off] - 4) and (u[~off] >= -4).all() and (~off).any()


def test_spread_mass_utility_monotone_sensitivity():
    """3000 random add-one pairs around centers holding rows (1, −2, 0.5, 3; with and without
    step 4's tied left edge): every u_k moves by 0, −1 or −2; and ``mass = median − (n − Z)``
    where the median utility is below 0."""
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    for _ in range(3000):
        c = float(rng.choice([1.0, -2.0, 0.5, 3.0]))
        edge = None if rng.random() < 0.5 else c - 0.25
        x = np.concatenate([np.full(int(rng.integers(0, 5)), c),
                            c + rng.integers(-4, 5, size=int(rng.integers(0, 6))) / 4.0])
        z = float(rng.choice([c, c + 0.5, c - 1.0, c + 4.0, c - 0.25]))
        y = np.append(x, z)
        u0 = S.centred_spread_mass_utility(*_spread_counts(x, c, edge), x.size)
        u1 = S.centred_spread_mass_utility(*_spread_counts(y, c, edge), y.size)
        du = u1 - u0
        assert du.min() >= -2 and du.max() <= 0, (x, c, z, edge)
        hi_c, lo_c = _spread_counts(x, c, edge)
        med = S.centred_spread_utility(hi_c, lo_c, x.size)
        m = x.size - int(hi_c[0] - lo_c[0])  # the untied rows n − Z
        off = med < 0
        assert np.array_equal(u0[off], med[off] - m), (x, c, edge)


def _far_wild(runs: int, d: int = 3, n: int = 300) -> int:
    """Wild releases (``wild_mean_releases``) of d N(1000, 1) columns."""
    return wild_mean_releases(lambda rng, n_, d_: rng.normal(1000.0, 1.0, (n_, d_)), runs, SEED, d=d, n=n)


def test_far_data_small_n_no_wild_release(monkeypatch):
    """Three N(1000, 1) columns, n = 300, ε = 1: the refinement level (ε ≈ 0.035 at d = 3) and the
    spread steps had the data's whole count as margin at exp(ε·u/2) against 33 subcells (resp.
    ~160 spreads) only as the median utilities' n/2. Measured over 300 runs (seed families 20261207
    and 20261208, 150 each): wild releases 3 of 300 (1 %) with the mass utilities, 87 of 300 (29 %)
    with the median utilities (the control). Fails when more than 5 of 100 are wild
    (P[Bin(100, 0.01) >= 6] ≈ 5·10⁻⁴); the control must have at least 15 (P[Bin(100, 0.29) <= 14]
    ≈ 3·10⁻⁴)."""
    wild = _far_wild(100)
    monkeypatch.setattr(S, "cell_mass_utility_of_counts", S.cell_utility_of_counts)
    monkeypatch.setattr(S, "centred_spread_mass_utility", S.centred_spread_utility)
    control = _far_wild(100)
    print(f"seed={SEED}: wild releases {wild} of 100; control (median utilities) {control} of 100")
    assert wild <= 5 and control >= 15, (wild, control)
