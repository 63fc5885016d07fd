"""Upstream's Azure cloud-controller-manager v1.36.5 balancing Services on kccm's Azure emulator
and the real apiserver (issue 37, deliverable 3).

Upstream's shapes (``pkg/provider/azure_loadbalancer.go``, ``azure_standard.go``): every
Service of the cluster shares one Standard balancer, ``kubernetes`` (``kubernetes-internal``
for internal ones), with a frontend, a probe and a rule per port named from the Service's
default balancer name ``a<uid without dashes>`` (``cloudprovider.DefaultLoadBalancerName``);
a public Service's address is the public IP ``kubernetes-a<uid>``; Nodes join the backend pool
through their NICs (availability-set VMs); the security group gets an allow rule for the
Service's ports. A port change rewrites the rule and keeps the address; deleting the Service
removes all of it (the balancer too once it has no frontend left), leaving the emulator as
the CCM found it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from azure_upstream_support import UpstreamProcesses
from azure_upstream_world import (
    BUDGET,
    POD_CIDRS,
    World,
    add_machine,
    eventually,
    ingress_ip,
    lb_service,
    open_world,
    published,
)

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone
from kccm.testing.controlplane import ControlPlane
from kccm.testing.pytest_plugin import KubeCleanup

INTERNAL = "service.beta.kubernetes.io/azure-load-balancer-internal"


@pytest.fixture
async def world(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> AsyncIterator[World]:
    async for opened in open_world(
        emulator, upstream, control_plane.admin_kubeconfig, kube, kube_cleanup
    ):
        yield opened


def _base_name(svc: Obj) -> str:
    return ("a" + svc["metadata"]["uid"].replace("-", ""))[:32]


def _frontends(lb: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f["properties"] for f in lb["properties"]["frontendIPConfigurations"]}


def _rules(lb: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r["properties"] for r in lb["properties"].get("loadBalancingRules") or []}


def _members(world: World, pool_id: str) -> set[str]:
    """The NIC ids whose ip configurations are in the backend pool ``pool_id``."""
    return {
        m.split(" -> ")[0].split("/ipConfigurations/")[0].lower()
        for m in world.pool_members()
        if m.split(" -> ")[1].lower() == pool_id.lower()
    }


def _nic_ids(world: World, machines: Any) -> set[str]:
    return {
        m.vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"].lower() for m in machines
    }


def _allow_rules_for(world: World, ip: str) -> list[dict[str, Any]]:
    return [
        r
        for r in world.security_rules().values()
        if ip in (r.get("destinationAddressPrefixes") or [r.get("destinationAddressPrefix")])
    ]


async def _balancer(world: World, name: str) -> dict[str, Any]:
    found = await asyncio.to_thread(world.named, "loadBalancers")
    return found[name]


async def test_upstream_publishes_a_public_ip_changes_the_port_and_deletes_it(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    svc = await eventually(lambda: published(world, ns, "web"))
    ip, base = ingress_ip(svc), _base_name(svc)

    pips = await asyncio.to_thread(world.named, "publicIPAddresses")
    pip = pips[f"kubernetes-{base}"]
    assert pip["properties"]["ipAddress"] == ip
    assert pip["sku"]["name"] == "Standard"
    lb = await _balancer(world, "kubernetes")
    assert lb["sku"]["name"] == "Standard"
    frontend = _frontends(lb)[base]
    assert frontend["publicIPAddress"]["id"].lower() == pip["id"].lower()
    rule = _rules(lb)[f"{base}-TCP-80"]
    assert (rule["protocol"], rule["frontendPort"]) == ("Tcp", 80)
    (pool,) = lb["properties"]["backendAddressPools"]
    assert _members(world, pool["id"]) == _nic_ids(world, world.machines)
    (allow,) = await asyncio.to_thread(_allow_rules_for, world, ip)
    assert (allow["access"], allow["direction"]) == ("Allow", "Inbound")
    assert allow.get("destinationPortRange") == "80" or "80" in allow["destinationPortRanges"]

    moved_port = [{"op": "replace", "path": "/spec/ports/0/port", "value": 8081}]
    await kube.patch(SERVICES, "web", moved_port, patch_type=PatchType.JSON, namespace=ns)

    def _allows(rule: dict[str, Any]) -> list[str]:
        return (
            [rule["destinationPortRange"]]
            if rule.get("destinationPortRange")
            else list(rule.get("destinationPortRanges") or [])
        )

    async def moved() -> bool:
        """Upstream's update PUTs the balancer, then the security group: wait for both (the
        balancer alone moved is a moment upstream passes through, not its answer)."""
        world.ccm.alive()
        rules = _rules(await _balancer(world, "kubernetes"))
        if f"{base}-TCP-8081" not in rules or f"{base}-TCP-80" in rules:
            return False
        allows = await asyncio.to_thread(_allow_rules_for, world, ip)
        return len(allows) == 1 and _allows(allows[0]) == ["8081"]

    await eventually(moved)
    assert ingress_ip(await kube.get(SERVICES, "web", namespace=ns)) == ip

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


async def test_upstream_balances_an_internal_service_on_kubernetes_internal(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube.create(SERVICES, lb_service("inner", 5000, **{INTERNAL: "true"}), namespace=ns)
    svc = await eventually(lambda: published(world, ns, "inner"))
    ip, base = ingress_ip(svc), _base_name(svc)

    lb = await _balancer(world, "kubernetes-internal")
    frontend = _frontends(lb)[base]
    assert frontend["privateIPAddress"] == ip
    subnet = world.config["subnet"]
    assert frontend["subnet"]["id"].lower().endswith(f"/subnets/{subnet}".lower())
    assert f"{base}-TCP-5000" in _rules(lb)
    assert f"kubernetes-{base}" not in await asyncio.to_thread(world.named, "publicIPAddresses")

    await delete_until_gone(kube, SERVICES, ["inner"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


async def test_upstream_adds_a_joining_node_to_the_pool_and_removes_a_leaving_one(
    world: World,
    emulator: AzureEmulator,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    kube_namespace: str,
) -> None:
    ns = kube_namespace
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    await eventually(lambda: published(world, ns, "web"))
    (pool,) = (await _balancer(world, "kubernetes"))["properties"]["backendAddressPools"]

    joining = await add_machine(emulator, kube, kube_cleanup, POD_CIDRS[2], zone="3")

    async def members_are(machines: Any) -> bool:
        world.ccm.alive()
        found = await asyncio.to_thread(_members, world, pool["id"])
        return found == _nic_ids(world, machines)

    await eventually(lambda: members_are([*world.machines, joining]))
    await delete_until_gone(kube, NODES, [joining.node], within=BUDGET)
    await eventually(lambda: members_are(world.machines))
    await asyncio.to_thread(emulator.admin.delete_vm, joining.vm["id"])

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


async def test_upstream_shares_the_balancer_between_two_services(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """Two Services: two frontends on ``kubernetes``; deleting one rewrites the balancer
    without its frontend, rule and probe (a PUT), deleting the other deletes it."""
    ns = kube_namespace
    for name, port in (("one", 80), ("two", 81)):
        await kube.create(SERVICES, lb_service(name, port), namespace=ns)
    one = await eventually(lambda: published(world, ns, "one"))
    two = await eventually(lambda: published(world, ns, "two"))
    assert ingress_ip(one) != ingress_ip(two)
    lb = await _balancer(world, "kubernetes")
    assert set(_frontends(lb)) == {_base_name(one), _base_name(two)}

    since = await asyncio.to_thread(world.emulator.admin.last_seq)
    await delete_until_gone(kube, SERVICES, ["one"], ns, within=BUDGET)
    lb = await _balancer(world, "kubernetes")
    assert set(_frontends(lb)) == {_base_name(two)}
    assert set(_rules(lb)) == {f"{_base_name(two)}-TCP-81"}
    calls = [c.split()[0] + " " + c.split()[1].rsplit("/", 2)[-2] for c in world.calls(since)]
    assert "PUT loadBalancers" in calls, calls
    assert "DELETE loadBalancers" not in calls, calls

    await delete_until_gone(kube, SERVICES, ["two"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


async def test_upstream_local_policy_probes_the_health_check_port_and_allows_source_ranges(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """``externalTrafficPolicy: Local``: the probe asks the health-check node port over HTTP
    (``/healthz``); ``loadBalancerSourceRanges``: the allow rule admits those ranges only."""
    ns = kube_namespace
    svc = lb_service("local")
    svc["spec"] |= {
        "externalTrafficPolicy": "Local",
        "loadBalancerSourceRanges": ["10.20.0.0/16", "192.0.2.0/24"],
    }
    await kube.create(SERVICES, svc, namespace=ns)
    published_svc = await eventually(lambda: published(world, ns, "local"))
    ip, base = ingress_ip(published_svc), _base_name(published_svc)

    lb = await _balancer(world, "kubernetes")
    probes = {p["name"]: p["properties"] for p in lb["properties"]["probes"]}
    health_port = published_svc["spec"]["healthCheckNodePort"]
    probe = probes[f"{base}-TCP-{health_port}"]  # named after the port it probes
    assert (probe["protocol"], probe["port"], probe.get("requestPath")) == (
        "Http",
        health_port,
        "/healthz",
    )
    (allow,) = await asyncio.to_thread(_allow_rules_for, world, ip)
    sources = allow.get("sourceAddressPrefixes") or [allow.get("sourceAddressPrefix")]
    assert sorted(sources) == ["10.20.0.0/16", "192.0.2.0/24"]

    await delete_until_gone(kube, SERVICES, ["local"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)
