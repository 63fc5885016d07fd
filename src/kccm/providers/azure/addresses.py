"""A Node's addresses from its primary network interface.

Upstream v1.36.5 (``addressGetter`` in ``pkg/provider/azure_instances_v1.go``, with
``GetIPByNodeName`` of ``azure_standard.go`` and ``azure_vmss.go``): the primary NIC's primary
IP configuration (the only one, else the one marked ``primary``) gives the ``InternalIP``, the
node name the ``Hostname``, and the public IP on that IP configuration, when it has an
address, the ``ExternalIP``; in that order.

A scale set (Uniform) VM's public IP is a child of its IP configuration
(``.../virtualMachineScaleSets/<ss>/virtualMachines/<i>/networkInterfaces/<nic>/
ipConfigurations/<ipc>/publicIPAddresses/<pip>``, ``vmssPIPConfigurationRE`` in
``azure_vmss.go``): upstream GETs it there (``getVMSSPublicIPAddress``) and reports no
``ExternalIP``, with a warning, for an ID of another form (:func:`scale_set_public_ip`). kccm
matches the ID without regard to case.

**kccm adds IPv6** on a dual-stack NIC: when the primary IP configuration is IPv4, the first
IPv6 IP configuration of the same NIC adds an ``InternalIP`` (and an ``ExternalIP`` for its
public IP). Upstream's cloud-node-manager reports those from IMDS
(``getLocalInstanceNodeAddresses``); kccm initialises Nodes centrally from ARM and keeps them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kccm.cloudprovider import CloudProviderError, NodeAddress, NodeAddressType

__all__ = ["node_addresses", "primary_ip_configuration", "public_ip_ids", "scale_set_public_ip"]

_VMSS_PIP = re.compile(
    r".*/subscriptions/(?:.*)/resourceGroups/(.+)/providers/Microsoft.Compute/"
    r"virtualMachineScaleSets/(.+)/virtualMachines/(.+)/networkInterfaces/(.+)/"
    r"ipConfigurations/(.+)/publicIPAddresses/(.+)",
    re.IGNORECASE,
)

PublicAddress = Callable[[str], str | None]
"""Given a public IP's resource ID, its address (``None`` when it has none or is gone)."""


def scale_set_public_ip(pip_id: str) -> tuple[str, str] | None:
    """The resource group and scale set of a scale set VM's public IP ID, ``None`` when the ID
    is not of that form (``vmssPIPConfigurationRE``, ``azure_vmss.go`` v1.36.5)."""
    found = _VMSS_PIP.match(pip_id)
    return None if found is None else (found.group(1), found.group(2))


def _configs(nic: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    configs = (nic.get("properties") or {}).get("ipConfigurations")
    if configs is None:
        raise CloudProviderError(
            f"nic.Properties.IPConfigurations for nic (nicname={nic.get('name')!r}) is nil"
        )
    return [c for c in configs if isinstance(c, Mapping)]


def primary_ip_configuration(nic: Mapping[str, Any]) -> Mapping[str, Any]:
    """``getPrimaryIPConfig``."""
    configs = _configs(nic)
    if len(configs) == 1:
        return configs[0]
    for config in configs:
        if (config.get("properties") or {}).get("primary"):
            return config
    raise CloudProviderError(
        f"failed to determine the primary ipconfig. nicname={nic.get('name')!r}"
    )


def _version(config: Mapping[str, Any]) -> str:
    props = config.get("properties") or {}
    version = str(props.get("privateIPAddressVersion") or "")
    if version:
        return version
    return "IPv6" if ":" in str(props.get("privateIPAddress") or "") else "IPv4"


def _public_id(config: Mapping[str, Any]) -> str:
    return str(((config.get("properties") or {}).get("publicIPAddress") or {}).get("id") or "")


def public_ip_ids(nic: Mapping[str, Any]) -> list[str]:
    """The public IPs the addresses would read (for batching their lookup)."""
    wanted = [primary_ip_configuration(nic), *_ipv6_extra(nic)]
    return [pid for pid in (_public_id(c) for c in wanted) if pid]


def _ipv6_extra(nic: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    primary = primary_ip_configuration(nic)
    if _version(primary) != "IPv4":
        return []
    for config in _configs(nic):
        props = config.get("properties") or {}
        if _version(config) == "IPv6" and props.get("privateIPAddress"):
            return [config]
    return []


def _pair(config: Mapping[str, Any], public: PublicAddress) -> tuple[str, str]:
    private = str((config.get("properties") or {}).get("privateIPAddress") or "")
    pid = _public_id(config)
    return private, (public(pid) or "") if pid else ""


def node_addresses(
    node_name: str, nic: Mapping[str, Any], public: PublicAddress
) -> list[NodeAddress]:
    """The Node's addresses (see the module doc)."""
    private, external = _pair(primary_ip_configuration(nic), public)
    if not private:
        raise CloudProviderError(f"no private IP on the primary ipconfig of {nic.get('name')!r}")
    found = [
        NodeAddress(NodeAddressType.INTERNAL_IP, private),
        NodeAddress(NodeAddressType.HOSTNAME, node_name),
    ]
    if external:
        found.append(NodeAddress(NodeAddressType.EXTERNAL_IP, external))
    for config in _ipv6_extra(nic):
        private6, external6 = _pair(config, public)
        found.append(NodeAddress(NodeAddressType.INTERNAL_IP, private6))
        if external6:
            found.append(NodeAddress(NodeAddressType.EXTERNAL_IP, external6))
    return found
