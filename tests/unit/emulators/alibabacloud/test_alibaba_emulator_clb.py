"""kccm's classic load balancers (the ``alibabacloud`` provider's CLB) over the emulator's SLB,
signed and over HTTP as the daemon sends them: a Service gets a tagged, protected balancer, a
running listener per port and a vServer group of its nodes; an unchanged Service (and a
restarted provider) makes no write; a port, a node and a node port change; deletion leaves
nothing; the EIP and health reads."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from alibaba_emu_support import parts, seeded

from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers

A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
UID = "5f0c7f52-41a3-4e0b-9a5e-3d2f4c1b7e6a"
NAME_TAG = "kubernetes.do.not.delete"


def node(instance: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": instance["InstanceId"]},
        "spec": {"providerID": f"cn-hangzhou.{instance['InstanceId']}"},
    }


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
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}],
            **spec,
        },
    }


@pytest.fixture
def nodes(clean: AlibabaEmulator) -> Iterator[list[dict[str, Any]]]:
    first, second = seeded(clean, "10.0.1.1"), seeded(clean, "10.0.1.2")
    made = [next(first), next(second)]
    yield [node(i) for i in made]
    for gen in (first, second):
        next(gen, None)


def balancers(emu: AlibabaEmulator) -> ClassicLoadBalancers:
    """A fresh provider: what a restarted daemon has."""
    return parts(emu).balancers


def ensure(lbs: ClassicLoadBalancers, svc: dict[str, Any], nodes: list[dict[str, Any]]) -> str:
    with collect_service_warnings():
        status = lbs.ensure_load_balancer("kubernetes", svc, nodes)
    return status.ingress[0].ip


def the_balancer(emu: AlibabaEmulator) -> dict[str, Any]:
    (lb_id,) = emu.state()["balancers"]
    return emu.admin.balancer(lb_id)


def members(lb: dict[str, Any]) -> list[tuple[str, int]]:
    return sorted(
        (m["ServerId"], m["Port"]) for g in lb["VServerGroups"] for m in g["BackendServers"]
    )


def listeners(lb: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(i["ListenerPort"], i["ListenerProtocol"], i["Status"]) for i in lb["Listeners"]]


def delete(emu: AlibabaEmulator, svc: dict[str, Any]) -> None:
    balancers(emu).ensure_load_balancer_deleted("kubernetes", svc)


def test_a_service_gets_a_tagged_protected_balancer_and_a_running_listener(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]]
) -> None:
    svc = service()
    ip = ensure(balancers(clean), svc, nodes)
    lb = the_balancer(clean)
    try:
        assert ip == lb["Address"]
        tags = {t["TagKey"]: t["TagValue"] for t in lb["Tags"]["Tag"]}
        assert tags[NAME_TAG] == lb["LoadBalancerName"]
        assert (lb["DeleteProtection"], lb["ModificationProtectionStatus"]) == (
            "on",
            "ConsoleProtection",
        )
        assert listeners(lb) == [(80, "tcp", "running")]
        ids = sorted(n["spec"]["providerID"].split(".", 1)[1] for n in nodes)
        assert members(lb) == [(i, 30080) for i in ids]
    finally:
        delete(clean, svc)


def test_an_unchanged_service_and_a_restarted_provider_make_no_write(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]]
) -> None:
    svc = service()
    lbs = balancers(clean)
    ensure(lbs, svc, nodes)
    try:
        since = clean.admin.last_seq()
        ensure(lbs, svc, nodes)
        ensure(balancers(clean), svc, nodes)
        assert clean.admin.mutating(since) == []
    finally:
        delete(clean, svc)


def _add_port(svc: dict[str, Any]) -> None:
    svc["spec"]["ports"].append({"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053})


def _drop_node(svc: dict[str, Any]) -> None:
    """(the node list shrinks: see ``CHANGES``)"""


def _new_node_port(svc: dict[str, Any]) -> None:
    svc["spec"]["ports"][0]["nodePort"] = 30081


CHANGES = {
    "a-udp-port-added": (
        _add_port,
        2,
        [(53, "udp", "running"), (80, "tcp", "running")],
        {30053, 30080},
    ),
    "a-node-gone": (_drop_node, 1, [(80, "tcp", "running")], {30080}),
    "a-new-node-port": (_new_node_port, 2, [(80, "tcp", "running")], {30081}),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_changed_service_is_followed_then_settles(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]], change: str
) -> None:
    edit, node_count, want_listeners, node_ports = CHANGES[change]
    svc = service()
    ensure(balancers(clean), svc, nodes)
    try:
        changed = copy.deepcopy(svc)
        edit(changed)
        ensure(balancers(clean), changed, nodes[:node_count])
        lb = the_balancer(clean)
        assert listeners(lb) == want_listeners
        assert {port for _, port in members(lb)} == node_ports
        assert len({server for server, _ in members(lb)}) == node_count
        since = clean.admin.last_seq()
        ensure(balancers(clean), changed, nodes[:node_count])
        assert clean.admin.mutating(since) == []
    finally:
        delete(clean, svc)


def test_deletion_turns_protection_off_and_leaves_nothing(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]]
) -> None:
    svc = service()
    ensure(balancers(clean), svc, nodes)
    since = clean.admin.last_seq()
    delete(clean, svc)
    writes = [r["action"] for r in clean.admin.mutating(since)]
    assert writes == ["SetLoadBalancerDeleteProtection", "DeleteLoadBalancer"]
    assert clean.state()["balancers"] == []
    delete(clean, svc)  # already gone: nothing to do
    assert clean.admin.mutating(since + len(writes) + 10) == []


def test_an_https_listener_gets_its_certificate_and_settles(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]]
) -> None:
    svc = service(
        {f"{A}protocol-port": "https:443", f"{A}cert-id": "cert-1"},
        ports=[{"name": "https", "port": 443, "protocol": "TCP", "nodePort": 30443}],
    )
    ensure(balancers(clean), svc, nodes)
    try:
        (item,) = the_balancer(clean)["Listeners"]
        assert (item["ListenerProtocol"], item["Status"]) == ("https", "running")
        assert item["HTTPSListenerConfig"]["ServerCertificateId"] == "cert-1"
        since = clean.admin.last_seq()
        ensure(balancers(clean), svc, nodes)
        assert clean.admin.mutating(since) == []
    finally:
        delete(clean, svc)


def test_external_ip_type_eip_reports_the_balancers_eip(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]]
) -> None:
    svc = service({f"{A}external-ip-type": "eip"})
    ensure(balancers(clean), svc, nodes)
    eip = clean.admin.add_eip("39.100.0.7", the_balancer(clean)["LoadBalancerId"])
    try:
        assert ensure(balancers(clean), svc, nodes) == "39.100.0.7"
    finally:
        clean.admin.delete_eip(eip)
        delete(clean, svc)


def test_explain_shows_each_members_health(
    clean: AlibabaEmulator, nodes: list[dict[str, Any]]
) -> None:
    svc = service()
    ensure(balancers(clean), svc, nodes)
    sick = nodes[0]["spec"]["providerID"].split(".", 1)[1]
    clean.admin.set_health(sick, "abnormal")
    try:
        view = balancers(clean).describe_load_balancer("kubernetes", svc)
        assert view is not None
        (listener,) = view.listeners
        health = {t.instance: t.health.name for t in listener.targets}
        assert health[sick] == "UNHEALTHY"
        assert sorted(health.values()) == ["HEALTHY", "UNHEALTHY"]
    finally:
        clean.admin.set_health(sick, "normal")
        delete(clean, svc)
