"""`kccm explain` end to end: the daemon (fake provider, shipped RBAC) on the real apiserver,
its /debug/kccm/explain behind delegated authentication and authorization, and the CLI run as
a process with a user's kubeconfig (client certificate) against it."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from daemon_e2e_support import (
    ROOT,
    Cluster,
    _ingress,
    _initialised,
    _sa_token,
    eventually,
)

from kccm.cloudprovider.drain import ANNOTATION_DRAIN_SECONDS
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    NODES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Resource,
)
from kccm.testing.controllers import delete_until_gone
from kccm.testing.daemon import Daemon, apply_rbac
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
READER = "kccm-explain-reader"
RBAC = "rbac.authorization.k8s.io"


def explain(daemon: Daemon, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kccm explain ARGS --endpoint <daemon>`` as a process (blocking: run in a thread)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kccm",
            "explain",
            *args,
            f"--endpoint=https://127.0.0.1:{daemon.port}",
            "--insecure-skip-tls-verify",
            f"--kubeconfig={kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def answer(daemon: Daemon, kubeconfig: Path, *args: str) -> dict[str, Any]:
    result = await asyncio.to_thread(explain, daemon, kubeconfig, *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    body: dict[str, Any] = json.loads(result.stdout)
    return body


async def text(daemon: Daemon, kubeconfig: Path, *args: str) -> str:
    result = await asyncio.to_thread(explain, daemon, kubeconfig, *args)
    assert result.returncode == 0, result.stderr
    print(f"$ kccm explain {' '.join(args)}\n{result.stdout}")  # shown with -s: the docs' source
    return result.stdout


async def leading(daemon: Daemon) -> str:
    """This daemon's identity once it holds the Lease (a daemon of an earlier test may still
    be named there until its Lease expires)."""
    await eventually(lambda: daemon.logged("successfully acquired lease"))
    line = next(x for x in daemon.logs().splitlines() if "leader election on lease" in x)
    return line.rsplit(" as ", 1)[1].strip()


async def grant_reader(kube: KubeApiClient, cleanup: KubeCleanup, user: str) -> None:
    """deploy/explain-reader.yaml applied and bound to ``user``; both removed after the test."""
    cleanup.add(CLUSTER_ROLES, READER)
    await apply_rbac(kube, ROOT / "deploy" / "explain-reader.yaml", "kccm-e2e")
    binding = cleanup.add(CLUSTER_ROLE_BINDINGS, unique_name("explain-reader"))
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": READER,
            },
            "subjects": [{"kind": "User", "name": user, "apiGroup": RBAC}],
        },
    )


async def lb_service(kube: KubeApiClient, ns: str, **spec: Any) -> str:
    name = unique_name("explain")
    body = {
        "metadata": {"name": name, "namespace": ns, "annotations": spec.pop("annotations", {})},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}], **spec},
    }
    await kube.create(SERVICES, body)
    return name


async def started(
    cluster: Cluster, kube: KubeApiClient, cleanup: KubeCleanup, excluded: int = 0, total: int = 2
) -> tuple[Daemon, list[str]]:
    """A leading daemon and ``total`` initialised Nodes, the last ``excluded`` of them labelled
    out of load balancers."""
    nodes = [cleanup.add(NODES, unique_name("explain-node")) for _ in range(total)]
    daemon = cluster.start(cluster.cloud_config(nodes))
    for i, name in enumerate(nodes):
        node = kubelet_node(name, f"10.244.{60 + i}.0/24")
        if i >= total - excluded:
            node["metadata"].setdefault("labels", {})[EXCLUDE] = "true"
        await kube.create(NODES, node)
    for name in nodes:
        await eventually(lambda name=name: _initialised(kube, name))
    return daemon, nodes


async def test_explain_answers_a_reader_and_refuses_others_by_rbac(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    daemon, nodes = await started(cluster, kube, kube_cleanup, excluded=1, total=3)
    svc = await lb_service(kube, kube_namespace)
    await eventually(lambda: _ingress(kube, svc, kube_namespace))
    outsider = cluster.plane.kubeconfig_for("explain-outsider")
    reader = cluster.plane.kubeconfig_for("explain-reader")
    target = f"{kube_namespace}/{svc}"

    refused = await asyncio.to_thread(explain, daemon, outsider, "service", target)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"Error: forbidden: user explain-outsider cannot get /debug/kccm/explain/service/"
        f"{target} (grant the kccm-explain-reader ClusterRole)"
    )

    await grant_reader(kube, kube_cleanup, "explain-reader")

    async def granted() -> bool:  # the binding reaches the authorizer through an informer
        result = await asyncio.to_thread(explain, daemon, reader, "service", target, "-o", "json")
        return result.returncode == 0

    await eventually(granted)
    body = await answer(daemon, reader, "service", target)
    leader = await leading(daemon)
    assert body["answered_by"] == {"identity": leader, "leader": True}
    assert body["leader"]["identity"] == leader
    assert (body["provider"], body["handled"]) == ("fake", True)
    assert body["why"] == "type LoadBalancer without spec.loadBalancerClass"
    assert body["ingress"], body
    assert body["nodes"]["excluded"][nodes[2]] == f"label {EXCLUDE}=true"
    assert set(body["nodes"]["eligible_names"]) >= set(nodes[:2])
    view = body["balancer"]["view"]
    assert {t["node"] for listener in view["listeners"] for t in listener["targets"]} >= set(
        nodes[:2]
    )
    groups = {g["group"]: g for g in body["call_budget"]}
    assert groups["load_balancer"]["recent_calls"] >= 1, groups
    assert groups["load_balancer"]["throttled_for"] == 0
    shown = await text(daemon, reader, "service", target)
    assert f"Service {target}: leader {leader}, provider fake" in shown
    assert "handled here: type LoadBalancer without spec.loadBalancerClass" in shown

    node = await answer(daemon, reader, "node", nodes[0])
    assert (node["initialised"], node["provider_id"]) == (True, f"fake://{nodes[0]}")
    assert "initialised: initialised" in await text(daemon, reader, "node", nodes[0])
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)


@pytest.mark.parametrize(
    ("spec", "handled", "why", "note"),
    [
        pytest.param(
            {"type": "ClusterIP"},
            False,
            "spec.type is ClusterIP, not LoadBalancer: no balancer wanted",
            None,
            id="cluster-ip-wants-no-balancer",
        ),
        pytest.param(
            {"loadBalancerClass": "example.com/other"},
            False,
            "spec.loadBalancerClass is 'example.com/other': another load-balancer "
            "implementation owns it (this kccm serves only Services without "
            "spec.loadBalancerClass)",
            None,
            id="foreign-class-is-another-implementations",
        ),
        pytest.param(
            {"annotations": {"service.kubernetes.io/load-balancer-class": "x"}},
            True,
            "type LoadBalancer without spec.loadBalancerClass",
            "the annotation service.kubernetes.io/load-balancer-class='x' is not read",
            id="class-annotation-is-not-read",
        ),
    ],
)
async def test_explain_says_why_nobody_handles_a_service(
    cluster: Cluster,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    spec: dict[str, Any],
    handled: bool,
    why: str,
    note: str | None,
) -> None:
    daemon, _ = await started(cluster, kube, kube_cleanup, total=1)
    svc = await lb_service(kube, kube_namespace, **spec)
    admin = cluster.plane.admin_kubeconfig  # system:masters: delegated authorization always passes
    body = await answer(daemon, admin, "service", f"{kube_namespace}/{svc}")
    assert (body["handled"], body["why"]) == (handled, why)
    if note is not None:
        assert any(n.startswith(note) for n in body["notes"]), body["notes"]
    if "loadBalancerClass" in spec:  # every kccm's Lease says what it serves: none this one
        owners = body["class_owners"]
        assert owners["none"] == f"no running kccm serves {spec['loadBalancerClass']!r}"
    shown = await text(daemon, admin, "service", f"{kube_namespace}/{svc}")
    assert why in shown
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)


async def test_a_non_leader_says_who_leads(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    first, nodes = await started(cluster, kube, kube_cleanup, total=1)
    leader = await leading(first)
    second = cluster.start(cluster.cloud_config(nodes))
    await eventually(lambda: second.logged("leader election on lease"))
    admin = cluster.plane.admin_kubeconfig
    body = await answer(second, admin, "node", nodes[0])
    assert body["answered_by"]["leader"] is False
    assert body["leader"]["identity"] == leader
    assert "initialised" not in body, "a non-leader answers only who leads"
    shown = await text(second, admin, "node", nodes[0])
    assert f"does not lead; the leader is {leader}" in shown
    assert (await answer(first, admin, "node", nodes[0]))["answered_by"]["leader"] is True


async def test_no_eligible_nodes_is_shown(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    daemon, nodes = await started(cluster, kube, kube_cleanup, excluded=1, total=1)
    svc = await lb_service(kube, kube_namespace)
    admin = cluster.plane.admin_kubeconfig
    target = f"{kube_namespace}/{svc}"

    async def synced() -> dict[str, Any] | None:
        body = await answer(daemon, admin, "service", target)
        return body if body["syncs"] else None

    body = await eventually(synced)
    assert body["nodes"]["eligible"] == 0
    assert body["nodes"]["excluded"][nodes[0]] == f"label {EXCLUDE}=true"
    (record,) = [r for r in body["syncs"] if r["controller"] == "service-lb-controller"]
    assert record["reason"] == "no-eligible-nodes", record
    assert record["detail"]["eligible_nodes"] == 0
    shown = await text(daemon, admin, "service", target)
    assert "no-eligible-nodes" in shown
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)


async def test_a_drain_the_provider_cannot_make_is_said(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """The fake provider has no draining state: a Service asking for a drain time is told
    that a leaving Node goes at once (docs/behaviour.md, "Draining a Node's targets")."""
    daemon, _ = await started(cluster, kube, kube_cleanup)
    drain = {ANNOTATION_DRAIN_SECONDS: "30"}
    svc = await lb_service(kube, kube_namespace, annotations=drain)
    admin = cluster.plane.admin_kubeconfig

    async def answered() -> dict[str, Any] | None:  # once this daemon leads
        body = await answer(daemon, admin, "service", f"{kube_namespace}/{svc}")
        return body if "drain" in body else None

    body = await eventually(answered)
    assert body["drain"]["seconds"] == 0
    assert "provider fake has no draining state" in body["drain"]["note"]
    shown = await text(daemon, admin, "service", f"{kube_namespace}/{svc}")
    assert "leaving Nodes: 30s asked by annotation service.kccm.io/drain-seconds" in shown
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)


FAULT = "fake.kccm.io/fail"


def failures(metrics: str, reason: str) -> float:
    """``kccm_sync_failures_total{controller="service-lb-controller", reason=...}``."""
    labels = ('controller="service-lb-controller"', f'reason="{reason}"')
    for line in metrics.splitlines():
        if line.startswith("kccm_sync_failures_total{") and all(x in line for x in labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize(
    "reason",
    [
        pytest.param("quota-exceeded", id="quota-or-limit-exceeded"),
        pytest.param("throttled", id="throttled"),
        pytest.param("permission-denied", id="permission-denied"),
        pytest.param("invalid-config", id="invalid-annotation"),
        pytest.param("waiting-on-cloud", id="balancer-still-provisioning"),
    ],
)
async def test_each_failure_reason_is_explained_and_counted(
    cluster: Cluster,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    reason: str,
) -> None:
    """The fake fails the Service's ensure as its ``fake.kccm.io/fail`` annotation says (the
    daemon is a subprocess); explain (JSON and text) and the metric show the reason."""
    daemon, _ = await started(cluster, kube, kube_cleanup, total=1)
    svc = await lb_service(kube, kube_namespace, annotations={FAULT: reason})
    admin = cluster.plane.admin_kubeconfig
    target = f"{kube_namespace}/{svc}"

    async def failed() -> dict[str, Any] | None:
        body = await answer(daemon, admin, "service", target)
        records = [r for r in body["syncs"] if r["controller"] == "service-lb-controller"]
        return records[0] if records and records[0]["reason"] == reason else None

    record = await eventually(failed)
    assert (record["ok"], record["attempts"] >= 1) == (False, True), record
    shown = await text(daemon, admin, "service", target)
    assert "FAILED" in shown, shown
    assert f": {reason}: " in shown, shown
    assert "ingress: <pending>" in shown
    token = await _sa_token(
        kube, kube_cleanup, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )

    async def counted() -> bool:
        status, metrics = await asyncio.to_thread(daemon.get, "/metrics", token)
        return status == 200 and failures(metrics, reason) >= 1

    await eventually(counted)
    await kube.patch(
        SERVICES, svc, {"metadata": {"annotations": {FAULT: None}}}, namespace=kube_namespace
    )
    await eventually(lambda: _ingress(kube, svc, kube_namespace))
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)


PODS = Resource("", "v1", "pods", "Pod", namespaced=True, has_status=True)


def host_address() -> str | None:
    """A non-loopback address of this machine: the apiserver proxies to no loopback address."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("198.51.100.1", 9))  # UDP: no packet is sent; picks the route's source
            address = str(probe.getsockname()[0])
    except OSError:
        return None
    return None if address.startswith("127.") else address


def explain_via_proxy(kubeconfig: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kccm",
            "explain",
            *args,
            f"--kubeconfig={kubeconfig}",
            f"--port={port}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def token_kubeconfig(plane_kubeconfig: Path, token: str, path: Path) -> Path:
    """The admin kubeconfig's cluster with a bearer token as the user."""
    config = yaml.safe_load(plane_kubeconfig.read_text())
    config["users"] = [{"name": "token-user", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "token-user"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


async def sa_token(kube: KubeApiClient, cleanup: KubeCleanup, proxy: bool, reader: bool) -> str:
    """A fresh ServiceAccount's token, bound to the explain roles asked for."""
    name = unique_name("explain-sa")
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": "default"}})
    subject = {"kind": "ServiceAccount", "name": name, "namespace": "default"}
    cleanup.add(CLUSTER_ROLES, READER)
    cleanup.add(ROLES, "kccm-explain-proxy", "kube-system")
    await apply_rbac(kube, ROOT / "deploy" / "explain-reader.yaml", "kccm-e2e")
    if reader:
        binding = cleanup.add(CLUSTER_ROLE_BINDINGS, unique_name("explain-reader"))
        ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": READER}
        body = {"metadata": {"name": binding}, "roleRef": ref, "subjects": [subject]}
        await kube.create(CLUSTER_ROLE_BINDINGS, body)
    if proxy:
        binding = cleanup.add(ROLE_BINDINGS, unique_name("explain-proxy"), "kube-system")
        ref = {"apiGroup": RBAC, "kind": "Role", "name": "kccm-explain-proxy"}
        body = {"metadata": {"name": binding}, "roleRef": ref, "subjects": [subject]}
        await kube.create(ROLE_BINDINGS, body, namespace="kube-system")
    review = await kube.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        namespace="default",
        name=name,
        subresource="token",
    )
    return str(review["status"]["token"])


async def test_the_cli_finds_the_leader_through_the_lease_and_the_pod_proxy(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """The leader's pod (named after its host name, as the Lease's identity says) at this
    machine's address: the CLI reads the Lease and goes through the apiserver's pod proxy.
    The apiserver drops the caller's Authorization header there; the CLI forwards a bearer
    token in X-Kccm-Authorization, which kccm reviews like any other. A client-certificate
    user cannot be forwarded: told to use --endpoint. Before the pod exists (a leader outside
    the cluster), the CLI says the leader is no pod there and points at --endpoint."""
    address = host_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address to proxy to")
    nodes = [kube_cleanup.add(NODES, unique_name("explain-node"))]
    daemon = cluster.start(cluster.cloud_config(nodes), f"--bind-address={address}")
    leader = await leading(daemon)
    outside = await asyncio.to_thread(
        explain_via_proxy, cluster.plane.admin_kubeconfig, daemon.port, "node", nodes[0]
    )
    assert outside.returncode == 1  # no pod yet: as a kccm run by systemd or `kccm dev up`
    assert f'the leader "{leader}" is not a pod in namespace kube-system' in outside.stderr
    assert "--endpoint" in outside.stderr
    pod = kube_cleanup.add(PODS, leader.rsplit("_", 1)[0], "kube-system")
    await kube.create(
        PODS,
        {"metadata": {"name": pod}, "spec": {"containers": [{"name": "kccm", "image": "kccm"}]}},
        namespace="kube-system",
    )
    await kube.patch(
        PODS,
        pod,
        {"status": {"podIP": address, "podIPs": [{"ip": address}]}},
        namespace="kube-system",
        subresource="status",
    )
    await kube.create(NODES, kubelet_node(nodes[0], "10.244.90.0/24"))
    await eventually(lambda: _initialised(kube, nodes[0]))
    path = f"/debug/kccm/explain/node/{nodes[0]}"

    def via_proxy(kubeconfig: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return explain_via_proxy(kubeconfig, daemon.port, "node", nodes[0], *extra)

    admin = await asyncio.to_thread(via_proxy, cluster.plane.admin_kubeconfig)
    assert admin.returncode == 1
    assert "cannot get " + path in admin.stderr
    assert "your kubeconfig has no bearer token" in admin.stderr

    reader = token_kubeconfig(
        cluster.plane.admin_kubeconfig,
        await sa_token(kube, kube_cleanup, proxy=True, reader=True),
        cluster.tmp / "reader.kubeconfig",
    )

    async def answered() -> subprocess.CompletedProcess[str] | None:
        result = await asyncio.to_thread(via_proxy, reader, "-o", "json")
        tried.append(result.stderr)
        return result if result.returncode == 0 else None

    tried: list[str] = []

    try:
        body = json.loads((await eventually(answered)).stdout)
    except TimeoutError:
        raise AssertionError(tried[-1:]) from None
    assert body["answered_by"] == {"identity": leader, "leader": True}
    assert (body["initialised"], body["provider_id"]) == (True, f"fake://{nodes[0]}")
    shown = await asyncio.to_thread(via_proxy, reader)
    print(f"$ kccm explain node {nodes[0]}   # through the pod proxy\n{shown.stdout}")

    proxy_only = token_kubeconfig(
        cluster.plane.admin_kubeconfig,
        await sa_token(kube, kube_cleanup, proxy=True, reader=False),
        cluster.tmp / "proxy-only.kubeconfig",
    )
    refused = await asyncio.to_thread(via_proxy, proxy_only)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: forbidden: user system:serviceaccount:default:")
    assert refused.stderr.rstrip().endswith(
        f"cannot get {path} (grant the kccm-explain-reader ClusterRole)"
    )
    print(refused.stderr)
