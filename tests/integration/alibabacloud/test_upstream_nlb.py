"""Upstream's manager (cloud-provider-alibaba-cloud v2.14.0, ``--controllers=nlb``) balancing a
Service of class ``alibabacloud.com/nlb`` on kccm's Alibaba Cloud emulator and the real
apiserver (issue 38): the emulator's NLB judged by the binary it imitates, in one manager run.

Upstream (``pkg/controller/service/nlbv2``, ``pkg/provider/alibaba/nlb``) finds no NLB (by tag,
then by name), creates one in the zones of the ``zone-maps`` annotation, a server group of the
Ready Nodes on the node port and a TCP listener, waits for their jobs (``GetJobStatus``) and
publishes the NLB's DNS name; kccm's provider, given the same Service and Nodes, adopts it
with no write; upstream follows a Node leaving and a port change; deleting the Service
leaves nothing. Upstream is pointed at the emulator by ``NLB_ENDPOINT``
(``pkg/provider/alibaba/base/clientMgr.go``) and ``ALICLOUD_CLIENT_SCHEME=HTTP``.

Jobs settle on their first read here (upstream sleeps 3 s, 1.2 s or 20 s between polls), but
the listener's answers ``Processing`` first, which upstream waits out; the first
``CreateServerGroup`` is throttled (``Throttling.User``), which upstream retries a second
later (``retryOnThrottling``)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from alibabacloud_upstream_support import CLUSTER, GLOBAL, VPC, VSWITCH, start_manager

from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import build_parts
from kccm.testing.controllers import delete_until_gone, eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.upstream import UpstreamProcess, UpstreamProcesses

pytestmark = pytest.mark.integration

A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
HASH = "service.beta.kubernetes.io/hash"
ZONES = f"cn-hangzhou-h:{VSWITCH},cn-hangzhou-i:vsw-kccm-i"


ANNOTATED = {
    f"{A}address-type": "intranet",
    f"{A}scheduler": "sch",
    f"{A}health-check-flag": "on",
    f"{A}health-check-type": "tcp",
    f"{A}health-check-connect-port": "53",
    f"{A}healthy-threshold": "3",
    f"{A}unhealthy-threshold": "4",
    f"{A}health-check-interval": "5",
    f"{A}health-check-connect-timeout": "4",
    f"{A}idle-timeout": "60",
    f"{A}cps": "100",
    f"{A}connection-drain": "on",
    f"{A}connection-drain-timeout": "30",
    f"{A}preserve-client-ip": "off",
    f"{A}security-group-ids": "sg-kccm-1",
    f"{A}cross-zone-enabled": "off",
}
"""The second Service's annotations: every field they set must read back as upstream wrote it
(a reconcile of the unchanged Service then writes nothing)."""
DNS_PORTS = [
    {"name": "dns-tcp", "port": 53, "targetPort": 53, "protocol": "TCP"},
    {"name": "dns-udp", "port": 53, "targetPort": 53, "protocol": "UDP"},
]


def _service(name: str, annotations: dict[str, str] | None = None, ports: Any = None) -> Obj:
    return {
        "metadata": {"name": name, "annotations": {f"{A}zone-maps": ZONES, **(annotations or {})}},
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": "alibabacloud.com/nlb",
            "selector": {"app": name},
            "ports": ports or [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


async def _published(
    kube: KubeApiClient, ns: str, name: str, manager: UpstreamProcess
) -> Obj | None:
    manager.alive()
    svc = await kube.get(SERVICES, name, namespace=ns)
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
    return svc if ingress else None


async def _poked(kube: KubeApiClient, ns: str, name: str, manager: UpstreamProcess) -> None:
    """An annotation upstream does not read: it reconciles the Service again (its hash label
    changes when it is done)."""
    labelled = await kube.get(SERVICES, name, namespace=ns)
    before = labelled["metadata"]["labels"][HASH]
    patch = {"metadata": {"annotations": {"kccm.test/poke": "1"}}}
    await kube.patch(SERVICES, name, patch, namespace=ns)

    async def rehashed() -> bool:
        manager.alive()
        svc = await kube.get(SERVICES, name, namespace=ns)
        return bool(svc["metadata"]["labels"][HASH] != before)

    await eventually(rehashed, within=120)


def _kccm_ensure(emu: AlibabaEmulator, svc: Obj, nodes: list[Obj]) -> str:
    """kccm's provider, given the Service and Nodes upstream balanced (adoption)."""
    text = "Global:\n" + "".join(f"  {k}: {v!r}\n" for k, v in GLOBAL.items())
    parts = build_parts(load_alibaba_config(text), emu.endpoint_env())
    with collect_service_warnings():
        status = parts.balancers.ensure_load_balancer("kubernetes", svc, nodes)
    return str(status.ingress[0].hostname)


def _writes(emu: AlibabaEmulator, since: int = 0) -> Counter[str]:
    return Counter(r["action"] for r in emu.admin.mutating(since) if r["service"] == "nlb")


def _the_nlb(emu: AlibabaEmulator, svc: Obj | None = None) -> dict[str, Any]:
    """The Service's NLB (by upstream's label on it), or the only one."""
    if svc is not None:
        return emu.admin.nlb(svc["metadata"]["labels"]["service.k8s.alibaba/loadbalancer-id"])
    (lb_id,) = emu.state()["nlb_balancers"]
    return emu.admin.nlb(lb_id)


def _shape(emu: AlibabaEmulator) -> tuple[set[tuple[int, str, str]], set[tuple[str, int]]]:
    """The NLB's (port, protocol, status) listeners and the (server, port) of its groups."""
    lb = _the_nlb(emu)
    listeners = {
        (i["ListenerPort"], i["ListenerProtocol"], i["ListenerStatus"]) for i in lb["Listeners"]
    }
    servers = {(s["ServerId"], s["Port"]) for g in lb["ServerGroups"] for s in g["Servers"]}
    return listeners, servers


async def _shaped(emu: AlibabaEmulator, listeners: set[Any], servers: set[Any]) -> bool:
    return await asyncio.to_thread(_shape, emu) == (listeners, servers)


def _made_as_upstream_makes_it(
    emu: AlibabaEmulator, svc: Obj, ns: str, instances: list[str]
) -> None:
    lb = _the_nlb(emu, svc)
    ingress = svc["status"]["loadBalancer"]["ingress"][0]
    assert ingress["hostname"] == lb["DNSName"]
    assert (lb["LoadBalancerStatus"], lb["AddressType"], lb["VpcId"]) == ("Active", "Internet", VPC)
    assert [(z["ZoneId"], z["VSwitchId"]) for z in lb["ZoneMappings"]] == [
        tuple(z.split(":")) for z in ZONES.split(",")
    ]
    assert {t["Key"]: t["Value"] for t in lb["Tags"]}["kubernetes.do.not.delete"] == lb[
        "LoadBalancerName"
    ]
    node_port = svc["spec"]["ports"][0]["nodePort"]
    (listener,) = lb["Listeners"]
    assert listener["ListenerDescription"] == f"k8s.80.TCP.web.{ns}.{CLUSTER}"
    (group,) = lb["ServerGroups"]
    assert group["ServerGroupName"] == f"k8s.{node_port}.TCP.web.{ns}.{CLUSTER}"
    assert listener["ServerGroupId"] == group["ServerGroupId"]
    assert {(s["ServerId"], s["ServerType"], s["Port"]) for s in group["Servers"]} == {
        (i, "Ecs", node_port) for i in instances
    }


def _annotated_as_sent(emu: AlibabaEmulator, svc: Obj) -> None:
    lb = _the_nlb(emu, svc)
    assert (lb["AddressType"], lb["CrossZoneEnabled"], lb["SecurityGroupIds"]) == (
        "Intranet",
        False,
        ["sg-kccm-1"],
    )
    assert {
        (i["ListenerPort"], i["ListenerProtocol"], i["IdleTimeout"], i.get("Cps"))
        for i in lb["Listeners"]
    } == {
        (53, "TCP", 60, 100),
        (53, "UDP", 60, 100),
    }
    assert {g["Protocol"] for g in lb["ServerGroups"]} == {"TCP", "UDP"}
    for group in lb["ServerGroups"]:
        settings = (
            group["Scheduler"],
            group["ConnectionDrainEnabled"],
            group["ConnectionDrainTimeout"],
        )
        assert (*settings, group["PreserveClientIpEnabled"]) == ("sch", True, 30, False)
        check = group["HealthCheck"]
        assert (check["HealthCheckType"].upper(), check["HealthCheckConnectPort"]) == ("TCP", 53)
        assert [
            check[k]
            for k in (
                "HealthyThreshold",
                "UnhealthyThreshold",
                "HealthCheckInterval",
                "HealthCheckConnectTimeout",
            )
        ] == [3, 4, 5, 4]


async def _annotated_service_phase(
    emu: AlibabaEmulator,
    kube: KubeApiClient,
    ns: str,
    manager: UpstreamProcess,
    instances: list[str],
) -> None:
    """A TCP+UDP Service with the LB, listener and server group annotations: made as annotated,
    left alone by a reconcile and by kccm's provider (adoption), then deleted with its two
    groups."""
    await kube.create(SERVICES, _service("dns", ANNOTATED, DNS_PORTS), namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "dns", manager), within=120)
    _annotated_as_sent(emu, svc)
    since = emu.admin.last_seq()
    await _poked(kube, ns, "dns", manager)
    assert _writes(emu, since) == Counter()
    svc = await kube.get(SERVICES, "dns", namespace=ns)
    nodes = [await kube.get(NODES, i) for i in instances]
    await asyncio.to_thread(_kccm_ensure, emu, svc, nodes)
    assert _writes(emu, since) == Counter(), "kccm rewrote the annotated NLB upstream made"
    since = emu.admin.last_seq()
    await delete_until_gone(kube, SERVICES, ["dns"], ns, within=120)
    await eventually(
        lambda: asyncio.to_thread(lambda: len(emu.state()["nlb_server_groups"]) == 1), within=120
    )
    assert _writes(emu, since) == Counter(
        {"UpdateLoadBalancerProtection": 1, "DeleteLoadBalancer": 1, "DeleteServerGroup": 2}
    )


async def test_upstream_makes_changes_and_removes_an_nlb(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    instances: list[str],
) -> None:
    ns = kube_namespace
    emu.admin.set_job_reads(0)
    emu.admin.fault("nlb:CreateListener", job_reads=1)
    emu.admin.fault(
        "nlb:CreateServerGroup",
        code="Throttling.User",
        message="Request was denied due to user flow control.",
    )
    manager = start_manager(upstream, emu, control_plane, "nlb", ["--configure-cloud-routes=false"])
    await kube.create(SERVICES, _service("web"), namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "web", manager), within=120)
    _made_as_upstream_makes_it(emu, svc, ns, instances)
    assert await manager.logged("OpenAPI CreateServerGroup throttled in this try")
    assert _writes(emu) == Counter(
        {
            "CreateLoadBalancer": 1,
            "CreateServerGroup": 2,
            "AddServersToServerGroup": 1,
            "CreateListener": 1,
        }
    )
    node_port = svc["spec"]["ports"][0]["nodePort"]
    since = emu.admin.last_seq()
    await _poked(kube, ns, "web", manager)
    assert _writes(emu, since) == Counter()
    nodes = [await kube.get(NODES, i) for i in instances]
    hostname = await asyncio.to_thread(_kccm_ensure, emu, svc, nodes)
    assert hostname == svc["status"]["loadBalancer"]["ingress"][0]["hostname"]
    assert _writes(emu, since) == Counter(), "kccm rewrote what upstream made"
    await _annotated_service_phase(emu, kube, ns, manager, instances)

    since = emu.admin.last_seq()
    await delete_until_gone(kube, NODES, instances[1:], within=120)
    await eventually(
        lambda: _shaped(emu, {(80, "TCP", "Running")}, {(instances[0], node_port)}), within=120
    )
    assert _writes(emu, since) == Counter({"RemoveServersFromServerGroup": 1})
    since = emu.admin.last_seq()
    port = [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]
    await kube.patch(
        SERVICES, "web", {"spec": {"ports": port}}, patch_type=PatchType.MERGE, namespace=ns
    )
    await eventually(
        lambda: _shaped(emu, {(8080, "TCP", "Running")}, {(instances[0], node_port)}), within=120
    )
    manager.alive()
    assert _writes(emu, since) == Counter({"DeleteListener": 1, "CreateListener": 1})
    since = emu.admin.last_seq()

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
    await eventually(
        lambda: asyncio.to_thread(lambda: not any(emu.state()[k] for k in NLB_KINDS)), within=120
    )
    manager.alive()
    assert _writes(emu, since) == Counter(
        {"UpdateLoadBalancerProtection": 1, "DeleteLoadBalancer": 1, "DeleteServerGroup": 1}
    )


NLB_KINDS = ("nlb_balancers", "nlb_listeners", "nlb_server_groups", "nlb_servers")
