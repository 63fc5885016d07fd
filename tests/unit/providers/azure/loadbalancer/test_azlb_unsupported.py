"""Balancer keys of upstream's cloud config that kccm does not implement: every ensure is
refused with one line naming the key (a Warning on the Service, never an "Ensured" balancer
made another way), without any cloud call; a delete still cleans up."""

from __future__ import annotations

import json
from typing import Any

import pytest
from azlb_fake_arm import NET, RG, SUB, FakeArm, seed_network, seed_vm, service

from kccm.cloudprovider import InvalidServiceConfig
from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.providers.azure.loadbalancer.armclient import lb_settings

BASE = {
    "tenantId": "tenant",
    "subscriptionId": SUB,
    "aadClientId": "client",
    "aadClientSecret": "secret",
    "resourceGroup": RG,
    "location": "westus",
    "vmType": "standard",
    "vnetName": "vnet",
    "subnetName": "nodes",
    "securityGroupName": "nsg",
}

NSG = f"{NET}/networkSecurityGroups/nsg"
CASES = [
    pytest.param(
        {"multipleStandardLoadBalancerConfigurations": [{"name": "lb-1"}]},
        "multipleStandardLoadBalancerConfigurations",
        id="multiple-standard-lbs",
    ),
    pytest.param(
        {"loadBalancerBackendPoolConfigurationType": "nodeIP"},
        "loadBalancerBackendPoolConfigurationType",
        id="node-ip-pools",
    ),
    pytest.param(
        {
            "loadBalancerBackendPoolConfigurationType": "podIP",
            "loadBalancerSku": "service",
            "serviceGatewayEnabled": True,
        },
        "loadBalancerBackendPoolConfigurationType",
        id="pod-ip-pools",
    ),
    pytest.param(
        {"preConfiguredBackendPoolLoadBalancerTypes": "external"},
        "preConfiguredBackendPoolLoadBalancerTypes",
        id="preconfigured-pools",
    ),
]


def _balancers(extra: dict[str, Any], arm: FakeArm) -> AzureLoadBalancers:
    config = load_azure_config(json.dumps({**BASE, **extra}), "azure.json", environ={})
    return AzureLoadBalancers(arm, lb_settings(config))


@pytest.mark.parametrize(("extra", "key"), CASES)
def test_an_unsupported_key_refuses_every_ensure_naming_it(extra: dict[str, Any], key: str) -> None:
    arm = FakeArm()
    seed_network(arm)
    nodes = [seed_vm(arm, "vm-0", "10.0.1.4")]
    lbs = _balancers(extra, arm)
    arm.calls.clear()
    with pytest.raises(InvalidServiceConfig) as caught:
        lbs.ensure_load_balancer("kubernetes", service(), nodes)
    assert caught.value.key == key
    assert key in str(caught.value)
    assert "\n" not in str(caught.value)
    assert arm.calls == []


@pytest.mark.parametrize(("extra", "key"), CASES)
def test_a_delete_still_cleans_up_with_an_unsupported_key(extra: dict[str, Any], key: str) -> None:
    """What kccm made before the key was set still goes."""
    arm = FakeArm()
    seed_network(arm)
    before = arm.resource(NSG)
    nodes = [seed_vm(arm, "vm-0", "10.0.1.4")]
    seeded = set(arm.store)
    _balancers({}, arm).ensure_load_balancer("kubernetes", service(), nodes)
    assert set(arm.store) > seeded
    _balancers(extra, arm).ensure_load_balancer_deleted("kubernetes", service())
    assert set(arm.store) == seeded
    assert arm.resource(NSG)["properties"]["securityRules"] == before["properties"]["securityRules"]


def test_the_supported_defaults_refuse_nothing() -> None:
    arm = FakeArm()
    assert _balancers({}, arm).settings.unsupported == ()
    assert _balancers({"loadBalancerBackendPoolConfigurationType": "nodeIPConfiguration"}, arm)
