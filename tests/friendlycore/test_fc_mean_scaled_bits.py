"""``ArrayPoints.scaled`` (the per-column scale step's ``x_j·2^{−k_j}``) is bit for bit the
``ldexp`` it replaced (then clamped into the float range), for every exponent of
``SCALE_EXPONENTS`` and values of every magnitude: subnormal results, values that overflow, signed
zeros, the extremes. Deterministic, seeded (no false failures). Negative control: a scale one ulp
off is detected."""

from __future__ import annotations

import numpy as np

from privagg.mechanisms.mean import SCALE_EXPONENTS, ArrayPoints, _finite

SEED = 20261202


def values() -> np.ndarray:
    rng = np.random.default_rng(SEED)
    mag = np.exp2(rng.integers(-1074, 1024, size=(4000, 3)).astype(float))
    x = rng.uniform(1.0, 2.0, size=(4000, 3)) * rng.choice([-1.0, 1.0], size=(4000, 3)) * mag
    edge = np.array([[5e-324, -5e-324, 0.0], [-0.0, 2.2250738585072014e-308, 1e-310],
                     [1.7976931348623157e308, -1.7976931348623157e308, 3e-320]])
    return np.concatenate([x, edge])


def test_scaled_equals_ldexp_bit_for_bit():
    print(f"seed={SEED}")
    x = values()
    for k in SCALE_EXPONENTS.tolist():
        e = np.array([k, -k if -k in SCALE_EXPONENTS else 0, SCALE_EXPONENTS[0]], dtype=np.int64)
        with np.errstate(over="ignore"):
            want = _finite(np.ldexp(x, -e))
            got = ArrayPoints(x).scaled(e).x
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), f"seed={SEED} k={k}"


def test_negative_control_scale_one_ulp_off():
    x = values()
    e = np.array([3, -7, 20], dtype=np.int64)
    with np.errstate(over="ignore"):
        off = _finite(x * np.nextafter(np.ldexp(1.0, -e), np.inf))
        got = ArrayPoints(x).scaled(e).x
    assert not np.array_equal(got.view(np.int64), off.view(np.int64))
