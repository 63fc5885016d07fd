"""The local data plane's desired state, as pure values.

Rows of the store's ``load_balancers`` table become :class:`LoadBalancerSpec` values; each
(vip, protocol, port) of them becomes one :class:`ListenerSpec`. Everything here is free of
I/O so the diffing, hashing, source-range and health rules are unit-testable on their own:

- :func:`diff_listeners` compares two listener maps by key — unchanged listeners are left
  alone, changed ones are updated in place, the rest are added or removed;
- :func:`rendezvous_pick` hashes a client IP over the healthy backends (highest random weight),
  so adding or removing one backend moves only the clients that hashed to it;
- :class:`SourceFilter` enforces ``loadBalancerSourceRanges`` (an empty list allows everyone);
- :class:`HealthState` counts consecutive failures: unhealthy after ``fall`` failures,
  healthy again after ``rise`` successes, and *unknown* (treated as healthy) until the first
  check completes.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DEFAULT_HEALTH_PORT",
    "Backend",
    "HealthMode",
    "HealthSpec",
    "HealthState",
    "ListenerDiff",
    "ListenerKey",
    "ListenerSpec",
    "LoadBalancerSpec",
    "PortSpec",
    "ProbeTarget",
    "SourceFilter",
    "diff_listeners",
    "listeners_of",
    "parse_backends",
    "parse_load_balancer",
    "probe_targets",
    "rendezvous_pick",
]

Protocol = Literal["TCP", "UDP"]
HealthMode = Literal["kube-proxy", "node-port", "tcp"]
DEFAULT_HEALTH_PORT = 10256
_MODES: tuple[HealthMode, ...] = ("kube-proxy", "node-port", "tcp")


@dataclass(frozen=True, slots=True)
class Backend:
    node: str
    address: str
    draining: bool = False
    """kccm's drain: no new connection or UDP session; established ones are kept."""


@dataclass(frozen=True, slots=True)
class PortSpec:
    name: str
    protocol: Protocol
    port: int
    node_port: int


@dataclass(frozen=True, slots=True)
class HealthSpec:
    mode: HealthMode = "kube-proxy"
    port: int = DEFAULT_HEALTH_PORT
    path: str = "/healthz"


@dataclass(frozen=True, slots=True)
class LoadBalancerSpec:
    name: str
    vip: str
    ports: tuple[PortSpec, ...]
    backends: tuple[Backend, ...]
    health: HealthSpec
    source_ranges: tuple[str, ...]
    session_affinity: str
    generation: int


@dataclass(frozen=True, slots=True)
class ListenerKey:
    vip: str
    protocol: Protocol
    port: int

    def __str__(self) -> str:
        return f"{self.protocol} {self.vip}:{self.port}"


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    key: ListenerKey
    load_balancer: str
    node_port: int
    backends: tuple[Backend, ...]
    source_ranges: tuple[str, ...]
    client_ip_affinity: bool


@dataclass(frozen=True, slots=True)
class ListenerDiff:
    added: tuple[ListenerSpec, ...] = ()
    updated: tuple[ListenerSpec, ...] = ()
    removed: tuple[ListenerKey, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.updated or self.removed)


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """One health check: which load balancer's backend, and how to probe it."""

    load_balancer: str
    node: str
    mode: HealthMode
    address: str
    port: int
    path: str


def _protocol(value: Any) -> Protocol:
    text = str(value or "TCP").upper()
    if text not in ("TCP", "UDP"):
        raise ValueError(f"unsupported protocol {value!r}")
    return "UDP" if text == "UDP" else "TCP"


def _port(raw: Mapping[str, Any]) -> PortSpec:
    return PortSpec(
        name=str(raw.get("name", "")),
        protocol=_protocol(raw.get("protocol")),
        port=int(raw["port"]),
        node_port=int(raw["node_port"]),
    )


def _health(raw: Mapping[str, Any]) -> HealthSpec:
    mode = str(raw.get("mode", "kube-proxy"))
    if mode not in _MODES:
        raise ValueError(f"unknown health mode {mode!r}")
    return HealthSpec(
        mode=_MODES[_MODES.index(mode)],
        port=int(raw.get("port", DEFAULT_HEALTH_PORT)),
        path=str(raw.get("path", "/healthz")) or "/healthz",
    )


def parse_backends(text: str) -> tuple[Backend, ...]:
    """A backend list (JSON text); ValueError when malformed."""
    try:
        return tuple(
            Backend(
                node=str(b["node"]), address=str(b["address"]), draining=bool(b.get("draining"))
            )
            for b in json.loads(text)
        )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"backends: {exc}") from exc


def parse_load_balancer(
    row: Mapping[str, Any], backends: tuple[Backend, ...] | None = None
) -> LoadBalancerSpec:
    """A ``load_balancers`` row (JSON columns as text) as a spec, with ``backends`` (its
    backend set, parsed) or else its own ``backends`` column (schema 1); ValueError when
    malformed."""
    try:
        ports = tuple(_port(p) for p in json.loads(row["ports"]))
        if backends is None:
            backends = parse_backends(row["backends"])
        health = _health(json.loads(row["health"]) or {})
        ranges = tuple(str(r) for r in json.loads(row["source_ranges"]) or ())
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"load balancer {row['name']!r}: {exc}") from exc
    return LoadBalancerSpec(
        name=str(row["name"]),
        vip=str(row["vip"]),
        ports=ports,
        backends=backends,
        health=health,
        source_ranges=ranges,
        session_affinity=str(row["session_affinity"] or "None"),
        generation=int(row["generation"]),
    )


def listeners_of(lbs: Iterable[LoadBalancerSpec]) -> dict[ListenerKey, ListenerSpec]:
    """Every listener the load balancers ask for; the first claim of a key wins."""
    out: dict[ListenerKey, ListenerSpec] = {}
    for lb in sorted(lbs, key=lambda lb: lb.name):
        for port in lb.ports:
            key = ListenerKey(lb.vip, port.protocol, port.port)
            out.setdefault(
                key,
                ListenerSpec(
                    key=key,
                    load_balancer=lb.name,
                    node_port=port.node_port,
                    backends=lb.backends,
                    source_ranges=lb.source_ranges,
                    client_ip_affinity=lb.session_affinity == "ClientIP",
                ),
            )
    return out


def diff_listeners(
    current: Mapping[ListenerKey, ListenerSpec], desired: Mapping[ListenerKey, ListenerSpec]
) -> ListenerDiff:
    """What to start, update in place and stop to go from ``current`` to ``desired``."""
    added = tuple(spec for key, spec in desired.items() if key not in current)
    updated = tuple(
        spec for key, spec in desired.items() if key in current and current[key] != spec
    )
    removed = tuple(key for key in current if key not in desired)
    return ListenerDiff(added=added, updated=updated, removed=removed)


def probe_targets(lb: LoadBalancerSpec) -> list[ProbeTarget]:
    """The health checks of one load balancer, one per backend node.

    kube-proxy: ``GET http://<node>:<health.port><path>`` (kube-proxy's :10256/healthz);
    node-port: the same against the Service's healthCheckNodePort (externalTrafficPolicy Local);
    tcp: a TCP connect to the first port's nodePort.
    """
    targets = []
    for backend in lb.backends:
        if lb.health.mode == "tcp":
            if not lb.ports:
                continue
            port = lb.ports[0].node_port
        else:
            port = lb.health.port
        targets.append(
            ProbeTarget(
                load_balancer=lb.name,
                node=backend.node,
                mode=lb.health.mode,
                address=backend.address,
                port=port,
                path=lb.health.path,
            )
        )
    return targets


def _score(client: str, backend: Backend) -> bytes:
    data = f"{client}|{backend.node}|{backend.address}".encode()
    return hashlib.blake2b(data, digest_size=8).digest()


def rendezvous_pick(client_ip: str, backends: Sequence[Backend]) -> Backend | None:
    """The backend with the highest hash of (client, backend): stable and minimally disruptive."""
    if not backends:
        return None
    return max(backends, key=lambda backend: _score(client_ip, backend))


def _normalize(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(frozen=True)
class SourceFilter:
    """``loadBalancerSourceRanges``: the client address must fall in one range (none: all)."""

    ranges: tuple[str, ...] = ()
    _networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        networks = tuple(ipaddress.ip_network(r.strip(), strict=False) for r in self.ranges)
        object.__setattr__(self, "_networks", networks)

    def allows(self, address: str) -> bool:
        if not self._networks:
            return True
        ip = _normalize(address)
        if ip is None:
            return False
        return any(ip.version == net.version and ip in net for net in self._networks)


@dataclass
class HealthState:
    """Consecutive-result counting for one backend; ``healthy`` is None until the first check."""

    fall: int = 2
    rise: int = 1
    healthy: bool | None = None
    failures: int = 0
    successes: int = 0
    detail: str = ""

    def record(self, ok: bool, detail: str = "") -> bool:
        """Count one result; True when ``healthy`` changed (including the first verdict)."""
        self.detail = detail
        before = self.healthy
        if ok:
            self.failures, self.successes = 0, self.successes + 1
            if self.healthy is not True and (self.healthy is None or self.successes >= self.rise):
                self.healthy = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.healthy is not False and (self.healthy is None or self.failures >= self.fall):
                self.healthy = False
        return self.healthy != before

    @property
    def usable(self) -> bool:
        """Unknown counts as healthy: a new backend or a restarted data plane serves at once."""
        return self.healthy is not False
