"""The security rule helper does what upstream's RuleHelper does in upstream's own test cases
(pkg/provider/securitygroup/securitygroup_test.go v1.36.5)."""

from __future__ import annotations

from typing import Any

from kccm.providers.azure.loadbalancer.nsgrules import RuleHelper


def _rule(name: str, protocol: str, sources: list[str], dsts: list[str], priority: int) -> Any:
    return {
        "name": name,
        "properties": {
            "protocol": protocol,
            "access": "Allow",
            "direction": "Inbound",
            "sourceAddressPrefixes": sources,
            "sourcePortRange": "*",
            "destinationAddressPrefixes": dsts,
            "destinationPortRanges": ["443", "80"],
            "priority": priority,
        },
    }


def _group() -> dict[str, Any]:
    rules = [
        _rule(
            "k8s-azure-lb-test-rule-0",
            "Tcp",
            ["bar", "foo"],
            ["10.0.0.1", "10.0.0.2", "192.168.0.1"],
            500,
        ),
        _rule(
            "k8s-azure-lb-test-rule-1", "Udp", ["baz"], ["10.0.0.1", "10.0.0.2", "192.168.0.1"], 501
        ),
    ]
    return {"name": "nsg", "properties": {"securityRules": rules}}


def test_part_of_the_ports_retained_splits_the_rule() -> None:
    helper = RuleHelper(_group())
    helper.remove_destinations("Tcp", ["10.0.0.1", "10.0.0.2"], [443])
    group, changed = helper.result()
    assert changed
    by_name = {rule["name"]: rule["properties"] for rule in group["properties"]["securityRules"]}
    assert by_name["k8s-azure-lb-test-rule-0"]["destinationAddressPrefix"] == "192.168.0.1"
    split = by_name["k8s-azure-lb_allow_IPv4_b5ae07e8a4177ea2d37162cdf2badf8b"]
    assert split["destinationAddressPrefixes"] == ["10.0.0.1", "10.0.0.2"]
    assert split["destinationPortRanges"] == ["443"]
    assert split["priority"] == 502
    assert by_name["k8s-azure-lb-test-rule-1"]["destinationAddressPrefixes"] == [
        "10.0.0.1",
        "10.0.0.2",
        "192.168.0.1",
    ]


def test_every_port_retained_changes_nothing() -> None:
    helper = RuleHelper(_group())
    helper.remove_destinations("Tcp", ["10.0.0.1", "10.0.0.2"], [443, 80])
    assert helper.result()[1] is False


def test_removing_and_adding_back_the_same_is_no_change() -> None:
    group = _group()
    group["properties"]["securityRules"].append(
        {
            "name": "k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77",
            "properties": {
                "protocol": "Tcp",
                "access": "Allow",
                "direction": "Inbound",
                "sourceAddressPrefix": "Internet",
                "sourcePortRange": "*",
                "destinationAddressPrefix": "20.0.0.1",
                "destinationAddressPrefixes": [],
                "destinationPortRanges": ["80"],
                "priority": 502,
                "provisioningState": "Succeeded",
            },
        }
    )
    helper = RuleHelper(group)
    for protocol in ("Tcp", "Udp", "*"):
        helper.remove_destinations(protocol, ["20.0.0.1"])
    helper.add_allow("Tcp", ["Internet"], ["20.0.0.1"], [80])
    assert helper.result()[1] is False
