"""Output paths are checked before the ledger is charged; a write that still fails after the
charge prints the release, one line and exit 4 (issue 10, item 6)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from privagg.accounting import Ledger
from privagg.cli.main import cli


@pytest.fixture
def points_file(tmp_path: Path) -> Path:
    path = tmp_path / "points.csv"
    rows = np.random.default_rng(5).normal(size=(400, 2))
    path.write_text("x,y\n" + "\n".join(f"{a:.4f},{b:.4f}" for a, b in rows) + "\n", encoding="utf-8")
    return path


def invoke(*args: str | Path):
    return CliRunner().invoke(cli, [str(a) for a in args])


def charges(path: Path) -> int:
    with Ledger(path) as ledger:
        return len(ledger.charges())


def _refused_before_charge(result, ledger_path: Path, expected: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr
    assert charges(ledger_path) == 0


HIST = ("histogram", "--column", "code", "--epsilon", "1", "--delta", "1e-6")


@pytest.mark.parametrize("name, expected", [
    ("out.txt", "parameter 'plot' must be a file name ending in .eps"),
    ("no/such/dir/p.png", "parameter 'plot' must be a path in an existing folder"),
    ("taken.png", "parameter 'plot' must be a file path, not a folder"),  # no suffix → taken.png
])
def test_histogram_plot_target_refused_before_the_charge(csv_file: Path, ledger_path: Path, tmp_path: Path,
                                                         name: str, expected: str) -> None:
    (tmp_path / "taken.png").mkdir()
    target = tmp_path / (name if name != "taken.png" else "taken")
    result = invoke(HIST[0], csv_file, *HIST[1:], "--plot", target, "--ledger", ledger_path)
    _refused_before_charge(result, ledger_path, expected)


@pytest.mark.parametrize("command", [
    ("mean", "--columns", "x,y", "--epsilon", "1", "--delta", "1e-6"),
    ("kmeans", "--columns", "x,y", "--k", "2", "--epsilon", "1", "--delta", "1e-6"),
])
def test_mean_kmeans_plot_format_refused_before_the_charge(points_file: Path, ledger_path: Path,
                                                           tmp_path: Path, command: tuple[str, ...]) -> None:
    result = invoke(command[0], points_file, *command[1:], "--plot", tmp_path / "p.txt", "--ledger", ledger_path)
    _refused_before_charge(result, ledger_path, "parameter 'plot' must be a file name ending in")


def test_demo_out_refused_before_any_work(tmp_path: Path) -> None:
    result = invoke("demo", "--out", tmp_path / "nonexistent" / "d.png")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"privagg: error: demo: parameter 'out' must be a path in an existing folder; "
                             f"got {str(tmp_path / 'nonexistent' / 'd.png')!r}.\n")


def test_plot_without_suffix_writes_png_and_says_so(csv_file: Path, tmp_path: Path) -> None:
    result = invoke(HIST[0], csv_file, *HIST[1:], "--plot", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = tmp_path / "out.png"
    assert written.read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "out").exists()
    assert f"wrote {written}\n" in result.stderr


@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_other_formats_follow_the_suffix(csv_file: Path, tmp_path: Path, suffix: str, magic: bytes) -> None:
    out = tmp_path / f"out{suffix.upper()}"
    result = invoke(HIST[0], csv_file, *HIST[1:], "--plot", out)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes().startswith(magic)


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.figure import Figure

    def savefig(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", savefig)


@pytest.mark.parametrize("command", [
    HIST,
    ("mean", "--columns", "x,y", "--epsilon", "1", "--delta", "1e-6", "--radius", "4"),
])
def test_write_failure_after_the_charge_keeps_the_release(csv_file: Path, points_file: Path, ledger_path: Path,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          command: tuple[str, ...]) -> None:
    _disk_full(monkeypatch)
    data = csv_file if command[0] == "histogram" else points_file
    out = tmp_path / "p.png"
    result = invoke(command[0], data, *command[1:], "--json", "--plot", out, "--ledger", ledger_path)
    assert result.exit_code == 4, (result.stdout, result.stderr)
    released = json.loads(result.stdout)  # the release was printed before the plot
    assert released["charged"]["epsilon"] > 0
    assert result.stderr == (f"privagg: error: could not write the plot {str(out)!r} (No space left on device); "
                             "the release above was printed and charged\n")
    assert charges(ledger_path) == 1


def test_log_axes_are_labelled_in_plain_numbers(tmp_path: Path) -> None:
    """Figures are drawn with mathtext off (keys are data); the default log-axis labels are
    mathtext, which would then print as ``$\\mathdefault{10^{-3}}$``: save_figure relabels them.
    Control: the same figure saved under literal_text without the relabelling shows the '$'."""
    from matplotlib.figure import Figure

    from privagg.cli._output import literal_text, save_figure

    def figure() -> Figure:
        fig = Figure()
        ax = fig.add_subplot()
        ax.loglog([1, 10, 1000], [1e-1, 1e-3, 1e-5])
        return fig

    fig = figure()
    save_figure(fig, tmp_path / "ok.png")
    labels = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()]
    assert labels and all("$" not in t for t in labels) and any(t for t in labels), labels
    control = figure()
    with literal_text():
        control.savefig(tmp_path / "raw.png")
    raw = [t.get_text() for ax in control.axes for t in ax.get_yticklabels()]
    assert any("$" in t for t in raw), raw
