"""kccm's daemon (``--cloud-provider=alibabacloud``, the shipped ServiceAccount and RBAC) on the
Alibaba Cloud emulator and the real apiserver, end to end (issue 38): two kubelet Nodes of ECS
instances are initialised (taint gone, instance type and zone labels), get pod CIDRs and a VPC
route each to their instance; a LoadBalancer Service gets a CLB whose address it publishes,
with its Nodes as members; an ``externalTrafficPolicy: Local`` Service's group holds only the
Node running its endpoint, and follows the endpoint to the other Node (the EndpointsUser seam,
upstream clbv1 ``buildLocalBackends``); deleting the Services deletes the balancers; a Service
of class ``alibabacloud.com/nlb`` (served without ``--load-balancer-class``) gets an NLB whose
DNS name it publishes, follows a port change and leaves nothing when deleted; deleting the
Nodes takes their routes; the daemon stops within its grace and the emulator is as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import default_load_balancer_name
from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import PatchType
from kccm.kube.resources import ENDPOINT_SLICES, NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import apply_rbac
from kccm.testing.daemonworld import (
    blocking,
    ingress_ip,
    lb_service,
    patient,
    start_world_daemon,
)
from kccm.testing.kubelet import kubelet_node

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
VPC, VSWITCH, CLUSTER = "vpc-e2e", "vsw-e2e", "kccm-ali-e2e"
CONFIG = {
    "region": "cn-hangzhou",
    "vpcid": VPC,
    "vswitchid": VSWITCH,
    "accessKeyID": "a2NjbS1haw==",  # base64 of the emulator's default key, as upstream's
    "accessKeySecret": "a2NjbS1zZWNyZXQ=",
    "clusterID": CLUSTER,
}


def _node(instance: dict[str, Any], index: int) -> dict[str, Any]:
    node = kubelet_node(instance["InstanceId"], f"10.244.{index}.0/24")
    node["spec"]["providerID"] = f"cn-hangzhou.{instance['InstanceId']}"
    return node


def _routes(emu: AlibabaEmulator, table: str) -> set[str]:
    return {e for e in emu.state()["route_entries"] if e.startswith(f"{table}:")}


async def _until(check: Any) -> Any:
    async def probe() -> Any:
        return await blocking(check)

    return await patient(probe)


def _endpoints(node: str) -> dict[str, Any]:
    """The Local Service's one endpoint, on ``node`` (no selector: no controller writes it)."""
    return {
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.7"], "nodeName": node, "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def _members(emu: AlibabaEmulator, name: str) -> set[str] | None:
    """The members of the balancer named ``name`` (None while it does not exist)."""
    for lb_id in emu.state()["balancers"]:
        lb = emu.admin.balancer(lb_id)
        if lb["LoadBalancerName"] == name:
            return {m["ServerId"] for g in lb["VServerGroups"] for m in g["BackendServers"]}
    return None


async def _local_follows_its_endpoint(
    emu: AlibabaEmulator, kube: KubeApiClient, ns: str, names: list[str]
) -> None:
    meta = {"name": "local-1", "labels": {"kubernetes.io/service-name": "local"}}
    await kube.create(ENDPOINT_SLICES, {"metadata": meta, **_endpoints(names[0])}, namespace=ns)
    created = await kube.create(
        SERVICES, lb_service("local", externalTrafficPolicy="Local"), namespace=ns
    )
    lb_name = default_load_balancer_name(created)
    await _until(lambda: _members(emu, lb_name) == {names[0]})
    moved = _endpoints(names[1])
    await kube.patch(ENDPOINT_SLICES, "local-1", moved, namespace=ns, patch_type=PatchType.MERGE)
    await _until(lambda: _members(emu, lb_name) == {names[1]})
    await delete_until_gone(kube, SERVICES, ["local"], ns, within=120)
    await _until(lambda: _members(emu, lb_name) is None)
    await kube.delete(ENDPOINT_SLICES, "local-1", namespace=ns)


NLB_KINDS = ("nlb_balancers", "nlb_listeners", "nlb_server_groups", "nlb_servers")


def _nlb_shape(emu: AlibabaEmulator) -> tuple[list[int], set[str]] | None:
    """The one NLB's listener ports and server IDs (``None`` while there is none)."""
    found = emu.state()["nlb_balancers"]
    if len(found) != 1:
        return None
    lb = emu.admin.nlb(found[0])
    servers = {s["ServerId"] for g in lb["ServerGroups"] for s in g["Servers"]}
    return sorted(i["ListenerPort"] for i in lb["Listeners"]), servers


async def _hostname(kube: KubeApiClient, ns: str, name: str) -> str | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return str(ingress[0]["hostname"]) if ingress and ingress[0].get("hostname") else None


async def _nlb_service(
    emu: AlibabaEmulator, kube: KubeApiClient, ns: str, names: list[str]
) -> None:
    """An NLB Service: made, its port changed, deleted; the emulator's NLB kinds end empty."""
    emu.admin.set_job_reads(0)  # jobs settle at once: kccm's waits cost no sleep here
    zones = f"cn-hangzhou-h:{VSWITCH},cn-hangzhou-i:{VSWITCH}-i"
    nlb = lb_service(
        "fast",
        annotations={"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-zone-maps": zones},
        loadBalancerClass="alibabacloud.com/nlb",
    )
    await kube.create(SERVICES, nlb, namespace=ns)
    hostname = await patient(lambda: _hostname(kube, ns, "fast"))
    (lb_id,) = emu.state()["nlb_balancers"]
    assert emu.admin.nlb(lb_id)["DNSName"] == hostname
    await _until(lambda: _nlb_shape(emu) == ([80], set(names)))
    port = {"spec": {"ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}}
    await kube.patch(SERVICES, "fast", port, patch_type=PatchType.MERGE, namespace=ns)
    await _until(lambda: _nlb_shape(emu) == ([8080], set(names)))
    await delete_until_gone(kube, SERVICES, ["fast"], ns, within=120)
    await _until(lambda: not any(emu.state()[k] for k in NLB_KINDS))


async def test_the_daemon_initialises_routes_and_balances_on_the_emulator(
    control_plane: ControlPlane, kube: KubeApiClient, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    with alibaba_emulator() as emu:
        baseline = emu.state()
        instances = [
            emu.admin.add_instance(
                vpc=VPC,
                vswitch=VSWITCH,
                private_ip=f"10.0.5.{i + 1}",
                instance_type="ecs.g7.xlarge",
            )
            for i in range(2)
        ]
        table = emu.admin.add_route_table(VPC)
        names = [i["InstanceId"] for i in instances]
        config = tmp_path / "cloud-config.yaml"
        config.write_text(json.dumps({"Global": CONFIG}))
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-alibabacloud-e2e")
        daemons, daemon = start_world_daemon(
            "alibabacloud",
            config,
            control_plane,
            tmp_path,
            cluster=CLUSTER,
            allocate_node_cidrs=False,
            env=emu.endpoint_env(),
        )
        try:
            for index, instance in enumerate(instances):
                await kube.create(NODES, _node(instance, index))
            nodes = await patient(lambda: initialised_nodes(kube, names))
            labels = nodes[0]["metadata"]["labels"]
            assert labels["node.kubernetes.io/instance-type"] == "ecs.g7.xlarge"
            wanted = {f"{table}:10.244.{i}.0/24:{n}" for i, n in enumerate(names)}
            await _until(lambda: _routes(emu, table) == wanted)

            await kube.create(SERVICES, lb_service("web"), namespace=ns)
            ip = await patient(lambda: ingress_ip(kube, ns, "web"))
            (lb_id,) = emu.state()["balancers"]
            lb = emu.admin.balancer(lb_id)
            assert lb["Address"] == ip
            members = {m["ServerId"] for g in lb["VServerGroups"] for m in g["BackendServers"]}
            assert members == set(names)
            await _local_follows_its_endpoint(emu, kube, ns, names)

            await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
            await _until(lambda: emu.state()["balancers"] == [])
            await _nlb_service(emu, kube, ns, names)
            await delete_until_gone(kube, NODES, names, within=120)
            await _until(lambda: _routes(emu, table) == set())
        finally:
            daemons.stop_all(grace=30)
            emu.admin.delete_route_table(table)
            for name in names:
                emu.admin.delete_instance(name)
        emu.assert_clean(baseline)
        assert daemon.proc.returncode == 0, "kccm did not finish its in-flight work in 30 s"
