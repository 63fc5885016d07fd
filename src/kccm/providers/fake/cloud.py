"""The fake cloud itself: :class:`FakeCloud` (see :mod:`kccm.providers.fake`)."""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kccm.cloudprovider import (
    CloudAPICalls,
    Clusters,
    ControllerClientBuilder,
    ForeignProviderID,
    InstanceDescriber,
    InstanceMetadata,
    InstanceMetadataLister,
    InstanceNotFound,
    Instances,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    LoadBalancerIPMode,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    NodeName,
    NotImplementedByProvider,
    PersistentVolume,
    PVLabeler,
    Route,
    Routes,
    Service,
    TargetHealth,
    Zone,
    Zones,
    default_load_balancer_name,
)
from kccm.cloudprovider.backends import IdentityMemo
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.fake.describe import FakeDescribing
from kccm.providers.fake.faults import fault, service_fault
from kccm.providers.fake.journal import BalancerJournal, replay_journal
from kccm.providers.fake.model import (
    _FIRST_LB_ADDRESS,
    _SELF_COUNTED,
    PROVIDER_NAME,
    FakeBalancer,
    FakeCall,
    FakeCloudError,
    FakeInstance,
    _Injected,
    _metadata,
    _node_names,
    _ports,
    _same_route,
    _service_key,
    _status,
    latency_problem,
)
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["FakeCloud"]


class FakeCloud(FakeDescribing):
    """The fake cloud; see the module docstring. Capabilities can be switched off."""

    def __init__(
        self,
        *,
        clock: Clock = REAL_CLOCK,
        call_log_size: int = 10_000,
        cluster_id: bool = True,
        enable_load_balancers: bool = True,
        enable_instances: bool = True,
        enable_instances_v2: bool = True,
        enable_zones: bool = True,
        enable_clusters: bool = True,
        enable_routes: bool = True,
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._calls: deque[FakeCall] = deque(maxlen=call_log_size)
        self._errors: dict[str, list[_Injected]] = {}
        self._latency: dict[str, float] = {}
        self._cluster_id = cluster_id
        self._enabled = {
            "load_balancer": enable_load_balancers,
            "instances": enable_instances,
            "instances_v2": enable_instances_v2,
            "zones": enable_zones,
            "clusters": enable_clusters,
            "routes": enable_routes,
        }
        self._instances: dict[NodeName, FakeInstance] = {}
        self._names_by_provider_id: dict[str, NodeName] = {}
        self._host_lists: dict[tuple[NodeName, ...], tuple[NodeName, ...]] = {}
        self._hosts_by_nodes: IdentityMemo[Sequence[Node], tuple[NodeName, ...]] = IdentityMemo(1)
        self._journal: BalancerJournal | None = None
        self._balancers: dict[str, FakeBalancer] = {}
        self._target_health: dict[NodeName, tuple[TargetHealth, str]] = {}
        self._next_address = 0
        self._api_calls = CloudAPICalls()
        self.load_balancer_ip_mode = LoadBalancerIPMode.VIP
        """The ipMode every balancer is ensured with (cloud config ``load-balancer-ip-mode``)."""
        self._routes: dict[str, dict[str, Route]] = {}
        self.zone = Zone(failure_domain="fake-zone-a", region="fake-region")
        self.cluster_names: list[str] = ["kubernetes"]
        self.master_address = "https://127.0.0.1:6443"
        self.volume_labels: dict[str, dict[str, str]] = {}
        self.initialized = False

    # -- configuration -----------------------------------------------------------------------

    def add_instance(self, instance: FakeInstance) -> FakeInstance:
        """Add (or replace) an instance; returns it."""
        with self._lock:
            old = self._instances.get(instance.name)
            if old is not None:
                self._names_by_provider_id.pop(old.provider_id, None)
            self._instances[instance.name] = instance
            self._names_by_provider_id.setdefault(instance.provider_id, instance.name)
        return instance

    def remove_instance(self, name: NodeName) -> None:
        """Delete an instance from the cloud (its Node now refers to nothing)."""
        with self._lock:
            gone = self._instances.pop(name, None)
            if gone is not None and self._names_by_provider_id.get(gone.provider_id) == name:
                del self._names_by_provider_id[gone.provider_id]

    def set_shutdown(self, name: NodeName, shutdown: bool = True) -> None:
        """Stop (or start) an instance; it keeps existing."""
        with self._lock:
            self._instances[name] = replace(self._instances[name], shutdown=shutdown)

    def fail(self, method: str, error: BaseException, *, times: int | None = None) -> None:
        """Make ``method`` raise ``error`` (on the next ``times`` calls, or always)."""
        with self._lock:
            self._errors.setdefault(method, []).append(_Injected(error, times))

    def fail_with(self, method: str, kind: str, *, times: int | None = None) -> None:
        """Make ``method`` raise the contract error of ``kind`` (:mod:`.faults`)."""
        self.fail(method, fault(kind), times=times)

    def clear_failures(self) -> None:
        with self._lock:
            self._errors.clear()

    def set_latency(self, method: str, seconds: float) -> None:
        """Make ``method`` (``"*"``: every method) take ``seconds`` on the clock; ``seconds``
        is from 0 to :data:`MAX_LATENCY` (ValueError otherwise)."""
        problem = latency_problem(seconds)
        if problem:
            raise ValueError(f"latency of {method!r}: {problem}")
        with self._lock:
            self._latency[method] = seconds

    # -- inspection --------------------------------------------------------------------------

    @property
    def calls(self) -> list[str]:
        """Names of the recorded calls, oldest first (the log keeps the most recent ones)."""
        with self._lock:
            return [call.method for call in self._calls]

    @property
    def call_log(self) -> list[FakeCall]:
        with self._lock:
            return list(self._calls)

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()

    @property
    def balancers(self) -> dict[str, FakeBalancer]:
        with self._lock:
            return dict(self._balancers)

    def cloud_api_calls(self) -> CloudAPICalls:
        """The ledger of requests to the fake cloud (reads, and each state change as a write)."""
        return self._api_calls

    def alter_balancer(self, name: str, **changes: Any) -> FakeBalancer:
        """Change balancer ``name`` behind the provider's back (as a console user would):
        not counted in the ledger nor the call log, journaled like any change."""
        with self._lock:
            if "hosts" in changes:
                changes["hosts"] = tuple(sorted(changes["hosts"]))
            altered = self._balancers[name] = replace(self._balancers[name], **changes)
            self._journal_entry(altered)
        return altered

    def remove_balancer(self, name: str) -> None:
        """Delete balancer ``name`` behind the provider's back (no ledger, no call log)."""
        with self._lock:
            if self._balancers.pop(name, None) is not None:
                self._journal_entry(None, deleted=name)

    @property
    def instances_by_name(self) -> dict[NodeName, FakeInstance]:
        with self._lock:
            return dict(self._instances)

    # -- recording, latency and injected errors ----------------------------------------------

    async def _enter(self, method: str, *args: Any) -> None:
        if method not in _SELF_COUNTED:
            self._api_calls.record(method, mutating=False)
        with self._lock:
            self._calls.append(FakeCall(method, args))
            delay = self._latency.get(method, self._latency.get("*", 0.0))
            error = self._take_error(method)
        if delay > 0:
            await self._clock.sleep(delay)
        if error is not None:
            raise error

    def _take_error(self, method: str) -> BaseException | None:
        queue = self._errors.get(method)
        if not queue:
            return None
        head = queue[0]
        if head.remaining is not None:
            head.remaining -= 1
            if head.remaining <= 0:
                queue.pop(0)
        return head.error

    # -- Interface ---------------------------------------------------------------------------

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        await self._enter("initialize")
        self.initialized = True

    def _capability(self, name: str) -> FakeCloud | None:
        return self if self._enabled[name] else None

    def load_balancer(self) -> FakeCloud | None:
        return self._capability("load_balancer")

    def instances(self) -> FakeCloud | None:
        return self._capability("instances")

    def instances_v2(self) -> FakeCloud | None:
        return self._capability("instances_v2")

    def zones(self) -> FakeCloud | None:
        return self._capability("zones")

    def clusters(self) -> FakeCloud | None:
        return self._capability("clusters")

    def routes(self) -> FakeCloud | None:
        return self._capability("routes")

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return self._cluster_id

    # -- LoadBalancer ------------------------------------------------------------------------

    async def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        await self._enter("get_load_balancer", cluster_name, _service_key(service))
        with self._lock:
            balancer = self._balancers.get(default_load_balancer_name(service))
        if balancer is None:
            return None, False
        return _status(balancer), True

    async def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        await self._enter("get_load_balancer_name", cluster_name, _service_key(service))
        return default_load_balancer_name(service)

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """Read the balancer, create it when missing, else change only what differs from what
        ``service``, ``nodes`` and the cloud config ask for."""
        hosts = self._hosts_of(nodes)
        await self._enter("ensure_load_balancer", cluster_name, _service_key(service), hosts)
        _raise_service_fault(service)
        name = default_load_balancer_name(service)
        ports, ip_mode = _ports(service), self.load_balancer_ip_mode
        with self._lock:
            current = self._describe(name)
            if current is None:
                ip = self._allocate_address()
                wanted = FakeBalancer(name, _service_key(service), ip, ports, hosts, ip_mode)
                self._change("create_load_balancer", wanted)
                return _status(wanted)
            wanted = replace(current, ports=ports, hosts=hosts, ip_mode=ip_mode)
            for attribute in ("ports", "hosts", "ip_mode"):
                if getattr(current, attribute) != getattr(wanted, attribute):
                    self._change(f"set_load_balancer_{attribute}", wanted)
        return _status(wanted)

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """Read the balancer; change its hosts when they differ."""
        hosts = self._hosts_of(nodes)
        await self._enter("update_load_balancer", cluster_name, _service_key(service), hosts)
        _raise_service_fault(service)
        name = default_load_balancer_name(service)
        with self._lock:
            balancer = self._describe(name)
            if balancer is None:
                raise FakeCloudError(f"load balancer {name} does not exist")
            if balancer.hosts != hosts:
                self._change("set_load_balancer_hosts", replace(balancer, hosts=hosts))

    async def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        await self._enter("ensure_load_balancer_deleted", cluster_name, _service_key(service))
        name = default_load_balancer_name(service)
        with self._lock:
            if self._describe(name) is not None:
                del self._balancers[name]
                self._api_calls.record("delete_load_balancer", mutating=True)
                self._journal_entry(None, deleted=name)

    def _describe(self, name: str) -> FakeBalancer | None:
        """One read request for balancer ``name`` (the lock is held)."""
        self._api_calls.record("describe_load_balancer", mutating=False)
        return self._balancers.get(name)

    def _change(self, operation: str, balancer: FakeBalancer) -> None:
        """One state-changing request (the lock is held): counted, stored, journaled."""
        self._api_calls.record(operation, mutating=True)
        self._balancers[balancer.name] = balancer
        self._journal_entry(balancer)

    def _hosts_of(self, nodes: Sequence[Node]) -> tuple[NodeName, ...]:
        """:meth:`_shared_hosts` of the nodes' names. The service controller hands every
        ensure of one node-set version the same tuple: its names are taken once, not once
        per balancer (5,000 names x 1,000 balancers). A list may change between calls."""
        if not isinstance(nodes, tuple):
            return self._shared_hosts(_node_names(nodes))
        return self._hosts_by_nodes.get(nodes, lambda same: self._shared_hosts(_node_names(same)))

    def _shared_hosts(self, hosts: tuple[NodeName, ...]) -> tuple[NodeName, ...]:
        """The host names sorted, and the same tuple for the same host list: 1,000 balancers
        over the same 5,000 nodes keep one list, not 1,000 copies (a real cloud keeps them on
        its side, not in kccm's memory). The last few distinct lists are remembered."""
        hosts = tuple(sorted(hosts))
        with self._lock:
            shared = self._host_lists.pop(hosts, hosts)
            self._host_lists[shared] = shared
            while len(self._host_lists) > 8:
                del self._host_lists[next(iter(self._host_lists))]
        return shared

    # -- persistence (optional): a journal of load balancer changes --------------------------

    def persist_balancers(self, path: Path) -> None:
        """Keep the load balancers in ``path`` (:mod:`kccm.providers.fake.journal`, replayed
        here), so they survive a restart of the process, as a real cloud's do."""
        with self._lock:
            balancers, next_ref = replay_journal(path)
            self._balancers.update(balancers)
            self._journal = BalancerJournal(path, next_ref=next_ref)
            used = [int(ipaddress.ip_address(b.ip)) for b in self._balancers.values()]
            if used:
                self._next_address = max(used) - int(_FIRST_LB_ADDRESS) + 1

    def _journal_entry(self, balancer: FakeBalancer | None, *, deleted: str = "") -> None:
        if self._journal is None:
            return
        if balancer is None:
            self._journal.deleted(deleted)
        else:
            self._journal.changed(balancer)

    def _allocate_address(self) -> str:
        address = _FIRST_LB_ADDRESS + self._next_address
        self._next_address += 1
        return str(address)

    # -- Instances (legacy) ------------------------------------------------------------------

    def _by_name(self, name: NodeName) -> FakeInstance:
        with self._lock:
            instance = self._instances.get(name)
        if instance is None:
            raise InstanceNotFound()
        return instance

    def _by_provider_id(self, provider_id: str) -> FakeInstance:
        scheme, sep, _ = provider_id.partition("://")
        if provider_id and (not sep or scheme != PROVIDER_NAME):
            raise ForeignProviderID(
                f"providerID {provider_id!r} is not a {PROVIDER_NAME}:// one "
                "(another provider's instance)"
            )
        with self._lock:
            name = self._names_by_provider_id.get(provider_id)
            found = self._instances.get(name) if name is not None else None
        if found is None:
            raise InstanceNotFound()
        return found

    async def node_addresses(self, name: NodeName) -> Sequence[NodeAddress]:
        await self._enter("node_addresses", name)
        return self._by_name(name).addresses

    async def node_addresses_by_provider_id(self, provider_id: str) -> Sequence[NodeAddress]:
        await self._enter("node_addresses_by_provider_id", provider_id)
        return self._by_provider_id(provider_id).addresses

    async def instance_id(self, name: NodeName) -> str:
        await self._enter("instance_id", name)
        instance = self._by_name(name)
        return instance.instance_id or instance.name

    async def instance_type(self, name: NodeName) -> str:
        await self._enter("instance_type", name)
        return self._by_name(name).instance_type

    async def instance_type_by_provider_id(self, provider_id: str) -> str:
        await self._enter("instance_type_by_provider_id", provider_id)
        return self._by_provider_id(provider_id).instance_type

    async def add_ssh_key_to_all_instances(self, user: str, key_data: bytes) -> None:
        await self._enter("add_ssh_key_to_all_instances", user)
        raise NotImplementedByProvider()

    async def current_node_name(self, hostname: str) -> NodeName:
        await self._enter("current_node_name", hostname)
        return hostname

    async def instance_exists_by_provider_id(self, provider_id: str) -> bool:
        await self._enter("instance_exists_by_provider_id", provider_id)
        return self._exists(provider_id=provider_id)

    async def instance_shutdown_by_provider_id(self, provider_id: str) -> bool:
        await self._enter("instance_shutdown_by_provider_id", provider_id)
        if not provider_id:
            raise FakeCloudError("provider ID is empty")
        return self._by_provider_id(provider_id).shutdown

    def _exists(self, *, provider_id: str) -> bool:
        try:
            self._by_provider_id(provider_id)
        except InstanceNotFound:
            return False
        return True

    # -- InstancesV2 -------------------------------------------------------------------------

    def _for_node(self, node: Node) -> FakeInstance:
        provider_id = node_provider_id(node)
        if provider_id:
            return self._by_provider_id(provider_id)
        return self._by_name(node_name(node))

    async def instance_exists(self, node: Node) -> bool:
        await self._enter("instance_exists", node_name(node))
        try:
            self._for_node(node)
        except InstanceNotFound:
            return False
        return True

    async def instance_shutdown(self, node: Node) -> bool:
        await self._enter("instance_shutdown", node_name(node))
        return self._for_node(node).shutdown

    async def instance_metadata(self, node: Node) -> InstanceMetadata | None:
        await self._enter("instance_metadata", node_name(node))
        return _metadata(self._for_node(node))

    async def list_instance_metadata(
        self, nodes: Sequence[Node]
    ) -> Mapping[NodeName, InstanceMetadata]:
        """kccm's optional list call: one recorded call for many nodes; unknown ones left out."""
        await self._enter("list_instance_metadata", _node_names(nodes))
        found: dict[NodeName, InstanceMetadata] = {}
        for node in nodes:
            try:
                instance = self._for_node(node)
            except InstanceNotFound:
                continue
            found[node_name(node)] = _metadata(instance)
        return found

    # -- Zones -------------------------------------------------------------------------------

    async def get_zone(self) -> Zone:
        await self._enter("get_zone")
        return self.zone

    async def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        await self._enter("get_zone_by_provider_id", provider_id)
        instance = self._by_provider_id(provider_id)
        return Zone(failure_domain=instance.zone, region=instance.region)

    async def get_zone_by_node_name(self, name: NodeName) -> Zone:
        await self._enter("get_zone_by_node_name", name)
        instance = self._by_name(name)
        return Zone(failure_domain=instance.zone, region=instance.region)

    # -- Clusters ----------------------------------------------------------------------------

    async def list_clusters(self) -> Sequence[str]:
        await self._enter("list_clusters")
        return list(self.cluster_names)

    async def master(self, cluster_name: str) -> str:
        await self._enter("master", cluster_name)
        return self.master_address

    # -- Routes ------------------------------------------------------------------------------

    async def list_routes(self, cluster_name: str) -> Sequence[Route]:
        await self._enter("list_routes", cluster_name)
        with self._lock:
            return list(self._routes.get(cluster_name, {}).values())

    async def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        await self._enter("create_route", cluster_name, name_hint, route)
        name = f"{cluster_name}-{name_hint}-{route.destination_cidr}"
        self._api_calls.record("create_route", mutating=True)
        with self._lock:
            routes = self._routes.setdefault(cluster_name, {})
            if name in routes:
                raise FakeCloudError(f"route {name} already exists")
            routes[name] = replace(route, name=name)

    async def delete_route(self, cluster_name: str, route: Route) -> None:
        await self._enter("delete_route", cluster_name, route)
        self._api_calls.record("delete_route", mutating=True)
        with self._lock:
            routes = self._routes.get(cluster_name, {})
            for name, existing in list(routes.items()):
                if _same_route(existing, route):
                    del routes[name]
                    return
        raise FakeCloudError(f"no route to {route.destination_cidr} via {route.target_node}")

    # -- PVLabeler ---------------------------------------------------------------------------

    async def get_labels_for_volume(self, volume: PersistentVolume) -> Mapping[str, str]:
        name = str(volume.get("metadata", {}).get("name", ""))
        await self._enter("get_labels_for_volume", name)
        with self._lock:
            return dict(self.volume_labels.get(name, {}))


def _implements(
    cloud: FakeCloud,
) -> tuple[
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    Instances,
    InstancesV2,
    InstanceDescriber,
    InstanceMetadataLister,
    Zones,
    Clusters,
    Routes,
    PVLabeler,
]:
    """Never called: mypy checks here that FakeCloud keeps implementing every interface."""
    return (cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud)


def _raise_service_fault(service: Service) -> None:
    """The Service's ``fake.kccm.io/fail`` annotation (:mod:`.faults`)."""
    error = service_fault(service)
    if error is not None:
        raise error
