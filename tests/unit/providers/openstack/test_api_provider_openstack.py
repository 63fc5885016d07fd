"""The provider as the daemon sees it: capabilities as OCCM's, routes only with router-id and
an extraroute extension, the Service patcher wired in initialize, the entry point."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path
from typing import Any

import pytest

from kccm.providers.openstack import OpenStackCloud, provider


def test_capabilities_are_occms(cloud: OpenStackCloud) -> None:
    assert cloud.instances() is None
    assert cloud.zones() is None
    assert cloud.clusters() is None
    assert cloud.instances_v2() is not None
    assert cloud.routes() is not None  # router-id set and extraroute-atomic listed
    assert cloud.provider_name() == "openstack"
    assert cloud.has_cluster_id() is True
    assert cloud.cloud_api_calls() is cloud.api.ledger


@pytest.mark.parametrize(
    ("aliases", "supported", "atomic"),
    [
        (["router", "extraroute"], True, False),
        (["router", "extraroute-atomic", "allowed-address-pairs"], True, True),
        (["router"], False, False),
    ],
    ids=["extraroute", "extraroute-atomic", "none"],
)
def test_routes_follow_the_extensions(
    emulator: Any, make_cloud: Any, aliases: list[str], supported: bool, atomic: bool
) -> None:
    body = {"extensions": [{"alias": a, "name": a} for a in aliases]}
    emulator.admin.fault("network", "GET", r"/v2\.0/extensions$", status=200, body=body)
    try:
        routes = make_cloud().routes()
    finally:
        emulator.admin.clear_faults()
    assert (routes is not None) is supported
    if routes is not None:
        assert routes.atomic is atomic  # type: ignore[attr-defined]


class _Balancers:
    def __init__(self) -> None:
        self.patcher: Any = None

    def set_service_patcher(self, patcher: Any) -> None:
        self.patcher = patcher


class _Builder:
    def __init__(self) -> None:
        self.names: list[str] = []

    def client(self, name: str) -> str:
        self.names.append(name)
        return f"client:{name}"

    def config(self, name: str) -> None:
        return None


def test_initialize_gives_the_balancers_a_service_patcher(
    cloud: OpenStackCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        provider, "KubeServicePatcher", lambda client, loop: ("patcher", client, loop)
    )
    balancers, builder = _Balancers(), _Builder()
    monkeypatch.setattr(cloud, "_balancers", balancers)

    async def run() -> asyncio.AbstractEventLoop:
        await cloud.initialize(builder, asyncio.Event())
        return asyncio.get_running_loop()

    loop = asyncio.run(run())
    assert balancers.patcher == ("patcher", "client:cloud-controller-manager", loop)


def test_initialize_without_a_client_builder(cloud: OpenStackCloud) -> None:
    asyncio.run(cloud.initialize(None, asyncio.Event()))


def test_the_entry_point_and_runtime_dependencies() -> None:
    root = Path(__file__).resolve().parents[4]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    entry = project["entry-points"]["kccm.cloud_providers"]["openstack"]
    assert entry == "kccm.providers.openstack:new_openstack_cloud"
    assert any(
        d.startswith("keystoneauth1>=") for d in project["optional-dependencies"]["openstack"]
    )
    assert any(d.startswith("PyYAML>=") for d in project["dependencies"])


def test_no_routes_when_the_extensions_cannot_be_listed(emulator: Any, make_cloud: Any) -> None:
    emulator.admin.fault("network", "GET", r"/v2\.0/extensions$", status=500)
    try:
        assert make_cloud().routes() is None
    finally:
        emulator.admin.clear_faults()
