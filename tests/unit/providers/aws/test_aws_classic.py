"""Classic ELBs against moto: upstream's default for a Service without the type annotation."""

from __future__ import annotations

import uuid
from typing import Any

import botocore.exceptions
import pytest
from aws_lb import lb_of, nodes, writes

from kccm.cloudprovider import default_load_balancer_name
from kccm.emulators.aws import World, clients
from kccm.emulators.aws.readback import (
    certificate,
    classic_names,
    classic_state,
    elb_client,
    group_named,
    group_rules,
    node_security_group,
)
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import ServiceAnnotationError
from kccm.providers.aws.config import load_aws_config
from kccm.providers.aws.loadbalancer import ImmutableChange

P = "service.beta.kubernetes.io/aws-load-balancer-"
CERT = "<an ACM certificate>"


def service(
    ports: tuple[tuple[int, int], ...] = ((80, 30080),),
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": str(uuid.uuid4()),
            "annotations": annotations or {},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{p}", "port": p, "protocol": "TCP", "nodePort": n} for p, n in ports
            ],
            **spec,
        },
    }


@pytest.fixture
def node_group(world: World) -> str:
    return node_security_group(world)


def test_no_type_annotation_makes_a_classic_elb_like_upstream(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service(((80, 30080), (8080, 30081)), {P + "additional-resource-tags": "team=web"})
    status = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    found = classic_state(world.url, name)
    assert status.ingress[0].hostname == found["lb"]["DNSName"]
    assert found["listeners"] == [(80, "TCP", 30080, "TCP"), (8080, "TCP", 30081, "TCP")]
    assert found["lb"]["HealthCheck"] == {
        "Target": "TCP:30080",
        "Interval": 10,
        "Timeout": 5,
        "UnhealthyThreshold": 6,
        "HealthyThreshold": 2,
    }
    assert found["instances"] == sorted(world.instances)
    assert found["tags"] == {
        f"kubernetes.io/cluster/{world.cluster_id}": "owned",
        "kubernetes.io/service-name": "shop/web",
        "team": "web",
    }
    own = group_named(world.url, world.vpc_id, f"k8s-elb-{name}")
    assert own is not None
    assert own["Description"] == f"Security group for Kubernetes ELB {name} (shop/web)"
    assert found["lb"]["SecurityGroups"] == [own["GroupId"]]
    assert group_rules(world.url, own["GroupId"]) == {
        ("tcp", 80, 80, "0.0.0.0/0", ""),
        ("tcp", 8080, 8080, "0.0.0.0/0", ""),
        ("icmp", 3, 4, "0.0.0.0/0", ""),
    }
    assert group_rules(world.url, node_group) == {("-1", None, None, own["GroupId"], "")}
    _, elbv2 = clients(world.url)
    nlbs = elbv2.describe_load_balancers()["LoadBalancers"]  # moto is shared by other tests
    assert [lb for lb in nlbs if lb["VpcId"] == world.vpc_id] == []  # no NLB


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param({}, id="ssl-to-tcp-backends"),
        pytest.param({P + "backend-protocol": "ssl"}, id="ssl-to-ssl-backends"),
        pytest.param({P + "backend-protocol": "http"}, id="https-to-http-backends"),
    ],
)
def test_a_second_ensure_writes_nothing(
    cloud: AWSCloud, world: World, node_group: str, backend: dict[str, str]
) -> None:
    svc = service(
        annotations={
            **backend,
            P + "ssl-cert": certificate(world.url),
            P + "ssl-ports": "443",
            P + "ssl-negotiation-policy": "ELBSecurityPolicy-2016-08",
            P + "proxy-protocol": "*",
            P + "connection-draining-enabled": "true",
            P + "additional-resource-tags": "team=web",
        },
        ports=((80, 30080), (443, 30443)),
    )
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    before = dict(cloud.api.counts())
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    lb_of(cloud).update_load_balancer("k", svc, nodes(world))
    assert writes(before, cloud.api.counts()) == {}


def _drift(world: World, name: str, node_group: str, own_group: str) -> None:
    elb = elb_client(world.url)
    ec2, _ = clients(world.url)
    elb.delete_load_balancer_listeners(LoadBalancerName=name, LoadBalancerPorts=[80])
    elb.configure_health_check(
        LoadBalancerName=name,
        HealthCheck={
            "Target": "TCP:1",
            "Interval": 30,
            "Timeout": 5,
            "UnhealthyThreshold": 2,
            "HealthyThreshold": 2,
        },
    )
    elb.deregister_instances_from_load_balancer(
        LoadBalancerName=name, Instances=[{"InstanceId": next(iter(world.instances))}]
    )
    elb.modify_load_balancer_attributes(
        LoadBalancerName=name,
        LoadBalancerAttributes={"ConnectionSettings": {"IdleTimeout": 5}},
    )
    ec2.revoke_security_group_ingress(
        GroupId=node_group,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": own_group}]}],
    )
    ec2.authorize_security_group_ingress(
        GroupId=own_group,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "IpRanges": [{"CidrIp": "1.2.3.4/32"}],
            }
        ],
    )


def test_drift_is_repaired_by_the_next_ensure(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    wanted = classic_state(world.url, name)
    own = group_named(world.url, world.vpc_id, f"k8s-elb-{name}")
    assert own is not None
    wanted_rules = group_rules(world.url, own["GroupId"]), group_rules(world.url, node_group)
    _drift(world, name, node_group, own["GroupId"])
    assert classic_state(world.url, name) != wanted
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    repaired = classic_state(world.url, name)
    for key in ("listeners", "instances"):
        assert repaired[key] == wanted[key], key
    assert repaired["attributes"]["ConnectionSettings"] == {"IdleTimeout": 60}
    assert repaired["lb"]["HealthCheck"] == wanted["lb"]["HealthCheck"]
    assert (group_rules(world.url, own["GroupId"]), group_rules(world.url, node_group)) == (
        wanted_rules
    )


def test_instances_follow_the_nodes(cloud: AWSCloud, world: World, node_group: str) -> None:
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world, 1))
    name = default_load_balancer_name(svc)
    assert classic_state(world.url, name)["instances"] == [next(iter(world.instances))]
    lb.update_load_balancer("k", svc, nodes(world))
    assert classic_state(world.url, name)["instances"] == sorted(world.instances)
    lb.update_load_balancer("k", svc, nodes(world)[1:])
    assert classic_state(world.url, name)["instances"] == sorted(list(world.instances)[1:])


def test_ports_dropped_together_leave_exactly_the_new_listeners(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    """Two ports removed in one DeleteLoadBalancerListeners call (as upstream sends them),
    against moto taught AWS's answer (kccm.emulators.aws.teachings.delete_listeners_by_port);
    a third ensure finds nothing to change."""
    svc = service(((80, 30080), (85, 30085), (86, 30086)))
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    svc["spec"]["ports"] = service(((80, 30080), (87, 30087)))["spec"]["ports"]
    lb.ensure_load_balancer("k", svc, nodes(world))
    listeners = classic_state(world.url, default_load_balancer_name(svc))["listeners"]
    assert [(port, instance_port) for port, _, instance_port, _ in listeners] == [
        (80, 30080),
        (87, 30087),
    ]
    before = dict(cloud.api.counts())
    lb.ensure_load_balancer("k", svc, nodes(world))
    assert writes(before, cloud.api.counts()) == {}


def test_taught_moto_answers_a_missing_balancers_listener_delete_as_aws(world: World) -> None:
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        elb_client(world.url).delete_load_balancer_listeners(
            LoadBalancerName="no-such-balancer", LoadBalancerPorts=[80]
        )
    assert caught.value.response["Error"]["Code"] == "LoadBalancerNotFound"


@pytest.mark.parametrize(
    ("annotations", "listeners"),
    [
        pytest.param(
            {P + "ssl-cert": CERT, P + "ssl-ports": "443"},
            [(80, "TCP", 30080), (443, "SSL", 30443)],
            id="ssl-cert-on-ssl-ports",
        ),
        pytest.param(
            {P + "ssl-cert": CERT, P + "backend-protocol": "http", P + "ssl-ports": "p443"},
            [(80, "HTTP", 30080), (443, "HTTPS", 30443)],
            id="https-by-port-name-http-elsewhere",
        ),
        pytest.param(
            {P + "ssl-cert": CERT},
            [(80, "SSL", 30080), (443, "SSL", 30443)],
            id="ssl-cert-on-every-port",
        ),
        pytest.param(
            {P + "backend-protocol": "http"},
            [(80, "HTTP", 30080), (443, "HTTP", 30443)],
            id="http-backend",
        ),
    ],
)
def test_listener_protocols_follow_the_annotations(
    cloud: AWSCloud,
    world: World,
    node_group: str,
    annotations: dict[str, str],
    listeners: list[tuple[int, str, int]],
) -> None:
    """Frontend protocols as moto shows them (it keeps no instance protocol of its own: the
    instance protocols are checked on the computed listeners in test_aws_classic_spec.py)."""
    cert = certificate(world.url)
    svc = service(
        ((80, 30080), (443, 30443)),
        {k: cert if v == CERT else v for k, v in annotations.items()},
    )
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = classic_state(world.url, default_load_balancer_name(svc))["listeners"]
    assert [listener[:3] for listener in found] == listeners


def test_ssl_negotiation_policy_and_proxy_protocol(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service(
        ((80, 30080), (443, 30443)),
        {
            P + "ssl-cert": certificate(world.url),
            P + "ssl-ports": "443",
            P + "ssl-negotiation-policy": "ELBSecurityPolicy-2016-08",
            P + "proxy-protocol": "*",
        },
    )
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    lb = classic_state(world.url, default_load_balancer_name(svc))["lb"]
    policies = {
        d["Listener"]["LoadBalancerPort"]: d["PolicyNames"] for d in lb["ListenerDescriptions"]
    }
    assert policies == {80: [], 443: ["k8s-SSLNegotiationPolicy-ELBSecurityPolicy-2016-08"]}
    backends = {b["InstancePort"]: b["PolicyNames"] for b in lb["BackendServerDescriptions"]}
    assert backends == {30080: ["k8s-proxyprotocol-enabled"], 30443: ["k8s-proxyprotocol-enabled"]}
    svc["metadata"]["annotations"].pop(P + "proxy-protocol")
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    lb = classic_state(world.url, default_load_balancer_name(svc))["lb"]
    assert all(not b["PolicyNames"] for b in lb["BackendServerDescriptions"])


def test_attribute_annotations(cloud: AWSCloud, world: World, node_group: str) -> None:
    svc = service(
        annotations={
            P + "connection-draining-enabled": "true",
            P + "connection-draining-timeout": "42",
            P + "connection-idle-timeout": "120",
            P + "cross-zone-load-balancing-enabled": "true",
            P + "access-log-enabled": "true",
            P + "access-log-emit-interval": "5",
            P + "access-log-s3-bucket-name": "logs",
            P + "access-log-s3-bucket-prefix": "web",
        }
    )
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    attrs = classic_state(world.url, default_load_balancer_name(svc))["attributes"]
    assert attrs["ConnectionDraining"] == {"Enabled": True, "Timeout": 42}
    assert attrs["ConnectionSettings"] == {"IdleTimeout": 120}
    assert attrs["CrossZoneLoadBalancing"] == {"Enabled": True}
    assert attrs["AccessLog"] == {
        "Enabled": True,
        "EmitInterval": 5,
        "S3BucketName": "logs",
        "S3BucketPrefix": "web",
    }


def test_source_ranges_shape_the_balancer_group(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service(loadBalancerSourceRanges=["10.1.0.0/16", "192.168.7.1/24"])
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    own = group_named(world.url, world.vpc_id, f"k8s-elb-{default_load_balancer_name(svc)}")
    assert own is not None
    assert group_rules(world.url, own["GroupId"]) == {
        (proto, lo, hi, cidr, "")
        for proto, lo, hi in (("tcp", 80, 80), ("icmp", 3, 4))
        for cidr in ("10.1.0.0/16", "192.168.7.0/24")
    }
    svc["spec"]["loadBalancerSourceRanges"] = ["10.1.0.0/16"]
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert group_rules(world.url, own["GroupId"]) == {
        ("tcp", 80, 80, "10.1.0.0/16", ""),
        ("icmp", 3, 4, "10.1.0.0/16", ""),
    }


def _user_group(world: World, name: str) -> str:
    ec2, _ = clients(world.url)
    return str(
        ec2.create_security_group(GroupName=name, Description=name, VpcId=world.vpc_id)["GroupId"]
    )


def test_annotated_security_groups_replace_the_own_group(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    byo, extra = _user_group(world, "byo"), _user_group(world, "extra")
    svc = service(annotations={P + "extra-security-groups": extra})
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    own = group_named(world.url, world.vpc_id, f"k8s-elb-{name}")
    assert own is not None
    assert classic_state(world.url, name)["lb"]["SecurityGroups"] == [own["GroupId"], extra]
    svc["metadata"]["annotations"][P + "security-groups"] = byo
    lb.ensure_load_balancer("k", svc, nodes(world))
    assert classic_state(world.url, name)["lb"]["SecurityGroups"] == [byo, extra]
    assert group_named(world.url, world.vpc_id, f"k8s-elb-{name}") is None  # replaced: deleted
    assert group_rules(world.url, node_group) == {("-1", None, None, byo, "")}
    assert group_rules(world.url, byo) == set()  # a user's group is never edited
    lb.ensure_load_balancer_deleted("k", svc)
    assert {g for g in (byo, extra) if group_rules(world.url, g) is not None} == {byo, extra}
    assert group_rules(world.url, node_group) == set()


def test_local_traffic_policy_health_checks_the_health_check_node_port(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service(externalTrafficPolicy="Local", healthCheckNodePort=32100)
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    hc = classic_state(world.url, default_load_balancer_name(svc))["lb"]["HealthCheck"]
    assert hc["Target"] == "HTTP:32100/healthz"


def test_delete_removes_the_balancer_its_group_and_the_node_rule(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    lb.ensure_load_balancer_deleted("k", svc)
    assert name not in classic_names(world.url, world.vpc_id)
    assert group_named(world.url, world.vpc_id, f"k8s-elb-{name}") is None
    assert group_rules(world.url, node_group) == set()
    assert lb.get_load_balancer("k", svc) == (None, False)
    lb.ensure_load_balancer_deleted("k", svc)  # idempotent


def test_a_group_left_by_an_interrupted_delete_is_removed(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    elb_client(world.url).delete_load_balancer(LoadBalancerName=name)
    lb.ensure_load_balancer_deleted("k", svc)
    assert group_named(world.url, world.vpc_id, f"k8s-elb-{name}") is None
    assert group_rules(world.url, node_group) == set()


def test_disable_security_group_ingress_leaves_the_node_group_alone(
    world: World, aws_env: None, node_group: str
) -> None:
    config = world.cloud_config(APIMaxAttempts="1", DisableSecurityGroupIngress="true")
    cloud = AWSCloud(load_aws_config(config))
    svc = service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert group_rules(world.url, node_group) == set()


def test_elb_security_group_of_the_cloud_config_is_used_and_never_edited(
    world: World, aws_env: None, node_group: str
) -> None:
    shared = _user_group(world, "shared-elb")
    cloud = AWSCloud(load_aws_config(world.cloud_config(ElbSecurityGroup=shared)))
    svc = service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    assert classic_state(world.url, name)["lb"]["SecurityGroups"] == [shared]
    assert group_named(world.url, world.vpc_id, f"k8s-elb-{name}") is None
    assert group_rules(world.url, shared) == set()
    lb_of(cloud).ensure_load_balancer_deleted("k", svc)
    assert group_rules(world.url, shared) == set()


@pytest.mark.parametrize(
    ("annotations", "spec", "message"),
    [
        pytest.param({}, {"sessionAffinity": "ClientIP"}, "affinity", id="affinity"),
        pytest.param({P + "proxy-protocol": "yes"}, {}, "only value supported", id="proxy"),
        pytest.param({P + "connection-idle-timeout": "soon"}, {}, "idle-timeout", id="idle"),
        pytest.param({P + "healthcheck-interval": "2"}, {}, "Interval must be", id="interval"),
        pytest.param({P + "ssl-cert": "a", P + "backend-protocol": "ftp"}, {}, "ftp", id="be"),
        pytest.param({}, {"loadBalancerSourceRanges": ["nope"]}, "nope", id="source-range"),
    ],
)
def test_bad_input_creates_nothing(
    cloud: AWSCloud,
    world: World,
    annotations: dict[str, str],
    spec: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(ServiceAnnotationError, match=message):
        lb_of(cloud).ensure_load_balancer(
            "k", service(annotations=annotations, **spec), nodes(world)
        )
    assert classic_names(world.url, world.vpc_id) == []


def test_udp_is_refused_as_upstream_refuses_it(cloud: AWSCloud, world: World) -> None:
    svc = service()
    svc["spec"]["ports"][0]["protocol"] = "UDP"
    with pytest.raises(ServiceAnnotationError, match="Protocol UDP not supported"):
        lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))


@pytest.mark.parametrize(
    ("annotations", "hostname"),
    [
        pytest.param({}, "x-1.elb.eu-west-1.amazonaws.com", id="classic-on-an-nlb"),
        pytest.param({P + "type": "nlb"}, "x.eu-west-1.elb.amazonaws.com", id="nlb-on-a-classic"),
    ],
)
def test_the_kind_of_a_published_balancer_cannot_change(
    cloud: AWSCloud, world: World, annotations: dict[str, str], hostname: str
) -> None:
    svc = service(annotations=annotations)
    svc["status"] = {"loadBalancer": {"ingress": [{"hostname": hostname}]}}
    with pytest.raises(ServiceAnnotationError, match="cannot update Load Balancer Type"):
        lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))


def test_a_scheme_change_is_refused_naming_the_annotation_after_the_rest_is_applied(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    """As for an NLB: AWS cannot change a Classic ELB's scheme, so the ensure fails (a Warning
    event, never "Ensured") naming ``aws-load-balancer-internal``; the rest is applied."""
    svc = service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    svc["metadata"]["annotations"] = {
        P + "internal": "true",
        P + "healthcheck-healthy-threshold": "6",
    }
    with pytest.raises(ImmutableChange, match=r"scheme \(" + P + "internal asks internal"):
        lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = classic_state(world.url, default_load_balancer_name(svc))
    assert found["lb"]["Scheme"] == "internet-facing"
    assert found["lb"]["HealthCheck"]["HealthyThreshold"] == 6


def test_an_nlb_publishing_its_own_hostname_is_not_a_kind_change(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    """moto names NLBs like Classic ELBs: the hostname check is confirmed with AWS."""
    svc = service(annotations={P + "type": "nlb"})
    status = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    svc["status"] = {"loadBalancer": {"ingress": [{"hostname": status.ingress[0].hostname}]}}
    assert lb_of(cloud).ensure_load_balancer("k", svc, nodes(world)) == status


def test_deleting_a_service_removes_the_nlb_an_earlier_kccm_made_without_the_annotation(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = service(annotations={P + "type": "nlb"})
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    svc["metadata"]["annotations"] = {}
    lb_of(cloud).ensure_load_balancer_deleted("k", svc)
    _, elbv2 = clients(world.url)
    assert [
        lb for lb in elbv2.describe_load_balancers()["LoadBalancers"] if lb["VpcId"] == world.vpc_id
    ] == []
    assert group_rules(world.url, node_group) == set()


def test_a_deleted_balancer_whose_group_remains_still_exists_for_the_controller(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    """So that the service controller calls delete again (it asks first, as upstream)."""
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    elb_client(world.url).delete_load_balancer(LoadBalancerName=default_load_balancer_name(svc))
    assert lb.get_load_balancer("k", svc) == (None, True)
    lb.ensure_load_balancer_deleted("k", svc)
    assert lb.get_load_balancer("k", svc) == (None, False)


def test_an_older_kccms_nlb_without_the_annotation_exists_for_the_controller(
    cloud: AWSCloud, world: World
) -> None:
    svc = service(annotations={P + "type": "nlb"})
    lb = lb_of(cloud)
    status = lb.ensure_load_balancer("k", svc, nodes(world))
    svc["metadata"]["annotations"] = {}
    assert lb.get_load_balancer("k", svc) == (status, True)
