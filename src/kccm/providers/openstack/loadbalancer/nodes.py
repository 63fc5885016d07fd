"""Nodes as load-balancer members: their address, their server, their subnet (upstream
``pkg/openstack/loadbalancer.go`` v1.36.0 ``nodeAddressForLB``, ``getSubnetIDForLB``,
``filterNodes``/``matchNodeLabels``; ``instances.go`` ``instanceIDFromProviderID``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError, Node, NodeExclusion, node_name, node_provider_id
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer.annotations import ServiceAnnotations
from kccm.providers.openstack.loadbalancer.neutron import Neutron

__all__ = [
    "filter_nodes",
    "instance_id_from_provider_id",
    "ip_family_of",
    "node_address_for_lb",
    "node_exclusion",
    "subnet_id_for_lb",
]

_PROVIDER_ID = re.compile(r"^openstack://([^/]*)/([^/]+)$")


def ip_family_of(address: str) -> str:
    """``IPv4``, ``IPv6`` or ``""`` for something that is no IP address."""
    try:
        return "IPv6" if ipaddress.ip_address(address).version == 6 else "IPv4"
    except ValueError:
        return ""


def node_address_for_lb(node: Node, family: str = "") -> str:
    """Upstream ``nodeAddressForLB``: the first InternalIP, else the first ExternalIP, of the
    preferred family when one is given; ``""`` when the node has none."""
    addresses: Sequence[Mapping[str, Any]] = (node.get("status") or {}).get("addresses") or ()
    for wanted in ("InternalIP", "ExternalIP"):
        for item in addresses:
            if item.get("type") != wanted:
                continue
            address = str(item.get("address", ""))
            if not family or ip_family_of(address) == family:
                return address
    return ""


def instance_id_from_provider_id(provider_id: str) -> str:
    """Upstream ``instanceIDFromProviderID``: ``openstack://<region>/<id>`` (a bare ID is
    read as ``openstack://<id>``, which then fails as upstream's does)."""
    if provider_id and "://" not in provider_id:
        provider_id = "openstack://" + provider_id
    match = _PROVIDER_ID.match(provider_id)
    if not match:
        raise CloudProviderError(
            f'ProviderID "{provider_id}" didn\'t match expected format '
            '"openstack://region/InstanceID"'
        )
    return match.group(2)


def subnet_id_for_lb(neutron: Neutron, node: Node, family: str) -> str:
    """Upstream ``getSubnetIDForLB``: the subnet of the node's member address, found among
    the fixed IPs of its server's ports."""
    address = node_address_for_lb(node, family)
    if not address:
        raise CloudProviderError(f"no address found for node {node_name(node)}")
    provider_id = node_provider_id(node)
    try:
        server_id = instance_id_from_provider_id(provider_id)
    except CloudProviderError as err:
        raise CloudProviderError(
            f"can't determine instance ID from ProviderID when autodetecting LB subnet: {err}"
        ) from err
    for port in neutron.ports(device_id=server_id):
        for fixed in port.get("fixed_ips") or ():
            if fixed.get("ip_address") == address:
                return str(fixed.get("subnet_id", ""))
    raise CloudProviderError(f"no port of server {server_id} has address {address}")


def _matches(node: Node, wanted: Mapping[str, str]) -> bool:
    labels: Mapping[str, str] = (node.get("metadata") or {}).get("labels") or {}
    if not labels:
        return False
    return all(k in labels and (not v or labels[k] == v) for k, v in wanted.items())


def node_exclusion(notes: ServiceAnnotations, default_selector: str) -> NodeExclusion | None:
    """Why the node selector (annotation ``node-selector``, else ``[LoadBalancer]
    node-selector``) leaves a node out; None without a selector."""
    wanted = notes.node_selectors(default_selector)
    if not wanted:
        return None
    origin = (
        f"annotation {ann.NODE_SELECTOR}"
        if notes.node_selector is not None
        else "[LoadBalancer] node-selector"
    )
    selector = ",".join(f"{k}={v}" if v else k for k, v in wanted.items())
    why = f"does not match {origin} {selector}"
    return lambda node: None if _matches(node, wanted) else why


def filter_nodes(nodes: Sequence[Node], wanted: Mapping[str, str]) -> list[Node]:
    """Upstream ``filterNodes``: the nodes carrying every label of the node selector."""
    if not wanted:
        return list(nodes)
    return [node for node in nodes if _matches(node, wanted)]
