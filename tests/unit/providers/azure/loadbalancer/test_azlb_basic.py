"""The Basic SKU (``loadBalancerSku: basic``) on kccm's ARM emulator: a Basic balancer and
Basic public IP (Static, as upstream v1.36.5 ``ensurePublicIPExists`` makes every new one; no
zones, which upstream adds to new Standard public IPs only), the primary availability set's
VMs only in the pool (``getPrimaryInterfaceWithVMSet``), the security rule for the address;
an unchanged ensure writes nothing; the emulator refuses a Standard public IP on a Basic
balancer as ARM does (``PublicIPAndLBSkuDoNotMatch``); a delete leaves it as it was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azlb_emu import balancers, network_id, node, resource, service, writes

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.providers.azure.loadbalancer.armapi import ArmApi
from kccm.testing.certs import emulator_tls

CLUSTER = "kubernetes"
UID = "b1000000-0000-4000-8000-000000000000"
BASE = "a" + UID.replace("-", "")[:31]


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


@pytest.fixture(scope="module")
def lbs(emu: AzureEmulator, tmp_path_factory: pytest.TempPathFactory) -> AzureLoadBalancers:
    made = balancers(
        emu,
        tmp_path_factory.mktemp("azure"),
        loadBalancerSku="basic",
        vmType="standard",
        primaryAvailabilitySetName="as-primary",
    )
    made.use_zones(["1", "2", "3"])
    return made


@pytest.fixture
def vms(emu: AzureEmulator) -> Iterator[list[dict[str, Any]]]:
    baseline = emu.state()
    made = [
        emu.admin.add_vm("basic-0", availability_set="as-primary"),
        emu.admin.add_vm("basic-1", availability_set="as-primary"),
        emu.admin.add_vm("basic-2", availability_set="as-other"),
    ]
    yield made
    for vm in made:
        emu.admin.delete_vm(vm["id"])
    emu.assert_clean(baseline)


def _pool_nics(emu: AzureEmulator) -> list[str]:
    lb = resource(emu, "loadBalancers", CLUSTER)
    pool = lb["properties"]["backendAddressPools"][0]["properties"]
    members = pool.get("backendIPConfigurations") or ()
    return sorted(m["id"].split("/networkInterfaces/")[1].split("/")[0] for m in members)


def test_basic_balancer_life(
    emu: AzureEmulator, lbs: AzureLoadBalancers, vms: list[dict[str, Any]]
) -> None:
    svc = service("basic", UID)
    status = lbs.ensure_load_balancer(CLUSTER, svc, [node(vm) for vm in vms])
    lb = resource(emu, "loadBalancers", CLUSTER)
    assert lb["sku"]["name"] == "Basic"
    assert "zones" not in lb["properties"]["frontendIPConfigurations"][0]
    pip = resource(emu, "publicIPAddresses", f"{CLUSTER}-{BASE}")
    assert pip["sku"]["name"] == "Basic"
    assert pip["properties"]["publicIPAllocationMethod"] == "Static"
    assert not pip.get("zones")
    assert pip["properties"]["ipAddress"] == status.ingress[0].ip
    assert _pool_nics(emu) == ["basic-0-nic", "basic-1-nic"]
    rules = resource(emu, "networkSecurityGroups", emu.config["nsg"])["properties"]
    (rule,) = rules["securityRules"]
    assert rule["properties"]["destinationAddressPrefix"] == status.ingress[0].ip

    since = emu.admin.last_seq()
    assert lbs.ensure_load_balancer(CLUSTER, svc, [node(vm) for vm in vms]) == status
    assert writes(emu, since) == []

    lbs.ensure_load_balancer_deleted(CLUSTER, svc)
    assert lbs.get_load_balancer(CLUSTER, svc) == (None, False)


def test_a_standard_public_ip_on_a_basic_balancer_is_refused(
    emu: AzureEmulator, lbs: AzureLoadBalancers, vms: list[dict[str, Any]]
) -> None:
    arm: ArmApi = lbs.arm
    pip_id = network_id(emu, "publicIPAddresses", "std-pip")
    arm.put(
        pip_id,
        {
            "location": emu.config["location"],
            "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"},
        },
        if_match=None,
    )
    lb_id = network_id(emu, "loadBalancers", "mismatch")
    body = {
        "location": emu.config["location"],
        "sku": {"name": "Basic"},
        "properties": {
            "frontendIPConfigurations": [
                {"name": "fe", "properties": {"publicIPAddress": {"id": pip_id}}}
            ]
        },
    }
    try:
        with pytest.raises(Exception, match="PublicIPAndLBSkuDoNotMatch"):
            arm.put(lb_id, body, if_match=None)
    finally:
        arm.delete(pip_id)
