"""InstancesV2 on the ARM emulator: providerIDs, addresses, instance types and zones as
upstream v1.36.5 makes them, for availability-set VMs and scale set VMs found by providerID or
by name; shut down as upstream decides; gone only when ARM says so; unmanaged and foreign
Nodes; and a refresh of every Node in one list per resource group and scale set."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from az_core_world import make_cloud, node, start_emulator

from kccm.cloudprovider import (
    CloudProviderError,
    ForeignProviderID,
    InstanceNotFound,
    NodeAddress,
    Throttled,
)
from kccm.providers.azure.instances import AzureInstances
from kccm.providers.azure.provider import AzureCloud


@pytest.fixture(scope="module")
def emu() -> Iterator[Any]:
    yield from start_emulator()


@pytest.fixture(scope="module")
def clouds(emu: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, AzureCloud]:
    """A provider per vmType."""
    return {
        vm_type: make_cloud(emu, tmp_path_factory.mktemp(vm_type), vmType=vm_type)
        for vm_type in ("standard", "vmss")
    }


@pytest.fixture
def world(emu: Any) -> Iterator[dict[str, Any]]:
    """Two VMs (one zonal with a public IP) and a two-instance scale set; removed after."""
    baseline = emu.state()
    made = {
        "vm": emu.admin.add_vm("node-a", public_ip=True, zone="2", size="Standard_D4s_v3"),
        "plain": emu.admin.add_vm("node-b"),
        "vmss": emu.admin.add_vmss("pool", capacity=2),
    }
    yield made
    emu.clear_faults()
    for key in ("vm", "plain", "vmss"):
        emu.admin.delete_vm(made[key]["id"])
    emu.assert_clean(baseline)


def _instances(clouds: dict[str, AzureCloud], vm_type: str) -> AzureInstances:
    instances = clouds[vm_type].instances_v2()
    assert isinstance(instances, AzureInstances)
    return instances


def _sub(emu: Any) -> str:
    return str(emu.config["subscription"])


def _vm_pid(emu: Any, name: str, group: str = "kccm-rg") -> str:
    return (
        f"azure:///subscriptions/{_sub(emu)}/resourceGroups/{group}/providers/"
        f"Microsoft.Compute/virtualMachines/{name}"
    )


def _vmss_pid(emu: Any, instance: str) -> str:
    return (
        f"azure:///subscriptions/{_sub(emu)}/resourceGroups/kccm-rg/providers/"
        f"Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/{instance}"
    )


FOUND = [
    pytest.param("standard", "node-a", "", "vm", id="vm-by-name-standard"),
    pytest.param("vmss", "node-a", "", "vm", id="vm-by-name-in-vmss-mode"),
    pytest.param("standard", "node-a", "VM-PID", "vm", id="vm-by-provider-id"),
    pytest.param("vmss", "pool000001", "", "vmss", id="vmss-vm-by-name"),
    pytest.param("vmss", "pool000001", "VMSS-PID", "vmss", id="vmss-vm-by-provider-id"),
    pytest.param("standard", "pool000001", "VMSS-PID", "vmss", id="vmss-pid-in-standard-mode"),
    pytest.param("vmss", "pool000001", "VMSS-PID-PREFIXED", "vmss",
                 id="vmss-pid-with-scale-set-prefix"),
]  # fmt: skip


def _pid(emu: Any, kind: str) -> str:
    return {
        "": "",
        "VM-PID": _vm_pid(emu, "node-a", "KCCM-RG"),
        "VMSS-PID": _vmss_pid(emu, "1"),
        "VMSS-PID-PREFIXED": _vmss_pid(emu, "pool_1"),
    }[kind]


@pytest.mark.parametrize(("vm_type", "name", "pid", "kind"), FOUND)
def test_metadata_as_upstream_makes_it(
    emu: Any,
    clouds: dict[str, AzureCloud],
    world: dict[str, Any],
    vm_type: str,
    name: str,
    pid: str,
    kind: str,
) -> None:
    instances = _instances(clouds, vm_type)
    found = instances.instance_metadata(node(name, _pid(emu, pid)))
    assert found is not None
    if kind == "vm":
        assert found.provider_id == (_pid(emu, pid) or _vm_pid(emu, "node-a"))
        assert found.instance_type == "Standard_D4s_v3"
        assert found.zone == "eastus-2"
        assert [a.type for a in found.node_addresses] == ["InternalIP", "Hostname", "ExternalIP"]
        assert found.node_addresses[1] == NodeAddress("Hostname", name)
    else:
        assert found.provider_id == (_pid(emu, pid) or _vmss_pid(emu, "1"))
        assert found.instance_type == "Standard_D2s_v3"
        assert found.zone.isdigit()  # not zonal: the fault domain
        assert [a.type for a in found.node_addresses] == ["InternalIP", "Hostname"]
    assert found.region == "eastus"
    assert instances.instance_exists(node(name, _pid(emu, pid))) is True


def test_the_provider_id_lowercases_the_resource_group(
    emu: Any, clouds: dict[str, AzureCloud], world: dict[str, Any]
) -> None:
    """``ConvertResourceGroupNameToLower``: the emulator's IDs keep ``kccm-rg``; a group in
    capitals would be lowered (checked on the pure function in test_machines_azure.py)."""
    found = _instances(clouds, "standard").instance_metadata(node("node-b"))
    assert found is not None
    assert "/resourceGroups/kccm-rg/" in found.provider_id


SHUTDOWN = [
    pytest.param("running", False, id="running"),
    pytest.param("stopped", True, id="stopped"),
    pytest.param("deallocated", True, id="deallocated"),
    pytest.param("deallocating", True, id="deallocating"),
    pytest.param("starting", False, id="starting"),
]


@pytest.mark.parametrize(("state", "shut"), SHUTDOWN)
@pytest.mark.parametrize("which", ["plain", "vmss"])
def test_shut_down_as_upstream_decides(
    emu: Any,
    clouds: dict[str, AzureCloud],
    world: dict[str, Any],
    which: str,
    state: str,
    shut: bool,
) -> None:
    target = world[which] if which == "plain" else world[which]["instances"][0]
    emu.admin.set_power(target["id"], state)
    name = "node-b" if which == "plain" else "pool000000"
    instances = _instances(clouds, "vmss")
    assert instances.instance_shutdown(node(name)) is shut
    assert instances.instance_exists(node(name)) is True  # a stopped machine exists


@pytest.mark.parametrize("which", ["plain", "vmss"])
def test_a_deleted_machine_is_gone(
    emu: Any, clouds: dict[str, AzureCloud], world: dict[str, Any], which: str
) -> None:
    instances = _instances(clouds, "vmss")
    if which == "plain":
        target, name, pid = world["plain"], "node-b", _vm_pid(emu, "node-b")
    else:
        target, name, pid = world["vmss"]["instances"][1], "pool000001", _vmss_pid(emu, "1")
    emu.admin.delete_vm(target["id"])
    if which == "plain":
        world["plain"] = emu.admin.add_vm("node-b-again")  # the fixture deletes it instead
    for probe in (node(name), node(name, pid)):
        assert instances.instance_exists(probe) is False
        assert instances.instance_shutdown(probe) is False
        with pytest.raises(InstanceNotFound):
            instances.instance_metadata(probe)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        pytest.param("/virtualMachines/node-b", 500, "InternalServerError", id="vm-500"),
        pytest.param("/virtualMachines/node-b", 403, "AuthorizationFailed", id="vm-403"),
        pytest.param("/virtualMachineScaleSets/pool/virtualMachines", 500, "InternalServerError",
                     id="vmss-list-500"),
    ],
)  # fmt: skip
def test_an_arm_error_never_says_gone(
    emu: Any,
    clouds: dict[str, AzureCloud],
    world: dict[str, Any],
    path: str,
    status: int,
    code: str,
) -> None:
    instances = _instances(clouds, "vmss")
    probe = (
        node("node-b", _vm_pid(emu, "node-b"))
        if "node-b" in path
        else node("pool000000", _vmss_pid(emu, "0"))
    )
    emu.admin.fault(path, method="GET", status=status, code=code, times=0)
    with pytest.raises(CloudProviderError):
        instances.instance_exists(probe)


def test_unmanaged_nodes_exist_and_have_no_metadata(
    clouds: dict[str, AzureCloud],
) -> None:
    instances = _instances(clouds, "vmss")
    for probe in (
        node("on-prem-1", **{"kubernetes.azure.com/managed": "false"}),
        node("odd", "azure://not-a-resource-id"),
    ):
        assert instances.instance_exists(probe) is True
        assert instances.instance_shutdown(probe) is False
        assert instances.instance_metadata(probe) is None


def test_another_cloud_s_provider_id_is_not_judged(clouds: dict[str, AzureCloud]) -> None:
    instances = _instances(clouds, "vmss")
    probe = node("x", "aws:///us-east-1a/i-0123")
    for call in (
        instances.instance_exists,
        instances.instance_shutdown,
        instances.instance_metadata,
    ):
        with pytest.raises(ForeignProviderID):
            call(probe)


def test_a_new_node_within_its_grace_period_still_exists(emu: Any, tmp_path: Path) -> None:
    cloud = make_cloud(emu, tmp_path, nodeInstanceNotFoundGracePeriodInSeconds=300)
    instances = cloud.instances_v2()
    assert isinstance(instances, AzureInstances)
    young = node("not-yet-in-arm")
    young["metadata"]["creationTimestamp"] = (datetime.now(UTC) - timedelta(seconds=10)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    old = node("not-yet-in-arm")
    old["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    assert instances.instance_exists(young) is True
    assert instances.instance_exists(old) is False


def test_a_refresh_of_every_node_lists_instead_of_getting(
    emu: Any, clouds: dict[str, AzureCloud], world: dict[str, Any]
) -> None:
    instances = _instances(clouds, "vmss")
    nodes = [
        node("node-a", _vm_pid(emu, "node-a")),
        node("node-b"),
        node("pool000000", _vmss_pid(emu, "0")),
        node("pool000001"),
    ]
    one_by_one = {n["metadata"]["name"]: instances.instance_metadata(n) for n in nodes}
    instances.inventory.cache.ttl = 60.0
    instances.inventory.cache.clear()
    instances.inventory.scale_set_cache.clear()
    try:
        since = emu.admin.last_seq()
        listed = instances.list_instance_metadata(nodes)
        calls = [r for r in emu.admin.requests(since) if "/_emu" not in r["path"]]
    finally:
        instances.inventory.cache.ttl = 0.0
    assert listed == one_by_one
    paths = sorted(f"{r['method']} {r['path'].rsplit('/providers/', 1)[-1]}" for r in calls)
    assert paths == sorted(
        [
            "GET Microsoft.Compute/virtualMachines",
            "GET Microsoft.Compute/virtualMachineScaleSets",
            "GET Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines",
            "GET Microsoft.Compute/virtualMachineScaleSets/pool/networkInterfaces",
            "GET Microsoft.Network/networkInterfaces",
            "GET Microsoft.Network/publicIPAddresses",
        ]
    )


def test_describe_instance(emu: Any, clouds: dict[str, AzureCloud], world: dict[str, Any]) -> None:
    instances = _instances(clouds, "vmss")
    emu.admin.set_power(world["plain"]["id"], "deallocated")
    view = instances.describe_instance(node("node-b"))
    assert view.exists
    assert view.state == "deallocated"
    assert view.detail["size"] == "Standard_D2s_v3"
    assert instances.describe_instance(node("gone", _vm_pid(emu, "gone"))).exists is False


def test_throttling_fails_the_whole_refresh(
    emu: Any, world: dict[str, Any], tmp_path: Path
) -> None:
    """A 429 during a refresh is not a Node "left out": it reaches the call gate. (A cloud of
    its own: the throttled answer leaves the client paused, which the module's shared clouds
    must not inherit.)"""
    instances = _instances({"vmss": make_cloud(emu, tmp_path, vmType="vmss")}, "vmss")
    emu.admin.fault("/virtualMachines", method="GET", kind="throttle", retry_after=0, times=0)
    with pytest.raises(Throttled):
        instances.list_instance_metadata([node("node-a"), node("node-b")])


def _imds_addresses(emu: Any, vm_id: str) -> list[tuple[str, str]]:
    """What the instance's own metadata service says (what upstream's cloud-node-manager
    reports): its private and public IPv4 addresses."""
    request = urllib.request.Request(
        emu.admin.imds_for(vm_id) + "/metadata/instance?api-version=2021-10-01&format=json",
        headers={"Metadata": "true"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        network = json.load(answer)["network"]
    return [
        (a["privateIpAddress"], a.get("publicIpAddress", ""))
        for a in network["interface"][0]["ipv4"]["ipAddress"]
    ]


@pytest.mark.parametrize(
    ("vm_type", "by_provider_id"),
    [
        pytest.param("vmss", False, id="vmss-mode-by-name"),
        pytest.param("standard", True, id="standard-mode-by-provider-id"),
    ],
)
def test_a_scale_set_instance_s_public_ip_is_its_external_ip(
    emu: Any, tmp_path: Path, vm_type: str, by_provider_id: bool
) -> None:
    """Upstream v1.36.5 reads a scale-set instance's public IP at the instance NIC's
    ``ipConfigurations/<c>/publicIPAddresses/<p>`` (pkg/provider/azure_vmss.go,
    GetIPByNodeName) and reports it as the Node's ExternalIP, as its metadata service does."""
    baseline = emu.state()
    scale_set = emu.admin.add_vmss("pubpool", capacity=1, public_ip=True)
    try:
        instance = scale_set["instances"][0]
        [(private, public)] = _imds_addresses(emu, instance["id"])
        assert public  # the scale set gives its instances public IPs
        pid = "azure://" + str(instance["id"]) if by_provider_id else ""
        cloud = make_cloud(emu, tmp_path, vmType=vm_type)
        found = _instances({vm_type: cloud}, vm_type).instance_metadata(node("pubpool000000", pid))
        assert found is not None
        assert list(found.node_addresses) == [
            NodeAddress("InternalIP", private),
            NodeAddress("Hostname", "pubpool000000"),
            NodeAddress("ExternalIP", public),
        ]
    finally:
        emu.admin.delete_vm(scale_set["id"])
    emu.assert_clean(baseline)


def _imds_public_ip(emu: Any, vm_id: str) -> str:
    """The instance's public address as the emulator's metadata service tells the VM itself
    (what upstream's cloud-node-manager reports in its default IMDS mode)."""
    request = urllib.request.Request(
        f"{emu.admin.imds_for(vm_id)}/metadata/instance?api-version=2021-10-01&format=json",
        headers={"Metadata": "True"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        found = json.load(answer)
    return str(found["network"]["interface"][0]["ipv4"]["ipAddress"][0]["publicIpAddress"])


@pytest.fixture
def public_pool(emu: Any) -> Iterator[dict[str, Any]]:
    """A two-instance scale set whose instances each have a public IP; removed after."""
    baseline = emu.state()
    made: dict[str, Any] = emu.admin.add_vmss("pubpool", capacity=2, public_ip=True)
    yield made
    emu.clear_faults()
    emu.admin.delete_vm(made["id"])
    emu.assert_clean(baseline)


def _external(found: Any) -> list[str]:
    return [a.address for a in found.node_addresses if a.type == "ExternalIP"]


def test_scale_set_instances_report_their_public_ip_read_once_per_scale_set(
    emu: Any, clouds: dict[str, AzureCloud], public_pool: dict[str, Any]
) -> None:
    """``GetIPByNodeName`` (``azure_vmss.go`` v1.36.5): the public IP on the primary IP
    configuration is the ``ExternalIP``; one GET per instance, a refresh one list per scale
    set."""
    instances = _instances(clouds, "vmss")
    vms = public_pool["instances"]
    nodes = [node(vm["properties"]["osProfile"]["computerName"].lower()) for vm in vms]
    wanted = {
        n["metadata"]["name"]: [_imds_public_ip(emu, vm["id"])]
        for n, vm in zip(nodes, vms, strict=True)
    }
    one_by_one = {n["metadata"]["name"]: instances.instance_metadata(n) for n in nodes}
    assert {name: _external(found) for name, found in one_by_one.items()} == wanted
    instances.inventory.cache.ttl = 60.0
    instances.inventory.cache.clear()
    instances.inventory.scale_set_cache.clear()
    try:
        since = emu.admin.last_seq()
        listed = instances.list_instance_metadata(nodes)
        calls = [r for r in emu.admin.requests(since) if "/_emu" not in r["path"]]
    finally:
        instances.inventory.cache.ttl = 0.0
    assert listed == one_by_one
    pip_reads = [r["path"].rsplit("/providers/", 1)[-1] for r in calls if "ublicIP" in r["path"]]
    assert pip_reads == ["Microsoft.Compute/virtualMachineScaleSets/pubpool/publicIPAddresses"]


def test_a_scale_set_public_ip_of_another_form_gives_no_external_ip(
    emu: Any, clouds: dict[str, AzureCloud], public_pool: dict[str, Any]
) -> None:
    """An ID not matching ``vmssPIPConfigurationRE``: upstream warns and reports none."""
    instances = _instances(clouds, "vmss")
    for batch in (False, True):
        read = instances._public_reader(instances.machine_of(node("pubpool000000")), batch=batch)
        assert (
            read(
                f"/subscriptions/{_sub(emu)}/resourceGroups/kccm-rg/providers/"
                "Microsoft.Network/publicIPAddresses/x"
            )
            is None
        )
