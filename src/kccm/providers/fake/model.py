"""The fake cloud's records, errors and pure helpers (see :mod:`kccm.providers.fake`)."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import (
    InstanceMetadata,
    LoadBalancerIngress,
    LoadBalancerIPMode,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    NodeName,
    PortStatus,
    Route,
    Service,
    make_provider_id,
)
from kccm.cloudprovider.nodes import node_name

__all__ = [
    "MAX_LATENCY",
    "PROVIDER_NAME",
    "FakeBalancer",
    "FakeCall",
    "FakeCloudError",
    "FakeInstance",
    "latency_problem",
]

PROVIDER_NAME = "fake"
MAX_LATENCY = 300.0
"""The longest latency that may be injected (seconds): longer looks like a hang, not a cloud."""


def latency_problem(seconds: object) -> str:
    """Why ``seconds`` is not an injectable latency ("" when it is)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return f"{seconds!r} is not a number of seconds"
    if not math.isfinite(seconds):
        return f"{seconds} is not a finite number of seconds"
    if not 0 <= seconds <= MAX_LATENCY:
        return f"{seconds} s is outside 0 to {MAX_LATENCY:g} s"
    return ""


_FIRST_LB_ADDRESS = ipaddress.IPv4Address("192.0.2.1")


class FakeCloudError(Exception):
    """An error the fake raises on its own (a missing balancer or route, ...)."""


@dataclass(frozen=True)
class FakeCall:
    """One recorded call: the method name and its arguments."""

    method: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class FakeInstance:
    """A machine in the fake cloud."""

    name: NodeName
    instance_id: str = ""
    instance_type: str = "fake.small"
    addresses: Sequence[NodeAddress] = ()
    zone: str = "fake-zone-a"
    region: str = "fake-region"
    shutdown: bool = False
    additional_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def provider_id(self) -> str:
        return make_provider_id(PROVIDER_NAME, self.instance_id or self.name)


@dataclass(frozen=True)
class FakeBalancer:
    """A load balancer in the fake cloud (``hosts`` sorted by name)."""

    name: str
    service: str  # namespace/name
    ip: str
    ports: Sequence[PortStatus]
    hosts: Sequence[NodeName]
    ip_mode: LoadBalancerIPMode = LoadBalancerIPMode.VIP
    """Set from the cloud config (``[Global] load-balancer-ip-mode``): a config-driven setting
    an ensure brings existing balancers to."""


_SELF_COUNTED = frozenset(
    {
        "initialize",
        "ensure_load_balancer",
        "update_load_balancer",
        "ensure_load_balancer_deleted",
        "create_route",
        "delete_route",
    }
)
"""Methods that count their own requests in the ledger (what they read and what they change);
every other method is one read request named after itself."""


@dataclass
class _Injected:
    error: BaseException
    remaining: int | None  # None: every call


def _same_route(a: Route, b: Route) -> bool:
    return a.destination_cidr == b.destination_cidr and a.target_node == b.target_node


def _metadata(instance: FakeInstance) -> InstanceMetadata:
    return InstanceMetadata(
        provider_id=instance.provider_id,
        instance_type=instance.instance_type,
        node_addresses=instance.addresses,
        zone=instance.zone,
        region=instance.region,
        additional_labels=instance.additional_labels,
    )


def _node_names(nodes: Sequence[Node]) -> tuple[NodeName, ...]:
    return tuple(node_name(node) for node in nodes)


def _service_key(service: Service) -> str:
    meta = service.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _ports(service: Service) -> tuple[PortStatus, ...]:
    return tuple(
        PortStatus(port=int(p.get("port", 0)), protocol=str(p.get("protocol", "TCP")))
        for p in service.get("spec", {}).get("ports") or ()
    )


def _status(balancer: FakeBalancer) -> LoadBalancerStatus:
    ingress = LoadBalancerIngress(ip=balancer.ip, ip_mode=balancer.ip_mode, ports=balancer.ports)
    return LoadBalancerStatus(ingress=(ingress,))
