"""The Azure emulator's in-memory state: one :class:`World` per server process.

Resources are kept as the JSON objects ARM answers with, keyed by their resource id in lower
case (ARM ids are case-insensitive). What ARM computes on read (back-references such as a
backend pool's ``backendIPConfigurations``, a VM's instance view) is added when a resource is
rendered, never stored. Keys starting with ``_`` are the emulator's own bookkeeping (a VM's
power state, a scale-set instance's addresses) and never leave the server.
"""

from __future__ import annotations

import ipaddress
import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "DEFAULTS",
    "Fault",
    "Obj",
    "Operation",
    "Token",
    "World",
    "iso_at",
    "new_guid",
]

Obj = dict[str, Any]

DEFAULTS: dict[str, str] = {
    "subscription": "a5b6c7d8-0000-4000-8000-00000000c0de",
    "tenant": "adfs",
    "location": "eastus",
    "resource_group": "kccm-rg",
    "client_id": "kccm-client",
    "client_secret": "kccm-secret",
    "vnet": "kccm-vnet",
    "vnet_cidr": "10.240.0.0/16",
    "subnet": "kccm-subnet",
    "subnet_cidr": "10.240.0.0/16",
    "nsg": "kccm-nsg",
    "route_table": "kccm-rt",
    "public_ipv4_pool": "20.60.0.0/16",
    "public_ipv6_pool": "2603:1030:805::/48",
}


def new_guid() -> str:
    return str(uuid.uuid4())


def iso_at(epoch: float) -> str:
    """ARM's time stamp: ``2026-11-28T12:00:00.0000000Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")


@dataclass
class Token:
    """A bearer token the emulator issued (sign-in or IMDS), valid until ``expires``."""

    value: str
    client_id: str
    issued: float
    expires: float
    source: str  # "secret" | "certificate" | "federated" | "managed-identity"


@dataclass
class Operation:
    """A long-running PUT or DELETE, done at ``done_at`` on the server's clock."""

    id: str
    namespace: str  # "Microsoft.Network" | "Microsoft.Compute"
    resource_id: str
    kind: str  # "put" | "delete"
    started: float
    done_at: float
    status: str = "InProgress"  # | "Succeeded" | "Failed" | "Canceled"
    error: dict[str, str] | None = None  # why it did not succeed


@dataclass
class Fault:
    """One injected fault (see :mod:`kccm.emulators.azure.faults`)."""

    id: int
    method: str
    path_regex: str
    kind: str  # "error" | "throttle" | "latency" | "precondition" | "expire_token"
    status: int
    code: str
    message: str
    times: int  # answers left; 0 = unlimited
    latency: float
    retry_after: int
    headers: dict[str, str] = field(default_factory=dict)
    hits: int = 0


@dataclass
class World:
    """Every resource of the subscription, the tokens, operations, faults and the log."""

    base_url: str = ""
    imds_url: str = ""
    subscription: str = DEFAULTS["subscription"]
    location: str = DEFAULTS["location"]
    zones: list[str] = field(default_factory=lambda: ["1", "2", "3"])  # the region's zones
    token_ttl: float = 3600.0
    lro_delay: float = 0.0  # seconds a PUT/DELETE stays InProgress (0: done at once)
    page_size: int = 100  # items per list page before a nextLink
    extra_api_versions: set[str] = field(default_factory=set)  # served beside the known ones
    clock: Callable[[], float] = time.time
    clients: dict[str, str] = field(default_factory=dict)  # client id -> secret
    federated_subjects: dict[str, set[str]] = field(default_factory=dict)
    # client id -> SHA-1 and SHA-256 digest (x5t, x5t#S256) -> certificate DER
    client_certificates: dict[str, dict[bytes, bytes]] = field(default_factory=dict)
    identities: dict[str, Obj] = field(default_factory=dict)  # lower id -> user-assigned identity
    groups: dict[str, str] = field(default_factory=dict)  # lower name -> name
    resources: dict[str, Obj] = field(default_factory=dict)  # lower id -> resource
    by_type: dict[str, dict[str, Obj]] = field(default_factory=dict)  # lower type -> the same
    tokens: dict[str, Token] = field(default_factory=dict)
    operations: dict[str, Operation] = field(default_factory=dict)
    pending: dict[str, Operation] = field(default_factory=dict)  # those still InProgress
    faults: list[Fault] = field(default_factory=list)
    fault_seq: int = 0
    requests: list[Obj] = field(default_factory=list)
    seq: int = 0
    etag_seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    public_ips: set[str] = field(default_factory=set)  # public addresses handed out
    pools: dict[str, str] = field(
        default_factory=lambda: {
            "IPv4": DEFAULTS["public_ipv4_pool"],
            "IPv6": DEFAULTS["public_ipv6_pool"],
        }
    )
    baseline: set[str] = field(default_factory=set)  # seeded resource ids (lower case)
    imds_vm: str = ""  # the id of the VM the metadata service answers for

    # -- ids and lookups ----------------------------------------------------------------

    def group_prefix(self, group: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{group}"

    def resource_id(self, group: str, namespace: str, type_: str, name: str) -> str:
        return f"{self.group_prefix(group)}/providers/{namespace}/{type_}/{name}"

    def get(self, resource_id: str) -> Obj | None:
        return self.resources.get(resource_id.lower())

    def put(self, obj: Obj) -> Obj:
        key = str(obj["id"]).lower()
        self.resources[key] = obj
        self.by_type.setdefault(str(obj["type"]).lower(), {})[key] = obj
        return obj

    def drop(self, resource_id: str) -> Obj | None:
        gone = self.resources.pop(resource_id.lower(), None)
        if gone is not None:
            self.by_type.get(str(gone["type"]).lower(), {}).pop(resource_id.lower(), None)
        return gone

    def of_type(self, type_: str, group: str | None = None) -> Iterator[Obj]:
        """Every stored resource of ``type_`` (``Microsoft.Network/loadBalancers``), in
        ``group`` when given (both case-insensitive)."""
        prefix = self.group_prefix(group).lower() + "/" if group else ""
        for key, obj in list(self.by_type.get(type_.lower(), {}).items()):
            if key.startswith(prefix):
                yield obj

    def has_group(self, group: str) -> bool:
        return group.lower() in self.groups

    def add_group(self, group: str) -> None:
        self.groups.setdefault(group.lower(), group)

    # -- etags, addresses --------------------------------------------------------------

    def network_etag(self) -> str:
        return f'W/"{new_guid()}"'

    def compute_etag(self) -> str:
        return f'"{next(self.etag_seq)}"'

    def allocate_public_ip(self, version: str = "IPv4") -> str:
        network = ipaddress.ip_network(self.pools.get(version, self.pools["IPv4"]))
        for address in itertools.islice(network.hosts(), 1, None):
            text = str(address)
            if text not in self.public_ips:
                self.public_ips.add(text)
                return text
        raise RuntimeError(f"the emulator's {version} public pool {network} is exhausted")

    def release_public_ip(self, address: str | None) -> None:
        if address:
            self.public_ips.discard(address)

    # -- tokens ---------------------------------------------------------------------------

    def issue_token(self, client_id: str, source: str) -> Token:
        now = self.clock()
        token = Token(
            value=f"kccm-emu.{uuid.uuid4().hex}{uuid.uuid4().hex}",
            client_id=client_id,
            issued=now,
            expires=now + self.token_ttl,
            source=source,
        )
        self.tokens[token.value] = token
        return token

    def expire_tokens(self) -> int:
        now = self.clock()
        live = [t for t in self.tokens.values() if t.expires > now]
        for token in live:
            token.expires = now
        return len(live)
