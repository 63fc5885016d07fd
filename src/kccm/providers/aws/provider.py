"""The ``aws`` cloud provider: EC2 instances, VPC routes, Classic ELBs and NLBs through boto3."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TextIO

from kccm.cloudprovider import (
    AddressRetainer,
    BalancerSharer,
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
from kccm.providers.aws.annotations import ProbeMode
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.balancers import ServiceLoadBalancers, service_load_balancers
from kccm.providers.aws.config import AWSCloudConfig, CheckedAWSCloudConfig, load_aws_config
from kccm.providers.aws.instances import EC2Instances
from kccm.providers.aws.loadbalancer import NetworkLoadBalancers
from kccm.providers.aws.routes import VPCRoutes
from kccm.providers.aws.tags import ClusterTagging
from kccm.providers.aws.topology import InstanceTopologies
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["PROVIDER_NAME", "AWSCloud", "new_aws_cloud"]

log = logging.getLogger(__name__)

PROVIDER_NAME = "aws"


class AWSCloud:
    """The provider; every method is a plain ``def`` (boto3 is synchronous), so the framework
    runs them in its thread pool."""

    def __init__(
        self, config: AWSCloudConfig, session: Any = None, clock: Clock = REAL_CLOCK
    ) -> None:
        glob = config.global_
        self.config = config
        self.api = AWSAPI(config, session)
        self.tagging = ClusterTagging(
            config.cluster_id, uses_legacy_tag=bool(glob.kubernetes_cluster_tag)
        )
        topologies = InstanceTopologies(
            self.api, glob.supported_topology_instance_type_pattern, clock
        )
        self._instances = EC2Instances(
            self.api, self.tagging, config.region, config.ip_families, topologies
        )
        probe = ProbeMode(
            glob.cluster_service_load_balancer_health_probe_mode,
            glob.cluster_service_shared_load_balancer_health_probe_port,
            glob.cluster_service_shared_load_balancer_health_probe_path,
        )
        self._balancers = NetworkLoadBalancers(
            self.api, self.tagging, vpc_id=glob.vpc, subnet_id=glob.subnet_id, probe=probe
        )
        self._service_balancers = service_load_balancers(
            self.api, self.tagging, self._balancers, glob, probe, clock
        )
        self._routes = VPCRoutes(
            self.api,
            self.tagging,
            self._instances,
            route_table_id=glob.route_table_id,
            vpc_id=glob.vpc,
        )

    def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        log.info(
            "aws provider: region %s, cluster ID %s",
            self.config.region,
            self.tagging.cluster_id or "(none: every resource is the cluster's)",
        )

    def load_balancer(self) -> ServiceLoadBalancers:
        return self._service_balancers

    def instances(self) -> None:
        return None

    def instances_v2(self) -> EC2Instances:
        return self._instances

    def zones(self) -> None:
        return None

    def clusters(self) -> None:
        return None

    def routes(self) -> VPCRoutes:
        return self._routes

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return bool(self.tagging.cluster_id)

    def cloud_api_calls(self) -> CloudAPICalls:
        """Every AWS request the provider sent, as reads and writes (``AWSAPI.call``)."""
        return self.api.ledger


def new_aws_cloud(config: TextIO | None) -> AWSCloud:
    """The ``aws`` factory (entry point ``kccm.cloud_providers``)."""
    return AWSCloud(load_aws_config(config))


new_aws_cloud.config_schema = CheckedAWSCloudConfig  # type: ignore[attr-defined]  # checked before start-up


def _implements(
    cloud: AWSCloud, balancers: ServiceLoadBalancers, instances: EC2Instances, routes: VPCRoutes
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
    """Never called: mypy checks here that each capability implements its Protocol."""
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
