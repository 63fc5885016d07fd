"""The names the azure balancer gives, equal to upstream v1.36.5's for the same inputs (the
security rule hashes are the ones upstream's own tests print:
pkg/provider/securitygroup/securitygroup_test.go, pkg/provider/loadbalancer/
accesscontrol_test.go)."""

from __future__ import annotations

import pytest
from azlb_fake_arm import service, settings

from kccm.providers.azure.loadbalancer.names import frontend_name, pip_name, rule_name
from kccm.providers.azure.loadbalancer.nsgrules import allow_rule_name, deny_all_rule_name

UID = "6f1b2c3d-1111-4222-8333-444455556666"
BASE = "a6f1b2c3d111142228333444455556666"[:32]
SVC = service(uid=UID)


@pytest.mark.parametrize(
    ("made", "want"),
    [
        pytest.param(lambda: frontend_name(SVC, None), BASE, id="frontend"),
        pytest.param(lambda: frontend_name(SVC, "apps"), f"{BASE}-apps", id="frontend-subnet"),
        pytest.param(
            lambda: frontend_name(SVC, "s" * 60), f"{BASE}-" + "s" * 42, id="frontend-subnet-cut"
        ),
        pytest.param(
            lambda: frontend_name(SVC, "s" * 41 + "-x"),
            f"{BASE}-" + "s" * 41 + "_",
            id="frontend-cut-at-dash",
        ),
        pytest.param(lambda: rule_name(SVC, "TCP", 80, None), f"{BASE}-TCP-80", id="rule"),
        pytest.param(lambda: rule_name(SVC, "UDP", 53, None), f"{BASE}-UDP-53", id="rule-udp"),
        pytest.param(
            lambda: rule_name(SVC, "TCP", 443, "apps"), f"{BASE}-apps-TCP-443", id="rule-subnet"
        ),
        pytest.param(lambda: pip_name("kubernetes", SVC), f"kubernetes-{BASE}", id="public-ip"),
        pytest.param(
            lambda: settings().balancer_name("kubernetes", False), "kubernetes", id="balancer"
        ),
        pytest.param(
            lambda: settings().balancer_name("kubernetes", True),
            "kubernetes-internal",
            id="balancer-internal",
        ),
        pytest.param(
            lambda: settings(load_balancer_name="shared").balancer_name("kubernetes", True),
            "shared-internal",
            id="balancer-from-config",
        ),
        pytest.param(
            lambda: allow_rule_name("Tcp", "IPv4", ["foo", "bar"], [443]),
            "k8s-azure-lb_allow_IPv4_b5ae07e8a4177ea2d37162cdf2badf8b",
            id="nsg-allow-upstream-test-1",
        ),
        pytest.param(
            lambda: allow_rule_name("Udp", "IPv4", ["src_quo", "src_baz"], [56, 53]),
            "k8s-azure-lb_allow_IPv4_648b18e18a92d1a4b415033da37c79a5",
            id="nsg-allow-upstream-test-2",
        ),
        pytest.param(
            lambda: deny_all_rule_name("IPv4"), "k8s-azure-lb_deny-all_IPv4", id="nsg-deny-all"
        ),
    ],
)
def test_names_are_upstreams(made: object, want: str) -> None:
    assert callable(made)
    assert made() == want
