"""What a Service asks of its Classic ELB, computed as upstream computes it (no AWS)."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.providers.aws.annotations import ProbeMode, ServiceAnnotationError
from kccm.providers.aws.classic_spec import Attributes, Listener, build_listener, classic_spec
from kccm.providers.aws.sgrules import source_ranges

P = "service.beta.kubernetes.io/aws-load-balancer-"
PORT = {"name": "HTTPS", "port": 443, "protocol": "TCP", "nodePort": 30443}


def svc(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "annotations": annotations or {}},
        "spec": {"type": "LoadBalancer", "ports": [dict(PORT)], **spec},
    }


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({}, Listener(443, "tcp", 30443, "tcp"), id="plain-tcp"),
        pytest.param(
            {P + "backend-protocol": "http"}, Listener(443, "http", 30443, "http"), id="http"
        ),
        pytest.param(
            {P + "backend-protocol": "https"},
            Listener(443, "tcp", 30443, "tcp"),
            id="https-no-cert",
        ),
        pytest.param({P + "ssl-cert": "c"}, Listener(443, "ssl", 30443, "tcp", "c"), id="ssl"),
        pytest.param(
            {P + "ssl-cert": "c", P + "backend-protocol": "http"},
            Listener(443, "https", 30443, "http", "c"),
            id="https-to-http",
        ),
        pytest.param(
            {P + "ssl-cert": "c", P + "backend-protocol": "tcp"},
            Listener(443, "ssl", 30443, "tcp", "c"),
            id="ssl-to-tcp",
        ),
        pytest.param(
            {P + "ssl-cert": "c", P + "ssl-ports": "https"},
            Listener(443, "ssl", 30443, "tcp", "c"),
            id="port-name-lower-cased",
        ),
        pytest.param(
            {P + "ssl-cert": "c", P + "ssl-ports": "80"},
            Listener(443, "tcp", 30443, "tcp"),
            id="not-an-ssl-port",
        ),
        pytest.param(
            {P + "ssl-cert": "c", P + "ssl-ports": "*"},
            Listener(443, "ssl", 30443, "tcp", "c"),
            id="every-port",
        ),
    ],
)
def test_listeners_are_upstreams_build_listener(
    annotations: dict[str, str], expected: Listener
) -> None:
    assert build_listener(PORT, annotations) == expected


@pytest.mark.parametrize(
    ("annotations", "spec", "probe", "target"),
    [
        pytest.param({}, {}, ProbeMode(), "TCP:30443", id="tcp-first-node-port"),
        pytest.param({P + "backend-protocol": "ssl"}, {}, ProbeMode(), "SSL:30443", id="ssl"),
        pytest.param(
            {P + "backend-protocol": "https"}, {}, ProbeMode(), "SSL:30443", id="https-backend"
        ),
        pytest.param(
            {},
            {"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000},
            ProbeMode(),
            "HTTP:32000/healthz",
            id="local",
        ),
        pytest.param(
            {P + "healthcheck-port": "traffic-port"},
            {"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000},
            ProbeMode(),
            "HTTP:30443/healthz",
            id="local-on-traffic-port",
        ),
        pytest.param(
            {P + "healthcheck-protocol": "HTTP", P + "healthcheck-path": "/ready"},
            {},
            ProbeMode(),
            "HTTP:30443/ready",
            id="annotated-http",
        ),
        pytest.param(
            {P + "healthcheck-protocol": "HTTPS"}, {}, ProbeMode(), "HTTPS:30443/", id="https-root"
        ),
        pytest.param(
            {P + "healthcheck-port": "8080"}, {}, ProbeMode(), "TCP:8080", id="annotated-port"
        ),
        pytest.param({}, {}, ProbeMode("Shared"), "HTTP:10256/healthz", id="shared"),
        pytest.param(
            {}, {}, ProbeMode("Shared", 9999, "/live"), "HTTP:9999/live", id="shared-configured"
        ),
    ],
)
def test_health_check_target_as_upstream_computes_it(
    annotations: dict[str, str], spec: dict[str, Any], probe: ProbeMode, target: str
) -> None:
    assert classic_spec(svc(annotations, **spec), probe).health.target == target


def test_health_check_counts_default_and_annotated() -> None:
    assert classic_spec(svc()).health.api() == {
        "Target": "TCP:30443",
        "HealthyThreshold": 2,
        "UnhealthyThreshold": 6,
        "Timeout": 5,
        "Interval": 10,
    }
    annotated = {
        P + "healthcheck-healthy-threshold": "3",
        P + "healthcheck-unhealthy-threshold": "4",
        P + "healthcheck-timeout": "6",
        P + "healthcheck-interval": "7",
    }
    hc = classic_spec(svc(annotated)).health
    assert (hc.healthy, hc.unhealthy, hc.timeout, hc.interval) == (3, 4, 6, 7)


@pytest.mark.parametrize(
    ("actual", "matches"),
    [
        pytest.param(
            {
                "AccessLog": {"Enabled": False, "EmitInterval": 60},
                "ConnectionDraining": {"Enabled": False, "Timeout": 300},
                "ConnectionSettings": {"IdleTimeout": 60},
                "CrossZoneLoadBalancing": {"Enabled": False},
                "AdditionalAttributes": [{"Key": "elb.http.desyncmitigationmode"}],
            },
            True,
            id="aws-fills-in-defaults",
        ),
        pytest.param(
            {
                "AccessLog": {"Enabled": False},
                "ConnectionDraining": {"Enabled": False},
                "ConnectionSettings": {"IdleTimeout": 30},
                "CrossZoneLoadBalancing": {"Enabled": False},
            },
            False,
            id="idle-timeout-drifted",
        ),
    ],
)
def test_attributes_compare_only_what_is_asked(actual: dict[str, Any], matches: bool) -> None:
    assert Attributes().matches(actual) is matches


@pytest.mark.parametrize(
    ("service", "expected"),
    [
        pytest.param(svc(), ("0.0.0.0/0",), id="default-world"),
        pytest.param(
            svc(loadBalancerSourceRanges=[" 10.0.0.7/8", "192.168.1.0/24"]),
            ("10.0.0.0/8", "192.168.1.0/24"),
            id="spec-normalised",
        ),
        pytest.param(
            svc({"service.beta.kubernetes.io/load-balancer-source-ranges": "1.2.3.0/24"}),
            ("1.2.3.0/24",),
            id="annotation",
        ),
    ],
)
def test_source_ranges_as_upstreams_service_helper(
    service: dict[str, Any], expected: tuple[str, ...]
) -> None:
    assert source_ranges(service) == expected


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        pytest.param({P + "connection-draining-enabled": "yes"}, "draining-enabled", id="bool"),
        pytest.param({P + "access-log-emit-interval": "x"}, "emit-interval", id="int"),
        pytest.param({P + "healthcheck-timeout": "1"}, "Timeout must be at least 2", id="hc"),
        pytest.param(
            {P + "healthcheck-timeout": ""}, 'timeout: invalid value ""', id="hc-present-empty"
        ),
        pytest.param({P + "healthcheck-port": ""}, 'port: invalid value ""', id="hc-port-empty"),
        pytest.param(
            {P + "connection-idle-timeout": "4294967296"},
            f"error parsing service annotation: {P}connection-idle-timeout=4294967296",
            id="int32-range",
        ),
    ],
)
def test_malformed_annotations_are_named(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(ServiceAnnotationError, match=message):
        classic_spec(svc(annotations))
