"""Released keys and public strings are printed as plain, escaped text (issue 10, item 5 and 7).

A key is data: rich markup in it must not be interpreted (``a[/]b`` used to crash the table after
the ledger was charged, ``[bold red]`` was styled), a terminal escape must not reach the terminal
(``\\x1b[2J`` cleared it), a bidi override must not reorder the line, and matplotlib must not read
``$...$`` as mathtext. File names and column names are public but get the same treatment.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli
from privagg.mechanisms import histogram as H

# Each key 40 times: all of them pass the threshold T = 28 without noise.
NASTY = [
    "a[/]b",                    # a closing tag with nothing to close: rich MarkupError
    "[bold red]x[/bold red]",   # styled by rich
    "\x1b[2Jclear",             # ESC: clears the terminal
    "\x9b31mcsi",               # C1 CSI
    "\u202eabc",                # right-to-left override
    "\u2066iso\u2069",          # bidi isolate
    "zero\u200bwidth",          # invisible format character
    "nul\x00del\x7f",           # NUL and DEL
    "two\nlines",               # a newline inside a key
    ":smile:",                  # rich emoji code
    "$\\frac",                  # broken mathtext
    "$x^2$",                    # valid mathtext
    "back\\x1b",                # a literal backslash, x, 1, b (must not look like ESC)
]
RAW = ("\x1b", "\x9b", "\u202e", "\u2066", "\u2069", "\u200b", "\x00", "\x7f")


@pytest.fixture
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(H, "discrete_laplace", lambda scale, size, rng: np.zeros(size, dtype=np.int64))


@pytest.fixture
def nasty_file(tmp_path: Path) -> Path:
    path = tmp_path / "[red]visits.parquet"  # a file name with markup: public, still plain text
    pq.write_table(pa.table({"code": pa.array([k for k in NASTY for _ in range(40)], pa.string())}), path)
    return path


def invoke(*args: str | Path):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _no_raw(text: str) -> None:
    for c in RAW:
        assert c not in text, repr(c)


def test_visible_escapes_every_control_and_format_character() -> None:
    from privagg.cli._render import visible

    cats = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    chars = [chr(cp) for cp in range(0x110000) if unicodedata.category(chr(cp)) in cats]
    assert len(chars) > 2000
    shown = visible("".join(chars))
    assert all(unicodedata.category(c) not in cats for c in shown)
    assert visible("a\x1bb\u202e\\") == "a\\x1bb\\u202e\\\\"
    assert visible("Zürich 😀 [b]x[/b]") == "Zürich 😀 [b]x[/b]"  # printable text is left alone


def test_table_shows_keys_literally_and_escaped(no_noise: None, nasty_file: Path, tmp_path: Path) -> None:
    ledger_path = tmp_path / "b.db"
    Ledger.create(ledger_path, epsilon=5, delta=1e-5).close()
    result = invoke("histogram", nasty_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6",
                    "--rows", "50", "--ledger", ledger_path)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    out = result.stdout
    _no_raw(out)
    _no_raw(result.stderr)
    for shown in ("a[/]b", "[bold red]x[/bold red]", "\\x1b[2Jclear", "\\x9b31mcsi", "\\u202eabc",
                  "\\u2066iso\\u2069", "zero\\u200bwidth", "nul\\x00del\\x7f", "two\\x0alines",
                  ":smile:", "$\\\\frac", "$x^2$", "back\\\\x1b", "[red]visits.parquet"):
        assert shown in out, shown
    assert "😄" not in out
    with Ledger(ledger_path) as ledger:
        assert len(ledger.charges()) == 1


def test_json_is_ascii_and_round_trips(no_noise: None, nasty_file: Path) -> None:
    result = invoke("histogram", nasty_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.isascii()
    assert sorted(json.loads(result.stdout)["keys"]) == sorted(NASTY)


def test_plot_draws_keys_literally(no_noise: None, nasty_file: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No mathtext (``$\\frac`` used to raise after the charge), escaped labels, no warning."""
    from privagg.cli import _output
    from privagg.cli._render import visible

    saved = []
    real = _output.save_figure
    monkeypatch.setattr("privagg.cli.histogram.save_figure",
                        lambda fig, path, **kw: (saved.append(fig), real(fig, path, **kw)))
    png = tmp_path / "keys.png"
    result = invoke("histogram", nasty_file, "--column", "code", "--epsilon", "1", "--delta", "1e-6",
                    "--plot", png)
    assert result.exit_code == 0, result.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    (fig,) = saved
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert sorted(labels) == sorted(visible(k) for k in NASTY)
    assert not any(t.get_parse_math() for t in fig.axes[0].get_xticklabels())


def test_mean_table_escapes_file_and_column_names(tmp_path: Path) -> None:
    path = tmp_path / "p\x1b[2J.csv"
    rng = np.random.default_rng(3)
    rows = "\n".join(f"{a:.3f},{b:.3f}" for a, b in rng.normal(size=(300, 2)))
    path.write_text("x\x1b[31m,[b]y\n" + rows + "\n", encoding="utf-8")
    result = invoke("mean", path, "--columns", "x\x1b[31m,[b]y", "--epsilon", "1", "--delta", "1e-6",
                    "--radius", "3")
    assert result.exit_code == 0, result.stderr
    _no_raw(result.stdout)
    assert "p\\x1b[2J.csv" in result.stdout and "x\\x1b[31m" in result.stdout and "[b]y" in result.stdout


def test_error_lines_never_carry_a_raw_control_character(tmp_path: Path) -> None:
    """click's own messages quote paths as given (item 7): escaped on the one line."""
    folder = tmp_path / "d\x1b[2J"
    folder.mkdir()
    data = tmp_path / "v.csv"
    data.write_text("code\nA\n", encoding="utf-8")
    result = invoke("histogram", data, "--column", "code", "--epsilon", "1", "--delta", "1e-6",
                    "--plot", folder)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("privagg: error: ")
    _no_raw(result.stderr)
    assert "d\\x1b[2J" in result.stderr
    missing = invoke("histogram", tmp_path / "m\u202e.csv", "--column", "c\x1b", "--epsilon", "1",
                     "--delta", "1e-6")
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1
    _no_raw(missing.stderr)


def test_demo_hint_keeps_its_brackets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without matplotlib the demo prints ``pip install 'privagg[plot]'`` (rich ate ``[plot]``)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("matplotlib") else real(name, *a))
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails like a missing package
    result = invoke("demo", "--out", tmp_path / "d.png")
    assert result.exit_code == 0, result.stderr
    assert "pip install 'privagg[plot]'" in result.stdout.replace("\n", "")
    assert not (tmp_path / "d.png").exists()
