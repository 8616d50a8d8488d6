"""privagg.mechanisms: every release — histograms (``histogram``, ``partition_selection``), the
FriendlyCore mean (``mean``) and k-means (``kmeans``).

The public functions are also available from the top-level package (``privagg.laplace_histogram``,
``privagg.stable_histogram``, ``privagg.private_mean``, ``privagg.private_kmeans``). ``mean`` and
``kmeans`` are imported on use (``privagg.mechanisms.mean``), so that the histograms load fast.
Proofs: ``docs/proofs/``.
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
