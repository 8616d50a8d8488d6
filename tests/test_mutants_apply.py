"""``make mutants`` stays runnable: every mutation's snippet occurs exactly once in the source.

(The mutations themselves run in ``make mutants``, not here: each needs its own test run.) A
snippet that drifted away from the code would make the mutation runner stop; this catches it in
``make test``, the moment the code changes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("privagg_mutants", ROOT / "tools" / "mutants.py")
assert _spec is not None and _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutants  # dataclasses look their module up there
_spec.loader.exec_module(mutants)


def test_the_list_has_the_five_and_at_least_fifteen_more() -> None:
    ids = [m.id for m in mutants.MUTATIONS]
    assert len(ids) == len(set(ids)) >= 20


@pytest.mark.parametrize("mutation", mutants.MUTATIONS, ids=lambda m: m.id)
def test_snippet_occurs_once_and_tests_exist(mutation) -> None:
    text = (ROOT / "src" / "privagg" / mutation.path).read_text(encoding="utf-8")
    assert text.count(mutation.old) == 1, f"{mutation.id}: the snippet no longer matches the code"
    assert mutation.new != mutation.old
    for test in mutation.tests:
        assert (ROOT / test.split("::")[0]).exists(), test
