"""``privagg aggregate`` (cli/aggregate.py) against a FAKE ``privagg.aggregate``.

The real API (mechanisms/aggregate.py) is written separately; here ``cli.aggregate._api`` (the one
seam) returns a fake module whose ``aggregate`` records the call, applies the ``--where`` SQL in
DuckDB, counts rows per key exactly (no noise: this tests the command line, not privacy), charges
the ledger once like the real one, and returns a release of the documented shape.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger, PrivacyLoss
from privagg.cli import aggregate as cli_aggregate
from privagg.cli.aggregate import parse_weights, split_escaped
from privagg.cli.main import cli
from privagg.engines import duckdb as duckdb_engine
from privagg.engines.where import check_where


class FakeRelease:
    def __init__(self, groups: pd.DataFrame, by: list[str], metrics: list[str], epsilon: float,
                 delta: float, split: dict[str, tuple[float, float]], secure: bool) -> None:
        self.groups, self.by, self.metrics = groups, by, metrics
        self.epsilon, self.delta, self.split, self.secure = epsilon, delta, split, secure
        self.neighbors, self.selection, self.unit = "add_remove", "domain", False

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": "aggregate", "epsilon": self.epsilon, "delta": self.delta, "by": self.by,
                "split": {k: list(v) for k, v in self.split.items()},
                "groups": self.groups.to_dict(orient="records")}


def make_fake(calls: list[dict[str, Any]], override_keys: list[Any] | None = None) -> types.ModuleType:
    api = types.ModuleType("fake_aggregate")
    api.count = lambda: ("count", None, None)
    api.sum = lambda col, bounds: ("sum", col, bounds)
    api.mean = lambda col, bounds=None: ("mean", col, bounds)
    api.quantile = lambda col, q, bounds=None: ("quantile", col, (q, bounds))

    def aggregate(table, *, by, metrics, epsilon, delta, domain, units, max_groups_per_unit,
                  max_rows_per_group, weights, where, rng, ledger, csv=None):
        calls.append({"table": table, "by": by, "metrics": metrics, "epsilon": epsilon, "delta": delta,
                      "domain": domain, "units": units, "max_groups_per_unit": max_groups_per_unit,
                      "max_rows_per_group": max_rows_per_group, "weights": weights, "where": where,
                      "rng": rng, "csv": csv})
        cols = [by] if isinstance(by, str) else list(by)
        info = duckdb_engine.describe_column(table, cols[0], csv=csv)
        schema = list(info.header) if info.header else None
        sql = check_where(where, schema or cols, where="aggregate") or "true"
        keys = ", ".join(duckdb_engine.quote_identifier(c) for c in cols)
        con = duckdb_engine._connect("256MB", None)
        try:
            df = con.sql(f"SELECT {keys}, count(*)::DOUBLE AS n FROM {duckdb_engine._source(info.format)} "
                         f"WHERE coalesce(({sql}), false) GROUP BY ALL ORDER BY ALL",
                         params=duckdb_engine._params(info)).df()
        finally:
            con.close()
        if override_keys is not None:
            df = pd.DataFrame({cols[0]: pd.Series(override_keys, dtype=object), "n": [5.0] * len(override_keys)})
        if ledger is not None:
            ledger.charge(PrivacyLoss.approx(epsilon, delta) if delta else PrivacyLoss.pure(epsilon),
                          mechanism="aggregate")
        names, out = [], {c: df[c].tolist() for c in cols}
        for kind, col, extra in metrics:
            name = "count" if kind == "count" else f"{kind}_{col}" if kind != "quantile" else f"q{extra[0]}_{col}"
            names.append(name)
            out[name] = df["n"].tolist()
            out[name + "_low"] = (df["n"] - 1).tolist()
            out[name + "_high"] = (df["n"] + 1).tolist()
            if kind == "mean":  # can be ⊥
                out[name + "_ok"] = [True] * len(df)
                out[name + "_reason"] = [None] * len(df)
        split = {n: (epsilon / len(names), 0.0) for n in names}
        return FakeRelease(pd.DataFrame(out), cols, names, epsilon, delta, split, rng is None)

    api.aggregate = aggregate
    return api


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(cli_aggregate, "_api", lambda: make_fake(made))
    return made


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "visits.csv"
    path.write_text("region,sex,age,cost,a:b,c\\d\n" + "north,f,30,10,1,2\n" * 6 + "south,m,40,20,1,2\n" * 4,
                    encoding="utf-8")
    return path


def run(*args: Any) -> Any:
    return CliRunner().invoke(cli, [str(a) for a in args])


def run_error(*args: Any, code: int = 2) -> str:
    result = run(*args)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("privagg: error: "), result.stderr
    return result.stderr[len("privagg: error: "):].rstrip("\n")


# ------------------------------------------------------------------------------------------------
# The call into privagg.aggregate
# ------------------------------------------------------------------------------------------------


def test_the_exact_call_into_the_api(calls: list[dict[str, Any]], data: Path) -> None:
    result = run("aggregate", data, "--by", "region,sex", "--count", "--sum", "cost:0:100",
                 "--mean", "age", "--mean", "cost:0:50", "--quantile", "age:0.5", "--quantile", "age:0.9:0:120",
                 "--where", "CAST(age AS INTEGER) > 1", "--epsilon", "1", "--delta", "1e-6",
                 "--weights", "selection=2,count=1", "--seed", "7")
    assert result.exit_code == 0, result.stderr
    (call,) = calls
    assert call == {
        "table": str(data), "by": ["region", "sex"],
        "metrics": [("count", None, None), ("sum", "cost", (0.0, 100.0)), ("mean", "age", None),
                    ("mean", "cost", (0.0, 50.0)), ("quantile", "age", (0.5, None)),
                    ("quantile", "age", (0.9, (0.0, 120.0)))],
        "epsilon": 1.0, "delta": 1e-6, "domain": None, "units": None, "max_groups_per_unit": 1,
        "max_rows_per_group": 1, "weights": {"selection": 2.0, "count": 1.0},
        "where": "CAST(age AS INTEGER) > 1", "rng": 7, "csv": None,
    }


def test_one_by_column_is_passed_as_a_name_and_units_and_bounds(calls: list[dict[str, Any]], data: Path) -> None:
    result = run("aggregate", data, "--by", "region", "--count", "--epsilon", "1", "--delta", "1e-6",
                 "--privacy-unit", "sex", "--max-groups-per-unit", "3", "--max-rows-per-group", "2",
                 "--delimiter", ",")
    assert result.exit_code == 0, result.stderr
    assert calls[0]["by"] == "region" and calls[0]["units"] == "sex"
    assert calls[0]["max_groups_per_unit"] == 3 and calls[0]["max_rows_per_group"] == 2
    assert calls[0]["rng"] is None and calls[0]["delta"] == 1e-6


def test_escaped_column_names(calls: list[dict[str, Any]], data: Path) -> None:
    assert split_escaped("a\\,b,c", ",") == ["a,b", "c"]
    assert split_escaped("a\\:b:0:1", ":") == ["a:b", "0", "1"]
    assert parse_weights("sum_a\\=b=2,q0.5_x\\,y=1") == {"sum_a=b": 2.0, "q0.5_x,y": 1.0}
    result = run("aggregate", data, "--by", "region", "--sum", "a\\:b:0:1", "--mean", "c\\\\d",
                 "--epsilon", "1", "--delta", "1e-6")
    assert result.exit_code == 0, result.stderr
    assert calls[0]["metrics"] == [("sum", "a:b", (0.0, 1.0)), ("mean", "c\\d", None)]


def test_domain_file_with_several_by_columns(calls: list[dict[str, Any]], data: Path, tmp_path: Path) -> None:
    domain = tmp_path / "keys.csv"
    domain.write_text('sex,region\nf,north\nm,"south"\nf,"we,st"\n', encoding="utf-8")
    result = run("aggregate", data, "--by", "region,sex", "--count", "--domain", domain, "--epsilon", "1")
    assert result.exit_code == 0, result.stderr
    assert calls[0]["domain"] == [("north", "f"), ("south", "m"), ("we,st", "f")]
    assert calls[0]["delta"] == 0.0


def test_domain_is_cast_to_parquet_types(calls: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"k": pa.array([1, 2, 2], pa.int64()), "x": [1.0, 2.0, 3.0]}), path)
    domain = tmp_path / "keys.csv"
    domain.write_text("k\n007\n2\n", encoding="utf-8")
    result = run("aggregate", path, "--by", "k", "--count", "--domain", domain, "--epsilon", "1")
    assert result.exit_code == 0, result.stderr
    assert calls[0]["domain"] == [7, 2]
    domain.write_text("k\n1\nx\n", encoding="utf-8")
    msg = run_error("aggregate", path, "--by", "k", "--count", "--domain", domain, "--epsilon", "1")
    assert msg == "aggregate: parameter 'domain' must be a list of keys of the column's type BIGINT; got 'x'."


# ------------------------------------------------------------------------------------------------
# Bad options: exit 2, one line naming the option, no traceback, and nothing charged
# ------------------------------------------------------------------------------------------------

BASE = ("--by", "region", "--count", "--epsilon", "1", "--delta", "1e-6")

BAD = [
    (("--by", "region,,sex", "--count", "--epsilon", "1"), "parameter 'by' must be a comma-separated list"),
    (("--by", "region,region", "--count", "--epsilon", "1"), "parameter 'by' must be a comma-separated list"),
    (("--by", "nope", "--count", "--epsilon", "1"), "parameter 'by' must be a column of the file"),
    (("--by", "region", "--epsilon", "1"), "parameter 'metrics' must be at least one of --count"),
    ((*BASE, "--sum", "cost"), "parameter 'sum' must be COL:LO:HI"),
    ((*BASE, "--sum", "cost:0"), "parameter 'sum' must be COL:LO:HI"),
    ((*BASE, "--sum", "cost:a:1"), "parameter 'sum' must be a spec whose lower bound is a finite number"),
    ((*BASE, "--sum", "cost:0:inf"), "parameter 'sum' must be a spec whose upper bound is a finite number"),
    ((*BASE, "--sum", "cost:5:1"), "parameter 'sum' must be a spec with bounds LO < HI"),
    ((*BASE, "--sum", "nope:0:1"), "parameter 'sum' must be a column of the file"),
    ((*BASE, "--sum", "cost:0:1\\"), "parameter 'sum' must be COL:LO:HI"),
    ((*BASE, "--mean", "cost:0"), "parameter 'mean' must be COL or COL:LO:HI"),
    ((*BASE, "--mean", "nope"), "parameter 'mean' must be a column of the file"),
    ((*BASE, "--quantile", "age"), "parameter 'quantile' must be COL:Q or COL:Q:LO:HI"),
    ((*BASE, "--quantile", "age:1.5"), "parameter 'quantile' must be a spec whose Q is in [0, 1]"),
    ((*BASE, "--quantile", "age:nan"), "parameter 'quantile' must be a spec whose Q is a finite number"),
    ((*BASE, "--quantile", "age:0.5:3:1"), "parameter 'quantile' must be a spec with bounds LO < HI"),
    (("--by", "region", "--count", "--epsilon", "0"), "parameter 'epsilon' must be a finite number > 0"),
    (("--by", "region", "--count", "--epsilon", "x"), "parameter 'epsilon' must be a finite number > 0"),
    (("--by", "region", "--count", "--epsilon", "1", "--delta", "1"), "parameter 'delta' must be a number in the open interval"),
    (("--by", "region", "--count", "--epsilon", "1", "--delta", "-1"), "parameter 'delta' must be a number in the open interval"),
    ((*BASE, "--weights", "count"), "parameter 'weights' must be a list NAME=W"),
    ((*BASE, "--weights", "count=0"), "parameter 'weights' must be a list NAME=W"),
    ((*BASE, "--weights", "count=1,count=2"), "parameter 'weights' must be a list NAME=W"),
    ((*BASE, "--weights", "count=nan"), "parameter 'weights' must be a list NAME=W"),
    ((*BASE, "--max-groups-per-unit", "2"), "parameter 'max_groups_per_unit' must be left at 1 without --privacy-unit"),
    ((*BASE, "--privacy-unit", "sex", "--max-rows-per-group", "0"), "parameter 'max_rows_per_group' must be an integer in [1, "),
    ((*BASE, "--privacy-unit", "sex", "--max-groups-per-unit", "x"), "parameter 'max_groups_per_unit' must be an integer"),
    ((*BASE, "--privacy-unit", "nope"), "parameter 'privacy_unit' must be a column of the file"),
    ((*BASE, "--seed", "-1"), "parameter 'seed' must be an integer >= 0"),
    ((*BASE, "--seed", "abc"), "parameter 'seed' must be an integer >= 0"),
    ((*BASE, "--where", "read_csv('/etc/passwd') IS NULL"), "parameter 'where' must be an expression without table functions"),
    ((*BASE, "--where", "age > 3"), "parameter 'where' must be a SQL boolean expression that DuckDB can bind"),
    ((*BASE, "--where", "1=1; DROP TABLE t"), "parameter 'where' must be one SQL expression (no ';')"),
    ((*BASE, "--where", "nope = 'x'"), "there is no column 'nope'"),
    ((*BASE, "--delimiter", "ab"), "parameter 'delimiter'"),
    ((*BASE, "--encoding", "klingon"), "parameter 'encoding'"),
    ((*BASE, "--plot", "out.exe"), "parameter 'plot' must be a file name ending in"),
    ((*BASE, "--plot", "/no/such/folder/p.png"), "parameter 'plot' must be a path in an existing folder"),
]


@pytest.mark.parametrize("args, expected", BAD)
def test_bad_options_exit_2_and_charge_nothing(calls: list[dict[str, Any]], data: Path, ledger_path: Path,
                                               args: tuple[str, ...], expected: str) -> None:
    msg = run_error("aggregate", data, *args, "--ledger", ledger_path)
    assert msg.startswith("aggregate: "), msg
    assert expected in msg, msg
    assert calls == []  # the API (which charges) was never called
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []


@pytest.mark.parametrize("domain_text, expected", [
    ("region\n", "parameter 'domain' must be a file with at least one key"),
    ("sex\nf\n", "parameter 'domain' must be a readable UTF-8 CSV file whose header row names the --by columns"),
    ("region\nnorth\nnorth\n", "parameter 'domain' must be a list of distinct keys; got 'north'."),
    ("region\nnorth,x\n", "parameter 'domain' must be a CSV file whose rows have 1 field(s)"),
    ('region\n""\n', "parameter 'domain' must be a list of keys without empty fields"),
    ('region\n"north\n', "parameter 'domain' must be a readable UTF-8 CSV file"),
])
def test_bad_domain_files(calls: list[dict[str, Any]], data: Path, tmp_path: Path, ledger_path: Path,
                          domain_text: str, expected: str) -> None:
    domain = tmp_path / "keys.csv"
    domain.write_text(domain_text, encoding="utf-8")
    msg = run_error("aggregate", data, "--by", "region", "--count", "--epsilon", "1", "--domain", domain,
                    "--ledger", ledger_path)
    assert expected in msg, msg
    assert calls == []
    with Ledger(ledger_path) as ledger:
        assert ledger.charges() == []


def test_bad_domain_bytes(calls: list[dict[str, Any]], data: Path, tmp_path: Path) -> None:
    domain = tmp_path / "keys.csv"
    domain.write_bytes(b"region\n\xff\xfe\n")
    msg = run_error("aggregate", data, "--by", "region", "--count", "--epsilon", "1", "--domain", domain)
    assert "parameter 'domain' must be a readable UTF-8 CSV file" in msg


def test_missing_file_and_click_usage_errors(calls: list[dict[str, Any]], tmp_path: Path) -> None:
    msg = run_error("aggregate", tmp_path / "nope.csv", "--by", "a", "--count", "--epsilon", "1")
    assert msg.startswith("aggregate: parameter 'file' must be an existing, readable CSV or Parquet file")
    msg = run_error("aggregate", tmp_path / "nope.csv", "--count", "--epsilon", "1")
    assert "Missing option '--by'" in msg
    assert calls == []


def test_a_valid_run_charges_once(calls: list[dict[str, Any]], data: Path, ledger_path: Path) -> None:
    result = run("aggregate", data, *BASE, "--ledger", ledger_path)
    assert result.exit_code == 0, result.stderr
    assert "charged ε=1, δ=1/1000000" in result.stderr or "charged ε=1" in result.stderr
    with Ledger(ledger_path) as ledger:
        (charge,) = ledger.charges()
        assert charge.context["command"] == "aggregate" and charge.context["by"] == ["region"]


# ------------------------------------------------------------------------------------------------
# Output: JSON, table, hostile keys, plot
# ------------------------------------------------------------------------------------------------


def test_json_shape(calls: list[dict[str, Any]], data: Path, ledger_path: Path) -> None:
    result = run("aggregate", data, "--by", "region,sex", "--count", "--mean", "age", "--epsilon", "1",
                 "--delta", "1e-6", "--json", "--ledger", ledger_path)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    payload = json.loads(result.stdout)
    assert result.stdout.count("\n") == 1
    for field in ("mechanism", "epsilon", "delta", "by", "split", "groups", "charged", "budget_left"):
        assert field in payload
    assert payload["mechanism"] == "aggregate" and payload["by"] == ["region", "sex"]
    assert payload["groups"][0] == {"region": "north", "sex": "f", "count": 6.0, "count_low": 5.0,
                                    "count_high": 7.0, "mean_age": 6.0, "mean_age_low": 5.0,
                                    "mean_age_high": 7.0, "mean_age_ok": True, "mean_age_reason": None}
    assert payload["charged"]["epsilon"] == 1.0


def test_where_failing_on_a_hostile_record_drops_it(calls: list[dict[str, Any]], tmp_path: Path) -> None:
    """A record on which the filter fails (a cast) is dropped: exit code, stderr and the rest of
    the output are those of the file without it."""
    clean = tmp_path / "clean.csv"
    clean.write_text("k,age\nx,30\nx,40\ny,50\n", encoding="utf-8")
    hostile = tmp_path / "hostile.csv"
    hostile.write_text("k,age\nx,30\nx,40\nx,not-a-number\ny,50\nz,99999999999999999999\n", encoding="utf-8")
    outs = []
    for path in (clean, hostile):
        result = run("aggregate", path, "--by", "k", "--count", "--epsilon", "1", "--delta", "1e-6",
                     "--where", "CAST(age AS INTEGER) >= 30", "--json")
        outs.append((result.exit_code, result.stderr, json.loads(result.stdout)["groups"]))
    assert outs[0] == outs[1]
    assert outs[0][0] == 0 and outs[0][2] == [
        {"k": "x", "count": 2.0, "count_low": 1.0, "count_high": 3.0},
        {"k": "y", "count": 1.0, "count_low": 0.0, "count_high": 2.0}]


# Text keys with markup, terminal escapes, a newline and a bidi override; and a key that is not
# valid UTF-8 (a BLOB/binary key column comes back as bytes).
HOSTILE = ["[red]x[/red]", "a[/]b", "\x1b[2Jclear", "two\nlines", "\u202eevil", ":smile:", b"bad\xffutf8"]


def test_hostile_keys_are_printed_escaped(monkeypatch: pytest.MonkeyPatch, data: Path, tmp_path: Path) -> None:
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(cli_aggregate, "_api", lambda: make_fake(made, override_keys=HOSTILE))
    result = run("aggregate", data, "--by", "region", "--count", "--epsilon", "1", "--delta", "1e-6")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for raw in ("\x1b", "\u202e", "\udcff", "two\nlines"):
        assert raw not in out
    assert out.count("\n") == len(out.splitlines())
    for shown in ("[red]x[/red]", "a[/]b", "\\x1b[2Jclear", "two\\x0alines", "\\u202eevil", "\\udcff", ":smile:"):
        assert shown in out, shown
    json_result = run("aggregate", data, "--by", "region", "--count", "--epsilon", "1", "--delta", "1e-6", "--json")
    assert json_result.exit_code == 0
    assert json_result.stdout.isascii()
    keys = [g["region"] for g in json.loads(json_result.stdout)["groups"]]
    assert keys[:-1] == HOSTILE[:-1] and "xff" in keys[-1]


def test_plot_writes_a_png(monkeypatch: pytest.MonkeyPatch, data: Path, tmp_path: Path) -> None:
    made: list[dict[str, Any]] = []
    monkeypatch.setattr(cli_aggregate, "_api", lambda: make_fake(made, override_keys=HOSTILE + ["$x^2$"]))
    out = tmp_path / "agg.png"
    result = run("aggregate", data, "--by", "region", "--count", "--sum", "cost:0:100", "--epsilon", "1",
                 "--delta", "1e-6", "--plot", out)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in result.stderr
    noext = tmp_path / "agg2"
    result = run("aggregate", data, "--by", "region", "--count", "--epsilon", "1", "--delta", "1e-6",
                 "--plot", noext, "--json")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "agg2.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_write_failure_after_the_release_is_exit_4(calls: list[dict[str, Any]], data: Path,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privagg.cli import _output

    def boom(fig: Any, path: Path, **kw: Any) -> None:
        raise _output.OutputError(f"could not write the plot {str(path)!r} (disk full)")

    monkeypatch.setattr(cli_aggregate, "save_figure", boom)
    result = run("aggregate", data, *BASE, "--plot", tmp_path / "p.png")
    assert result.exit_code == 4
    assert "Traceback" not in result.stderr and "region" in result.stdout


def test_non_default_csv_dialect_is_passed(calls: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("k;v\na;1\nb;2\n", encoding="utf-8")
    result = run("aggregate", path, "--by", "k", "--count", "--epsilon", "1", "--delta", "1e-6",
                 "--delimiter", ";")
    assert result.exit_code == 0, result.stderr
    assert calls[0]["csv"].delimiter == ";"


def test_registered_and_help(data: Path) -> None:
    result = run("aggregate", "--help")
    assert result.exit_code == 0
    for option in ("--by", "--count", "--sum", "--mean", "--quantile", "--where", "--domain", "--privacy-unit",
                   "--max-groups-per-unit", "--max-rows-per-group", "--epsilon", "--delta", "--weights",
                   "--json", "--plot", "--ledger", "--seed"):
        assert option in result.stdout
    assert "aggregate" in run("--help").stdout
    assert sys.modules["privagg.cli.aggregate"] is cli_aggregate
    assert duckdb.__version__
