"""End to end: `kccm` as a real subprocess against the real apiserver, authenticated as the
shipped ServiceAccount with only the shipped RBAC, the `fake` provider configured through a
--cloud-config file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    LEASES,
    NODES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Resource,
)
from kccm.testing.controlplane import ControlPlane, free_port
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

ROOT = Path(__file__).resolve().parents[2]
SA_USER = "system:serviceaccount:kube-system:cloud-controller-manager"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
KINDS: dict[str, Resource] = {
    "ServiceAccount": SERVICE_ACCOUNTS,
    "ClusterRole": CLUSTER_ROLES,
    "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
    "Role": ROLES,
    "RoleBinding": ROLE_BINDINGS,
}
UNINITIALIZED = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T | None]], budget: float = 30.0) -> T:
    """Poll ``probe`` until it returns something truthy (bounded)."""
    async with asyncio.timeout(budget):
        while True:
            value = await probe()
            if value:
                return value
            await asyncio.sleep(0.2)


async def apply_shipped_rbac(kube: KubeApiClient) -> None:
    for doc in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()):
        if not doc or doc["kind"] not in KINDS:
            continue
        meta = doc["metadata"]
        await kube.patch(
            KINDS[doc["kind"]],
            meta["name"],
            doc,
            patch_type=PatchType.APPLY,
            namespace=meta.get("namespace"),
            field_manager="kccm-e2e",
            force=True,
        )


@dataclass
class Daemon:
    proc: subprocess.Popen[str]
    port: int
    log: Path

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def get(self, path: str, token: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.url(path))
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        context = ssl._create_unverified_context()  # self-signed serving certificate
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Cluster:
    plane: ControlPlane
    tmp: Path
    kube: KubeApiClient
    daemons: list[Daemon] = field(default_factory=list)

    def cloud_config(self, nodes: list[str]) -> Path:
        lines = ["[Global]", "zone = e2e-zone", "region = e2e-region", ""]
        for i, name in enumerate(nodes):
            lines += [
                f'[Instance "{name}"]',
                f"address = InternalIP=10.77.0.{i + 10}",
                f"address = Hostname={name}",
                "instance-type = fake.e2e",
                "",
            ]
        path = self.tmp / f"cloud-{len(self.daemons)}.conf"
        path.write_text("\n".join(lines))
        return path

    def start(self, cloud_config: Path, *extra: str) -> Daemon:
        kubeconfig = self.plane.kubeconfig_for(SA_USER, SA_GROUPS)
        port = free_port()
        log = self.tmp / f"kccm-{len(self.daemons)}.log"
        args = [
            sys.executable,
            "-m",
            "kccm",
            "--cloud-provider=fake",
            f"--cloud-config={cloud_config}",
            f"--kubeconfig={kubeconfig}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=true",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
            "--node-monitor-period=1s",
            "--v=2",
            *extra,
        ]
        with log.open("w") as sink:
            proc = subprocess.Popen(
                args,
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        daemon = Daemon(proc, port, log)
        self.daemons.append(daemon)
        return daemon

    def stop_all(self) -> None:
        for daemon in self.daemons:
            if daemon.proc.poll() is None:
                daemon.proc.kill()
                daemon.proc.wait(10)


@pytest.fixture
async def cluster(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> AsyncIterator[Cluster]:
    await apply_shipped_rbac(kube)
    c = Cluster(control_plane, tmp_path, kube)
    try:
        yield c
    finally:
        c.stop_all()


def kubelet_node(name: str, pod_cidr: str) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": [UNINITIALIZED], "podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
        "status": {
            "addresses": [{"type": "Hostname", "address": name}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "ready",
                    "lastHeartbeatTime": "2026-11-21T00:00:00Z",
                    "lastTransitionTime": "2026-11-21T00:00:00Z",
                }
            ],
        },
    }


async def _initialised(kube: KubeApiClient, name: str) -> Obj | None:
    node = await kube.get(NODES, name)
    taints = node["spec"].get("taints") or []
    done = node["spec"].get("providerID") and UNINITIALIZED["key"] not in {t["key"] for t in taints}
    return node if done else None


async def _has_internal_ip(kube: KubeApiClient, name: str) -> bool:
    node = await kube.get(NODES, name)
    addresses = node.get("status", {}).get("addresses") or []
    return any(a["type"] == "InternalIP" and a["address"].startswith("10.77.0.") for a in addresses)


async def _route_created(kube: KubeApiClient, name: str) -> Obj | None:
    node = await kube.get(NODES, name)
    for cond in node.get("status", {}).get("conditions") or []:
        if cond["type"] == "NetworkUnavailable" and cond["reason"] == "RouteCreated":
            return cond
    return None


async def _ingress(kube: KubeApiClient, name: str, ns: str) -> list[Any] | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    return (svc.get("status") or {}).get("loadBalancer", {}).get("ingress")


async def _sa_token(kube: KubeApiClient, cleanup: KubeCleanup, rules: list[Any]) -> str:
    """A bearer token (TokenRequest) for a fresh ServiceAccount granted ``rules``."""
    name = unique_name("metrics-reader")
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": "default"}})
    if rules:
        cleanup.add(CLUSTER_ROLES, name)
        cleanup.add(CLUSTER_ROLE_BINDINGS, name)
        await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
        await kube.create(
            CLUSTER_ROLE_BINDINGS,
            {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": name,
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
            },
        )
    review = await kube.create(
        SERVICE_ACCOUNTS,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
        namespace="default",
        name=name,
        subresource="token",
    )
    return str(review["status"]["token"])


async def test_daemon_initialises_nodes_serves_lbs_routes_and_guards_metrics(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    nodes = [kube_cleanup.add(NODES, unique_name("e2e-node")) for _ in range(2)]
    daemon = cluster.start(cluster.cloud_config(nodes))
    for i, name in enumerate(nodes):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i + 1}.0/24"))
    for name in nodes:
        node = await eventually(lambda name=name: _initialised(kube, name))
        assert node["spec"]["providerID"] == f"fake://{name}"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "e2e-zone"
        await eventually(lambda name=name: _has_internal_ip(kube, name))
        await eventually(lambda name=name: _route_created(kube, name))

    svc = unique_name("e2e-lb")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": svc, "namespace": kube_namespace},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        },
    )
    ingress = await eventually(lambda: _ingress(kube, svc, kube_namespace))
    assert ingress[0]["ip"]

    status, body = await asyncio.to_thread(daemon.get, "/healthz?verbose")
    assert status == 200, body
    for check in (
        "leaderElection",
        "cloud-node-controller",
        "service-lb-controller",
        "node-route-controller",
        "cloud-node-lifecycle-controller",
    ):
        assert f"[+]{check} ok" in body
    anonymous = await asyncio.to_thread(daemon.get, "/metrics")
    assert anonymous[0] == 403
    outsider = await _sa_token(kube, kube_cleanup, [])
    assert (await asyncio.to_thread(daemon.get, "/metrics", outsider))[0] == 403
    reader = await _sa_token(
        kube, kube_cleanup, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )
    status, metrics = await asyncio.to_thread(daemon.get, "/metrics", reader)
    assert status == 200
    assert "running_managed_controllers" in metrics
    assert "workqueue_adds_total" in metrics
    assert (await asyncio.to_thread(daemon.get, "/metrics", "not-a-token"))[0] == 401

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(60) == 0, daemon.logs()[-3000:]


async def _holder(kube: KubeApiClient) -> str:
    try:
        lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


async def test_two_replicas_failover_on_sigterm(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    nodes = [kube_cleanup.add(NODES, unique_name("e2e-ha")) for _ in range(2)]
    config = cluster.cloud_config(nodes)
    first = cluster.start(config)
    leader = await eventually(lambda: _holder(kube))
    second = cluster.start(config)
    await kube.create(NODES, kubelet_node(nodes[0], "10.244.31.0/24"))
    await eventually(lambda: _initialised(kube, nodes[0]))
    assert await _holder(kube) == leader, "the first replica keeps leading"

    stopped_at = time.monotonic()
    first.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(first.proc.wait, 60) == 0, first.logs()[-3000:]
    new_leader = await eventually(lambda: _holder_other_than(kube, leader), budget=30)
    takeover = time.monotonic() - stopped_at
    await kube.create(NODES, kubelet_node(nodes[1], "10.244.32.0/24"))
    await eventually(lambda: _initialised(kube, nodes[1]))
    print(f"\nfailover: SIGTERM to the leader -> new leader {new_leader} in {takeover:.2f} s")
    assert second.proc.poll() is None
    second.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(second.proc.wait, 60) == 0


async def _holder_other_than(kube: KubeApiClient, old: str) -> str | None:
    holder = await _holder(kube)
    return holder if holder and holder != old else None


async def test_losing_the_lease_exits_non_zero(cluster: Cluster, kube: KubeApiClient) -> None:
    daemon = cluster.start(cluster.cloud_config([]), "--controllers=service")
    holder = await eventually(lambda: _holder(kube))
    lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    stolen = {
        **lease,
        "spec": {
            **lease["spec"],
            "holderIdentity": "usurper",
            "renewTime": now,
            "leaseDurationSeconds": 60,
        },
    }
    await kube.replace(LEASES, stolen)  # another manager took the lease
    try:
        code = await asyncio.to_thread(daemon.proc.wait, 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kccm kept running after losing its lease:\n{daemon.logs()[-4000:]}")
    assert code == 1, daemon.logs()[-3000:]
    assert "leaderelection lost" in daemon.logs()
    assert holder != "usurper"
    released = {**stolen, "metadata": {**stolen["metadata"], "resourceVersion": None}}
    current = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    released["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    released["spec"] = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
    await kube.replace(LEASES, released)  # hand the lock back for later tests
