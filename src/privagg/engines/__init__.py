"""privagg.engines — where the counting happens.

- :mod:`privagg.engines.counting`: in-memory 1-D data (numpy, pandas, polars, pyarrow) →
  :class:`~privagg.engines.counting.KeyCounts`, and alignment with a public domain.
- :mod:`privagg.engines.duckdb`: CSV and Parquet files, counted by a ``GROUP BY`` inside DuckDB
  (out of core) → the same ``KeyCounts``.
- :mod:`privagg.engines.spark` (``privagg[spark]``): a column of a Spark DataFrame, counted by a
  ``groupBy`` in Spark; the stable histogram's noise and threshold run in the tasks.

Engines only count; noise and thresholds are applied by :mod:`privagg.mechanisms`, identically
for every engine. Submodules are imported on demand (``import privagg.engines.duckdb``).
"""
