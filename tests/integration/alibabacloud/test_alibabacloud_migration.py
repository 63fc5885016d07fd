"""Migrating from upstream's cloud-provider-alibaba-cloud v2.14.0 to kccm's daemon, on the real
apiserver and kccm's Alibaba Cloud emulator (issue 38, item 4).

Upstream's manager (``--controllers=node,route,service``) makes the cloud a migrating user has:
it initialises two Nodes registered as kubelets with ``--cloud-provider=external`` do (tainted,
with their providerIDs), routes their pod CIDRs in the VPC's table and balances four Services:
an internet CLB with two ports and additional tags (``web``), an intranet one (``inner``), an
HTTP listener with health-check annotations (``http``) and a balancer the user made, given by
``loadbalancer-id`` with ``force-override-listeners`` (``reused``). Once every Service shows its
address, each listener runs with both Nodes as members and the routes are there, upstream is
stopped.

kccm's daemon then starts on the same cloud config as the shipped ServiceAccount and takes over:
it ensures every Service (its start), again after a no-op annotation (a resync), refreshes the
Nodes and reconciles the routes twice, and the emulator's request log shows no mutating call;
every balancer (listeners, groups, members, tags), every route, every Service's address,
finalizer and labels (kccm writes upstream's marks, with the same hash: not one Service write)
and every Node's providerID, labels and addresses are as upstream left them; after the resync
the hash label follows the changed annotations. A port changed on ``inner`` then costs exactly
the writes that move its listener; deleting the Services (no hand edit: kccm removes upstream's
finalizer) leaves
only the user's balancer (without the listeners and groups upstream put on it), deleting the
Nodes takes their routes. The apiserver and the emulator are left as found.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from alibabacloud_upstream_support import CLUSTER, GLOBAL, VPC, VSWITCH, start_manager

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.loadbalancer.marks import (
    CLB_FINALIZER,
    LABEL_LOADBALANCER_ID,
    LABEL_SERVICE_HASH,
)
from kccm.providers.alibabacloud.loadbalancer.servicehash import service_hash
from kccm.providers.alibabacloud.provider import build_parts
from kccm.testing.controllers import delete_until_gone, event_counts, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon, DaemonExited, Daemons, apply_rbac
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup
from kccm.testing.upstream import UpstreamProcesses

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
BUDGET = 180.0
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
CLUSTER_CIDR = "10.244.0.0/16"
SERVICE_CONTROLLER, ENSURED = "service-controller", "EnsuredLoadBalancer"
REUSE_TAG = "kubernetes.reused.by.user"  # helper.REUSEKEY, pkg/controller/helper/service_utils.go
NODE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
)
HTTP = {
    f"{A}protocol-port": "http:80",
    f"{A}health-check-flag": "on",
    f"{A}health-check-type": "http",
    f"{A}health-check-uri": "/healthz",
    f"{A}health-check-connect-port": "8080",
    f"{A}healthy-threshold": "4",
    f"{A}unhealthy-threshold": "4",
    f"{A}health-check-interval": "3",
    f"{A}health-check-timeout": "6",
}


def _port(name: str, port: int, target: int) -> dict[str, Any]:
    return {"name": name, "port": port, "targetPort": target, "protocol": "TCP"}


def _service(name: str, annotations: dict[str, str], *ports: dict[str, Any]) -> Obj:
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "selector": {"app": name}, "ports": list(ports)},
    }


def services_made(reused_lb: str) -> dict[str, Obj]:
    """The Services upstream balances (``reused`` on the balancer the user made)."""
    http = _port("http", 80, 8080)
    return {
        "web": _service(
            "web",
            {f"{A}additional-resource-tags": "team=web,env=migration"},
            http,
            _port("https", 443, 8443),
        ),
        "inner": _service("inner", {f"{A}address-type": "intranet"}, http),
        "http": _service("http", HTTP, http),
        "reused": _service(
            "reused", {f"{A}id": reused_lb, f"{A}force-override-listeners": "true"}, http
        ),
    }


# -- the cloud --------------------------------------------------------------------------------


def _kccm_rpc(emu: AlibabaEmulator) -> Any:
    text = "Global:\n" + "".join(f"  {k}: {v!r}\n" for k, v in GLOBAL.items())
    return build_parts(load_alibaba_config(text), emu.endpoint_env()).rpc


def user_balancer(emu: AlibabaEmulator) -> str:
    """A balancer the user made through the SLB API (no tag): what ``loadbalancer-id`` names."""
    made = _kccm_rpc(emu).call(
        "slb", "CreateLoadBalancer", {"AddressType": "internet", "LoadBalancerName": "user-lb"}
    )
    return str(made["LoadBalancerId"])


def cloud_view(emu: AlibabaEmulator, table: str) -> dict[str, Any]:
    """Every balancer as the emulator holds it (listeners, groups, members, tags) and the
    table's route entries (blocking)."""
    state = emu.admin.state()
    return {
        "balancers": {lb: emu.admin.balancer(lb) for lb in state["balancers"]},
        "routes": sorted(e for e in state["route_entries"] if e.startswith(f"{table}:")),
    }


def _settled_balancer(lb: dict[str, Any], members: set[str]) -> bool:
    listeners = lb["Listeners"]
    groups = lb["VServerGroups"]
    return (
        bool(listeners)
        and all(i["Status"] == "running" for i in listeners)
        and all({m["ServerId"] for m in g["BackendServers"]} == members for g in groups)
    )


def upstream_settled(emu: AlibabaEmulator, table: str, count: int, members: set[str]) -> bool:
    """``count`` balancers, each listener running and each group of ``members``, and a route
    per member (blocking)."""
    view = cloud_view(emu, table)
    balancers = view["balancers"].values()
    return (
        len(balancers) == count
        and all(_settled_balancer(lb, members) for lb in balancers)
        and len(view["routes"]) == len(members)
    )


def calls_by_kind(requests: list[dict[str, Any]]) -> dict[str, int]:
    """``{"<product> <action>": n}`` of the RPC calls (the metadata service's apart)."""
    counts = Counter(
        f"{r['service']} {r['action']}" for r in requests if r["service"] != "metadata"
    )
    return dict(sorted(counts.items()))


def _tags(lb: dict[str, Any]) -> dict[str, str]:
    return {t["TagKey"]: t["TagValue"] for t in (lb.get("Tags") or {}).get("Tag") or []}


def _writes(emu: AlibabaEmulator, since: int) -> Counter[str]:
    return Counter(str(r["action"]) for r in emu.admin.mutating(since))


# -- the cluster ------------------------------------------------------------------------------


def _kubelet(instance: dict[str, Any], index: int) -> Obj:
    """A Node as a kubelet with ``--cloud-provider=external --provider-id`` registers it."""
    node = kubelet_node(instance["InstanceId"], f"10.244.{index}.0/24")
    node["spec"]["providerID"] = f"cn-hangzhou.{instance['InstanceId']}"
    address = instance["VpcAttributes"]["PrivateIpAddress"]["IpAddress"][0]
    node["status"]["addresses"] = [{"type": "InternalIP", "address": address}]
    return node


async def _ingress(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, Any] | None:
    """Each Service's published ingress, once every one has one."""
    found = {}
    for name in names:
        svc = await kube.get(SERVICES, name, namespace=ns)
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
        if not ingress:
            return None
        found[name] = ingress
    return found


async def _node_meta(kube: KubeApiClient, names: list[str]) -> dict[str, Any]:
    found = {}
    for name in names:
        node = await kube.get(NODES, name)
        labels = node["metadata"].get("labels") or {}
        found[name] = {
            "providerID": node["spec"].get("providerID"),
            "labels": {k: labels.get(k) for k in NODE_LABELS},
            "addresses": sorted((a["type"], a["address"]) for a in node["status"]["addresses"]),
            "taints": sorted(t["key"] for t in node["spec"].get("taints") or []),
        }
    return found


async def _ensured(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, int]:
    return {n: (await event_counts(kube, ns, n, SERVICE_CONTROLLER))[ENSURED] for n in names}


# -- kccm -------------------------------------------------------------------------------------


def start_kccm(daemons: Daemons, plane: ControlPlane, config: Path, env: dict[str, str]) -> Daemon:
    """kccm as the shipped ServiceAccount on upstream's cloud config: the cloud node, node
    lifecycle, service and route controllers, short periods, no leader election."""
    return daemons.start(
        "alibabacloud",
        config,
        plane.kubeconfig_for(SA_USER, SA_GROUPS),
        f"--cluster-name={CLUSTER}",
        f"--cluster-cidr={CLUSTER_CIDR}",
        "--allocate-node-cidrs=false",
        "--configure-cloud-routes=true",
        "--leader-elect=false",
        "--node-monitor-period=1s",
        "--node-status-update-frequency=3s",
        "--route-reconciliation-period=2s",
        "--v=2",
        env=env,
    )


def _running(daemon: Daemon) -> None:
    if daemon.proc.poll() is not None:
        raise DaemonExited(f"kccm exited ({daemon.proc.returncode}):\n{daemon.logs()[-3000:]}")


async def synced(
    kube: KubeApiClient, ns: str, before: dict[str, int], daemon: Daemon, nodes: list[str]
) -> bool:
    """kccm ensured every Service once more than ``before``, judged every Node's route in
    two reconciles and refreshed the Nodes' status twice."""
    _running(daemon)
    now = await _ensured(kube, ns, list(before))
    if not all(now[name] > count for name, count in before.items()):
        return False
    logs = await asyncio.to_thread(daemon.logs)
    routes_judged = all(logs.count(f"action for node {n!r} with CIDR") >= 2 for n in nodes)
    return routes_judged and logs.count(" nodes status took ") >= 2


async def _resync_every_service(kube: KubeApiClient, ns: str, names: list[str]) -> None:
    """A no-op annotation on each Service: the service controller ensures it again."""
    patch = {"metadata": {"annotations": {"migration.kccm.test/resync": "1"}}}
    for name in names:
        await kube.patch(SERVICES, name, patch, patch_type=PatchType.MERGE, namespace=ns)


async def _marks(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, Any]:
    """Each Service's finalizers, upstream's labels and resourceVersion."""
    found = {}
    for name in names:
        meta = (await kube.get(SERVICES, name, namespace=ns))["metadata"]
        labels = meta.get("labels") or {}
        found[name] = {
            "finalizers": meta.get("finalizers"),
            "labels": {k: labels.get(k) for k in (LABEL_SERVICE_HASH, LABEL_LOADBALANCER_ID)},
            "resourceVersion": meta["resourceVersion"],
        }
    return found


async def _hashes_follow(kube: KubeApiClient, ns: str, names: list[str]) -> bool:
    """Every Service's hash label is upstream's hash of the Service as it is now."""
    for name in names:
        svc = await kube.get(SERVICES, name, namespace=ns)
        if (svc["metadata"].get("labels") or {}).get(LABEL_SERVICE_HASH) != service_hash(svc):
            return False
    return True


# -- the run ----------------------------------------------------------------------------------


async def test_kccm_takes_over_from_upstream_without_a_write_and_deletes_what_it_owns(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
) -> None:
    ns, admin = kube_namespace, emu.admin
    baseline = admin.state()
    instances = [
        admin.add_instance(vpc=VPC, vswitch=VSWITCH, private_ip=f"10.0.9.{i + 1}") for i in range(2)
    ]
    nodes = [i["InstanceId"] for i in instances]
    table = admin.add_route_table(VPC)
    reused_lb = await asyncio.to_thread(user_balancer, emu)
    made_services = services_made(reused_lb)
    names = list(made_services)
    daemons = Daemons(tmp_path / "kccm")
    (tmp_path / "kccm").mkdir()
    figures: dict[str, Any] = {}
    try:
        # -- upstream makes the cloud ----------------------------------------------------------
        mark = admin.last_seq()
        flags = ["--configure-cloud-routes=true", f"--cluster-cidr={CLUSTER_CIDR}"]
        manager = start_manager(upstream, emu, control_plane, "node,route,service", flags)
        for index, instance in enumerate(instances):
            kube_cleanup.add(NODES, instance["InstanceId"])
            await kube.create(NODES, _kubelet(instance, index))
        await eventually(lambda: initialised_nodes(kube, nodes))
        for body in made_services.values():
            await kube.create(SERVICES, body, namespace=ns)
        ingress = await eventually(lambda: _ingress(kube, ns, names))

        async def settled() -> bool:
            manager.alive()
            count = len(names)  # one balancer each, the reused one included
            return await asyncio.to_thread(upstream_settled, emu, table, count, set(nodes))

        await eventually(settled)
        upstream.stop_all()
        figures["upstream, to make it all"] = calls_by_kind(admin.requests(mark))
        made = await asyncio.to_thread(cloud_view, emu, table)
        node_meta = await _node_meta(kube, nodes)
        assert await _ingress(kube, ns, names) == ingress
        marks = await _marks(kube, ns, names)  # upstream's finalizer and labels
        assert {m["finalizers"][0] for m in marks.values()} == {CLB_FINALIZER}
        assert all(all(m["labels"].values()) for m in marks.values())

        # -- kccm takes over: a full sync and a resync, no write --------------------------------
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-alibabacloud-migration")
        before = await _ensured(kube, ns, names)
        since = admin.last_seq()
        config = upstream.tmp / "cloud-config.json"
        daemon = start_kccm(daemons, control_plane, config, emu.endpoint_env())
        await eventually(lambda: synced(kube, ns, before, daemon, nodes))
        adopted = await _ensured(kube, ns, names)
        # kccm's marks are upstream's (same hash, same balancer): no Service write at all
        assert await _marks(kube, ns, names) == marks
        await _resync_every_service(kube, ns, names)
        await eventually(lambda: synced(kube, ns, adopted, daemon, nodes))
        await eventually(lambda: _hashes_follow(kube, ns, names))
        for name, now in (await _marks(kube, ns, names)).items():
            assert now["finalizers"] == marks[name]["finalizers"]
            assert FINALIZER_LB_CLEANUP not in now["finalizers"]
            balancer_id = now["labels"][LABEL_LOADBALANCER_ID]
            assert balancer_id == marks[name]["labels"][LABEL_LOADBALANCER_ID]
        requests = admin.requests(since)
        figures["kccm, to adopt it (a sync and a resync)"] = calls_by_kind(requests)
        assert [r["action"] for r in admin.mutating(since)] == []
        assert await _ingress(kube, ns, names) == ingress
        assert await asyncio.to_thread(cloud_view, emu, table) == made
        assert await _node_meta(kube, nodes) == node_meta

        # -- a port changed: the writes that move one listener ---------------------------------
        since = admin.last_seq()
        inner = await kube.get(SERVICES, "inner", namespace=ns)
        port = {**inner["spec"]["ports"][0], "port": 8080}
        await kube.patch(
            SERVICES, "inner", {"spec": {"ports": [port]}}, patch_type=PatchType.MERGE, namespace=ns
        )
        inner_lb = next(lb for lb, v in made["balancers"].items() if v["AddressType"] == "intranet")

        async def moved() -> bool:
            _running(daemon)
            lb = await asyncio.to_thread(admin.balancer, inner_lb)
            return {(i["ListenerPort"], i["Status"]) for i in lb["Listeners"]} == {
                (8080, "running")
            }

        await eventually(moved)
        figures["kccm, a port changed"] = dict(_writes(emu, since))
        assert _writes(emu, since) == Counter(
            {
                "CreateLoadBalancerTCPListener": 1,
                "StartLoadBalancerListener": 1,
                "DeleteLoadBalancerListener": 1,
            }
        )

        # -- the Services, then the Nodes, go while kccm runs: upstream's finalizer is kccm's --
        await delete_until_gone(kube, SERVICES, names, ns, within=BUDGET)
        left = await asyncio.to_thread(cloud_view, emu, table)
        assert list(left["balancers"]) == [reused_lb]
        user_lb = left["balancers"][reused_lb]
        assert (user_lb["Listeners"], user_lb["VServerGroups"]) == ([], [])
        # the reuse mark stays, as upstream leaves it (``deleteLoadBalancer``: a reused one is
        # skipped); the balancer is the user's to delete
        assert _tags(user_lb) == {REUSE_TAG: "true"}
        figures["left after the Services went"] = {reused_lb: _tags(user_lb)}
        await delete_until_gone(kube, NODES, nodes, within=BUDGET)

        async def unrouted() -> bool:
            _running(daemon)
            return (await asyncio.to_thread(cloud_view, emu, table))["routes"] == []

        await eventually(unrouted)
    finally:
        with contextlib.suppress(TimeoutError):  # a failure may have left kccm stopped
            await delete_until_gone(kube, SERVICES, names, ns, within=60)
        await delete_until_gone(kube, NODES, nodes, within=BUDGET)
        daemons.stop_all(grace=30)
        admin.delete_balancer(reused_lb)
        admin.delete_route_table(table)
        for name in nodes:
            admin.delete_instance(name)
        print("\nalibabacloud migration figures:", json.dumps(figures, indent=1))
    admin.assert_clean(baseline)
