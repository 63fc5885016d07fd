"""The aws provider's cloud config: upstream cloud-provider-aws's ``[Global]`` keys that apply.

gcfg example (the format upstream uses; YAML with the same names works too)::

    [Global]
    Zone = eu-west-1a
    Region = eu-west-1
    VPC = vpc-0123456789abcdef0
    SubnetID = subnet-0123456789abcdef0
    RouteTableID = rtb-0123456789abcdef0
    KubernetesClusterID = prod

    [ServiceOverride "ec2"]
    Service = ec2
    Region = eu-west-1
    URL = https://ec2.example.internal
    SigningRegion = eu-west-1

Credentials never appear here: they come from the standard AWS chain (environment, shared
config and credentials files, web identity, container and instance metadata).
"""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TextIO

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.config import load_cloud_config, setting

__all__ = [
    "SERVICE_NAMES",
    "AWSCloudConfig",
    "AWSGlobalConfig",
    "ServiceOverride",
    "load_aws_config",
]

SERVICE_NAMES = {"ec2": "ec2", "elasticloadbalancing": "elbv2", "elbv2": "elbv2"}
"""``ServiceOverride`` ``Service`` values and the boto3 client each one configures."""
HEALTH_PROBE_MODES = ("", "ServiceNodePort", "Shared")
_ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$")


@dataclass(frozen=True)
class AWSGlobalConfig:
    """``[Global]``: names and meanings as in upstream cloud-provider-aws."""

    zone: str = ""
    """An availability zone; the region is derived from it when ``Region`` is empty."""
    region: str = ""
    """The AWS region (kccm has no instance metadata to ask, so Region or Zone is required)."""
    vpc: str = ""
    """The cluster's VPC; when empty, the VPC of ``SubnetID`` is used."""
    subnet_id: str = setting(default="", key="SubnetID")
    """A subnet of the cluster (its VPC is the cluster's when ``VPC`` is empty)."""
    route_table_id: str = setting(default="", key="RouteTableID")
    """The route table for pod routes; when empty, the one tagged for the cluster."""
    kubernetes_cluster_tag: str = ""
    """Legacy cluster ID (the ``KubernetesCluster`` tag)."""
    kubernetes_cluster_id: str = ""
    """The cluster ID: resources carry the ``kubernetes.io/cluster/<id>`` tag."""
    disable_security_group_ingress: bool = False
    """Leave the nodes' security groups alone (no rules for load balancers), as upstream."""
    elb_security_group: str = ""
    """A security group every Classic ELB uses instead of a group of its own, as upstream."""
    node_ip_families: list[str] = setting(default_factory=list)
    """``ipv4`` and/or ``ipv6``, in order of preference (default: ``ipv4``)."""
    cluster_service_load_balancer_health_probe_mode: str = ""
    """``ServiceNodePort`` (default) or ``Shared`` (kube-proxy's health port for Cluster
    traffic policy)."""
    cluster_service_shared_load_balancer_health_probe_port: int = 0
    cluster_service_shared_load_balancer_health_probe_path: str = ""
    role_arn: str = setting(default="", key="RoleARN")
    """Not supported: configure role assumption in the AWS chain (see docs)."""
    api_max_attempts: int = 3
    """kccm extension: attempts per AWS call, retries included (botocore standard mode)."""


@dataclass(frozen=True)
class ServiceOverride:
    """``[ServiceOverride "<any>"]``: a custom endpoint for one AWS service."""

    service: str = ""
    region: str = ""
    url: str = setting(default="", key="URL")
    signing_region: str = ""
    signing_method: str = ""
    signing_name: str = ""


@dataclass(frozen=True)
class AWSCloudConfig:
    global_: AWSGlobalConfig = setting(default_factory=AWSGlobalConfig)
    service_override: dict[str, ServiceOverride] = setting(default_factory=dict)

    @property
    def cluster_id(self) -> str:
        """The effective cluster ID (``KubernetesClusterID``, else the legacy tag value)."""
        return self.global_.kubernetes_cluster_id or self.global_.kubernetes_cluster_tag

    @property
    def region(self) -> str:
        """``Region``, else the region of ``Zone`` (``eu-west-1a`` is in ``eu-west-1``)."""
        return self.global_.region or region_of_zone(self.global_.zone)

    @property
    def ip_families(self) -> tuple[str, ...]:
        return tuple(self.global_.node_ip_families) or ("ipv4",)

    def endpoint(self, client: str) -> ServiceOverride | None:
        """The override for a boto3 client name (``ec2``/``elbv2``) in this region, if any."""
        for override in self.service_override.values():
            region_ok = override.region in ("", self.region)
            if SERVICE_NAMES.get(override.service.lower()) == client and region_ok:
                return override
        return None


def region_of_zone(zone: str) -> str:
    """``eu-west-1a`` -> ``eu-west-1`` (upstream's azToRegion); empty for an empty zone."""
    return zone[:-1] if zone else ""


def _check_global(glob: AWSGlobalConfig) -> list[str]:
    issues = []
    if not glob.region and not glob.zone:
        issues.append("[Global]: Region (or Zone) is required: kccm has no instance metadata")
    if glob.zone and not _ZONE.match(glob.zone):
        issues.append(f"[Global] Zone: {glob.zone!r} is not an availability zone (eu-west-1a)")
    if (
        glob.region
        and glob.zone
        and region_of_zone(glob.zone) != glob.region
        and _ZONE.match(glob.zone)
    ):
        issues.append(f"[Global] Zone: {glob.zone!r} is not in Region {glob.region!r}")
    legacy, current = glob.kubernetes_cluster_tag, glob.kubernetes_cluster_id
    if legacy and current and legacy != current:
        issues.append(
            f"[Global]: KubernetesClusterTag {legacy!r} and KubernetesClusterID {current!r} "
            "differ (upstream refuses this too)"
        )
    for family in glob.node_ip_families:
        if family not in ("ipv4", "ipv6"):
            issues.append(f"[Global] NodeIPFamilies: {family!r} is not ipv4 or ipv6")
    mode = glob.cluster_service_load_balancer_health_probe_mode
    if mode not in HEALTH_PROBE_MODES:
        issues.append(
            f"[Global] ClusterServiceLoadBalancerHealthProbeMode: {mode!r} is not "
            "ServiceNodePort or Shared"
        )
    port = glob.cluster_service_shared_load_balancer_health_probe_port
    if not 0 <= port <= 65535:
        issues.append(
            f"[Global] ClusterServiceSharedLoadBalancerHealthProbePort: {port} is out of range"
        )
    if glob.role_arn:
        issues.append(
            "[Global] RoleARN: not supported by kccm; let the AWS credential chain assume the "
            "role (AWS_ROLE_ARN with a web identity token, or role_arn in a profile)"
        )
    if glob.api_max_attempts < 1:
        issues.append(f"[Global] APIMaxAttempts: {glob.api_max_attempts} must be at least 1")
    return issues


def _check_overrides(config: AWSCloudConfig) -> list[str]:
    issues = []
    for name, override in config.service_override.items():
        where = f'[ServiceOverride "{name}"]'
        if override.service.lower() not in SERVICE_NAMES:
            known = ", ".join(sorted(SERVICE_NAMES))
            issues.append(f"{where} Service: {override.service!r} is not one of {known}")
        if not override.url:
            issues.append(f"{where} URL: is required")
        elif not override.url.startswith(("http://", "https://")):
            issues.append(f"{where} URL: {override.url!r} is not an http(s) URL")
    return issues


def load_aws_config(stream: TextIO | str | None) -> AWSCloudConfig:
    """Parse and check the cloud config; every problem is reported at once."""
    config = load_cloud_config(stream, AWSCloudConfig)
    issues = _check_global(config.global_) + _check_overrides(config)
    if issues:
        raise CloudConfigError(issues)
    return config
