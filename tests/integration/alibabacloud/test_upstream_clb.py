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
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from alibabacloud_upstream_support import CLUSTER, GLOBAL, VPC, VSWITCH, start_manager

from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import build_parts
from kccm.testing.controllers import delete_until_gone, eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.pytest_plugin import KubeCleanup
from kccm.testing.upstream import UpstreamProcesses

pytestmark = pytest.mark.integration


async def _ready_node(kube: KubeApiClient, cleanup: KubeCleanup, instance: str) -> None:
    cleanup.add(NODES, instance)
    await kube.create(
        NODES, {"metadata": {"name": instance}, "spec": {"providerID": f"cn-hangzhou.{instance}"}}
    )
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}
    await kube.patch(NODES, instance, {"status": {"conditions": [ready]}}, subresource="status")


@pytest.fixture
async def instances(
    emu: AlibabaEmulator, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> AsyncIterator[list[str]]:
    made = [
        emu.admin.add_instance(vpc=VPC, vswitch=VSWITCH, private_ip=f"10.0.3.{i}")["InstanceId"]
        for i in (1, 2)
    ]
    for instance in made:
        await _ready_node(kube, kube_cleanup, instance)
    yield made
    await kube_cleanup.run()
    for instance in made:
        emu.admin.delete_instance(instance)


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
