"""Routes in the VPC's route tables as upstream keeps them (pkg/controller/route v2.14.0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from ali_stub import StubRPC

from kccm.cloudprovider import CloudProviderError, Route
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.errors import api_error
from kccm.providers.alibabacloud.routes import NodeDirectory, Tables, VpcRoutes

NODES = [
    {"metadata": {"name": "node-a"}, "spec": {"providerID": "cn-hangzhou.i-a"}},
    {"metadata": {"name": "node-b"}, "spec": {"providerID": "alicloud://cn-hangzhou.i-b"}},
    {"metadata": {"name": "pending"}, "spec": {}},
]


class VpcWorld:
    """Route tables with entries ``(cidr, instance, type, hop type)``."""

    def __init__(self, tables: dict[str, list[tuple[str, str]]], listed: list[str]) -> None:
        self.tables = tables
        self.listed = listed

    def entries(self, params: Mapping[str, Any]) -> dict[str, Any]:
        rows = self.tables[params["RouteTableId"]]
        entries = [
            {
                "DestinationCidrBlock": cidr,
                "Type": "Custom",
                "NextHops": {"NextHop": [{"NextHopType": "Instance", "NextHopId": hop}]},
            }
            for cidr, hop in rows
        ]
        entries.append(
            {
                "DestinationCidrBlock": "0.0.0.0/0",
                "Type": "Custom",
                "NextHops": {"NextHop": [{"NextHopType": "Instance", "NextHopId": "i-nat"}]},
            }
        )
        entries.append(
            {
                "DestinationCidrBlock": "10.0.0.0/24",
                "Type": "System",
                "NextHops": {"NextHop": [{"NextHopType": "local", "NextHopId": ""}]},
            }
        )
        return {"RouteEntrys": {"RouteEntry": entries}, "NextToken": ""}

    def create(self, params: Mapping[str, Any]) -> dict[str, Any]:
        rows = self.tables[params["RouteTableId"]]
        if any(cidr == params["DestinationCidrBlock"] for cidr, _ in rows):
            raise api_error(400, {"Code": "InvalidCIDRBlock.Duplicate"}, "vpc:CreateRouteEntry")
        rows.append((params["DestinationCidrBlock"], params["NextHopId"]))
        return {"RequestId": "r"}

    def delete(self, params: Mapping[str, Any]) -> dict[str, Any]:
        rows = self.tables[params["RouteTableId"]]
        wanted = (params["DestinationCidrBlock"], params["NextHopId"])
        if wanted not in rows:
            raise api_error(404, {"Code": "InvalidRouteEntry.NotFound"}, "vpc:DeleteRouteEntry")
        rows.remove(wanted)
        return {"RequestId": "r"}

    def routes(self, config_text: str = "Global: {}\n") -> tuple[VpcRoutes, StubRPC]:
        rpc = StubRPC(
            {
                "vpc:DescribeRouteTableList": lambda p: {
                    "RouterTableList": {
                        "RouterTableListType": [{"RouteTableId": t} for t in self.listed]
                    }
                },
                "vpc:DescribeRouteEntryList": self.entries,
                "vpc:CreateRouteEntry": self.create,
                "vpc:DeleteRouteEntry": self.delete,
            }
        )
        config = load_alibaba_config(config_text)
        routes = VpcRoutes(Tables(rpc, config, "vpc-1"), "cn-hangzhou")  # type: ignore[arg-type]
        routes.directory = NodeDirectory(lambda: NODES)
        return routes, rpc


def test_list_keeps_custom_instance_routes_named_as_upstream() -> None:
    world = VpcWorld({"vtb-1": [("172.16.0.0/24", "i-a"), ("172.16.9.0/24", "i-old")]}, ["vtb-1"])
    routes, rpc = world.routes()
    listed = routes.list_routes("kubernetes")
    assert listed == [
        Route(
            name="cn-hangzhou.i-a-172.16.0.0/24",
            target_node="node-a",
            destination_cidr="172.16.0.0/24",
        ),
        Route(
            name="cn-hangzhou.i-old-172.16.9.0/24",
            target_node="cn-hangzhou.i-old",
            destination_cidr="172.16.9.0/24",
        ),
    ]
    sent = rpc.calls[1][1]
    assert (sent["RouteEntryType"], sent["NextHopType"], sent["MaxResult"]) == (
        "Custom",
        "Instance",
        "500",
    )
    assert rpc.calls[0] == ("vpc:DescribeRouteTableList", {"VpcId": "vpc-1"})


def test_create_and_delete_in_every_configured_table() -> None:
    world = VpcWorld({"vtb-1": [], "vtb-2": [("172.16.1.0/24", "i-b")]}, [])
    routes, rpc = world.routes("Global:\n  routeTableIDs: vtb-1,vtb-2\n")
    assert routes.list_routes("k") == []  # node-b's route is missing from vtb-1
    routes.create_route("k", "uid", Route(target_node="node-b", destination_cidr="172.16.1.0/24"))
    assert world.tables == {
        "vtb-1": [("172.16.1.0/24", "i-b")],
        "vtb-2": [("172.16.1.0/24", "i-b")],
    }
    assert rpc.actions().count("vpc:CreateRouteEntry") == 1
    assert "vpc:DescribeRouteTableList" not in rpc.actions()
    [listed] = routes.list_routes("k")
    routes.delete_route("k", listed)
    routes.delete_route("k", listed)  # already gone: InvalidRouteEntry.NotFound is success
    assert world.tables == {"vtb-1": [], "vtb-2": []}


def test_a_duplicate_cidr_with_another_next_hop_fails() -> None:
    world = VpcWorld({"vtb-1": [("172.16.0.0/24", "i-other")]}, ["vtb-1"])
    routes, _ = world.routes()
    with pytest.raises(CloudProviderError, match="Duplicate"):
        routes.create_route(
            "k", "uid", Route(target_node="node-a", destination_cidr="172.16.0.0/24")
        )


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        pytest.param([], "no route tables", id="none"),
        pytest.param(["vtb-1", "vtb-2"], "multiple route tables", id="several"),
    ],
)
def test_the_vpc_must_have_one_route_table(listed: list[str], message: str) -> None:
    world = VpcWorld({t: [] for t in listed}, listed)
    routes, _ = world.routes()
    with pytest.raises(CloudProviderError, match=message):
        routes.list_routes("k")


def test_a_node_without_provider_id_gets_no_route() -> None:
    world = VpcWorld({"vtb-1": []}, ["vtb-1"])
    routes, rpc = world.routes()
    with pytest.raises(CloudProviderError, match="no providerID"):
        routes.create_route(
            "k", "uid", Route(target_node="pending", destination_cidr="172.16.5.0/24")
        )
    assert "vpc:CreateRouteEntry" not in rpc.actions()
