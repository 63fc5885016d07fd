"""A node's addresses from its Nova server and Neutron ports, by OCCM's rules.

A port of ``nodeAddresses`` and its helpers in ``pkg/openstack/instances_addresses.go``
(v1.36.0). In order:

1. the fixed IPs of the server's ``ACTIVE`` ports, as ``InternalIP`` (IPv6 ones skipped with
   ``[Networking] ipv6-support-disabled``);
2. ``accessIPv4`` / ``accessIPv6`` as ``ExternalIP``;
3. the server's ``metadata.hostname`` as ``Hostname``;
4. the server's ``addresses`` (plus the fixed IPs of trunk subports, under their network's
   name), networks in name order: ``OS-EXT-IPS:type: floating`` is ``ExternalIP``; a network
   in ``public-network-name`` is ``ExternalIP`` (and the same address as anything else is
   dropped); otherwise ``InternalIP`` when ``internal-network-name`` is empty or names the
   network, else the address is dropped everywhere;
5. with ``address-sort-order`` (comma-separated CIDRs), a stable sort: addresses in the first
   CIDR first, grouped per CIDR and ascending inside a group; the others keep their order.

An address already present with the same type is not added twice (``addToNodeAddresses``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import NodeAddress, NodeAddressType
from kccm.providers.openstack.config import NetworkingOpts

__all__ = [
    "is_ipv6",
    "node_addresses",
    "sort_addresses",
    "sort_order_networks",
]

INTERNAL = str(NodeAddressType.INTERNAL_IP)
EXTERNAL = str(NodeAddressType.EXTERNAL_IP)
HOSTNAME = str(NodeAddressType.HOSTNAME)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def is_ipv6(address: str) -> bool:
    """``net.ParseIP(a).To4() == nil``: true for IPv6, and for anything that is no IP."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return False
    return ip.version == 6


def _add(addresses: list[NodeAddress], kind: str, address: str) -> None:
    """``addToNodeAddresses``."""
    candidate = NodeAddress(type=kind, address=address)
    if candidate not in addresses:
        addresses.append(candidate)


def _remove(addresses: list[NodeAddress], address: str) -> None:
    """``removeFromNodeAddresses`` with an empty type: every type of ``address``."""
    addresses[:] = [a for a in addresses if a.address != address]


def _allowed(address: str, networking: NetworkingOpts) -> bool:
    return not is_ipv6(address) or not networking.ipv6_support_disabled


def _port_addresses(
    addresses: list[NodeAddress], ports: Iterable[Mapping[str, Any]], networking: NetworkingOpts
) -> None:
    for port in ports:
        if port.get("status") != "ACTIVE":
            continue
        for fixed in port.get("fixed_ips") or ():
            address = str(fixed.get("ip_address", ""))
            if _allowed(address, networking):
                _add(addresses, INTERNAL, address)


def _server_entries(
    server: Mapping[str, Any], subports: Mapping[str, Sequence[str]], networking: NetworkingOpts
) -> dict[str, list[tuple[str, str]]]:
    """``srv.Addresses`` decoded to ``network -> [(type, addr)]``, trunk subports appended."""
    entries: dict[str, list[tuple[str, str]]] = {}
    for network, items in (server.get("addresses") or {}).items():
        entries[str(network)] = [
            (str(item.get("OS-EXT-IPS:type", "")), str(item.get("addr", "")))
            for item in items or ()
            if isinstance(item, Mapping)
        ]
    for network, subport_ips in subports.items():
        for address in subport_ips:
            if _allowed(address, networking):
                entries.setdefault(network, []).append(("fixed", address))
    return entries


def _network_addresses(
    addresses: list[NodeAddress],
    entries: Mapping[str, Sequence[tuple[str, str]]],
    networking: NetworkingOpts,
) -> None:
    for network in sorted(entries):
        for ip_type, address in entries[network]:
            if ip_type == "floating":
                kind = EXTERNAL
            elif network in networking.public_network_name:
                kind = EXTERNAL
                _remove(addresses, address)
            elif not networking.internal_network_name or network in (
                networking.internal_network_name
            ):
                kind = INTERNAL
            else:
                _remove(addresses, address)  # ignored due to internal-network-name
                continue
            if _allowed(address, networking):
                _add(addresses, kind, address)


def node_addresses(
    server: Mapping[str, Any],
    ports: Sequence[Mapping[str, Any]],
    networking: NetworkingOpts,
    subports: Mapping[str, Sequence[str]] | None = None,
) -> list[NodeAddress]:
    """``nodeAddresses``: ``server`` as Nova's ``servers/detail`` returns it (no
    microversion), ``ports`` its Neutron ports, ``subports`` the fixed IPs of its trunk
    subports by network name."""
    addresses: list[NodeAddress] = []
    _port_addresses(addresses, ports, networking)
    access_v4 = str(server.get("accessIPv4") or "")
    if access_v4:
        _add(addresses, EXTERNAL, access_v4)
    access_v6 = str(server.get("accessIPv6") or "")
    if access_v6 and not networking.ipv6_support_disabled:
        _add(addresses, EXTERNAL, access_v6)
    hostname = str((server.get("metadata") or {}).get("hostname") or "")
    if hostname:
        _add(addresses, HOSTNAME, hostname)
    _network_addresses(addresses, _server_entries(server, subports or {}, networking), networking)
    if networking.address_sort_order:
        addresses = sort_addresses(addresses, networking.address_sort_order)
    return addresses


def sort_order_networks(order: str) -> list[Network]:
    """``buildAddressSortOrderList``: the valid CIDRs of ``order`` (split on commas and
    spaces, as ``util.SplitTrim``); invalid items are skipped (warned about at load)."""
    found: list[Network] = []
    for item in order.replace(",", " ").split():
        if "/" not in item:
            continue
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            continue
    return found


def _ip16(address: str) -> bytes:
    """Go's ``net.ParseIP`` form: 16 bytes, IPv4 as IPv4-mapped IPv6."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv4Address):
        return b"\x00" * 10 + b"\xff\xff" + ip.packed
    return ip.packed


def _priority(networks: Sequence[Network], address: str) -> int:
    """``getSortPriority``: ``len - index`` of the first CIDR containing it, else 0."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return 0
    for index, network in enumerate(networks):
        if ip.version == network.version and ip in network:
            return len(networks) - index
    return 0


def sort_addresses(addresses: Sequence[NodeAddress], order: str) -> list[NodeAddress]:
    """``sortNodeAddresses``: a stable sort by priority, ascending IPs within a priority."""
    networks = sort_order_networks(order)

    def key(item: NodeAddress) -> tuple[int, bytes]:
        priority = _priority(networks, item.address)
        return (-priority, _ip16(item.address) if priority else b"")

    return sorted(addresses, key=key)
