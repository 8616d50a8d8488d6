"""``privagg demo`` and its synthetic dataset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner

from privagg import demo_data
from privagg.cli.main import cli


def test_dataset_is_deterministic_with_a_long_tail() -> None:
    codes, records = demo_data.diagnosis_records(20_000)
    codes2, records2 = demo_data.diagnosis_records(20_000)
    assert np.array_equal(codes, codes2) and np.array_equal(records, records2)
    assert codes.size == 2600 and codes[0] == "A00" and codes[-1] == "Z99" and np.all(codes[:-1] < codes[1:])
    counts = np.sort(np.unique(records, return_counts=True)[1])[::-1]
    assert counts[0] > 0.04 * records.size  # a heavy head ...
    assert np.mean(counts < 5) > 0.5  # ... and a long tail of rare codes
    assert np.isin(records, codes).all()


def test_demo_runs_and_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "demo.png"
    result = CliRunner().invoke(cli, ["demo", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    for expected in ("laplace_histogram", "stable_histogram", "noisy count ≥ 28", "error bound", "secure", str(out)):
        assert expected in text.replace("\n", ""), expected
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_side_by_side_rows_are_matched_by_label(tmp_path: Path) -> None:
    # the stable histogram's summary has a "selection" row the Laplace one lacks: zipped by position,
    # every row below it showed the next row's value in the stable column ("records n" → "noisy count ≥ 28")
    from privagg.cli.demo import _side_by_side

    rows = _side_by_side([("a", "1"), ("t", "none"), ("n", "9")], [("a", "2"), ("s", "sel"), ("t", "≥ 5"), ("n", "9")])
    assert rows == [("a", "1", "2"), ("s", "—", "sel"), ("t", "none", "≥ 5"), ("n", "9", "9")]
    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path / "d.png")])
    assert result.exit_code == 0
    line = next(x for x in result.stdout.splitlines() if x.lstrip("│ ").startswith("records n"))
    assert line.count("100,000") == 2, line
    line = next(x for x in result.stdout.splitlines() if x.lstrip("│ ").startswith("threshold"))
    assert "none" in line and "noisy count ≥ 28" in line, line
