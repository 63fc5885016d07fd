"""What bench/azure_scale.py's two halves (kccm's, and upstream's in
bench/azure_bench_upstream.py) share: seeding, the emulator's request log by kind, the
Kubernetes objects, waits, and :class:`Figures`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from kube_helpers import Completion, bounded, delete_quietly, has_ingress

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import EVENTS, NAMESPACES, SERVICES
from kccm.testing.kubelet import kubelet_node as shared_kubelet_node

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the emulator and its log -----------------------------------------------------------------


def seed_vms(emu: AzureEmulator, count: int, prefix: str) -> list[str]:
    """``count`` running VMs in zones 1-3 (one bulk call); their names."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    emu.admin.add_vms([{"name": n, "zone": str(1 + i % 3)} for i, n in enumerate(names)])
    return names


def kind(entry: dict[str, Any]) -> str:
    """``arm GET Microsoft.Network/loadBalancers/{}``: the service and the logged operation."""
    return f"{entry['service']} {entry.get('op') or entry['method'] + ' ' + entry['path']}"


def window(emu: AzureEmulator, since: int, until: int | None = None) -> list[dict[str, Any]]:
    return [e for e in emu.admin.requests(since) if until is None or e["seq"] <= until]


def writes(entries: list[dict[str, Any]]) -> list[str]:
    return [f"{e['method']} {e['path']}" for e in entries if e["service"] == "arm" and
            e["method"] != "GET"]  # fmt: skip


async def quiet(
    emu: AzureEmulator,
    within: float,
    alive: Callable[[], None],
    seconds: float = 5.0,
    services: tuple[str, ...] = (),
) -> int:
    """Until the emulator's log (its entries of ``services``, all when empty) has not grown
    for ``seconds``; its last sequence number then."""
    last, since, mark = -1, time.monotonic(), emu.admin.last_seq()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive()
        seq = await asyncio.to_thread(emu.admin.last_seq)
        if services:
            entries = [e for e in await asyncio.to_thread(emu.admin.requests, mark)
                       if e["service"] in services]  # fmt: skip
            seq = entries[-1]["seq"] if entries else mark
        if seq != last:
            last, since = seq, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return last
        await asyncio.sleep(0.5)
    raise SystemExit("the daemon did not settle in time")


# -- Kubernetes objects -----------------------------------------------------------------------


def kubelet_node(name: str, run: str) -> dict[str, Any]:
    node = shared_kubelet_node(name)
    node["metadata"]["labels"]["bench-run"] = run
    return node


def initialised(node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    taints = {t["key"] for t in node["spec"].get("taints") or []}
    addresses = {a["type"] for a in (node.get("status") or {}).get("addresses") or []}
    return (
        str(node["spec"].get("providerID", "")).startswith("azure://")
        and UNINIT not in taints
        and "InternalIP" in addresses
        and "topology.kubernetes.io/zone" in labels
        and "node.kubernetes.io/instance-type" in labels
    )


def lb_service(i: int, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"web-{i:04d}", "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": f"web-{i:04d}"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
            ],
        },
    }


async def ensured_counts(kube: KubeApiClient, namespace: str) -> Counter[str]:
    """EnsuredLoadBalancer Events per Service of ``namespace`` (their ``count`` summed)."""
    found: Counter[str] = Counter()
    for event in (await kube.list(EVENTS, namespace=namespace)).items:
        if event.get("reason") == "EnsuredLoadBalancer":
            found[event["involvedObject"]["name"]] += int(event.get("count") or 1)
    return found


async def ensured_again(
    kube: KubeApiClient, namespace: str, before: Counter[str], services: int, within: float
) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        now = await ensured_counts(kube, namespace)
        if sum(1 for name, n in now.items() if n > before[name]) >= services:
            return
        await asyncio.sleep(0.5)
    raise SystemExit("not every Service was ensured again in time")


async def create_services(kube: KubeApiClient, namespace: str, count: int, within: float) -> float:
    """``count`` Services created at once; seconds until every one has an ingress."""
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    async with Completion(kube, SERVICES, count, has_ingress, namespace=namespace) as done:
        start = time.perf_counter()
        await bounded(100, [kube.create(SERVICES, lb_service(i, namespace)) for i in range(count)])
        await asyncio.wait_for(done.finished.wait(), within)
        return time.perf_counter() - start


async def delete_services(kube: KubeApiClient, namespace: str, within: float) -> None:
    names = [i["metadata"]["name"] for i in (await kube.list(SERVICES, namespace=namespace)).items]
    await bounded(100, [delete_quietly(kube, SERVICES, n, namespace) for n in names])
    deadline = time.monotonic() + within
    while (await kube.list(SERVICES, namespace=namespace)).items:
        if time.monotonic() > deadline:
            raise SystemExit("the Services were not deleted in time")
        await asyncio.sleep(0.5)
    await delete_quietly(kube, NAMESPACES, namespace)


def left_behind(emu: AzureEmulator, baseline: dict[str, list[str]]) -> dict[str, int]:
    left = emu.admin.state()
    return {
        k: len(set(v) - set(baseline.get(k, ())))
        for k, v in left.items()
        if set(v) - set(baseline.get(k, ()))
    }


# -- the bench --------------------------------------------------------------------------------


class Figures:
    """Figures and request tables of one daemon (``kccm`` or ``upstream``)."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.figures: dict[str, Any] = {}
        self.tables: dict[str, Counter[str]] = {}

    def record(
        self,
        phase: str,
        entries: list[dict[str, Any]],
        weight: Callable[[dict[str, Any]], float] = lambda entry: 1.0,
    ) -> None:
        """The phase's requests by kind, each counted ``weight(entry)`` times (a sample
        scaled to every Node), rounded."""
        found: dict[str, float] = {}
        for entry in entries:
            found[kind(entry)] = found.get(kind(entry), 0.0) + weight(entry)
        table = Counter({k: round(n) for k, n in found.items()})
        self.tables[phase] = table
        self.figures[f"{phase}_arm_requests"] = sum(
            n for k, n in table.items() if k.startswith("arm ")
        )
        self.figures[f"{phase}_requests_by_kind"] = dict(sorted(table.items()))
