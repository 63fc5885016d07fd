"""The Azure SDK for Python meets the emulator's faults as it meets ARM's: a 429 with
Retry-After retried after the pause it asks for, ARM's error bodies parsed into
HttpResponseError with their code, a 401 for an expired token, short-lived tokens renewed;
and scale-set pool membership through the model and an instance (If-Match on the instance)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.compute import models as cm
from azure.mgmt.network import NetworkManagementClient
from azure_sdk_support import compute_client, leaves_nothing, network_client

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.testing.certs import emulator_tls

RG = "kccm-rg"


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as emulator:
        yield emulator


@pytest.fixture(scope="module")
def network(emu: AzureEmulator) -> Iterator[NetworkManagementClient]:
    with network_client(emu, retry_total=2, retry_backoff_factor=0) as client:
        yield client


@pytest.fixture(scope="module")
def compute(emu: AzureEmulator) -> Iterator[ComputeManagementClient]:
    with compute_client(emu) as client:
        yield client


@pytest.fixture(autouse=True)
def clean(emu: AzureEmulator) -> Iterator[None]:
    yield from leaves_nothing(emu)


def test_a_429_is_retried_after_its_retry_after(
    emu: AzureEmulator, network: NetworkManagementClient
) -> None:
    emu.admin.fault("/routeTables/kccm-rt$", method="GET", kind="throttle", retry_after=1)
    since = emu.admin.last_seq()
    assert network.route_tables.get(RG, "kccm-rt").name == "kccm-rt"
    calls = [r for r in emu.admin.requests(since) if r["path"].endswith("/kccm-rt")]
    assert [r["status"] for r in calls] == [429, 200]
    assert calls[1]["at"] - calls[0]["at"] >= 1  # the pause Retry-After asked for


@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param(400, "InvalidParameter", id="bad-request"),
        pytest.param(409, "AnotherOperationInProgress", id="conflict"),
        pytest.param(403, "AuthorizationFailed", id="forbidden"),
    ],
)
def test_arm_errors_parse_into_the_sdks_exception(
    emu: AzureEmulator, network: NetworkManagementClient, status: int, code: str
) -> None:
    emu.admin.fault(
        "/routeTables/kccm-rt$", method="GET", status=status, code=code, message="injected"
    )
    with pytest.raises(HttpResponseError) as caught:
        network.route_tables.get(RG, "kccm-rt")
    assert caught.value.status_code == status
    assert caught.value.error is not None
    assert (caught.value.error.code, caught.value.error.message) == (code, "injected")


def test_an_expired_token_is_a_401(emu: AzureEmulator) -> None:
    with network_client(emu) as client:
        client.route_tables.get(RG, "kccm-rt")
        emu.admin.fault("/routeTables/kccm-rt$", kind="expire_token")
        with pytest.raises(ClientAuthenticationError) as caught:
            client.route_tables.get(RG, "kccm-rt")
    assert caught.value.error is not None
    assert caught.value.error.code == "ExpiredAuthenticationToken"


def test_short_lived_tokens_are_renewed(emu: AzureEmulator) -> None:
    emu.admin.set_config(token_ttl=60)
    try:
        since = emu.admin.last_seq()
        with network_client(emu) as client:
            for _ in range(2):
                client.route_tables.get(RG, "kccm-rt")
        signed = [
            r for r in emu.admin.requests(since) if r["service"] == "adfs" and r["method"] == "POST"
        ]
        assert len(signed) == 2
    finally:
        emu.admin.set_config(token_ttl=3600)


@pytest.fixture
def pool(emu: AzureEmulator, network: NetworkManagementClient) -> Iterator[dict[str, Any]]:
    from azure.mgmt.network import models as m

    scale = emu.admin.add_vmss("pool-lb", capacity=2)
    pip = network.public_ip_addresses.begin_create_or_update(
        RG,
        "pip-pool",
        m.PublicIPAddress(
            location="eastus",
            sku=m.PublicIPAddressSku(name="Standard"),
            public_ip_allocation_method="Static",
        ),
    ).result()
    lb = network.load_balancers.begin_create_or_update(
        RG,
        "kubernetes",
        m.LoadBalancer(
            location="eastus",
            sku=m.LoadBalancerSku(name="Standard"),
            frontend_ip_configurations=[
                m.FrontendIPConfiguration(name="fe", public_ip_address=m.PublicIPAddress(id=pip.id))
            ],
            backend_address_pools=[m.BackendAddressPool(name="kubernetes")],
        ),
    ).result()
    yield {"vmss": scale, "pool": lb.backend_address_pools[0].id}
    emu.admin.delete_vm(scale["id"])
    network.load_balancers.begin_delete(RG, "kubernetes").result()
    network.public_ip_addresses.begin_delete(RG, "pip-pool").result()


def test_pool_membership_through_the_model_and_an_instance(
    emu: AzureEmulator,
    compute: ComputeManagementClient,
    network: NetworkManagementClient,
    pool: dict[str, Any],
) -> None:
    vmss = compute.virtual_machine_scale_sets.get(RG, "pool-lb")
    ipc = vmss.virtual_machine_profile.network_profile.network_interface_configurations[
        0
    ].ip_configurations[0]
    ipc.load_balancer_backend_address_pools = [cm.SubResource(id=pool["pool"])]
    update = cm.VirtualMachineScaleSetUpdate(
        virtual_machine_profile=cm.VirtualMachineScaleSetUpdateVMProfile(
            network_profile=cm.VirtualMachineScaleSetUpdateNetworkProfile(
                network_interface_configurations=[
                    cm.VirtualMachineScaleSetUpdateNetworkConfiguration(
                        name=vmss.virtual_machine_profile.network_profile.network_interface_configurations[
                            0
                        ].name,
                        primary=True,
                        ip_configurations=[
                            cm.VirtualMachineScaleSetUpdateIPConfiguration(
                                name=ipc.name,
                                subnet=cm.ApiEntityReference(id=ipc.subnet.id),
                                load_balancer_backend_address_pools=[
                                    cm.SubResource(id=pool["pool"])
                                ],
                            )
                        ],
                    )
                ]
            )
        )
    )
    compute.virtual_machine_scale_sets.begin_update(RG, "pool-lb", update).result()
    assert not compute.virtual_machine_scale_set_vms.get(RG, "pool-lb", "0").latest_model_applied
    compute.virtual_machine_scale_sets.begin_update_instances(
        RG, "pool-lb", cm.VirtualMachineScaleSetVMInstanceRequiredIDs(instance_ids=["0"])
    ).result()
    members = (
        network.load_balancers.get(RG, "kubernetes")
        .backend_address_pools[0]
        .backend_ip_configurations
    )
    assert len(members) == 1
    assert "/virtualMachines/0/" in members[0].id
    vm = compute.virtual_machine_scale_set_vms.get(RG, "pool-lb", "1")
    config = vm.network_profile_configuration.network_interface_configurations[0]
    config.ip_configurations[0].load_balancer_backend_address_pools = [
        cm.SubResource(id=pool["pool"])
    ]
    compute.virtual_machine_scale_set_vms.begin_update(
        RG, "pool-lb", "1", vm, headers={"If-Match": vm.etag}
    ).result()
    with pytest.raises(HttpResponseError) as caught:
        compute.virtual_machine_scale_set_vms.begin_update(
            RG, "pool-lb", "1", vm, headers={"If-Match": vm.etag}
        ).result()
    assert caught.value.status_code == 412
    members = (
        network.load_balancers.get(RG, "kubernetes")
        .backend_address_pools[0]
        .backend_ip_configurations
    )
    assert len(members) == 2
    vmss = compute.virtual_machine_scale_sets.get(RG, "pool-lb")
    ipc = vmss.virtual_machine_profile.network_profile.network_interface_configurations[
        0
    ].ip_configurations[0]
    ipc.load_balancer_backend_address_pools = []
    compute.virtual_machine_scale_sets.begin_create_or_update(RG, "pool-lb", vmss).result()
    compute.virtual_machine_scale_sets.begin_update_instances(
        RG, "pool-lb", cm.VirtualMachineScaleSetVMInstanceRequiredIDs(instance_ids=["0", "1"])
    ).result()
    assert (
        not network.load_balancers.get(RG, "kubernetes")
        .backend_address_pools[0]
        .backend_ip_configurations
    )
