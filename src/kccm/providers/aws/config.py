"""The aws provider's cloud config: upstream cloud-provider-aws's ``[Global]`` keys that apply.

gcfg example (the format upstream uses; YAML with the same names works too)::

    [Global]
    Zone = eu-west-1a
    Region = eu-west-1
    VPC = vpc-0123456789abcdef0
    SubnetID = subnet-0123456789abcdef0
    RouteTableID = rtb-0123456789abcdef0
    KubernetesClusterID = prod

    [ServiceOverride "1"]
    Service = EC2
    Region = eu-west-1
    URL = https://ec2.example.internal
    SigningRegion = eu-west-1

    [ServiceOverride "2"]
    Service = Elastic Load Balancing v2
    Region = eu-west-1
    URL = https://elasticloadbalancing.example.internal
    SigningRegion = eu-west-1

``Service`` takes upstream v1.37's SDK service IDs (``EC2``, ``Elastic Load Balancing``,
``Elastic Load Balancing v2``; ``KMS`` is accepted and unused) with ``Region``, ``URL`` and
``SigningRegion`` all required, as upstream's ``CloudConfig.ValidateOverrides``
(``pkg/providers/v1/config/config.go``) requires them; an override applies to the clients of its
``Region`` only. kccm's earlier spellings (``ec2``, ``elb``, ``elbv2``, ``elasticloadbalancing``:
the latter configures both ELB clients, which share one endpoint in AWS) keep working and may
leave ``Region`` (any region) and ``SigningRegion`` empty.

Credentials never appear here: they come from the standard AWS chain (environment, shared
config and credentials files, web identity, container and instance metadata).
"""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache
from typing import TextIO

import botocore.session

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.config import load_cloud_config, setting

__all__ = [
    "SERVICE_NAMES",
    "AWSCloudConfig",
    "AWSGlobalConfig",
    "ServiceOverride",
    "load_aws_config",
]

log = logging.getLogger(__name__)

UPSTREAM_SERVICE_IDS: dict[str, tuple[str, ...]] = {
    "EC2": ("ec2",),
    "Elastic Load Balancing": ("elb",),
    "Elastic Load Balancing v2": ("elbv2",),
    "KMS": (),
}
"""Upstream's ``Service`` values kccm uses (the AWS SDK v2 ``ServiceID`` of each client,
matched exactly as upstream does) and the boto3 clients each one configures (KMS: none, kccm
uses no KMS)."""
KCCM_SERVICE_NAMES: dict[str, tuple[str, ...]] = {
    "ec2": ("ec2",),
    "elb": ("elb",),
    "elbv2": ("elbv2",),
    "elasticloadbalancing": ("elb", "elbv2"),
}
"""kccm's earlier spellings (case-insensitive)."""
SERVICE_NAMES = (*UPSTREAM_SERVICE_IDS, *KCCM_SERVICE_NAMES)
"""Every accepted ``Service`` value."""
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
    supported_topology_instance_type_pattern: str = ""
    """Instance types expected to have an EC2 topology (a regular expression, upstream's
    ``SupportedTopologyInstanceTypePattern``; default: see ``kccm.providers.aws.topology``)."""
    role_arn: str = setting(default="", key="RoleARN")
    """Not supported: configure role assumption in the AWS chain (see docs)."""
    nlb_security_group_mode: str = setting(default="", key="NLBSecurityGroupMode")
    """``Managed``: every new NLB gets a security group of its own (upstream
    ``NLBSecurityGroupMode``, matched exactly); empty: NLBs have no security group."""
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
        """The override for a boto3 client name (``ec2``/``elb``/``elbv2``) in this region
        (upstream ``GetEC2EndpointOpts`` and its siblings: Service and Region must match)."""
        for override in self.service_override.values():
            region_ok = override.region.strip() in ("", self.region)
            if client in clients_of(override.service) and region_ok:
                return override
        return None


def clients_of(service: str) -> tuple[str, ...]:
    """The boto3 clients a ``[ServiceOverride]`` ``Service`` value configures."""
    name = service.strip()
    if name in UPSTREAM_SERVICE_IDS:
        return UPSTREAM_SERVICE_IDS[name]
    return KCCM_SERVICE_NAMES.get(name.lower(), ())


@cache
def known_regions() -> frozenset[str]:
    """Every region botocore's endpoint data names, in every partition (aws, aws-cn, ...)."""
    session = botocore.session.get_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("ec2", partition_name=partition)
    )


def region_of_zone(zone: str) -> str:
    """``eu-west-1a`` -> ``eu-west-1`` (upstream's azToRegion); empty for an empty zone."""
    return zone[:-1] if zone else ""


def _check_region(config: AWSCloudConfig) -> list[str]:
    """An unknown region stops kccm at start (boto3 would send every request to a host that
    does not exist); a region whose EC2 and ELBv2 endpoints are both overridden is trusted."""
    region = config.region
    if not region or region in known_regions():
        return []
    if config.endpoint("ec2") is not None and config.endpoint("elbv2") is not None:
        return []
    return [
        f"[Global] Region: {region!r} is not an AWS region known to botocore "
        "(e.g. eu-west-1; a private region needs [ServiceOverride] URLs for EC2 and "
        "Elastic Load Balancing v2)"
    ]


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
    issues += _check_pattern(glob.supported_topology_instance_type_pattern)
    if glob.role_arn:
        issues.append(
            "[Global] RoleARN: not supported by kccm; let the AWS credential chain assume the "
            "role (AWS_ROLE_ARN with a web identity token, or role_arn in a profile)"
        )
    if glob.nlb_security_group_mode not in ("", "Managed"):
        # upstream IsNLBSecurityGroupModeManaged (config.go): an error for anything else
        issues.append(
            f"[Global] NLBSecurityGroupMode: {glob.nlb_security_group_mode!r} is not "
            "'Managed' (the only mode; exact case) or empty"
        )
    if glob.api_max_attempts < 1:
        issues.append(f"[Global] APIMaxAttempts: {glob.api_max_attempts} must be at least 1")
    return issues


def _check_pattern(pattern: str) -> list[str]:
    """Upstream compiles the pattern with ``regexp.MustCompile`` (a bad one panics)."""
    try:
        re.compile(pattern)
    except re.error as err:
        return [
            f"[Global] SupportedTopologyInstanceTypePattern: {pattern!r} is not a regular "
            f"expression: {err}"
        ]
    return []


def _check_override(where: str, override: ServiceOverride) -> list[str]:
    """Upstream ``ValidateOverrides``: Service, Region, URL and SigningRegion are required;
    kccm's own spellings (``ec2``, ``elasticloadbalancing``, ...) keep their optional Region
    and SigningRegion. A Service kccm has no client for (``S3``, ``KMS``) is accepted as
    upstream accepts it, and unused (logged)."""
    issues = []
    service = override.service.strip()
    kccm_form = service not in UPSTREAM_SERVICE_IDS and service.lower() in KCCM_SERVICE_NAMES
    if not service:
        issues.append(f"{where} Service: is required")
    elif not clients_of(service):
        log.warning("%s Service: %r is not a service kccm uses; ignored", where, service)
    url = override.url.strip()
    if not url:
        issues.append(f"{where} URL: is required")
    elif not url.startswith(("http://", "https://")):
        issues.append(f"{where} URL: {override.url!r} is not an http(s) URL")
    if not kccm_form:
        if not override.region.strip():
            issues.append(f"{where} Region: is required (as upstream requires it)")
        if not override.signing_region.strip():
            issues.append(f"{where} SigningRegion: is required (as upstream requires it)")
    return issues


def _check_overrides(config: AWSCloudConfig) -> list[str]:
    issues = []
    seen: dict[tuple[str, str], str] = {}
    for name, override in config.service_override.items():
        where = f'[ServiceOverride "{name}"]'
        issues += _check_override(where, override)
        for client in clients_of(override.service):
            key = (client, override.region.strip())
            if key in seen:
                issues.append(
                    f"{where}: duplicate override of {override.service.strip()!r} in region "
                    f'{key[1] or "(any)"} (also in [ServiceOverride "{seen[key]}"])'
                )
            seen[key] = name
    return issues


def _issues(config: AWSCloudConfig) -> list[str]:
    issues = _check_global(config.global_) + _check_overrides(config)
    return issues or _check_region(config)


@dataclass(frozen=True)
class CheckedAWSCloudConfig(AWSCloudConfig):
    """The schema kccm validates ``--cloud-config`` against before start-up (the factory's
    ``config_schema``): built only when every check above passes, so a bad file (an unknown
    region, ...) stops kccm at once with exit code 2 and one line per problem."""

    def __post_init__(self) -> None:
        issues = _issues(self)
        if issues:
            raise CloudConfigError(issues)


def load_aws_config(stream: TextIO | str | None) -> AWSCloudConfig:
    """Parse and check the cloud config; every problem is reported at once."""
    config = load_cloud_config(stream, AWSCloudConfig)
    issues = _issues(config)
    if issues:
        raise CloudConfigError(issues)
    return config
