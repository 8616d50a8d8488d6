"""Randomness for privagg: one normaliser for every ``rng`` argument.

``rng=None`` (the default everywhere) gives a cryptographically secure source: a numpy
:class:`~numpy.random.Generator` over ``randomgen.AESCounter`` (AES-128 in counter mode, the
construction of NIST's CTR_DRBG, using AES-NI where the CPU has it), keyed with 128 bits from the
operating system's CSPRNG (:mod:`secrets`). We chose AES-CTR because it is a standard
cryptographic generator, ~4 ns per 64-bit word here (as fast as numpy's own PCG64 for our bulk
draws), and because it sits behind numpy's ``Generator`` API, so every sampler works unchanged on
a seeded generator in tests.

An ``int``, a :class:`numpy.random.SeedSequence` or a :class:`numpy.random.Generator` gives
reproducible output for tests and simulation; releases made with one record ``secure=False``.

One secure generator is kept per process and re-keyed after ``fork`` so that a parent and its
children never share a key stream.
"""

from __future__ import annotations

import numbers
import os
import secrets
import threading
from typing import Any, Union

import numpy as np
from randomgen import AESCounter

from .._validate import fail

__all__ = ["RNGLike", "SecureGenerator", "secure_generator", "resolve_rng"]

RNGLike = Union[None, int, np.integer, np.random.SeedSequence, np.random.Generator]


class SecureGenerator(np.random.Generator):
    """A numpy ``Generator`` whose bits come from AES-128-CTR keyed from OS entropy.

    Passing one as ``rng`` keeps the release ``secure=True``; any other ``Generator`` marks it
    insecure.
    """

    def __init__(self) -> None:
        super().__init__(AESCounter(key=secrets.randbits(128)))

    def __repr__(self) -> str:
        return "SecureGenerator(AESCounter, key from OS entropy)"


_lock = threading.Lock()
_process_generator: SecureGenerator | None = None
_process_pid: int | None = None


def _forget_after_fork() -> None:
    global _process_generator, _process_pid
    _process_generator = None
    _process_pid = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def secure_generator() -> SecureGenerator:
    """The process's secure generator (created on first use, new after ``fork``)."""
    global _process_generator, _process_pid
    pid = os.getpid()
    gen = _process_generator
    if gen is not None and _process_pid == pid:
        return gen
    with _lock:
        if _process_generator is None or _process_pid != pid:
            _process_generator = SecureGenerator()
            _process_pid = pid
        return _process_generator


def resolve_rng(rng: Any = None, where: str = "privagg") -> tuple[np.random.Generator, bool]:
    """Normalise an ``rng`` argument to ``(generator, secure)``.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` → the process's :class:`SecureGenerator` (secure). A :class:`SecureGenerator`
        → itself (secure). An int ≥ 0, a ``SeedSequence`` or any other ``Generator`` →
        a reproducible generator (insecure: for tests and simulation only).
    where : str
        Name of the calling function, used in error messages.

    Returns
    -------
    (numpy.random.Generator, bool)
        The generator to draw from and whether the release may be marked secure.

    Raises
    ------
    ParameterError
        If ``rng`` is of any other type, or a negative int.
    """
    if rng is None:
        return secure_generator(), True
    if isinstance(rng, SecureGenerator):
        return rng, True
    if isinstance(rng, np.random.Generator):
        return rng, False
    if isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng), False
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if int(rng) < 0:
            raise fail(where, "rng", "None, an int >= 0, a SeedSequence or a Generator", rng)
        return np.random.default_rng(int(rng)), False
    raise fail(where, "rng", "None, an int >= 0, a SeedSequence or a Generator", rng)
