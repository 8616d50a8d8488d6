"""``privagg histogram --engine spark``: the same release and ledger behaviour, counted in Spark.

Order of work (as with DuckDB, so that errors come early and only from public inputs): the
options (``--spark-conf k=v`` parsed here) → Spark started (``--spark-master``, ``local[*]`` by
default) → the Parquet file's schema → the domain file (cast exactly to the column's type) →
the ledger → the count (job 1; with ``--privacy-unit`` the bounded count, the unit column checked
with the schema) → the charge → noise and threshold in the tasks (job 2). FILE is
a Parquet file or a directory of Parquet files, local or any URI Spark reads (``hdfs://``,
``s3a://``, …); CSV is read by the DuckDB engine only.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from .. import _validate
from ..errors import ParameterError
from . import _guard
from ._units import unit_fields

__all__ = ["parse_conf", "spark_frame", "spark_histogram", "spark_kmeans", "spark_mean"]

_CSV_SUFFIXES = {".csv", ".tsv", ".txt", ".gz", ".zst"}


def engine_conf(where: str, engine: str, master: str | None, items: tuple[str, ...]) -> dict[str, str]:
    """``--engine`` (duckdb|spark), with ``--spark-master``/``--spark-conf`` only for spark: the
    parsed ``--spark-conf`` (the checks ``privagg mean`` and ``privagg kmeans`` share)."""
    _validate.check_choice(where, "engine", engine, ("duckdb", "spark"))
    if engine != "spark" and (master is not None or items):
        raise _validate.fail(where, "spark-master" if master is not None else "spark-conf",
                             "given with --engine spark only", master or items[0])
    return parse_conf(where, items)


def parse_conf(where: str, items: tuple[str, ...]) -> dict[str, str]:
    """``--spark-conf k=v`` (repeatable) as a dict; a key given twice is an error."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or key in conf:
            raise _validate.fail(where, "spark-conf", "KEY=VALUE with a non-empty key, each key once", item)
        conf[key] = value
    return conf


def _check_path(file: Path, where: str = "histogram") -> str:
    text = str(file)
    if "://" not in text:
        if not file.exists():
            raise ParameterError(f"{where}: parameter 'file' must be an existing Parquet file or directory of "
                                 f"Parquet files (or a URI Spark can read); got {text!r}.")
        if file.is_file() and file.suffix.lower() in _CSV_SUFFIXES:
            raise ParameterError(f"{where}: parameter 'file' must be Parquet with --engine spark (CSV files are "
                                 f"read by --engine duckdb); got {text!r}.")
    return text


def _domain_lines(path: Path, column: str, where: str) -> list[str]:
    """The domain file's keys: one per line, UTF-8, empty lines skipped, a first line equal to the
    column's name taken as a header (the DuckDB engine's rules)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        raise ParameterError(f"{where}: parameter 'domain' must be a readable UTF-8 text file, one key per "
                             f"line; got {str(path)!r}.") from None
    lines = [line for line in lines if line != ""]
    if lines and lines[0] == column:
        lines = lines[1:]
    if not lines:
        raise ParameterError(f"{where}: parameter 'domain' must be a file with at least one key; got {str(path)!r}.")
    return lines


def spark_frame(stack: ExitStack, file: Path, where: str, master: str | None, conf: dict[str, str]) -> Any:
    """The Parquet FILE as a Spark DataFrame (schema read): the path checked, Spark started
    (``master``, default ``local[*]``; stopped by ``stack`` unless a session was already active)."""
    from ..engines import spark as se

    path = _check_path(file, where)
    if master is not None and (not master.strip() or any(ch.isspace() for ch in master)):
        raise _validate.fail(where, "spark-master", "a Spark master URL such as local[*] or spark://host:7077",
                             master)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ParameterError(f"{where}: --engine spark needs pyspark: pip install 'privagg[spark]'") from None
    existing = SparkSession.getActiveSession()
    try:
        spark = se.spark_session(master or "local[*]", conf)
    except Exception:  # Java missing, bad master or config: Spark's message is not ours to show
        raise _validate.fail(where, "spark-master", "a Spark master that can be started (is Java 17 "
                             "installed? are the --spark-conf settings valid?)", master or "local[*]") from None
    if existing is None:
        stack.callback(spark.stop)
    try:
        frame = spark.read.parquet(path)
        frame.schema  # noqa: B018 - the schema is read here, before anything is charged
    except Exception:
        raise ParameterError(f"{where}: parameter 'file' must be a Parquet file or directory Spark can "
                             f"read (it could not be read as one); got {path!r}.") from None
    return frame


def spark_mean(stack: ExitStack, file: Path, cols: list[str], *, ledger: Path | None, master: str | None,
               conf: dict[str, str], privacy_unit: str | None = None, max_rows_per_unit: int = 1,
               **params: Any) -> Any:
    """The release of ``privagg mean FILE --engine spark``: Spark started, the schema and the
    columns checked (numeric Spark types), the ledger opened, then :func:`privagg.private_mean` on
    the DataFrame (the finite rows counted before the charge; noise from the CSPRNG)."""
    from ..accounting import Ledger
    from ..engines import spark_points
    from ..mechanisms.mean import private_mean

    frame = spark_frame(stack, file, "private_mean", master, conf)
    user = _point_schema(frame, cols, privacy_unit, max_rows_per_unit, "private_mean")
    opened = None if ledger is None else stack.enter_context(Ledger(ledger))
    charged = _guard.charging(opened, command="mean", file=str(file), columns=cols, engine="spark",
                              **({} if privacy_unit is None else unit_fields(privacy_unit, max_rows_per_unit)))
    return private_mean(frame, columns=cols, rng=None, ledger=charged, **user, **params)


def _point_schema(frame: Any, cols: list[str], privacy_unit: str | None, k: int, where: str) -> dict[str, Any]:
    """Check the point columns and the unit column (schema only); the mechanism's unit arguments."""
    from ..engines import spark as se
    from ..engines import spark_points

    spark_points.point_columns(frame, cols, privacy_unit, where=where)
    if privacy_unit is None:
        return {}
    se.describe_column(frame, privacy_unit, where=where, name="privacy-unit")
    return {"units": privacy_unit, "max_rows_per_unit": k}


def spark_kmeans(stack: ExitStack, file: Path, cols: list[str], *, ledger: Path | None, master: str | None,
                 conf: dict[str, str], k: int, privacy_unit: str | None = None, max_rows_per_unit: int = 1,
                 **params: Any) -> Any:
    """The release of ``privagg kmeans FILE --engine spark``: as :func:`spark_mean`, then
    :func:`privagg.private_kmeans` (either strategy: ``radius`` in ``params`` selects sample and aggregate) on the DataFrame."""
    from ..accounting import Ledger
    from ..engines import spark_points
    from ..mechanisms.kmeans import private_kmeans

    frame = spark_frame(stack, file, "private_kmeans", master, conf)
    user = _point_schema(frame, cols, privacy_unit, max_rows_per_unit, "private_kmeans")
    opened = None if ledger is None else stack.enter_context(Ledger(ledger))
    charged = _guard.charging(opened, command="kmeans", file=str(file), columns=cols, engine="spark",
                              **({} if privacy_unit is None else unit_fields(privacy_unit, max_rows_per_unit)))
    return private_kmeans(frame, k, columns=cols, rng=None, ledger=charged, **user, **params)


def spark_histogram(
    stack: ExitStack, file: Path, column: str, *, mechanism: str, epsilon: float, delta: float | None,
    neighbors: str, threshold: str | None, domain: Path | None, ledger: Path | None, master: str | None,
    conf: dict[str, str], privacy_unit: str | None = None, bounds: tuple[int, int] | None = None,
) -> Any:
    """The release of ``privagg histogram FILE --engine spark`` (ledger charged inside, before noise).

    With ``privacy_unit`` (its column checked with the schema, before the ledger): user-level
    bounding in Spark with ``bounds`` = (ℓ0, ℓ∞) and a secret from the CSPRNG (``rng=None``).
    """
    from ..accounting import Ledger
    from ..engines import spark as se

    frame = spark_frame(stack, file, "histogram", master, conf)
    info = se.describe_column(frame, column, where="histogram")
    user: dict[str, Any] = {}
    if privacy_unit is not None:
        se.describe_column(frame, privacy_unit, where="histogram", name="privacy-unit")
        l0, linf = bounds if bounds is not None else (1, 1)
        user = {"units": privacy_unit, "max_keys_per_unit": l0, "max_rows_per_key": linf}
    domain_keys = None
    if domain is not None:
        domain_keys = se.spark_domain(info, _domain_lines(domain, column, mechanism), mechanism)
    opened = None if ledger is None else stack.enter_context(Ledger(ledger))
    context = {} if privacy_unit is None else {"privacy_unit": privacy_unit}
    charged = _guard.charging(opened, command="histogram", file=str(file), column=column, engine="spark",
                              **context)
    if domain_keys is not None:
        return se.laplace_histogram(frame, column=column, epsilon=epsilon, domain=domain_keys,
                                    neighbors=neighbors, rng=None, ledger=charged, **user)
    return se.stable_histogram(frame, column=column, epsilon=epsilon, delta=delta, neighbors=neighbors,
                               threshold=threshold, rng=None, ledger=charged, **user)
