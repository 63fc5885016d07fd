"""``local``: a cloud on one machine, its state in a SQLite file.

- InstancesV2 and Zones read the ``instances`` table (``kccm local instances ...`` writes it):
  a stopped instance is shut down, a deleted one does not exist; with ``auto-adopt`` a Node
  without an instance becomes one at initialization, from its reported addresses.
- LoadBalancer: a VIP per Service from the pool (``ip_claims``), the desired proxy state in
  ``load_balancers`` (ports with nodePorts, backends = the nodes' InternalIP, health checks,
  source ranges, session affinity) for the data plane to serve; status ip=VIP, ipMode Proxy.
- Routes: the ``routes`` table.

Every method but :meth:`LocalCloud.initialize` is a plain ``def``: the framework runs them in
its thread pool, and the SQLite calls block only that thread. ``initialize`` is ``async``: it
starts the data plane and then supervises it (a task on the daemon's loop checks its heartbeat
every ``dataplane-check-interval`` on the clock and starts a new one when it has died).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from kccm.cloudprovider import (
    CloudProviderError,
    ControllerClientBuilder,
    InstanceMetadata,
    InstanceNotFound,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerIngress,
    LoadBalancerIPMode,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    NodeName,
    PortStatus,
    Route,
    Routes,
    Service,
    Zone,
    Zones,
    default_load_balancer_name,
)
from kccm.providers.local.config import LocalCloudConfig, VipPool, load_local_config
from kccm.providers.local.store import (
    InstanceRecord,
    IPUnavailable,
    LoadBalancerRecord,
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
ANNOTATION_RETAIN_IP = "local.kccm.io/retain-ip"
ANNOTATION_SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"
KUBE_PROXY_HEALTH_PORT = 10256
HEALTHZ = "/healthz"
log = logging.getLogger("kccm.providers.local")

DataplaneStarter = Callable[[Path], int]
"""Given the state file, make sure a data plane serves it; returns its pid."""


DataplaneProbe = Callable[[Path, float], int | None]
"""Given the state file and the time now (epoch seconds): the pid of the data plane whose
heartbeat is fresh and whose process lives, else None."""


def start_dataplane(state_file: Path) -> int:
    """The default :data:`DataplaneStarter`: the live data plane's pid, starting one if none
    heartbeats (imported here so the provider's import stays light)."""
    from kccm.providers.local.dataplane import ensure_dataplane_running

    return ensure_dataplane_running(state_file)


def probe_dataplane(state_file: Path, now: float) -> int | None:
    """The default :data:`DataplaneProbe`: the heartbeat row of the state file."""
    from kccm.providers.local.dataplane import live_dataplane

    beat = live_dataplane(state_file, now=now)
    return None if beat is None else beat.pid


class LocalLoadBalancerError(CloudProviderError):
    """A Service the local provider cannot serve (the message ends up in a Warning event)."""


class ForeignProviderID(CloudProviderError):
    """A Node whose providerID belongs to another provider (``aws://...``): the local provider
    cannot say whether that machine exists, so it answers with this error, never "does not
    exist" (which would make the lifecycle controller delete the Node)."""


# -- reading Kubernetes objects --------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _service_key(service: Service) -> str:
    meta = _meta(service)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _annotation(service: Service, key: str) -> str:
    return str((_meta(service).get("annotations") or {}).get(key, ""))


def _retain(service: Service) -> bool:
    return _annotation(service, ANNOTATION_RETAIN_IP).strip().lower() == "true"


def _node_name(node: Node) -> str:
    return str(_meta(node).get("name", ""))


def _node_addresses(node: Node) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(a.get("type", "")), str(a.get("address", "")))
        for a in (node.get("status") or {}).get("addresses") or ()
    )


def _internal_ip(node: Node) -> str | None:
    return next((addr for kind, addr in _node_addresses(node) if kind == "InternalIP"), None)


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


# -- the desired load balancer -----------------------------------------------------------------


SERVED_PROTOCOLS = ("TCP", "UDP")


def _ports(service: Service) -> tuple[dict[str, Any], ...]:
    ports = tuple(
        {
            "name": str(port.get("name", "")),
            "protocol": str(port.get("protocol", "TCP")),
            "port": int(port.get("port", 0)),
            "node_port": int(port.get("nodePort", 0) or 0),
        }
        for port in _spec(service).get("ports") or ()
    )
    for port in ports:
        _check_servable(service, port)
    return ports


def _check_servable(service: Service, port: Mapping[str, Any]) -> None:
    """The data plane proxies TCP and UDP to nodePorts: anything else would get a VIP (and an
    "Ensured" event) that nothing serves, so the ensure fails with the reason instead."""
    shown = f"port {port['name'] or port['port']} ({port['port']}/{port['protocol']})"
    if port["protocol"] not in SERVED_PROTOCOLS:
        raise LocalLoadBalancerError(
            f"{shown}: the local data plane serves TCP and UDP only, not {port['protocol']}; "
            "no load balancer is created for this Service"
        )
    if port["node_port"] <= 0:
        why = (
            " (spec.allocateLoadBalancerNodePorts is false)"
            if _spec(service).get("allocateLoadBalancerNodePorts") is False
            else ""
        )
        raise LocalLoadBalancerError(
            f"{shown} has no nodePort{why}: the local data plane forwards to nodePorts, so "
            "no load balancer is created for this Service"
        )


def _backends(nodes: Sequence[Node]) -> tuple[dict[str, str], ...]:
    """Every node with an InternalIP, by name (nodes without one cannot be reached)."""
    found = ((_node_name(node), _internal_ip(node)) for node in nodes)
    return tuple({"node": name, "address": address} for name, address in sorted(found) if address)


def _health(service: Service, mode: str) -> dict[str, Any]:
    if mode == "tcp":
        return {"mode": "tcp", "port": 0, "path": ""}  # port 0: each listener's node_port
    spec = _spec(service)
    if spec.get("externalTrafficPolicy") == "Local" and spec.get("healthCheckNodePort"):
        return {"mode": "node-port", "port": int(spec["healthCheckNodePort"]), "path": HEALTHZ}
    return {"mode": "kube-proxy", "port": KUBE_PROXY_HEALTH_PORT, "path": HEALTHZ}


def _source_ranges(service: Service) -> tuple[str, ...]:
    ranges = list(_spec(service).get("loadBalancerSourceRanges") or ())
    if not ranges:
        ranges = [r for r in _annotation(service, ANNOTATION_SOURCE_RANGES).split(",") if r]
    cleaned = [r.strip() for r in ranges if r.strip()] or ["0.0.0.0/0"]
    bad = [r for r in cleaned if not _is_cidr(r)]
    if bad:
        raise LocalLoadBalancerError(f"invalid loadBalancerSourceRanges: {', '.join(bad)}")
    return tuple(str(ipaddress.ip_network(r, strict=False)) for r in cleaned)


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def desired_load_balancer(
    service: Service, nodes: Sequence[Node], *, health_check_mode: str = "kube-proxy"
) -> LoadBalancerRecord:
    """The ``load_balancers`` row for ``service`` (``vip`` is filled in by the store)."""
    return LoadBalancerRecord(
        name=default_load_balancer_name(service),
        service=_service_key(service),
        service_uid=str(_meta(service).get("uid", "")),
        vip="",
        ports=_ports(service),
        backends=_backends(nodes),
        health=_health(service, health_check_mode),
        source_ranges=_source_ranges(service),
        session_affinity=str(_spec(service).get("sessionAffinity") or "None"),
    )


def _status(record: LoadBalancerRecord) -> LoadBalancerStatus:
    ports = tuple(
        PortStatus(port=int(p["port"]), protocol=str(p["protocol"])) for p in record.ports
    )
    ingress = LoadBalancerIngress(ip=record.vip, ip_mode=LoadBalancerIPMode.PROXY, ports=ports)
    return LoadBalancerStatus(ingress=(ingress,))


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
        provider_id = str(_spec(node).get("providerID", ""))
        if provider_id:
            return self.store.find_instance_by_provider_id(_own(provider_id, _node_name(node)))
        return self.store.find_instance(_node_name(node))

    def _get(self, node: Node) -> InstanceRecord:
        found = self._find(node)
        if found is None:
            raise InstanceNotFound(f"no local instance for node {_node_name(node)!r}")
        return found

    def _adopt(self, node: Node) -> InstanceRecord | None:
        glob = self.config.global_
        if not glob.auto_adopt or _spec(node).get("providerID"):
            return None
        return self.store.adopt_instance(
            InstanceRecord(
                name=_node_name(node),
                addresses=_node_addresses(node),
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
                f"no local instance for node {_node_name(node)!r} "
                "(add one with `kccm local instances add`, or set auto-adopt)"
            )
        return InstanceMetadata(
            provider_id=instance.provider_id,
            instance_type=instance.instance_type,
            node_addresses=tuple(NodeAddress(t, a) for t, a in instance.addresses),
            zone=instance.zone,
            region=instance.region,
        )

    # -- Zones ---------------------------------------------------------------------------

    def get_zone(self) -> Zone:
        return Zone(failure_domain=self.config.global_.zone, region=self.config.global_.region)

    def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        instance = self.store.find_instance_by_provider_id(_own(provider_id))
        if instance is None:
            raise InstanceNotFound(f"no local instance {provider_id!r}")
        return Zone(failure_domain=instance.zone, region=instance.region)

    def get_zone_by_node_name(self, name: NodeName) -> Zone:
        instance = self.store.find_instance(name)
        if instance is None:
            raise InstanceNotFound(f"no local instance named {name!r}")
        return Zone(failure_domain=instance.zone, region=instance.region)

    # -- LoadBalancer --------------------------------------------------------------------

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        record = self.store.find_load_balancer(default_load_balancer_name(service))
        return (_status(record), True) if record is not None else (None, False)

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        desired = desired_load_balancer(
            service, nodes, health_check_mode=self.config.global_.health_check_mode
        )
        requested = str(_spec(service).get("loadBalancerIP") or "") or None
        try:
            record = self.store.ensure_load_balancer(
                desired,
                candidates=self.pool.addresses,
                requested_ip=requested,
                in_pool=self.pool.__contains__,
                retain=_retain(service),
            )
        except IPUnavailable as err:
            raise LocalLoadBalancerError(f"{err} (pool {self.pool})") from err
        return _status(record)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        name = default_load_balancer_name(service)
        if self.store.update_backends(name, _backends(nodes)) is None:
            raise LocalLoadBalancerError(f"load balancer {name} of {_service_key(service)} is gone")

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        self.store.delete_load_balancer(
            default_load_balancer_name(service), _service_key(service), keep_claim=_retain(service)
        )

    # -- Routes --------------------------------------------------------------------------

    def list_routes(self, cluster_name: str) -> Sequence[Route]:
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
        self.store.put_route(
            RouteRecord(
                name=f"{cluster_name}-{name_hint}-{route.destination_cidr}",
                cluster=cluster_name,
                target_node=route.target_node,
                destination_cidr=route.destination_cidr,
            )
        )

    def delete_route(self, cluster_name: str, route: Route) -> None:
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
