"""`kccm explain` end to end: the daemon (fake provider, shipped RBAC) on the real apiserver,
its /debug/kccm/explain behind delegated authentication and authorization, and the CLI run as
a process with a user's kubeconfig (client certificate) against it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from daemon_e2e_support import (
    ROOT,
    Cluster,
    _holder,
    _ingress,
    _initialised,
    _sa_token,
    eventually,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, NODES, SERVICES
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
    leader = await _holder(kube)
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
    shown = await text(daemon, admin, "service", f"{kube_namespace}/{svc}")
    assert why in shown
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)


async def test_a_non_leader_says_who_leads(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    first, nodes = await started(cluster, kube, kube_cleanup, total=1)
    leader = await eventually(lambda: _holder(kube))
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
