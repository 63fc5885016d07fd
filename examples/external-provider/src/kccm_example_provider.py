"""An example kccm cloud provider: machines listed in the cloud config, load balancers and
routes kept in memory. Methods are plain ``def``s, as they would be around a blocking SDK;
kccm calls them from its thread pool, so state is guarded by a lock. Load balancers are
read-compare-write (an ensure that changes nothing writes nothing) and every request to the
"cloud" is counted in a ``CloudAPICalls`` ledger, which the conformance kit checks.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from kccm.cloudprovider import (
    CloudAPICalls,
    CloudProviderError,
    ControllerClientBuilder,
    InstanceMetadata,
    InstanceNotFound,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    Route,
    Routes,
    Service,
    default_load_balancer_name,
    load_cloud_config,
    setting,
)

__all__ = ["ExampleCloud", "ExampleConfig", "Machine", "new_cloud"]

NAME = "example"


class ExampleCloud:
    """Interface, LoadBalancer, InstancesV2 and Routes in one class."""

    def __init__(self, machines: dict[str, str] | None = None, zone: str = "zone-1") -> None:
        self.machines = dict(machines or {})  # node name -> internal IP
        self.zone = zone
        self._lock = threading.Lock()
        self._balancers: dict[str, tuple[str, ...]] = {}
        self._routes: dict[tuple[str, str], Route] = {}
        self._calls = CloudAPICalls()

    def cloud_api_calls(self) -> CloudAPICalls:
        """Every request to the cloud, reads apart from writes (kccm's optional capability)."""
        return self._calls

    # Interface
    def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        pass

    def load_balancer(self) -> LoadBalancer | None:
        return self

    def instances(self) -> None:
        return None  # the legacy API is not supported: InstancesV2 is

    def instances_v2(self) -> InstancesV2 | None:
        return self

    def zones(self) -> None:
        return None

    def clusters(self) -> None:
        return None

    def routes(self) -> Routes | None:
        return self

    def provider_name(self) -> str:
        return NAME

    def has_cluster_id(self) -> bool:
        return True

    # LoadBalancer
    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        name = default_load_balancer_name(service)
        with self._lock:
            if name not in self._balancers:
                return None, False
        return _status(name), True

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        name = default_load_balancer_name(service)
        self._put(name, _names(nodes))
        return _status(name)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self._put(default_load_balancer_name(service), _names(nodes))

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        name = default_load_balancer_name(service)
        with self._lock:
            self._calls.record("describe_balancer", mutating=False)
            if name in self._balancers:
                self._calls.record("delete_balancer", mutating=True)
                del self._balancers[name]

    def _put(self, name: str, hosts: tuple[str, ...]) -> None:
        """Read the balancer; write it only when its hosts differ."""
        with self._lock:
            self._calls.record("describe_balancer", mutating=False)
            if self._balancers.get(name) != hosts:
                self._calls.record("put_balancer", mutating=True)
                self._balancers[name] = hosts

    # InstancesV2
    def _machine(self, node: Node) -> tuple[str, str]:
        provider_id = str(node.get("spec", {}).get("providerID", ""))
        if provider_id and not provider_id.startswith(f"{NAME}://"):
            # Another provider's Node (aws://...): never answer "does not exist" for it, or
            # the lifecycle controller would delete it. An error makes it skip the Node.
            raise CloudProviderError(f"providerID {provider_id!r} is not an {NAME}:// one")
        name = provider_id.removeprefix(f"{NAME}://") if provider_id else _name(node)
        if name not in self.machines:
            raise InstanceNotFound()
        return name, self.machines[name]

    def instance_exists(self, node: Node) -> bool:
        try:
            self._machine(node)
        except InstanceNotFound:
            return False
        return True

    def instance_shutdown(self, node: Node) -> bool:
        self._machine(node)
        return False

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        name, ip = self._machine(node)
        return InstanceMetadata(
            provider_id=f"{NAME}://{name}",
            instance_type="standard",
            node_addresses=[NodeAddress("InternalIP", ip), NodeAddress("Hostname", name)],
            zone=self.zone,
            region=self.zone.rsplit("-", 1)[0],
        )

    # Routes
    def list_routes(self, cluster_name: str) -> list[Route]:
        with self._lock:
            return [r for (cluster, _), r in self._routes.items() if cluster == cluster_name]

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        with self._lock:
            self._routes[(cluster_name, route.destination_cidr)] = replace(route, name=name_hint)

    def delete_route(self, cluster_name: str, route: Route) -> None:
        with self._lock:
            self._routes.pop((cluster_name, route.destination_cidr), None)


def _name(obj: Any) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _names(nodes: Sequence[Node]) -> tuple[str, ...]:
    return tuple(sorted(_name(node) for node in nodes))


def _status(name: str) -> LoadBalancerStatus:
    return LoadBalancerStatus(ingress=[LoadBalancerIngress(hostname=f"{name}.lb.example.test")])


@dataclass(frozen=True)
class Machine:
    name: str
    ip: str

    @classmethod
    def parse(cls, text: str) -> Machine:
        """``name=ip``; a ValueError says what is wrong (kccm adds file, line and key)."""
        name, sep, ip = (part.strip() for part in text.partition("="))
        if not sep or not name or not ip:
            raise ValueError('expected "name=ip"')
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise ValueError(f"{ip!r} is not an IP address") from None
        return cls(name, ip)


@dataclass(frozen=True)
class GlobalSection:
    zone: str = "zone-1"
    machines: list[Machine] = setting(default_factory=list, parse=Machine.parse)  # noqa: RUF009


@dataclass(frozen=True)
class ExampleConfig:
    global_: GlobalSection = setting(default_factory=GlobalSection)  # noqa: RUF009 [Global]


def new_cloud(config: TextIO | None) -> ExampleCloud:
    """The entry point: the ``--cloud-config`` file (or None). The file (gcfg, or the same
    keys in YAML)::

        [Global]
        zone = zone-1
        machines = node-a=10.0.0.1
        machines = node-b=10.0.0.2

    is read by kccm's :func:`~kccm.cloudprovider.load_cloud_config`, so a mistake is reported
    as kccm reports its own, every problem at once: ``machines.conf:3: section "Global": key
    "machines": expected "name=ip" 'node-a'``.
    """
    settings = load_cloud_config(config, ExampleConfig).global_
    return ExampleCloud({m.name: m.ip for m in settings.machines}, zone=settings.zone)


def _implements_the_contract(
    cloud: ExampleCloud,
) -> tuple[Interface, LoadBalancer, InstancesV2, Routes]:
    """Never called: mypy checks that ExampleCloud implements what it claims."""
    return (cloud, cloud, cloud, cloud)
