"""AWS errors as the contract's kinds (kccm explain's reasons): quota and limit codes, permission
codes, throttling, annotation errors naming the annotation, and the target-node-labels
selector. Against moto: its own limit error (RulesPerSecurityGroupLimitExceeded) for real, and
the other codes answered by the fault proxy in front of it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lb import lb_of, nodes

from kccm.cloudprovider import (
    PermissionDenied,
    QuotaExceeded,
    Reason,
    Throttled,
    as_backend_node_selector,
    classify,
)
from kccm.emulators.aws import FaultProxy, World
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import ServiceAnnotationError, load_balancer_spec
from kccm.providers.aws.api import (
    AWSAPI,
    AWSAPIError,
    AWSPermissionDenied,
    AWSQuotaExceeded,
    is_quota_code,
)
from kccm.providers.aws.config import load_aws_config

P = "service.beta.kubernetes.io/aws-load-balancer-"


def service(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": str(uuid.uuid4()),
            "annotations": annotations or {},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "p", "port": 80, "protocol": "TCP", "nodePort": 30080}],
            **spec,
        },
    }


@pytest.fixture
def proxy(world: World) -> Iterator[FaultProxy]:
    fault = FaultProxy(world.url).start()
    yield fault
    fault.stop()


@pytest.fixture
def api(world: World, proxy: FaultProxy, aws_env: None) -> AWSAPI:
    return AWSAPI(load_aws_config(world.cloud_config(proxy.url, APIMaxAttempts="1")))


@pytest.mark.parametrize(
    ("service_name", "operation", "code", "kind", "reason"),
    [
        pytest.param(
            "elbv2", "describe_load_balancers", "TooManyLoadBalancers", AWSQuotaExceeded,
            Reason.QUOTA, id="elbv2-too-many-load-balancers",
        ),
        pytest.param(
            "elbv2", "describe_target_groups", "TooManyTargetGroups", AWSQuotaExceeded,
            Reason.QUOTA, id="elbv2-too-many-target-groups",
        ),
        pytest.param(
            "elb", "describe_load_balancers", "TooManyLoadBalancers", AWSQuotaExceeded,
            Reason.QUOTA, id="classic-too-many-load-balancers",
        ),
        pytest.param(
            "ec2", "describe_security_groups", "SecurityGroupLimitExceeded", AWSQuotaExceeded,
            Reason.QUOTA, id="ec2-security-group-limit",
        ),
        pytest.param(
            "ec2", "describe_addresses", "AddressLimitExceeded", AWSQuotaExceeded,
            Reason.QUOTA, id="ec2-address-limit",
        ),
        pytest.param(
            "elbv2", "describe_load_balancers", "LimitExceeded", AWSQuotaExceeded,
            Reason.QUOTA, id="limit-exceeded",
        ),
        pytest.param(
            "elbv2", "describe_load_balancers", "AccessDenied", AWSPermissionDenied,
            Reason.PERMISSION, id="elbv2-access-denied",
        ),
        pytest.param(
            "ec2", "describe_instances", "UnauthorizedOperation", AWSPermissionDenied,
            Reason.PERMISSION, id="ec2-unauthorized-operation",
        ),
        pytest.param(
            "ec2", "describe_instances", "AuthFailure", AWSPermissionDenied,
            Reason.PERMISSION, id="ec2-auth-failure",
        ),
        pytest.param(
            "ec2", "describe_instances", "RequestLimitExceeded", Throttled,
            Reason.THROTTLED, id="request-limit-is-throttling",
        ),
        pytest.param(
            "elbv2", "describe_load_balancers", "ValidationError", AWSAPIError,
            Reason.CLOUD_API, id="anything-else-is-a-cloud-api-error",
        ),
    ],
)  # fmt: skip
def test_error_codes_map_to_the_contracts_kinds(
    api: AWSAPI,
    proxy: FaultProxy,
    service_name: str,
    operation: str,
    code: str,
    kind: type[Exception],
    reason: Reason,
) -> None:
    proxy.refuse = lambda service, action: code
    with pytest.raises(kind) as caught:
        api.call(service_name, operation)
    assert classify(caught.value) is reason
    assert code in str(caught.value)
    if isinstance(caught.value, AWSAPIError):
        assert caught.value.code == code


@pytest.mark.parametrize(
    ("code", "quota"),
    [
        pytest.param("TooManyRules", True, id="too-many-rules"),
        pytest.param("TooManyUniqueTargetGroupsPerLoadBalancer", True, id="listed"),
        pytest.param("TooManyFoos", True, id="any-too-many"),
        pytest.param("FooLimitExceeded", True, id="any-limit-exceeded"),
        pytest.param("TooManyRequestsException", False, id="throttling-not-quota"),
        pytest.param("RequestLimitExceeded", False, id="request-limit-not-quota"),
        pytest.param("LoadBalancerNotFound", False, id="not-found"),
    ],
)
def test_is_quota_code(code: str, quota: bool) -> None:
    assert is_quota_code(code) is quota


def test_the_permission_error_keeps_its_aws_base(api: AWSAPI, proxy: FaultProxy) -> None:
    proxy.refuse = lambda service, action: "AccessDenied"
    with pytest.raises(AWSAPIError) as caught:
        api.call("elbv2", "describe_load_balancers")
    assert isinstance(caught.value, PermissionDenied)
    assert proxy.refused == {"elasticloadbalancing:DescribeLoadBalancers": 1}


def test_a_permission_refusal_fails_the_ensure_as_permission_denied(
    world: World, proxy: FaultProxy, aws_env: None
) -> None:
    proxy.refuse = lambda service, action: (
        "AccessDenied" if action == "CreateLoadBalancer" else None
    )
    cloud = AWSCloud(load_aws_config(world.cloud_config(proxy.url, APIMaxAttempts="1")))
    svc = service({P + "type": "nlb"})
    try:
        with pytest.raises(PermissionDenied, match="CreateLoadBalancer"):
            lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    finally:
        proxy.refuse = lambda service, action: None
        lb_of(cloud).ensure_load_balancer_deleted("k", svc)


def test_moto_s_rule_limit_is_a_quota(cloud: AWSCloud, world: World) -> None:
    """61 source ranges are 61 ingress rules on the balancer's group: moto allows 60 in a VPC
    (AWS's default quota), RulesPerSecurityGroupLimitExceeded."""
    ranges = [f"10.{i}.0.0/16" for i in range(61)]
    svc = service(loadBalancerSourceRanges=ranges)
    try:
        with pytest.raises(QuotaExceeded, match="RulesPerSecurityGroupLimitExceeded") as caught:
            lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
        assert classify(caught.value) is Reason.QUOTA
    finally:
        lb_of(cloud).ensure_load_balancer_deleted("k", svc)


@pytest.mark.parametrize(
    ("annotations", "key"),
    [
        pytest.param({P + "healthcheck-interval": "often"}, P + "healthcheck-interval", id="int"),
        pytest.param(
            {P + "connection-draining-enabled": "maybe"},
            P + "connection-draining-enabled",
            id="bool",
        ),
    ],
)
def test_a_bad_annotation_is_an_invalid_config_naming_it(
    cloud: AWSCloud, world: World, annotations: dict[str, str], key: str
) -> None:
    with pytest.raises(ServiceAnnotationError) as caught:
        lb_of(cloud).ensure_load_balancer("k", service(annotations), nodes(world))
    assert classify(caught.value) is Reason.INVALID
    assert caught.value.key == key
    assert key in str(caught.value)


def test_an_nlb_annotation_error_names_its_annotation() -> None:
    with pytest.raises(ServiceAnnotationError) as caught:
        load_balancer_spec(service({P + "type": "nlb", P + "healthcheck-interval": "x"}))
    assert caught.value.key == P + "healthcheck-interval"


def test_a_spec_fault_has_no_annotation_key() -> None:
    error = ServiceAnnotationError("requested load balancer with no ports")
    assert (error.key, str(error)) == ("", "requested load balancer with no ports")


@pytest.mark.parametrize(
    ("labels", "why"),
    [
        pytest.param({"pool": "web", "x": "1"}, None, id="matches"),
        pytest.param(
            {"pool": "db"},
            f"does not match annotation {P}target-node-labels=pool=web",
            id="other-value",
        ),
        pytest.param(
            {}, f"does not match annotation {P}target-node-labels=pool=web", id="no-label"
        ),
    ],
)
def test_target_node_labels_name_the_nodes_left_out(
    cloud: AWSCloud, labels: dict[str, str], why: str | None
) -> None:
    selector = as_backend_node_selector(lb_of(cloud))
    assert selector is not None
    exclusion = selector.backend_node_exclusion(service({P + "target-node-labels": "pool=web"}))
    assert exclusion is not None
    assert exclusion({"metadata": {"name": "n", "labels": labels}}) == why


def test_without_target_node_labels_every_node_is_kept(cloud: AWSCloud) -> None:
    selector = as_backend_node_selector(lb_of(cloud))
    assert selector is not None
    assert selector.backend_node_exclusion(service()) is None
