"""The pure parts of InstancesV2: providerID parsing, upstream's name rules, power state,
zones, the primary NIC and the addresses read from it."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider import CloudProviderError, NodeAddress
from kccm.providers.azure.addresses import node_addresses, primary_ip_configuration
from kccm.providers.azure.machines import (
    ProviderRef,
    is_managed_provider_id,
    lower_resource_group,
    machine_from_vm,
    machine_from_vmss_vm,
    parse_provider_id,
    power_state,
    scale_set_instance_id,
)

SUB = "/subscriptions/s"
VM = f"azure://{SUB}/resourceGroups/RG/providers/Microsoft.Compute/virtualMachines/node-0"
VMSS = f"azure://{SUB}/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss"


@pytest.mark.parametrize(
    ("provider_id", "ref"),
    [
        pytest.param(VM, ProviderRef("s", "rg", "node-0"), id="vm"),
        pytest.param(f"{VMSS}/virtualMachines/3", ProviderRef("s", "rg", "ss", "3"), id="vmss"),
        pytest.param(f"{VMSS}/virtualMachines/ss_3", ProviderRef("s", "rg", "ss", "3"),
                     id="vmss-prefixed-instance"),
        pytest.param(f"azure://{SUB}/resourceGroups/rg/providers/Microsoft.Compute/disks/d", None,
                     id="other-compute-resource"),
        pytest.param("azure://node-0", None, id="bare"),
    ],
)  # fmt: skip
def test_parse_provider_id(provider_id: str, ref: ProviderRef | None) -> None:
    assert parse_provider_id(provider_id) == ref


@pytest.mark.parametrize(
    ("provider_id", "managed"),
    [(VM, True), ("azure://node-0", False), ("aws:///i-1", False), ("", False)],
    ids=["azure-resource", "azure-bare", "aws", "empty"],
)
def test_is_managed_provider_id(provider_id: str, managed: bool) -> None:
    assert is_managed_provider_id(provider_id) is managed


def test_lower_resource_group_keeps_the_rest() -> None:
    assert lower_resource_group("/subscriptions/S/resourceGroups/My-RG/providers/X/y/Z") == (
        "/subscriptions/S/resourceGroups/my-rg/providers/X/y/Z"
    )


@pytest.mark.parametrize(
    ("name", "instance"),
    [("pool000000", "0"), ("pool00000a", "10"), ("pool0000zz", "1295"), ("short", None),
     ("node-a-b-c", None)],
    ids=["zero", "ten", "base36", "too-short", "not-base36"],
)  # fmt: skip
def test_scale_set_instance_id(name: str, instance: str | None) -> None:
    assert scale_set_instance_id(name) == instance


@pytest.mark.parametrize(
    ("statuses", "state"),
    [
        ([{"code": "ProvisioningState/succeeded"}, {"code": "PowerState/deallocated"}],
         "deallocated"),
        ([{"code": "powerstate/running"}], "running"),
        ([{"code": "ProvisioningState/succeeded"}], "unknown"),
        ([], "unknown"),
    ],
    ids=["deallocated", "any-case-prefix", "no-power-status", "none"],
)  # fmt: skip
def test_power_state(statuses: list[dict[str, str]], state: str) -> None:
    assert power_state({"statuses": statuses}) == state


def _vm(**extra: Any) -> dict[str, Any]:
    props = {
        "provisioningState": "Succeeded",
        "hardwareProfile": {"vmSize": "Standard_B2s"},
        "networkProfile": {"networkInterfaces": [{"id": "nic-1"}]},
        **extra.pop("props", {}),
    }
    return {"id": VM.removeprefix("azure://"), "name": "node-0", "location": "WestEurope",
            "properties": props, **extra}  # fmt: skip


@pytest.mark.parametrize(
    ("vm", "zone"),
    [
        pytest.param(_vm(zones=["3"]), "westeurope-3", id="zonal"),
        pytest.param(_vm(props={"instanceView": {"platformFaultDomain": 2}}), "2",
                     id="fault-domain"),
        pytest.param(_vm(), "0", id="no-instance-view"),
    ],
)  # fmt: skip
def test_vm_zone(vm: dict[str, Any], zone: str) -> None:
    assert machine_from_vm(vm).zone() == zone


def test_a_scale_set_vm_without_zone_or_instance_view_has_no_zone() -> None:
    machine = machine_from_vmss_vm({"id": "x/resourceGroups/rg/providers/y", "name": "ss_0"}, "ss")
    with pytest.raises(CloudProviderError, match="zone"):
        machine.zone()


@pytest.mark.parametrize(
    ("state", "power", "shut"),
    [("Succeeded", "PowerState/stopped", True), ("Updating", "PowerState/stopped", False),
     ("Succeeded", "PowerState/running", False)],
    ids=["stopped", "stopped-while-updating", "running"],
)  # fmt: skip
def test_shut_down_needs_a_succeeded_provisioning_state(state: str, power: str, shut: bool) -> None:
    vm = _vm(props={"provisioningState": state, "instanceView": {"statuses": [{"code": power}]}})
    assert machine_from_vm(vm).is_shut_down is shut


def test_the_provider_id_lowers_the_resource_group() -> None:
    assert machine_from_vm(_vm()).provider_id == VM.replace("/RG/", "/rg/")


@pytest.mark.parametrize(
    ("nics", "primary"),
    [
        ([{"id": "only"}], "only"),
        ([{"id": "a"}, {"id": "b", "properties": {"primary": True}}], "b"),
    ],
    ids=["single", "marked-primary"],
)
def test_primary_nic(nics: list[dict[str, Any]], primary: str) -> None:
    assert (
        machine_from_vm(_vm(props={"networkProfile": {"networkInterfaces": nics}})).primary_nic()
        == primary
    )


def test_no_primary_nic_is_an_error() -> None:
    vm = _vm(props={"networkProfile": {"networkInterfaces": [{"id": "a"}, {"id": "b"}]}})
    with pytest.raises(CloudProviderError, match="primary nic"):
        machine_from_vm(vm).primary_nic()


def _config(private: str, *, primary: bool = False, pip: str = "", version: str = "") -> Any:
    props: dict[str, Any] = {"privateIPAddress": private, "primary": primary}
    if version:
        props["privateIPAddressVersion"] = version
    if pip:
        props["publicIPAddress"] = {"id": pip}
    return {"name": private, "properties": props}


PUBLIC = {"pip4": "20.0.0.1", "pip6": "2001:db8::1"}
ADDRESSES = [
    pytest.param([_config("10.0.0.4")], [("InternalIP", "10.0.0.4"), ("Hostname", "n")],
                 id="private-only"),
    pytest.param([_config("10.0.0.4", pip="pip4")],
                 [("InternalIP", "10.0.0.4"), ("Hostname", "n"), ("ExternalIP", "20.0.0.1")],
                 id="with-public-ip"),
    pytest.param([_config("10.0.0.4", pip="gone")], [("InternalIP", "10.0.0.4"), ("Hostname", "n")],
                 id="public-ip-without-address"),
    pytest.param([_config("10.0.0.5"), _config("10.0.0.4", primary=True)],
                 [("InternalIP", "10.0.0.4"), ("Hostname", "n")], id="primary-of-several"),
    pytest.param([_config("10.0.0.4", primary=True, version="IPv4"),
                  _config("fd00::4", version="IPv6", pip="pip6")],
                 [("InternalIP", "10.0.0.4"), ("Hostname", "n"), ("InternalIP", "fd00::4"),
                  ("ExternalIP", "2001:db8::1")], id="dual-stack"),
]  # fmt: skip


@pytest.mark.parametrize(("configs", "wanted"), ADDRESSES)
def test_node_addresses(configs: list[Any], wanted: list[tuple[str, str]]) -> None:
    nic = {"name": "nic", "properties": {"ipConfigurations": configs}}
    assert node_addresses("n", nic, PUBLIC.get) == [NodeAddress(t, a) for t, a in wanted]


def test_several_ip_configurations_without_a_primary_is_an_error() -> None:
    nic = {"name": "nic", "properties": {"ipConfigurations": [_config("a"), _config("b")]}}
    with pytest.raises(CloudProviderError, match="primary ipconfig"):
        primary_ip_configuration(nic)


def test_a_flex_vm_keeps_its_computer_name() -> None:
    vm = _vm(
        props={"osProfile": {"computerName": "FLEX00A1"}, "virtualMachineScaleSet": {"id": "x"}}
    )
    machine = machine_from_vm(vm)
    assert machine.computer_name == "flex00a1"
    assert machine.in_flex_scale_set
