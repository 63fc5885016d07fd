"""Neutron as the emulator answers it (neutron/api/v2/base.py, neutron/db/*, neutron-lib)."""

from __future__ import annotations

from typing import Any

import pytest
from emu_api import NET, Api

from kccm.emulators.openstack.admin import add_server


def err(kind: str, message: str) -> dict[str, Any]:
    return {"NeutronError": {"type": kind, "message": message, "detail": ""}}


@pytest.fixture
def node(api: Api) -> dict[str, Any]:
    server = add_server(api.world, {"name": "node-1"})
    port = next(p for p in api.world.ports.values() if p["device_id"] == server["id"])
    return {"server": server, "port": port}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("fixed_ips=ip_address%3D10.0.0.2", 1, id="by-ip"),
        pytest.param("fixed_ips=ip_address%3D10.0.0.250", 0, id="by-unknown-ip"),
        pytest.param("fixed_ips=subnet_id%3D<private4>", 2, id="by-subnet"),
        pytest.param(
            "fixed_ips=subnet_id%3D<private4>&fixed_ips=ip_address%3D10.0.0.2",
            1,
            id="ip-and-subnet",
        ),
        pytest.param("fixed_ips=ip_address_substr%3D10.0.0", 2, id="substring"),
        pytest.param("device_owner=compute:nova", 1, id="device-owner"),
        pytest.param("device_id=<server>", 1, id="device-id"),
        pytest.param("network_id=<public>", 1, id="network"),
        pytest.param(
            "device_owner=network:router_interface&device_owner=compute:nova",
            3,
            id="repeated-key-is-any",
        ),
    ],
)
async def test_port_filters(api: Api, node: dict[str, Any], query: str, expected: int) -> None:
    query = (
        query.replace("<private4>", api.cfg["private_subnet_id"])
        .replace("<server>", node["server"]["id"])
        .replace("<public>", api.cfg["public_network_id"])
    )
    assert len((await api.ok("GET", f"{NET}/ports?{query}"))["ports"]) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("router:external=True", ["public"], id="external-True"),
        pytest.param("router:external=true", ["public"], id="external-true"),
        pytest.param("router:external=False", ["private"], id="internal"),
        pytest.param("name=private", ["private"], id="name"),
        pytest.param("fields=id&fields=name", ["public", "private"], id="fields"),
    ],
)
async def test_network_filters(api: Api, query: str, expected: list[str]) -> None:
    found = (await api.ok("GET", f"{NET}/networks?{query}"))["networks"]
    assert [n["name"] for n in found] == expected
    if query.startswith("fields"):
        assert all(set(n) == {"id", "name"} for n in found)


async def test_tags_and_tag_filters(api: Api) -> None:
    net = api.cfg["private_network_id"]
    await api.ok("PUT", f"{NET}/networks/{net}/tags", {"tags": ["b", "a"]})
    assert (await api.ok("GET", f"{NET}/networks/{net}/tags"))["tags"] == ["a", "b"]
    assert (await api.call("PUT", f"{NET}/networks/{net}/tags/c"))[0] == 201
    for query, count in (
        ("tags=a,c", 1),
        ("tags=a,z", 0),
        ("tags-any=z,c", 1),
        ("not-tags=a,b", 1),
        ("not-tags-any=a", 1),
    ):
        assert len((await api.ok("GET", f"{NET}/networks?{query}"))["networks"]) == count, query
    status, body = await api.call("DELETE", f"{NET}/networks/{net}/tags/zz")
    assert (status, body["NeutronError"]["type"]) == (404, "TagNotFound")
    assert (await api.call("DELETE", f"{NET}/networks/{net}/tags"))[0] == 204


async def test_allowed_address_pairs(api: Api, node: dict[str, Any]) -> None:
    port = node["port"]
    body = {"port": {"allowed_address_pairs": [{"ip_address": "10.244.1.0/24"}]}}
    found = (await api.ok("PUT", f"{NET}/ports/{port['id']}", body))["port"]
    assert found["allowed_address_pairs"] == [
        {"ip_address": "10.244.1.0/24", "mac_address": port["mac_address"]}
    ]
    assert found["revision_number"] == 1
    twice = {"port": {"allowed_address_pairs": [{"ip_address": "10.1.0.0/24"}] * 2}}
    status, body = await api.call("PUT", f"{NET}/ports/{port['id']}", twice)
    assert (status, body["NeutronError"]["type"]) == (400, "DuplicateAddressPairInRequest")
    status, body = await api.call("PUT", f"{NET}/ports/{port['id']}", {"port": {"id": "x"}})
    assert status == 400


@pytest.mark.parametrize(
    ("path", "kind", "message"),
    [
        pytest.param("/ports/x", "PortNotFound", "Port x could not be found.", id="port"),
        pytest.param(
            "/networks/x", "NetworkNotFound", "Network x could not be found.", id="network"
        ),
        pytest.param("/subnets/x", "SubnetNotFound", "Subnet x could not be found.", id="subnet"),
        pytest.param(
            "/floatingips/x", "FloatingIPNotFound", "Floating IP x could not be found", id="fip"
        ),
        pytest.param("/routers/x", "RouterNotFound", "Router x could not be found", id="router"),
        pytest.param(
            "/security-groups/x",
            "SecurityGroupNotFound",
            "Security group x does not exist",
            id="sg",
        ),
        pytest.param(
            "/security-group-rules/x",
            "SecurityGroupRuleNotFound",
            "Security group rule x does not exist",
            id="rule",
        ),
    ],
)
async def test_not_found_bodies(api: Api, path: str, kind: str, message: str) -> None:
    status, body = await api.call("GET", NET + path)
    assert (status, body) == (404, err(kind, message))


async def test_floating_ip_lifecycle(api: Api, node: dict[str, Any]) -> None:
    public, port = api.cfg["public_network_id"], node["port"]
    fip = (
        await api.ok(
            "POST",
            f"{NET}/floatingips",
            {"floatingip": {"floating_network_id": public, "description": "kccm"}},
        )
    )["floatingip"]
    assert (fip["status"], fip["port_id"]) == ("DOWN", None)
    found = (
        await api.ok(
            "PUT", f"{NET}/floatingips/{fip['id']}", {"floatingip": {"port_id": port["id"]}}
        )
    )["floatingip"]
    assert (found["fixed_ip_address"], found["status"]) == ("10.0.0.2", "ACTIVE")
    assert found["router_id"] == api.cfg["router_id"]
    query = f"port_id={port['id']}&floating_network_id={public}&description=kccm"
    assert [
        f["id"] for f in (await api.ok("GET", f"{NET}/floatingips?{query}"))["floatingips"]
    ] == [fip["id"]]
    second = {"floatingip": {"floating_network_id": public, "port_id": port["id"]}}
    status, body = await api.call("POST", f"{NET}/floatingips", second)
    assert (status, body["NeutronError"]["type"]) == (409, "FloatingIPPortAlreadyAssociated")
    taken = {
        "floatingip": {
            "floating_network_id": public,
            "floating_ip_address": fip["floating_ip_address"],
        }
    }
    status, body = await api.call("POST", f"{NET}/floatingips", taken)
    assert (status, body["NeutronError"]["type"]) == (409, "IpAddressAlreadyAllocated")
    await api.ok("PUT", f"{NET}/floatingips/{fip['id']}", {"floatingip": {"port_id": None}})
    assert (await api.call("DELETE", f"{NET}/floatingips/{fip['id']}"))[0] == 204


async def test_floating_ip_needs_an_external_network(api: Api) -> None:
    body = {"floatingip": {"floating_network_id": api.cfg["private_network_id"]}}
    status, found = await api.call("POST", f"{NET}/floatingips", body)
    assert status == 400
    assert "is not a valid external network" in found["NeutronError"]["message"]


async def test_security_groups_and_rules(api: Api, node: dict[str, Any]) -> None:
    sg = (await api.ok("POST", f"{NET}/security-groups", {"security_group": {"name": "lb-sg"}}))[
        "security_group"
    ]
    assert {r["direction"] for r in sg["security_group_rules"]} == {"egress"}
    rule = {
        "security_group_id": sg["id"],
        "direction": "ingress",
        "protocol": "tcp",
        "port_range_min": 30000,
        "port_range_max": 30000,
        "remote_ip_prefix": "10.0.0.0/24",
        "ethertype": "IPv4",
    }
    made = (await api.ok("POST", f"{NET}/security-group-rules", {"security_group_rule": rule}))[
        "security_group_rule"
    ]
    status, body = await api.call(
        "POST", f"{NET}/security-group-rules", {"security_group_rule": rule}
    )
    assert (status, body["NeutronError"]["message"]) == (
        409,
        f"Security group rule already exists. Rule id is {made['id']}.",
    )
    v6 = {**rule, "remote_ip_prefix": "fd00::/64"}
    status, body = await api.call(
        "POST", f"{NET}/security-group-rules", {"security_group_rule": v6}
    )
    assert (status, body["NeutronError"]["type"]) == (400, "SecurityGroupRuleParameterConflict")
    rules = await api.ok("GET", f"{NET}/security-group-rules?security_group_id={sg['id']}")
    assert len(rules["security_group_rules"]) == 3
    await api.ok(
        "PUT", f"{NET}/ports/{node['port']['id']}", {"port": {"security_groups": [sg["id"]]}}
    )
    status, body = await api.call("DELETE", f"{NET}/security-groups/{sg['id']}")
    assert (status, body) == (409, err("SecurityGroupInUse", f"Security Group {sg['id']} in use."))
    ports = await api.ok("GET", f"{NET}/ports?security_groups={sg['id']}")
    assert [p["id"] for p in ports["ports"]] == [node["port"]["id"]]


async def test_router_routes_and_extraroutes(api: Api) -> None:
    router = api.cfg["router_id"]
    route = {"destination": "10.244.1.0/24", "nexthop": "10.0.0.2"}
    found = (
        await api.ok(
            "PUT", f"{NET}/routers/{router}/add_extraroutes", {"router": {"routes": [route, route]}}
        )
    )["router"]
    assert found["routes"] == [route]
    other = {"destination": "10.244.2.0/24", "nexthop": "10.0.0.3"}
    found = (
        await api.ok(
            "PUT", f"{NET}/routers/{router}/add_extraroutes", {"router": {"routes": [other, route]}}
        )
    )["router"]
    assert found["routes"] == [route, other]
    found = (
        await api.ok(
            "PUT",
            f"{NET}/routers/{router}/remove_extraroutes",
            {"router": {"routes": [route, {"destination": "1.0.0.0/8", "nexthop": "10.0.0.9"}]}},
        )
    )["router"]
    assert found["routes"] == [other]
    found = await api.ok("PUT", f"{NET}/routers/{router}", {"router": {"routes": []}})
    assert found["router"]["routes"] == []


@pytest.mark.parametrize(
    ("nexthop", "reason"),
    [
        pytest.param("192.168.1.1", "the nexthop is not connected with router", id="unconnected"),
        pytest.param("10.0.0.1", "the nexthop is used by router", id="router-own-ip"),
    ],
)
async def test_invalid_routes(api: Api, nexthop: str, reason: str) -> None:
    routes = [{"destination": "10.244.1.0/24", "nexthop": nexthop}]
    status, body = await api.call(
        "PUT", f"{NET}/routers/{api.cfg['router_id']}", {"router": {"routes": routes}}
    )
    assert status == 400
    assert body["NeutronError"]["type"] == "InvalidRoutes"
    assert body["NeutronError"]["message"].endswith(reason)


async def test_max_routes(api: Api) -> None:
    api.world.max_routes = 2
    routes = [{"destination": f"10.244.{n}.0/24", "nexthop": "10.0.0.2"} for n in range(3)]
    status, body = await api.call(
        "PUT",
        f"{NET}/routers/{api.cfg['router_id']}/add_extraroutes",
        {"router": {"routes": routes}},
    )
    assert (status, body["NeutronError"]["type"]) == (400, "RoutesExhausted")


async def test_extensions_list_what_the_provider_probes(api: Api) -> None:
    aliases = {e["alias"] for e in (await api.ok("GET", f"{NET}/extensions"))["extensions"]}
    assert {
        "extraroute",
        "extraroute-atomic",
        "security-group",
        "allowed-address-pairs",
        "standard-attr-tag",
        "router",
        "external-net",
    } <= aliases
    found = await api.ok("GET", f"{NET}/extensions/extraroute-atomic")
    assert found["extension"]["alias"] == "extraroute-atomic"


async def test_paging(api: Api) -> None:
    body = await api.ok("GET", f"{NET}/ports?limit=2")
    assert len(body["ports"]) == 2
    href = body["ports_links"][0]["href"].removeprefix(api.world.base_url)
    rest = await api.ok("GET", href)
    assert len(rest["ports"]) == len(api.world.ports) - 2


async def test_disabled_extensions(api: Api) -> None:
    """An older Neutron: without extraroute-atomic the router actions are unknown; without
    extraroute a router has no routes attribute."""
    await api.ok("PATCH", "/_emu/config", {"disabled_extensions": ["extraroute-atomic"]})
    aliases = {e["alias"] for e in (await api.ok("GET", f"{NET}/extensions"))["extensions"]}
    assert "extraroute-atomic" not in aliases
    assert "extraroute" in aliases
    assert (await api.call("GET", f"{NET}/extensions/extraroute-atomic"))[0] == 404
    router = api.cfg["router_id"]
    routes = {"router": {"routes": [{"destination": "10.244.0.0/24", "nexthop": "10.0.0.2"}]}}
    assert (await api.call("PUT", f"{NET}/routers/{router}/add_extraroutes", routes))[0] == 404
    assert (await api.call("PUT", f"{NET}/routers/{router}", routes))[0] == 200
    await api.ok("PUT", f"{NET}/routers/{router}", {"router": {"routes": []}})
    await api.ok("PATCH", "/_emu/config", {"disabled_extensions": ["extraroute"]})
    status, body = await api.call("PUT", f"{NET}/routers/{router}", routes)
    assert (status, body["NeutronError"]["message"]) == (400, "Unrecognized attribute(s) 'routes'")


async def test_a_second_external_network(api: Api) -> None:
    before = await api.ok("GET", "/_emu/state")
    net = (
        await api.ok(
            "POST", f"{NET}/networks", {"network": {"name": "public2", "router:external": True}}
        )
    )["network"]
    subnet = (
        await api.ok(
            "POST",
            f"{NET}/subnets",
            {
                "subnet": {
                    "network_id": net["id"],
                    "cidr": "172.25.0.0/24",
                    "ip_version": 4,
                    "name": "public2-subnet",
                }
            },
        )
    )["subnet"]
    assert (subnet["gateway_ip"], subnet["allocation_pools"]) == (
        "172.25.0.1",
        [{"start": "172.25.0.2", "end": "172.25.0.254"}],
    )
    status, body = await api.call(
        "POST",
        f"{NET}/subnets",
        {"subnet": {"network_id": net["id"], "cidr": "172.25.0.128/25", "ip_version": 4}},
    )
    assert (status, body["NeutronError"]["type"]) == (400, "InvalidInput")
    externals = (await api.ok("GET", f"{NET}/networks?router:external=true"))["networks"]
    assert sorted(n["name"] for n in externals) == ["public", "public2"]
    fip = (
        await api.ok(
            "POST", f"{NET}/floatingips", {"floatingip": {"floating_network_id": net["id"]}}
        )
    )["floatingip"]
    assert fip["floating_ip_address"] == "172.25.0.2"
    assert (await api.ok("GET", "/_emu/state"))["networks"] == sorted([net["id"], subnet["id"]])
    await api.ok("DELETE", f"{NET}/floatingips/{fip['id']}")
    port = (await api.ok("POST", f"{NET}/ports", {"port": {"network_id": net["id"]}}))["port"]
    status, body = await api.call("DELETE", f"{NET}/networks/{net['id']}")
    assert (status, body["NeutronError"]["type"]) == (409, "NetworkInUse")
    await api.ok("DELETE", f"{NET}/ports/{port['id']}")
    assert (await api.call("DELETE", f"{NET}/networks/{net['id']}"))[0] == 204
    assert await api.ok("GET", "/_emu/state") == before
    status, body = await api.call("POST", f"{NET}/networks", {"network": {"colour": "red"}})
    assert (status, body["NeutronError"]["message"]) == (400, "Unrecognized attribute(s) 'colour'")
