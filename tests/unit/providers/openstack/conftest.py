"""Fixtures of the openstack provider's unit tests: one OpenStack emulator per test module
(``kccm.emulators.openstack``, a real HTTP server in a subprocess), and per test a ``world``
that removes the servers the test added, clears its faults and checks that nothing was left
behind (routes, ports, ...)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from os_core_world import World

from kccm.providers.openstack import OpenStackCloud, new_openstack_cloud

Sections = Mapping[str, Mapping[str, str | None]]


@pytest.fixture(scope="module")
def emulator() -> Iterator[Any]:
    """The module's emulator (Keystone, Nova, Neutron, Octavia on one loopback port)."""
    launcher = pytest.importorskip("kccm.emulators.openstack.launcher")
    with launcher.openstack_emulator() as emu:
        yield emu


@pytest.fixture
def world(emulator: Any) -> Iterator[World]:
    baseline = emulator.admin.state()
    world = World(emulator)
    try:
        yield world
    finally:
        world.cleanup()
    emulator.admin.assert_clean(baseline)


@pytest.fixture
def make_cloud(emulator: Any) -> Callable[..., OpenStackCloud]:
    """``make_cloud({"Section": {"key": "value"}})``: the provider as the daemon builds it
    (its factory, so it authenticates at once)."""

    def make(sections: Sections | None = None) -> OpenStackCloud:
        conf = emulator.cloud_conf(dict(sections or {}))
        return new_openstack_cloud(io.StringIO(conf))

    return make


@pytest.fixture
def cloud(make_cloud: Callable[..., OpenStackCloud]) -> OpenStackCloud:
    return make_cloud()
