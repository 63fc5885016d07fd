"""Node addresses by OCCM's nodeAddresses rules (instances_addresses.go), table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider import NodeAddress
from kccm.providers.openstack.addresses import is_ipv6, node_addresses, sort_addresses
from kccm.providers.openstack.config import NetworkingOpts


def port(*ips: str, status: str = "ACTIVE") -> dict[str, Any]:
    return {"status": status, "fixed_ips": [{"ip_address": ip} for ip in ips]}


def addr(ip: str, kind: str = "fixed") -> dict[str, str]:
    return {"addr": ip, "OS-EXT-IPS:type": kind}


INT, EXT, HOST = "InternalIP", "ExternalIP", "Hostname"
PRIVATE = {"private": [addr("10.0.0.5"), addr("fd00::5"), addr("172.24.4.9", "floating")]}

CASES: list[tuple[str, dict[str, Any], list[Any], NetworkingOpts, list[tuple[str, str]]]] = [
    (
        "ports-then-server-addresses",
        {"addresses": PRIVATE},
        [port("10.0.0.5", "fd00::5")],
        NetworkingOpts(),
        [(INT, "10.0.0.5"), (INT, "fd00::5"), (EXT, "172.24.4.9")],
    ),
    (
        "down-port-skipped",
        {"addresses": {}},
        [port("10.0.0.7", status="DOWN"), port("10.0.0.8")],
        NetworkingOpts(),
        [(INT, "10.0.0.8")],
    ),
    (
        "ipv6-support-disabled",
        {"addresses": PRIVATE, "accessIPv6": "2001:db8::1"},
        [port("10.0.0.5", "fd00::5")],
        NetworkingOpts(ipv6_support_disabled=True),
        [(INT, "10.0.0.5"), (EXT, "172.24.4.9")],
    ),
    (
        "access-ips-are-external",
        {"addresses": {}, "accessIPv4": "203.0.113.4", "accessIPv6": "2001:db8::4"},
        [],
        NetworkingOpts(),
        [(EXT, "203.0.113.4"), (EXT, "2001:db8::4")],
    ),
    (
        "hostname-from-metadata",
        {"addresses": {}, "metadata": {"hostname": "n1.example"}},
        [port("10.0.0.5")],
        NetworkingOpts(),
        [(INT, "10.0.0.5"), (HOST, "n1.example")],
    ),
    (
        "public-network-name-makes-external-and-drops-the-internal",
        {"addresses": {"private": [addr("10.0.0.5")]}},
        [port("10.0.0.5")],
        NetworkingOpts(public_network_name=["private"]),
        [(EXT, "10.0.0.5")],
    ),
    (
        "internal-network-name-drops-other-networks",
        {"addresses": {"a": [addr("10.1.0.5")], "b": [addr("10.2.0.5")]}},
        [port("10.1.0.5"), port("10.2.0.5")],
        NetworkingOpts(internal_network_name=["b"]),
        [(INT, "10.2.0.5")],
    ),
    (
        "internal-network-name-keeps-floating",
        {"addresses": {"a": [addr("10.1.0.5"), addr("172.24.4.2", "floating")]}},
        [],
        NetworkingOpts(internal_network_name=["b"]),
        [(EXT, "172.24.4.2")],
    ),
    (
        "networks-in-name-order",
        {"addresses": {"zeta": [addr("10.9.0.1")], "alpha": [addr("10.1.0.1")]}},
        [],
        NetworkingOpts(),
        [(INT, "10.1.0.1"), (INT, "10.9.0.1")],
    ),
    (
        "no-duplicates",
        {"addresses": {"private": [addr("10.0.0.5"), addr("10.0.0.5")]}},
        [port("10.0.0.5"), port("10.0.0.5")],
        NetworkingOpts(),
        [(INT, "10.0.0.5")],
    ),
    (
        "address-sort-order",
        {"addresses": PRIVATE, "metadata": {"hostname": "h"}},
        [port("10.0.0.5", "fd00::5")],
        NetworkingOpts(address_sort_order="fd00::/64, 172.24.4.0/24"),
        [(INT, "fd00::5"), (EXT, "172.24.4.9"), (INT, "10.0.0.5"), (HOST, "h")],
    ),
]


@pytest.mark.parametrize(
    ("server", "ports", "networking", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_node_addresses(
    server: dict[str, Any],
    ports: list[Any],
    networking: NetworkingOpts,
    expected: list[tuple[str, str]],
) -> None:
    found = node_addresses(server, ports, networking)
    assert [(a.type, a.address) for a in found] == expected


def test_trunk_subport_addresses_join_their_network() -> None:
    server = {"addresses": {"vlan10": [addr("192.168.10.4")]}}
    found = node_addresses(
        server, [], NetworkingOpts(), subports={"vlan10": ["192.168.10.5"], "vlan20": ["fd10::5"]}
    )
    assert [a.address for a in found] == ["192.168.10.4", "192.168.10.5", "fd10::5"]


SORTS = [
    ("within-a-cidr-ascending", "10.0.0.0/8", ["10.0.0.9", "10.0.0.2"], ["10.0.0.2", "10.0.0.9"]),
    ("unmatched-keep-order", "10.0.0.0/8", ["b", "10.0.0.1", "a"], ["10.0.0.1", "b", "a"]),
    (
        "first-cidr-first",
        "192.168.0.0/16,10.0.0.0/8",
        ["10.0.0.1", "192.168.0.1"],
        ["192.168.0.1", "10.0.0.1"],
    ),
    ("invalid-items-ignored", "bogus, 10.0.0.1, 10.0.0.0/8", ["x", "10.0.0.1"], ["10.0.0.1", "x"]),
    ("empty", "", ["10.0.0.2", "10.0.0.1"], ["10.0.0.2", "10.0.0.1"]),
]


@pytest.mark.parametrize(
    ("order", "given", "expected"), [s[1:] for s in SORTS], ids=[s[0] for s in SORTS]
)
def test_sort_addresses(order: str, given: list[str], expected: list[str]) -> None:
    found = sort_addresses([NodeAddress(type=INT, address=a) for a in given], order)
    assert [a.address for a in found] == expected


@pytest.mark.parametrize(
    ("address", "expected"),
    [("10.0.0.1", False), ("fd00::1", True), ("::ffff:10.0.0.1", False), ("not-an-ip", True)],
    ids=["v4", "v6", "v4-mapped", "no-ip"],
)
def test_is_ipv6_as_go_reads_it(address: str, expected: bool) -> None:
    assert is_ipv6(address) is expected
