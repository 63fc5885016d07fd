"""No Python module in the repository is over 600 lines.

The rule holds for every ``.py`` file kccm ships or runs: ``src/`` (the package), ``tests/``,
``bench/``, ``examples/`` and ``hack/``. 600 is a ceiling, not a target: a module near it is
a sign to split it by what it does (a support module, a data table of its own) before the
next change pushes it over. A module over it fails here, naming it and its length.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 600
ROOMS = ("src", "tests", "bench", "examples", "hack")


def modules() -> list[Path]:
    found = []
    for room in ROOMS:
        for path in (ROOT / room).rglob("*.py"):
            parts = path.relative_to(ROOT).parts
            if not any(part.startswith(".") or part == "__pycache__" for part in parts):
                found.append(path)
    return sorted(found)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_walk_sees_every_room() -> None:
    seen = {path.relative_to(ROOT).parts[0] for path in modules()}
    assert seen == set(ROOMS)
    assert ROOT / "src" / "kccm" / "controllers" / "service.py" in modules()


def test_no_module_is_over_600_lines() -> None:
    over = {
        str(path.relative_to(ROOT)): count for path in modules() if (count := lines(path)) > LIMIT
    }
    if over:
        pytest.fail(
            f"modules over {LIMIT} lines (split each by what it does): "
            + ", ".join(f"{name} ({count})" for name, count in sorted(over.items())),
            pytrace=False,
        )
