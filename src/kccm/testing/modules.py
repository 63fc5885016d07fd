"""Import a support file of the tests by its path: the tests directories are not packages, yet
integration tests, conformance tests and benchmarks share e.g. ``tests/unit/deploy_support.py``
or a bench's module. (The emulators are a package: :mod:`kccm.emulators`.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_module"]


def load_module(name: str, path: Path) -> ModuleType:
    """The module ``name`` executed from ``path`` once: every later call (another test module
    or a benchmark in the same process) gets the same module object from ``sys.modules``."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module file", name=name, path=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: its annotations resolve through sys.modules
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
