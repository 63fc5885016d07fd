"""Routes on the emulator's route table as upstream v1.36.5 names and writes them: the name
``<node>____<cidr>``, the next hop of the CIDR's family, one read-compare-write PUT (an
unchanged route is no write), concurrent operations gathered into one PUT, a missing table
created, the old single-stack route replaced, a delete that removes the node's routes only,
and unmanaged Nodes kept in memory."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from az_core_world import make_cloud, start_emulator

from kccm.cloudprovider import InstanceNotFound, Route
from kccm.providers.azure.provider import AzureCloud
from kccm.providers.azure.routes import AzureRoutes, node_of_route, route_name


@pytest.fixture(scope="module")
def emu() -> Iterator[Any]:
    yield from start_emulator()


@pytest.fixture(scope="module")
def cloud(emu: Any, tmp_path_factory: pytest.TempPathFactory) -> AzureCloud:
    return make_cloud(emu, tmp_path_factory.mktemp("routes"), vmType="vmss")


@pytest.fixture
def routes(emu: Any, cloud: AzureCloud) -> Iterator[AzureRoutes]:
    found = cloud.routes()
    assert isinstance(found, AzureRoutes)
    baseline = emu.state()
    made = [emu.admin.add_vm(f"rt-node-{i}") for i in range(3)]
    yield found
    emu.clear_faults()
    for route in found.list_routes("k"):
        found.delete_route("k", route)
    for vm in made:
        emu.admin.delete_vm(vm["id"])
    emu.assert_clean(baseline)


def _table(emu: Any) -> dict[str, Any]:
    conf = emu.config
    return dict(
        emu.admin.resource(
            f"/subscriptions/{conf['subscription']}/resourceGroups/kccm-rg/providers/"
            "Microsoft.Network/routeTables/kccm-rt"
        )
    )


def _writes(emu: Any, since: int) -> list[str]:
    return [
        f"{r['method']} {r['path'].rsplit('/', 1)[-1]}"
        for r in emu.admin.mutating(since)
        if "/_emu" not in r["path"]
    ]


@pytest.mark.parametrize(
    ("node", "cidr", "name"),
    [
        pytest.param("node-0", "10.244.1.0/24", "node-0____102441024", id="ipv4"),
        pytest.param("node-0", "fd00:10:244:1::/64", "node-0____fd0010244164", id="ipv6"),
        pytest.param("a____b", "10.0.0.0/8", "a____b____100008", id="separator-in-name"),
    ],
)
def test_route_names_as_upstream(node: str, cidr: str, name: str) -> None:
    assert route_name(node, cidr) == name
    assert node_of_route(name) == node.split("____")[0]


def test_create_list_delete(emu: Any, routes: AzureRoutes) -> None:
    since = emu.admin.last_seq()
    routes.create_route(
        "k", "uid", Route(target_node="rt-node-0", destination_cidr="10.244.0.0/24")
    )
    assert _writes(emu, since) == ["PUT kccm-rt"]
    (route,) = _table(emu)["properties"]["routes"]
    assert route["name"] == "rt-node-0____102440024"
    assert route["properties"]["nextHopType"] == "VirtualAppliance"
    assert route["properties"]["nextHopIpAddress"].startswith("10.240.")
    listed = routes.list_routes("k")
    assert [(r.target_node, r.destination_cidr) for r in listed] == [("rt-node-0", "10.244.0.0/24")]

    since = emu.admin.last_seq()
    routes.create_route(
        "k", "uid", Route(target_node="rt-node-0", destination_cidr="10.244.0.0/24")
    )
    assert _writes(emu, since) == []  # unchanged: no write

    routes.delete_route("k", listed[0])
    assert routes.list_routes("k") == []


def test_concurrent_creates_all_land(emu: Any, routes: AzureRoutes) -> None:
    wanted = [
        Route(target_node=f"rt-node-{i}", destination_cidr=f"10.244.{i}.0/24") for i in range(3)
    ]
    since = emu.admin.last_seq()
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda r: routes.create_route("k", "", r), wanted))
    assert {(r.target_node, r.destination_cidr) for r in routes.list_routes("k")} == {
        (r.target_node, r.destination_cidr) for r in wanted
    }
    assert 1 <= len(_writes(emu, since)) <= 3


def test_drift_is_repaired_and_other_nodes_are_kept(emu: Any, routes: AzureRoutes) -> None:
    """A wrong next hop is corrected; the node's old single-stack route goes; another node's
    route whose name starts like this node's (``rt-node-1`` / ``rt-node-10``) stays."""
    routes.create_route("k", "", Route(target_node="rt-node-1", destination_cidr="10.244.1.0/24"))

    def tamper(table: dict[str, Any]) -> dict[str, Any]:
        table["properties"]["routes"][0]["properties"]["nextHopIpAddress"] = "10.9.9.9"
        table["properties"]["routes"].append(
            {
                "name": "rt-node-1",
                "properties": {"addressPrefix": "10.1.0.0/24", "nextHopType": "None"},
            }
        )
        table["properties"]["routes"].append(
            {
                "name": "rt-node-10____1024410024",
                "properties": {"addressPrefix": "10.244.10.0/24", "nextHopType": "None"},
            }
        )
        return table

    routes.arm.update(routes.path, routes.versions.route_tables, tamper, operation="tamper")
    routes.create_route("k", "", Route(target_node="rt-node-1", destination_cidr="10.244.1.0/24"))
    names = {r["name"]: r["properties"] for r in _table(emu)["properties"]["routes"]}
    assert set(names) == {"rt-node-1____102441024", "rt-node-10____1024410024"}
    assert names["rt-node-1____102441024"]["nextHopIpAddress"] != "10.9.9.9"
    routes.delete_route("k", Route(target_node="rt-node-1", destination_cidr="10.244.1.0/24"))
    assert [r.name for r in routes.list_routes("k")] == ["rt-node-10____1024410024"]


def test_a_missing_route_table_is_created(emu: Any, tmp_path: Path, routes: AzureRoutes) -> None:
    cloud = make_cloud(emu, tmp_path, routeTableName="kccm-rt-new")
    fresh = cloud.routes()
    assert isinstance(fresh, AzureRoutes)
    assert fresh.list_routes("k") == []
    fresh.create_route("k", "", Route(target_node="rt-node-2", destination_cidr="10.244.2.0/24"))
    assert [r.target_node for r in fresh.list_routes("k")] == ["rt-node-2"]
    fresh.delete_route("k", fresh.list_routes("k")[0])
    fresh.arm.delete(fresh.path, fresh.versions.route_tables, operation="cleanup")


def test_a_node_without_a_machine_is_refused(routes: AzureRoutes) -> None:
    with pytest.raises(InstanceNotFound):
        routes.create_route("k", "", Route(target_node="ghost", destination_cidr="10.244.9.0/24"))


def test_unmanaged_nodes_are_remembered_not_written(emu: Any, routes: AzureRoutes) -> None:
    routes._is_unmanaged = lambda name: name == "on-prem"
    since = emu.admin.last_seq()
    route = Route(target_node="on-prem", destination_cidr="10.244.7.0/24")
    routes.create_route("k", "", route)
    assert [(r.target_node, r.destination_cidr) for r in routes.list_routes("k")] == [
        ("on-prem", "10.244.7.0/24")
    ]
    routes.delete_route("k", route)
    assert routes.list_routes("k") == []
    assert _writes(emu, since) == []


def test_a_failed_put_fails_every_waiting_operation(emu: Any, routes: AzureRoutes) -> None:
    emu.admin.fault("/routeTables/kccm-rt", method="PUT", status=500, code="Internal", times=0)
    with pytest.raises(Exception, match="500"):
        routes.create_route(
            "k", "", Route(target_node="rt-node-0", destination_cidr="10.244.0.0/24")
        )
