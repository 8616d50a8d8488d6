"""Loading a benchmark script (``benchmarks/NAME.py``, not a package) as a module for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(file: str, module_name: str) -> ModuleType:
    """Execute ``benchmarks/<file>`` as the module ``module_name`` (registered in ``sys.modules``,
    where dataclasses look their module up), with ``benchmarks/`` on ``sys.path`` while it runs
    (a script may import its siblings)."""
    saved = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


@pytest.fixture(scope="module")
def group_size_sweep() -> ModuleType:
    return load_benchmark("aggregate_group_size.py", "bench_aggregate_group_size")


@pytest.fixture(scope="module")
def far_bench() -> ModuleType:
    return load_benchmark("aggregate_far.py", "bench_aggregate_far")


@pytest.fixture(scope="module")
def sweep_bench() -> ModuleType:
    return load_benchmark("aggregate_sweep.py", "bench_aggregate_sweep")
