"""The import-linter contract "The cloud controllers do not import each other" (pyproject.toml)
lists exactly the modules of the controllers in ``CONTROLLERS`` (controllers/table.py).

A controller's module is the module of ``kccm.controllers`` that defines (assigns) the
``CONTROLLER_NAME`` of its row. A new row whose module is missing from the contract, or a
contract entry that is no controller, fails here: lint-imports alone would stay green.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import kccm.controllers
from kccm.controllers.table import CONTROLLERS, ControllerSpec

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
CONTRACT = "The cloud controllers do not import each other"


def contract_modules() -> list[str]:
    config = tomllib.loads(PYPROJECT.read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == CONTRACT]
    assert contract["type"] == "independence"
    modules: list[str] = contract["modules"]
    return modules


def _defines_controller_name(module: ModuleType) -> bool:
    """``CONTROLLER_NAME = ...`` at the module's top level (not merely imported)."""
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "CONTROLLER_NAME" for t in targets):
            return True
    return False


def controller_modules() -> dict[str, list[str]]:
    """Controller name -> the modules of ``kccm.controllers`` that define it."""
    found: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages(kccm.controllers.__path__, "kccm.controllers."):
        module = importlib.import_module(info.name)
        name = getattr(module, "CONTROLLER_NAME", None)
        if isinstance(name, str) and _defines_controller_name(module):
            found.setdefault(name, []).append(info.name)
    return found


MODULES = controller_modules()


def test_the_contract_is_found_and_not_empty() -> None:
    assert len(contract_modules()) >= 5


@pytest.mark.parametrize("spec", CONTROLLERS, ids=[spec.name for spec in CONTROLLERS])
def test_each_controllers_module_is_in_the_independence_contract(spec: ControllerSpec) -> None:
    name = spec.name
    modules = MODULES.get(name, [])
    assert len(modules) == 1, (
        f"{name}: expected one module of kccm.controllers defining CONTROLLER_NAME = {name!r}, "
        f"found {modules}"
    )
    assert modules[0] in contract_modules(), (
        f"{modules[0]} (controller {name}) is missing from the import-linter contract "
        f"{CONTRACT!r} in pyproject.toml: add it to its modules"
    )


def test_the_independence_contract_names_only_controllers() -> None:
    listed = contract_modules()
    controllers = {module for spec in CONTROLLERS for module in MODULES.get(spec.name, [])}
    assert len(listed) == len(set(listed)), f"{CONTRACT!r} lists a module twice: {listed}"
    assert set(listed) <= controllers, (
        f"{CONTRACT!r} in pyproject.toml names modules that are no controller of "
        f"CONTROLLERS: {sorted(set(listed) - controllers)}"
    )
