"""Microsoft.Network: public IPs with addresses, NICs, load balancers and their references,
security groups, route tables and subnets."""

from __future__ import annotations

from typing import Any

import pytest
from azure_api import NET, SUBNET, Api

LB = f"{NET}/loadBalancers/kubernetes"


def pip(method: str = "Static", sku: str = "Standard") -> dict[str, Any]:
    return {
        "location": "eastus",
        "sku": {"name": sku},
        "properties": {"publicIPAllocationMethod": method},
    }


def nic(pools: tuple[str, ...] = (), subnet: str = SUBNET, **ipc: Any) -> dict[str, Any]:
    props = {"subnet": {"id": subnet}, **ipc}
    props["loadBalancerBackendAddressPools"] = [{"id": p} for p in pools]
    return {
        "location": "eastus",
        "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": props}]},
    }


def balancer(pip_id: str, *, probe: bool = True, rule_pool: str = "kubernetes") -> dict[str, Any]:
    fe = f"{LB}/frontendIPConfigurations/fe1"
    rule: dict[str, Any] = {
        "frontendIPConfiguration": {"id": fe},
        "backendAddressPool": {"id": f"{LB}/backendAddressPools/{rule_pool}"},
        "protocol": "Tcp",
        "frontendPort": 80,
        "backendPort": 30080,
    }
    if probe:
        rule["probe"] = {"id": f"{LB}/probes/p80"}
    return {
        "location": "eastus",
        "sku": {"name": "Standard"},
        "properties": {
            "frontendIPConfigurations": [
                {"name": "fe1", "properties": {"publicIPAddress": {"id": pip_id}}}
            ],
            "backendAddressPools": [{"name": "kubernetes"}],
            "probes": [{"name": "p80", "properties": {"protocol": "Tcp", "port": 30080}}],
            "loadBalancingRules": [{"name": "r80", "properties": rule}],
        },
    }


@pytest.mark.parametrize(
    ("method", "sku", "addressed"),
    [
        pytest.param("Static", "Standard", True, id="static"),
        pytest.param("Dynamic", "Basic", False, id="dynamic-unattached"),
    ],
)
async def test_public_ip_addresses(api: Api, method: str, sku: str, addressed: bool) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip(method, sku))
    assert bool(made["properties"].get("ipAddress")) is addressed
    assert made["properties"]["publicIPAllocationMethod"] == method


async def test_a_dynamic_public_ip_gets_its_address_when_a_balancer_uses_it(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip("Dynamic", "Basic"))
    basic = balancer(made["id"])
    basic["sku"] = {"name": "Basic"}
    await api.ok("PUT", LB, basic)
    found = await api.ok("GET", f"{NET}/publicIPAddresses/a")
    assert found["properties"]["ipAddress"]
    assert found["properties"]["ipConfiguration"]["id"] == f"{LB}/frontendIPConfigurations/fe1"


async def test_nic_addresses_come_from_the_subnet_and_stay(api: Api) -> None:
    first = await api.ok("PUT", f"{NET}/networkInterfaces/a", nic())
    second = await api.ok("PUT", f"{NET}/networkInterfaces/b", nic())
    again = await api.ok("PUT", f"{NET}/networkInterfaces/a", nic())
    address = [
        n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        for n in (first, second, again)
    ]
    assert address == ["10.240.0.4", "10.240.0.5", "10.240.0.4"]
    ipc = first["properties"]["ipConfigurations"][0]
    assert ipc["id"] == f"{NET}/networkInterfaces/a/ipConfigurations/ipconfig1"
    assert ipc["type"] == "Microsoft.Network/networkInterfaces/ipConfigurations"


@pytest.mark.parametrize(
    ("body", "target"),
    [
        pytest.param(
            nic(pools=(f"{LB}/backendAddressPools/none",)),
            f"{LB}/backendAddressPools/none",
            id="pool",
        ),
        pytest.param(nic(subnet=f"{SUBNET}x"), f"{SUBNET}x", id="subnet"),
        pytest.param(
            nic(publicIPAddress={"id": f"{NET}/publicIPAddresses/none"}),
            f"{NET}/publicIPAddresses/none",
            id="public-ip",
        ),
    ],
)
async def test_a_nic_naming_nothing_is_refused(api: Api, body: dict[str, Any], target: str) -> None:
    answer = await api.call("PUT", f"{NET}/networkInterfaces/a", body)
    assert answer.status == 400
    assert answer.body["error"]["code"] == "InvalidResourceReference"
    assert answer.body["error"]["message"].startswith(f"Resource {target} referenced by resource")


async def test_a_balancer_rule_must_name_the_balancers_own_parts(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip())
    answer = await api.call("PUT", LB, balancer(made["id"], rule_pool="other"))
    assert answer.body["error"]["code"] == "InvalidResourceReference"
    assert (await api.call("GET", LB)).status == 404


async def test_pool_members_and_rule_users_show_on_read(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip())
    await api.ok("PUT", LB, balancer(made["id"]))
    pool = f"{LB}/backendAddressPools/kubernetes"
    await api.ok("PUT", f"{NET}/networkInterfaces/n1", nic(pools=(pool,)))
    found = await api.ok("GET", LB)
    props = found["properties"]
    members = props["backendAddressPools"][0]["properties"]["backendIPConfigurations"]
    assert members == [{"id": f"{NET}/networkInterfaces/n1/ipConfigurations/ipconfig1"}]
    rule = {"id": f"{LB}/loadBalancingRules/r80"}
    assert props["probes"][0]["properties"]["loadBalancingRules"] == [rule]
    assert props["frontendIPConfigurations"][0]["properties"]["loadBalancingRules"] == [rule]
    assert found["properties"]["frontendIPConfigurations"][0]["etag"] == found["etag"]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        pytest.param(f"{NET}/publicIPAddresses/a", "PublicIPAddressCannotBeDeleted", id="used-ip"),
        pytest.param(f"{NET}/virtualNetworks/kccm-vnet", "InUseSubnetCannotBeDeleted", id="vnet"),
    ],
)
async def test_what_is_in_use_is_not_deleted(api: Api, path: str, code: str) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip())
    await api.ok("PUT", LB, balancer(made["id"]))
    await api.ok(
        "PUT", f"{NET}/networkInterfaces/n1", nic(pools=(f"{LB}/backendAddressPools/kubernetes",))
    )
    answer = await api.call("DELETE", path)
    assert (answer.status, answer.body["error"]["code"]) == (400, code)


async def test_a_nic_of_a_vm_is_not_deleted(api: Api) -> None:
    from kccm.emulators.azure.seed import add_vm

    add_vm(api.world, {"name": "node-0"})
    answer = await api.call("DELETE", f"{NET}/networkInterfaces/node-0-nic")
    assert (answer.status, answer.body["error"]["code"]) == (400, "NicInUse")


def rule(name: str, priority: int, direction: str = "Inbound") -> dict[str, Any]:
    return {
        "name": name,
        "properties": {
            "protocol": "Tcp",
            "access": "Allow",
            "direction": direction,
            "priority": priority,
            "sourceAddressPrefix": "Internet",
            "sourcePortRange": "*",
            "destinationAddressPrefixes": ["20.60.0.2"],
            "destinationPortRange": "80",
        },
    }


@pytest.mark.parametrize(
    ("rules", "code"),
    [
        pytest.param([rule("a", 500), rule("b", 501)], "", id="distinct"),
        pytest.param(
            [rule("a", 500), rule("b", 500, "Outbound")], "", id="same-priority-other-way"
        ),
        pytest.param([rule("a", 500), rule("b", 500)], "SecurityRuleConflict", id="conflict"),
        pytest.param([rule("a", 5000)], "SecurityRuleInvalidPriority", id="priority-range"),
    ],
)
async def test_security_rules(api: Api, rules: list[dict[str, Any]], code: str) -> None:
    nsg = await api.ok("GET", f"{NET}/networkSecurityGroups/kccm-nsg")
    nsg["properties"]["securityRules"] = rules
    answer = await api.call("PUT", f"{NET}/networkSecurityGroups/kccm-nsg", nsg)
    if not code:
        assert answer.status == 200
        assert len(answer.body["properties"]["defaultSecurityRules"]) == 6
        assert answer.body["properties"]["subnets"] == [{"id": SUBNET}]
    else:
        assert (answer.status, answer.body["error"]["code"]) == (400, code)


async def test_routes_have_endpoints_of_their_own(api: Api) -> None:
    table = f"{NET}/routeTables/kccm-rt"
    route = {
        "properties": {
            "addressPrefix": "10.244.0.0/24",
            "nextHopType": "VirtualAppliance",
            "nextHopIpAddress": "10.240.0.4",
        }
    }
    made = await api.call("PUT", f"{table}/routes/node-0", route)
    assert made.status == 201
    assert made.body["id"] == f"{table}/routes/node-0"
    listed = await api.ok("GET", f"{table}/routes")
    assert [r["name"] for r in listed["value"]] == ["node-0"]
    parent = await api.ok("GET", table)
    assert parent["properties"]["routes"][0]["properties"]["nextHopIpAddress"] == "10.240.0.4"
    assert (await api.call("DELETE", f"{table}/routes/node-0")).status == 202
    assert (await api.ok("GET", table))["properties"]["routes"] == []


async def test_a_virtual_appliance_route_needs_its_next_hop(api: Api) -> None:
    route = {"properties": {"addressPrefix": "10.244.0.0/24", "nextHopType": "VirtualAppliance"}}
    answer = await api.call("PUT", f"{NET}/routeTables/kccm-rt/routes/r", route)
    assert answer.body["error"]["code"] == "VirtualApplianceNextHopIpAddressMissing"


async def test_a_balancer_deleted_under_its_nics_leaves_them_out_of_its_pool(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip())
    await api.ok("PUT", LB, balancer(made["id"]))
    pool = f"{LB}/backendAddressPools/kubernetes"
    before = await api.ok("PUT", f"{NET}/networkInterfaces/n1", nic(pools=(pool,)))
    assert (await api.call("DELETE", LB)).status == 202
    after = await api.ok("GET", f"{NET}/networkInterfaces/n1")
    assert (
        after["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"]
        == []
    )
    assert after["etag"] != before["etag"]


async def test_a_pool_in_use_is_not_removed_by_a_put(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip())
    await api.ok("PUT", LB, balancer(made["id"]))
    await api.ok(
        "PUT", f"{NET}/networkInterfaces/n1", nic(pools=(f"{LB}/backendAddressPools/kubernetes",))
    )
    emptied = balancer(made["id"])
    emptied["properties"]["backendAddressPools"] = []
    emptied["properties"]["loadBalancingRules"] = []
    answer = await api.call("PUT", LB, emptied)
    assert (answer.status, answer.body["error"]["code"]) == (
        400,
        "InUseBackendAddressPoolCannotBeDeleted",
    )


async def test_a_dual_stack_nic_gets_an_address_of_each_family(api: Api) -> None:
    vnet = await api.ok("GET", f"{NET}/virtualNetworks/kccm-vnet")
    vnet["properties"]["addressSpace"]["addressPrefixes"].append("fd00:240::/48")
    vnet["properties"]["subnets"].append(
        {"name": "dual", "properties": {"addressPrefixes": ["10.241.0.0/24", "fd00:240::/64"]}}
    )
    vnet["properties"]["addressSpace"]["addressPrefixes"].append("10.241.0.0/16")
    await api.ok("PUT", f"{NET}/virtualNetworks/kccm-vnet", vnet)
    subnet = f"{NET}/virtualNetworks/kccm-vnet/subnets/dual"
    configs = [
        {"name": "v4", "properties": {"subnet": {"id": subnet}, "primary": True}},
        {"name": "v6", "properties": {"subnet": {"id": subnet}, "privateIPAddressVersion": "IPv6"}},
    ]
    made = await api.ok(
        "PUT",
        f"{NET}/networkInterfaces/d",
        {"location": "eastus", "properties": {"ipConfigurations": configs}},
    )
    found = [c["properties"]["privateIPAddress"] for c in made["properties"]["ipConfigurations"]]
    assert found == ["10.241.0.4", "fd00:240::4"]
    await api.ok("DELETE", f"{NET}/networkInterfaces/d")


async def test_an_internal_frontend_keeps_its_zones_and_gets_an_address(api: Api) -> None:
    body = {
        "location": "eastus",
        "sku": {"name": "Standard"},
        "properties": {
            "frontendIPConfigurations": [
                {"name": "fe", "zones": ["1", "2", "3"], "properties": {"subnet": {"id": SUBNET}}}
            ],
        },
    }
    made = await api.ok("PUT", f"{NET}/loadBalancers/kubernetes-internal", body)
    fe = made["properties"]["frontendIPConfigurations"][0]
    assert fe["zones"] == ["1", "2", "3"]
    assert (
        fe["properties"]["privateIPAddress"],
        fe["properties"]["privateIPAllocationMethod"],
    ) == ("10.240.0.4", "Dynamic")


async def test_a_balancer_references_public_ips_of_its_own_sku(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip("Dynamic", "Basic"))
    answer = await api.call("PUT", LB, balancer(made["id"]))
    assert (answer.status, answer.body["error"]["code"]) == (400, "PublicIPAndLBSkuDoNotMatch")
    assert answer.body["error"]["message"] == (
        f"Standard sku load balancer {LB} cannot reference Basic sku publicIP {made['id']}."
    )


async def test_an_unreferenced_dynamic_public_ip_shows_no_address(api: Api) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip("Dynamic", "Basic"))
    basic = balancer(made["id"])
    basic["sku"] = {"name": "Basic"}
    await api.ok("PUT", LB, basic)
    assert (await api.ok("GET", f"{NET}/publicIPAddresses/a"))["properties"]["ipAddress"]
    await api.ok("DELETE", LB)
    assert "ipAddress" not in (await api.ok("GET", f"{NET}/publicIPAddresses/a"))["properties"]
