"""The cloud-controller-manager process: upstream's run order, in asyncio.

options → config → provider init (with its cloud config) → serving → leader election →
informers → controllers. A controller whose capability the provider lacks is skipped with a
warning (its health check is ``<name>-skipped``). SIGTERM / SIGINT: controllers stop taking
work and finish in-flight syncs (up to ``shutdown_grace``), the lease is released, exit 0.
Losing the lease stops everything at once and exits 1, as upstream does. A provider call that
never returns (in ``initialize`` or later, in a thread or a coroutine) cannot hold the process:
see :mod:`kccm.app.shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import ssl
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry

from kccm import __version__
from kccm.api.wellknown import ANNOTATION_LEASE_LB_CLASS_LESS, ANNOTATION_LEASE_LB_CLASSES
from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.explain import Explainer
from kccm.app.serving import AuthLookupError, resolve_auth_material
from kccm.app.shutdown import SHUTDOWN_SLACK, ExitDeadline, guard_interpreter_exit
from kccm.cloudprovider.apicalls import register_api_call_metrics
from kccm.cloudprovider.clusterview import as_cluster_view_user
from kccm.cloudprovider.errors import CloudConfigError, CloudProviderInitError
from kccm.cloudprovider.gate import Budget, CallGate, GateConfig
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.interface import Interface
from kccm.cloudprovider.lbclasses import served_load_balancer_classes
from kccm.cloudprovider.providermetrics import register_provider_metrics
from kccm.cloudprovider.registry import init_cloud_provider
from kccm.cloudprovider.useragent import set_extra_user_agent
from kccm.controllers import route, service
from kccm.controllers.base import ControllerContext
from kccm.controllers.syncstate import SyncStates
from kccm.controllers.table import BY_NAME, RunnableController
from kccm.kube.client import KubeApiClient
from kccm.kube.config import ClusterConfig, KubeConfigError, load_cluster_config
from kccm.kube.projection import NODE_PROJECTION
from kccm.kube.resources import NODES
from kccm.runtime.clusterview import informer_cluster_view
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.healthz import LoopPulse
from kccm.runtime.informers import SharedInformerFactory
from kccm.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from kccm.runtime.server import Server
from kccm.util.gcpolicy import (
    freeze_synced_caches,
    freeze_while_syncing,
    stop_freezing_while_syncing,
)
from kccm.util.loop import run_loop

__all__ = ["EXIT_CONFIG", "EXIT_LOST_LEASE", "EXIT_RUNTIME", "Manager", "run_manager"]

_log = logging.getLogger("kccm.manager")
EXIT_CONFIG = 2
EXIT_LOST_LEASE = 1
EXIT_RUNTIME = 1


class StartupError(Exception):
    """A runtime failure at start (e.g. the secure port is taken): one line, exit 1."""


def check_cluster_id(cfg: ManagerConfig, has_cluster_id: bool) -> None:
    """Upstream's cloud initializer: a provider without a cluster ID stops the process unless
    --allow-untagged-cloud, which turns it into a warning."""
    if has_cluster_id:
        return
    if cfg.allow_untagged_cloud:
        _log.warning(
            "detected a cluster without a ClusterID.  A ClusterID will be required in the "
            "future.  Please tag your cluster to avoid any future issues"
        )
        return
    raise ConfigurationError(
        "no ClusterID found.  A ClusterID is required for the cloud provider to function "
        "properly.  This check can be bypassed by setting the allow-untagged-cloud option"
    )


def check_route_settings(cfg: ManagerConfig, routes_supported: bool) -> None:
    """Upstream ``startRouteController``'s --cluster-cidr check, made before leader election
    so a bad setting ends the process at once (exit 2): it applies only when the route
    controller would run against a provider that supports routes."""
    options = cfg.controller_options.route
    runs = route.CONTROLLER_NAME in cfg.controllers and options.configure_cloud_routes
    if not (runs and routes_supported):
        return
    try:
        route.parse_cluster_cidrs(options.cluster_cidr)
    except ValueError as err:
        raise ConfigurationError(
            f"--cluster-cidr: {err} (the provider supports routes and "
            "--configure-cloud-routes=true: set it, or pass --configure-cloud-routes=false "
            "or --controllers=*,-route)"
        ) from err


def run_manager(config: ManagerConfig) -> int:
    """Run until stopped; the process exit status (0 stop, 1 lost lease or runtime failure,
    2 bad config). Never kept alive by a stuck provider call (:mod:`kccm.app.shutdown`)."""
    deadline = ExitDeadline()
    code = EXIT_RUNTIME
    try:
        code = run_loop(Manager(config, deadline=deadline, freeze_gc=True).run())
    except ConfigurationError as exc:
        for problem in exc.problems:
            _log.error("%s", problem)
        code = EXIT_CONFIG
    except StartupError as exc:
        _log.error("%s", exc)
        code = EXIT_RUNTIME
    deadline.cancel()
    guard_interpreter_exit(code)
    return code


def init_provider(config: ManagerConfig) -> Interface:
    """The provider, built by its factory from the cloud config (ConfigurationError if not)."""
    path = config.cloud_config or None
    if path is not None and not Path(path).is_file():
        raise ConfigurationError(f"--cloud-config: cannot read {path!r}: no such file")
    set_extra_user_agent(config.user_agent)
    try:
        cloud = init_cloud_provider(config.cloud_provider, path)
    except (CloudProviderInitError, CloudConfigError, OSError) as exc:
        raise ConfigurationError(f"--cloud-provider={config.cloud_provider}: {exc}") from exc
    if cloud is None:
        raise ConfigurationError(
            f"--cloud-provider={config.cloud_provider!r} selects no provider; "
            "a cloud-controller-manager needs a real one"
        )
    return cloud


class _ClientBuilder:
    """Upstream ``ControllerClientBuilder`` for a provider's own use (``initialize``): clients
    of the manager's cluster, closed with the manager's."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager

    def client(self, name: str) -> KubeApiClient:
        return self._manager._client(name)

    def config(self, name: str) -> ClusterConfig:
        return self._manager._cluster_config()


@dataclass
class Manager:
    config: ManagerConfig
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    sync_states: SyncStates | None = None
    """The daemon's one record of every controller's last syncs (``kccm explain`` reads it);
    built on ``registry`` when not given."""
    server: Server | None = None
    started: dict[str, RunnableController] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    deadline: ExitDeadline = field(default_factory=ExitDeadline)
    freeze_gc: bool = False
    """Freeze what survives the initial sync's collections and then the synced caches out of
    the cycle collector's scans (:mod:`kccm.util.gcpolicy`): the daemon's process does
    (``run_manager``); a manager run inside another program, a test's, leaves that program's
    collector alone."""
    pulse: LoopPulse = field(default_factory=LoopPulse)
    """The loop's pulse, which the controllers' health checks read (kccm.runtime.healthz)."""
    _clients: list[KubeApiClient] = field(default_factory=list)
    _cluster: ClusterConfig | None = None
    explainer: Explainer | None = None

    def __post_init__(self) -> None:
        if self.sync_states is None:
            self.sync_states = SyncStates(registry=self.registry)

    @property
    def states(self) -> SyncStates:
        assert self.sync_states is not None  # set by __post_init__
        return self.sync_states

    async def run(self) -> int:
        cfg = self.config
        _log.info("Version: kccm %s (cloud-controller-manager)", __version__)
        self._cluster = self._cluster_config()
        for warning in cfg.warnings:
            _log.warning("%s", warning)
        cloud = init_provider(cfg)
        _log.info("cloud provider %r initialised", cloud.provider_name())
        register_api_call_metrics(cloud, self.registry)
        register_provider_metrics(cloud, self.registry)
        check_cluster_id(cfg, cloud.has_cluster_id())
        check_route_settings(cfg, cloud.routes() is not None)
        kube = self._client("cloud-controller-manager")
        gate = CallGate(_gate_config(cfg), registry=self.registry)
        gated = GatedCloud(cloud, gate)
        self.explainer = self._explainer(kube, gated, gate)
        stop = asyncio.Event()
        self._install_signal_handlers(stop)
        pulse = asyncio.create_task(self.pulse.run(), name="loop-pulse")
        try:
            if not await self._initialize(gated, stop):
                return 0
            await self._serve(kube)
            return await self._run_until_stopped(kube, gated, stop)
        finally:
            pulse.cancel()
            self._arm_deadline()
            await self._close(gate)

    async def _initialize(self, cloud: GatedCloud, stop: asyncio.Event) -> bool:
        """``cloud.initialize``, abandoned when a stop signal comes first (False)."""
        builder = _ClientBuilder(self)
        init = asyncio.create_task(cloud.initialize(builder, stop), name="provider-initialize")
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({init, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if init.done():
            try:
                init.result()  # a provider error propagates
            except CloudProviderInitError as exc:  # e.g. refused credentials: exit 2
                name = self.config.cloud_provider
                raise ConfigurationError(f"--cloud-provider={name}: {exc}") from exc
            return True
        grace = self.config.shutdown_grace
        _log.info(
            "received a stop signal while the cloud provider initialises; waiting up to %gs",
            grace,
        )
        await asyncio.wait({init}, timeout=grace)
        if not init.done():
            _log.warning("the cloud provider's initialize did not return; exiting without it")
            init.cancel()
            await asyncio.wait({init}, timeout=1.0)
        if init.done() and not init.cancelled():
            init.exception()  # retrieved: a failure after the stop signal changes nothing
        return False

    def _arm_deadline(self) -> None:
        self.deadline.arm(self.config.shutdown_grace + SHUTDOWN_SLACK)

    # -- plumbing ----------------------------------------------------------------------------

    def _cluster_config(self) -> ClusterConfig:
        cfg = self.config
        try:
            return load_cluster_config(cfg.kubeconfig or None, cfg.master or None)
        except KubeConfigError as exc:
            raise ConfigurationError(
                f"--kubeconfig: {exc}" if cfg.kubeconfig else str(exc)
            ) from exc

    def _delegation_client(self, name: str, path: str, kube: KubeApiClient) -> KubeApiClient:
        """The client for --authentication-kubeconfig / --authorization-kubeconfig (the main
        one when the flag is empty)."""
        cluster = _delegation_cluster(name, path)
        return kube if cluster is None else self._client(name, cluster)

    def _serving_client(self, name: str, path: str) -> KubeApiClient:
        """A client for the server's thread (--<name>-kubeconfig, else the main cluster's);
        the server closes it, on that thread."""
        return self._client(name, _delegation_cluster(name, path), register=False)

    def _client(
        self, name: str, cluster: ClusterConfig | None = None, *, register: bool = True
    ) -> KubeApiClient:
        cfg = self.config
        if self._cluster is None:
            self._cluster = self._cluster_config()
        client = KubeApiClient(
            cluster or self._cluster,
            qps=cfg.kube_api_qps,
            burst=cfg.kube_api_burst,
            user_agent=f"kccm/{__version__} cloud-controller-manager/{name}",
            projections={NODES: NODE_PROJECTION},  # the Node cache keeps only this anyway
        )
        if register:
            self._clients.append(client)
        return client

    async def _serve(self, kube: KubeApiClient) -> None:
        serving = self.config.serving
        if serving.secure_port == 0:
            _log.info("secure serving disabled (--secure-port=0)")
            return
        authn = self._delegation_client("authentication", serving.authentication_kubeconfig, kube)
        try:
            material = await resolve_auth_material(authn, serving)
        except AuthLookupError as exc:
            raise StartupError(str(exc)) from exc
        # The server answers on a thread of its own (kccm.runtime.server): its reviews go
        # through clients of its own, so a cache miss never waits for the busy main loop.
        serving_authn = self._serving_client("authentication", serving.authentication_kubeconfig)
        serving_authz = (
            serving_authn  # one cluster for both: one pool
            if serving.authorization_kubeconfig == serving.authentication_kubeconfig
            else self._serving_client("authorization", serving.authorization_kubeconfig)
        )
        self.server = Server(
            registry=self.registry,
            bind_address=serving.bind_address,
            port=serving.secure_port,
            cert_file=Path(serving.tls_cert_file) if serving.tls_cert_file else None,
            key_file=Path(serving.tls_private_key_file) if serving.tls_private_key_file else None,
            cert_dir=Path(serving.cert_dir) if serving.cert_dir else None,
            authorizer=material.authenticator(serving_authn, serving, serving_authz),
            always_allow_paths=serving.always_allow_paths,
            tls_options=material.serving_tls(serving),
            reuse_port=serving.permit_port_sharing,
            reuse_address=serving.permit_address_sharing,
        )
        self.server.close_on_stop(*(c.close for c in dict.fromkeys((serving_authn, serving_authz))))
        if self.explainer is not None:
            self.explainer.register(self.server)
        try:
            await self.server.start()
        except ssl.SSLError as exc:
            raise StartupError(f"secure serving: cannot set up TLS: {exc}") from exc
        except OSError as exc:
            raise StartupError(
                _listen_error(serving.bind_address, serving.secure_port, exc)
            ) from exc
        _log.info("serving securely on %s", self.server.listen_address)

    def _install_signal_handlers(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            stop.set()
            self._arm_deadline()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)

    async def _close(self, gate: CallGate) -> None:
        if self.server is not None:
            await self.server.stop()
        gate.close()
        for client in self._clients:
            await client.close()

    # -- leadership and shutdown -------------------------------------------------------------

    async def _run_until_stopped(
        self, kube: KubeApiClient, cloud: GatedCloud, stop: asyncio.Event
    ) -> int:
        elector = self._elector(kube, cloud)
        if elector is not None and self.server is not None:
            self.server.add_check("leaderElection", elector.check, endpoints=("healthz",))
        body = asyncio.create_task(
            elector.run() if elector is not None else self._lead(cloud), name="manager"
        )
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({body, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if body.done():
            stopping.cancel()
            if body.exception() is not None:
                _log.error("the manager failed", exc_info=body.exception())
                return 1
            if body.result() is False:
                _log.error("leaderelection lost")
                return EXIT_LOST_LEASE
            return 0
        _log.info("received a stop signal; finishing in-flight work")
        await self._drain()
        body.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await body
        _log.info("stopped")
        return 0

    def _elector(self, kube: KubeApiClient, cloud: GatedCloud) -> LeaderElector | None:
        settings = self.config.leader_election
        if not settings.enabled:
            return None
        config = LeaderElectionConfig(
            namespace=settings.resource_namespace,
            name=settings.resource_name,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
            release_on_cancel=settings.release_on_cancel,
            annotations=served_classes_annotations(self.config, self._provider_classes(cloud)),
        )
        _log.info(
            "leader election on lease %s/%s as %s", config.namespace, config.name, config.identity
        )
        if self.explainer is not None:
            self.explainer.identity = config.identity
        return LeaderElector(
            kube,
            config,
            on_started_leading=lambda: self._lead(cloud),
            on_new_leader=lambda who: _log.info("new leader elected: %s", who),
            on_lost=self._lost_lease,
            registry=self.registry,
        )

    def _lost_lease(self) -> None:
        """Upstream's ``OnStoppedLeading``: ``klog.ErrorS(nil, "leaderelection lost")`` and
        ``klog.FlushAndExit(klog.ExitFlushTimeout, 1)``, at once. Winding down first (the
        controllers, the event flush of up to 5 s, provider calls running in worker threads,
        which Python cannot stop) would let this process act on the cloud while a successor
        that took the lease a lease duration after the last renewal already does."""
        _log.error("leaderelection lost")
        self.deadline.exit_now(EXIT_LOST_LEASE)

    async def _drain(self) -> None:
        grace = self.config.shutdown_grace
        await asyncio.gather(
            *(c.stop(grace) for c in self.started.values()), return_exceptions=True
        )

    # -- controllers -------------------------------------------------------------------------

    async def _sync(self, informers: SharedInformerFactory) -> None:
        """Start the informers and wait for their caches, under the daemon's collector policy
        (:mod:`kccm.util.gcpolicy`) when :attr:`freeze_gc`."""
        if self.freeze_gc:
            freeze_while_syncing()
        try:
            informers.start()
            await informers.wait_for_sync()
        finally:
            if self.freeze_gc:
                stop_freezing_while_syncing()
        if self.freeze_gc:
            freeze_synced_caches()

    async def _lead(self, cloud: GatedCloud) -> None:
        """Start informers and controllers; run until cancelled."""
        informer_client = self._client("shared-informers")
        informers = SharedInformerFactory(informer_client)
        events = EventBroadcaster(self._client("events"), registry=self.registry)
        events.start()
        tasks: list[asyncio.Task[None]] = []
        self._set_leading(True)
        try:
            self._build_controllers(informers, events, cloud)
            _hand_cluster_view(cloud, informers)
            await self._sync(informers)
            _log.info("caches synced; starting %d controllers", len(self.started))
            tasks = [asyncio.create_task(c.run(), name=n) for n, c in self.started.items()]
            if tasks:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    if not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
            await asyncio.Event().wait()  # lead until cancelled
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._set_leading(False)
            await informers.stop()
            await events.shutdown(grace=5.0)

    def _set_leading(self, leading: bool) -> None:
        if self.explainer is not None:
            self.explainer.leading = leading

    @staticmethod
    def _provider_classes(cloud: GatedCloud | None) -> frozenset[str]:
        """The load-balancer classes the provider serves by itself (as the service
        controller merges them)."""
        balancer = cloud.load_balancer() if cloud is not None else None
        return served_load_balancer_classes(balancer.impl if balancer else None)

    def _explainer(self, kube: KubeApiClient, cloud: GatedCloud, gate: CallGate) -> Explainer:
        """``/debug/kccm/explain`` (:mod:`kccm.app.explain`): what this daemon knows, read-only."""
        cfg, election = self.config, self.config.leader_election
        return Explainer(
            kube=kube,
            cloud=cloud,
            gate=gate,
            provider=cfg.cloud_provider,
            cluster_name=cfg.cluster_name,
            lease=(election.resource_namespace, election.resource_name),
            identity=socket.gethostname(),
            leader_election=election.enabled,
            states=self.states,
            classes=cfg.controller_options.service.classes().serving(self._provider_classes(cloud)),
            default_retain_address=cfg.controller_options.service.default_retain_address,
            default_drain_seconds=cfg.controller_options.service.default_drain_seconds,
        )

    def _build_controllers(
        self, informers: SharedInformerFactory, events: EventBroadcaster, cloud: GatedCloud
    ) -> None:
        for name in sorted(self.config.controllers):
            spec = BY_NAME.get(name)
            if spec is None:
                raise ConfigurationError(f'--controllers: "{name}" is not a known controller')
            context = ControllerContext(
                kube=self._client(spec.client_name),
                informers=informers,
                cloud=cloud,
                events=events,
                registry=self.registry,
                cluster_name=self.config.cluster_name,
                sync_states=self.states,
            )
            self._register(name, spec.build(context, self.config.controller_options))

    def _register(self, name: str, built: RunnableController | None) -> None:
        if built is None:
            # the controller's build() has logged why (disabled by a flag, or unsupported)
            _log.warning("Skipping %r", name)
            self.skipped.append(name)
            if self.server is not None:
                self.server.add_check(f"{name}-skipped", self.pulse.check, endpoints=("healthz",))
            return
        self.started[name] = built
        _log.info("Started %r", name)
        if self.server is not None:
            self.server.add_check(name, self.pulse.check, endpoints=("healthz",))


def _hand_cluster_view(cloud: GatedCloud, informers: SharedInformerFactory) -> None:
    """A provider asking for the cluster's Services and Nodes gets the caches' view, before
    they start (:mod:`kccm.cloudprovider.clusterview`)."""
    user = as_cluster_view_user(cloud.cloud)
    view = informer_cluster_view(informers)
    if user is not None and view is not None:
        user.set_cluster_view(view)


def _listen_error(address: str, port: int, exc: OSError) -> str:
    where = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    if exc.errno == errno.EADDRINUSE:
        reason = "the address is already in use (another process listens on it)"
    elif exc.errno == errno.EADDRNOTAVAIL:
        reason = "the address is not one of this host's addresses"
    elif exc.errno == errno.EACCES:
        reason = "permission denied (ports below 1024 need privileges)"
    else:
        reason = exc.strerror or str(exc)
    return f"--secure-port: cannot listen on {where}: {reason}"


def served_classes_annotations(
    cfg: ManagerConfig, provider_classes: Collection[str] = ()
) -> dict[str, str]:
    """What this daemon's Lease says it serves (``kccm explain`` reads it): the flag's
    classes, then those the provider serves by itself; nothing when service-lb-controller
    does not run."""
    if service.CONTROLLER_NAME not in cfg.controllers:
        return {}
    options = cfg.controller_options.service
    names = list(options.load_balancer_classes)
    names += sorted(set(provider_classes) - set(names))
    return {
        ANNOTATION_LEASE_LB_CLASSES: ",".join(names),
        ANNOTATION_LEASE_LB_CLASS_LESS: str(not options.load_balancer_class_only).lower(),
    }


def _gate_config(cfg: ManagerConfig) -> GateConfig:
    gate = cfg.gate
    budget = Budget(qps=gate.qps, burst=max(1, gate.burst)) if gate.qps > 0 else None
    groups: dict[str, Budget | None] = {
        group: Budget(qps=qps, burst=max(1, gate.burst)) if qps > 0 else None
        for group, qps in gate.group_qps.items()
    }
    return GateConfig(budget=budget, group_budgets=groups, max_threads=gate.provider_threads)


def _delegation_cluster(name: str, path: str) -> ClusterConfig | None:
    """--<name>-kubeconfig's cluster, None when the flag is empty."""
    if not path:
        return None
    try:
        return load_cluster_config(path)
    except KubeConfigError as exc:
        raise ConfigurationError(f"--{name}-kubeconfig: {exc}") from exc
