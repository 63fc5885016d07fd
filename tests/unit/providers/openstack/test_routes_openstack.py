"""Routes on the emulator's router1: extraroute-atomic and the PUT fallback, the port's
allowed_address_pairs, OCCM's rollback when a later step fails, blackholes, and next hops
resolved after a restart."""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest
from os_core_world import World

from kccm.cloudprovider import CloudProviderError, NodeAddress, Route
from kccm.providers.openstack import OpenStackCloud
from kccm.providers.openstack.api import OpenStackAPIError
from kccm.providers.openstack.routes import NeutronRoutes, NodeDirectory, Unwinder

CIDR = "10.244.1.0/24"
CIDR6 = "fd10:244:1::/64"


def fixed(server: dict[str, Any], version: int = 4) -> str:
    return str(
        next(
            a["addr"]
            for a in server["addresses"]["private"]
            if a["OS-EXT-IPS:type"] == "fixed" and a["version"] == version
        )
    )


def route_to(server: dict[str, Any], cidr: str = CIDR) -> Route:
    addresses = [
        NodeAddress("InternalIP", fixed(server)),
        NodeAddress("InternalIP", fixed(server, 6)),
    ]
    return Route(target_node=server["name"], destination_cidr=cidr, target_node_addresses=addresses)


def router_routes(cloud: OpenStackCloud) -> list[dict[str, str]]:
    router = cloud.api.request(
        "network", "GET", f"/v2.0/routers/{cloud.config.route.router_id}", operation="get_router"
    )
    return list(router["router"]["routes"])


def pairs_of(cloud: OpenStackCloud, server: dict[str, Any]) -> list[str]:
    ports = cloud.api.paged(
        "network", "/v2.0/ports", "ports", {"device_id": server["id"]}, operation="list_ports"
    )
    return sorted(p["ip_address"] for port in ports for p in port["allowed_address_pairs"])


@pytest.fixture(params=[True, False], ids=["atomic", "put-fallback"])
def routes(request: pytest.FixtureRequest, cloud: OpenStackCloud) -> NeutronRoutes:
    built = cloud.routes()
    assert isinstance(built, NeutronRoutes)
    assert built.atomic  # the emulator has both extensions
    assert built.allowed_address_pairs
    built.atomic = bool(request.param)
    return built


def _writes(world: World, since: int) -> list[str]:
    return [r["path"].rsplit("/", 1)[-1] for r in world.admin.mutating(since)]


def test_create_list_delete(world: World, cloud: OpenStackCloud, routes: NeutronRoutes) -> None:
    server = world.server("route-1")
    since = world.admin.last_seq()
    routes.create_route("c", "uid", route_to(server))
    assert {"destination": CIDR, "nexthop": fixed(server)} in router_routes(cloud)
    assert pairs_of(cloud, server) == [CIDR]
    writes = _writes(world, since)
    router_write = "add_extraroutes" if routes.atomic else cloud.config.route.router_id
    assert writes == [router_write, writes[-1]]  # the router, then the port
    listed = [r for r in routes.list_routes("c") if r.destination_cidr == CIDR]
    assert listed == [Route(name=CIDR, target_node="route-1", destination_cidr=CIDR)]
    routes.delete_route("c", listed[0])
    assert all(r["destination"] != CIDR for r in router_routes(cloud))
    assert pairs_of(cloud, server) == []


def test_an_ipv6_cidr_goes_via_the_ipv6_address(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-v6")
    routes.create_route("c", "uid", route_to(server, CIDR6))
    assert {"destination": CIDR6, "nexthop": fixed(server, 6)} in router_routes(cloud)
    routes.delete_route("c", route_to(server, CIDR6))
    assert all(r["destination"] != CIDR6 for r in router_routes(cloud))


def test_a_failed_port_update_rolls_the_route_back(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-rollback")
    before = router_routes(cloud)
    world.admin.fault("network", "PUT", r"/v2\.0/ports/", status=500)
    with pytest.raises(OpenStackAPIError):
        routes.create_route("c", "uid", route_to(server))
    assert router_routes(cloud) == before
    assert pairs_of(cloud, server) == []


def test_a_node_whose_port_is_not_found_is_rolled_back(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-noport")
    before = router_routes(cloud)
    wrong = Route(
        target_node="route-noport",
        destination_cidr=CIDR,
        target_node_addresses=[NodeAddress("InternalIP", "10.0.0.250")],
    )
    with pytest.raises(CloudProviderError, match=r"no port with fixed IP 10\.0\.0\.250"):
        routes.create_route("c", "uid", wrong)
    assert router_routes(cloud) == before
    assert pairs_of(cloud, server) == []


def test_a_failed_route_write_changes_nothing(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-fail")
    since = world.admin.last_seq()
    world.admin.fault("network", "PUT", r"/v2\.0/routers/", status=500)
    with pytest.raises(OpenStackAPIError):
        routes.create_route("c", "uid", route_to(server))
    assert len(world.admin.mutating(since)) == 1  # the failed write only, no port update
    assert pairs_of(cloud, server) == []


def test_a_failed_pair_removal_puts_the_route_back(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-undelete")
    routes.create_route("c", "uid", route_to(server))
    with_route = router_routes(cloud)
    world.admin.fault("network", "PUT", r"/v2\.0/ports/", status=500)
    with pytest.raises(OpenStackAPIError):
        routes.delete_route("c", route_to(server))
    assert sorted(map(str, router_routes(cloud))) == sorted(map(str, with_route))
    world.admin.clear_faults()
    routes.delete_route("c", route_to(server))
    assert pairs_of(cloud, server) == []


def test_a_next_hop_of_no_server_is_a_blackhole(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    cloud.api.request(
        "network",
        "PUT",
        f"/v2.0/routers/{routes.router_id}/add_extraroutes",
        json={"router": {"routes": [{"destination": CIDR, "nexthop": "10.0.0.251"}]}},
        operation="add_extraroutes",
    )
    listed = [r for r in routes.list_routes("c") if r.destination_cidr == CIDR]
    assert listed == [
        Route(name=CIDR, target_node="10.0.0.251", destination_cidr=CIDR, blackhole=True)
    ]
    since = world.admin.last_seq()
    routes.delete_route("c", listed[0])
    assert all(r["destination"] != CIDR for r in router_routes(cloud))
    assert not any("/ports/" in r["path"] for r in world.admin.mutating(since))


def test_a_restarted_provider_names_the_next_hops_by_their_server(
    world: World, cloud: OpenStackCloud, make_cloud: Any, routes: NeutronRoutes
) -> None:
    server = world.server("route-restart")
    routes.create_route("c", "uid", route_to(server))
    fresh = make_cloud().routes()
    assert fresh is not None
    listed = [r for r in fresh.list_routes("c") if r.destination_cidr == CIDR]
    assert listed == [Route(name=CIDR, target_node="route-restart", destination_cidr=CIDR)]
    since = world.admin.last_seq()
    fresh.list_routes("c")  # resolved once: no second server listing
    assert not any(r["path"].endswith("/servers/detail") for r in world.admin.requests(since))
    fresh.delete_route("c", listed[0])
    assert pairs_of(cloud, server) == []


def test_an_existing_route_is_not_written_again(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    routes.atomic = False
    server = world.server("route-again")
    routes.create_route("c", "uid", route_to(server))
    since = world.admin.last_seq()
    routes.create_route("c", "uid", route_to(server))
    assert world.admin.mutating(since) == []
    routes.delete_route("c", route_to(server))


def test_routes_need_a_router_id(make_cloud: Any) -> None:
    assert make_cloud({"Route": {"router-id": None}}).routes() is None


def test_a_node_without_an_internal_ip_or_server_is_an_error(routes: NeutronRoutes) -> None:
    with pytest.raises(CloudProviderError, match="no InternalIP address found for node n"):
        routes.create_route("c", "uid", Route(target_node="n", destination_cidr=CIDR))


def test_without_node_addresses_the_servers_fixed_address_is_the_next_hop(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-bare")
    routes.create_route("c", "uid", Route(target_node="route-bare", destination_cidr=CIDR))
    assert {"destination": CIDR, "nexthop": fixed(server)} in router_routes(cloud)
    routes.delete_route("c", Route(target_node="route-bare", destination_cidr=CIDR))
    assert pairs_of(cloud, server) == []


def test_the_unwinder_runs_in_reverse_order() -> None:
    done: list[int] = []
    unwinder = Unwinder()
    for step in (1, 2, 3):
        unwinder.push(lambda step=step: done.append(step))  # type: ignore[misc]
    unwinder.unwind()
    assert done == [3, 2, 1]


# -- next hops named by the Nodes (OCCM's Node informer) -----------------------------------------


class _Nodes:
    """A Kubernetes client's ``list`` of Nodes; counts the listings."""

    def __init__(self, nodes: dict[str, list[str]]) -> None:
        self.nodes = nodes
        self.listings = 0

    async def list(self, resource: Any) -> Any:
        self.listings += 1
        items = [
            {
                "metadata": {"name": name},
                "status": {"addresses": [{"type": "InternalIP", "address": a} for a in addrs]},
            }
            for name, addrs in self.nodes.items()
        ]
        return types.SimpleNamespace(items=items)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop in a thread, as the daemon's loop is to the provider's worker threads."""
    running = asyncio.new_event_loop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    yield running
    running.call_soon_threadsafe(running.stop)
    thread.join()
    running.close()


def test_next_hops_are_named_by_the_node_that_has_the_address(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes, loop: asyncio.AbstractEventLoop
) -> None:
    server = world.server("route-dir")
    routes.create_route("c", "uid", route_to(server))
    nodes, clock = _Nodes({"node-a.cluster.local": [fixed(server)]}), _Clock()
    fresh = NeutronRoutes(
        routes.api,
        routes.instances,
        routes.router_id,
        atomic=routes.atomic,
        allowed_address_pairs=True,
    )
    fresh.directory = NodeDirectory(nodes, loop, clock)  # type: ignore[arg-type]
    listed = [r for r in fresh.list_routes("c") if r.destination_cidr == CIDR]
    assert listed == [Route(name=CIDR, target_node="node-a.cluster.local", destination_cidr=CIDR)]
    assert nodes.listings == 1
    nodes.nodes = {}  # the Node is deleted: the next hop has no Node, as OCCM a blackhole
    clock.now += 30.0
    fresh.list_routes("c")
    assert nodes.listings == 1  # known next hops: no listing before NODE_LIST_MAX_AGE
    clock.now += 300.0
    listed = [r for r in fresh.list_routes("c") if r.destination_cidr == CIDR]
    assert nodes.listings == 2
    assert listed == [
        Route(name=CIDR, target_node=fixed(server), destination_cidr=CIDR, blackhole=True)
    ]
    fresh.delete_route("c", listed[0])
    assert all(r["destination"] != CIDR for r in router_routes(cloud))
    routes.create_route("c", "uid", route_to(server))  # a blackhole leaves the port's pair:
    routes.delete_route("c", route_to(server))  # remove it through a normal delete
    assert pairs_of(cloud, server) == []


def test_a_created_route_needs_no_node_listing(
    world: World, routes: NeutronRoutes, loop: asyncio.AbstractEventLoop
) -> None:
    server = world.server("route-learn")
    nodes = _Nodes({})
    routes.directory = NodeDirectory(nodes, loop, _Clock())  # type: ignore[arg-type]
    routes.list_routes("c")
    assert nodes.listings == 1  # at start
    routes.create_route("c", "uid", route_to(server))
    listed = [r for r in routes.list_routes("c") if r.destination_cidr == CIDR]
    assert listed == [Route(name=CIDR, target_node="route-learn", destination_cidr=CIDR)]
    assert nodes.listings == 1
    routes.delete_route("c", listed[0])


def test_initialize_gives_the_routes_a_node_directory(cloud: OpenStackCloud) -> None:
    class Builder:
        def client(self, name: str) -> str:
            return f"client:{name}"

        def config(self, name: str) -> None:
            return None

    asyncio.run(cloud.initialize(Builder(), asyncio.Event()))
    routes = cloud.routes()
    assert isinstance(routes, NeutronRoutes)
    assert routes.directory is not None


def test_deleting_a_route_whose_server_is_gone_leaves_it_deleted(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes
) -> None:
    server = world.server("route-gone")
    routes.create_route("c", "uid", route_to(server))
    world.delete(server["id"])
    routes.delete_route("c", route_to(server))
    assert all(r["destination"] != CIDR for r in router_routes(cloud))


def test_a_port_without_a_port_security_field_gets_no_pair(
    world: World, cloud: OpenStackCloud, routes: NeutronRoutes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without Neutron's ``port-security`` extension a port has no ``port_security_enabled``;
    OCCM's ``PortWithPortSecurity`` reads it as false and skips the pair: so does kccm."""
    server = world.server("route-no-port-security")
    found = routes._port_by_ip

    def without_the_field(address: str) -> dict[str, Any]:
        port = found(address)
        port.pop("port_security_enabled", None)
        return port

    monkeypatch.setattr(routes, "_port_by_ip", without_the_field)
    since = world.admin.last_seq()
    routes.create_route("c", "uid", route_to(server))
    assert {"destination": CIDR, "nexthop": fixed(server)} in router_routes(cloud)
    assert pairs_of(cloud, server) == []
    assert not [w for w in world.admin.mutating(since) if "/ports/" in w["path"]]
    routes.delete_route("c", route_to(server))
    assert all(r["destination"] != CIDR for r in router_routes(cloud))
