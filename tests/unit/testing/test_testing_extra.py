"""The conformance kit's third-party imports are declared: runtime dependencies or the
``testing`` extra, each with a lower bound (issue 13, point 9)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
KIT = ROOT / "src" / "kccm" / "testing" / "conformance.py"
IMPORT_NAMES = {"pyyaml": "yaml", "pytest-asyncio": "pytest_asyncio"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower()


def _modules(requirements: list[str]) -> set[str]:
    return {IMPORT_NAMES.get(_name(r), _name(r).replace("-", "_")) for r in requirements}


def _third_party_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in {"kccm"}}


def test_every_module_the_kit_imports_is_declared() -> None:
    declared = _modules(PYPROJECT["project"]["dependencies"])
    declared |= _modules(PYPROJECT["project"]["optional-dependencies"]["testing"])
    missing = _third_party_imports(KIT) - declared
    assert not missing, f"imported by the conformance kit but not declared: {sorted(missing)}"


@pytest.mark.parametrize("package", ["pytest", "pytest-asyncio"])
def test_the_testing_extra_has_a_lower_bound_for(package: str) -> None:
    extra = PYPROJECT["project"]["optional-dependencies"]["testing"]
    (requirement,) = [r for r in extra if _name(r) == package]
    assert re.fullmatch(rf"{package}>=\d+(\.\d+)*", requirement), requirement


def test_the_provider_guide_names_the_extra() -> None:
    guide = (ROOT / "docs" / "writing-a-provider.md").read_text()
    assert "kccm[testing]" in guide
    assert "pytest-asyncio" in guide
