"""``LocalCloud.describe_load_balancer`` (issue 27) against the real data plane on loopback: each
backend shows the verdict of the data plane's health checker, and a backend whose node's server
stops shows unhealthy; with no data plane heartbeating, nothing is known."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from dataplane_world import NODES, WAIT, World, all_checked, until_listening

from kccm.cloudprovider import TargetHealth, default_load_balancer_name
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.server import DataPlane
from kccm.testing.conformance import make_node, make_service

SERVICE = make_service("web")
NAME = default_load_balancer_name(SERVICE)


async def _health_server_stops(world: World) -> None:
    await world.health_down("n2")


async def _backend_server_stops(world: World) -> None:
    for server in world.nodes["n2"].servers:
        server.close()
    await world.nodes["n2"].close_connections()


async def _nothing(world: World) -> None:
    pass


def _reads(cloud: LocalCloud) -> dict[str, int]:
    return dict(cloud.cloud_api_calls().snapshot().reads)


@pytest.mark.parametrize(
    ("health", "stop", "n2"),
    [
        pytest.param(None, _nothing, "healthy", id="all-healthy"),
        pytest.param(None, _health_server_stops, "unhealthy", id="node-port-health-stops"),
        pytest.param(
            {"mode": "tcp", "port": 0, "path": ""},
            _backend_server_stops,
            "unhealthy",
            id="tcp-backend-stops",
        ),
    ],
)
async def test_targets_show_the_health_checkers_verdicts(
    world: World,
    plane: DataPlane,
    health: dict[str, Any] | None,
    stop: Callable[[World], Awaitable[None]],
    n2: str,
) -> None:
    world.put_lb(NAME, health=health, udp=False)
    await until_listening(plane, 1)
    await all_checked(plane, NAME)
    await stop(world)
    if n2 == "unhealthy":
        await asyncio.wait_for(
            plane.health.wait_for(lambda: not plane.health.usable(NAME, "n2")), WAIT
        )
    await plane.flush()
    cloud = LocalCloud(world.store, load_local_config(None))
    view = cloud.describe_load_balancer("kubernetes", SERVICE)
    assert view is not None
    assert view.state == "serving"
    assert view.detail["vip"] == world.vip
    (listener,) = view.listeners
    assert (listener.port, listener.protocol) == (world.tcp_port, "TCP")
    got = {t.node: (str(t.health), t.address, t.port) for t in listener.targets}
    want = {n: ("healthy", world.nodes[n].address, world.node_port) for n in NODES}
    want["n2"] = (n2, world.nodes["n2"].address, world.node_port)
    assert got == want
    (target,) = [t for t in listener.targets if t.node == "n2"]
    assert bool(target.detail) is (n2 == "unhealthy"), target.detail
    assert _reads(cloud) == {"describe_backends": 1}, "one read of the state file"


async def test_without_a_data_plane_every_backend_is_unknown(world: World) -> None:
    world.put_lb(NAME, udp=False)
    cloud = LocalCloud(world.store, load_local_config(None), dataplane_probe=lambda path, now: None)
    view = cloud.describe_load_balancer("kubernetes", SERVICE)
    assert view is not None
    assert view.state == "no-dataplane"
    assert {t.health for lst in view.listeners for t in lst.targets} == {TargetHealth.UNKNOWN}


async def test_no_balancer_and_instances(world: World) -> None:
    cloud = LocalCloud(world.store, load_local_config(None))
    assert cloud.describe_load_balancer("kubernetes", make_service("other")) is None
    ghost = cloud.describe_instance(make_node("ghost"))
    assert ghost is not None
    assert ghost.exists is False
