"""A node's addresses from its VM's guest NICs, by the CPI's ``[Nodes]`` rules.

A port of ``DiscoverNode`` / ``discoverIPs`` and helpers in upstream
``pkg/cloudprovider/vsphere/nodemanager.go``:

- the guest host name is the ``Hostname`` address;
- NICs with ``deviceConfigId == -1`` (not a vNIC) and loopback, link-local and unspecified
  addresses are ignored; addresses statically configured in ``guestinfo.metadata`` come first;
- per IP family: addresses in an ``exclude-*`` subnet are dropped for that role; the first
  address in an ``internal``/``external-network-subnet-cidr`` wins; else the first on the
  ``internal``/``external-vm-network-name`` network; else the first address serves as both
  InternalIP and ExternalIP (upstream's legacy default);
- no usable address for a family is an error.
"""

from __future__ import annotations

import base64
import gzip
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from kccm.cloudprovider import CloudProviderError, NodeAddress
from kccm.providers.vsphere.configtypes import Network, NodesConfig
from kccm.providers.vsphere.inventory import GuestNic

__all__ = ["Candidate", "discover_ips", "node_addresses"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Candidate:
    """``ipAddrNetworkName``: one guest IP and the name of its NIC's network."""

    address: str
    network: str

    @property
    def ip(self) -> IPAddress | None:
        try:
            return ipaddress.ip_address(self.address)
        except ValueError:
            return None


def _usable(candidate: Candidate) -> bool:
    """Upstream ``ErrOnLocalOnlyIPAddr`` is nil."""
    ip = candidate.ip
    if ip is None:
        return False
    multicast_ll = ip.version == 6 and ip in ipaddress.ip_network("ff02::/16")
    if ip.version == 4 and ip in ipaddress.ip_network("224.0.0.0/24"):
        multicast_ll = True
    return not (ip.is_unspecified or ip.is_link_local or ip.is_loopback or multicast_ll)


def _family(candidate: Candidate, family: str) -> bool:
    ip = candidate.ip
    if ip is None:
        return False
    if family == "ipv6":
        return ip.version == 6 and ip.ipv4_mapped is None
    return ip.version == 4 or (ip.version == 6 and ip.ipv4_mapped is not None)


def _in(candidate: Candidate, subnet: Network) -> bool:
    ip = candidate.ip
    return ip is not None and ip.version == subnet.version and ip in subnet


def _excluding(candidates: Sequence[Candidate], subnets: Sequence[Network]) -> list[Candidate]:
    return [c for c in candidates if not any(_in(c, s) for s in subnets)]


def _subnet_match(candidates: Sequence[Candidate], subnets: Sequence[Network]) -> Candidate | None:
    for subnet in subnets:
        for candidate in candidates:
            if _in(candidate, subnet):
                return candidate
    return None


def _name_match(candidates: Sequence[Candidate], name: str) -> Candidate | None:
    if not name:
        return None
    return next((c for c in candidates if c.network.lower() == name.lower()), None)


def discover_ips(
    candidates: Sequence[Candidate], family: str, nodes: NodesConfig
) -> tuple[Candidate | None, Candidate | None]:
    """Upstream ``discoverIPs``: ``(internal, external)`` for one IP family."""
    matches = [c for c in candidates if _family(c, family)]
    internal_pool = _excluding(matches, nodes.exclude_internal_subnets)
    external_pool = _excluding(matches, nodes.exclude_external_subnets)
    if not internal_pool and not external_pool:
        return None, None
    internal = _subnet_match(internal_pool, nodes.internal_subnets)
    external = _subnet_match(external_pool, nodes.external_subnets)
    if internal is None:
        internal = _name_match(internal_pool, nodes.internal_network_name)
    if external is None:
        external = _name_match(external_pool, nodes.external_network_name)
    if internal is None and external is None:
        internal = internal_pool[0] if internal_pool else None
        external = external_pool[0] if external_pool else None
    return internal, external


def _static_order(guestinfo: Mapping[str, str]) -> dict[str, int]:
    """Addresses in cloud-init's ``guestinfo.metadata`` network config, in their order
    (upstream ``sortStaticallyConfiguredAddressesFirst``)."""
    metadata = guestinfo.get("guestinfo.metadata", "")
    if not metadata or guestinfo.get("guestinfo.metadata.encoding") != "base64":
        return {}
    try:
        document = yaml.safe_load(base64.b64decode(metadata)) or {}
        network = document.get("network")
        encoding = str(document.get("network.encoding", ""))
        if encoding in ("base64", "b64"):
            network = yaml.safe_load(base64.b64decode(str(network)))
        elif encoding in ("gzip+base64", "gz+b64"):
            network = yaml.safe_load(gzip.decompress(base64.b64decode(str(network))))
        ethernets = (network or {}).get("ethernets") or {}
    except (ValueError, TypeError, AttributeError, OSError, yaml.YAMLError) as err:
        raise CloudProviderError(
            f"guestinfo.metadata: cannot read the network config: {err}"
        ) from err
    order: dict[str, int] = {}
    for eth in ethernets.values():
        for address in (eth or {}).get("addresses") or ():
            try:
                ip = str(ipaddress.ip_address(str(address).split("/")[0]))
            except ValueError:
                continue
            order.setdefault(ip, len(order))
    return order


def _sorted(candidates: list[Candidate], guestinfo: Mapping[str, str]) -> list[Candidate]:
    order = _static_order(guestinfo)
    if not order:
        return candidates
    return sorted(candidates, key=lambda c: (c.address not in order, order.get(c.address, 0)))


def _append(addresses: list[NodeAddress], address: NodeAddress) -> None:
    """``v1helper.AddToNodeAddresses``: no duplicates."""
    if address not in addresses:
        addresses.append(address)


def node_addresses(
    hostname: str,
    nics: Sequence[GuestNic],
    nodes: NodesConfig,
    families: Sequence[str],
    guestinfo: Mapping[str, str] | None = None,
) -> list[NodeAddress]:
    """The node's addresses; CloudProviderError with upstream's reason when there are none."""
    if not hostname:
        raise CloudProviderError("VM Guest hostname is empty (are VMware Tools running?)")
    if not nics:
        raise CloudProviderError("VM GuestNicInfo is empty (are VMware Tools running?)")
    vnics = [n for n in nics if n.device_config_id != -1]
    names = {n.network.lower() for n in vnics}
    internal_name, external_name = nodes.internal_network_name, nodes.external_network_name
    if (
        internal_name
        and external_name
        and internal_name.lower() not in names
        and external_name.lower() not in names
    ):
        raise CloudProviderError("unable to find suitable IP address for node")
    candidates = [Candidate(a, n.network) for n in vnics for a in n.addresses]
    usable = [c for c in candidates if _usable(c)]
    if not usable:
        raise CloudProviderError(
            "unable to find suitable IP address for node after filtering out localhost IPs"
        )
    usable = _sorted(usable, guestinfo or {})
    addresses = [NodeAddress("Hostname", hostname)]
    for family in families:
        internal, external = discover_ips(usable, family, nodes)
        if internal is not None:
            _append(addresses, NodeAddress("InternalIP", internal.address))
        if external is not None:
            _append(addresses, NodeAddress("ExternalIP", external.address))
        if internal is None and external is None:
            raise CloudProviderError(
                f"unable to find suitable IP address for node with IP family {family}"
            )
    return addresses
