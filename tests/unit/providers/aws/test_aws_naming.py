"""Pure parts of the aws provider: providerIDs, cluster tags, names and Service annotations."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kccm.providers.aws.annotations import (
    HealthCheck,
    PortMapping,
    ProbeMode,
    ServiceAnnotationError,
    health_check,
    key_value_list,
    load_balancer_spec,
    target_group_name,
)
from kccm.providers.aws.tags import ClusterTagging, InstanceRef, parse_provider_id

P = "service.beta.kubernetes.io/aws-load-balancer-"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            "aws:///eu-west-1a/i-0abc", InstanceRef("i-0abc", "eu-west-1a"), id="zone-and-id"
        ),
        pytest.param("aws:////i-0abc", InstanceRef("i-0abc"), id="empty-zone"),
        pytest.param("aws://i-0abc", InstanceRef("i-0abc"), id="id-as-host"),
        pytest.param("i-0abc", InstanceRef("i-0abc"), id="bare-instance-id"),
        pytest.param("aws://kccm-conformance-1", None, id="aws-scheme-naming-no-instance"),
        pytest.param("aws:///", None, id="aws-scheme-with-nothing"),
    ],
)
def test_provider_ids_are_parsed_like_upstream(value: str, expected: InstanceRef | None) -> None:
    assert parse_provider_id(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("gce://project/zone/vm", id="another-providers-scheme"),
        pytest.param("aws:///eu-west-1a/fargate-ip-10-0-0-1.ec2.internal", id="fargate-node"),
        pytest.param("", id="empty"),
    ],
)
def test_provider_ids_that_could_be_alive_elsewhere_are_errors_not_absent(value: str) -> None:
    with pytest.raises(ValueError, match="providerID"):
        parse_provider_id(value)


@pytest.mark.parametrize(
    ("tags", "owned"),
    [
        pytest.param(
            [{"Key": "kubernetes.io/cluster/prod", "Value": "shared"}],
            True,
            id="cluster-tag-any-value",
        ),
        pytest.param(
            [{"Key": "KubernetesCluster", "Value": "prod"}], True, id="legacy-tag-with-our-id"
        ),
        pytest.param(
            [{"Key": "KubernetesCluster", "Value": "dev"}],
            False,
            id="legacy-tag-of-another-cluster",
        ),
        pytest.param(
            [{"Key": "kubernetes.io/cluster/dev", "Value": "owned"}],
            False,
            id="another-clusters-tag",
        ),
        pytest.param([], False, id="untagged"),
    ],
)
def test_cluster_ownership_by_tags(tags: list[dict[str, str]], owned: bool) -> None:
    assert ClusterTagging("prod").owns(tags) is owned


def test_created_resources_are_tagged_owned() -> None:
    assert ClusterTagging("prod").build({"a": "b"}) == {
        "a": "b",
        "kubernetes.io/cluster/prod": "owned",
    }


def _mapping(node_port: int = 30080, interval: int = 30, protocol: str = "TCP") -> PortMapping:
    return PortMapping(80, protocol, node_port, HealthCheck(interval=interval))


def test_target_group_names_follow_upstream() -> None:
    name = target_group_name("prod", "kube-system", "my-web.svc", _mapping())
    assert re.fullmatch(r"k8s-kubesyst-mywebsvc-[0-9a-f]{10}", name)
    assert len(name) <= 32
    assert name == target_group_name("prod", "kube-system", "my-web.svc", _mapping())


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(_mapping(node_port=30081), id="node-port"),
        pytest.param(_mapping(interval=10), id="health-check-interval"),
        pytest.param(_mapping(protocol="UDP"), id="protocol"),
    ],
)
def test_target_group_name_changes_with_what_a_group_cannot_change(changed: PortMapping) -> None:
    assert target_group_name("prod", "ns", "web", changed) != target_group_name(
        "prod", "ns", "web", _mapping()
    )


def test_key_value_lists_parse_like_upstream() -> None:
    assert key_value_list(" a=1, b= ,c ,,=x") == {"a": "1", "b": "", "c": ""}


def _service(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    base = {
        "type": "LoadBalancer",
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}],
    }
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u",
            "annotations": annotations or {},
        },
        "spec": {**base, **spec},
    }


@pytest.mark.parametrize(
    ("service", "probe", "expected"),
    [
        pytest.param(
            _service(), ProbeMode(), HealthCheck(), id="cluster-policy-tcp-on-traffic-port"
        ),
        pytest.param(
            _service(externalTrafficPolicy="Local", healthCheckNodePort=32000),
            ProbeMode(),
            HealthCheck("32000", "/healthz", "HTTP", 10, 2, 2),
            id="local-policy-http-on-health-check-node-port",
        ),
        pytest.param(
            _service(
                {
                    P + "healthcheck-protocol": "http",
                    P + "healthcheck-path": "/ready",
                    P + "healthcheck-interval": "10",
                }
            ),
            ProbeMode(),
            HealthCheck("traffic-port", "/ready", "HTTP", 10, 3, 3),
            id="annotations-override",
        ),
        pytest.param(
            _service(),
            ProbeMode("Shared"),
            HealthCheck("10256", "/healthz", "HTTP", 30, 3, 3),
            id="shared-mode-probes-kube-proxy",
        ),
    ],
)
def test_health_checks_like_upstream(
    service: dict[str, Any], probe: ProbeMode, expected: HealthCheck
) -> None:
    assert health_check(service, probe) == expected


@pytest.mark.parametrize(
    ("service", "message"),
    [
        pytest.param(
            _service({P + "type": "clb"}), "'clb' does not ask for an NLB", id="classic-elb-type"
        ),
        pytest.param(
            _service({P + "extra-security-groups": "sg-1"}),
            "BYO extra security group annotation",
            id="extra-security-groups-refused-as-upstream",
        ),
        pytest.param(
            _service({P + "healthcheck-healthy-threshold": "11"}),
            'invalid value "11": want a base-10 integer from 2 to 10',
            id="threshold-above-range",
        ),
        pytest.param(
            _service({P + "healthcheck-unhealthy-threshold": "1"}),
            'invalid value "1": want a base-10 integer from 2 to 10',
            id="threshold-below-range",
        ),
        pytest.param(
            _service({P + "healthcheck-interval": "301"}),
            'invalid value "301": want a base-10 integer from 5 to 300',
            id="interval-above-range",
        ),
        pytest.param(
            _service({P + "eip-allocations": "1.2.3.4"}),
            "'1.2.3.4' is not an EIP allocation ID",
            id="eip-not-an-allocation",
        ),
        pytest.param(
            _service({P + "private-ipv4-addresses": "10.0.0"}),
            "'10.0.0' is not an IPv4 address",
            id="private-ip-not-an-address",
        ),
        pytest.param(
            _service({P + "access-log-enabled": "true"}),
            "access-log-s3-bucket-name is required",
            id="access-log-without-bucket",
        ),
        pytest.param(
            _service({P + "target-group-attributes": "stickiness.enabled=true"}),
            "'stickiness.enabled' is not supported",
            id="unsupported-target-group-attribute",
        ),
        pytest.param(
            _service({P + "healthcheck-interval": "often"}),
            'invalid value "often": want a base-10 integer',
            id="bad-interval",
        ),
        pytest.param(
            _service({P + "healthcheck-protocol": "icmp"}),
            "'ICMP' is not TCP, HTTP or HTTPS",
            id="bad-hc-protocol",
        ),
        pytest.param(
            _service({P + "healthcheck-port": "99999"}), "'99999' is not a port", id="bad-hc-port"
        ),
        pytest.param(
            _service({P + "cross-zone-load-balancing-enabled": "maybe"}),
            f"error parsing service annotation: {P}cross-zone-load-balancing-enabled=maybe",
            id="bad-boolean",
        ),
        *[
            pytest.param(
                _service({P + "cross-zone-load-balancing-enabled": value}),
                f"error parsing service annotation: {P}cross-zone-load-balancing-enabled={value}",
                id=f"boolean-spelling-go-refuses-{value.strip()}",
            )
            for value in ("TrUe", " true", "yes")
        ],
        pytest.param(
            _service({P + "healthcheck-interval": ""}),
            'invalid value "": want a base-10 integer from 5 to 300',
            id="present-but-empty-interval",
        ),
        pytest.param(_service(sessionAffinity="ClientIP"), "affinity", id="session-affinity"),
        pytest.param(_service(loadBalancerIP="1.2.3.4"), "LoadBalancerIP", id="load-balancer-ip"),
        pytest.param(_service(ports=[]), "no ports", id="no-ports"),
        pytest.param(
            _service(
                ports=[
                    {"port": 53, "protocol": "TCP", "nodePort": 1},
                    {"port": 53, "protocol": "UDP", "nodePort": 2},
                ]
            ),
            "mixed protocol",
            id="mixed-protocols",
        ),
        pytest.param(
            _service(ports=[{"port": 9, "protocol": "SCTP", "nodePort": 3}]),
            "SCTP not supported",
            id="sctp",
        ),
        pytest.param(
            _service(ports=[{"port": 80, "protocol": "TCP"}]),
            "no port of the Service has a nodePort",
            id="no-node-port-yet",
        ),
    ],
)
def test_bad_service_requests_are_refused_with_the_reason(
    service: dict[str, Any], message: str
) -> None:
    with pytest.raises(ServiceAnnotationError, match=re.escape(message)):
        load_balancer_spec(service)


def test_supported_annotations_are_read() -> None:
    spec = load_balancer_spec(
        _service(
            {
                P + "internal": "true",
                P + "cross-zone-load-balancing-enabled": "true",
                P + "subnets": "subnet-1, public-a",
                P + "target-node-labels": "pool=edge",
                P + "additional-resource-tags": "team=web,cost=1",
            }
        )
    )
    assert spec.internal
    assert spec.cross_zone
    assert spec.subnets == ("subnet-1", "public-a")
    assert spec.target_labels == {"pool": "edge"}
    assert spec.extra_tags == {"team": "web", "cost": "1"}
    assert spec.service_key == "shop/web"


@pytest.mark.parametrize(
    ("annotations", "tls_ports", "target_protocol"),
    [
        pytest.param(
            {P + "ssl-cert": "arn:c"}, {80, 443}, "TCP", id="every-port-without-ssl-ports"
        ),
        pytest.param({P + "ssl-cert": "arn:c", P + "ssl-ports": "*"}, {80, 443}, "TCP", id="star"),
        pytest.param(
            {P + "ssl-cert": "arn:c", P + "ssl-ports": "443"}, {443}, "TCP", id="by-number"
        ),
        pytest.param(
            {P + "ssl-cert": "arn:c", P + "ssl-ports": "https"}, {443}, "TCP", id="by-name"
        ),
        pytest.param(
            {P + "ssl-cert": "arn:c", P + "ssl-ports": "443", P + "backend-protocol": "ssl"},
            {443},
            "TLS",
            id="tls-to-the-backend",
        ),
        pytest.param({P + "ssl-ports": "443"}, set(), "TCP", id="no-certificate-no-tls"),
    ],
)
def test_tls_listeners_like_upstream(
    annotations: dict[str, str], tls_ports: set[int], target_protocol: str
) -> None:
    ports = [
        {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080},
        {"name": "https", "port": 443, "protocol": "TCP", "nodePort": 30443},
    ]
    spec = load_balancer_spec(_service(annotations, ports=ports))
    tls = {m.port: m for m in spec.mappings if m.tls is not None}
    assert set(tls) == tls_ports
    assert all(m.listener_protocol == "TLS" and m.tls.certificate == "arn:c" for m in tls.values())  # type: ignore[union-attr]
    assert all(m.protocol == target_protocol for m in tls.values())
