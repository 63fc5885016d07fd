"""The emulator's in-memory state: one :class:`World` per server process.

Resources are kept as the JSON objects the APIs answer with (Neutron and Octavia) or as
records rendered per request (Nova servers: their ``addresses`` come from the Neutron ports
and floating IPs at the time of the request). Nothing is persisted.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kccm.emulators.openstack.errors import EmuError

__all__ = [
    "Fault",
    "Token",
    "World",
    "new_id",
    "now_iso",
]

Obj = dict[str, Any]


def new_id() -> str:
    return str(uuid.uuid4())


def now_iso(*, zulu: bool = True, micro: bool = False) -> str:
    """Neutron/Nova stamp ``2026-11-26T19:00:00Z``; Octavia's has no ``Z``; Keystone's
    ``expires_at`` carries microseconds."""
    stamp = datetime.now(UTC)
    text = stamp.strftime("%Y-%m-%dT%H:%M:%S.%f" if micro else "%Y-%m-%dT%H:%M:%S")
    return text + ("Z" if zulu else "")


def iso_at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Token:
    id: str
    user_id: str
    project_id: str
    methods: list[str]
    issued: float
    expires: float
    application_credential_id: str | None = None
    trust_id: str | None = None


@dataclass
class Fault:
    """One injected fault (see :mod:`kccm.emulators.openstack.admin`)."""

    id: int
    service: str
    method: str
    path_regex: str
    status: int
    body: Any
    times: int  # answers left; 0 = unlimited
    latency: float
    kind: str  # "error" | "conflict" | "latency"
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After on a 429
    hits: int = 0


@dataclass
class World:
    """Every resource of every service, keyed by id."""

    base_url: str = ""
    lb_active_delay: float = 0.05
    token_ttl: float = 3600.0
    max_routes: int = 30  # neutron.conf [DEFAULT] max_routes
    octavia_max_minor: int = 30  # the newest Octavia API version served: v2.<this>
    disabled_extensions: set[str] = field(default_factory=set)  # Neutron aliases hidden
    clock: Callable[[], float] = time.time
    domains: dict[str, Obj] = field(default_factory=dict)
    projects: dict[str, Obj] = field(default_factory=dict)
    users: dict[str, Obj] = field(default_factory=dict)
    app_creds: dict[str, Obj] = field(default_factory=dict)
    trusts: dict[str, Obj] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    flavors: dict[str, Obj] = field(default_factory=dict)
    servers: dict[str, Obj] = field(default_factory=dict)
    networks: dict[str, Obj] = field(default_factory=dict)
    subnets: dict[str, Obj] = field(default_factory=dict)
    ports: dict[str, Obj] = field(default_factory=dict)
    security_groups: dict[str, Obj] = field(default_factory=dict)
    sg_rules: dict[str, Obj] = field(default_factory=dict)
    floatingips: dict[str, Obj] = field(default_factory=dict)
    routers: dict[str, Obj] = field(default_factory=dict)
    loadbalancers: dict[str, Obj] = field(default_factory=dict)
    listeners: dict[str, Obj] = field(default_factory=dict)
    pools: dict[str, Obj] = field(default_factory=dict)
    members: dict[str, Obj] = field(default_factory=dict)
    healthmonitors: dict[str, Obj] = field(default_factory=dict)
    secrets: dict[str, Obj] = field(default_factory=dict)  # Barbican
    containers: dict[str, Obj] = field(default_factory=dict)
    requests: list[Obj] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    fault_seq: int = 0
    seq: int = 0
    baseline_ports: set[str] = field(default_factory=set)
    baseline_networks: set[str] = field(default_factory=set)  # and subnets: the seeded ids
    timers: dict[str, Any] = field(default_factory=dict)  # lb id -> asyncio.TimerHandle

    # -- lookups --------------------------------------------------------------------------

    def project_id(self, name: str = "demo") -> str:
        return next(str(p["id"]) for p in self.projects.values() if p["name"] == name)

    def network_named(self, name: str) -> Obj:
        for net in self.networks.values():
            if net["name"] == name or net["id"] == name:
                return net
        raise EmuError(404, f"Network {name} could not be found.", kind="NetworkNotFound")

    def router_named(self, name: str) -> Obj:
        return next(r for r in self.routers.values() if r["name"] == name or r["id"] == name)

    def flavor_named(self, name: str) -> Obj:
        for flavor in self.flavors.values():
            if flavor["name"] == name or flavor["id"] == name:
                return flavor
        raise EmuError(404, f"Flavor {name} could not be found.")

    # -- addresses ------------------------------------------------------------------------

    def used_ips(self, subnet_id: str, *, gateway: bool = True) -> set[str]:
        used = {
            ip["ip_address"]
            for port in self.ports.values()
            for ip in port["fixed_ips"]
            if ip["subnet_id"] == subnet_id
        }
        cidr = ipaddress.ip_network(self.subnets[subnet_id]["cidr"])
        used |= {
            fip["floating_ip_address"]
            for fip in self.floatingips.values()
            if ipaddress.ip_address(fip["floating_ip_address"]) in cidr
        }
        gateway_ip = self.subnets[subnet_id].get("gateway_ip")
        if gateway and gateway_ip:
            used.add(gateway_ip)
        return used

    def allocate_ip(self, subnet_id: str) -> str:
        """The lowest free address of the subnet's allocation pools (Neutron's IPAM hands
        them out in order as well: neutron/ipam/drivers/neutrondb_ipam/driver.py)."""
        subnet = self.subnets[subnet_id]
        used = self.used_ips(subnet_id)
        for pool in subnet["allocation_pools"]:
            first = ipaddress.ip_address(pool["start"])
            start, end = int(first), int(ipaddress.ip_address(pool["end"]))
            for number in range(start, min(end, start + 65536) + 1):
                candidate = str(type(first)(number))
                if candidate not in used:
                    return candidate
        raise EmuError(
            409,
            f"No more IP addresses available on network {subnet['network_id']}.",
            kind="IpAddressGenerationFailure",
        )

    @staticmethod
    def new_mac() -> str:
        return "fa:16:3e:" + ":".join(f"{b:02x}" for b in secrets.token_bytes(3))

    def fixed_ips_for(self, network_id: str, wanted: Iterable[Mapping[str, Any]] = ()) -> list[Obj]:
        """Neutron's choice of fixed IPs for a new port: the ones asked (``subnet_id`` and/or
        ``ip_address``), else one from each subnet of the network (v4 and v6 alike)."""
        result: list[Obj] = []
        for ask in wanted:
            subnet_id = ask.get("subnet_id") or self._subnet_of(network_id, ask.get("ip_address"))
            if subnet_id not in self.subnets:
                raise EmuError(
                    404, f"Subnet {subnet_id} could not be found.", kind="SubnetNotFound"
                )
            address = ask.get("ip_address") or self.allocate_ip(subnet_id)
            if address in self.used_ips(subnet_id, gateway=False):
                raise EmuError(
                    409,
                    f"IP address {address} already allocated in subnet {subnet_id}",
                    kind="IpAddressAlreadyAllocated",
                )
            result.append({"subnet_id": subnet_id, "ip_address": address})
        if not result:
            for subnet_id in self.networks[network_id]["subnets"]:
                result.append({"subnet_id": subnet_id, "ip_address": self.allocate_ip(subnet_id)})
        return result

    def _subnet_of(self, network_id: str, address: str | None) -> str:
        if address:
            ip = ipaddress.ip_address(address)
            for subnet_id in self.networks[network_id]["subnets"]:
                if ip in ipaddress.ip_network(self.subnets[subnet_id]["cidr"]):
                    return str(subnet_id)
        raise EmuError(
            400,
            f"IP address {address} is not a valid IP for the specified network.",
            kind="InvalidIpForNetwork",
        )

    def new_port(self, network_id: str, **attrs: Any) -> Obj:
        """A port as ``POST /v2.0/ports`` makes it (neutron/db/db_base_plugin_v2.py)."""
        network = self.networks[network_id]
        stamp = now_iso()
        port: Obj = {
            "id": new_id(),
            "name": "",
            "network_id": network_id,
            "tenant_id": network["tenant_id"],
            "project_id": network["tenant_id"],
            "mac_address": self.new_mac(),
            "admin_state_up": True,
            "status": "ACTIVE",
            "device_id": "",
            "device_owner": "",
            "fixed_ips": [],
            "allowed_address_pairs": [],
            "extra_dhcp_opts": [],
            "security_groups": [],
            "port_security_enabled": True,
            "binding:vnic_type": "normal",
            "description": "",
            "tags": [],
            "created_at": stamp,
            "updated_at": stamp,
            "revision_number": 0,
        }
        wanted = attrs.pop("fixed_ips", ())
        port.update(attrs)
        if port["status"] == "ACTIVE" and not port["device_id"]:
            port["status"] = "DOWN"
        port["project_id"] = port["tenant_id"]
        port["fixed_ips"] = self.fixed_ips_for(network_id, wanted)
        self.ports[port["id"]] = port
        return port

    def touch(self, obj: Obj) -> None:
        """Neutron bumps ``revision_number`` and ``updated_at`` on every change."""
        obj["updated_at"] = now_iso()
        obj["revision_number"] = int(obj.get("revision_number", 0)) + 1

    # -- tokens ---------------------------------------------------------------------------

    def issue_token(self, user_id: str, project_id: str, methods: list[str], **extra: Any) -> Token:
        issued = self.clock()
        token = Token(
            id="gAAAAA" + secrets.token_urlsafe(48),
            user_id=user_id,
            project_id=project_id,
            methods=methods,
            issued=issued,
            expires=issued + self.token_ttl,
            **extra,
        )
        self.tokens[token.id] = token
        return token

    def valid_token(self, token_id: str | None) -> Token | None:
        token = self.tokens.get(token_id or "")
        if token is None or token.expires <= self.clock():
            return None
        return token

    def expire_tokens(self) -> int:
        count = len(self.tokens)
        for token in self.tokens.values():
            token.expires = 0.0
        return count
