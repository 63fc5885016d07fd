"""The ``api-version`` of every ARM request, as upstream v1.36.5 sends it.

Upstream's clients (``pkg/azclient/*client``) are the Go SDK's: ``armcompute/v7`` v7.3.0,
``armnetwork/v9`` v9.0.0 and ``armresources`` v1.2.0 (``pkg/azclient/go.mod``), whose
generated clients pin one version each (``vendor/.../armcompute/v7/*_client.go``:
``reqQP.Set("api-version", ...)``). Two network calls keep an older pin in the SDK: the scale
set network interface reads (``interfaces_client.go``:
``GetVirtualMachineScaleSetNetworkInterface``, ``ListVirtualMachineScaleSetNetworkInterfaces``)
and the scale set public IP reads
(``publicipaddresses_client.go``), at ``2018-10-01``.

On Azure Stack (``cloud: AzureStackCloud`` without ``disableAzureStackCloud``) every client is
built with ``ClientOptions.APIVersion`` = its package's ``AzureStackCloudAPIVersion``
(``pkg/azclient/factory_gen.go``), which the SDK's pipeline puts on every request of that
client (``zz_generated_client.go`` of each client package).

kccm sends exactly these, so its request log and upstream's compare line for line.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["API_VERSIONS", "ApiVersions", "api_versions"]

COMPUTE = "2025-04-01"
NETWORK = "2025-05-01"
NETWORK_VMSS_LEGACY = "2018-10-01"
RESOURCES = "2021-04-01"


@dataclass(frozen=True)
class ApiVersions:
    """One ``api-version`` per kind of resource kccm reads or writes."""

    virtual_machines: str = COMPUTE
    virtual_machine_scale_sets: str = COMPUTE
    virtual_machine_scale_set_vms: str = COMPUTE
    availability_sets: str = COMPUTE
    network_interfaces: str = NETWORK
    vmss_network_interfaces: str = NETWORK_VMSS_LEGACY
    public_ip_addresses: str = NETWORK
    vmss_public_ip_addresses: str = NETWORK_VMSS_LEGACY
    load_balancers: str = NETWORK
    security_groups: str = NETWORK
    route_tables: str = NETWORK
    routes: str = NETWORK
    subnets: str = NETWORK
    virtual_networks: str = NETWORK
    providers: str = RESOURCES


API_VERSIONS = ApiVersions()
"""Public Azure (and Azure Stack with ``disableAzureStackCloud: true``)."""

STACK_API_VERSIONS = ApiVersions(
    virtual_machines="2017-12-01",
    virtual_machine_scale_sets="2019-07-01",
    virtual_machine_scale_set_vms="2019-07-01",
    availability_sets="2019-07-01",
    network_interfaces="2018-11-01",
    vmss_network_interfaces="2018-11-01",
    public_ip_addresses="2018-11-01",
    vmss_public_ip_addresses="2018-11-01",
    load_balancers="2018-11-01",
    security_groups="2018-11-01",
    route_tables="2018-11-01",
    routes="2018-11-01",
    subnets="2018-11-01",
    virtual_networks=NETWORK,  # virtualnetworkclient has no Azure Stack pin
    providers=RESOURCES,
)
"""Each client package's ``AzureStackCloudAPIVersion`` (v1.36.5)."""


def api_versions(stack: bool) -> ApiVersions:
    """The versions for Azure Stack (``stack``) or public Azure."""
    return STACK_API_VERSIONS if stack else API_VERSIONS
