"""TLS listeners, EIPs, proxy protocol v2 and access logs on moto, each applied and then kept
without writes."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from aws_lb import lb_of, nodes
from test_aws_loadbalancer import P, service

from kccm.cloudprovider import default_load_balancer_name
from kccm.emulators.aws import CREDENTIALS, REGION, World, clients
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import ServiceAnnotationError


def _certificate(world: World, domain: str) -> str:
    acm = boto3.client(
        "acm",
        region_name=REGION,
        endpoint_url=world.url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    return str(acm.request_certificate(DomainName=domain)["CertificateArn"])


def _described(world: World, svc: dict[str, Any]) -> dict[str, Any]:
    _, elbv2 = clients(world.url)
    lb = elbv2.describe_load_balancers(Names=[default_load_balancer_name(svc)])["LoadBalancers"][0]
    arn = lb["LoadBalancerArn"]
    listeners = {
        li["Port"]: li for li in elbv2.describe_listeners(LoadBalancerArn=arn)["Listeners"]
    }
    groups = {
        port: elbv2.describe_target_group_attributes(
            TargetGroupArn=li["DefaultActions"][0]["TargetGroupArn"]
        )["Attributes"]
        for port, li in listeners.items()
    }
    attributes = elbv2.describe_load_balancer_attributes(LoadBalancerArn=arn)["Attributes"]
    return {
        "listeners": listeners,
        "group_attributes": {p: {a["Key"]: a["Value"] for a in g} for p, g in groups.items()},
        "attributes": {a["Key"]: a["Value"] for a in attributes},
    }


def _no_writes_on_reensure(cloud: AWSCloud, svc: dict[str, Any], world: World) -> None:
    before = cloud.cloud_api_calls().snapshot()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert cloud.cloud_api_calls().snapshot().since(before).writes == {}


def test_tls_listeners_follow_the_certificate_and_policy(cloud: AWSCloud, world: World) -> None:
    first, second = _certificate(world, "a.example.com"), _certificate(world, "b.example.com")
    annotations = {
        P + "ssl-cert": first,
        P + "ssl-ports": "443",
        P + "ssl-negotiation-policy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
    }
    svc = service(((80, 30080), (443, 30443)), annotations)
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    listeners = _described(world, svc)["listeners"]
    assert (listeners[80]["Protocol"], listeners[443]["Protocol"]) == ("TCP", "TLS")
    assert listeners[443]["Certificates"] == [{"CertificateArn": first}]
    assert listeners[443]["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    _no_writes_on_reensure(cloud, svc, world)
    # moto's ModifyListener refuses TLS ("Protocol TLS is not supported"): the request is
    # checked here instead of sent.
    sent = _intercept(cloud, "modify_listener")
    svc["metadata"]["annotations"][P + "ssl-cert"] = second
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    [modify] = sent
    assert (modify["Port"], modify["Protocol"]) == (443, "TLS")
    assert modify["Certificates"] == [{"CertificateArn": second}]
    assert modify["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"


def _intercept(cloud: AWSCloud, operation: str) -> list[dict[str, Any]]:
    """Record the parameters of ``operation`` instead of sending it (other calls go through)."""
    sent: list[dict[str, Any]] = []
    real = cloud.api.call

    def spy(service_name: str, op: str, **params: Any) -> dict[str, Any]:
        if op == operation:
            sent.append(params)
            return {}
        return real(service_name, op, **params)

    cloud.api.call = spy  # type: ignore[method-assign]
    return sent


def test_proxy_protocol_and_access_logs(cloud: AWSCloud, world: World) -> None:
    annotations = {
        P + "target-group-attributes": "proxy_protocol_v2.enabled=true",
        P + "access-log-enabled": "true",
        P + "access-log-s3-bucket-name": "logs",
        P + "access-log-s3-bucket-prefix": "nlb",
    }
    svc = service(annotations=annotations)
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = _described(world, svc)
    assert found["group_attributes"][80]["proxy_protocol_v2.enabled"] == "true"
    assert {k: v for k, v in found["attributes"].items() if k.startswith("access_logs")} == {
        "access_logs.s3.enabled": "true",
        "access_logs.s3.bucket": "logs",
        "access_logs.s3.prefix": "nlb",
    }
    _no_writes_on_reensure(cloud, svc, world)
    svc["metadata"]["annotations"] = {  # access logs annotations removed, proxy protocol off
        P + "type": "nlb",
        P + "target-group-attributes": "proxy_protocol_v2.enabled=false",
    }
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = _described(world, svc)
    assert found["group_attributes"][80]["proxy_protocol_v2.enabled"] == "false"
    assert found["attributes"]["access_logs.s3.enabled"] == "false"


def test_eip_allocations_and_private_addresses_go_into_the_subnet_mappings(
    cloud: AWSCloud, world: World
) -> None:
    ec2, _ = clients(world.url)
    eips = [ec2.allocate_address(Domain="vpc")["AllocationId"] for _ in world.subnet_ids]
    svc = service(annotations={P + "eip-allocations": ",".join(eips)})
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))  # moto accepts them ...
    _, elbv2 = clients(world.url)
    elbv2.delete_load_balancer(
        LoadBalancerArn=elbv2.describe_load_balancers(Names=[default_load_balancer_name(svc)])[
            "LoadBalancers"
        ][0]["LoadBalancerArn"]
    )
    sent = _intercept(cloud, "create_load_balancer")  # ... but does not report them back
    private = ["10.10.0.10", "10.10.1.10"]
    svc["metadata"]["annotations"][P + "private-ipv4-addresses"] = ",".join(private)
    with pytest.raises(KeyError):  # the intercepted create answers nothing
        lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    [created] = sent
    assert [m.get("AllocationId") for m in created["SubnetMappings"]] == eips
    assert [m.get("PrivateIPv4Address") for m in created["SubnetMappings"]] == private


def test_too_few_eips_are_refused_before_anything_is_created(cloud: AWSCloud, world: World) -> None:
    svc = service(annotations={P + "eip-allocations": "eipalloc-1"})
    with pytest.raises(ServiceAnnotationError, match="eip-allocations: must have the same number"):
        lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    _, elbv2 = clients(world.url)
    names = [lb["LoadBalancerName"] for lb in elbv2.describe_load_balancers()["LoadBalancers"]]
    assert default_load_balancer_name(svc) not in names


def test_the_proxy_protocol_annotation_is_not_read_on_an_nlb(cloud: AWSCloud, world: World) -> None:
    """Upstream's NLB branch returns before ``-proxy-protocol`` is read (aws.go
    ``EnsureLoadBalancer``): a Service moved from upstream keeps plain TCP to its back ends."""
    svc = service(annotations={P + "proxy-protocol": "*"})
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = _described(world, svc)
    assert found["group_attributes"][80].get("proxy_protocol_v2.enabled", "false") == "false"
