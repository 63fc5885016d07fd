"""The control every aiohttp emulator shares (``kccm.emulators.control``), once per cloud: a
refused call raises the cloud's own error, the leak check names the cloud, and the process
stops with its block even when the block fails."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

import pytest

from kccm.emulators.azure.launcher import AzureEmulatorError, azure_emulator
from kccm.emulators.control import ControlError, ControlledEmulator
from kccm.emulators.openstack.launcher import EmulatorError, openstack_emulator

Starter = Callable[..., contextlib.AbstractContextManager[ControlledEmulator[Any]]]
CLOUDS: dict[str, tuple[Starter, Callable[[Any], object], type[ControlError], str]] = {
    "azure": (
        azure_emulator,
        lambda admin: admin.add_vm("leak-1"),
        AzureEmulatorError,
        "Azure emulator left with: {",
    ),
    "openstack": (
        openstack_emulator,
        lambda admin: admin.add_server("leak-1"),
        EmulatorError,
        "OpenStack emulator left with: {'servers'",
    ),
}


class Boom(Exception):
    pass


@pytest.mark.parametrize(("start", "make", "error", "leak_text"), CLOUDS.values(), ids=list(CLOUDS))
def test_each_cloud_keeps_its_own_error_and_name(
    start: Starter, make: Callable[[Any], object], error: type[ControlError], leak_text: str
) -> None:
    started: list[ControlledEmulator[Any]] = []
    with contextlib.suppress(Boom), start() as emu:
        started.append(emu)
        baseline = emu.admin.state()
        emu.admin.assert_clean(baseline)
        with pytest.raises(error, match="/_emu/faults: 400"):
            emu.admin._call("POST", "/_emu/faults", {"kind": "no-such-kind"})
        make(emu.admin)
        with pytest.raises(AssertionError, match=re.escape(leak_text)):
            emu.assert_clean(baseline)
        raise Boom  # the block fails: the process stops all the same
    assert started[0].process.poll() is not None
