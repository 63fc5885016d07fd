"""Cloud config keys of upstream's balancer that kccm does not implement.

Each one changes what upstream's balancer makes (cloud-provider-azure v1.36.5
``pkg/provider/azure_loadbalancer.go`` ``reconcileMultipleStandardLoadBalancerConfigurations``,
``pkg/provider/azure_loadbalancer_backendpool.go`` ``backendPoolTypeNodeIP``/``PodIP``,
``isBackendPoolPreConfigured``), so kccm's balancer, which would make something else, refuses
every Service while such a key is set: one line naming the key, as a Warning on the Service
(``SyncLoadBalancerFailed``), never a balancer made another way. Deleting still works, so
what kccm made before can be cleaned up. Nodes and routes are not affected.
"""

from __future__ import annotations

from kccm.providers.azure.config_fields import AzureConfig

__all__ = ["unsupported_keys"]

_IP_POOLS = ("nodeip", "podip")


def unsupported_keys(config: AzureConfig) -> tuple[tuple[str, str], ...]:
    """``(key, reason)`` for each balancer key of ``config`` kccm does not implement."""
    found: list[tuple[str, str]] = []
    if config.multiple_standard_load_balancer_configurations:
        found.append(
            (
                "multipleStandardLoadBalancerConfigurations",
                "kccm makes one balancer per cluster (multiple standard load balancers are "
                "not supported)",
            )
        )
    pool_type = config.load_balancer_backend_pool_configuration_type or ""
    if pool_type.lower() in _IP_POOLS:
        found.append(
            (
                "loadBalancerBackendPoolConfigurationType",
                f"{pool_type!r}: kccm's pools hold Node network interfaces only "
                "(nodeIPConfiguration); IP-based backend pools are not supported",
            )
        )
    if config.pre_configured_backend_pool_load_balancer_types:
        found.append(
            (
                "preConfiguredBackendPoolLoadBalancerTypes",
                "kccm manages every pool member itself; preconfigured backend pools are "
                "not supported",
            )
        )
    if (config.load_balancer_sku or "").lower() == "service":
        found.append(("loadBalancerSku", "'service' (service gateway) balancers are not supported"))
    return tuple(found)
