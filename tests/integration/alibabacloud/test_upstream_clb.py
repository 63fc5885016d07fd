"""Upstream's manager (cloud-provider-alibaba-cloud v2.14.0, ``--controllers=service``) balancing a
Service on kccm's Alibaba Cloud emulator and the real apiserver (issue 38): the emulator's SLB is
judged by the binary it imitates. Upstream finds no balancer (by tag, then by name), creates one,
a vServer group of the Ready Nodes on the node port and a TCP listener it starts, and publishes
the balancer's address; kccm's provider, given the same Service and Nodes, then finds nothing to
change (it reads what upstream wrote as its own); deleting the Service removes the balancer.

Upstream is pointed at the emulator by ``ECS_ENDPOINT``/``VPC_ENDPOINT``/``SLB_ENDPOINT``
(host only, ``pkg/provider/alibaba/base/clientMgr.go`` ``setCustomizedEndpoint``) and
``ALICLOUD_CLIENT_SCHEME=HTTP`` (``clientCfg``), with the access key in its cloud config."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from alibabacloud_upstream_support import CLUSTER, GLOBAL, VSWITCH, start_manager

from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import build_parts
from kccm.testing.controllers import delete_until_gone, eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.upstream import UpstreamProcesses

pytestmark = pytest.mark.integration


def _service(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


async def _published(kube: KubeApiClient, ns: str, name: str) -> Obj | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
    return svc if ingress else None


def _kccm_ensure(emu: AlibabaEmulator, svc: Obj, nodes: list[Obj]) -> str:
    text = "Global:\n" + "".join(f"  {k}: {v!r}\n" for k, v in GLOBAL.items())
    parts = build_parts(load_alibaba_config(text), emu.endpoint_env())
    with collect_service_warnings():
        status = parts.balancers.ensure_load_balancer("kubernetes", svc, nodes)
    return status.ingress[0].ip


def _writes(emu: AlibabaEmulator, since: int = 0) -> Counter[str]:
    return Counter(r["action"] for r in emu.admin.mutating(since))


async def test_upstream_balances_a_service_kccm_finds_nothing_to_change_deletion_clears(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    instances: list[str],
) -> None:
    ns = kube_namespace
    manager = start_manager(
        upstream, emu, control_plane, "service", ["--configure-cloud-routes=false"]
    )
    await kube.create(SERVICES, _service("web"), namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "web"), within=120)
    ip = svc["status"]["loadBalancer"]["ingress"][0]["ip"]
    manager.alive()

    (lb_id,) = emu.state()["balancers"]
    lb = emu.admin.balancer(lb_id)
    assert lb["Address"] == ip
    tags = {t["TagKey"]: t["TagValue"] for t in lb["Tags"]["Tag"]}
    assert tags["kubernetes.do.not.delete"] == lb["LoadBalancerName"]
    (listener,) = lb["Listeners"]
    assert (listener["ListenerPort"], listener["ListenerProtocol"]) == (80, "tcp")
    assert listener["Status"] == "running"
    node_port = svc["spec"]["ports"][0]["nodePort"]
    (group,) = lb["VServerGroups"]
    assert group["VServerGroupName"] == f"k8s/{node_port}/web/{ns}/{CLUSTER}"
    members = sorted((m["ServerId"], m["Port"]) for m in group["BackendServers"])
    assert members == sorted((i, node_port) for i in instances)
    assert _writes(emu) == Counter(
        {
            "CreateLoadBalancer": 1,
            "CreateVServerGroup": 1,
            "AddVServerGroupBackendServers": 1,
            "CreateLoadBalancerTCPListener": 1,
            "StartLoadBalancerListener": 1,
        }
    )

    since = emu.admin.last_seq()
    nodes = [await kube.get(NODES, i) for i in instances]
    assert await asyncio.to_thread(_kccm_ensure, emu, svc, nodes) == ip
    assert _writes(emu, since) == Counter()

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
    assert emu.state()["balancers"] == []
    manager.alive()


A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
SHAPES: dict[
    str, tuple[dict[str, str], list[dict[str, Any]], set[tuple[int, str]], dict[str, Any]]
] = {
    "tcp-and-udp": (
        {},
        [
            {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"},
        ],
        {(80, "tcp"), (53, "udp")},
        {"AddressType": "internet"},
    ),
    "tcp-with-scheduler-and-health-check": (
        {
            f"{A}scheduler": "wrr",
            f"{A}health-check-connect-timeout": "8",
            f"{A}healthy-threshold": "4",
            f"{A}unhealthy-threshold": "4",
            f"{A}health-check-interval": "3",
            f"{A}persistence-timeout": "1000",
            f"{A}bandwidth": "50",
            f"{A}charge-type": "paybybandwidth",
        },
        [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        {(80, "tcp")},
        {
            "Scheduler": "wrr",
            "HealthCheckConnectTimeout": 8,
            "HealthyThreshold": 4,
            "PersistenceTimeout": 1000,
            "InternetChargeType": "paybybandwidth",
            "Bandwidth": 50,
        },
    ),
    "http-listener": (
        {
            f"{A}protocol-port": "http:80",
            f"{A}health-check-flag": "on",
            f"{A}health-check-type": "http",
            f"{A}health-check-uri": "/healthz",
            f"{A}sticky-session": "on",
            f"{A}sticky-session-type": "insert",
            f"{A}cookie-timeout": "1800",
        },
        [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        {(80, "http")},
        {"HealthCheck": "on", "HealthCheckURI": "/healthz", "StickySessionType": "insert"},
    ),
    "https-listener": (
        {f"{A}protocol-port": "https:443", f"{A}cert-id": "cert-emu-1"},
        [{"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"}],
        {(443, "https")},
        {"ServerCertificateId": "cert-emu-1"},
    ),
    "intranet-with-delete-protection-off": (
        {f"{A}address-type": "intranet", f"{A}delete-protection": "off"},
        [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        {(80, "tcp")},
        {"AddressType": "intranet", "DeleteProtection": "off", "VSwitchId": VSWITCH},
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
async def test_kccm_adopts_what_upstream_made_for_each_shape_without_a_write(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    instances: list[str],
    shape: str,
) -> None:
    """Upstream's balancer for a Service of this shape, each listener running; kccm's ensure
    of the same Service then makes no write (it reads upstream's listener fields, health
    checks, protections and charge type as what it wants)."""
    annotations, ports, listeners, fields = SHAPES[shape]
    ns = kube_namespace
    manager = start_manager(
        upstream, emu, control_plane, "service", ["--configure-cloud-routes=false"]
    )
    service = _service("web")
    service["metadata"]["annotations"] = annotations
    service["spec"]["ports"] = ports
    await kube.create(SERVICES, service, namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "web"), within=120)
    manager.alive()
    (lb_id,) = emu.state()["balancers"]
    made = emu.admin.balancer(lb_id)
    assert {(i["ListenerPort"], i["ListenerProtocol"]) for i in made["Listeners"]} == listeners
    assert {i["Status"] for i in made["Listeners"]} == {"running"}
    first = made["Listeners"][-1]
    config = next(v for k, v in first.items() if k.endswith("ListenerConfig"))
    # the balancer's own Bandwidth is the internet spec's; the listener's is in its config
    seen = {**first, **config, **{k: v for k, v in made.items() if k != "Listeners"}}
    assert {k: seen.get(k) for k in fields} == fields

    since = emu.admin.last_seq()
    nodes = [await kube.get(NODES, i) for i in instances]
    ip = svc["status"]["loadBalancer"]["ingress"][0]["ip"]
    assert await asyncio.to_thread(_kccm_ensure, emu, svc, nodes) == ip
    assert _writes(emu, since) == Counter()

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
    assert emu.state()["balancers"] == []


def _members_of(emu: AlibabaEmulator) -> set[str]:
    (lb_id,) = emu.state()["balancers"]
    lb = emu.admin.balancer(lb_id)
    return {m["ServerId"] for g in lb["VServerGroups"] for m in g["BackendServers"]}


def _listener_ports(emu: AlibabaEmulator) -> set[tuple[int, str]]:
    (lb_id,) = emu.state()["balancers"]
    listeners = emu.admin.balancer(lb_id)["Listeners"]
    return {(i["ListenerPort"], i["Status"]) for i in listeners}


async def test_upstream_follows_a_node_leaving_and_a_port_change(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    instances: list[str],
) -> None:
    """A Node deleted leaves the vServer group (``RemoveVServerGroupBackendServers`` with
    upstream's lower-case member keys); the Service's port changed from 80 to 8080 moves the
    listener; kccm then finds nothing to change."""
    ns = kube_namespace
    manager = start_manager(
        upstream, emu, control_plane, "service", ["--configure-cloud-routes=false"]
    )
    await kube.create(SERVICES, _service("web"), namespace=ns)
    await eventually(lambda: _published(kube, ns, "web"), within=120)

    async def members_are(wanted: set[str]) -> bool:
        return await asyncio.to_thread(_members_of, emu) == wanted

    async def listeners_are(wanted: set[tuple[int, str]]) -> bool:
        return await asyncio.to_thread(_listener_ports, emu) == wanted

    await eventually(lambda: members_are(set(instances)), within=120)
    await delete_until_gone(kube, NODES, instances[1:], within=120)
    await eventually(lambda: members_are(set(instances[:1])), within=120)
    assert "RemoveVServerGroupBackendServers" in _writes(emu)

    port = [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]
    await kube.patch(
        SERVICES, "web", {"spec": {"ports": port}}, patch_type=PatchType.MERGE, namespace=ns
    )
    await eventually(lambda: listeners_are({(8080, "running")}), within=120)
    manager.alive()

    since = emu.admin.last_seq()
    svc = await kube.get(SERVICES, "web", namespace=ns)
    nodes = [await kube.get(NODES, instances[0])]
    await asyncio.to_thread(_kccm_ensure, emu, svc, nodes)
    assert _writes(emu, since) == Counter()

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
    assert emu.state()["balancers"] == []


def _certificate(emu: AlibabaEmulator) -> str:
    (lb_id,) = emu.state()["balancers"]
    (listener,) = emu.admin.balancer(lb_id)["Listeners"]
    return str(listener["HTTPSListenerConfig"]["ServerCertificateId"])


async def test_upstream_refuses_an_expired_certificate_and_takes_a_valid_one(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    instances: list[str],
) -> None:
    """``checkCertValidity`` (``clbv1/listeners.go``) reads both certificates with
    ``DescribeServerCertificates`` before changing an HTTPS listener's: an expired one is
    refused (the listener keeps its certificate), a valid one is set; kccm then finds nothing
    to change."""
    ns, year_ms = kube_namespace, 365 * 24 * 3600 * 1000
    now_ms = int(time.time() * 1000)
    certs = {"cert-old": now_ms + year_ms, "cert-expired": now_ms - year_ms}
    certs["cert-new"] = now_ms + 2 * year_ms
    for cert, expiry in certs.items():
        emu.admin.add_certificate(cert, expire_ms=expiry)
    manager = start_manager(
        upstream, emu, control_plane, "service", ["--configure-cloud-routes=false"]
    )
    try:
        service = _service("web")
        service["metadata"]["annotations"] = {
            f"{A}protocol-port": "https:443",
            f"{A}cert-id": "cert-old",
        }
        service["spec"]["ports"] = [{"name": "https", "port": 443, "protocol": "TCP"}]
        await kube.create(SERVICES, service, namespace=ns)
        await eventually(lambda: _published(kube, ns, "web"), within=120)

        async def annotate(cert: str) -> None:
            patch = {"metadata": {"annotations": {f"{A}cert-id": cert}}}
            await kube.patch(SERVICES, "web", patch, namespace=ns)

        await annotate("cert-expired")
        await eventually(lambda: manager.logged("because it is expired"), within=120)
        assert await asyncio.to_thread(_certificate, emu) == "cert-old"
        await annotate("cert-new")

        async def certificate_is(cert: str) -> bool:
            return await asyncio.to_thread(_certificate, emu) == cert

        await eventually(lambda: certificate_is("cert-new"), within=120)
        since = emu.admin.last_seq()
        svc = await kube.get(SERVICES, "web", namespace=ns)
        nodes = [await kube.get(NODES, i) for i in instances]
        await asyncio.to_thread(_kccm_ensure, emu, svc, nodes)
        assert _writes(emu, since) == Counter()
        await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
    finally:
        for cert in certs:
            emu.admin.delete_certificate(cert)
