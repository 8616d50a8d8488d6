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
