"""Capabilities whose config comes later: the ``azure-cloud-provider`` Secret.

Without ``--cloud-config`` the provider reads its config from the Secret when it is
initialised, after the framework has asked for its capabilities; these stand in for them and
forward every call to the real ones once they exist (upstream: ``NewCloudFromSecret``). A call
before that (none is made: controllers start after ``initialize``) raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from kccm.cloudprovider import (
    BalancerView,
    CloudProviderError,
    InstanceMetadata,
    InstanceView,
    LoadBalancerStatus,
    Node,
    NodeExclusion,
    NodeName,
    RetainedAddress,
    Route,
    Service,
)

if TYPE_CHECKING:
    from kccm.providers.azure.instances import AzureInstances
    from kccm.providers.azure.loadbalancer import AzureLoadBalancers
    from kccm.providers.azure.routes import AzureRoutes

__all__ = ["LateBalancers", "LateInstances", "LateRoutes"]

T = TypeVar("T")
NOT_YET = "azure: the cloud config (Secret kube-system/azure-cloud-provider) is not read yet"


def _ready(get: Callable[[], T | None]) -> T:
    found = get()
    if found is None:
        raise CloudProviderError(NOT_YET)
    return found


class LateInstances:
    """InstancesV2 (and the optional list and describe) of the Secret's config."""

    def __init__(self, get: Callable[[], AzureInstances | None]) -> None:
        self._get = get

    def instance_exists(self, node: Node) -> bool:
        return _ready(self._get).instance_exists(node)

    def instance_shutdown(self, node: Node) -> bool:
        return _ready(self._get).instance_shutdown(node)

    def instance_metadata(self, node: Node) -> InstanceMetadata | None:
        return _ready(self._get).instance_metadata(node)

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        return _ready(self._get).list_instance_metadata(nodes)

    def describe_instance(self, node: Node) -> InstanceView:
        return _ready(self._get).describe_instance(node)


class LateRoutes:
    """Routes of the Secret's config (an error when it names no route table)."""

    def __init__(self, get: Callable[[], AzureRoutes | None]) -> None:
        self._get = get

    def list_routes(self, cluster_name: str) -> list[Route]:
        return _ready(self._get).list_routes(cluster_name)

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        _ready(self._get).create_route(cluster_name, name_hint, route)

    def delete_route(self, cluster_name: str, route: Route) -> None:
        _ready(self._get).delete_route(cluster_name, route)


class LateBalancers:
    """The load balancers of the Secret's config."""

    def __init__(self, get: Callable[[], AzureLoadBalancers | None]) -> None:
        self._get = get

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        return _ready(self._get).get_load_balancer(cluster_name, service)

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return _ready(self._get).get_load_balancer_name(cluster_name, service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        return _ready(self._get).ensure_load_balancer(cluster_name, service, nodes)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        _ready(self._get).update_load_balancer(cluster_name, service, nodes)

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        _ready(self._get).ensure_load_balancer_deleted(cluster_name, service)

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        return _ready(self._get).describe_load_balancer(cluster_name, service)

    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> Sequence[RetainedAddress]:
        balancers = _ready(self._get)
        return balancers.ensure_load_balancer_deleted_keeping_address(cluster_name, service)

    def list_retained_addresses(self, cluster_name: str) -> Sequence[RetainedAddress]:
        return _ready(self._get).list_retained_addresses(cluster_name)

    def release_retained_address(self, cluster_name: str, address: str) -> bool:
        return _ready(self._get).release_retained_address(cluster_name, address)

    def backend_node_exclusion(self, service: Service) -> NodeExclusion | None:
        balancers = self._get()
        return None if balancers is None else balancers.backend_node_exclusion(service)
