"""Every emulator has one shape (kccm.emulators.CloudEmulator on an EmulatorProcess), and the
emulators' modules import each other without a circle. The running shape of vcsim, a Go-built
binary, is checked in tests/integration/vsphere/test_vcsim_shape.py (the unit layer never needs
a built binary)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import typing
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

import kccm.emulators
from kccm.emulators import CloudEmulator
from kccm.emulators.alibabacloud import AlibabaEmulator, start_alibaba
from kccm.emulators.aws import MotoEmulator, start_moto
from kccm.emulators.azure import AzureEmulator, start_azure
from kccm.emulators.openstack import Emulator, start_emulator
from kccm.emulators.process import EmulatorProcess
from kccm.emulators.vsphere import Vcsim, start_vcsim
from kccm.testing.emulatorshape import check_running_shape

REPO = Path(__file__).resolve().parents[3]

EMULATORS: dict[str, tuple[type[Any], Callable[[], Any]]] = {
    "alibabacloud": (AlibabaEmulator, start_alibaba),
    "aws": (MotoEmulator, start_moto),
    "azure": (AzureEmulator, start_azure),
    "openstack": (Emulator, start_emulator),
    "vsphere": (Vcsim, start_vcsim),
}
"""Each cloud's emulator class and how a test starts it."""

SHAPE = [name for name in vars(CloudEmulator) if not name.startswith("_")]


def test_every_cloud_of_the_room_is_listed_here() -> None:
    clouds = {m.name for m in pkgutil.iter_modules(kccm.emulators.__path__) if m.ispkg}
    assert clouds == set(EMULATORS)


def test_the_shape_names_what_every_emulator_offers() -> None:
    assert set(SHAPE) == {"url", "call_counts", "clear_faults", "state", "assert_clean", "stop"}


@pytest.mark.parametrize("cloud", sorted(EMULATORS))
def test_each_emulator_class_has_the_shape(cloud: str) -> None:
    cls, _ = EMULATORS[cloud]
    assert issubclass(cls, EmulatorProcess)
    hints = typing.get_type_hints(cls)
    missing = [name for name in SHAPE if not hasattr(cls, name) and name not in hints]
    assert missing == []


PYTHON_EMULATORS = sorted(set(EMULATORS) - {"vsphere"})
"""The emulators that run without a Go-built binary."""


@pytest.fixture(params=PYTHON_EMULATORS)
def running(request: pytest.FixtureRequest) -> Iterator[Any]:
    _, start = EMULATORS[request.param]
    emulator = start()
    assert isinstance(emulator, AbstractContextManager)
    with emulator:
        yield emulator
    assert emulator.process.poll() is not None


def test_each_running_emulator_answers_in_the_shape(running: Any) -> None:
    check_running_shape(running)


def test_the_emulators_import_each_other_without_a_circle() -> None:
    found = subprocess.run(
        [sys.executable, str(REPO / "hack" / "import_cycles.py"), str(REPO / "src/kccm/emulators")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0, found.stdout
    assert found.stdout.endswith(" 0 cycles\n")
