"""docs/behaviour.md names real tests: every `file.py::test_name` it cites must exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "behaviour.md"
ROW = re.compile(r"^\| (\d+(?:-\d+)?) \|")
REF = re.compile(r"(test_[a-z0-9_]+\.py)::(test_[a-zA-Z0-9_]+)")


def _rows() -> list[tuple[str, str]]:
    return [(m.group(1), line) for line in DOC.read_text().splitlines() if (m := ROW.match(line))]


def _find(filename: str) -> Path:
    matches = list((ROOT / "tests").rglob(filename))
    assert len(matches) == 1, f"{filename}: {matches}"
    return matches[0]


def test_every_checklist_item_1_to_48_and_57_has_a_row() -> None:
    covered: set[int] = set()
    for item, _ in _rows():
        first, _, last = item.partition("-")
        covered.update(range(int(first), int(last or first) + 1))
    assert set(range(1, 49)) | {57} <= covered


@pytest.mark.parametrize(("item", "line"), _rows())
def test_cited_tests_exist(item: str, line: str) -> None:
    refs = REF.findall(line)
    assert refs, f"row {item} cites no test"
    for filename, name in refs:
        text = _find(filename).read_text()
        assert re.search(rf"^(async )?def {name}\(", text, re.M), f"{filename}::{name}"
