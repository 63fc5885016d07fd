"""Migrating from upstream's cloud-provider-azure v1.36.5 to kccm, on the real apiserver and
kccm's Azure emulator (issue 37, deliverable 4).

Upstream's binaries make the cloud a migrating user has: cloud-node-manager (one per Node, as
its DaemonSet runs, reading the instance metadata service) initialises two Nodes of seeded
VMs; the cloud-controller-manager (``cloud-node-lifecycle,service,route``, cluster name
``kubernetes``) routes their pod CIDRs on the route table and balances three Services: a
public one (``alpha``: the shared balancer ``kubernetes``, a public IP ``kubernetes-a<uid>``,
an allow rule in the security group), an internal one (``beta``: ``kubernetes-internal``, an
address of the subnet) and a public one with source ranges and ``externalTrafficPolicy:
Local`` (``gamma``: an allow rule from those ranges, an HTTP probe on the health check node
port). Upstream is stopped; kccm's ``azure`` provider starts on the same ``azure.json`` and
apiserver and adopts everything: not one mutating ARM request (PUT, PATCH, DELETE, POST in the
emulator's request log), every balancer, public IP, security group, route table and NIC
unchanged to its ETag, the Services' addresses and the Nodes' metadata unchanged. Deleting
the Services, then the Nodes, while kccm runs leaves the emulator as it was before upstream
ran.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure_upstream_support import (
    CLUSTER_CIDR,
    CLUSTER_NAME,
    UpstreamProcesses,
    upstream_env,
)

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, event_counts, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, DaemonExited, Daemons
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

BUDGET = 180.0
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
INTERNAL = "service.beta.kubernetes.io/azure-load-balancer-internal"
SERVICE_CONTROLLER = "service-controller"
ENSURED = "EnsuredLoadBalancer"
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
ADOPTED = (
    "loadBalancers",
    "publicIPAddresses",
    "networkSecurityGroups",
    "routeTables",
    "networkInterfaces",
    "virtualNetworks",
)
"""The state labels whose resources kccm must leave as upstream made them (ETags included)."""
NODE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
)


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[Daemons]:
    started = Daemons(tmp_path)
    yield started
    started.stop_all(grace=30)


def start_kccm(daemons: Daemons, plane: ControlPlane, files: Any) -> Daemon:
    """kccm's azure provider on upstream's files, as cluster-admin (as upstream ran), with
    the CCM's cluster name and route flags; it initialises Nodes itself (cloud-node)."""
    return daemons.start(
        "azure",
        files.azure_json,
        plane.admin_kubeconfig,
        f"--cluster-name={CLUSTER_NAME}",
        "--controllers=cloud-node,cloud-node-lifecycle,service,route",
        "--configure-cloud-routes=true",
        "--allocate-node-cidrs=false",
        f"--cluster-cidr={CLUSTER_CIDR}",
        "--route-reconciliation-period=2s",
        "--node-status-update-frequency=5s",
        "--leader-elect=false",
        "--v=2",
        env=files.env,
        unset=[*PROXY_VARS, *(v.upper() for v in PROXY_VARS)],
    )


def lb_service(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            **spec,
        },
    }


SERVICES_MADE = {
    "alpha": lb_service("alpha"),
    "beta": lb_service("beta", {INTERNAL: "true"}),
    "gamma": lb_service(
        "gamma", loadBalancerSourceRanges=["10.1.0.0/16"], externalTrafficPolicy="Local"
    ),
}


async def _ingress(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, Any] | None:
    """Each Service's published ingress, once every one has an IP."""
    found = {}
    for name in names:
        svc = await kube.get(SERVICES, name, namespace=ns)
        ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        if not ingress or not ingress[0].get("ip"):
            return None
        found[name] = ingress
    return found


def cloud_view(emulator: AzureEmulator) -> dict[str, dict[str, Any]]:
    """Every balancer, public IP, security group, route table, NIC and vnet as ARM renders
    it, by id (blocking)."""
    state = emulator.admin.state()
    return {label: {rid: emulator.admin.resource(rid) for rid in state[label]} for label in ADOPTED}


def routes_of(view: dict[str, dict[str, Any]]) -> set[tuple[str, str]]:
    return {
        (r["properties"]["addressPrefix"], r["properties"].get("nextHopIpAddress", ""))
        for table in view["routeTables"].values()
        for r in table["properties"].get("routes") or []
    }


async def _routed(emulator: AzureEmulator, count: int) -> bool:
    return len(routes_of(await asyncio.to_thread(cloud_view, emulator))) == count


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


def summary(requests: list[dict[str, Any]]) -> str:
    """``N ARM requests (M mutating): <op>: n, ...`` (sign-in and IMDS calls counted apart)."""
    arm = [r for r in requests if r["service"] == "arm"]
    writes = [r for r in arm if r["method"] != "GET"]
    others = Counter(r["service"] for r in requests if r["service"] != "arm")
    counts = Counter(r.get("op") or f"{r['method']} {r['path']}" for r in arm)
    detail = "; ".join(f"{op}: {n}" for op, n in sorted(counts.items()))
    return f"{len(arm)} ARM requests ({len(writes)} mutating; {detail}); also {dict(others)}"


def _running(daemon: Daemon) -> None:
    if daemon.proc.poll() is not None:
        raise DaemonExited(f"kccm exited ({daemon.proc.returncode}):\n{daemon.logs()[-3000:]}")


async def _ensured_counts(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, int]:
    return {
        name: (await event_counts(kube, ns, name, SERVICE_CONTROLLER))[ENSURED] for name in names
    }


async def _adopted(
    kube: KubeApiClient, ns: str, before: dict[str, int], daemon: Daemon, nodes: list[str]
) -> bool:
    """kccm ensured every Service again (another EnsuredLoadBalancer event), planned every
    Node's route in two reconciles and refreshed the Nodes' metadata twice."""
    _running(daemon)
    now = await _ensured_counts(kube, ns, list(before))
    if not all(now[name] > count for name, count in before.items()):
        return False
    logs = await asyncio.to_thread(daemon.logs)
    routes_judged = all(logs.count(f"action for node {n!r} with CIDR") >= 2 for n in nodes)
    return routes_judged and logs.count(" nodes status took ") >= 2


def error_answers(requests: list[dict[str, Any]]) -> list[str]:
    """ARM answers of 400 and above but 404 (a lookup of what is not there is a read)."""
    return [
        f"{r['method']} {r['path']} -> {r['status']}"
        for r in requests
        if r["service"] == "arm" and int(r["status"]) >= 400 and int(r["status"]) != 404
    ]


async def test_kccm_adopts_what_upstream_made_without_a_write_and_deletes_it_all(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    daemons: Daemons,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    ns, admin = kube_namespace, emulator.admin
    baseline = admin.state()
    files = emulator.cloud_files(upstream.tmp / "cloud")
    kubeconfig = control_plane.admin_kubeconfig
    mark = admin.last_seq()

    # -- the cloud as upstream leaves it -------------------------------------------------------
    vms: dict[str, dict[str, Any]] = {}
    for i in (1, 2):
        name = kube_cleanup.add(NODES, unique_name("az-mig"))
        vms[name] = admin.add_vm(name, zone=str(i))
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
        imds = upstream_env(files.env, HTTP_PROXY=admin.imds_for(vms[name]["id"]), NODE_NAME=name)
        upstream.start_cnm(name, kubeconfig, imds)
    nodes = list(vms)
    ccm = upstream.start_ccm(files.azure_json, kubeconfig, upstream_env(files.env))
    await eventually(lambda: initialised_nodes(kube, nodes))
    for body in SERVICES_MADE.values():
        await kube.create(SERVICES, body, namespace=ns)
    ingress = await eventually(lambda: _ingress(kube, ns, list(SERVICES_MADE)))
    await eventually(lambda: _routed(emulator, len(nodes)))
    ccm.alive()
    made = await asyncio.to_thread(cloud_view, emulator)
    assert len(made["loadBalancers"]) == 2  # kubernetes, kubernetes-internal
    assert len(made["publicIPAddresses"]) == 2  # alpha's and gamma's
    upstream_requests = admin.requests(mark)
    assert error_answers(upstream_requests) == []
    node_meta = await _node_meta(kube, nodes)
    upstream.stop_all()

    # -- kccm takes over: every object adopted, nothing written ---------------------------------
    ensured = await _ensured_counts(kube, ns, list(SERVICES_MADE))
    since = admin.last_seq()
    daemon = start_kccm(daemons, control_plane, files)
    await eventually(lambda: _adopted(kube, ns, ensured, daemon, nodes))
    requests = admin.requests(since)
    print(f"\nupstream (CNM x{len(nodes)} + CCM), to make it all: {summary(upstream_requests)}")
    print(f"kccm, to adopt it all: {summary(requests)}")
    assert [f"{r['method']} {r['path']}" for r in admin.mutating(since)] == []
    assert error_answers(requests) == []
    assert await _ingress(kube, ns, list(SERVICES_MADE)) == ingress
    assert await asyncio.to_thread(cloud_view, emulator) == made
    assert await _node_meta(kube, nodes) == node_meta

    # -- the Services, then the Nodes, go while kccm runs: nothing of theirs remains ----------
    await delete_until_gone(kube, SERVICES, list(SERVICES_MADE), ns, within=BUDGET)
    await delete_until_gone(kube, NODES, nodes, within=BUDGET)

    async def unrouted() -> bool:
        _running(daemon)
        return await _routed(emulator, 0)

    await eventually(unrouted)
    for vm in vms.values():
        admin.delete_vm(vm["id"])
    admin.assert_clean(baseline)
