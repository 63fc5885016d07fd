"""The ``openstack`` cloud provider (upstream ``pkg/openstack/openstack.go`` v1.36.0).

The composition root: the config, one :class:`~kccm.providers.openstack.api.OpenStackAPI`,
InstancesV2 (``instances.py``), routes (``routes.py``) and the Octavia load balancers
(the ``loadbalancer`` subpackage). Like ``NewOpenStack``, the factory authenticates at once: refused
credentials, a region without the compute/network (and, with ``[LoadBalancer] enabled``,
load-balancer) endpoints, or an unreachable Keystone stop kccm with one line (exit 2).

Capabilities as upstream: ``Instances()`` v1, ``Zones()`` and ``Clusters()`` are not
supported; ``LoadBalancer()`` only with ``[LoadBalancer] enabled`` (default true);
``Routes()`` only with ``[Route] router-id`` and the ``extraroute`` or ``extraroute-atomic``
Neutron extension (``Routes()`` lists the extensions); ``HasClusterID()`` is always true.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import TextIO

from prometheus_client import CollectorRegistry

from kccm.cloudprovider import (
    AddressRetainer,
    BalancerSharer,
    CloudProviderError,
    ControllerClientBuilder,
    InstanceDescriber,
    InstanceMetadataLister,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    Routes,
    TargetDrainer,
)
from kccm.cloudprovider.apicalls import CloudAPICalls
from kccm.providers.openstack.api import OpenStackAPI
from kccm.providers.openstack.config import (
    CheckedOpenStackConfig,
    OpenStackConfig,
    load_openstack_config,
)
from kccm.providers.openstack.instances import (
    PROVIDER_NAME,
    REGIONAL_PROVIDER_ID_ENV,
    OpenStackInstances,
)
from kccm.providers.openstack.loadbalancer import KubeServicePatcher, OctaviaSharing
from kccm.providers.openstack.routes import NeutronRoutes, NodeDirectory, network_extensions
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["PROVIDER_NAME", "OpenStackCloud", "new_openstack_cloud"]

log = logging.getLogger(__name__)

CLIENT_NAME = "cloud-controller-manager"
"""Upstream ``Initialize``: ``clientBuilder.ClientOrDie("cloud-controller-manager")``."""


class OpenStackCloud:
    """The provider; every method is a plain ``def`` (keystoneauth is synchronous), so the
    framework runs them in its thread pool."""

    def __init__(
        self,
        config: OpenStackConfig,
        api: OpenStackAPI | None = None,
        clock: Clock = REAL_CLOCK,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.config = config
        self._clock = clock
        self.api = api or OpenStackAPI(config)
        self._instances = OpenStackInstances(
            self.api, config, regional=env.get(REGIONAL_PROVIDER_ID_ENV) == "true"
        )
        self._routes: NeutronRoutes | None = None
        self._balancers: OctaviaSharing | None = None
        if config.load_balancer.enabled:
            self._balancers = OctaviaSharing(self.api, config, clock)

    def verify(self) -> None:
        """Authenticate and find the services (``NewOpenStack``); then decide routes support
        (``Routes()``: router-id and an extraroute extension)."""
        services: tuple[str, ...] = ("compute", "network")
        if self.config.load_balancer.enabled:
            services += ("load-balancer",)
        self.api.verify(services)
        self._routes = self._build_routes()

    def _build_routes(self) -> NeutronRoutes | None:
        router_id = self.config.route.router_id
        if not router_id:
            log.info("openstack: no [Route] router-id: routes are not supported")
            return None
        try:
            extensions = network_extensions(self.api)
        except CloudProviderError as err:  # Routes(): "Failed to list neutron extensions"
            log.warning("openstack: failed to list Neutron extensions: %s; no routes", err)
            return None
        if "extraroute" not in extensions and "extraroute-atomic" not in extensions:
            log.warning(
                "openstack: Neutron has no extraroute extension, required for routes support"
            )
            return None
        atomic = "extraroute-atomic" in extensions
        log.info(
            "openstack: claiming to support routes on router %s%s",
            router_id,
            " with atomic updates" if atomic else "",
        )
        return NeutronRoutes(
            self.api,
            self._instances,
            router_id,
            atomic=atomic,
            allowed_address_pairs="allowed-address-pairs" in extensions,
        )

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        """Upstream ``Initialize``: a Kubernetes client (``cloud-controller-manager``) for the
        routes' Node lookups (``routes.NodeDirectory``, OCCM's Node informer) and the load
        balancers' Service annotations (``servicepatch.KubeServicePatcher``)."""
        log.info(
            "openstack provider: region %s, Keystone %s (interface %s)",
            self.config.region or "(any)",
            self.api.auth_url,
            self.api.interface,
        )
        if client_builder is None:
            return
        if self._routes is None and self._balancers is None:
            return
        loop = asyncio.get_running_loop()
        client = client_builder.client(CLIENT_NAME)
        if self._routes is not None:
            self._routes.directory = NodeDirectory(client, loop, self._clock)
        if self._balancers is not None:
            self._balancers.set_service_patcher(KubeServicePatcher(client, loop))

    def load_balancer(self) -> OctaviaSharing | None:
        return self._balancers

    def instances(self) -> None:
        return None

    def instances_v2(self) -> OpenStackInstances:
        return self._instances

    def zones(self) -> None:
        return None

    def clusters(self) -> None:
        return None

    def routes(self) -> NeutronRoutes | None:
        return self._routes

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True  # upstream HasClusterID: always true

    def cloud_api_calls(self) -> CloudAPICalls:
        """Every OpenStack request the provider sent, as reads and writes."""
        return self.api.ledger

    def register_metrics(self, registry: CollectorRegistry) -> None:
        """OCCM's ``openstack_api_*`` and ``cloudprovider_openstack_reconcile_*`` metrics
        (:mod:`kccm.providers.openstack.metrics`) on the daemon's ``/metrics``."""
        self.api.metrics.register(registry)


def new_openstack_cloud(config: TextIO | None) -> OpenStackCloud:
    """The ``openstack`` factory (entry point ``kccm.cloud_providers``): reads ``cloud.conf``
    and authenticates, so a wrong password or an unknown region stops the start."""
    cloud = OpenStackCloud(load_openstack_config(config))
    cloud.verify()
    return cloud


def _implements(
    cloud: OpenStackCloud,
    balancers: OctaviaSharing,
    instances: OpenStackInstances,
    routes: NeutronRoutes,
) -> tuple[
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    AddressRetainer,
    TargetDrainer,
    BalancerSharer,
    InstancesV2,
    InstanceDescriber,
    InstanceMetadataLister,
    Routes,
]:
    """Never called: mypy checks here that each capability implements its Protocol (a method
    added to one of them and missing here fails ``make typecheck``)."""
    return (
        cloud,
        balancers,
        balancers,
        balancers,
        balancers,
        balancers,
        instances,
        instances,
        instances,
        routes,
    )


new_openstack_cloud.config_schema = CheckedOpenStackConfig  # type: ignore[attr-defined]  # checked before start-up
new_openstack_cloud.config_ignores_unknown_keys = True  # type: ignore[attr-defined]  # as OCCM's gcfg.FatalOnly
