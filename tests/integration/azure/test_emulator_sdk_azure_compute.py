"""The Azure SDK for Python (azure-identity, azure-mgmt-compute) drives the emulator's sign-in
and Microsoft.Compute through every call kind the provider makes: VMs with their instance
view (one GET, lists per resource group in pages), scale sets, their instances and NICs,
instance and scale-set updates for pool membership, power states as the emulator's admin
sets them, and ARM's errors parsed into the SDK's exceptions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.compute import ComputeManagementClient
from azure_sdk_support import compute_client, credential, leaves_nothing

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.testing.certs import emulator_tls


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def compute(emu: AzureEmulator) -> Iterator[ComputeManagementClient]:
    with compute_client(emu) as client:
        yield client


@pytest.fixture(autouse=True)
def clean(emu: AzureEmulator) -> Iterator[None]:
    yield from leaves_nothing(emu)


@pytest.fixture
def nodes(emu: AzureEmulator) -> Iterator[list[dict[str, Any]]]:
    made = [
        emu.admin.add_vm("node-a", availability_set="as-sdk", public_ip=True, fault_domain=1),
        emu.admin.add_vm("node-b", availability_set="as-sdk", power_state="deallocated"),
        emu.admin.add_vm("node-c", zone="2", power_state="stopped"),
    ]
    yield made
    for vm in made:
        emu.admin.delete_vm(vm["id"])


def power(view: Any) -> str:
    return next(s.code for s in view.statuses if s.code.startswith("PowerState/"))


def test_the_credential_signs_in_at_the_adfs_endpoint(emu: AzureEmulator) -> None:
    token = credential(emu).get_token(f"{emu.url}/.default")
    assert token.token
    assert token.expires_on > 0
    signed = [r for r in emu.admin.requests() if r["service"] == "adfs"]
    assert {(r["method"], r["path"].rstrip("/")) for r in signed} >= {
        ("GET", "/adfs/.well-known/openid-configuration"),
        ("POST", "/adfs/oauth2/token"),
    }


@pytest.mark.parametrize(
    ("name", "state", "fault_domain", "zones"),
    [
        pytest.param("node-a", "PowerState/running", 1, None, id="running-in-availability-set"),
        pytest.param("node-b", "PowerState/deallocated", 0, None, id="deallocated"),
        pytest.param("node-c", "PowerState/stopped", 0, ["2"], id="stopped-in-zone"),
    ],
)
def test_a_vm_with_its_instance_view(
    compute: ComputeManagementClient,
    nodes: list[dict[str, Any]],
    name: str,
    state: str,
    fault_domain: int,
    zones: list[str] | None,
) -> None:
    vm = compute.virtual_machines.get("kccm-rg", name, expand="instanceView")
    assert power(vm.instance_view) == state
    assert vm.instance_view.platform_fault_domain == fault_domain
    assert vm.zones == zones
    assert vm.hardware_profile.vm_size == "Standard_D2s_v3"
    assert vm.network_profile.network_interfaces[0].id.endswith(f"/{name}-nic")


def test_vms_are_listed_in_pages(
    emu: AzureEmulator, compute: ComputeManagementClient, nodes: list[dict[str, Any]]
) -> None:
    emu.admin.set_config(page_size=2)
    since = emu.admin.last_seq()
    names = [vm.name for vm in compute.virtual_machines.list("kccm-rg")]
    assert names == ["node-a", "node-b", "node-c"]
    lists = [
        r for r in emu.admin.requests(since) if r["op"] == "GET Microsoft.Compute/virtualMachines"
    ]
    assert len(lists) == 2
    assert "skiptoken" in lists[1]["query"]
    assert {r["api_version"] for r in lists} == {"2026-04-01"}


def test_power_changes_show_in_the_instance_view(
    emu: AzureEmulator, compute: ComputeManagementClient, nodes: list[dict[str, Any]]
) -> None:
    emu.admin.set_power(nodes[0]["id"], "deallocated")
    view = compute.virtual_machines.instance_view("kccm-rg", "node-a")
    assert power(view) == "PowerState/deallocated"
    compute.virtual_machines.begin_start("kccm-rg", "node-a").result()
    assert (
        power(compute.virtual_machines.instance_view("kccm-rg", "node-a")) == "PowerState/running"
    )


def test_a_missing_vm_is_resource_not_found(compute: ComputeManagementClient) -> None:
    with pytest.raises(ResourceNotFoundError) as caught:
        compute.virtual_machines.get("kccm-rg", "nope")
    assert caught.value.error is not None
    assert caught.value.error.code == "ResourceNotFound"


@pytest.fixture
def pool(emu: AzureEmulator) -> Iterator[dict[str, Any]]:
    made = emu.admin.add_vmss("pool-sdk", capacity=2, zones=["1", "2"], public_ip=True)
    yield made
    emu.admin.delete_vm(made["id"])  # the scale set, with its instances


def test_scale_set_instances_and_their_nics(
    emu: AzureEmulator, compute: ComputeManagementClient, pool: dict[str, Any]
) -> None:
    from azure_sdk_support import network_client

    since = emu.admin.last_seq()  # the module's other tests read NICs at the SDK's own version
    vms = list(
        compute.virtual_machine_scale_set_vms.list("kccm-rg", "pool-sdk", expand="instanceView")
    )
    assert [(v.instance_id, v.zones) for v in vms] == [("0", ["1"]), ("1", ["2"])]
    assert power(vms[0].instance_view) == "PowerState/running"
    with network_client(emu) as network:
        nics = list(
            network.network_interfaces.list_virtual_machine_scale_set_vm_network_interfaces(
                "kccm-rg", "pool-sdk", "1"
            )
        )
        one = network.network_interfaces.get_virtual_machine_scale_set_network_interface(
            "kccm-rg", "pool-sdk", "1", nics[0].name
        )
        ipc = one.ip_configurations[0]
        pip = network.public_ip_addresses.get_virtual_machine_scale_set_public_ip_address(
            "kccm-rg",
            "pool-sdk",
            "1",
            one.name,
            ipc.name,
            ipc.public_ip_address.id.rsplit("/", 1)[1],
        )
        assert pip.ip_address
        assert pip.ip_configuration.id == ipc.id
    assert (
        one.ip_configurations[0].private_ip_address
        == nics[0].ip_configurations[0].private_ip_address
    )
    assert one.virtual_machine.id == vms[1].id
    versions = {
        r["api_version"] for r in emu.admin.requests(since) if "networkInterfaces" in r["path"]
    }
    assert versions == {"2018-10-01"}


def test_a_vm_made_and_deleted_through_the_sdk(
    emu: AzureEmulator, compute: ComputeManagementClient
) -> None:
    from azure.mgmt.compute import models as cm
    from azure.mgmt.network import models as nm
    from azure_sdk_support import network_client

    emu.admin.set_config(lro_delay=0.2)
    subnet = emu.admin.resource(
        f"/subscriptions/{emu.config['subscription']}/resourceGroups/kccm-rg/providers/Microsoft.Network/virtualNetworks/kccm-vnet"
    )["properties"]["subnets"][0]["id"]
    with network_client(emu) as network:
        nic = network.network_interfaces.begin_create_or_update(
            "kccm-rg",
            "made-nic",
            nm.NetworkInterface(
                location="eastus",
                ip_configurations=[
                    nm.NetworkInterfaceIPConfiguration(
                        name="ipconfig1", subnet=nm.Subnet(id=subnet)
                    )
                ],
            ),
        ).result()
        aset = compute.availability_sets.create_or_update(
            "kccm-rg", "made-as", cm.AvailabilitySet(location="eastus")
        )
        vm = compute.virtual_machines.begin_create_or_update(
            "kccm-rg",
            "made-vm",
            cm.VirtualMachine(
                location="eastus",
                hardware_profile=cm.HardwareProfile(vm_size="Standard_D4s_v3"),
                availability_set=cm.SubResource(id=aset.id),
                network_profile=cm.NetworkProfile(
                    network_interfaces=[cm.NetworkInterfaceReference(id=nic.id, primary=True)]
                ),
            ),
        ).result()
        assert vm.provisioning_state == "Succeeded"
        assert vm.vm_id
        assert [a.name for a in compute.availability_sets.list("kccm-rg")] == ["made-as"]
        assert compute.availability_sets.get("kccm-rg", "made-as").virtual_machines[0].id == vm.id
        compute.virtual_machines.begin_delete("kccm-rg", "made-vm").result()
        compute.availability_sets.delete("kccm-rg", "made-as")
        network.network_interfaces.begin_delete("kccm-rg", "made-nic").result()
