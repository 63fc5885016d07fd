"""node-route-controller: start conditions, concurrency bound and upstream's
route_controller_test.go TestIsResponsibleForRoute."""

from __future__ import annotations

import ipaddress
import logging

import pytest
from route_harness import (
    Env,
)

from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.types import Route
from kccm.controllers.route import (
    build,
    is_responsible_for_route,
    parse_cluster_cidrs,
)
from kccm.providers.fake import FakeCloud

# -- start conditions (checklist 42, 57) -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("10.244.0.0/16", ["10.244.0.0/16"], id="single-ipv4"),
        pytest.param("fd00::/48", ["fd00::/48"], id="single-ipv6"),
        pytest.param(
            "10.244.0.0/16,fd00::/48", ["10.244.0.0/16", "fd00::/48"], id="dual-stack-pair"
        ),
        pytest.param(" 10.244.0.0/16 ", ["10.244.0.0/16"], id="surrounding-space-trimmed"),
        pytest.param("10.244.1.7/16", ["10.244.0.0/16"], id="host-bits-are-masked-like-go"),
    ],
)
def test_cluster_cidr_parses(value: str, expected: list[str]) -> None:
    assert [str(c) for c in parse_cluster_cidrs(value)] == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", "invalid --cluster-cidr '': failed to parse cidr value:''", id="empty"),
        pytest.param("banana", "failed to parse cidr value:'banana'", id="unparsable"),
        pytest.param("10.0.0.1", "failed to parse cidr value:'10.0.0.1'", id="no-prefix-length"),
        pytest.param(
            "10.0.0.0/16,10.1.0.0/16",
            "len of ClusterCIDRs==2 and they are not configured as dual stack",
            id="two-ipv4-is-not-dual-stack",
        ),
        pytest.param(
            "10.0.0.0/16,fd00::/48,10.1.0.0/16",
            "length of clusterCIDRs is:3 more than max allowed of 2",
            id="three-cidrs-even-mixed",
        ),
        pytest.param(
            "10.0.0.0/16,10.1.0.0/16,10.2.0.0/16",
            "len of ClusterCIDRs==3 and they are not configured as dual stack",
            id="three-ipv4",
        ),
    ],
)
def test_bad_cluster_cidr_is_a_clear_error(value: str, message: str) -> None:
    with pytest.raises(ValueError, match="invalid --cluster-cidr") as info:
        parse_cluster_cidrs(value)
    assert message in str(info.value)


async def test_build_raises_for_a_bad_cluster_cidr_when_routes_are_configured(env: Env) -> None:
    env.options.cluster_cidr = ""
    with pytest.raises(ValueError, match="failed to parse cidr value"):
        build(env.context, env.options)


@pytest.mark.parametrize(
    ("configure", "routes_supported", "log"),
    [
        pytest.param(False, True, "--configure-cloud-routes=false", id="configure-routes-false"),
        pytest.param(True, False, "does not support routes", id="provider-without-routes"),
    ],
)
async def test_build_skips_the_controller(
    configure: bool, routes_supported: bool, log: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(cluster_cidr="")  # an unparsable CIDR is never looked at when skipped
    env.cloud = FakeCloud(clock=env.clock, enable_routes=routes_supported)
    env.context.cloud = GatedCloud(env.cloud, env.gate)
    env.options.configure_cloud_routes = configure
    with caplog.at_level(logging.INFO, logger="kccm.controllers.route"):
        assert build(env.context, env.options) is None
    assert log in caplog.text
    env.gate.close()


# -- TestIsResponsibleForRoute (checklist 44) --------------------------------------------------


@pytest.mark.parametrize(
    ("cluster_cidr", "route_cidr", "responsible"),
    [
        pytest.param("10.244.0.0/16", "10.244.0.0/24", True, id="first-subnet"),
        pytest.param("10.244.0.0/16", "10.244.10.0/24", True, id="middle-subnet"),
        pytest.param("10.244.0.0/16", "10.244.255.0/24", True, id="last-subnet"),
        pytest.param("10.244.0.0/14", "10.244.0.0/24", True, id="wide-first"),
        pytest.param("10.244.0.0/14", "10.247.255.0/24", True, id="wide-last"),
        pytest.param("a00:100::/10", "a00:100::/24", True, id="ipv6-inside"),
        pytest.param("10.244.0.0/16", "10.224.0.0/24", False, id="other-range"),
        pytest.param("10.244.0.0/16", "10.0.10.0/24", False, id="below"),
        pytest.param("10.244.0.0/16", "10.255.255.0/24", False, id="above"),
        pytest.param("10.244.0.0/14", "10.248.0.0/24", False, id="just-above-wide"),
        pytest.param("10.244.0.0/14", "10.243.255.0/24", False, id="just-below-wide"),
        pytest.param("a00:100::/10", "b00:100::/24", False, id="ipv6-outside"),
        pytest.param("10.255.0.0/16", "10.0.0.0/8", True, id="covering-route-last-ip-inside"),
        pytest.param("10.0.0.0/16", "10.0.0.0/8", True, id="covering-route-first-ip-inside"),
        pytest.param("10.244.0.0/16", "10.0.0.0/8", False, id="covering-route-ends-outside"),
        pytest.param("10.244.0.0/16", "not-a-cidr", False, id="unparsable-ignored"),
        pytest.param("10.244.0.0/16", "a00:100::/24", False, id="other-family"),
    ],
)
def test_is_responsible_for_route(cluster_cidr: str, route_cidr: str, responsible: bool) -> None:
    cidrs = [ipaddress.ip_network(cluster_cidr, strict=False)]
    route = Route(name="my-awesome-cluster-1234", target_node="x", destination_cidr=route_cidr)
    assert is_responsible_for_route(route, cidrs) is responsible
