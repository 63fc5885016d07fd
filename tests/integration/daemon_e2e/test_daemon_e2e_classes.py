"""Two kccm daemons on one apiserver, each serving its own load-balancer classes (issue 27):
``a`` serves class-less Services and class A, ``b`` only class B, each with its own lease and
its own fake cloud (``ledger_cloud``: every load-balancer call is written to a file). Each
touches only its own Services, a Service that switches from class A to class B (through
ClusterIP) is released by ``a`` and ensured by ``b``, the deletions leave neither cloud holding
a balancer, and each Lease says what its daemon serves."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon_e2e_support import Cluster, _ingress, eventually

from kccm.api.wellknown import (
    ANNOTATION_LEASE_LB_CLASS_LESS,
    ANNOTATION_LEASE_LB_CLASSES,
    FINALIZER_LB_CLEANUP,
)
from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import LEASES, SERVICES
from kccm.testing.controllers import delete_until_gone
from kccm.testing.daemon import Daemon
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

HERE = Path(__file__).resolve().parent
PROVIDER = "ledger_cloud:new_ledger_cloud"
CLASS_A, CLASS_B, CLASS_C = "a.kccm.example/lb", "b.kccm.example/lb", "c.kccm.example/lb"
MUTATING = {"ensure_load_balancer", "update_load_balancer", "ensure_load_balancer_deleted"}


class Ledger:
    """One daemon's ledger file (``ledger_cloud``)."""

    def __init__(self, path: Path, namespace: str) -> None:
        self.path = path
        self.namespace = namespace

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def calls(self, name: str) -> list[str]:
        key = f"{self.namespace}/{name}"
        return [e["method"] for e in self.entries() if e["phase"] == "call" and e["service"] == key]

    def mutated(self) -> set[str]:
        """The names of this namespace's Services the daemon changed a balancer for."""
        prefix = f"{self.namespace}/"
        return {
            e["service"].removeprefix(prefix)
            for e in self.entries()
            if e["phase"] == "call" and e["method"] in MUTATING and e["service"].startswith(prefix)
        }

    def held(self) -> set[str]:
        """The balancers of this namespace the cloud holds after its last change."""
        held = [e["balancers"] for e in self.entries() if e["phase"] == "held"]
        prefix = f"{self.namespace}/"
        return {b.removeprefix(prefix) for b in (held[-1] if held else []) if b.startswith(prefix)}


def _start(cluster: Cluster, lease: str, ledger: Path, *flags: str) -> Daemon:
    return cluster.daemons.start(
        PROVIDER,
        cluster.cloud_config([]),
        cluster.plane.admin_kubeconfig,  # the shipped RBAC names one lease only
        "--controllers=service-lb-controller",
        "--leader-elect=true",
        f"--leader-elect-resource-name={lease}",
        "--leader-elect-lease-duration=8s",
        "--leader-elect-renew-deadline=6s",
        "--leader-elect-retry-period=500ms",
        "--v=2",
        *flags,
        env={
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            "KCCM_TEST_LEDGER": str(ledger),
        },
    )


def _lb(name: str, namespace: str, cls: str | None) -> Obj:
    spec: dict[str, Any] = {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}
    if cls is not None:
        spec["loadBalancerClass"] = cls
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def _lease_annotations(kube: KubeApiClient, name: str) -> Mapping[str, str] | None:
    try:
        lease = await kube.get(LEASES, name, namespace="kube-system")
    except NotFound:
        return None
    annotations = lease["metadata"].get("annotations") or {}
    return annotations if ANNOTATION_LEASE_LB_CLASSES in annotations else None


async def _in(ledger: Ledger, name: str) -> bool:
    return name in ledger.held()


async def _released(ledger: Ledger, name: str) -> bool:
    return name not in ledger.held()


async def _patch_spec(kube: KubeApiClient, name: str, namespace: str, spec: Obj) -> None:
    await kube.patch(
        SERVICES, name, {"spec": spec}, patch_type=PatchType.MERGE, namespace=namespace
    )


async def test_two_daemons_serve_their_own_classes_through_a_switch_and_deletions(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    lease_a = kube_cleanup.add(LEASES, unique_name("kccm-a"), "kube-system")
    lease_b = kube_cleanup.add(LEASES, unique_name("kccm-b"), "kube-system")
    a = Ledger(cluster.tmp / "ledger-a.jsonl", ns)
    b = Ledger(cluster.tmp / "ledger-b.jsonl", ns)
    daemon_a = _start(cluster, lease_a, a.path, f"--load-balancer-class={CLASS_A}")
    daemon_b = _start(
        cluster, lease_b, b.path, f"--load-balancer-class={CLASS_B}", "--load-balancer-class-only"
    )
    assert await eventually(lambda: _lease_annotations(kube, lease_a)) == {
        ANNOTATION_LEASE_LB_CLASSES: CLASS_A,
        ANNOTATION_LEASE_LB_CLASS_LESS: "true",
    }
    assert await eventually(lambda: _lease_annotations(kube, lease_b)) == {
        ANNOTATION_LEASE_LB_CLASSES: CLASS_B,
        ANNOTATION_LEASE_LB_CLASS_LESS: "false",
    }

    owners = {
        "plain": None,
        "in-a": CLASS_A,
        "in-b": CLASS_B,
        "in-c": CLASS_C,
        "switch": CLASS_A,
        "paused": CLASS_A,
    }
    for name, cls in owners.items():
        await kube.create(SERVICES, _lb(name, ns, cls))
    for name in ("plain", "in-a", "in-b", "switch", "paused"):
        await eventually(lambda name=name: _ingress(kube, name, ns))
    assert a.held() == {"plain", "in-a", "switch", "paused"}
    assert b.held() == {"in-b"}

    # LoadBalancer (class A) -> ClusterIP -> LoadBalancer (class B), the second edit at once.
    await _patch_spec(kube, "switch", ns, {"type": "ClusterIP", "loadBalancerClass": None})
    await _patch_spec(kube, "switch", ns, {"type": "LoadBalancer", "loadBalancerClass": CLASS_B})

    await eventually(lambda: _released(a, "switch"))
    await eventually(lambda: _in(b, "switch"))
    await eventually(lambda: _ingress(kube, "switch", ns))
    assert a.calls("switch")[-1] == "ensure_load_balancer_deleted"

    # The same while a is stopped (SIGSTOP): a syncs only once both edits are made, and b,
    # serving class B only, leaves the ClusterIP Service's finalizer to a.
    daemon_a.proc.send_signal(signal.SIGSTOP)
    try:
        await _patch_spec(kube, "paused", ns, {"type": "ClusterIP", "loadBalancerClass": None})
        await _patch_spec(
            kube, "paused", ns, {"type": "LoadBalancer", "loadBalancerClass": CLASS_B}
        )
        await eventually(lambda: _in(b, "paused"))
    finally:
        daemon_a.proc.send_signal(signal.SIGCONT)
    await eventually(lambda: _released(a, "paused"))
    assert "paused" in b.held()

    async def finalizer_back() -> Obj | None:
        """a removed the finalizer after deleting its balancer (as upstream); b, which had
        ensured before, puts it back with a second ensure."""
        stored = await kube.get(SERVICES, "paused", namespace=ns)
        ensures = b.calls("paused").count("ensure_load_balancer")
        finalizers = stored["metadata"].get("finalizers")
        return stored if ensures >= 2 and finalizers == [FINALIZER_LB_CLEANUP] else None

    stored = await eventually(finalizer_back)
    assert stored["status"]["loadBalancer"]["ingress"], "b's status stays"

    await delete_until_gone(kube, SERVICES, list(owners), ns)
    assert a.held() == set()
    assert b.held() == set()
    assert a.mutated() == {"plain", "in-a", "switch", "paused"}
    assert b.mutated() == {"in-b", "switch", "paused"}
    assert a.calls("in-c") == [], "nobody serves class C"
    assert b.calls("in-c") == [], "nobody serves class C"
    assert [m for m in a.calls("in-b") if m in MUTATING] == []
    assert [m for m in b.calls("plain") + b.calls("in-a") if m in MUTATING] == []

    for daemon in (daemon_a, daemon_b):
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(60) == 0, daemon.logs()[-3000:]
