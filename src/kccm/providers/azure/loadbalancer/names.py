"""What the balancer code is told by the cloud config, and the names and IDs it makes, as
upstream names them (cloud-provider-azure v1.36.5, ``pkg/provider/azure_standard.go``,
``azure_loadbalancer.go`` ``getAzureLoadBalancerName``/``getDefaultFrontendIPConfigName``,
``pkg/consts/consts.go``).

For a Service with UID ``6f1b...-...``, ``base`` is ``a`` + the UID without dashes, cut to 32
characters (``cloudprovider.DefaultLoadBalancerName``); its frontend is ``base`` (or
``base-<subnet>`` for an internal Service with a subnet annotation), its rules and probes
``base-<Protocol>-<port>``, its public IP ``<cluster>-<base>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kccm.cloudprovider import Service, default_load_balancer_name

__all__ = [
    "INTERNAL_SUFFIX",
    "SHARED_PROBE",
    "LBSettings",
    "frontend_name",
    "pip_name",
    "rule_name",
]

INTERNAL_SUFFIX = "-internal"
SHARED_PROBE = "cluster-service-shared-health-probe"
"""``consts.SharedProbeName``: the one probe of every ``Cluster``-policy Service in
``shared`` probe mode."""
_NAME_MAX = 80
"""``FrontendIPConfigNameMaxLength``, ``LoadBalancerRuleNameMaxLength``,
``PIPPrefixNameMaxLength``."""
_FAMILY_SUFFIX = 5
"""``IPFamilySuffixLength`` (``-IPv4``/``-IPv6``), kept free even for IPv4 names."""


@dataclass(frozen=True)
class LBSettings:
    """The cloud config keys the balancer code reads (after upstream's defaults)."""

    subscription_id: str
    resource_group: str
    location: str
    vm_type: str = "vmss"
    load_balancer_sku: str = "standard"
    load_balancer_name: str = ""
    load_balancer_resource_group: str = ""
    vnet_name: str = ""
    vnet_resource_group: str = ""
    subnet_name: str = ""
    security_group_name: str = ""
    security_group_resource_group: str = ""
    exclude_master_from_standard_lb: bool = True
    disable_outbound_snat: bool = False
    tags: str = ""
    tags_map: Mapping[str, str] = field(default_factory=dict)
    system_tags: str = ""
    network_subscription_id: str = ""
    primary_vm_set: str = ""
    """``primaryAvailabilitySetName`` (``vmType: standard``) or ``primaryScaleSetName``."""
    shared_probe: bool = False
    """``clusterServiceLoadBalancerHealthProbeMode: shared``."""
    shared_probe_port: int = 10256
    shared_probe_path: str = "/healthz"
    unsupported: tuple[tuple[str, str], ...] = ()
    """``(key, reason)`` of config keys kccm's balancer does not implement
    (:mod:`.unsupported`): every ensure is refused while there is one."""

    @property
    def standard(self) -> bool:
        """``UseStandardLoadBalancer``."""
        return self.load_balancer_sku.lower() == "standard"

    @property
    def lb_resource_group(self) -> str:
        """``getLoadBalancerResourceGroup``."""
        return self.load_balancer_resource_group or self.resource_group

    @property
    def network_subscription(self) -> str:
        """``getNetworkResourceSubscriptionID``."""
        return self.network_subscription_id or self.subscription_id

    @property
    def nsg_resource_group(self) -> str:
        return self.security_group_resource_group or self.resource_group

    @property
    def vnet_group(self) -> str:
        return self.vnet_resource_group or self.resource_group

    def balancer_name(self, cluster_name: str, internal: bool) -> str:
        """``getAzureLoadBalancerName`` for the primary VM set (one balancer per cluster):
        ``loadBalancerName`` or the cluster name, ``-internal`` for an internal Service."""
        prefix = self.load_balancer_name or cluster_name
        return prefix + INTERNAL_SUFFIX if internal else prefix

    def lb_path(self, lb_name: str) -> str:
        return (
            f"/subscriptions/{self.network_subscription}/resourceGroups/{self.lb_resource_group}"
            f"/providers/Microsoft.Network/loadBalancers/{lb_name}"
        )

    def lb_child_id(self, lb_name: str, kind: str, name: str) -> str:
        """``FrontendIPConfigIDTemplate``, ``BackendPoolIDTemplate``,
        ``LoadBalancerProbeIDTemplate``, ... (``kind``: ``probes``, ...)."""
        return f"{self.lb_path(lb_name)}/{kind}/{name}"

    def pip_path(self, resource_group: str, name: str) -> str:
        return (
            f"/subscriptions/{self.network_subscription}/resourceGroups/{resource_group}"
            f"/providers/Microsoft.Network/publicIPAddresses/{name}"
        )

    def pips_path(self, resource_group: str) -> str:
        return (
            f"/subscriptions/{self.network_subscription}/resourceGroups/{resource_group}"
            "/providers/Microsoft.Network/publicIPAddresses"
        )

    def nsg_path(self) -> str:
        return (
            f"/subscriptions/{self.network_subscription}/resourceGroups/"
            f"{self.nsg_resource_group}/providers/Microsoft.Network/networkSecurityGroups/"
            f"{self.security_group_name}"
        )

    def subnet_path(self, subnet: str) -> str:
        return (
            f"/subscriptions/{self.network_subscription}/resourceGroups/{self.vnet_group}"
            f"/providers/Microsoft.Network/virtualNetworks/{self.vnet_name}/subnets/{subnet}"
        )


def frontend_name(service: Service, subnet: str | None) -> str:
    """``getDefaultFrontendIPConfigName``: ``base``, or ``base-<subnet>`` cut to 75
    characters, a trailing character that is not a letter or ``_`` made ``_``."""
    base = default_load_balancer_name(service)
    if subnet is None:
        return base
    name = f"{base}-{subnet}"
    limit = _NAME_MAX - _FAMILY_SUFFIX
    if len(name) > limit:
        name = name[:limit]
        if not name[-1].isalpha() and name[-1] != "_":
            name = name[:-1] + "_"
    return name


def rule_name(service: Service, protocol: str, port: int, subnet: str | None) -> str:
    """``getLoadBalancerRuleName``: ``base-<Protocol>-<port>``, or with the subnet
    ``base-<subnet>-<Protocol>-<port>`` (the subnet cut to keep 75 characters). Probes use
    the same name (``buildHealthProbeRulesForPort``)."""
    base = default_load_balancer_name(service)
    name = f"{base}-{protocol}-{port}"
    if subnet is None:
        return name
    segment = subnet
    limit = _NAME_MAX - _FAMILY_SUFFIX
    if len(name) + len(segment) + 1 > limit:
        segment = segment[: limit - len(name) - 1]
    return f"{base}-{segment}-{protocol}-{port}"


def pip_name(cluster_name: str, service: Service) -> str:
    """``getPublicIPName``: ``<cluster>-<base>``, cut to 75 characters."""
    name = f"{cluster_name}-{default_load_balancer_name(service)}"
    return name[: _NAME_MAX - _FAMILY_SUFFIX]


def owns_name(service: Service, name: str) -> bool:
    """``serviceOwnsRule``: a rule or probe name starting with ``base`` (any case); the
    shared probe counts as every ``Cluster``-policy Service's."""
    spec = service.get("spec") or {}
    if name == SHARED_PROBE and str(spec.get("externalTrafficPolicy", "")).lower() != "local":
        return True
    return name.upper().startswith(default_load_balancer_name(service).upper())
