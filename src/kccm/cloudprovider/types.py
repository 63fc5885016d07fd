"""Value types of the cloud-provider contract (upstream ``cloud.go`` and ``core/v1`` pieces).

Kubernetes objects handed to providers (Nodes, Services, PersistentVolumes) are plain
JSON-shaped mappings exactly as the API server serves them; providers must treat them as
read-only. Values that providers return are the frozen dataclasses below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

__all__ = [
    "BalancerView",
    "EndpointsReader",
    "InstanceMetadata",
    "InstanceView",
    "ListenerView",
    "LoadBalancerIPMode",
    "LoadBalancerIngress",
    "LoadBalancerStatus",
    "Node",
    "NodeAddress",
    "NodeAddressType",
    "NodeName",
    "PersistentVolume",
    "PortStatus",
    "RetainedAddress",
    "Route",
    "Service",
    "ServiceEndpoint",
    "TargetHealth",
    "TargetView",
    "Zone",
]

Node = Mapping[str, Any]
"""A ``v1.Node`` as a JSON-shaped mapping (read-only)."""
Service = Mapping[str, Any]
"""A ``v1.Service`` as a JSON-shaped mapping (read-only)."""
PersistentVolume = Mapping[str, Any]
"""A ``v1.PersistentVolume`` as a JSON-shaped mapping (read-only)."""
NodeName = str
"""The name of a Node object (upstream ``types.NodeName``)."""


class NodeAddressType(StrEnum):
    """``v1.NodeAddressType``."""

    HOSTNAME = "Hostname"
    INTERNAL_IP = "InternalIP"
    EXTERNAL_IP = "ExternalIP"
    INTERNAL_DNS = "InternalDNS"
    EXTERNAL_DNS = "ExternalDNS"


class LoadBalancerIPMode(StrEnum):
    """``v1.LoadBalancerIPMode``: how traffic reaches the ingress IP."""

    VIP = "VIP"
    PROXY = "Proxy"


@dataclass(frozen=True)
class NodeAddress:
    """One entry of ``node.status.addresses``."""

    type: str
    address: str

    def to_dict(self) -> dict[str, str]:
        return {"type": str(self.type), "address": self.address}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeAddress:
        return cls(type=str(data.get("type", "")), address=str(data.get("address", "")))


@dataclass(frozen=True)
class Zone:
    """Upstream ``cloudprovider.Zone``: where an instance runs."""

    failure_domain: str = ""
    region: str = ""


def _frozen_labels(labels: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(labels))


@dataclass(frozen=True)
class InstanceMetadata:
    """What ``InstancesV2.instance_metadata`` returns about one instance.

    - ``provider_id`` goes to ``spec.providerID`` (format ``<provider-name>://<instance-id>``);
    - ``instance_type`` to the ``node.kubernetes.io/instance-type`` labels (GA and beta);
    - ``node_addresses`` to ``status.addresses``;
    - ``zone`` and ``region`` to the topology labels (GA and beta);
    - ``additional_labels`` are added to the node, except keys in the ``kubernetes.io`` and
      ``k8s.io`` namespaces, and never overwriting an existing label.
    """

    provider_id: str = ""
    instance_type: str = ""
    node_addresses: Sequence[NodeAddress] = ()
    zone: str = ""
    region: str = ""
    additional_labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_addresses", tuple(self.node_addresses))
        object.__setattr__(self, "additional_labels", _frozen_labels(self.additional_labels))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InstanceMetadata):
            return NotImplemented
        return _metadata_key(self) == _metadata_key(other)

    def __hash__(self) -> int:
        return hash(_metadata_key(self))


def _metadata_key(meta: InstanceMetadata) -> tuple[Any, ...]:
    labels = tuple(sorted(meta.additional_labels.items()))
    return (
        meta.provider_id,
        meta.instance_type,
        meta.node_addresses,
        meta.zone,
        meta.region,
        labels,
    )


@dataclass(frozen=True)
class Route:
    """Upstream ``cloudprovider.Route``: a pod-CIDR route to a node.

    ``target_node_addresses`` is only meaningful when ``enable_node_addresses`` is true.
    """

    name: str = ""
    target_node: NodeName = ""
    destination_cidr: str = ""
    blackhole: bool = False
    enable_node_addresses: bool = False
    target_node_addresses: Sequence[NodeAddress] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_node_addresses", tuple(self.target_node_addresses))


@dataclass(frozen=True)
class PortStatus:
    """``v1.PortStatus`` of one load-balancer ingress port."""

    port: int
    protocol: str = "TCP"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"port": self.port, "protocol": self.protocol}
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class LoadBalancerIngress:
    """``v1.LoadBalancerIngress``: one IP or hostname the load balancer answers on."""

    ip: str = ""
    hostname: str = ""
    ip_mode: str | None = None
    ports: Sequence[PortStatus] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ports", tuple(self.ports))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.ip:
            data["ip"] = self.ip
        if self.hostname:
            data["hostname"] = self.hostname
        if self.ip_mode is not None:
            data["ipMode"] = str(self.ip_mode)
        if self.ports:
            data["ports"] = [port.to_dict() for port in self.ports]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadBalancerIngress:
        ports = tuple(
            PortStatus(
                port=int(p["port"]), protocol=str(p.get("protocol", "TCP")), error=p.get("error")
            )
            for p in data.get("ports") or ()
        )
        return cls(
            ip=str(data.get("ip", "")),
            hostname=str(data.get("hostname", "")),
            ip_mode=data.get("ipMode"),
            ports=ports,
        )


@dataclass(frozen=True)
class LoadBalancerStatus:
    """``v1.LoadBalancerStatus``: what ``ensure_load_balancer`` returns."""

    ingress: Sequence[LoadBalancerIngress] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ingress", tuple(self.ingress))

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``service.status.loadBalancer``."""
        if not self.ingress:
            return {}
        return {"ingress": [ing.to_dict() for ing in self.ingress]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadBalancerStatus:
        return cls(
            ingress=tuple(LoadBalancerIngress.from_dict(i) for i in data.get("ingress") or ())
        )


# -- what the cloud sees now (optional describe_* calls, for ``kccm explain``) ----------------


class TargetHealth(StrEnum):
    """A backend's health as the cloud's own health check sees it."""

    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"
    """Not checked (yet), checks disabled, draining, or the cloud cannot tell."""


def _frozen_detail(detail: Mapping[str, Any]) -> Mapping[str, str]:
    return MappingProxyType({str(k): str(v) for k, v in detail.items()})


@dataclass(frozen=True)
class TargetView:
    """One backend of a listener: a Node's machine (or member, instance) and its health.

    ``node`` is the Node's name when the provider can tell it, ``instance`` the cloud's id of
    the backend (instance id, member id, address:port), ``detail`` the cloud's own words on its
    health (``Target.Timeout``, ``ERROR``, ``connect refused``...), empty when healthy.
    ``draining``: kept for the connections it has, given no new ones
    (:class:`~kccm.cloudprovider.interface.TargetDrainer`).
    """

    node: NodeName = ""
    instance: str = ""
    address: str = ""
    port: int = 0
    health: TargetHealth = TargetHealth.UNKNOWN
    detail: str = ""
    draining: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "health", TargetHealth(self.health))

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "instance": self.instance,
            "address": self.address,
            "port": self.port,
            "health": str(self.health),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class ListenerView:
    """One listener (front-end port) of a balancer and the backends it sends to."""

    port: int
    protocol: str = "TCP"
    targets: Sequence[TargetView] = ()
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))

    def to_dict(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "protocol": self.protocol,
            "targets": [target.to_dict() for target in self.targets],
            "detail": self.detail,
        }


@dataclass(frozen=True)
class BalancerView:
    """A Service's load balancer as the cloud sees it now (``describe_load_balancer``).

    ``state`` is the cloud's own provisioning state (``active``, ``provisioning``, ``ACTIVE``,
    ``PENDING_UPDATE``...); ``detail`` holds other facts worth showing (id, DNS name, kind).
    """

    name: str
    state: str = ""
    listeners: Sequence[ListenerView] = ()
    detail: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "listeners", tuple(self.listeners))
        object.__setattr__(self, "detail", _frozen_detail(self.detail))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BalancerView):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.name, self.state, self.listeners, tuple(sorted(self.detail.items()))))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: what ``kccm explain -o json`` shows under ``balancer``."""
        return {
            "name": self.name,
            "state": self.state,
            "listeners": [listener.to_dict() for listener in self.listeners],
            "detail": dict(self.detail),
        }


@dataclass(frozen=True)
class InstanceView:
    """A Node's machine as the cloud sees it now (``describe_instance``).

    ``exists`` is false when the cloud has no such machine; ``state`` is the cloud's own word
    for it (``running``, ``stopped``, ``poweredOff``, ``ACTIVE``, ``SHUTOFF``...); ``detail``
    holds other facts worth showing (instance type, zone, host, guest tools...).
    """

    provider_id: str = ""
    exists: bool = True
    state: str = ""
    detail: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", _frozen_detail(self.detail))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InstanceView):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.provider_id, self.exists, self.state, tuple(sorted(self.detail.items()))))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: what ``kccm explain node -o json`` shows under ``instance``."""
        return {
            "provider_id": self.provider_id,
            "exists": self.exists,
            "state": self.state,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True)
class RetainedAddress:
    """An address a deleted Service's balancer left behind on purpose (address retention,
    docs/behaviour.md): kept in the cloud, marked there with its owner, until a Service of
    that owner (or one asking for the address) takes it back or a person releases it.

    ``address`` is the IP; ``id`` the cloud's own name for it when it has one (an Elastic IP
    allocation, a floating IP's ID), else empty; ``owner`` is the Service's
    ``namespace/name``; ``detail`` anything else worth showing (where the mark is kept).
    """

    address: str
    owner: str
    id: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        """JSON-able: what ``kccm addresses list -o json`` shows."""
        return {"address": self.address, "id": self.id, "owner": self.owner, "detail": self.detail}


@dataclass(frozen=True)
class ServiceEndpoint:
    """One endpoint of a Service as its EndpointSlices (``discovery.k8s.io/v1``) list it, for
    an :class:`~kccm.cloudprovider.interface.EndpointsUser`: one per address (an address two
    slices list is given once, ready if either says so); terminating endpoints and FQDN slices
    are left out.

    ``ready`` is ``conditions.ready`` (unset counts as ready, as the API defines it);
    ``node_name`` the ``nodeName`` ("" when unset); ``ports`` the slice's ``(name, port)``
    pairs (a named ``targetPort`` is resolved with them); ``pod`` the name of the Pod its
    ``targetRef`` names ("" when none).
    """

    address: str
    node_name: str
    ready: bool
    ports: tuple[tuple[str, int], ...] = ()
    pod: str = ""


EndpointsReader = Callable[[Service], Sequence[ServiceEndpoint]]
"""The endpoints of a Service now (the service controller's EndpointSlice cache)."""
