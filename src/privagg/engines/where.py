"""``where=`` / ``--where``: a user's SQL filter, checked to be a row-wise, 1-stable predicate.

:func:`check_where` turns the text of a boolean SQL expression over a file's columns into SQL that
privagg runs inside DuckDB (``WHERE coalesce((<sql>), false)``). The filter is public (query text,
not data), and a filter that keeps or drops each row by that row's values alone is 1-stable: adding
or removing one row changes the filtered table by at most that row, so it costs no privacy budget.
What would break that, or the rule that errors depend only on public inputs, is refused:

- **Parsing.** The text is parsed by DuckDB itself (``json_serialize_sql`` of
  ``SELECT * FROM t WHERE <expr>``). The statement must be exactly one ``SELECT * FROM t WHERE …``
  (no ``;``, no ``GROUP BY``/``LIMIT``/``UNION``/… after the expression: the rest of the statement
  must equal that of ``SELECT * FROM t WHERE true``), and the text holds no comment (``--``,
  ``/* */``), no control character other than tab and line breaks, and at most
  :data:`MAX_CHARS` characters.
- **Whitelist.** Every node of the parsed expression is one of: a column reference to a column of
  the file (exact, case-sensitive name; not qualified), a constant (number, string, boolean,
  NULL), a comparison (``= <> < <= > >=``, ``IS [NOT] DISTINCT FROM``), ``AND``/``OR``/``NOT``,
  ``IS [NOT] NULL``, ``[NOT] BETWEEN``, ``[NOT] IN (…)`` of constant expressions (no column in the
  list), ``[NOT] LIKE``/``ILIKE`` (with ``ESCAPE``), arithmetic (``+ - * / // % ^ **``, ``||``),
  ``CASE``, ``COALESCE``, ``CAST``/``TRY_CAST``/``::`` to a scalar type of :data:`CAST_TYPES`, and
  the scalar functions of :data:`FUNCTIONS` (deterministic, row-wise, cheap). Nothing else:
  no subquery (``IN (SELECT …)``, ``EXISTS``), table function or file reader (``read_csv``), no
  aggregate or window, no macro or other function (``getenv``, ``random``), no parameter
  (``?``, ``$1``), no ``*``/``COLUMNS``, lambda, ``COLLATE``, positional reference, or schema- or
  catalog-qualified name. Nesting is limited to :data:`MAX_DEPTH`.
- **Rebuilt, not passed through.** The returned SQL is written by this module from the parsed
  tree: column names as quoted identifiers (``"`` doubled), strings as ``'…'`` literals (``'``
  doubled; DuckDB's standard strings give a backslash no meaning), numbers only when they match a
  numeric pattern, type and function names from the whitelists, every operand in parentheses. The
  user's text itself never reaches the query. As a check of the rebuilding, the rebuilt text is
  parsed again and its tree must equal the validated one (source positions aside); otherwise the
  filter is refused. So what runs is exactly the validated, whitelisted tree, and nothing in the
  text (comments, quotes, ``;``) can add to it.
- **No run-time error.** The rebuilt expression is wrapped as
  ``coalesce(TRY(CAST((<expr>) AS BOOLEAN)), false)``: an error while evaluating it on a row (a
  cast of a hostile value, an integer overflow, a modulo by zero) makes the value NULL for that
  row only, so the row is **dropped** — a rule that depends on the row alone (1-stable), and the
  exit code, the messages and the set of rows kept by the others never depend on a record.
  (A malformed CSV record is read as a row of NULLs and filtered like one.) Errors that depend on
  the expression and the schema only (a type mismatch such as comparing a CSV text column with a
  number without a cast) are binding errors: with ``types=`` they are raised here, as
  :class:`~privagg.ParameterError`, before anything is read.

Running time: TRY re-evaluates a vector row by row when a row in it fails, so a file with many
failing rows takes longer (the work per row stays bounded by the expression).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from .._validate import fail

__all__ = ["check_where", "CAST_TYPES", "FUNCTIONS", "MAX_CHARS", "MAX_DEPTH"]

#: Longest accepted filter text (characters).
MAX_CHARS = 10_000
#: Deepest accepted nesting of the expression tree.
MAX_DEPTH = 64

#: Scalar functions a filter may call: deterministic, row-wise, linear-time in their arguments.
FUNCTIONS = frozenset({
    "lower", "upper", "trim", "ltrim", "rtrim", "length", "strlen", "substring", "substr",
    "starts_with", "ends_with", "prefix", "suffix", "contains",
    "abs", "sign", "round", "floor", "ceil", "ceiling", "isnan", "isinf", "isfinite",
    "least", "greatest", "nullif", "year", "month", "day",
})

#: Types of ``CAST``/``TRY_CAST``/``::`` (as DuckDB's parser spells them, any case).
CAST_TYPES = frozenset({
    "BOOLEAN", "BOOL", "TINYINT", "SMALLINT", "INTEGER", "INT", "INT4", "INT8", "BIGINT",
    "HUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL", "NUMERIC", "VARCHAR", "TEXT", "STRING",
    "DATE", "TIMESTAMP", "TIME",
})

_PREFIX = "SELECT * FROM t WHERE "
_COMPARISONS = {
    "COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "<>", "COMPARE_LESSTHAN": "<",
    "COMPARE_GREATERTHAN": ">", "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_GREATERTHANOREQUALTO": ">=", "COMPARE_DISTINCT_FROM": "IS DISTINCT FROM",
    "COMPARE_NOT_DISTINCT_FROM": "IS NOT DISTINCT FROM",
}
_BINARY = {"+", "-", "*", "/", "//", "%", "^", "**", "||"}
_LIKE = {"~~": "LIKE", "!~~": "NOT LIKE", "~~*": "ILIKE", "!~~*": "NOT ILIKE"}
_LIKE_ESCAPE = {"like_escape": "LIKE", "not_like_escape": "NOT LIKE", "ilike_escape": "ILIKE",
                "not_ilike_escape": "NOT ILIKE"}
_NUMBER = re.compile(r"-?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9]+)?")
_TYPE_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# C0 controls other than tab, LF and CR; DEL; C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SCALAR_TYPE = re.compile(r"[A-Z][A-Z0-9_]*(\(\d+(, ?\d+)?\))?( [A-Z ]+)?")
_POSITION_KEYS = {"query_location", "query_location_length"}


class _Refused(Exception):
    """One node breaks the whitelist; ``rule`` says which rule (public: from the expression)."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


def _strip(node: Any) -> Any:
    """The tree without source positions (they differ between the user's text and the rebuilt one)."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in _POSITION_KEYS}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _parse(con: duckdb.DuckDBPyConnection, text: str) -> dict[str, Any] | None:
    """DuckDB's parse of ``SELECT * FROM t WHERE <text>`` (positions removed), or None."""
    try:
        raw = con.execute("SELECT json_serialize_sql($q)", {"q": _PREFIX + text}).fetchone()
        parsed = json.loads(raw[0])  # type: ignore[index]
    except (duckdb.Error, ValueError, TypeError, RecursionError):
        return None
    if not isinstance(parsed, dict) or parsed.get("error") or len(parsed.get("statements") or []) != 1:
        return None
    statement = _strip(parsed["statements"][0])
    return statement if isinstance(statement, dict) else None


def _outside(statement: dict[str, Any]) -> Any:
    """The statement with its WHERE clause blanked (to compare with the baseline's)."""
    node = dict(statement.get("node") or {})
    node["where_clause"] = None
    return {**statement, "node": node}


class _Builder:
    """Validates a parsed expression against the whitelist and writes it as SQL."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = set(columns)
        self.used: list[str] = []

    def sql(self, node: Any, depth: int = 0, *, constant: bool = False) -> str:
        if depth > MAX_DEPTH:
            raise _Refused(f"nested at most {MAX_DEPTH} levels deep")
        if not isinstance(node, dict):
            raise _Refused("a SQL expression privagg can read")
        cls, typ = node.get("class"), node.get("type")
        rec = lambda child: self.sql(child, depth + 1, constant=constant)  # noqa: E731
        if cls == "COLUMN_REF":
            return self._column(node, constant)
        if cls == "CONSTANT" and typ == "VALUE_CONSTANT":
            return _literal(node.get("literal"))
        if cls == "CONJUNCTION" and typ in ("CONJUNCTION_AND", "CONJUNCTION_OR"):
            children = _children(node, minimum=2)
            word = " AND " if typ == "CONJUNCTION_AND" else " OR "
            return "(" + word.join(f"({rec(c)})" for c in children) + ")"
        if cls == "COMPARISON" and typ in _COMPARISONS:
            return f"(({rec(node.get('left'))}) {_COMPARISONS[typ]} ({rec(node.get('right'))}))"
        if cls == "BETWEEN" and typ == "COMPARE_BETWEEN":
            return (f"(({rec(node.get('input'))}) BETWEEN ({rec(node.get('lower'))}) "
                    f"AND ({rec(node.get('upper'))}))")
        if cls == "OPERATOR":
            return self._operator(node, typ, depth, constant)
        if cls == "CAST" and typ == "OPERATOR_CAST":
            word = "TRY_CAST" if node.get("try_cast") is True else "CAST"
            if node.get("try_cast") not in (True, False):
                raise _Refused("a SQL expression privagg can read")
            return f"{word}(({rec(node.get('child'))}) AS {_type(node.get('type_expr'))})"
        if cls == "CASE" and typ == "CASE_EXPR":
            checks = node.get("case_checks")
            if not isinstance(checks, list) or not checks:
                raise _Refused("a SQL expression privagg can read")
            parts = ["CASE"]
            for check in checks:
                if not isinstance(check, dict) or set(check) != {"when_expr", "then_expr"}:
                    raise _Refused("a SQL expression privagg can read")
                parts.append(f"WHEN ({rec(check['when_expr'])}) THEN ({rec(check['then_expr'])})")
            parts.append(f"ELSE ({rec(node.get('else_expr'))}) END")
            return "(" + " ".join(parts) + ")"
        if cls == "FUNCTION" and typ == "FUNCTION":
            return self._function(node, depth, constant)
        raise _Refused(_node_rule(cls, typ))

    def _column(self, node: dict[str, Any], constant: bool) -> str:
        names = node.get("column_names")
        if not isinstance(names, list) or len(names) != 1 or not isinstance(names[0], str):
            shown = ".".join(map(str, names)) if isinstance(names, list) else "?"
            raise _Refused(f"an expression over the file's columns by their plain names (not {shown!r})")
        name = names[0]
        if name not in self.columns:
            raise _Refused(f"an expression over the file's columns only (exact, case-sensitive names; "
                           f"there is no column {name!r})")
        if constant:
            raise _Refused("an expression whose IN (...) list holds constants only (no columns)")
        self.used.append(name)
        return '"' + name.replace('"', '""') + '"'

    def _operator(self, node: dict[str, Any], typ: Any, depth: int, constant: bool) -> str:
        rec = lambda child, c=constant: self.sql(child, depth + 1, constant=c)  # noqa: E731
        if typ == "OPERATOR_NOT":
            (child,) = _children(node, exactly=1)
            return f"(NOT ({rec(child)}))"
        if typ in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
            (child,) = _children(node, exactly=1)
            return f"(({rec(child)}) IS {'NOT ' if typ == 'OPERATOR_IS_NOT_NULL' else ''}NULL)"
        if typ in ("COMPARE_IN", "COMPARE_NOT_IN"):
            first, *rest = _children(node, minimum=2)
            items = ", ".join(f"({rec(c, True)})" for c in rest)
            return f"(({rec(first)}) {'NOT IN' if typ == 'COMPARE_NOT_IN' else 'IN'} ({items}))"
        if typ == "OPERATOR_COALESCE":
            children = _children(node, minimum=1)
            return "coalesce(" + ", ".join(f"({rec(c)})" for c in children) + ")"
        raise _Refused(_node_rule("OPERATOR", typ))

    def _function(self, node: dict[str, Any], depth: int, constant: bool) -> str:
        name = node.get("function_name")
        if not isinstance(name, str):
            raise _Refused("a SQL expression privagg can read")
        if (node.get("schema") or node.get("catalog")
                or node.get("qualified_name", {}).get("path", [name]) != [name]):
            raise _Refused(f"an expression without schema- or catalog-qualified functions "
                           f"(got {'.'.join(map(str, node.get('qualified_name', {}).get('path', [name])))!r})")
        if (node.get("filter") is not None or node.get("distinct") is not False
                or node.get("export_state") is not False
                or (node.get("order_bys") or {}).get("orders")):
            raise _Refused(f"an expression whose function calls are plain (no FILTER, DISTINCT, "
                           f"ORDER BY: aggregates are not allowed; got {name!r})")
        args = node.get("arguments")
        if not isinstance(args, list) or any(
                not isinstance(a, dict) or a.get("name") != "" or set(a) != {"name", "expression"}
                for a in args):
            raise _Refused(f"an expression whose function calls have positional arguments only "
                           f"(got {name!r})")
        values = [self.sql(a["expression"], depth + 1, constant=constant) for a in args]
        op = node.get("is_operator")
        if op is True and name in _BINARY and len(values) == 2:
            return f"(({values[0]}) {name} ({values[1]}))"
        if op is True and name in ("+", "-") and len(values) == 1:
            return f"({name}({values[0]}))"
        if op is True and name in _LIKE and len(values) == 2:
            return f"(({values[0]}) {_LIKE[name]} ({values[1]}))"
        if op is True and name in _LIKE_ESCAPE and len(values) == 3:
            return f"(({values[0]}) {_LIKE_ESCAPE[name]} ({values[1]}) ESCAPE ({values[2]}))"
        if op is False and name in FUNCTIONS:
            return name + "(" + ", ".join(f"({v})" for v in values) + ")"
        if op is False and name in ("read_csv", "read_csv_auto", "read_parquet", "read_json",
                                     "read_json_auto", "read_text", "read_blob", "glob", "query",
                                     "query_table", "sql_auto_complete"):
            raise _Refused(f"an expression without table functions or file readers (got {name!r})")
        allowed = ", ".join(sorted(FUNCTIONS))
        raise _Refused(f"an expression calling only the scalar functions {allowed} and the operators "
                       f"+ - * / // % ^ ** || LIKE ILIKE (got {name!r})")


def _children(node: dict[str, Any], *, minimum: int = 0, exactly: int | None = None) -> list[Any]:
    children = node.get("children")
    if (not isinstance(children, list) or len(children) < minimum
            or (exactly is not None and len(children) != exactly)):
        raise _Refused("a SQL expression privagg can read")
    return children


def _literal(literal: Any) -> str:
    if not isinstance(literal, dict):
        raise _Refused("a SQL expression privagg can read")
    kind, text = literal.get("kind"), literal.get("text")
    if not isinstance(text, str):
        raise _Refused("a SQL expression privagg can read")
    if kind in ("INTEGER", "NUMERIC") and _NUMBER.fullmatch(text):
        return text
    if kind == "STRING":
        return "'" + text.replace("'", "''") + "'"
    if kind == "BOOLEAN" and text in ("true", "false"):
        return text
    if kind == "NULL_LITERAL":
        return "NULL"
    raise _Refused("an expression whose constants are numbers, strings, booleans or NULL "
                   f"(got a {str(kind).lower()} literal)")


def _type(node: Any) -> str:
    if (not isinstance(node, dict) or node.get("class") != "TYPE" or node.get("catalog")
            or node.get("schema") or not isinstance(node.get("type_name"), str)):
        raise _Refused("an expression casting to scalar types only")
    name = node["type_name"]
    if not _TYPE_WORD.fullmatch(name) or name.upper() not in CAST_TYPES:
        allowed = ", ".join(sorted(CAST_TYPES))
        raise _Refused(f"an expression casting only to the types {allowed} (got {name!r})")
    if node.get("qualified_name", {}).get("path", [name]) != [name]:
        raise _Refused("an expression casting to scalar types only")
    mods = node.get("children") or []
    if not isinstance(mods, list) or len(mods) > 2 or (mods and name.upper() not in ("DECIMAL", "NUMERIC")):
        raise _Refused("an expression casting to scalar types only")
    args = []
    for mod in mods:
        literal = mod.get("literal") if isinstance(mod, dict) and mod.get("class") == "CONSTANT" else None
        if not isinstance(literal, dict) or literal.get("kind") != "INTEGER" or not str(literal.get("text", "")).isdigit():
            raise _Refused("an expression casting to DECIMAL(width, scale) with integer width and scale")
        args.append(literal["text"])
    return name + (f"({', '.join(args)})" if args else "")


def _node_rule(cls: Any, typ: Any) -> str:
    if cls == "SUBQUERY":
        return "a row-wise expression without subqueries (IN (SELECT ...), EXISTS, ANY, ALL)"
    if cls == "WINDOW":
        return "a row-wise expression without window functions (OVER ...)"
    if cls == "PARAMETER":
        return "an expression without parameters (?, $1)"
    if cls == "STAR":
        return "an expression without * or COLUMNS(...)"
    if cls == "LAMBDA":
        return "an expression without lambdas"
    if cls == "COLLATE":
        return "an expression without COLLATE"
    if cls == "POSITIONAL_REFERENCE":
        return "an expression naming columns (not #1)"
    return f"a SQL expression of the supported kinds (got {str(typ or cls).lower()})"


def check_where(
    expr: str | None,
    columns: Sequence[str],
    *,
    where: str,
    types: Mapping[str, str] | None = None,
) -> str | None:
    """A user's SQL filter as SQL that is safe to run, or None without a filter.

    Parameters
    ----------
    expr : str or None
        The filter: a SQL boolean expression over the columns (public query text).
    columns : sequence of str
        The file's column names (the schema, public).
    where : str
        The caller's name, for messages (``"aggregate"``).
    types : mapping of str to str, optional
        DuckDB type names of the columns (``DESCRIBE``). When given, the filter is also bound
        against them here, so a type error (``text_col > 3``) is a ParameterError now.

    Returns
    -------
    str or None
        ``coalesce(TRY(CAST((<rebuilt expression>) AS BOOLEAN)), false)``: true for the rows
        kept; false for the others, for rows where the expression is NULL, and for rows where its
        evaluation fails (those rows are dropped, silently: the rule depends on the row alone).

    Raises
    ------
    ParameterError
        The filter is not a non-empty string, too long or deep, unparsable, more than one
        expression, or outside the whitelist (see the module docstring); the message names
        ``'where'`` and the rule, and shows the filter (public) escaped.
    """
    if expr is None:
        return None
    if not isinstance(expr, str) or not expr.strip():
        raise fail(where, "where", "a non-empty SQL boolean expression", expr)
    if len(expr) > MAX_CHARS:
        raise fail(where, "where", f"a SQL expression of at most {MAX_CHARS:,} characters", expr)
    if _CONTROL.search(expr):
        raise fail(where, "where", "a SQL expression without control characters", expr)
    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:
        try:
            tokens = duckdb.tokenize(expr)
        except (duckdb.Error, RuntimeError):
            tokens = []
        kinds = {t[1] for t in tokens}
        if duckdb.token_type.comment in kinds:
            raise fail(where, "where", "a SQL expression without comments (-- or /* */)", expr)
        if any(t[1] == duckdb.token_type.operator and expr[t[0]] == ";" for t in tokens):
            raise fail(where, "where", "one SQL expression (no ';')", expr)
        statement = _parse(con, expr)
        if statement is None:
            raise fail(where, "where", "a valid SQL boolean expression (it could not be parsed as one)", expr)
        node = statement.get("node")
        tree = node.get("where_clause") if isinstance(node, dict) else None
        if tree is None:
            raise fail(where, "where", "a single SQL expression (no GROUP BY, ORDER BY, LIMIT, UNION, "
                       "... after it)", expr)
        builder = _Builder(columns)
        try:
            body = builder.sql(tree)
        except _Refused as refused:
            raise fail(where, "where", refused.rule, expr) from None
        baseline = _parse(con, "true")
        if baseline is None or _outside(statement) != _outside(baseline):
            raise fail(where, "where", "a single SQL expression (no GROUP BY, ORDER BY, LIMIT, UNION, "
                       "... after it)", expr)
        again = _parse(con, body)
        if again is None or again["node"]["where_clause"] != tree:
            raise fail(where, "where", "a SQL expression privagg can rebuild exactly", expr)
        sql = f"coalesce(TRY(CAST(({body}) AS BOOLEAN)), false)"
        if types is not None:
            _bind(con, body, sql, builder.used, types, where, expr)
        return sql
    finally:
        con.close()


def _bind(con: duckdb.DuckDBPyConnection, body: str, sql: str, used: list[str], types: Mapping[str, str],
          where: str, expr: str) -> None:
    """Bind ``sql`` against empty columns of ``types`` (no row is evaluated); ParameterError if
    DuckDB refuses it (type errors depend on the expression and the schema only)."""
    select = []
    for name in dict.fromkeys(used):
        duckdb_type = str(types.get(name, ""))
        if not _SCALAR_TYPE.fullmatch(duckdb_type):
            raise fail(where, "where", f"an expression over columns of scalar types (column {name!r} "
                       f"is of type {duckdb_type or 'unknown'})", expr)
        select.append(f"CAST(NULL AS {duckdb_type}) AS " + '"' + name.replace('"', '""') + '"')
    source = f"(SELECT {', '.join(select) or '1 AS one'}) AS t"
    try:
        described = con.execute(f"DESCRIBE SELECT ({body}) AS value, {sql} AS keep FROM {source}").fetchall()
    except duckdb.Error:
        raise fail(where, "where", "a SQL boolean expression that DuckDB can bind to the file's "
                   "column types (compare text columns with strings, or CAST them)", expr) from None
    if described[0][1] != "BOOLEAN":
        raise fail(where, "where", f"a SQL boolean expression (it is of type {described[0][1]})", expr)
