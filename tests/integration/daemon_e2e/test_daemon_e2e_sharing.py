"""Shared balancers with the real daemon (local provider, shipped RBAC) on the real apiserver,
SIGKILLed mid-change (issue 39): two Services of a share group created and the daemon killed at
once, one deleted and a port added to the other while it is down; after the restart the group has
one VIP, each Service exactly its own listeners, and once both are deleted the state file holds
no row and no claim (nothing orphaned)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon_e2e_support import Cluster, _ingress, eventually

from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.local.store import LocalStore
from kccm.testing.controllers import delete_until_gone
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon
from kccm.testing.ports import loopback_net
from kccm.testing.pytest_plugin import KubeCleanup, unique_name


def _service(name: str, namespace: str, *ports: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {ANNOTATION_SHARE_GROUP: "g"},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": f"p{p}", "protocol": "TCP", "port": p} for p in ports],
        },
    }


def _start(cluster: Cluster, config: Path) -> Daemon:
    return cluster.daemons.start(
        "local",
        config,
        cluster.plane.kubeconfig_for(SA_USER, SA_GROUPS),
        "--controllers=service",
        "--leader-elect=false",
        "--v=2",
    )


def _rows(store: LocalStore) -> dict[str, tuple[str, list[int]]]:
    return {
        lb.service: (lb.vip, sorted(int(p["port"]) for p in lb.ports))
        for lb in store.list_load_balancers()
    }


async def test_a_killed_daemon_leaves_each_service_its_listeners_and_nothing_orphaned(
    cluster: Cluster, kube_namespace: str, kube_cleanup: KubeCleanup, tmp_path: Path
) -> None:
    kube, ns, net = cluster.kube, kube_namespace, loopback_net()
    state = tmp_path / "state.db"
    config = tmp_path / "local.conf"
    config.write_text(
        f"[Global]\nstate-file = {state}\nvip-range = {net}.100-{net}.103\n"
        "start-dataplane = false\n"
    )
    node = unique_name("share-node")
    kube_cleanup.add(NODES, node)
    await kube.create(
        NODES,
        {
            "metadata": {"name": node},
            "spec": {"providerID": f"local://{node}"},
            "status": {"addresses": [{"type": "InternalIP", "address": f"{net}.1"}]},
        },
    )
    ready = {"type": "Ready", "status": "True", "reason": "Kubelet"}
    await kube.patch(NODES, node, {"status": {"conditions": [ready]}}, subresource="status")
    a, b = unique_name("a-share"), unique_name("b-share")

    first = _start(cluster, config)
    await kube.create(SERVICES, _service(a, ns, 80))
    await kube.create(SERVICES, _service(b, ns, 443))
    await eventually(lambda: first.logged("Starting service controller"))
    first.proc.kill()  # mid-change: the two ensures may or may not have happened
    first.proc.wait()

    store = LocalStore(state)
    try:
        await kube.delete(SERVICES, a, namespace=ns)  # kept by its finalizer, if it got one
        await kube.patch(  # a strategic merge: a port added
            SERVICES,
            b,
            {"spec": {"ports": [{"name": "p8443", "protocol": "TCP", "port": 8443}]}},
            namespace=ns,
        )
        _start(cluster, config)

        async def settled() -> bool:
            ingress = await _ingress(kube, b, ns)
            rows = _rows(store)
            return bool(ingress) and rows == {f"{ns}/{b}": (ingress[0]["ip"], [443, 8443])}

        await eventually(settled)
        (ingress,) = await _ingress(kube, b, ns) or [None]
        claims = [(c.ip, c.owner) for c in store.list_ip_claims()]
        assert claims == [(ingress["ip"], f"share:{ns}/g")]

        await delete_until_gone(kube, SERVICES, [b], ns)

        async def empty() -> bool:
            return not store.list_load_balancers() and not store.list_ip_claims()

        assert await eventually(empty), (_rows(store), store.list_ip_claims())
    finally:
        store.close()
