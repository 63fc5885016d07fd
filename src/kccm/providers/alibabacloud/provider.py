"""The ``alibabacloud`` cloud provider (kubernetes/cloud-provider-alibaba-cloud v2.14.0).

The composition root: upstream's cloud config (``--cloud-config``, required as upstream's
``Validate`` requires it), the metadata service, the credential source
(:mod:`.credentials`), one :class:`~.rpc.RPCClient`, InstancesV2 (:mod:`.instances`) and
routes (:mod:`.routes`).

Start-up as ``NewClientMgr`` (``pkg/provider/alibaba/base/clientMgr.go``): the region is the
config's when ``vpcid`` and ``vswitchid`` are set (``CfgMetaData``) and it has one, else the
metadata service's ``region-id``; the VPC likewise (``vpc-id``). No region, or no credential
from the source upstream would pick, stops kccm with one line (exit 2).

Capabilities: ``InstancesV2``, ``Routes`` and ``LoadBalancer``: classic load balancers
(:mod:`kccm.providers.alibabacloud.loadbalancer.clb`) and network load balancers
(:mod:`kccm.providers.alibabacloud.loadbalancer.nlb`), one per Service as
:mod:`kccm.providers.alibabacloud.loadbalancer.router` decides; the annotation table is in
:mod:`kccm.providers.alibabacloud.loadbalancer.annotations`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kccm.cloudprovider import (
    CloudProviderError,
    CloudProviderInitError,
    ControllerClientBuilder,
    EndpointsUser,
    InstanceDescriber,
    InstanceMetadataLister,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerClassServer,
    LoadBalancerDescriber,
    Routes,
    ServiceMarker,
)
from kccm.cloudprovider.apicalls import CloudAPICalls
from kccm.cloudprovider.errors import CloudConfigError
from kccm.providers.alibabacloud.config import AlibabaConfig, config_summary, load_alibaba_config
from kccm.providers.alibabacloud.credentials import ADDON_TOKEN_PATH, Credentials, pick_source
from kccm.providers.alibabacloud.instances import PROVIDER_NAME, EcsInstances
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlb import NetworkLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlbapi import NlbApi, Waiter
from kccm.providers.alibabacloud.loadbalancer.router import AlibabaLoadBalancers
from kccm.providers.alibabacloud.metadata import MetadataService
from kccm.providers.alibabacloud.routes import NodeDirectory, Tables, VpcRoutes
from kccm.providers.alibabacloud.rpc import RPCClient
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["PROVIDER_NAME", "AlibabaCloud", "Parts", "build_parts", "new_alibabacloud_cloud"]

log = logging.getLogger(__name__)

CLIENT_NAME = "cloud-controller-manager"


@dataclass
class Parts:
    """Everything built from one config."""

    config: AlibabaConfig
    region: str
    vpc_id: str
    credentials: Credentials
    rpc: RPCClient
    instances: EcsInstances
    routes: VpcRoutes
    balancers: AlibabaLoadBalancers


def _located(config: AlibabaConfig, metadata: MetadataService) -> tuple[str, str]:
    """``(region, vpc)`` as ``CfgMetaData`` or the metadata service gives them."""
    try:
        if config.reads_metadata_from_config:
            return config.region or metadata.first_line("region-id"), config.vpc_id
        return metadata.first_line("region-id"), metadata.first_line("vpc-id")
    except CloudProviderError as err:
        raise CloudProviderInitError(f"alibabacloud: can not determin region: {err}") from err


def build_parts(
    config: AlibabaConfig,
    environ: Mapping[str, str],
    *,
    addon_token: Path = ADDON_TOKEN_PATH,
    clock: Clock = REAL_CLOCK,
) -> Parts:
    """The clients and capabilities for ``config`` (reads the metadata service when the
    config does not say where kccm runs, and the credential once)."""
    metadata = MetadataService(environ)
    region, vpc_id = _located(config, metadata)
    name, source = pick_source(config, environ, metadata, addon_token)
    credentials = Credentials(name, source)
    try:
        credentials.get()
    except CloudProviderError as err:
        raise CloudProviderInitError(f"alibabacloud: credential ({name}): {err}") from err
    rpc = RPCClient(region, credentials.get, environ, cluster_id=config.cluster_id)
    instances = EcsInstances(rpc, config, vpc_id)
    routes = VpcRoutes(Tables(rpc, config, vpc_id), region)
    clb = ClassicLoadBalancers(rpc, config, vpc_id)
    nlb = NetworkLoadBalancers(NlbApi(rpc, Waiter(clock)), config, vpc_id, clb.cluster_id)
    balancers = AlibabaLoadBalancers(clb, nlb)
    log.info("alibabacloud: region %s, VPC %s, credential: %s", region, vpc_id or "-", name)
    return Parts(config, region, vpc_id, credentials, rpc, instances, routes, balancers)


class AlibabaCloud:
    """The provider; capability methods are plain ``def`` (the framework runs them in its
    thread pool)."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    @property
    def parts(self) -> Parts:
        return self._parts

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        """A Kubernetes client for the routes' Node lookups (providerID <-> Node name)."""
        log.info("alibabacloud provider: %s", config_summary(self._parts.config))
        if client_builder is None:
            return
        client = client_builder.client(CLIENT_NAME)
        loop = asyncio.get_running_loop()
        self._parts.routes.directory = NodeDirectory.of_client(client, loop)

    def load_balancer(self) -> AlibabaLoadBalancers:
        return self._parts.balancers

    def instances(self) -> None:
        return None

    def instances_v2(self) -> EcsInstances:
        return self._parts.instances

    def zones(self) -> None:
        return None

    def clusters(self) -> None:
        return None

    def routes(self) -> VpcRoutes:
        return self._parts.routes

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True

    def cloud_api_calls(self) -> CloudAPICalls:
        """Every RPC request the provider sent, as reads and writes."""
        return self._parts.rpc.ledger


def new_alibabacloud_cloud(config: TextIO | None) -> AlibabaCloud:
    """The ``alibabacloud`` factory (entry point ``kccm.cloud_providers``)."""
    if config is None:
        raise CloudConfigError(
            ["alibabacloud: --cloud-config is required (upstream: cloud config cannot be empty)"]
        )
    source = str(getattr(config, "name", None) or "cloud-config")
    parsed = load_alibaba_config(config.read(), source)
    return AlibabaCloud(build_parts(parsed, os.environ))


def _implements(
    cloud: AlibabaCloud, instances: EcsInstances, routes: VpcRoutes, lbs: AlibabaLoadBalancers
) -> tuple[
    Interface,
    InstancesV2,
    InstanceDescriber,
    InstanceMetadataLister,
    Routes,
    LoadBalancer,
    LoadBalancerDescriber,
    EndpointsUser,
    ServiceMarker,
    LoadBalancerClassServer,
]:
    """Never called: mypy checks here that each capability implements its Protocol."""
    return (cloud, instances, instances, instances, routes, lbs, lbs, lbs, lbs, lbs)
