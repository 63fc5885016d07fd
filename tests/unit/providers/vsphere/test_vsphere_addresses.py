"""Node addresses from guest NICs by the CPI's [Nodes] rules (nodemanager.go discoverIPs)."""

from __future__ import annotations

import base64

import pytest

from kccm.cloudprovider import CloudProviderError, NodeAddress
from kccm.providers.vsphere.addresses import node_addresses
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.providers.vsphere.instances import (
    instance_type,
    k8s_uuid_to_normal,
    uuid_from_provider_id,
)
from kccm.providers.vsphere.inventory import GuestNic, VMInfo

BASE = '[VirtualCenter "vc"]\nuser = u\npassword = p\n'
NICS = (
    GuestNic("VM Network", ("127.0.0.1", "fe80::1", "10.0.0.5", "fd00::5"), 4000),
    GuestNic("External", ("192.168.1.5",), 4001),
    GuestNic("vmk", ("172.16.0.1",), -1),
)


def _addresses(nodes: str, families: tuple[str, ...] = ("ipv4",), **kw: object) -> list[str]:
    config = load_vsphere_config(BASE + "[Nodes]\n" + nodes)
    found = node_addresses(
        "node-a", kw.get("nics", NICS), config.nodes, families, kw.get("guestinfo")
    )  # type: ignore[arg-type]
    return [f"{a.type}={a.address}" for a in found]


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ("", ["InternalIP=10.0.0.5", "ExternalIP=10.0.0.5"]),
        (
            "internal-network-subnet-cidr = 10.0.0.0/8\n"
            "external-network-subnet-cidr = 192.168.0.0/16\n",
            ["InternalIP=10.0.0.5", "ExternalIP=192.168.1.5"],
        ),
        ("external-vm-network-name = External\n", ["ExternalIP=192.168.1.5"]),
        ("internal-vm-network-name = vm network\n", ["InternalIP=10.0.0.5"]),
        (
            "exclude-internal-network-subnet-cidr = 10.0.0.0/8\n",
            ["InternalIP=192.168.1.5", "ExternalIP=10.0.0.5"],
        ),
        (
            "internal-network-subnet-cidr = 172.16.0.0/12\n",
            ["InternalIP=10.0.0.5", "ExternalIP=10.0.0.5"],
        ),
    ],
    ids=[
        "first-address-both-roles",
        "subnets",
        "external-network-name-only",
        "internal-network-name-case-insensitive",
        "exclusion",
        "non-vnic-ignored",
    ],
)
def test_selection_rules(nodes: str, expected: list[str]) -> None:
    assert _addresses(nodes) == ["Hostname=node-a", *expected]


def test_ipv6_family() -> None:
    assert _addresses("", ("ipv6",)) == [
        "Hostname=node-a",
        "InternalIP=fd00::5",
        "ExternalIP=fd00::5",
    ]


def test_statically_configured_addresses_come_first() -> None:
    netcfg = "network:\n  ethernets:\n    e:\n      addresses: [192.168.1.5/24]\n"
    guestinfo = {
        "guestinfo.metadata": base64.b64encode(netcfg.encode()).decode(),
        "guestinfo.metadata.encoding": "base64",
    }
    assert _addresses("", guestinfo=guestinfo)[1] == "InternalIP=192.168.1.5"


@pytest.mark.parametrize(
    ("hostname", "nics", "message"),
    [
        ("", NICS, "hostname is empty"),
        ("n", (), "GuestNicInfo is empty"),
        ("n", (GuestNic("x", ("127.0.0.1",), 1),), "after filtering out localhost"),
    ],
    ids=["no-hostname", "no-nics", "only-loopback"],
)
def test_no_usable_address_is_an_error(
    hostname: str, nics: tuple[GuestNic, ...], message: str
) -> None:
    config = load_vsphere_config(BASE)
    with pytest.raises(CloudProviderError, match=message):
        node_addresses(hostname, nics, config.nodes, ("ipv4",))


def test_hostname_address_is_first() -> None:
    config = load_vsphere_config(BASE)
    assert node_addresses("h", NICS, config.nodes, ("ipv4",))[0] == NodeAddress("Hostname", "h")


def test_provider_id_and_uuid_helpers() -> None:
    assert uuid_from_provider_id("vsphere://ABCD-1 ") == "abcd-1"
    assert k8s_uuid_to_normal("e3478c7d-a0ff-fc55-9c65-18f9246b4527") == (
        "7d8c47e3-ffa0-55fc-9c65-18f9246b4527"
    )


@pytest.mark.parametrize(
    ("guest", "cpu", "mem", "expected"),
    [
        ("ubuntu64Guest", 2, 4096, "vsphere-vm.cpu-2.mem-4gb.os-ubuntu"),
        ("unheardOfGuest", 1, 1000, "vsphere-vm.cpu-1.mem-0gb.os-unknown"),
    ],
    ids=["known-os", "unknown-os"],
)
def test_instance_type(guest: str, cpu: int, mem: int, expected: str) -> None:
    vm = VMInfo("vc", "vm-1", "n", "u", "h", "poweredOn", guest, cpu, mem, (), {}, "dc", ())
    assert instance_type(vm) == expected
