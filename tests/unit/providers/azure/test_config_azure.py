"""azure.json read as upstream v1.36.5 reads it: every key, Go's decoding rules (case-insensitive
keys, sigs.k8s.io/yaml's number-to-string help for Config's own fields only), YAML, the
workload identity variables, upstream's defaults, and each refusal as one line naming the key
with no secret in it."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.providers.azure.config import load_azure_config, parse_azure_config
from kccm.providers.azure.config_fields import AzureConfig, json_fields
from kccm.providers.azure.config_values import decode, go_float32_text

SECRET = "s3cr3t-value-never-shown"
BASE = {
    "cloud": "AzurePublicCloud",
    "tenantId": "tenant",
    "subscriptionId": "sub",
    "aadClientId": "client",
    "aadClientSecret": SECRET,
    "resourceGroup": "RG-One",
    "location": "westeurope",
}
NO_ENV: dict[str, str] = {}


def _load(extra: dict[str, Any], environ: dict[str, str] | None = None) -> AzureConfig:
    text = json.dumps({**BASE, **extra})
    return load_azure_config(text, "azure.json", environ=environ or NO_ENV)


def _sample(kind: str) -> tuple[Any, Any]:
    """A JSON value for a field of ``kind`` and what it reads as."""
    return {
        "string": ("x-value", "x-value"),
        "bool": (True, True),
        "bool-ptr": (False, False),
        "int": (7, 7),
        "int32": (7, 7),
        "float32": (2.5, 2.5),
        "float64": (2.5, 2.5),
        "string-map": ({"a": "b"}, {"a": "b"}),
        "array": ([{"name": "x"}], ({"name": "x"},)),
        "object": ({"vaultName": "v"}, {"vaultName": "v"}),
    }[kind]


@pytest.mark.parametrize("key", sorted(json_fields()), ids=str)
def test_every_upstream_key_is_read(key: str) -> None:
    field = json_fields()[key]
    value, expected = _sample(str(field.metadata["kind"]))
    config, issues, unknown = decode({key: value}, "azure.json")
    assert issues == []
    assert unknown == []
    assert getattr(config, field.name) == expected


KEY_MATCHING = [
    pytest.param({"ROUTETABLENAME": "rt"}, "route_table_name", "rt", id="upper-case-key"),
    pytest.param({"routetablename": "rt"}, "route_table_name", "rt", id="lower-case-key"),
    pytest.param({"vmType": 5}, "vm_type", "5", id="config-string-takes-a-number"),
    pytest.param({"location": True}, "location", "true", id="config-string-takes-a-bool"),
    pytest.param({"location": 1.5}, "location", "1.5", id="config-string-takes-a-float"),
    pytest.param({"tagsMap": {"a": 1}}, "tags_map", {"a": "1"}, id="tags-map-value-number"),
    pytest.param({"vmType": None}, "vm_type", "", id="null-leaves-the-default"),
    pytest.param(
        {"maximumLoadBalancerRuleCount": 3.0},
        "maximum_load_balancer_rule_count",
        3,
        id="int-takes-integral-float",
    ),
    pytest.param(
        {"excludeMasterFromStandardLB": None},
        "exclude_master_from_standard_lb",
        None,
        id="bool-pointer-null",
    ),
]


@pytest.mark.parametrize(("raw", "attr", "expected"), KEY_MATCHING)
def test_values_are_decoded_as_go_decodes_them(
    raw: dict[str, Any], attr: str, expected: Any
) -> None:
    config = parse_azure_config(json.dumps(raw), "azure.json", environ=NO_ENV)
    assert getattr(config, attr) == expected


BAD_VALUES = [
    pytest.param({"useInstanceMetadata": "true"}, '"useInstanceMetadata"', id="bool-as-string"),
    pytest.param({"subscriptionId": 123}, '"subscriptionId"', id="embedded-string-refuses-number"),
    pytest.param({"tenantId": True}, '"tenantId"', id="embedded-string-refuses-bool"),
    pytest.param(
        {"maximumLoadBalancerRuleCount": 1.5},
        '"maximumLoadBalancerRuleCount"',
        id="int-refuses-fraction",
    ),
    pytest.param(
        {"maximumLoadBalancerRuleCount": "250"},
        '"maximumLoadBalancerRuleCount"',
        id="int-refuses-string",
    ),
    pytest.param(
        {"clusterServiceSharedLoadBalancerHealthProbePort": 2**31},
        '"clusterServiceSharedLoadBalancerHealthProbePort"',
        id="int32-overflow",
    ),
    pytest.param({"vmType": {"a": 1}}, '"vmType"', id="string-refuses-object"),
    pytest.param(
        {"multipleStandardLoadBalancerConfigurations": {}},
        '"multipleStandardLoadBalancerConfigurations"',
        id="array-refuses-object",
    ),
    pytest.param({"vmType": "vmms"}, '"vmType"', id="unknown-vm-type"),
    pytest.param({"loadBalancerSku": "premium"}, '"loadBalancerSku"', id="unknown-sku"),
    pytest.param({"cloudConfigType": "Merge"}, '"cloudConfigType"', id="config-type-case"),
    pytest.param(
        {"loadBalancerBackendPoolConfigurationType": "ip"},
        '"loadBalancerBackendPoolConfigurationType"',
        id="pool-type",
    ),
    pytest.param(
        {"clusterServiceLoadBalancerHealthProbeMode": "x"},
        '"clusterServiceLoadBalancerHealthProbeMode"',
        id="probe-mode",
    ),
    pytest.param(
        {"disableAvailabilitySetNodes": True, "vmType": "standard"},
        '"disableAvailabilitySetNodes"',
        id="vmas-off-without-vmss",
    ),
    pytest.param(
        {"loadBalancerSku": "basic", "disableOutboundSNAT": True},
        '"disableOutboundSNAT"',
        id="snat-with-basic",
    ),
    pytest.param(
        {"serviceGatewayEnabled": True}, '"serviceGatewayEnabled"', id="service-gateway-alone"
    ),
    pytest.param({"aadClientSecret": 42}, '"aadClientSecret"', id="secret-not-a-string"),
]


@pytest.mark.parametrize(("extra", "names"), BAD_VALUES)
def test_a_bad_value_is_one_line_naming_the_key(extra: dict[str, Any], names: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        _load(extra)
    (issue,) = caught.value.issues
    assert names in issue
    assert "\n" not in issue
    assert SECRET not in issue
    assert "42" not in issue.replace('"aadClientSecret"', "")


def test_no_credentials_is_refused() -> None:
    text = json.dumps({k: v for k, v in BASE.items() if k != "aadClientSecret"})
    with pytest.raises(CloudConfigError, match="no Azure credentials"):
        load_azure_config(text, "azure.json", environ=NO_ENV)


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"aadClientCertPath": "/etc/kubernetes/cert.pfx"}, id="certificate"),
        pytest.param({"useManagedIdentityExtension": True}, id="managed-identity"),
        pytest.param(
            {"useFederatedWorkloadIdentityExtension": True, "aadFederatedTokenFile": "/t"},
            id="workload-identity",
        ),
    ],
)
def test_each_credential_kind_counts_as_credentials(extra: dict[str, Any]) -> None:
    text = json.dumps({**{k: v for k, v in BASE.items() if k != "aadClientSecret"}, **extra})
    assert load_azure_config(text, "azure.json", environ=NO_ENV).subscription_id == "sub"


def test_defaults_are_upstream_s() -> None:
    config = _load({})
    assert config.vm_type == "vmss"
    assert config.load_balancer_sku == "standard"
    assert config.exclude_master_from_standard_lb is True
    assert config.disable_outbound_snat is False
    assert config.resource_group == "rg-one"  # ParseConfig lowercases it
    assert config.route_table_resource_group == "rg-one"
    assert config.security_group_resource_group == "rg-one"
    assert config.maximum_load_balancer_rule_count == 250
    assert config.cloud_config_type == "merge"
    assert config.load_balancer_backend_pool_configuration_type == "nodeIPConfiguration"
    assert config.cluster_service_shared_load_balancer_health_probe_port == 10256
    assert config.route_update_interval_in_seconds == 30
    assert config.cloud_provider_backoff_retries == 1


def test_basic_sku_leaves_the_standard_only_defaults_unset() -> None:
    config = _load({"loadBalancerSku": "basic"})
    assert config.exclude_master_from_standard_lb is None
    assert config.disable_outbound_snat is None


def test_set_values_win_over_defaults() -> None:
    config = _load(
        {
            "vmType": "standard",
            "routeTableResourceGroup": "net-rg",
            "excludeMasterFromStandardLB": False,
            "maximumLoadBalancerRuleCount": 100,
            "cloudProviderBackoff": True,
        }
    )
    assert (config.vm_type, config.route_table_resource_group) == ("standard", "net-rg")
    assert config.exclude_master_from_standard_lb is False
    assert config.maximum_load_balancer_rule_count == 100
    assert config.cloud_provider_backoff_retries == 6
    assert config.cloud_provider_backoff_exponent == 1.5


def test_workload_identity_variables_win_in_a_file() -> None:
    environ = {
        "AZURE_TENANT_ID": "env-tenant",
        "AZURE_CLIENT_ID": "env-client",
        "AZURE_FEDERATED_TOKEN_FILE": "/var/run/token",
    }
    config = _load({}, environ)
    assert (config.tenant_id, config.aad_client_id) == ("env-tenant", "env-client")
    assert config.aad_federated_token_file == "/var/run/token"
    assert config.use_federated_workload_identity_extension is True


def test_the_secret_s_config_keeps_its_resource_group_case() -> None:
    """configloader (the Secret) does not lowercase, unlike ParseConfig (the file)."""
    text = json.dumps(BASE)
    config = load_azure_config(text, "secret", environ=NO_ENV, from_file=False)
    assert config.resource_group == "RG-One"


def test_yaml_is_read_too() -> None:
    text = "cloud: AzurePublicCloud\nsubscriptionId: sub\naadClientId: c\naadClientSecret: x\n"
    text += "vmType: standard\nuseInstanceMetadata: yes\n"
    config = load_azure_config(text, "azure.yaml", environ=NO_ENV)
    assert (config.vm_type, config.use_instance_metadata) == ("standard", True)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("[1, 2]", "must be a JSON or YAML object", id="not-an-object"),
        pytest.param("{a: [", "cannot parse", id="broken"),
    ],
)
def test_unparsable_text_is_one_line(text: str, fragment: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_azure_config(text, "azure.json", environ=NO_ENV)
    (issue,) = caught.value.issues
    assert fragment in issue
    assert issue.startswith("azure.json")


def test_unknown_keys_are_ignored_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "kccm.providers.azure.config"):
        config = _load({"primaryScaleSetNamez": "x"})
    assert config.subscription_id == "sub"
    assert "'primaryScaleSetNamez'" in caplog.text


def test_an_empty_file_reads_as_zero_values() -> None:
    assert parse_azure_config("  \n", "azure.json", environ=NO_ENV) == AzureConfig()


def test_secrets_stay_out_of_repr() -> None:
    config = _load({"aadClientCertPassword": "pfx-password"})
    assert SECRET not in repr(config)
    assert "pfx-password" not in repr(config)
    assert dataclasses.replace(config).aad_client_secret == SECRET


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.5, "1.5"), (0.1, "0.1"), (3.0, "3"), (1e21, "1e+21"), (123456789.0, "1.2345679e+08")],
    ids=["half", "tenth", "integral", "huge", "float32-rounding"],
)
def test_go_float32_text(value: float, text: str) -> None:
    assert go_float32_text(value) == text
