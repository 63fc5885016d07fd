"""The provider contract: what a cloud implements (upstream ``cloud.go``).

Every interface is a :class:`typing.Protocol`: a provider does not need to inherit from it
(inheriting is allowed and lets mypy check the signatures early). Any data-returning method
may be written as ``async def`` or as a plain ``def``; the framework calls plain ones in a
bounded thread pool (see :mod:`kccm.cloudprovider.adapter`), so a blocking cloud SDK never
stalls the event loop. That is why the return types read ``MaybeAwaitable[T]``.

Optional capabilities: ``Interface.load_balancer()`` and friends return the implementation,
or ``None`` when the cloud does not support it (upstream returns ``(impl, false)``). The
framework checks them once, when a controller is built, and skips that controller with a
warning when the capability is missing.

Kubernetes objects are JSON-shaped read-only mappings (:data:`~kccm.cloudprovider.types.Node`,
:data:`~kccm.cloudprovider.types.Service`); never modify them.

Nodes are not whole: the daemon's clients decode Nodes through
:data:`kccm.kube.projection.NODE_PROJECTION` and its Node informer slims them
(:func:`kccm.runtime.informers.slim_node`), so every Node a provider is handed
(``instance_exists``, ``instance_shutdown``, ``instance_metadata``,
``list_instance_metadata``, ``describe_instance``, the ``nodes`` of ``ensure_load_balancer``
and ``update_load_balancer``) holds only ``apiVersion``, ``kind``, ``metadata``, ``spec``,
``status.addresses``, ``status.conditions`` and ``status.phase``
(:data:`kccm.kube.projection.NODE_KEPT`). Dropped, so never there to read:
``metadata.managedFields``,
``metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]``,
``status.allocatable``, ``status.capacity``, ``status.config``, ``status.daemonEndpoints``,
``status.features``, ``status.images``, ``status.nodeInfo``, ``status.runtimeHandlers``,
``status.volumesAttached`` and ``status.volumesInUse``
(:data:`kccm.kube.projection.NODE_DROPPED`), and any other ``status`` field. A provider that
needs a machine's size or OS asks its cloud, not the Node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from kccm.cloudprovider.calls import MaybeAwaitable, provider_call
from kccm.cloudprovider.sharing import BalancerSharer
from kccm.cloudprovider.types import (
    BalancerView,
    EndpointsReader,
    InstanceMetadata,
    InstanceView,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    NodeName,
    PersistentVolume,
    RetainedAddress,
    Route,
    Service,
    Zone,
)

__all__ = [
    "CALL_PROTOCOLS",
    "AddressRetainer",
    "Clusters",
    "ControllerClientBuilder",
    "EndpointsUser",
    "InformerUser",
    "InstanceDescriber",
    "InstanceMetadataLister",
    "Instances",
    "InstancesV2",
    "Interface",
    "LoadBalancer",
    "LoadBalancerDescriber",
    "MaybeAwaitable",
    "PVLabeler",
    "Routes",
    "TargetDrainer",
    "Zones",
    "as_address_retainer",
    "as_informer_user",
    "as_instance_describer",
    "as_instance_metadata_lister",
    "as_load_balancer_describer",
    "as_pv_labeler",
    "as_target_drainer",
]

T = TypeVar("T")


class ControllerClientBuilder(Protocol):
    """Builds Kubernetes clients for a provider's own controllers (upstream type of same name).

    ``name`` is the client (and, with service-account credentials, the service account) name.
    """

    def client(self, name: str) -> Any:
        """A Kubernetes API client identified as ``name``."""
        ...

    def config(self, name: str) -> Any:
        """The connection settings a client named ``name`` would use."""
        ...


class LoadBalancer(Protocol):
    """Service load balancers (upstream ``cloudprovider.LoadBalancer``).

    Every method must treat ``service`` and ``nodes`` as read-only.

    ``nodes`` are the informer's slimmed Nodes: no ``status.capacity``, ``status.nodeInfo``
    or other kubelet bulk (the module docstring lists what they keep).

    ``nodes`` is a tuple, and the service controller passes the *same tuple object* to every
    ``ensure_load_balancer`` and ``update_load_balancer`` while no Node of the set changed; it
    builds a new tuple when a Node joins or leaves the set or any of its Nodes is updated. A
    provider may therefore remember what it derived from ``nodes`` by identity
    (:class:`kccm.cloudprovider.backends.IdentityMemo`), once for every balancer, but only
    for speed: other callers (tests, tools) may pass a list or a fresh tuple each time.

    A Service's boolean, integer and duration annotations are read with
    :mod:`kccm.cloudprovider.annotations` (Go's syntax). A value that cannot be used either
    fails the call with :class:`~kccm.cloudprovider.errors.InvalidServiceConfig` (a Warning
    Event, never ``EnsuredLoadBalancer``) or, where upstream falls back to a default, is
    replaced by the default and reported with
    :func:`~kccm.cloudprovider.servicewarnings.warn_service`: during ``ensure_load_balancer``,
    ``update_load_balancer`` and ``ensure_load_balancer_deleted`` the service controller
    records each such warning as a Warning Event on the Service.
    """

    @provider_call("load_balancer", read=True)
    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> MaybeAwaitable[tuple[LoadBalancerStatus | None, bool]]:
        """Return ``(status, exists)`` for the service's load balancer.

        ``exists`` must be true when the service controller created a load balancer for the
        service. When there is none, return ``(None, False)`` without raising: the
        controllers read that as "absent".
        """
        ...

    @provider_call("load_balancer", read=True)
    def get_load_balancer_name(self, cluster_name: str, service: Service) -> MaybeAwaitable[str]:
        """The cloud name of the service's load balancer; stable for one service.

        :func:`kccm.cloudprovider.default_load_balancer_name` is the traditional choice.
        """
        ...

    @provider_call("load_balancer", read=False)
    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> MaybeAwaitable[LoadBalancerStatus]:
        """Create the load balancer, or update it to match, and return its status.

        Must be idempotent. May raise :class:`~kccm.cloudprovider.errors.RetryError` to ask
        for a retry after a fixed delay instead of exponential backoff, and
        :class:`~kccm.cloudprovider.errors.ImplementedElsewhere` when another controller owns
        the load balancer.
        """
        ...

    @provider_call("load_balancer", read=False)
    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> MaybeAwaitable[None]:
        """Point an existing load balancer at ``nodes`` (the backend set changed).

        May raise :class:`~kccm.cloudprovider.errors.ImplementedElsewhere`.
        """
        ...

    @provider_call("load_balancer", read=False)
    def ensure_load_balancer_deleted(
        self, cluster_name: str, service: Service
    ) -> MaybeAwaitable[None]:
        """Delete the load balancer; return normally when it was deleted or never existed.

        Must never raise :class:`~kccm.cloudprovider.errors.ImplementedElsewhere`.
        """
        ...


class Instances(Protocol):
    """Legacy per-node instance queries (upstream ``cloudprovider.Instances``).

    External providers should implement :class:`InstancesV2` instead; it is used when both are
    supported.
    """

    @provider_call("instances", read=True)
    def node_addresses(self, name: NodeName) -> MaybeAwaitable[Sequence[NodeAddress]]:
        """The addresses of the instance behind node ``name``.

        May be called from a machine other than the node's own (no local metadata service).
        """
        ...

    @provider_call("instances", read=True)
    def node_addresses_by_provider_id(
        self, provider_id: str
    ) -> MaybeAwaitable[Sequence[NodeAddress]]:
        """The addresses of the instance with this providerID (never called from that node)."""
        ...

    @provider_call("instances", read=True)
    def instance_id(self, name: NodeName) -> MaybeAwaitable[str]:
        """The cloud instance ID of node ``name`` (without the ``<provider>://`` prefix).

        Raises :class:`~kccm.cloudprovider.errors.InstanceNotFound` when the instance does not
        exist, and only then: never for stopped or sleeping instances.
        :class:`~kccm.cloudprovider.errors.NotImplementedByProvider` means the node is
        initialized without a providerID.
        """
        ...

    @provider_call("instances", read=True)
    def instance_type(self, name: NodeName) -> MaybeAwaitable[str]:
        """The instance type of node ``name`` (for the instance-type labels)."""
        ...

    @provider_call("instances", read=True)
    def instance_type_by_provider_id(self, provider_id: str) -> MaybeAwaitable[str]:
        """The instance type of the instance with this providerID."""
        ...

    @provider_call("instances", read=False)
    def add_ssh_key_to_all_instances(self, user: str, key_data: bytes) -> MaybeAwaitable[None]:
        """Add an SSH public key for ``user`` on every instance (usually not implemented)."""
        ...

    @provider_call("instances", read=True)
    def current_node_name(self, hostname: str) -> MaybeAwaitable[NodeName]:
        """The node name of the machine called ``hostname`` (usually ``hostname`` itself)."""
        ...

    @provider_call("instances", read=True)
    def instance_exists_by_provider_id(self, provider_id: str) -> MaybeAwaitable[bool]:
        """Whether the instance still exists; true for stopped instances.

        Returning false without an error makes the lifecycle controller delete the Node
        immediately, so only do so when the cloud is sure the instance is gone.
        """
        ...

    @provider_call("instances", read=True)
    def instance_shutdown_by_provider_id(self, provider_id: str) -> MaybeAwaitable[bool]:
        """Whether the instance is shut down (it still exists but is not running)."""
        ...


class InstancesV2(Protocol):
    """Per-node instance queries taking the whole Node (upstream ``cloudprovider.InstancesV2``).

    Implementations should look at ``node["spec"]["providerID"]`` first and may fall back to
    the node name, labels or annotations. When supported, :class:`Zones` is never called.

    The Node is the informer's slimmed copy: no ``status.capacity``, ``status.nodeInfo`` or
    other kubelet bulk (the module docstring lists what it keeps).
    """

    @provider_call("instances", read=True)
    def instance_exists(self, node: Node) -> MaybeAwaitable[bool]:
        """Whether the node's instance exists; true for stopped instances.

        Returning false without an error makes the lifecycle controller delete the Node.
        """
        ...

    @provider_call("instances", read=True)
    def instance_shutdown(self, node: Node) -> MaybeAwaitable[bool]:
        """Whether the node's instance exists but is shut down."""
        ...

    @provider_call("instances", read=True)
    def instance_metadata(self, node: Node) -> MaybeAwaitable[InstanceMetadata | None]:
        """Everything the node controller writes onto a new node (see :class:`InstanceMetadata`).

        Returning ``None`` means "nothing to apply". A node without ``spec.providerID`` needs a
        non-empty ``provider_id`` in the result, otherwise initialization fails and is retried.
        """
        ...


class Zones(Protocol):
    """Deprecated zone queries (upstream ``cloudprovider.Zones``); unused with InstancesV2."""

    @provider_call("instances", read=True)
    def get_zone(self) -> MaybeAwaitable[Zone]:
        """The zone of the machine the code runs on (needs local metadata; avoid)."""
        ...

    @provider_call("instances", read=True)
    def get_zone_by_provider_id(self, provider_id: str) -> MaybeAwaitable[Zone]:
        """The zone of the instance with this providerID."""
        ...

    @provider_call("instances", read=True)
    def get_zone_by_node_name(self, name: NodeName) -> MaybeAwaitable[Zone]:
        """The zone of node ``name``."""
        ...


class Clusters(Protocol):
    """Cluster listing (upstream ``cloudprovider.Clusters``); no controller uses it."""

    @provider_call("clusters", read=True)
    def list_clusters(self) -> MaybeAwaitable[Sequence[str]]:
        """Names of the clusters the cloud knows."""
        ...

    @provider_call("clusters", read=True)
    def master(self, cluster_name: str) -> MaybeAwaitable[str]:
        """The address of the cluster's control plane."""
        ...


class Routes(Protocol):
    """Pod-network routes (upstream ``cloudprovider.Routes``)."""

    @provider_call("routes", read=True)
    def list_routes(self, cluster_name: str) -> MaybeAwaitable[Sequence[Route]]:
        """Every route this cluster manages (only those: never another cluster's)."""
        ...

    @provider_call("routes", read=False)
    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> MaybeAwaitable[None]:
        """Create ``route``; ``route.name`` is ignored, ``name_hint`` (the node UID) may be used."""
        ...

    @provider_call("routes", read=False)
    def delete_route(self, cluster_name: str, route: Route) -> MaybeAwaitable[None]:
        """Delete a route as returned by :meth:`list_routes`."""
        ...


@runtime_checkable
class PVLabeler(Protocol):
    """Deprecated volume labeler for the PV label controller (upstream ``PVLabeler``)."""

    @provider_call("volumes", read=True)
    def get_labels_for_volume(self, volume: PersistentVolume) -> MaybeAwaitable[Mapping[str, str]]:
        """Topology labels for the volume (zone, region); may raise ``DiskNotFound``."""
        ...


@runtime_checkable
class InstanceMetadataLister(Protocol):
    """Optional, on the :class:`InstancesV2` implementation (kccm, not upstream): metadata of
    many initialised nodes in one cloud call, e.g. one paged ``DescribeInstances``.

    The node controller's periodic address refresh uses it instead of one
    ``instance_metadata`` call per node, so a large cluster costs a handful of cloud calls per
    refresh instead of one per node. Nodes the cloud does not know are simply left out of the
    result (they are never deleted for that: the lifecycle controller decides existence).
    """

    @provider_call("instances", read=True)
    def list_instance_metadata(
        self, nodes: Sequence[Node]
    ) -> MaybeAwaitable[Mapping[NodeName, InstanceMetadata]]:
        """Metadata keyed by node name, for the nodes the cloud knows."""
        ...


@runtime_checkable
class LoadBalancerDescriber(Protocol):
    """Optional, on the :class:`LoadBalancer` implementation (kccm, not upstream): the
    Service's balancer as the cloud sees it now, for ``kccm explain``.

    Only reads; called on demand (a person asking), never by a control loop. Leave it out when
    the cloud cannot tell more than ``get_load_balancer`` does.
    """

    @provider_call("load_balancer", read=True)
    def describe_load_balancer(
        self, cluster_name: str, service: Service
    ) -> MaybeAwaitable[BalancerView | None]:
        """The balancer's state, listeners, and each listener's targets with their health.

        Return ``None`` when the Service has no balancer (as ``get_load_balancer`` answers
        ``(None, False)``). A target whose health the cloud does not report is ``unknown``.
        """
        ...


@runtime_checkable
class InstanceDescriber(Protocol):
    """Optional, on the :class:`InstancesV2` implementation (kccm, not upstream): a Node's
    machine as the cloud sees it now, for ``kccm explain node``.

    Only reads; called on demand, never by a control loop.
    """

    @provider_call("instances", read=True)
    def describe_instance(self, node: Node) -> MaybeAwaitable[InstanceView | None]:
        """The machine's state in the cloud's own words and facts worth showing.

        Return ``InstanceView(exists=False)`` when the cloud has no such machine, ``None``
        when the provider cannot tell (e.g. the Node is not yet initialised and cannot be
        found by name). Raise, as ``instance_metadata`` does, for another provider's Node.
        """
        ...


@runtime_checkable
class AddressRetainer(Protocol):
    """Optional, on the :class:`LoadBalancer` implementation (kccm, not upstream): address
    retention (docs/behaviour.md, "Keeping a balancer's address").

    When a Service asks for it (``service.kccm.io/retain-address``, or the cluster-wide
    ``--default-retain-address``), the service controller calls
    :meth:`ensure_load_balancer_deleted_keeping_address` instead of
    ``ensure_load_balancer_deleted``. The provider then owes two more things, checked by the
    conformance kit: its ``ensure_load_balancer`` gives a retained address back to a Service
    of the same ``namespace/name``, or to one asking for that address (``loadBalancerIP`` or
    the provider's own address annotation), and removes the mark; and it never writes the
    mark anywhere but in the cloud.
    """

    @provider_call("load_balancer", read=False)
    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> MaybeAwaitable[Sequence[RetainedAddress]]:
        """Delete the balancer as ``ensure_load_balancer_deleted`` does, but keep its
        address(es), marked in the cloud with the Service's ``namespace/name``; return what
        was kept (empty when the Service had no address). Idempotent, like the delete."""
        ...

    @provider_call("load_balancer", read=True)
    def list_retained_addresses(
        self, cluster_name: str
    ) -> MaybeAwaitable[Sequence[RetainedAddress]]:
        """Every retained address of this cluster that no balancer uses now."""
        ...

    @provider_call("load_balancer", read=False)
    def release_retained_address(self, cluster_name: str, address: str) -> MaybeAwaitable[bool]:
        """Give a retained address (its IP or its cloud ID) back to the cloud; False when no
        retained address of this cluster has that IP or ID (one in use is never released)."""
        ...


@runtime_checkable
class TargetDrainer(Protocol):
    """Optional, on the :class:`LoadBalancer` implementation (kccm, not upstream): a draining
    state for targets (docs/behaviour.md, "Draining a Node's targets").

    When a Service asks for a drain time (``service.kccm.io/drain-seconds``, or
    ``--default-drain-seconds``), a Node leaving the node set (exclusion label, autoscaler
    taint, deletion) is passed in ``draining`` for that time, then left out. Each of
    ``draining`` the balancer targets now stays a target in the cloud's draining state (no new
    connections, established ones kept); one it does not target is never added. ``nodes`` are
    what ``ensure_load_balancer`` and ``update_load_balancer`` take; a Node of ``draining``
    that comes back is in ``nodes`` again. Without this capability Nodes are removed at once.
    """

    @provider_call("load_balancer", read=False)
    def ensure_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> MaybeAwaitable[LoadBalancerStatus]:
        """``ensure_load_balancer`` with ``draining`` Nodes kept draining."""
        ...

    @provider_call("load_balancer", read=False)
    def update_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> MaybeAwaitable[None]:
        """``update_load_balancer`` with ``draining`` Nodes kept draining."""
        ...


@runtime_checkable
class EndpointsUser(Protocol):
    """Optional, on the :class:`LoadBalancer` implementation (kccm): members from the Service's
    endpoints, read during ensure and update with the reader handed over (each leadership term)
    before the service workers start; a Service :meth:`uses_endpoints` names is synced when its
    endpoints change (docs/behaviour.md, "Endpoints for a provider")."""

    def uses_endpoints(self, service: Service) -> bool: ...  # cheap: no cloud call

    def set_endpoints_reader(self, reader: EndpointsReader) -> None: ...


@runtime_checkable
class InformerUser(Protocol):
    """Optional: a provider that wants the shared informers (upstream ``InformerUser``)."""

    def set_informers(self, informers: Any) -> None:
        """Receive the shared informer factory, right after :meth:`Interface.initialize`."""
        ...


class Interface(Protocol):
    """A cloud provider (upstream ``cloudprovider.Interface``)."""

    @provider_call("initialize", read=False)
    def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> MaybeAwaitable[None]:
        """Called once before any controller starts.

        The provider may start background work here; it must stop it when ``stop`` is set.
        """
        ...

    def load_balancer(self) -> LoadBalancer | None:
        """The load-balancer implementation, or ``None`` when unsupported."""
        ...

    def instances(self) -> Instances | None:
        """The legacy instances implementation, or ``None`` when unsupported."""
        ...

    def instances_v2(self) -> InstancesV2 | None:
        """The InstancesV2 implementation, or ``None`` (external providers should support it)."""
        ...

    def zones(self) -> Zones | None:
        """The deprecated zones implementation, or ``None``."""
        ...

    def clusters(self) -> Clusters | None:
        """The clusters implementation, or ``None``."""
        ...

    def routes(self) -> Routes | None:
        """The routes implementation, or ``None`` (the route controller is then skipped)."""
        ...

    def provider_name(self) -> str:
        """The provider's name, also the scheme of its providerIDs (``<name>://...``)."""
        ...

    def has_cluster_id(self) -> bool:
        """True if a cluster ID is required and set (else the daemon refuses to start, unless
        untagged clouds are allowed)."""
        ...


CALL_PROTOCOLS: tuple[type, ...] = (
    Interface,
    LoadBalancer,
    Instances,
    InstancesV2,
    InstanceMetadataLister,
    InstanceDescriber,
    LoadBalancerDescriber,
    AddressRetainer,
    TargetDrainer,
    BalancerSharer,
    Zones,
    Clusters,
    Routes,
    PVLabeler,
)
"""The Protocols whose ``@provider_call`` methods the call gate serves (see :mod:`.calls`)."""


def as_pv_labeler(cloud: object) -> PVLabeler | None:
    """The cloud as a :class:`PVLabeler`, or ``None`` (upstream's type assertion)."""
    return cloud if isinstance(cloud, PVLabeler) else None


def _has(impl: object, *methods: str) -> bool:
    """At run time: an implementation may turn a capability off with an attribute ``None``."""
    return all(callable(getattr(impl, name, None)) for name in methods)


def as_instance_metadata_lister(instances: object) -> InstanceMetadataLister | None:
    """The InstancesV2 implementation as an :class:`InstanceMetadataLister`, or ``None``."""
    found = _has(instances, "list_instance_metadata")
    return cast(InstanceMetadataLister, instances) if found else None


def as_load_balancer_describer(load_balancer: object) -> LoadBalancerDescriber | None:
    """The LoadBalancer implementation as a :class:`LoadBalancerDescriber`, or ``None``."""
    found = _has(load_balancer, "describe_load_balancer")
    return cast(LoadBalancerDescriber, load_balancer) if found else None


def as_instance_describer(instances: object) -> InstanceDescriber | None:
    """The InstancesV2 implementation as an :class:`InstanceDescriber`, or ``None``."""
    return cast(InstanceDescriber, instances) if _has(instances, "describe_instance") else None


def as_informer_user(cloud: object) -> InformerUser | None:
    """The cloud as an :class:`InformerUser`, or ``None``."""
    return cloud if isinstance(cloud, InformerUser) else None


def as_address_retainer(load_balancer: object) -> AddressRetainer | None:
    """The LoadBalancer implementation as an :class:`AddressRetainer`, or ``None``."""
    found = _has(load_balancer, *(n for n in vars(AddressRetainer) if not n.startswith("_")))
    return cast(AddressRetainer, load_balancer) if found else None


def as_target_drainer(load_balancer: object) -> TargetDrainer | None:
    """The LoadBalancer implementation as a :class:`TargetDrainer`, or ``None``."""
    found = _has(load_balancer, "ensure_load_balancer_draining", "update_load_balancer_draining")
    return cast(TargetDrainer, load_balancer) if found else None
