"""Secure, exact, vectorized noise: the layer every mechanism draws from."""

from .rng import SecureGenerator, resolve_rng, secure_generator

__all__ = ["SecureGenerator", "resolve_rng", "secure_generator"]
