"""The ``azure`` cloud provider (upstream ``pkg/provider/azure.go`` v1.36.5).

The composition root: the config (``azure.json`` from ``--cloud-config``, else the Secret
``kube-system/azure-cloud-provider``), the cloud environment and credential, one
:class:`~kccm.providers.azure.arm.ARMClient`, InstancesV2 (``instances.py``), routes
(``routes.py``) and the load balancers (the ``loadbalancer`` subpackage, built by
:func:`build_load_balancers`).

Start-up as upstream's ``InitializeCloudFromConfig``: outside Azure Stack, the regions' zones
are read once (``GET /subscriptions/<sub>/providers/Microsoft.Compute``, ``syncRegionZonesMap``),
which also proves the credential: a refused sign-in, a missing role or an unreachable ARM
stops kccm with one line (exit 2).

Capabilities as upstream: ``InstancesV2``, ``LoadBalancer`` and ``Routes``; ``Instances`` v1,
``Zones`` and ``Clusters`` are not offered (InstancesV2 supersedes the first two; upstream has
no Clusters). **Difference**: without ``routeTableName`` kccm offers no routes (upstream would
fail every route call on a route table with no name). ``HasClusterID()`` is always true.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from kccm.cloudprovider import (
    AddressRetainer,
    BackendNodeSelector,
    CloudProviderInitError,
    ClusterView,
    ClusterViewUser,
    ControllerClientBuilder,
    InstanceDescriber,
    InstanceMetadataLister,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    Routes,
)
from kccm.cloudprovider.apicalls import CloudAPICalls
from kccm.cloudprovider.errors import CloudConfigError
from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.arm_errors import ARMError
from kccm.providers.azure.auth import make_credential
from kccm.providers.azure.cloudenv import cloud_environment, is_stack_cloud
from kccm.providers.azure.config import AzureConfig, load_azure_config
from kccm.providers.azure.configsecret import CONFIG_SECRET, read_config_secret
from kccm.providers.azure.instances import AzureInstances
from kccm.providers.azure.inventory import Inventory
from kccm.providers.azure.late import LateBalancers, LateInstances, LateRoutes
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.providers.azure.machines import PROVIDER_NAME
from kccm.providers.azure.routes import AzureRoutes
from kccm.providers.azure.versions import ApiVersions, api_versions

__all__ = [
    "CONFIG_SECRET",
    "PROVIDER_NAME",
    "AzureCloud",
    "Parts",
    "build_load_balancers",
    "build_parts",
    "new_azure_cloud",
]

log = logging.getLogger(__name__)

CLIENT_NAME = "cloud-controller-manager"


@dataclass
class Parts:
    """Everything built from one config."""

    config: AzureConfig
    arm: ARMClient
    versions: ApiVersions
    inventory: Inventory
    instances: AzureInstances
    routes: AzureRoutes | None
    balancers: AzureLoadBalancers


def _tls_verify(environ: Mapping[str, str]) -> bool | str:
    """Go reads ``SSL_CERT_FILE``; ``requests`` reads ``REQUESTS_CA_BUNDLE`` itself, so the
    first is passed on explicitly."""
    return environ.get("SSL_CERT_FILE") or True


def build_load_balancers(
    config: AzureConfig, arm: ARMClient, versions: ApiVersions
) -> AzureLoadBalancers:
    """The load balancer capability (the ``loadbalancer`` subpackage's entry)."""
    from kccm.providers.azure.loadbalancer.armclient import ClientArm, lb_settings

    return AzureLoadBalancers(ClientArm(arm, versions), lb_settings(config))


def build_parts(
    config: AzureConfig,
    environ: Mapping[str, str],
    *,
    arm: ARMClient | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Parts:
    """The clients and capabilities for ``config`` (``arm``: a ready client; ``sleep``: how
    retries and polls wait; both for tests)."""
    versions = api_versions(is_stack_cloud(config))
    if arm is None:
        env = cloud_environment(config, environ)
        verify = _tls_verify(environ)
        extra = {"connection_verify": verify} if isinstance(verify, str) else {}
        arm = ARMClient(
            env.arm_url,
            make_credential(config, env, environ, **extra),
            env.scope,
            subscription_id=config.subscription_id,
            user_agent=config.user_agent,
            verify=verify,
            sleep=sleep,
        )
    inventory = Inventory(
        arm,
        versions,
        vmss_instance_view=not config.list_vmss_virtual_machines_without_instance_view,
    )
    instances = AzureInstances(inventory, config)
    routes = None
    if config.route_table_name:
        routes = AzureRoutes(
            arm,
            config,
            versions,
            machine_by_name=lambda name: instances.machine_of(
                {"metadata": {"name": name}}, batch=False
            ),
            nic_of=inventory.nic,
        )
    else:
        log.info("azure: no routeTableName: routes are not supported")
    balancers = build_load_balancers(config, arm, versions)
    return Parts(config, arm, versions, inventory, instances, routes, balancers)


class AzureCloud:
    """The provider; capability methods are plain ``def`` (the framework runs them in its
    thread pool)."""

    def __init__(self, parts: Parts | None, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._parts = parts
        self._ledger = parts.arm.ledger if parts is not None else CloudAPICalls()
        self.region_zones: dict[str, list[str]] = {}
        self._view: ClusterView | None = None

    @property
    def parts(self) -> Parts | None:
        return self._parts

    # -- start-up ---------------------------------------------------------------------------

    def verify(self) -> None:
        """``syncRegionZonesMap`` outside Azure Stack: proves the credential and ARM."""
        parts = self._parts
        if parts is None or is_stack_cloud(parts.config):
            return
        try:
            found = parts.arm.get(
                f"/subscriptions/{parts.config.subscription_id}/providers/Microsoft.Compute",
                parts.versions.providers,
                operation="providers.get",
            )
        except ARMError as err:
            raise CloudProviderInitError(f"azure: cannot start: {err}") from err
        self.region_zones = _zones(found)
        location = parts.config.location.lower().replace(" ", "")
        parts.balancers.use_zones(self.region_zones.get(location, []))

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        """Without ``--cloud-config``: read the config Secret and build everything."""
        if self._parts is None:
            if client_builder is None:
                raise CloudProviderInitError("azure: no --cloud-config and no Kubernetes client")
            text = await read_config_secret(client_builder.client(CLIENT_NAME), CONFIG_SECRET)
            namespace, name, key = CONFIG_SECRET
            source = f"Secret {namespace}/{name} key {key}"
            try:
                config = load_azure_config(text, source, environ=self._environ, from_file=False)
                parts = await asyncio.to_thread(build_parts, config, self._environ)
            except CloudConfigError as err:
                raise CloudProviderInitError(f"azure: {err}") from err
            parts.arm.ledger = self._ledger
            self._parts = parts
            if self._view is not None:
                parts.balancers.use_cluster_view(self._view)
            await asyncio.to_thread(self.verify)
        config = self._parts.config
        log.info(
            "azure provider: subscription %s, resource group %s, vmType %s, %s SKU",
            config.subscription_id,
            config.resource_group,
            config.vm_type,
            config.load_balancer_sku,
        )

    def set_cluster_view(self, view: ClusterView) -> None:
        """Every Service and Node (``ClusterViewUser``): the security group's retain pass
        needs them, as upstream's lists them (``listAvailableSecurityGroupDestinations``)."""
        self._view = view
        if self._parts is not None:
            self._parts.balancers.use_cluster_view(view)

    # -- capabilities -----------------------------------------------------------------------

    def load_balancer(self) -> AzureLoadBalancers | LateBalancers:
        if self._parts is not None:
            return self._parts.balancers
        return LateBalancers(lambda: self._parts.balancers if self._parts else None)

    def instances(self) -> None:
        return None

    def instances_v2(self) -> AzureInstances | LateInstances:
        if self._parts is not None:
            return self._parts.instances
        return LateInstances(lambda: self._parts.instances if self._parts else None)

    def zones(self) -> None:
        return None

    def clusters(self) -> None:
        return None

    def routes(self) -> AzureRoutes | LateRoutes | None:
        if self._parts is not None:
            return self._parts.routes
        return LateRoutes(lambda: self._parts.routes if self._parts else None)

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True  # upstream HasClusterID: always true

    def cloud_api_calls(self) -> CloudAPICalls:
        """Every ARM request the provider sent, as reads and writes."""
        return self._ledger


def _zones(provider: Mapping[str, Any]) -> dict[str, list[str]]:
    """``GetVirtualMachineSupportedZones``: the ``virtualMachines`` resource type's
    ``zoneMappings`` by location."""
    zones: dict[str, list[str]] = {}
    for kind in provider.get("resourceTypes") or ():
        if str(kind.get("resourceType") or "").lower() != "virtualmachines":
            continue
        for mapping in kind.get("zoneMappings") or ():
            location = str(mapping.get("location") or "").lower().replace(" ", "")
            zones[location] = [str(z) for z in mapping.get("zones") or ()]
    return zones


def new_azure_cloud(config: TextIO | None) -> AzureCloud:
    """The ``azure`` factory (entry point ``kccm.cloud_providers``): reads ``azure.json`` and
    signs in, so bad credentials stop the start; without a file the Secret is read when the
    provider is initialised."""
    if config is None:
        return AzureCloud(None)
    text = config.read()
    source = str(getattr(config, "name", None) or "azure.json")
    parsed = load_azure_config(text, source, environ=os.environ)
    cloud = AzureCloud(build_parts(parsed, os.environ))
    cloud.verify()
    return cloud


def _selects(
    balancers: AzureLoadBalancers, late: LateBalancers
) -> tuple[BackendNodeSelector, BackendNodeSelector]:
    """Never called: both balancer classes say which Nodes they leave out (``kccm explain``)."""
    return (balancers, late)


def _implements(
    cloud: AzureCloud,
    balancers: AzureLoadBalancers,
    late_balancers: LateBalancers,
    instances: AzureInstances,
    late_instances: LateInstances,
    routes: AzureRoutes,
    late_routes: LateRoutes,
) -> tuple[
    Interface,
    ClusterViewUser,
    LoadBalancer,
    LoadBalancerDescriber,
    AddressRetainer,
    LoadBalancer,
    LoadBalancerDescriber,
    AddressRetainer,
    InstancesV2,
    InstanceDescriber,
    InstanceMetadataLister,
    InstancesV2,
    InstanceDescriber,
    InstanceMetadataLister,
    Routes,
    Routes,
]:
    """Never called: mypy checks here that each capability implements its Protocol (a method
    added to one of them and missing here fails ``make typecheck``)."""
    return (
        cloud,
        cloud,
        balancers,
        balancers,
        balancers,
        late_balancers,
        late_balancers,
        late_balancers,
        instances,
        instances,
        instances,
        late_instances,
        late_instances,
        late_instances,
        routes,
        late_routes,
    )
