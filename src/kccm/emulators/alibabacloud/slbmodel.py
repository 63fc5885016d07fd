"""What the emulator's SLB (CLB, API ``2014-05-15``) holds: balancers with their tags and
listeners, vServer groups with their members, HTTPS domain extensions, the EIPs bound to
balancers (VPC's ``DescribeEipAddresses`` lists them) and the health a test sets for a
member."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Balancer",
    "Certificate",
    "DomainExtension",
    "Eip",
    "Listener",
    "Member",
    "SlbWorld",
    "VGroup",
]


@dataclass
class Listener:
    """One listener: its port and protocol, its state and every other field as last sent
    (``healthCheckInterval``, the TCP/UDP create spelling, kept as ``HealthCheckInterval``)."""

    port: int
    protocol: str
    fields: dict[str, str] = field(default_factory=dict)
    status: str = "stopped"


@dataclass
class Balancer:
    id: str
    region: str
    name: str
    address: str
    address_type: str = "internet"
    network_type: str = "classic"
    vpc: str = ""
    vswitch: str = ""
    ip_version: str = "ipv4"
    master_zone: str = ""
    slave_zone: str = ""
    resource_group: str = "rg-default"
    spec: str = ""
    instance_charge: str = "PayBySpec"
    internet_charge: str = "paybytraffic"
    bandwidth: int = 5120
    delete_protection: str = "off"
    modification_status: str = "NonProtection"
    modification_reason: str = ""
    status: str = "active"
    created: int = 0
    tags: dict[str, str] = field(default_factory=dict)
    listeners: dict[tuple[int, str], Listener] = field(default_factory=dict)


@dataclass(frozen=True)
class Member:
    """A vServer group member; ``(server_id, port, server_ip)`` names it."""

    server_id: str
    port: int
    weight: int = 100
    type: str = "ecs"
    description: str = ""
    server_ip: str = ""

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.server_id, self.port, self.server_ip if self.type == "eni" else "")

    def render(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "ServerId": self.server_id,
            "Port": self.port,
            "Weight": self.weight,
            "Type": self.type,
            "Description": self.description,
        }
        if self.server_ip:
            item["ServerIp"] = self.server_ip
        return item


@dataclass
class VGroup:
    id: str
    lb: str
    name: str
    members: list[Member] = field(default_factory=list)


@dataclass
class DomainExtension:
    id: str
    lb: str
    port: int
    domain: str
    cert: str


@dataclass
class Eip:
    id: str
    ip: str
    region: str
    lb: str = ""


@dataclass
class Certificate:
    """A server certificate uploaded to SLB (a test seeds it: the emulator keeps no PEM)."""

    id: str
    region: str
    name: str = ""
    common_name: str = ""
    expire_ms: int = 0
    created_ms: int = 0


@dataclass
class SlbWorld:
    balancers: dict[str, Balancer] = field(default_factory=dict)
    vgroups: dict[str, VGroup] = field(default_factory=dict)
    domains: dict[str, DomainExtension] = field(default_factory=dict)
    eips: dict[str, Eip] = field(default_factory=dict)
    certificates: dict[str, Certificate] = field(default_factory=dict)
    health: dict[str, str] = field(default_factory=dict)
    """ServerId -> ``normal`` / ``abnormal`` / ``unavailable`` (``normal`` when unset)."""
    client_tokens: dict[str, str] = field(default_factory=dict)
    """``CreateLoadBalancer``'s ``ClientToken`` -> the balancer it made (a retry makes none)."""
    addresses: int = 0

    def state(self) -> dict[str, list[str]]:
        return {
            "balancers": sorted(self.balancers),
            "listeners": sorted(
                f"{b.id}:{port}/{protocol}"
                for b in self.balancers.values()
                for port, protocol in b.listeners
            ),
            "vgroups": sorted(self.vgroups),
            "domain_extensions": sorted(self.domains),
            "eips": sorted(f"{e.id}:{e.lb}" for e in self.eips.values()),
            "certificates": sorted(self.certificates),
        }
