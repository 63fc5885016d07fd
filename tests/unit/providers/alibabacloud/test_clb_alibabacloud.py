"""Classic load balancers for LoadBalancer Services, over an in-memory SLB at the RPC seam
(upstream pkg/controller/service/clbv1 v2.14.0 is the reference)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from slb_fake import FakeSlb

from kccm.cloudprovider import ImplementedElsewhere, InvalidServiceConfig
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers

A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
NAME = "a1b4e28ba2fa111d2883f0016d3cca427"[:32]
NODES = (
    {"metadata": {"name": "n1"}, "spec": {"providerID": "cn-hangzhou.i-1"}},
    {"metadata": {"name": "n2"}, "spec": {"providerID": "cn-hangzhou.i-2"}},
    {
        "metadata": {
            "name": "n3",
            "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": ""},
        },
        "spec": {"providerID": "cn-hangzhou.i-3"},
    },
    {"metadata": {"name": "pending"}, "spec": {}},
)


def service(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": UID,
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}],
            **spec,
        },
    }


def world(config: str = "") -> tuple[FakeSlb, ClassicLoadBalancers]:
    slb = FakeSlb()
    text = config or "global:\n  clusterID: c1\n  vswitchid: cn-hangzhou-a:vsw-1\n"
    return slb, ClassicLoadBalancers(slb, load_alibaba_config(text), "vpc-1")


def ensure(lbs: ClassicLoadBalancers, svc: dict[str, Any], nodes: Any = NODES) -> str:
    with collect_service_warnings():
        status = lbs.ensure_load_balancer("kubernetes", svc, nodes)
    return status.ingress[0].ip


def the_balancer(slb: FakeSlb) -> dict[str, Any]:
    (lb,) = slb.balancers.values()
    return lb


def test_a_new_service_gets_a_tagged_balancer_listener_and_group() -> None:
    slb, lbs = world()
    ip = ensure(lbs, service())
    lb = the_balancer(slb)
    assert ip == lb["Address"]
    assert lb["LoadBalancerName"] == NAME
    assert lb["tags"] == {"kubernetes.do.not.delete": NAME, "ack.aliyun.com": "c1"}
    assert (lb["AddressType"], lb["DeleteProtection"]) == ("internet", "on")
    assert lb["ModificationProtectionStatus"] == "ConsoleProtection"
    ((group_id, group),) = slb.vgroups.items()
    assert group["name"] == "k8s/30080/web/default/c1"
    assert sorted(group["backends"]) == ["i-1", "i-2"]
    assert {b["Port"] for b in group["backends"].values()} == {30080}
    listener = slb.listeners[lb["LoadBalancerId"]][(80, "tcp")]
    assert listener["Status"] == "running"
    assert listener["Description"] == "k8s/80/web/default/c1"
    assert (listener["VServerGroupId"], listener["Scheduler"]) == (group_id, "rr")


def test_a_second_ensure_makes_no_mutating_call() -> None:
    slb, lbs = world()
    svc = service(
        {
            f"{A}health-check-type": "http",
            f"{A}healthy-threshold": "4",
            f"{A}health-check-interval": "3",
            f"{A}proxy-protocol": "on",
        }
    )
    ensure(lbs, svc)
    slb.calls.clear()
    ensure(lbs, svc)
    assert slb.mutating() == []


def test_a_restarted_kccm_adopts_the_balancer_with_no_mutating_call() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    slb.calls.clear()
    _, fresh = world()
    fresh.api.rpc = slb
    ensure(fresh, service())
    assert slb.mutating() == []


@pytest.mark.parametrize(
    ("change", "calls"),
    [
        pytest.param(
            {f"{A}scheduler": "wrr"}, ["SetLoadBalancerTCPListenerAttribute"], id="scheduler"
        ),
        pytest.param(
            {f"{A}delete-protection": "off"}, ["SetLoadBalancerDeleteProtection"], id="protection"
        ),
        pytest.param({f"{A}name": "mine"}, ["SetLoadBalancerName"], id="name"),
        pytest.param(
            {f"{A}instance-charge-type": "PayBySpec"},
            ["ModifyLoadBalancerInstanceChargeType"],
            id="charge-type",
        ),
        pytest.param({f"{A}spec": "slb.s2.small"}, [], id="spec-ignored-when-paid-by-clcu"),
        pytest.param(
            {f"{A}additional-resource-tags": "team=a,env"}, ["TagResources"], id="extra-tags"
        ),
        pytest.param(
            {f"{A}charge-type": "paybybandwidth", f"{A}bandwidth": "20"},
            ["ModifyLoadBalancerInternetSpec"],
            id="bandwidth",
        ),
    ],
)
def test_a_changed_annotation_makes_exactly_its_call(
    change: dict[str, str], calls: list[str]
) -> None:
    slb, lbs = world()
    ensure(lbs, service())
    slb.calls.clear()
    ensure(lbs, service(change))
    assert slb.mutating() == calls
    slb.calls.clear()
    ensure(lbs, service(change))
    assert slb.mutating() == []


def test_node_changes_touch_only_the_members() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    slb.calls.clear()
    with collect_service_warnings():
        lbs.update_load_balancer("kubernetes", service(), NODES[1:])
    assert slb.mutating() == ["RemoveVServerGroupBackendServers"]
    (group,) = slb.vgroups.values()
    assert sorted(group["backends"]) == ["i-2"]


def test_a_user_member_in_the_group_is_kept() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    (group,) = slb.vgroups.values()
    group["backends"]["i-9"] = {"ServerId": "i-9", "Port": 8080, "Weight": 10, "Type": "ecs"}
    slb.calls.clear()
    ensure(lbs, service(), NODES[1:])
    assert sorted(group["backends"]) == ["i-2", "i-9"]


def test_a_port_change_replaces_listener_and_group() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    ports = [{"port": 443, "protocol": "TCP", "nodePort": 30443}]
    ensure(lbs, service(ports=ports))
    lb_id = the_balancer(slb)["LoadBalancerId"]
    assert list(slb.listeners[lb_id]) == [(443, "tcp")]
    assert [g["name"] for g in slb.vgroups.values()] == ["k8s/30443/web/default/c1"]


@pytest.mark.parametrize(
    ("annotations", "protocol", "expected"),
    [
        pytest.param({}, "udp", {"Bandwidth": "-1"}, id="udp"),
        pytest.param(
            {f"{A}protocol-port": "http:80"},
            "http",
            {"HealthCheck": "off", "StickySession": "off"},
            id="http",
        ),
        pytest.param(
            {f"{A}protocol-port": "https:80", f"{A}cert-id": "cert-1"},
            "https",
            {"ServerCertificateId": "cert-1", "Bandwidth": "-1"},
            id="https",
        ),
        pytest.param(
            {f"{A}acl-status": "on", f"{A}acl-id": "acl-1", f"{A}acl-type": "white"},
            "udp",
            {"AclStatus": "on", "AclId": "acl-1", "AclType": "white"},
            id="acl",
        ),
    ],
)
def test_listener_protocols_and_parameters(
    annotations: dict[str, str], protocol: str, expected: dict[str, str]
) -> None:
    slb, lbs = world()
    own = "UDP" if protocol == "udp" else "TCP"
    ensure(lbs, service(annotations, ports=[{"port": 80, "protocol": own, "nodePort": 30080}]))
    lb_id = the_balancer(slb)["LoadBalancerId"]
    listener = slb.listeners[lb_id][(80, protocol)]
    assert {k: listener[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("annotations", "key"),
    [
        pytest.param({f"{A}healthy-threshold": "three"}, f"{A}healthy-threshold", id="not-int"),
        pytest.param({f"{A}bandwidth": " 5"}, f"{A}bandwidth", id="spaces"),
        pytest.param({f"{A}protocol-port": "ftp:80"}, f"{A}protocol-port", id="protocol"),
        pytest.param(
            {"service.beta.kubernetes.io/backend-type": "eni"},
            "service.beta.kubernetes.io/backend-type",
            id="eni",
        ),
    ],
)
def test_invalid_settings_are_refused_naming_them(annotations: dict[str, str], key: str) -> None:
    slb, lbs = world()
    with pytest.raises(InvalidServiceConfig) as caught:
        ensure(lbs, service(annotations))
    assert caught.value.key == key
    assert slb.mutating() == []


def test_unsupported_annotations_give_a_warning_naming_them() -> None:
    _, lbs = world()
    with collect_service_warnings() as warnings:
        lbs.ensure_load_balancer("kubernetes", service({f"{A}bandwidth-package-id": "9"}), NODES)
    (warning,) = list(warnings)
    assert f"{A}bandwidth-package-id='9'" in warning.message


def test_the_address_type_can_not_change() -> None:
    _, lbs = world()
    ensure(lbs, service())
    with pytest.raises(InvalidServiceConfig):
        ensure(lbs, service({f"{A}address-type": "intranet"}))


def test_an_intranet_balancer_is_made_in_the_vpc_and_vswitch() -> None:
    slb, lbs = world()
    ensure(lbs, service({f"{A}address-type": "intranet"}))
    lb = the_balancer(slb)
    assert (lb["AddressType"], lb["VpcId"], lb["VSwitchId"]) == ("intranet", "vpc-1", "vsw-1")


def test_an_upstream_balancer_found_by_name_is_adopted_and_tagged() -> None:
    slb, lbs = world()
    lb_id = slb.add_balancer(LoadBalancerName=NAME)
    ensure(lbs, service())
    assert list(slb.balancers) == [lb_id]
    assert slb.balancers[lb_id]["tags"] == {"kubernetes.do.not.delete": NAME}


def test_two_balancers_with_the_tag_is_an_error() -> None:
    slb, lbs = world()
    for _ in range(2):
        slb.add_balancer(tags={"kubernetes.do.not.delete": NAME})
    with pytest.raises(Exception, match="multiple"):
        ensure(lbs, service())


def test_deletion_turns_protection_off_and_deletes() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    slb.calls.clear()
    lbs.ensure_load_balancer_deleted("kubernetes", service())
    assert slb.mutating() == ["SetLoadBalancerDeleteProtection", "DeleteLoadBalancer"]
    assert slb.balancers == {}
    slb.calls.clear()
    lbs.ensure_load_balancer_deleted("kubernetes", service())
    assert slb.mutating() == []
    assert lbs.get_load_balancer("kubernetes", service()) == (None, False)


def test_preserve_on_delete_keeps_the_balancer_untagged() -> None:
    slb, lbs = world()
    svc = service({f"{A}preserve-lb-on-delete": "true"})
    ensure(lbs, svc)
    with collect_service_warnings() as warnings:
        lbs.ensure_load_balancer("kubernetes", svc, NODES)
    assert [w.reason for w in warnings] == ["PreservedOnDelete"]
    lbs.ensure_load_balancer_deleted("kubernetes", svc)
    lb = the_balancer(slb)
    assert lb["tags"] == {}
    assert (lb["DeleteProtection"], lb["ModificationProtectionStatus"]) == ("off", "NonProtection")


def reused(slb: FakeSlb, **fields: Any) -> str:
    lb_id = slb.add_balancer(LoadBalancerName="user-lb", **fields)
    slb.listeners[lb_id][(22, "tcp")] = {
        "ListenerPort": 22,
        "ListenerProtocol": "tcp",
        "Description": "ssh",
        "Status": "running",
    }
    return lb_id


@pytest.mark.parametrize(
    ("override", "listeners"),
    [
        pytest.param("false", [(22, "tcp")], id="listeners-kept"),
        pytest.param("true", [(22, "tcp"), (80, "tcp")], id="override"),
    ],
)
def test_a_reused_balancer(override: str, listeners: list[tuple[int, str]]) -> None:
    slb, lbs = world()
    lb_id = reused(slb)
    svc = service({f"{A}id": lb_id, f"{A}force-override-listeners": override})
    ensure(lbs, svc)
    assert sorted(slb.listeners[lb_id]) == listeners
    assert slb.balancers[lb_id]["tags"] == {"kubernetes.reused.by.user": "true"}
    slb.calls.clear()
    ensure(lbs, svc)
    assert slb.mutating() == []
    lbs.ensure_load_balancer_deleted("kubernetes", svc)
    assert list(slb.balancers) == [lb_id]
    assert list(slb.listeners[lb_id]) == [(22, "tcp")]
    assert slb.vgroups == {}


def test_a_balancer_kubernetes_made_can_not_be_reused() -> None:
    slb, lbs = world()
    lb_id = reused(slb, tags={"ack.aliyun.com": "other"})
    with pytest.raises(InvalidServiceConfig, match="can not be reused"):
        ensure(lbs, service({f"{A}id": lb_id}))


def test_the_service_is_not_modified() -> None:
    _, lbs = world()
    svc = service({f"{A}scheduler": "wrr"})
    before = copy.deepcopy(svc)
    ensure(lbs, svc)
    lbs.ensure_load_balancer_deleted("kubernetes", svc)
    assert svc == before


def test_disable_public_slb_refuses_an_internet_balancer() -> None:
    slb, lbs = world("global:\n  disablePublicSLB: true\n")
    with pytest.raises(InvalidServiceConfig, match="disablePublicSLB"):
        ensure(lbs, service())
    ensure(lbs, service({f"{A}address-type": "intranet"}))
    assert the_balancer(slb)["AddressType"] == "intranet"


def test_a_listener_default_changed_in_the_console_is_left_alone() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    lb_id = the_balancer(slb)["LoadBalancerId"]
    slb.listeners[lb_id][(80, "tcp")]["Scheduler"] = "wrr"
    slb.calls.clear()
    ensure(lbs, service())
    assert slb.mutating() == []


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        pytest.param({"loadBalancerSourceRanges": ["10.0.0.0/8"]}, "UnsupportedSourceRanges"),
        pytest.param({"externalTrafficPolicy": "Local"}, "UnsupportedTrafficPolicy"),
    ],
)
def test_spec_fields_kccm_does_not_apply_give_a_warning(spec: dict[str, Any], reason: str) -> None:
    _, lbs = world()
    with collect_service_warnings() as warnings:
        lbs.ensure_load_balancer("kubernetes", service(**spec), NODES)
    assert [w.reason for w in warnings] == [reason]


def test_a_missing_reused_balancer_is_absent_and_an_error_to_ensure() -> None:
    _, lbs = world()
    svc = service({f"{A}id": "lb-gone"})
    assert lbs.get_load_balancer("kubernetes", svc) == (None, False)
    lbs.ensure_load_balancer_deleted("kubernetes", svc)
    with pytest.raises(Exception, match="can not find loadbalancer lb-gone"):
        ensure(lbs, svc)


def test_describe_shows_listeners_members_and_their_health_with_reads_only() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    slb.health["i-2"] = "abnormal"
    slb.calls.clear()
    view = lbs.describe_load_balancer("kubernetes", service())
    assert slb.mutating() == []
    assert view is not None
    (listener,) = view.listeners
    assert (listener.port, listener.protocol) == (80, "TCP")
    health = {t.instance: (t.health.value, t.detail, t.port) for t in listener.targets}
    assert health == {"i-1": ("healthy", "", 30080), "i-2": ("unhealthy", "abnormal", 30080)}
    lbs.ensure_load_balancer_deleted("kubernetes", service())
    assert lbs.describe_load_balancer("kubernetes", service()) is None


@pytest.mark.parametrize(
    ("annotations", "protocol", "expected"),
    [
        pytest.param(
            {f"{A}proxy-protocol": "on", f"{A}health-check-interval": "3"},
            "tcp",
            {"ProxyProtocolV2Enabled": "true", "healthCheckInterval": "3"},
            id="tcp-proxy-protocol-and-the-sdks-spelling",
        ),
        pytest.param(
            {
                f"{A}protocol-port": "https:80",
                f"{A}http2-enabled": "on",
                f"{A}xforwardedfor-proto": "on",
                f"{A}health-check-interval": "3",
            },
            "https",
            {"EnableHttp2": "on", "XForwardedFor_proto": "on", "HealthCheckInterval": "3"},
            id="https",
        ),
    ],
)
def test_listener_creation_parameters_as_sent(
    annotations: dict[str, str], protocol: str, expected: dict[str, str]
) -> None:
    slb, lbs = world()
    ensure(lbs, service(annotations))
    (sent,) = [p for a, p in slb.calls if a == f"CreateLoadBalancer{protocol.upper()}Listener"]
    assert {k: sent.get(k) for k in expected} == expected


def test_hostname_and_ip_annotations() -> None:
    slb, lbs = world()
    svc = service({f"{A}hostname": "web.example", f"{A}ip": "192.168.0.9"})
    with collect_service_warnings():
        status = lbs.ensure_load_balancer("kubernetes", svc, NODES)
    assert status.ingress[0].hostname == "web.example"
    assert the_balancer(slb)["Address"] == "192.168.0.9"
    with pytest.raises(InvalidServiceConfig, match="Address"):
        ensure(lbs, service({f"{A}ip": "192.168.0.10"}))


@pytest.mark.parametrize(
    ("config", "annotations", "raised"),
    [
        pytest.param(
            "", {"service.beta.kubernetes.io/class": "x"}, ImplementedElsewhere, id="class"
        ),
        pytest.param("", {f"{A}tunnel-type": "tunnel"}, ImplementedElsewhere, id="tunnel"),
        pytest.param(
            "global:\n  featureGates: LoadBalancerTypeAnnotation=true\n",
            {f"{A}type": "nlb"},
            InvalidServiceConfig,
            id="nlb-with-the-gate",
        ),
    ],
)
def test_services_for_another_balancer(
    config: str, annotations: dict[str, str], raised: type[Exception]
) -> None:
    slb, lbs = world(config)
    with pytest.raises(raised):
        ensure(lbs, service(annotations))
    assert slb.mutating() == []


def test_the_type_annotation_without_the_gate_is_a_clb() -> None:
    slb, lbs = world()
    ensure(lbs, service({f"{A}type": "nlb"}))
    assert len(slb.balancers) == 1


def test_a_new_balancer_is_paid_by_clcu_unless_asked_by_spec() -> None:
    slb, lbs = world()
    ensure(lbs, service())
    assert the_balancer(slb)["InstanceChargeType"] == "PayByCLCU"
    slb, lbs = world()
    ensure(lbs, service({f"{A}instance-charge-type": "PayBySpec"}))
    lb = the_balancer(slb)
    assert (lb["InstanceChargeType"], lb["LoadBalancerSpec"]) == ("PayBySpec", "slb.s1.small")
    slb.calls.clear()
    ensure(lbs, service({f"{A}instance-charge-type": "PayBySpec", f"{A}spec": "slb.s2.small"}))
    assert slb.mutating() == ["ModifyLoadBalancerInstanceSpec"]


def web_ports(*ports: int) -> list[dict[str, Any]]:
    return [{"port": p, "protocol": "TCP", "nodePort": 30000 + p} for p in ports]


def test_forward_port_redirects_http_after_its_target_exists() -> None:
    slb, lbs = world()
    ann = {
        f"{A}protocol-port": "http:80,https:443",
        f"{A}cert-id": "c",
        f"{A}forward-port": "80:443",
    }
    ensure(lbs, service(ann, ports=web_ports(80, 443)))
    creates = [a for a in slb.actions() if a.startswith("CreateLoadBalancerHTTP")]
    assert creates == ["CreateLoadBalancerHTTPSListener", "CreateLoadBalancerHTTPListener"]
    lb_id = the_balancer(slb)["LoadBalancerId"]
    http = slb.listeners[lb_id][(80, "http")]
    assert (http["ListenerForward"], http["ForwardPort"]) == ("on", "443")
    slb.calls.clear()
    ensure(lbs, service(ann, ports=web_ports(80, 443)))
    assert slb.mutating() == []
    del ann[f"{A}forward-port"]
    ensure(lbs, service(ann, ports=web_ports(80, 443)))
    assert slb.mutating() == [
        "DeleteLoadBalancerListener",
        "CreateLoadBalancerHTTPListener",
        "StartLoadBalancerListener",
    ]
    assert "ListenerForward" not in slb.listeners[lb_id][(80, "http")]


def test_domain_extensions_of_an_https_listener() -> None:
    slb, lbs = world()
    ann = {f"{A}protocol-port": "https:443", f"{A}cert-id": "c0"}
    ports = web_ports(443)
    ensure(lbs, service({**ann, f"{A}domain-extensions": "a.example:c1,b.example:c2"}, ports=ports))
    assert sorted(d[2:] for d in slb.domains.values()) == [("a.example", "c1"), ("b.example", "c2")]
    slb.calls.clear()
    ensure(lbs, service({**ann, f"{A}domain-extensions": "a.example:c1,b.example:c2"}, ports=ports))
    assert slb.mutating() == []
    ensure(lbs, service({**ann, f"{A}domain-extensions": "a.example:c9"}, ports=ports))
    assert sorted(d[2:] for d in slb.domains.values()) == [("a.example", "c9")]
    with pytest.raises(InvalidServiceConfig):
        ensure(lbs, service({**ann, f"{A}domain-extensions": "a.example"}, ports=ports))


def test_external_ip_type_eip_shows_the_balancers_eips() -> None:
    slb, lbs = world()
    svc = service({f"{A}external-ip-type": "eip"})
    with collect_service_warnings() as warnings:
        status = lbs.ensure_load_balancer("kubernetes", svc, NODES)
    lb = the_balancer(slb)
    assert [i.ip for i in status.ingress] == [lb["Address"]]
    assert [w.reason for w in warnings] == ["FailedSetEIPAddress"]
    slb.eips[lb["LoadBalancerId"]] = [f"8.8.0.{i}" for i in range(12)]
    status = lbs.get_load_balancer("kubernetes", svc)[0]
    assert status is not None
    assert [i.ip for i in status.ingress] == [f"8.8.0.{i}" for i in range(12)]


def test_call_counts_for_100_nodes_and_3_ports() -> None:
    """docs/providers/alibabacloud.md, "Scale": what one Service costs."""
    slb, lbs = world()
    nodes = [
        {"metadata": {"name": f"n{i}"}, "spec": {"providerID": f"cn-hangzhou.i-{i:03d}"}}
        for i in range(100)
    ]
    svc = service(ports=web_ports(80, 443, 8080))
    ensure(lbs, svc, nodes)
    writes = slb.mutating()
    assert (
        len(writes) == 1 + 3 * (1 + 3 + 2) + 0
    )  # balancer; per port: group, 3 batches, listener + start
    assert writes.count("AddVServerGroupBackendServers") == 9
    slb.calls.clear()
    ensure(lbs, svc, nodes)
    assert slb.mutating() == []
    assert len(slb.calls) == 7  # by tag, tags, groups, 3 groups' members, listeners
    slb.calls.clear()
    ensure(lbs, svc, nodes[1:])
    assert slb.mutating() == ["RemoveVServerGroupBackendServers"] * 3
