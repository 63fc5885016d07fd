"""``local``: a cloud on one machine, its state in a SQLite file.

- InstancesV2 and Zones read the ``instances`` table (``kccm local instances ...`` writes it):
  a stopped instance is shut down, a deleted one does not exist; with ``auto-adopt`` a Node
  without an instance becomes one at initialization, from its reported addresses.
- LoadBalancer: a VIP per Service from the pool (``ip_claims``), the desired proxy state in
  ``load_balancers`` (ports with nodePorts, backends = the nodes' InternalIP, health checks,
  source ranges, session affinity) for the data plane to serve; status ip=VIP, ipMode Proxy.
- Routes: the ``routes`` table.

Ensure, update and delete are read-compare-write: they read the balancer's row and the
Service's IP claim, compare them with what the Service, the nodes and the cloud config
(``health-check-mode``) ask for, and write only when something differs, so an unchanged
balancer costs one read and a drifted one (edited in the state file, deleted) is repaired.
Every store operation is counted in a :class:`~kccm.cloudprovider.apicalls.CloudAPICalls`
ledger (:meth:`LocalCloud.cloud_api_calls`), reads apart from writes.

Every method but :meth:`LocalCloud.initialize` is a plain ``def``: the framework runs them in
its thread pool, and the SQLite calls block only that thread. ``initialize`` is ``async``: it
starts the data plane and then supervises it (a task on the daemon's loop checks its heartbeat
every ``dataplane-check-interval`` on the clock and starts a new one when it has died).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from kccm.cloudprovider import (
    CloudAPICalls,
    CloudProviderError,
    ControllerClientBuilder,
    InstanceMetadata,
    InstanceNotFound,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerStatus,
    Node,
    NodeName,
    Route,
    Routes,
    Service,
    Zone,
    Zones,
    default_load_balancer_name,
)
from kccm.providers.local.compare import (
    backends_are_current,
    balancer_is_current,
    nothing_to_delete,
)
from kccm.providers.local.config import LocalCloudConfig, VipPool, load_local_config
from kccm.providers.local.desired import (
    ANNOTATION_RETAIN_IP,
    ANNOTATION_SOURCE_RANGES,
    KUBE_PROXY_HEALTH_PORT,
    LocalLoadBalancerError,
    backends_of,
    desired_load_balancer,
    instance_metadata_of,
    node_addresses_of,
    node_name_of,
    retains_ip,
    service_key_of,
    spec_of,
    status_of,
)
from kccm.providers.local.store import (
    InstanceRecord,
    IPUnavailable,
    LocalStore,
    RouteRecord,
    resolve_state_path,
)
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "ANNOTATION_RETAIN_IP",
    "ANNOTATION_SOURCE_RANGES",
    "KUBE_PROXY_HEALTH_PORT",
    "PROVIDER_NAME",
    "DataplaneProbe",
    "DataplaneStarter",
    "ForeignProviderID",
    "LocalCloud",
    "LocalLoadBalancerError",
    "desired_load_balancer",
    "new_local_cloud",
    "probe_dataplane",
    "start_dataplane",
]

PROVIDER_NAME = "local"
log = logging.getLogger("kccm.providers.local")

DataplaneStarter = Callable[[Path], int]
"""Given the state file, make sure a data plane serves it; returns its pid."""


DataplaneProbe = Callable[[Path, float], int | None]
"""Given the state file and the time now (epoch seconds): the pid of the data plane whose
heartbeat is fresh and whose process lives, else None."""


def start_dataplane(state_file: Path) -> int:
    """The default :data:`DataplaneStarter`: the live data plane's pid, starting one if none
    heartbeats (imported here so the provider's import stays light)."""
    from kccm.providers.local.dataplane.supervise import ensure_dataplane_running

    return ensure_dataplane_running(state_file)


def probe_dataplane(state_file: Path, now: float) -> int | None:
    """The default :data:`DataplaneProbe`: the heartbeat row of the state file."""
    from kccm.providers.local.dataplane.supervise import live_dataplane

    beat = live_dataplane(state_file, now=now)
    return None if beat is None else beat.pid


class ForeignProviderID(CloudProviderError):
    """A Node whose providerID belongs to another provider (``aws://...``): the local provider
    cannot say whether that machine exists, so it answers with this error, never "does not
    exist" (which would make the lifecycle controller delete the Node)."""


def _own(provider_id: str, node: str = "") -> str:
    """``provider_id`` when it is a ``local://`` one; else :class:`ForeignProviderID`."""
    scheme, sep, _ = provider_id.partition("://")
    if sep and scheme == PROVIDER_NAME:
        return provider_id
    of = f"node {node!r} has " if node else ""
    raise ForeignProviderID(
        f"{of}providerID {provider_id!r}, which is not a {PROVIDER_NAME}:// one: "
        "it belongs to another cloud provider, so the local provider cannot tell whether "
        "that instance exists"
    )


# -- the provider ------------------------------------------------------------------------------


class LocalCloud:
    """The ``local`` provider over one :class:`LocalStore`."""

    def __init__(
        self,
        store: LocalStore,
        config: LocalCloudConfig | None = None,
        *,
        dataplane_starter: DataplaneStarter = start_dataplane,
        dataplane_probe: DataplaneProbe = probe_dataplane,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.store = store
        self.config = config or LocalCloudConfig()
        self.pool = VipPool.parse(self.config.global_.vip_range)
        self._start_dataplane = dataplane_starter
        self._probe_dataplane = dataplane_probe
        self._clock = clock
        self.dataplane_pid: int | None = None
        """The data plane found or started last (None: not asked, or failed)."""
        self.dataplane_restarts = 0
        """How many times the supervisor started a data plane after the first one died."""
        self.dataplane_checks = 0
        self._api_calls = CloudAPICalls()
        self._checked = asyncio.Condition()
        self._supervisor: asyncio.Task[None] | None = None

    # -- Interface -----------------------------------------------------------------------

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        """Start the data plane unless one heartbeats or ``start-dataplane = false``, then
        supervise it until ``stop`` is set.

        A data plane that cannot start is logged, not fatal: the load balancers are still
        recorded, the supervisor tries again at its next check, and a data plane started
        separately serves them too.
        """
        if not self.config.global_.start_dataplane:
            log.info("start-dataplane = false: not starting the data plane")
            return
        pid = await self._start()
        if pid is not None:
            log.info("data plane pid %d serves %s", pid, self.store.path)
        self._supervisor = asyncio.get_running_loop().create_task(
            self._supervise(stop), name="kccm-local-dataplane-supervisor"
        )

    async def _start(self) -> int | None:
        try:
            self.dataplane_pid = await asyncio.to_thread(self._start_dataplane, self.store.path)
        except (OSError, RuntimeError) as err:
            log.error("the data plane for %s did not start: %s", self.store.path, err)
            self.dataplane_pid = None
        return self.dataplane_pid

    async def _supervise(self, stop: asyncio.Event) -> None:
        interval = self.config.global_.dataplane_check_interval
        while not stop.is_set():
            await self._clock.sleep(interval)
            if stop.is_set():
                return
            await self.check_dataplane()

    async def check_dataplane(self) -> bool:
        """One supervisor check: when no data plane heartbeats (its process died, or its
        heartbeat is older than the staleness limit on the clock), start one. Returns whether
        a data plane was started."""
        now = self._clock.now().timestamp()
        pid = await asyncio.to_thread(self._probe_dataplane, self.store.path, now)
        started = False
        if pid is None:
            log.warning(
                "the data plane for %s is not running (last pid %s): starting a new one",
                self.store.path,
                self.dataplane_pid,
            )
            started = await self._start() is not None
            if started:
                self.dataplane_restarts += 1
                log.info(
                    "data plane restarted: pid %s serves %s", self.dataplane_pid, self.store.path
                )
        else:
            self.dataplane_pid = pid
        async with self._checked:
            self.dataplane_checks += 1
            self._checked.notify_all()
        return started

    async def wait_dataplane_checks(self, count: int) -> None:
        """Wait until the supervisor has made ``count`` checks (for tests)."""
        async with self._checked:
            await self._checked.wait_for(lambda: self.dataplane_checks >= count)

    def cloud_api_calls(self) -> CloudAPICalls:
        """The ledger of this provider's state-file operations (reads and writes)."""
        return self._api_calls

    def _read(self, operation: str) -> None:
        self._api_calls.record(operation, mutating=False)

    def _write(self, operation: str) -> None:
        self._api_calls.record(operation, mutating=True)

    def load_balancer(self) -> LoadBalancer | None:
        return self

    def instances(self) -> None:
        return None

    def instances_v2(self) -> InstancesV2 | None:
        return self

    def zones(self) -> Zones | None:
        return self

    def clusters(self) -> None:
        return None

    def routes(self) -> Routes | None:
        return self

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True

    # -- instances -----------------------------------------------------------------------

    def _find(self, node: Node) -> InstanceRecord | None:
        provider_id = str(spec_of(node).get("providerID", ""))
        if provider_id:
            own = _own(provider_id, node_name_of(node))
            self._read("find_instance")
            return self.store.find_instance_by_provider_id(own)
        self._read("find_instance")
        return self.store.find_instance(node_name_of(node))

    def _get(self, node: Node) -> InstanceRecord:
        found = self._find(node)
        if found is None:
            raise InstanceNotFound(f"no local instance for node {node_name_of(node)!r}")
        return found

    def _adopt(self, node: Node) -> InstanceRecord | None:
        glob = self.config.global_
        if not glob.auto_adopt or spec_of(node).get("providerID"):
            return None
        self._write("adopt_instance")
        return self.store.adopt_instance(
            InstanceRecord(
                name=node_name_of(node),
                addresses=node_addresses_of(node),
                instance_type=glob.instance_type,
                zone=glob.zone,
                region=glob.region,
            )
        )

    def instance_exists(self, node: Node) -> bool:
        return self._find(node) is not None

    def instance_shutdown(self, node: Node) -> bool:
        return not self._get(node).running

    def instance_metadata(self, node: Node) -> InstanceMetadata | None:
        instance = self._find(node) or self._adopt(node)
        if instance is None:
            raise InstanceNotFound(
                f"no local instance for node {node_name_of(node)!r} "
                "(add one with `kccm local instances add`, or set auto-adopt)"
            )
        return instance_metadata_of(instance)

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """kccm's optional list call: every node's metadata from one query of the instances
        table; nodes without an instance (or of another provider) are left out."""
        self._read("list_instances")
        instances = self.store.list_instances()
        by_name = {i.name: i for i in instances}
        by_provider_id = {i.provider_id: i for i in instances}
        found: dict[NodeName, InstanceMetadata] = {}
        for node in nodes:
            provider_id = str(spec_of(node).get("providerID", ""))
            instance = by_provider_id.get(provider_id) if provider_id else None
            if not provider_id:
                instance = by_name.get(node_name_of(node))
            if instance is not None:
                found[node_name_of(node)] = instance_metadata_of(instance)
        return found

    # -- Zones ---------------------------------------------------------------------------

    def get_zone(self) -> Zone:
        return Zone(failure_domain=self.config.global_.zone, region=self.config.global_.region)

    def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        own = _own(provider_id)
        self._read("find_instance")
        instance = self.store.find_instance_by_provider_id(own)
        if instance is None:
            raise InstanceNotFound(f"no local instance {provider_id!r}")
        return Zone(failure_domain=instance.zone, region=instance.region)

    def get_zone_by_node_name(self, name: NodeName) -> Zone:
        self._read("find_instance")
        instance = self.store.find_instance(name)
        if instance is None:
            raise InstanceNotFound(f"no local instance named {name!r}")
        return Zone(failure_domain=instance.zone, region=instance.region)

    # -- LoadBalancer --------------------------------------------------------------------

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        self._read("find_load_balancer")
        record = self.store.find_load_balancer(default_load_balancer_name(service))
        return (status_of(record), True) if record is not None else (None, False)

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """Read the row and the claim; write (claim and row, one transaction) only when they
        differ from what the Service, the nodes and the config ask for."""
        desired = desired_load_balancer(
            service, nodes, health_check_mode=self.config.global_.health_check_mode
        )
        requested = str(spec_of(service).get("loadBalancerIP") or "") or None
        self._read("describe_load_balancer")
        current, claims = self.store.describe_load_balancer(desired.name, desired.service)
        if balancer_is_current(
            current, claims, desired, requested_ip=requested, retain=retains_ip(service)
        ):
            assert current is not None
            return status_of(current)
        self._write("put_load_balancer")
        try:
            record = self.store.ensure_load_balancer(
                desired,
                candidates=self.pool.addresses,
                requested_ip=requested,
                in_pool=self.pool.__contains__,
                retain=retains_ip(service),
            )
        except IPUnavailable as err:
            raise LocalLoadBalancerError(f"{err} (pool {self.pool})") from err
        return status_of(record)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """Read the row; rewrite its backends only when they differ."""
        name = default_load_balancer_name(service)
        backends = backends_of(nodes)
        self._read("find_load_balancer")
        current = self.store.find_load_balancer(name)
        if current is not None and backends_are_current(current, backends):
            return
        if current is not None:
            self._write("update_backends")
        if current is None or self.store.update_backends(name, backends) is None:
            raise LocalLoadBalancerError(
                f"load balancer {name} of {service_key_of(service)} is gone"
            )

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        name, owner, keep = (
            default_load_balancer_name(service),
            service_key_of(service),
            retains_ip(service),
        )
        self._read("describe_load_balancer")
        current, claims = self.store.describe_load_balancer(name, owner)
        if nothing_to_delete(current, claims, keep_claim=keep):
            return
        self._write("delete_load_balancer")
        self.store.delete_load_balancer(name, owner, keep_claim=keep)

    # -- Routes --------------------------------------------------------------------------

    def list_routes(self, cluster_name: str) -> Sequence[Route]:
        self._read("list_routes")
        return [
            Route(
                name=r.name,
                target_node=r.target_node,
                destination_cidr=r.destination_cidr,
                blackhole=r.blackhole,
            )
            for r in self.store.list_routes(cluster_name)
        ]

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        self._write("put_route")
        self.store.put_route(
            RouteRecord(
                name=f"{cluster_name}-{name_hint}-{route.destination_cidr}",
                cluster=cluster_name,
                target_node=route.target_node,
                destination_cidr=route.destination_cidr,
            )
        )

    def delete_route(self, cluster_name: str, route: Route) -> None:
        self._write("delete_route")
        self.store.delete_route(cluster_name, route.target_node, route.destination_cidr)


def new_local_cloud(config: TextIO | None) -> LocalCloud:
    """The ``local`` entry point: the cloud config (optional, see
    :class:`~kccm.providers.local.config.LocalCloudConfig`) names the state file and the pool."""
    parsed = load_local_config(config)
    store = LocalStore(resolve_state_path(parsed.global_.state_file or None))
    return LocalCloud(store, parsed)


def _implements(cloud: LocalCloud) -> tuple[Interface, LoadBalancer, InstancesV2, Zones, Routes]:
    """Never called: mypy checks here that LocalCloud implements these interfaces."""
    return (cloud, cloud, cloud, cloud, cloud)


new_local_cloud.config_schema = LocalCloudConfig  # type: ignore[attr-defined]
