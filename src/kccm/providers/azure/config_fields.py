"""Every key of upstream's ``azure.json``, as one frozen dataclass.

Upstream (sigs.k8s.io/cloud-provider-azure v1.36.5) reads its config into
``pkg/provider/config/azure.go`` ``Config``, which embeds ``AzureClientConfig``
(``pkg/provider/config/azure_auth.go``), and through it ``azclient.ARMClientConfig``
(``pkg/azclient/arm_conf.go``), ``azclient.AzureAuthConfig`` (``pkg/azclient/auth_conf.go``),
``ratelimit.CloudProviderRateLimitConfig`` (``pkg/azclient/policy/ratelimit/ratelimit.go``)
and ``CloudProviderCacheConfig`` (``pkg/provider/config/azure_cache.go``). Go's
``encoding/json`` promotes the embedded structs' fields, so the file is one flat object; each
field below names its JSON key (``json``) and how its value is read (``kind``, see
:mod:`kccm.providers.azure.config_values`).

Field names are the JSON keys in snake case. Secrets (``aadClientSecret``,
``aadClientCertPassword``) are left out of ``repr``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AzureConfig", "json_fields"]


def _f(key: str, kind: str, default: Any = "", *, secret: bool = False) -> Any:
    return dataclasses.field(
        default=default, repr=not secret, metadata={"json": key, "kind": kind, "secret": secret}
    )


def _s(key: str, *, secret: bool = False) -> Any:
    return _f(key, "string", "", secret=secret)


def _b(key: str) -> Any:
    return _f(key, "bool", False)


def _i(key: str, kind: str = "int") -> Any:
    return _f(key, kind, 0)


def _x(key: str, kind: str) -> Any:
    return _f(key, kind, None)


@dataclass(frozen=True)
class AzureConfig:
    """``azure.json`` as read (before upstream's defaults; see ``config.py``)."""

    # -- azclient.ARMClientConfig -------------------------------------------------------------
    cloud: str = _s("cloud")
    user_agent: str = _s("userAgent")
    resource_manager_endpoint: str = _s("resourceManagerEndpoint")
    tenant_id: str = _s("tenantId")
    network_resource_tenant_id: str = _s("networkResourceTenantID")
    cloud_provider_backoff: bool = _b("cloudProviderBackoff")
    disable_azure_stack_cloud: bool = _b("disableAzureStackCloud")
    enable_minimum_retry_after: bool = _b("enableMinimumRetryAfter")
    # -- azclient.AzureAuthConfig -------------------------------------------------------------
    aad_client_id: str = _s("aadClientId")
    aad_client_secret: str = _s("aadClientSecret", secret=True)
    aad_client_cert_path: str = _s("aadClientCertPath")
    aad_client_cert_password: str = _s("aadClientCertPassword", secret=True)
    use_managed_identity_extension: bool = _b("useManagedIdentityExtension")
    user_assigned_identity_id: str = _s("userAssignedIdentityID")
    aad_federated_token_file: str = _s("aadFederatedTokenFile")
    use_federated_workload_identity_extension: bool = _b("useFederatedWorkloadIdentityExtension")
    auxiliary_token_provider: Mapping[str, Any] | None = _x("auxiliaryTokenProvider", "object")
    aad_msi_data_plane_identity_path: str = _s("aadMSIDataPlaneIdentityPath")
    # -- ratelimit.CloudProviderRateLimitConfig (read, unused upstream: see config.py) ---------
    cloud_provider_rate_limit: bool = _b("cloudProviderRateLimit")
    cloud_provider_rate_limit_qps: float = _f("cloudProviderRateLimitQPS", "float32", 0.0)
    cloud_provider_rate_limit_bucket: int = _i("cloudProviderRateLimitBucket")
    cloud_provider_rate_limit_qps_write: float = _f(
        "cloudProviderRateLimitQPSWrite", "float32", 0.0
    )
    cloud_provider_rate_limit_bucket_write: int = _i("cloudProviderRateLimitBucketWrite")
    rate_limit_entries: Mapping[str, Any] | None = _x("Entries", "object")
    # -- CloudProviderCacheConfig -------------------------------------------------------------
    disable_api_call_cache: bool = _b("disableAPICallCache")
    non_vmss_uniform_nodes_cache_ttl_in_seconds: int = _i("nonVmssUniformNodesCacheTTLInSeconds")
    vmss_cache_ttl_in_seconds: int = _i("vmssCacheTTLInSeconds")
    vmss_virtual_machines_cache_ttl_in_seconds: int = _i("vmssVirtualMachinesCacheTTLInSeconds")
    list_vmss_virtual_machines_without_instance_view: bool = _b(
        "listVmssVirtualMachinesWithoutInstanceView"
    )
    vmss_flex_cache_ttl_in_seconds: int = _i("vmssFlexCacheTTLInSeconds")
    vmss_flex_vm_cache_ttl_in_seconds: int = _i("vmssFlexVMCacheTTLInSeconds")
    vm_cache_ttl_in_seconds: int = _i("vmCacheTTLInSeconds")
    load_balancer_cache_ttl_in_seconds: int = _i("loadBalancerCacheTTLInSeconds")
    nsg_cache_ttl_in_seconds: int = _i("nsgCacheTTLInSeconds")
    route_table_cache_ttl_in_seconds: int = _i("routeTableCacheTTLInSeconds")
    pls_cache_ttl_in_seconds: int = _i("plsCacheTTLInSeconds")
    availability_sets_cache_ttl_in_seconds: int = _i("availabilitySetsCacheTTLInSeconds")
    public_ip_cache_ttl_in_seconds: int = _i("publicIPCacheTTLInSeconds")
    route_update_waiting_in_seconds: int = _i("routeUpdateWaitingInSeconds")
    # -- AzureClientConfig ----------------------------------------------------------------------
    cloud_provider_backoff_retries: int = _i("cloudProviderBackoffRetries")
    cloud_provider_backoff_duration: int = _i("cloudProviderBackoffDuration")
    subscription_id: str = _s("subscriptionId")
    identity_system: str = _s("identitySystem")
    network_resource_subscription_id: str = _s("networkResourceSubscriptionID")
    # -- Config ---------------------------------------------------------------------------------
    cloud_config_type: str = _s("cloudConfigType")
    resource_group: str = _s("resourceGroup")
    location: str = _s("location")
    extended_location_name: str = _s("extendedLocationName")
    extended_location_type: str = _s("extendedLocationType")
    vnet_name: str = _s("vnetName")
    vnet_resource_group: str = _s("vnetResourceGroup")
    subnet_name: str = _s("subnetName")
    security_group_name: str = _s("securityGroupName")
    security_group_resource_group: str = _s("securityGroupResourceGroup")
    route_table_name: str = _s("routeTableName")
    route_table_resource_group: str = _s("routeTableResourceGroup")
    primary_availability_set_name: str = _s("primaryAvailabilitySetName")
    vm_type: str = _s("vmType")
    primary_scale_set_name: str = _s("primaryScaleSetName")
    tags: str = _s("tags")
    tags_map: Mapping[str, str] | None = _x("tagsMap", "string-map")
    system_tags: str = _s("systemTags")
    load_balancer_sku: str = _s("loadBalancerSku")
    load_balancer_name: str = _s("loadBalancerName")
    load_balancer_resource_group: str = _s("loadBalancerResourceGroup")
    pre_configured_backend_pool_load_balancer_types: str = _s(
        "preConfiguredBackendPoolLoadBalancerTypes"
    )
    disable_availability_set_nodes: bool = _b("disableAvailabilitySetNodes")
    enable_vmss_flex_nodes: bool = _b("enableVmssFlexNodes")
    use_instance_metadata: bool = _b("useInstanceMetadata")
    cloud_provider_backoff_exponent: float = _f("cloudProviderBackoffExponent", "float64", 0.0)
    cloud_provider_backoff_jitter: float = _f("cloudProviderBackoffJitter", "float64", 0.0)
    exclude_master_from_standard_lb: bool | None = _x("excludeMasterFromStandardLB", "bool-ptr")
    disable_outbound_snat: bool | None = _x("disableOutboundSNAT", "bool-ptr")
    maximum_load_balancer_rule_count: int = _i("maximumLoadBalancerRuleCount")
    load_balancer_backend_pool_configuration_type: str = _s(
        "loadBalancerBackendPoolConfigurationType"
    )
    put_vmss_vm_batch_size: int = _i("putVMSSVMBatchSize")
    private_link_service_resource_group: str = _s("privateLinkServiceResourceGroup")
    enable_migrate_to_ip_based_backend_pool_api: bool = _b("enableMigrateToIPBasedBackendPoolAPI")
    enable_ip_tag_mutation_for_existing_public_ip: bool = _b(
        "enableIPTagMutationForExistingPublicIP"
    )
    multiple_standard_load_balancer_configurations: tuple[Any, ...] | None = _x(
        "multipleStandardLoadBalancerConfigurations", "array"
    )
    route_update_interval_in_seconds: int = _i("routeUpdateIntervalInSeconds")
    load_balancer_backend_pool_update_interval_in_seconds: int = _i(
        "loadBalancerBackendPoolUpdateIntervalInSeconds"
    )
    cluster_service_load_balancer_health_probe_mode: str = _s(
        "clusterServiceLoadBalancerHealthProbeMode"
    )
    cluster_service_shared_load_balancer_health_probe_port: int = _i(
        "clusterServiceSharedLoadBalancerHealthProbePort", "int32"
    )
    cluster_service_shared_load_balancer_health_probe_path: str = _s(
        "clusterServiceSharedLoadBalancerHealthProbePath"
    )
    node_instance_not_found_grace_period_in_seconds: int = _i(
        "nodeInstanceNotFoundGracePeriodInSeconds"
    )
    service_gateway_enabled: bool = _b("serviceGatewayEnabled")


def json_fields() -> dict[str, dataclasses.Field[Any]]:
    """The dataclass fields by JSON key."""
    return {str(f.metadata["json"]): f for f in dataclasses.fields(AzureConfig)}
