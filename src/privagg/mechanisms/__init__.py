"""privagg.mechanisms: private histograms (``histogram``).

The public functions are also available from the top-level package (``privagg.laplace_histogram``,
``privagg.stable_histogram``). Proofs: ``docs/proofs/histograms.md``.
"""

from .histogram import (
    HistogramRelease,
    LaplaceHistogramParams,
    StableHistogramParams,
    laplace_histogram,
    laplace_histogram_from_counts,
    noise_scale,
    stable_histogram,
    stable_histogram_from_counts,
    stable_threshold,
)

__all__ = [
    "HistogramRelease",
    "LaplaceHistogramParams",
    "StableHistogramParams",
    "laplace_histogram",
    "laplace_histogram_from_counts",
    "noise_scale",
    "stable_histogram",
    "stable_histogram_from_counts",
    "stable_threshold",
]
