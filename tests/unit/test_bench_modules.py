"""Every bench/ script imports: they share helpers (bench/scale.py, bench/proc.py, ...), and a
helper moved or renamed must fail here rather than on the next person to run a bench."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


@pytest.fixture
def bench_on_path() -> Iterator[None]:
    """As when a script runs: bench/ first on sys.path (and its modules forgotten after)."""
    before = set(sys.modules)
    sys.path.insert(0, str(BENCH))
    try:
        yield
    finally:
        sys.path.remove(str(BENCH))
        for name in set(sys.modules) - before:
            if (getattr(sys.modules[name], "__file__", "") or "").startswith(str(BENCH)):
                del sys.modules[name]


def test_there_are_bench_scripts() -> None:
    assert len(SCRIPTS) > 10


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_bench_script_imports(script: Path, bench_on_path: None) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as for an imported module (dataclasses look it up)
    spec.loader.exec_module(module)  # its main() runs only as __main__
    assert module.__doc__, f"{script.name} has no docstring saying what it measures"
