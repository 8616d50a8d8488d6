"""README.md's examples run as printed (issue 10, item 6).

Every ```python block runs, in order and in one namespace (a later block may use an earlier
block's names), inside a temporary folder. Every ``privagg …`` command of the ```sh blocks runs
through the click entry point (in-process, so it takes seconds) against small generated files
with the names the README uses; each must exit 0. ``make`` lines are not run (they build a venv).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text(encoding="utf-8")) if lang == language]


def _commands() -> list[list[str]]:
    commands = []
    for block in _blocks("sh"):
        text = block.replace("\\\n", " ")  # continuation lines
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("privagg "):
                commands.append(shlex.split(line, comments=True)[1:])
    return commands


def test_readme_has_examples() -> None:
    assert len(_blocks("python")) >= 2
    names = {c[0] for c in _commands()}
    assert {"histogram", "mean", "kmeans", "budget"} <= names


def test_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in _blocks("python"):
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    release = namespace["release"]
    assert release.output > 9000  # the friendly() example keeps (almost) every point
    assert (tmp_path / "hist.png").exists()


def _files(folder: Path) -> None:
    rng = np.random.default_rng(2024)
    n = 6000
    centers = np.array([[0, 0], [40, 0], [0, 40], [40, 40], [20, 80]], dtype=float)
    xy = centers[rng.integers(0, 5, n)] + rng.normal(size=(n, 2))
    codes = np.array(["E11", "I10", "J45", "Z00"])[rng.integers(0, 4, n)]
    pq.write_table(pa.table({
        "diagnosis": codes, "age": rng.integers(18, 90, n).astype(float),
        "length_of_stay": rng.exponential(4.0, n), "x": xy[:, 0], "y": xy[:, 1],
    }), folder / "visits.parquet")
    (folder / "visits.csv").write_text("diagnosis\n" + "\n".join(codes) + "\n", encoding="utf-8")
    (folder / "icd10_codes.txt").write_text("E11\nI10\nJ45\nZ00\nZ99\n", encoding="utf-8")


def test_sh_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from privagg.cli.main import cli

    _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    for args in _commands():
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (args, result.stdout, result.stderr)
    assert (tmp_path / "visits.budget").exists()
