"""The balancer's ARM adapter sends each kind of resource at upstream's api-version and turns
412 into PreconditionFailed; the settings come from azure.json as resolved."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.providers.azure.arm_errors import ARMPreconditionFailed
from kccm.providers.azure.config_fields import AzureConfig
from kccm.providers.azure.loadbalancer import PreconditionFailed
from kccm.providers.azure.loadbalancer.armclient import ClientArm, lb_settings
from kccm.providers.azure.versions import API_VERSIONS

S = "/subscriptions/s/resourceGroups/rg/providers"


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, Any]] = []

    def url(self, path: str) -> str:
        return f"https://arm{path}"

    def find(self, path: str, version: str, *, operation: str) -> dict[str, Any] | None:
        self.calls.append(("find", path, version, operation))
        return None

    def put(self, path: str, body: Any, version: str, *, operation: str, if_match: Any) -> Any:
        self.calls.append(("put", path, version, if_match))
        if if_match == "stale":
            raise ARMPreconditionFailed("412")
        return body


@pytest.mark.parametrize(
    ("path", "version", "operation"),
    [
        (f"{S}/Microsoft.Network/loadBalancers/k", API_VERSIONS.load_balancers, "loadbalancer"),
        (
            f"{S}/Microsoft.Network/publicIPAddresses/p",
            API_VERSIONS.public_ip_addresses,
            "publicip",
        ),
        (
            f"{S}/Microsoft.Network/networkSecurityGroups/n",
            API_VERSIONS.security_groups,
            "securitygroup",
        ),
        (
            f"{S}/Microsoft.Network/networkInterfaces/n",
            API_VERSIONS.network_interfaces,
            "interface",
        ),
        (f"{S}/Microsoft.Network/virtualNetworks/v/subnets/s", API_VERSIONS.subnets, "subnet"),
        (f"{S}/Microsoft.Compute/virtualMachines/vm", API_VERSIONS.virtual_machines, "vm"),
        (
            f"{S}/Microsoft.Compute/virtualMachineScaleSets/ss",
            API_VERSIONS.virtual_machine_scale_sets,
            "vmss",
        ),
        (
            f"{S}/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/3",
            API_VERSIONS.virtual_machine_scale_set_vms,
            "vmssvm",
        ),
    ],
)
def test_each_kind_at_upstreams_version(path: str, version: str, operation: str) -> None:
    client = RecordingClient()
    ClientArm(client, API_VERSIONS).get(path)  # type: ignore[arg-type]
    assert client.calls == [("find", path, version, f"{operation}:get")]


def test_stale_etag_is_precondition_failed() -> None:
    arm = ClientArm(RecordingClient(), API_VERSIONS)  # type: ignore[arg-type]
    with pytest.raises(PreconditionFailed):
        arm.put(f"{S}/Microsoft.Network/loadBalancers/k", {"etag": "x"}, if_match="stale")


def test_settings_from_config() -> None:
    config = AzureConfig(
        subscription_id="s",
        resource_group="rg",
        location="westus",
        load_balancer_sku="basic",
        security_group_name="nsg",
    )
    got = lb_settings(config)
    assert (got.standard, got.nsg_path()) == (
        False,
        f"{S}/Microsoft.Network/networkSecurityGroups/nsg",
    )
