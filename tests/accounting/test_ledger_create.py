"""``Ledger.create``'s two publication paths (hard link, and exclusive create + copy where the
file system has no hard links) and its creation race: a file that appears at the target
between the existence check and publication is never overwritten."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from privagg import ParameterError
from privagg.accounting import Ledger, PrivacyLoss

REAL_LINK = os.link


def no_hard_links(src, dst, *args, **kwargs):
    raise OSError(errno.EPERM, "hard links not supported here")


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".privagg-ledger-")]


@pytest.mark.parametrize("links", [True, False])
def test_create_publishes_a_complete_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool) -> None:
    if not links:
        monkeypatch.setattr(os, "link", no_hard_links)
    path = tmp_path / "budget.db"
    with Ledger.create(path, epsilon=2.0, delta=1e-6) as ledger:
        ledger.charge(PrivacyLoss.pure(1.5), mechanism="m")
    monkeypatch.setattr(os, "link", REAL_LINK)
    with Ledger(path) as again:  # reopened: the copy is a whole, valid ledger
        assert again.total == PrivacyLoss.approx(2.0, 1e-6)
        assert again.spent().epsilon == PrivacyLoss.pure(1.5).epsilon and len(again.charges()) == 1
    assert leftovers(tmp_path) == []  # the temporary file is gone


@pytest.mark.parametrize("links", [True, False])
def test_creation_race_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, links: bool) -> None:
    """Another process creates the target after the existence check: ParameterError naming
    'path', the other file untouched, no temporary file left."""
    path = tmp_path / "budget.db"
    theirs = b"another process's ledger"

    def racing_link(src, dst, *args, **kwargs):
        Path(dst).write_bytes(theirs)  # the competitor wins the race
        if links:
            return REAL_LINK(src, dst, *args, **kwargs)
        raise OSError(errno.EPERM, "hard links not supported here")

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(ParameterError, match="Ledger.create: parameter 'path'"):
        Ledger.create(path, epsilon=1.0)
    assert path.read_bytes() == theirs
    assert leftovers(tmp_path) == []
