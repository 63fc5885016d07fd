"""The azure provider's cloud config: upstream's ``azure.json`` (or YAML), read unchanged.

Upstream sigs.k8s.io/cloud-provider-azure v1.36.5 reads it in two ways, and so does kccm:

- ``--cloud-config=/etc/kubernetes/azure.json``: ``provider.NewCloudFromConfigFile``
  (``pkg/provider/azure.go``) with ``config.ParseConfig`` (``pkg/provider/config/env.go``),
  which lowercases ``resourceGroup`` and lets the workload identity webhook's variables win:
  ``AZURE_TENANT_ID`` -> ``tenantId``, ``AZURE_CLIENT_ID`` -> ``aadClientId``,
  ``AZURE_FEDERATED_TOKEN_FILE`` -> ``aadFederatedTokenFile`` (and workload identity on);
- no ``--cloud-config``: the Secret ``kube-system/azure-cloud-provider``, key
  ``cloud-config`` (``NewCloudFromSecret`` with ``configloader``'s defaults,
  ``pkg/azclient/configloader/loader_secret.go``), read when the provider is initialised
  (upstream: ``--enable-dynamic-reloading --cloud-config-secret-name``). kccm reads it once;
  a changed Secret takes a restart.

Then ``InitializeCloudFromConfig`` (``pkg/provider/azure.go``) fills in defaults and refuses a
few combinations; :func:`resolve` does the same, each refusal one line naming the key (kccm
exits 2; upstream logs and exits 1). Its defaults: ``vmType`` ``vmss``, ``loadBalancerSku``
``standard`` (and then ``excludeMasterFromStandardLB`` true, ``disableOutboundSNAT`` false),
route table and security group resource groups = ``resourceGroup``,
``maximumLoadBalancerRuleCount`` 250, ``cloudConfigType`` ``merge``,
``loadBalancerBackendPoolConfigurationType`` ``nodeIPConfiguration``, the shared probe on
10256 ``/healthz``, ``routeUpdateIntervalInSeconds`` 30, and the backoff defaults of
``setCloudProviderBackoffDefaults``.

**Unknown keys** are ignored, as Go's non-strict ``encoding/json`` ignores them; kccm logs each
one (a misspelt ``routeTablename`` still matches: keys match case-insensitively).

**kccm refuses what upstream would quietly misread** (docs/providers/azure.md, "Differences"):
a ``vmType`` other than ``standard``, ``vmss`` or ``vmssflex`` (upstream takes any other word
for ``standard``), a ``loadBalancerSku`` other than ``basic``, ``standard`` or ``service``,
and a config with no credentials at all (upstream starts and fails every ARM call).

The rate-limit keys (``cloudProviderRateLimit*``) are read and have no effect, as in upstream
v1.36.5, whose ``NewCloud`` builds its client factories from the subscription ID alone: kccm's
call gate budgets (``--cloud-call-qps``, ``--cloud-call-group-qps``) govern the pace.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

import yaml

from kccm.cloudprovider import CloudConfigError
from kccm.providers.azure.config_fields import AzureConfig
from kccm.providers.azure.config_values import decode

__all__ = [
    "LB_SKUS",
    "VM_TYPES",
    "AzureConfig",
    "load_azure_config",
    "parse_azure_config",
    "resolve",
]

log = logging.getLogger(__name__)

VM_TYPE_STANDARD = "standard"
VM_TYPE_VMSS = "vmss"
VM_TYPE_VMSS_FLEX = "vmssflex"
VM_TYPES = (VM_TYPE_STANDARD, VM_TYPE_VMSS, VM_TYPE_VMSS_FLEX)
LB_SKUS = ("basic", "standard", "service")
CLOUD_CONFIG_TYPES = ("merge", "file", "secret")
BACKEND_POOL_TYPES = ("nodeipconfiguration", "nodeip", "podip")
PROBE_MODES = ("servicenodeport", "shared")
DEFAULT_MAXIMUM_LB_RULE_COUNT = 250
"""``consts.MaximumLoadBalancerRuleCount``."""
DEFAULT_ROUTE_UPDATE_INTERVAL = 30
DEFAULT_ROUTE_UPDATE_WAITING = 30
SHARED_PROBE_PORT = 10256
SHARED_PROBE_PATH = "/healthz"
BACKOFF_RETRIES = 6
BACKOFF_EXPONENT = 1.5
BACKOFF_DURATION = 5
BACKOFF_JITTER = 1.0
"""``consts.Backoff*Default``."""


def _parse_text(text: str, source: str) -> Mapping[str, Any]:
    """The file as an object: JSON first (``azure.json``), else YAML (JSON is YAML; both are
    what ``sigs.k8s.io/yaml`` accepts)."""
    stripped = text.strip()
    if not stripped:
        return {}
    try:
        parsed = json.loads(stripped)
    except ValueError:
        try:
            parsed = yaml.safe_load(stripped)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(err, "problem", None) or "not JSON or YAML"
            raise CloudConfigError([f"{source}: cannot parse{where}: {problem}"]) from None
    if parsed is None:
        return {}
    if not isinstance(parsed, Mapping):
        raise CloudConfigError([f"{source}: the config must be a JSON or YAML object"])
    return parsed


def _env_overrides(config: AzureConfig, environ: Mapping[str, str]) -> AzureConfig:
    """``ParseConfig``'s workload identity webhook variables."""
    changes: dict[str, Any] = {}
    if environ.get("AZURE_TENANT_ID"):
        changes["tenant_id"] = environ["AZURE_TENANT_ID"]
    if environ.get("AZURE_CLIENT_ID"):
        changes["aad_client_id"] = environ["AZURE_CLIENT_ID"]
    if environ.get("AZURE_FEDERATED_TOKEN_FILE"):
        changes["aad_federated_token_file"] = environ["AZURE_FEDERATED_TOKEN_FILE"]
        changes["use_federated_workload_identity_extension"] = True
    return dataclasses.replace(config, **changes) if changes else config


def parse_azure_config(
    text: str,
    source: str,
    *,
    environ: Mapping[str, str],
    from_file: bool = True,
) -> AzureConfig:
    """The file (``from_file``: ``ParseConfig``) or the Secret's ``cloud-config`` value, as
    read, before :func:`resolve`. Raises :class:`CloudConfigError` (one line per problem)."""
    config, issues, unknown = decode(_parse_text(text, source), source)
    if issues:
        raise CloudConfigError(issues)
    for key in unknown:
        log.warning("azure: %s: unknown key %r ignored, as upstream ignores it", source, key)
    if from_file:
        config = dataclasses.replace(config, resource_group=config.resource_group.lower())
        config = _env_overrides(config, environ)
    return config


# -- InitializeCloudFromConfig -----------------------------------------------------------------


def _has_credentials(config: AzureConfig, environ: Mapping[str, str]) -> bool:
    """``NewAuthProvider`` picks a credential (``pkg/azclient/auth.go``)."""
    return bool(
        config.use_federated_workload_identity_extension
        or config.use_managed_identity_extension
        or config.aad_client_secret
        or environ.get("AZURE_CLIENT_SECRET")
        or config.aad_client_cert_path
        or config.aad_msi_data_plane_identity_path
    )


def _choice(key: str, value: str, allowed: tuple[str, ...], *, fold: bool = True) -> list[str]:
    candidate = value.lower() if fold else value
    if candidate in allowed:
        return []
    return [f'"{key}": {value!r} is not supported (supported: {", ".join(allowed)})']


def _issues(config: AzureConfig, environ: Mapping[str, str]) -> list[str]:
    issues = _choice("vmType", config.vm_type, VM_TYPES)
    issues += _choice("loadBalancerSku", config.load_balancer_sku, LB_SKUS)
    issues += _choice("cloudConfigType", config.cloud_config_type, CLOUD_CONFIG_TYPES, fold=False)
    issues += _choice(
        "loadBalancerBackendPoolConfigurationType",
        config.load_balancer_backend_pool_configuration_type,
        BACKEND_POOL_TYPES,
    )
    issues += _choice(
        "clusterServiceLoadBalancerHealthProbeMode",
        config.cluster_service_load_balancer_health_probe_mode,
        PROBE_MODES,
    )
    if config.disable_availability_set_nodes and config.vm_type != VM_TYPE_VMSS:
        issues.append(
            f'"disableAvailabilitySetNodes": true is only supported when vmType is '
            f"'vmss' (vmType is {config.vm_type!r})"
        )
    standard = config.load_balancer_sku.lower() == "standard"
    if not standard and config.disable_outbound_snat:
        issues.append('"disableOutboundSNAT": should only be set when loadBalancerSku is standard')
    issues += _service_gateway_issues(config)
    if not _has_credentials(config, environ):
        issues.append(
            "no Azure credentials: set aadClientId with aadClientSecret or aadClientCertPath, "
            "useManagedIdentityExtension, or useFederatedWorkloadIdentityExtension with "
            "aadFederatedTokenFile (kccm calls ARM for every Node and Service)"
        )
    return issues


def _service_gateway_issues(config: AzureConfig) -> list[str]:
    pod_ip = config.load_balancer_backend_pool_configuration_type.lower() == "podip"
    service_sku = config.load_balancer_sku.lower() == "service"
    some = config.service_gateway_enabled or pod_ip or service_sku
    every = config.service_gateway_enabled and pod_ip and service_sku
    if some and not every:
        return [
            '"serviceGatewayEnabled": requires loadBalancerBackendPoolConfigurationType '
            "podIP and loadBalancerSku service together"
        ]
    return []


def _defaults(config: AzureConfig) -> AzureConfig:
    rg = config.resource_group
    standard = (config.load_balancer_sku or "standard").lower() == "standard"
    backoff = config.cloud_provider_backoff
    return dataclasses.replace(
        config,
        route_table_resource_group=config.route_table_resource_group or rg,
        security_group_resource_group=config.security_group_resource_group or rg,
        private_link_service_resource_group=config.private_link_service_resource_group or rg,
        vm_type=config.vm_type or VM_TYPE_VMSS,
        route_update_waiting_in_seconds=config.route_update_waiting_in_seconds
        if config.route_update_waiting_in_seconds > 0
        else DEFAULT_ROUTE_UPDATE_WAITING,
        cloud_config_type=config.cloud_config_type or "merge",
        load_balancer_backend_pool_configuration_type=(
            config.load_balancer_backend_pool_configuration_type or "nodeIPConfiguration"
        ),
        cluster_service_load_balancer_health_probe_mode=(
            config.cluster_service_load_balancer_health_probe_mode or "servicenodeport"
        ),
        cluster_service_shared_load_balancer_health_probe_port=(
            config.cluster_service_shared_load_balancer_health_probe_port or SHARED_PROBE_PORT
        ),
        cluster_service_shared_load_balancer_health_probe_path=(
            config.cluster_service_shared_load_balancer_health_probe_path or SHARED_PROBE_PATH
        ),
        load_balancer_sku=config.load_balancer_sku or "standard",
        exclude_master_from_standard_lb=_default_if(
            standard, config.exclude_master_from_standard_lb, True
        ),
        disable_outbound_snat=_default_if(standard, config.disable_outbound_snat, False),
        maximum_load_balancer_rule_count=config.maximum_load_balancer_rule_count
        or DEFAULT_MAXIMUM_LB_RULE_COUNT,
        route_update_interval_in_seconds=config.route_update_interval_in_seconds
        or DEFAULT_ROUTE_UPDATE_INTERVAL,
        cloud_provider_backoff_retries=(config.cloud_provider_backoff_retries or BACKOFF_RETRIES)
        if backoff
        else 1,
        cloud_provider_backoff_duration=config.cloud_provider_backoff_duration or BACKOFF_DURATION
        if backoff
        else BACKOFF_DURATION,
        cloud_provider_backoff_exponent=config.cloud_provider_backoff_exponent or BACKOFF_EXPONENT
        if backoff
        else config.cloud_provider_backoff_exponent,
        cloud_provider_backoff_jitter=config.cloud_provider_backoff_jitter or BACKOFF_JITTER
        if backoff
        else config.cloud_provider_backoff_jitter,
    )


def _default_if(cond: bool, value: bool | None, default: bool) -> bool | None:
    return default if cond and value is None else value


def resolve(config: AzureConfig, *, environ: Mapping[str, str]) -> AzureConfig:
    """Upstream's defaults and refusals (``InitializeCloudFromConfig``); every problem at once
    in one :class:`CloudConfigError`."""
    resolved = _defaults(config)
    issues = _issues(resolved, environ)
    if issues:
        raise CloudConfigError(issues)
    _warn_unsupported(resolved)
    return resolved


def _warn_unsupported(config: AzureConfig) -> None:
    if config.rate_limit_entries or config.cloud_provider_rate_limit:
        log.info(
            "azure: the cloudProviderRateLimit* keys have no effect (as in upstream v1.36.5); "
            "kccm's call gate paces cloud calls"
        )
    if config.use_instance_metadata:
        log.info(
            "azure: useInstanceMetadata: kccm runs centrally and reads every Node from ARM "
            "(IMDS describes only the machine kccm runs on)"
        )


def load_azure_config(
    text: str, source: str, *, environ: Mapping[str, str], from_file: bool = True
) -> AzureConfig:
    """:func:`parse_azure_config` then :func:`resolve`."""
    parsed = parse_azure_config(text, source, environ=environ, from_file=from_file)
    return resolve(parsed, environ=environ)
