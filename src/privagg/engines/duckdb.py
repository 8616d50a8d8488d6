"""DuckDB engine: count the keys of a CSV or Parquet file inside DuckDB.

The GROUP BY count runs in DuckDB (vectorized, multi-threaded, spilling to a temporary directory
when the hash table outgrows the memory limit, so files larger than memory work); only the
``(key, count)`` pairs come back, as numpy arrays (``fetchnumpy``, which unlike pyarrow's
conversions does not import pandas: 0.4 s of start-up). Noise and thresholds are applied
afterwards by the mechanism layer (:mod:`privagg.mechanisms.histogram`), identically for every
engine.

What is public here: the file's path, its format and its schema (column names and types). Errors
name those and never echo records: DuckDB's own messages about malformed CSV quote whole lines of
data, so every DuckDB error is replaced by a message written here.

Formats. ``.parquet``/``.pq`` files are read with ``read_parquet``; ``.csv``/``.tsv``/``.txt``
(optionally compressed: ``.csv.gz``; ``.csv.zst`` when the ``zstandard`` module is installed)
with ``read_csv``; other names are recognised by the Parquet magic bytes and read as CSV otherwise.
Parquet keeps its column types (DECIMAL, UUID, TIME, TIMESTAMPTZ and other non-native scalar
types are keyed by their exact text; LIST/STRUCT/MAP columns are refused).

CSV. A CSV file must have a header row, and **the schema comes from the header line only**: it is
parsed here (Python's ``csv`` module, with the dialect of :class:`CsvOptions`) and handed to
DuckDB as an explicit list of VARCHAR columns with auto-detection off, so nothing is ever sniffed
from data rows. A header that cannot be read (undecodable, unbalanced quote, empty or repeated
names, longer than 1 MiB) is a public schema error. **CSV is read as text**: keys are strings
exactly as written (``"007"`` stays ``"007"``). The dialect is fixed and public
(:class:`CsvOptions`: ``delimiter``, ``encoding`` — ``utf-8``, ``utf-16`` or ``latin-1``, the
encodings DuckDB reads without extensions — and ``quote``). Records follow RFC 4180: a quoted
field may contain delimiters, doubled quotes and line breaks; an empty field and ``""`` are NULL.

Malformed CSV records are read record by record, never as errors (DuckDB's lenient reader,
``strict_mode = false``, so that no single record can stop the scan): a record with too few
fields, bytes invalid in the encoding, or a line longer than DuckDB's ``max_line_size`` (2 MB)
is skipped by DuckDB (``ignore_errors``) and counted through its rejects table
(``store_rejects``, one row per rejected record, stored text capped at a few bytes), so it
counts in ``n`` and is never a key (for numeric reads: a row of NaN). A record with too many
fields keeps the header's number of fields (the rest is dropped); a quote inside an unquoted
field is part of its text; a lone carriage return ends a record (as in old Mac files). A field
containing a NUL byte is a missing value. Each rule depends on the record alone. An unterminated
quote makes the rest of the
file one (malformed) record, as RFC 4180 parsing must; for files written without quoting, use
``CsvOptions(quote="")`` so that every line is a record. Empty lines are skipped (not records),
except in a one-column file, where an empty line is a record with a missing key. Nothing about a
malformed record appears in any message.

Float keys (FLOAT/DOUBLE columns) are grouped on a canonical value: −0.0 is counted and released
as +0.0 (DuckDB groups the two together but would keep whichever came first); NaN is missing.
See :mod:`privagg.engines.counting` for the one key equality of every engine.

Missing keys. Records whose key is NULL (an empty CSV field, a Parquet null, a malformed CSV
record) or NaN count in ``n`` but are never keys: the mechanisms treat them like records outside
the domain.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import importlib.util
import io
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np

from .._validate import fail
from ..errors import ParameterError
from .counting import KeyCounts

__all__ = [
    "CSV_ENCODINGS",
    "DEFAULT_MEMORY_LIMIT",
    "CsvOptions",
    "FileColumn",
    "check_csv_options",
    "count_column",
    "count_file",
    "describe_column",
    "detect_format",
    "load_domain",
    "quote_identifier",
]

FileFormat = Literal["csv", "parquet"]

#: DuckDB's memory limit for the GROUP BY; beyond it DuckDB spills to a temporary directory.
DEFAULT_MEMORY_LIMIT = "1GB"

_CSV_SUFFIXES = {".csv", ".tsv", ".txt"}
_COMPRESSED_SUFFIXES = {".gz", ".zst"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
# DuckDB type names as DESCRIBE prints them: BIGINT, VARCHAR, DECIMAL(18,3), TIMESTAMP WITH TIME ZONE.
_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]*(\(\d+(, ?\d+)?\))?( [A-Z ]+)?")
# Key types fetched as numpy values as they are (the others are fetched as text).
_NATIVE_TYPES = {
    "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
    "UBIGINT", "FLOAT", "DOUBLE", "VARCHAR", "DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS",
    "TIMESTAMP_NS",
}
_NESTED_TYPE = re.compile(r"\[|\b(STRUCT|MAP|UNION|LIST)\b")
_SHOW_COLUMNS = 12  # column names listed in a "missing column" message
_FLOAT_TYPES = {"FLOAT", "DOUBLE", "REAL"}

#: Encodings DuckDB's CSV reader supports without extensions (which are never loaded here).
CSV_ENCODINGS = ("utf-8", "utf-16", "latin-1")
_ENCODING_ALIASES = {
    "utf-8": "utf-8", "utf8": "utf-8",
    "utf-16": "utf-16", "utf16": "utf-16",
    "latin-1": "latin-1", "latin1": "latin-1", "iso-8859-1": "latin-1", "iso8859-1": "latin-1",
}
# Python codecs for reading the header as DuckDB does (DuckDB skips a UTF-8 byte-order mark).
_PY_CODECS = {"utf-8": "utf-8-sig", "utf-16": "utf-16", "latin-1": "latin-1"}
_MAX_HEADER_CHARS = 1 << 20

ProgressCallback = Callable[[float], None]


@dataclass(frozen=True)
class CsvOptions:
    """The CSV dialect (public): how a CSV file is split into records and fields.

    Attributes
    ----------
    delimiter : str
        One character separating fields (default ``","``; ``"\\t"`` for TSV). Not a line break,
        not the quote character.
    encoding : str
        ``"utf-8"`` (default; a byte-order mark is skipped), ``"utf-16"`` (with a byte-order mark)
        or ``"latin-1"`` — the encodings DuckDB's CSV reader supports without extensions.
        Aliases such as ``"utf8"``, ``"latin1"`` and ``"iso-8859-1"`` are accepted.
    quote : str
        The quote character (default ``'"'``; a quote inside a quoted field is doubled), or
        ``""`` for files written without quoting (every line is then exactly one record).

    Validated by :func:`check_csv_options` (called by every reader) before anything is read.
    """

    delimiter: str = ","
    encoding: str = "utf-8"
    quote: str = '"'


def check_csv_options(where: str, options: CsvOptions | None) -> CsvOptions:
    """Validate ``options`` (``None`` → the defaults); return them with the encoding normalised.

    Raises
    ------
    ParameterError
        Naming ``delimiter``, ``encoding`` or ``quote``.
    """
    if options is None:
        return CsvOptions()
    if not isinstance(options, CsvOptions):
        raise fail(where, "csv", "a CsvOptions or None", type(options).__name__)
    d, q, e = options.delimiter, options.quote, options.encoding
    if not isinstance(d, str) or len(d) != 1 or d in "\r\n" or d == "\0":
        raise fail(where, "delimiter", "one character, not a line break or NUL", d)
    if not isinstance(q, str) or len(q) > 1 or q in ("\r", "\n", "\0") or (q and q == d):
        raise fail(where, "quote", "one character other than the delimiter, or '' for none", q)
    encoding = _ENCODING_ALIASES.get(e.strip().lower().replace("_", "-")) if isinstance(e, str) else None
    if encoding is None:
        raise fail(where, "encoding", "one of " + ", ".join(CSV_ENCODINGS), e)
    return CsvOptions(delimiter=d, encoding=encoding, quote=q)


@dataclass(frozen=True)
class FileColumn:
    """A column of a data file: what is public about it (path, format, name, DuckDB type).

    For CSV also the dialect (``csv``) and the header's column names (``header``), which define
    the schema handed to DuckDB.
    """

    path: Path
    format: FileFormat
    column: str
    duckdb_type: str
    csv: CsvOptions | None = None
    header: tuple[str, ...] = ()


def quote_identifier(name: str) -> str:
    """Quote ``name`` as a SQL identifier (``"`` doubled), so no name can inject SQL."""
    return '"' + name.replace('"', '""') + '"'


def detect_format(path: str | Path, where: str = "count_file") -> FileFormat:
    """``"csv"`` or ``"parquet"``, from the file name, else from the Parquet magic bytes.

    Raises
    ------
    ParameterError
        If ``path`` is not a readable regular file.
    """
    p = Path(path)
    if not p.is_file():
        raise _path_error(where, "file", "an existing, readable CSV or Parquet file", path)
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED_SUFFIXES:
        suffixes = suffixes[:-1]
    if suffixes and suffixes[-1] in _PARQUET_SUFFIXES:
        return "parquet"
    if suffixes and suffixes[-1] in _CSV_SUFFIXES:
        return "csv"
    try:
        with p.open("rb") as fh:
            magic = fh.read(4)
    except OSError:
        raise _path_error(where, "file", "an existing, readable CSV or Parquet file", path) from None
    return "parquet" if magic == b"PAR1" else "csv"


def _key_sql(expression: str, duckdb_type: str) -> str:
    """The key as fetched: numbers, booleans, text, dates and timestamps as they are; other scalar
    types (DECIMAL, UUID, TIME, TIMESTAMP WITH TIME ZONE, …) as their text, which is exact."""
    if duckdb_type in _FLOAT_TYPES:
        # Canonical floats: −0.0 → +0.0 inside the GROUP BY expression (NaN stays NaN: missing).
        return f"CASE WHEN {expression} = 0 THEN CAST(0 AS {duckdb_type}) ELSE {expression} END"
    if duckdb_type in _NATIVE_TYPES:
        return expression
    return f"CAST({expression} AS VARCHAR)"


def _csv_key_sql(expression: str) -> str:
    """A CSV field as a key: a field holding a NUL byte is a missing value."""
    return f"CASE WHEN strpos({expression}, chr(0)) = 0 THEN {expression} END"


# The dialect and the schema are bound as parameters, never formatted into the SQL text; the
# schema is the header's names (VARCHAR), auto-detection is off, malformed records are skipped
# and recorded (a few bytes each) in the temporary table reject_errors, to be counted.
_READ_CSV = (
    "read_csv($path, header = true, auto_detect = false, columns = $columns, delim = $delim, "
    "quote = $quote, escape = $quote, encoding = $encoding, comment = '', strict_mode = false, "
    "null_padding = false, ignore_errors = true, store_rejects = true, rejects_limit = 0, "
    "rejects_line_size_limit = 1)"
)
_COUNT_REJECTS = "SELECT count(DISTINCT (file_id, line_byte_position)) FROM reject_errors"


def _source(fmt: FileFormat) -> str:
    # The path is always bound as the parameter $path, never formatted into the SQL text.
    if fmt == "parquet":
        return "read_parquet($path)"
    return _READ_CSV


def _params(info: FileColumn) -> dict[str, object]:
    """The query parameters of :func:`_source` for the file of ``info``."""
    if info.format == "parquet":
        return {"path": str(info.path)}
    options = info.csv or CsvOptions()
    return {
        "path": str(info.path),
        "columns": dict.fromkeys(info.header, "VARCHAR"),
        "delim": options.delimiter,
        "quote": options.quote,
        "encoding": options.encoding,
    }


def _count_rejects(con: duckdb.DuckDBPyConnection) -> int:
    """The number of malformed CSV records skipped by the last scan on ``con``."""
    return int(con.sql(_COUNT_REJECTS).fetchall()[0][0])


def _open_binary(path: Path) -> io.BufferedIOBase:
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix == ".zst":
        import zstandard  # optional: raises ImportError when absent

        return zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
    return path.open("rb")


def read_csv_header(path: Path, options: CsvOptions, where: str) -> tuple[str, ...]:
    """The column names of a CSV file, from its first line only (public schema).

    Raises
    ------
    ParameterError
        No header, undecodable header, malformed header (unbalanced quote, a line break inside
        a quoted name), empty or repeated names, or a header line over 1 MiB. The message
        names the file, never its contents.
    """
    rule = "a CSV file with a header row of distinct, non-empty column names (it could not be parsed as one)"
    if path.suffix.lower() == ".zst" and importlib.util.find_spec("zstandard") is None:
        rule = "a .csv.zst file readable by Python: install the 'zstandard' module"
        raise _path_error(where, "file", rule, path)
    # Decode block by block until the first line break: bytes after it (data) are never looked
    # at, and undecodable bytes in the header show up as U+FFFD (refused below).
    decoder = codecs.getincrementaldecoder(_PY_CODECS[options.encoding])(errors="replace")
    text = ""
    try:
        with _open_binary(path) as fh:
            while "\n" not in text and len(text) <= _MAX_HEADER_CHARS:
                block = fh.read(1 << 16)
                text += decoder.decode(block, final=not block)
                if not block:
                    break
    except (OSError, EOFError, ValueError, UnicodeError):
        raise _path_error(where, "file", rule, path) from None
    line, newline, _ = text.partition("\n")
    if (not newline and not line) or len(line) > _MAX_HEADER_CHARS or "\ufffd" in line:
        raise _path_error(where, "file", rule, path)
    line = line.removesuffix("\r")
    dialect = {"delimiter": options.delimiter, "strict": True}
    if options.quote:
        dialect.update(quotechar=options.quote, doublequote=True, quoting=csv.QUOTE_MINIMAL)
    else:
        dialect.update(quoting=csv.QUOTE_NONE, quotechar=None)
    try:
        rows = list(csv.reader([line], **dialect))
    except csv.Error:
        raise _path_error(where, "file", rule, path) from None
    names = tuple(rows[0]) if len(rows) == 1 else ()
    if not names or any(not name or "\0" in name for name in names) or len(set(names)) != len(names):
        raise _path_error(where, "file", rule, path)
    return names


def _path_error(where: str, name: str, rule: str, path: str | Path) -> ParameterError:
    """The standard one-line error, with the whole path (``fail`` would shorten it)."""
    return ParameterError(f"{where}: parameter '{name}' must be {rule}; got {str(path)!r}.")


def _unparsable(where: str, path: Path, fmt: FileFormat) -> ParameterError:
    # Our own message: DuckDB's would quote the offending line of data.
    label = "a Parquet file" if fmt == "parquet" else "a CSV file with a header row"
    return _path_error(where, "file", f"{label} (it could not be parsed as one)", path)


def _connect(memory_limit: str, temp_directory: str | None) -> duckdb.DuckDBPyConnection:
    # Local files only: no extension is downloaded or loaded behind the user's back (CSV and
    # Parquet readers are built in).
    config = {
        "memory_limit": memory_limit,
        "preserve_insertion_order": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if temp_directory is not None:
        config["temp_directory"] = temp_directory
    con = duckdb.connect(":memory:", config=config)
    # DuckDB's own bar would print to stdout (into --json output) after 2 s; we draw ours on stderr.
    con.sql("SET enable_progress_bar = false")
    return con


def describe_column(
    path: str | Path, column: str, *, where: str = "count_file", csv: CsvOptions | None = None
) -> FileColumn:
    """Check that ``path`` can be read and has ``column``; return its format and DuckDB type.

    Only the schema is read: for Parquet its metadata, for CSV the header line alone (parsed
    with the dialect ``csv``; every column is VARCHAR), never a data row.

    Raises
    ------
    ParameterError
        The file is missing, unreadable or malformed (for CSV: its header), bad ``csv``
        options, or no column named ``column`` (exact, case-sensitive match; column names are
        schema, hence public).
    """
    p = Path(path)
    options = check_csv_options(where, csv)
    fmt = detect_format(p, where)
    if not isinstance(column, str) or not column:
        raise fail(where, "column", "a non-empty column name", column)
    if p.stat().st_size == 0:
        raise _unparsable(where, p, fmt)
    if fmt == "csv":
        header = read_csv_header(p, options, where)
        types = dict.fromkeys(header, "VARCHAR")
    else:
        options, header = None, ()
        con = _connect(DEFAULT_MEMORY_LIMIT, None)
        try:
            schema = con.sql(f"DESCRIBE SELECT * FROM {_source(fmt)}", params={"path": str(p)}).fetchall()
        except duckdb.Error:
            raise _unparsable(where, p, fmt) from None
        finally:
            con.close()
        types = {row[0]: row[1] for row in schema}
    if column not in types:
        names = ", ".join(repr(name) for name in list(types)[:_SHOW_COLUMNS])
        if len(types) > _SHOW_COLUMNS:
            names += f", ... ({len(types)} columns)"
        raise fail(where, "column", f"a column of the file ({names})", column)
    duckdb_type = str(types[column])
    if _NESTED_TYPE.search(duckdb_type):
        rule = "a column of scalar keys (not a LIST, STRUCT, MAP or UNION)"
        raise fail(where, "column", rule, f"{column!r} of type {duckdb_type}")
    return FileColumn(path=p, format=fmt, column=column, duckdb_type=duckdb_type, csv=options, header=header)


@contextmanager
def _progress_poller(
    con: duckdb.DuckDBPyConnection, callback: ProgressCallback | None, interval: float = 0.1
) -> Iterator[None]:
    """Poll ``con.query_progress()`` (percent, −1 when unknown) from a thread while a query runs."""
    if callback is None:
        yield
        return
    con.sql("SET enable_progress_bar = true")
    con.sql("SET enable_progress_bar_print = false")
    con.sql("SET progress_bar_time = 0")
    done = threading.Event()

    def poll() -> None:
        while not done.wait(interval):
            value = con.query_progress()
            if value >= 0:
                callback(min(float(value), 100.0))

    thread = threading.Thread(target=poll, name="privagg-duckdb-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def count_file(
    path: str | Path,
    column: str,
    *,
    progress: ProgressCallback | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    where: str = "count_file",
    csv: CsvOptions | None = None,
) -> KeyCounts:
    """Count the records of each key of ``column`` in a CSV or Parquet file, inside DuckDB.

    Runs ``SELECT col, count(*) FROM read_csv/read_parquet($path) GROUP BY col`` and fetches the
    result as numpy arrays. DuckDB uses at most ``memory_limit`` and spills to a private temporary
    directory beyond it (removed afterwards), so files larger than memory can be counted.

    Parameters
    ----------
    path : str or Path
        A CSV file with a header row, or a Parquet file (see the module docstring).
    column : str
        The key column (exact name).
    progress : callable, optional
        Called from a helper thread with the query's progress in percent (0–100) while it runs.
    memory_limit : str
        DuckDB memory limit, e.g. ``"1GB"``.
    where : str
        Name used in error messages.
    csv : CsvOptions, optional
        The CSV dialect (default: comma, UTF-8, ``"`` quotes); ignored for Parquet.

    Returns
    -------
    KeyCounts
        ``keys`` (numpy array, distinct non-missing keys, in no particular order; DECIMAL, UUID,
        TIME and other non-native scalar types as their exact text), ``counts``
        (int64, ≥ 1, aligned with keys) and ``n`` (number of records, including those whose key is
        NULL or NaN, and malformed CSV records).

    Raises
    ------
    ParameterError
        Missing, unreadable or malformed file (for CSV: header), or missing column. The message
        names the file and the column, never a record. A malformed CSV record is never an error.
    """
    info = describe_column(path, column, where=where, csv=csv)
    return count_column(info, progress=progress, memory_limit=memory_limit, where=where)


def count_column(
    info: FileColumn,
    *,
    progress: ProgressCallback | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    where: str = "count_file",
) -> KeyCounts:
    """:func:`count_file` for a column already checked by :func:`describe_column`."""
    temp_directory = tempfile.mkdtemp(prefix="privagg-duckdb-")
    try:
        try:
            con = _connect(memory_limit, temp_directory)
        except duckdb.Error:
            raise fail(where, "memory_limit", "a DuckDB memory size such as '1GB'", memory_limit) from None
        try:
            column = quote_identifier(info.column)
            key = _csv_key_sql(column) if info.format == "csv" else _key_sql(column, info.duckdb_type)
            sql = f"SELECT {key} AS key, count(*) AS count FROM {_source(info.format)} GROUP BY ALL"
            with _progress_poller(con, progress):
                result = con.sql(sql, params=_params(info)).fetchnumpy()
            rejected = _count_rejects(con) if info.format == "csv" else 0
        except duckdb.OutOfMemoryException:
            rule = "large enough for DuckDB to count the file (it ran out of memory)"
            raise fail(where, "memory_limit", rule, memory_limit) from None
        except duckdb.Error:
            raise _unparsable(where, info.path, info.format) from None
        finally:
            con.close()
    finally:
        shutil.rmtree(temp_directory, ignore_errors=True)
    return _key_counts(result, info.duckdb_type, rejected)


def _key_counts(result: dict[str, np.ndarray], duckdb_type: str, rejected: int = 0) -> KeyCounts:
    """Split fetched ``(key, count)`` columns into present keys and the total n (which includes
    the ``rejected`` malformed records: missing keys)."""
    keys, counts = result["key"], np.ma.getdata(result["count"]).astype(np.int64, copy=False)
    n = int(counts.sum()) + int(rejected)
    present = ~np.ma.getmaskarray(keys)
    keys = np.ma.getdata(keys)
    if keys.dtype.kind == "f":
        present &= ~np.isnan(keys)
    if not present.all():
        keys, counts = keys[present], counts[present]
    return KeyCounts(keys=_key_dtype(keys, duckdb_type), counts=counts, n=n)


def _key_dtype(keys: np.ndarray, duckdb_type: str) -> np.ndarray:
    # DuckDB hands DATE columns to numpy as datetime64[us] midnights: make them days again.
    return keys.astype("datetime64[D]") if duckdb_type == "DATE" else keys


def load_domain(
    path: str | Path,
    duckdb_type: str,
    *,
    header: str | None = None,
    where: str = "laplace_histogram",
) -> np.ndarray:
    """Read a public domain file and cast its keys to the data column's DuckDB type.

    The file holds one key per line (UTF-8 text without quoting, whatever the data file's CSV
    dialect); empty lines are skipped,
    and a first line equal to ``header`` (the data column's name) is taken as a header and
    skipped. The cast runs in DuckDB, with the same rules as the data column (``"007"`` is the
    integer 7 for a BIGINT column and the string ``"007"`` for a CSV column), and the keys come
    back in the same canonical representation as :func:`count_file`'s (``-0`` is the float key
    0.0 of a DOUBLE column, so ``0`` and ``-0`` are duplicates there).

    Raises
    ------
    ParameterError
        Unreadable file, no keys, a key that cannot be cast to ``duckdb_type``, or duplicate keys
        (after the cast). The domain is public, so offending keys are shown.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        raise _path_error(where, "domain", "a readable UTF-8 text file, one key per line", path) from None
    lines = [line for line in lines if line != ""]
    if header is not None and lines and lines[0] == header:
        lines = lines[1:]
    if not lines:
        raise _path_error(where, "domain", "a file with at least one key", path)
    if not _TYPE_NAME.fullmatch(duckdb_type):
        raise fail(where, "column", "a column of a type the domain can be cast to", duckdb_type)
    key = _key_sql(f"TRY_CAST(text AS {duckdb_type})", duckdb_type)
    sql = (
        f"SELECT {key} AS key FROM (SELECT unnest($lines) AS text, generate_subscripts($lines, 1) AS i) "
        "ORDER BY i"
    )
    con = _connect(DEFAULT_MEMORY_LIMIT, None)
    try:
        cast = con.sql(sql, params={"lines": lines}).fetchnumpy()["key"]
    except duckdb.Error:
        raise fail(where, "column", "a column of a type the domain can be cast to", duckdb_type) from None
    finally:
        con.close()
    bad = np.ma.getmaskarray(cast)
    if bad.any():
        raise fail(where, "domain", f"a list of keys of the column's type {duckdb_type}", lines[int(np.argmax(bad))])
    keys = _key_dtype(np.ma.getdata(cast), duckdb_type)
    _check_distinct(keys, where)
    return keys


def _check_distinct(keys: np.ndarray, where: str) -> None:
    values, counts = np.unique(keys, return_counts=True)
    repeated = values[counts > 1]
    if repeated.size:
        example = repeated[0].item() if isinstance(repeated[0], np.generic) else repeated[0]
        raise ParameterError(
            f"{where}: parameter 'domain' must be a list of distinct keys; "
            f"got {repeated.size} repeated key(s), e.g. {example!r}."
        )
