"""kccm.testing.modules.load_module: a support file imported by path, once."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.testing.modules import load_module

NAME = "kccm_test_support_probe"


@pytest.fixture
def forget() -> Iterator[None]:
    yield
    sys.modules.pop(NAME, None)


@pytest.mark.usefixtures("forget")
def test_a_file_is_executed_once_and_shared(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("RUNS = []\nRUNS.append(1)\n")
    first = load_module(NAME, path)
    second = load_module(NAME, tmp_path / "elsewhere.py")  # the name decides: already loaded
    assert second is first
    assert first.RUNS == [1]
    assert sys.modules[NAME] is first


@pytest.mark.usefixtures("forget")
def test_a_failing_file_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('support file broken')\n")
    with pytest.raises(RuntimeError, match="support file broken"):
        load_module(NAME, path)
    assert NAME not in sys.modules, "a retry executes the file again"


@pytest.mark.usefixtures("forget")
def test_a_path_that_is_not_a_module_is_an_import_error(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match="not a Python module file"):
        load_module(NAME, tmp_path / "data.txt")
