"""A provider seen through the call gate: what controllers hold instead of the raw provider.

:class:`GatedCloud` exposes the same capabilities as the provider, but every method is
``async``, takes an optional ``priority`` and goes through a :class:`~.gate.CallGate`; reads
are coalesced by the identity of their arguments (strings as they are, Kubernetes objects
by namespace, name, UID and providerID).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kccm.cloudprovider.gate import CallGate, Priority, args_key
from kccm.cloudprovider.interface import (
    AddressRetainer,
    Clusters,
    ControllerClientBuilder,
    InstanceDescriber,
    InstanceMetadataLister,
    Instances,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    MaybeAwaitable,
    PVLabeler,
    Routes,
    TargetDrainer,
    Zones,
    as_address_retainer,
    as_instance_describer,
    as_instance_metadata_lister,
    as_load_balancer_describer,
    as_pv_labeler,
    as_target_drainer,
)
from kccm.cloudprovider.types import (
    BalancerView,
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
    "GatedCloud",
    "GatedClusters",
    "GatedInstances",
    "GatedInstancesV2",
    "GatedLoadBalancer",
    "GatedPVLabeler",
    "GatedRoutes",
    "GatedZones",
]

T = TypeVar("T")
_P = Priority.NORMAL


class _Gated:
    protocols: tuple[type, ...] = ()
    """The Protocols whose ``@provider_call`` methods this twin wraps, one async method each."""

    def __init__(self, gate: CallGate) -> None:
        self._gate = gate

    @property
    def gate(self) -> CallGate:
        """The call gate this twin's calls go through."""
        return self._gate

    async def _call(
        self, method: str, fn: Callable[..., MaybeAwaitable[T]], *args: Any, priority: Priority
    ) -> T:
        return await self._gate.call(method, fn, *args, priority=priority, key=args_key(args))


class GatedLoadBalancer(_Gated):
    protocols = (LoadBalancer, LoadBalancerDescriber, AddressRetainer, TargetDrainer)

    def __init__(self, impl: LoadBalancer, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def get_load_balancer(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> tuple[LoadBalancerStatus | None, bool]:
        return await self._call(
            "get_load_balancer",
            self.impl.get_load_balancer,
            cluster_name,
            service,
            priority=priority,
        )

    async def get_load_balancer_name(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> str:
        return await self._call(
            "get_load_balancer_name",
            self.impl.get_load_balancer_name,
            cluster_name,
            service,
            priority=priority,
        )

    async def ensure_load_balancer(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> LoadBalancerStatus:
        return await self._call(
            "ensure_load_balancer",
            self.impl.ensure_load_balancer,
            cluster_name,
            service,
            nodes,
            priority=priority,
        )

    async def update_load_balancer(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> None:
        await self._call(
            "update_load_balancer",
            self.impl.update_load_balancer,
            cluster_name,
            service,
            nodes,
            priority=priority,
        )

    async def ensure_load_balancer_deleted(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> None:
        await self._call(
            "ensure_load_balancer_deleted",
            self.impl.ensure_load_balancer_deleted,
            cluster_name,
            service,
            priority=priority,
        )

    @property
    def can_describe(self) -> bool:
        """Whether the provider implements ``describe_load_balancer``."""
        return as_load_balancer_describer(self.impl) is not None

    async def describe_load_balancer(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> BalancerView | None:
        describer = as_load_balancer_describer(self.impl)
        if describer is None:
            raise TypeError("the provider does not implement describe_load_balancer")
        return await self._call(
            "describe_load_balancer",
            describer.describe_load_balancer,
            cluster_name,
            service,
            priority=priority,
        )

    @property
    def can_retain_addresses(self) -> bool:
        """Whether the provider implements address retention (:class:`AddressRetainer`)."""
        return as_address_retainer(self.impl) is not None

    def _retainer(self) -> AddressRetainer:
        retainer = as_address_retainer(self.impl)
        if retainer is None:
            raise TypeError("the provider does not implement address retention")
        return retainer

    async def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> Sequence[RetainedAddress]:
        return await self._call(
            "ensure_load_balancer_deleted_keeping_address",
            self._retainer().ensure_load_balancer_deleted_keeping_address,
            cluster_name,
            service,
            priority=priority,
        )

    async def list_retained_addresses(
        self, cluster_name: str, *, priority: Priority = _P
    ) -> Sequence[RetainedAddress]:
        return await self._call(
            "list_retained_addresses",
            self._retainer().list_retained_addresses,
            cluster_name,
            priority=priority,
        )

    async def release_retained_address(
        self, cluster_name: str, address: str, *, priority: Priority = _P
    ) -> bool:
        return await self._call(
            "release_retained_address",
            self._retainer().release_retained_address,
            cluster_name,
            address,
            priority=priority,
        )

    @property
    def can_drain_targets(self) -> bool:
        """Whether the provider has a draining state for targets (:class:`TargetDrainer`)."""
        return as_target_drainer(self.impl) is not None

    def _drainer(self) -> TargetDrainer:
        drainer = as_target_drainer(self.impl)
        if drainer is None:
            raise TypeError("the provider has no draining state for targets")
        return drainer

    async def ensure_load_balancer_draining(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        draining: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> LoadBalancerStatus:
        return await self._call(
            "ensure_load_balancer_draining",
            self._drainer().ensure_load_balancer_draining,
            cluster_name,
            service,
            nodes,
            draining,
            priority=priority,
        )

    async def update_load_balancer_draining(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        draining: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> None:
        await self._call(
            "update_load_balancer_draining",
            self._drainer().update_load_balancer_draining,
            cluster_name,
            service,
            nodes,
            draining,
            priority=priority,
        )


class GatedInstances(_Gated):
    protocols = (Instances,)

    def __init__(self, impl: Instances, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def node_addresses(
        self, name: NodeName, *, priority: Priority = _P
    ) -> Sequence[NodeAddress]:
        return await self._call("node_addresses", self.impl.node_addresses, name, priority=priority)

    async def node_addresses_by_provider_id(
        self, provider_id: str, *, priority: Priority = _P
    ) -> Sequence[NodeAddress]:
        return await self._call(
            "node_addresses_by_provider_id",
            self.impl.node_addresses_by_provider_id,
            provider_id,
            priority=priority,
        )

    async def instance_id(self, name: NodeName, *, priority: Priority = _P) -> str:
        return await self._call("instance_id", self.impl.instance_id, name, priority=priority)

    async def instance_type(self, name: NodeName, *, priority: Priority = _P) -> str:
        return await self._call("instance_type", self.impl.instance_type, name, priority=priority)

    async def instance_type_by_provider_id(
        self, provider_id: str, *, priority: Priority = _P
    ) -> str:
        return await self._call(
            "instance_type_by_provider_id",
            self.impl.instance_type_by_provider_id,
            provider_id,
            priority=priority,
        )

    async def add_ssh_key_to_all_instances(
        self, user: str, key_data: bytes, *, priority: Priority = _P
    ) -> None:
        await self._call(
            "add_ssh_key_to_all_instances",
            self.impl.add_ssh_key_to_all_instances,
            user,
            key_data,
            priority=priority,
        )

    async def current_node_name(self, hostname: str, *, priority: Priority = _P) -> NodeName:
        return await self._call(
            "current_node_name", self.impl.current_node_name, hostname, priority=priority
        )

    async def instance_exists_by_provider_id(
        self, provider_id: str, *, priority: Priority = _P
    ) -> bool:
        return await self._call(
            "instance_exists_by_provider_id",
            self.impl.instance_exists_by_provider_id,
            provider_id,
            priority=priority,
        )

    async def instance_shutdown_by_provider_id(
        self, provider_id: str, *, priority: Priority = _P
    ) -> bool:
        return await self._call(
            "instance_shutdown_by_provider_id",
            self.impl.instance_shutdown_by_provider_id,
            provider_id,
            priority=priority,
        )


class GatedInstancesV2(_Gated):
    protocols = (InstancesV2, InstanceMetadataLister, InstanceDescriber)

    def __init__(self, impl: InstancesV2, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def instance_exists(self, node: Node, *, priority: Priority = _P) -> bool:
        return await self._call(
            "instance_exists", self.impl.instance_exists, node, priority=priority
        )

    async def instance_shutdown(self, node: Node, *, priority: Priority = _P) -> bool:
        return await self._call(
            "instance_shutdown", self.impl.instance_shutdown, node, priority=priority
        )

    async def instance_metadata(
        self, node: Node, *, priority: Priority = _P
    ) -> InstanceMetadata | None:
        return await self._call(
            "instance_metadata", self.impl.instance_metadata, node, priority=priority
        )

    @property
    def can_list_metadata(self) -> bool:
        """Whether the provider implements ``list_instance_metadata`` (one call, many nodes)."""
        return as_instance_metadata_lister(self.impl) is not None

    async def list_instance_metadata(
        self, nodes: Sequence[Node], *, priority: Priority = _P
    ) -> Mapping[NodeName, InstanceMetadata]:
        lister = as_instance_metadata_lister(self.impl)
        if lister is None:
            raise TypeError("the provider does not implement list_instance_metadata")
        return await self._gate.call(
            "list_instance_metadata", lister.list_instance_metadata, list(nodes), priority=priority
        )

    @property
    def can_describe(self) -> bool:
        """Whether the provider implements ``describe_instance``."""
        return as_instance_describer(self.impl) is not None

    async def describe_instance(
        self, node: Node, *, priority: Priority = _P
    ) -> InstanceView | None:
        describer = as_instance_describer(self.impl)
        if describer is None:
            raise TypeError("the provider does not implement describe_instance")
        return await self._call(
            "describe_instance", describer.describe_instance, node, priority=priority
        )


class GatedZones(_Gated):
    protocols = (Zones,)

    def __init__(self, impl: Zones, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def get_zone(self, *, priority: Priority = _P) -> Zone:
        return await self._call("get_zone", self.impl.get_zone, priority=priority)

    async def get_zone_by_provider_id(self, provider_id: str, *, priority: Priority = _P) -> Zone:
        return await self._call(
            "get_zone_by_provider_id",
            self.impl.get_zone_by_provider_id,
            provider_id,
            priority=priority,
        )

    async def get_zone_by_node_name(self, name: NodeName, *, priority: Priority = _P) -> Zone:
        return await self._call(
            "get_zone_by_node_name", self.impl.get_zone_by_node_name, name, priority=priority
        )


class GatedClusters(_Gated):
    protocols = (Clusters,)

    def __init__(self, impl: Clusters, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def list_clusters(self, *, priority: Priority = _P) -> Sequence[str]:
        return await self._call("list_clusters", self.impl.list_clusters, priority=priority)

    async def master(self, cluster_name: str, *, priority: Priority = _P) -> str:
        return await self._call("master", self.impl.master, cluster_name, priority=priority)


class GatedRoutes(_Gated):
    protocols = (Routes,)

    def __init__(self, impl: Routes, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def list_routes(self, cluster_name: str, *, priority: Priority = _P) -> Sequence[Route]:
        return await self._call(
            "list_routes", self.impl.list_routes, cluster_name, priority=priority
        )

    async def create_route(
        self, cluster_name: str, name_hint: str, route: Route, *, priority: Priority = _P
    ) -> None:
        await self._call(
            "create_route",
            self.impl.create_route,
            cluster_name,
            name_hint,
            route,
            priority=priority,
        )

    async def delete_route(
        self, cluster_name: str, route: Route, *, priority: Priority = _P
    ) -> None:
        await self._call(
            "delete_route", self.impl.delete_route, cluster_name, route, priority=priority
        )


class GatedPVLabeler(_Gated):
    protocols = (PVLabeler,)

    def __init__(self, impl: PVLabeler, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    async def get_labels_for_volume(
        self, volume: PersistentVolume, *, priority: Priority = _P
    ) -> Mapping[str, str]:
        return await self._call(
            "get_labels_for_volume", self.impl.get_labels_for_volume, volume, priority=priority
        )


def _wrap(impl: T | None, wrapper: Callable[[T, CallGate], Any], gate: CallGate) -> Any:
    return None if impl is None else wrapper(impl, gate)


class GatedCloud(_Gated):
    """The provider behind the gate. Capabilities are looked up once, at construction."""

    protocols = (Interface,)

    def __init__(self, cloud: Interface, gate: CallGate) -> None:
        super().__init__(gate)
        self.cloud = cloud
        self._lb: GatedLoadBalancer | None = _wrap(cloud.load_balancer(), GatedLoadBalancer, gate)
        self._instances: GatedInstances | None = _wrap(cloud.instances(), GatedInstances, gate)
        self._v2: GatedInstancesV2 | None = _wrap(cloud.instances_v2(), GatedInstancesV2, gate)
        self._zones: GatedZones | None = _wrap(cloud.zones(), GatedZones, gate)
        self._clusters: GatedClusters | None = _wrap(cloud.clusters(), GatedClusters, gate)
        self._routes: GatedRoutes | None = _wrap(cloud.routes(), GatedRoutes, gate)
        self._pv: GatedPVLabeler | None = _wrap(as_pv_labeler(cloud), GatedPVLabeler, gate)

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        await self._gate.call("initialize", self.cloud.initialize, client_builder, stop)

    def load_balancer(self) -> GatedLoadBalancer | None:
        return self._lb

    def instances(self) -> GatedInstances | None:
        return self._instances

    def instances_v2(self) -> GatedInstancesV2 | None:
        return self._v2

    def zones(self) -> GatedZones | None:
        return self._zones

    def clusters(self) -> GatedClusters | None:
        return self._clusters

    def routes(self) -> GatedRoutes | None:
        return self._routes

    def pv_labeler(self) -> GatedPVLabeler | None:
        return self._pv

    def provider_name(self) -> str:
        return self.cloud.provider_name()

    def has_cluster_id(self) -> bool:
        return self.cloud.has_cluster_id()
