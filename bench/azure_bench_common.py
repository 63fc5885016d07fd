"""What bench/azure_scale.py's two halves (kccm's, and upstream's in
bench/azure_bench_upstream.py) share: seeding, the emulator's request log by kind, the
Kubernetes objects, waits, and :class:`Figures`."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from cloud_bench import initialised as node_initialised
from cloud_bench import lb_service
from kube_helpers import Completion, Emptied, bounded, delete_quietly, has_ingress

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import EVENTS, NAMESPACES, SERVICES

initialised = functools.partial(node_initialised, scheme="azure")
"""A Node initialised by the azure provider (or cloud-node-manager)."""


# -- the emulator and its log -----------------------------------------------------------------


def seed_vms(emu: AzureEmulator, count: int, prefix: str) -> list[str]:
    """``count`` running VMs in zones 1-3 (one bulk call); their names."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    emu.admin.add_vms([{"name": n, "zone": str(1 + i % 3)} for i, n in enumerate(names)])
    return names


def kind(entry: dict[str, Any]) -> str:
    """``arm GET Microsoft.Network/loadBalancers/{}``: the service and the logged operation."""
    return f"{entry['service']} {entry.get('op') or entry['method'] + ' ' + entry['path']}"


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
        await asyncio.sleep(0.5)  # the emulator's log has no watch: quiet is read, not told
    raise SystemExit("the daemon did not settle in time")


# -- Kubernetes objects -----------------------------------------------------------------------


async def ensured_counts(kube: KubeApiClient, namespace: str) -> Counter[str]:
    """The ``count`` of each EnsuredLoadBalancer Event of ``namespace``, by Event name."""
    found: Counter[str] = Counter()
    for event in (await kube.list(EVENTS, namespace=namespace)).items:
        if event.get("reason") == "EnsuredLoadBalancer":
            found[event["metadata"]["name"]] = int(event.get("count") or 1)
    return found


async def ensured_again(
    kube: KubeApiClient, namespace: str, before: Counter[str], services: int, within: float
) -> None:
    """Until ``services`` Services have an EnsuredLoadBalancer Event that is new or counted
    higher than in ``before`` (:func:`ensured_counts`), watched."""

    def again(event: dict[str, Any]) -> bool:
        return (
            event.get("reason") == "EnsuredLoadBalancer"
            and int(event.get("count") or 1) > before[event["metadata"]["name"]]
        )

    def service(event: dict[str, Any]) -> str:
        return str(event["involvedObject"]["name"])

    async with Completion(kube, EVENTS, services, again, key=service,
                          namespace=namespace) as done:  # fmt: skip
        try:
            await asyncio.wait_for(done.finished.wait(), within)
        except TimeoutError:
            raise SystemExit("not every Service was ensured again in time") from None


async def create_services(kube: KubeApiClient, namespace: str, count: int, within: float) -> float:
    """``count`` Services created at once; seconds until every one has an ingress."""
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    async with Completion(kube, SERVICES, count, has_ingress, namespace=namespace) as done:
        start = time.perf_counter()
        await bounded(100, [kube.create(SERVICES, lb_service(i, namespace)) for i in range(count)])
        await asyncio.wait_for(done.finished.wait(), within)
        return time.perf_counter() - start


async def delete_services(kube: KubeApiClient, namespace: str, within: float) -> None:
    """Every Service of ``namespace`` deleted, until the last is gone (watched), then the
    namespace."""
    async with Emptied(kube, SERVICES, namespace=namespace) as emptied:
        names = [
            i["metadata"]["name"] for i in (await kube.list(SERVICES, namespace=namespace)).items
        ]
        await bounded(100, [delete_quietly(kube, SERVICES, n, namespace) for n in names])
        try:
            await asyncio.wait_for(emptied.finished.wait(), within)
        except TimeoutError:
            raise SystemExit("the Services were not deleted in time") from None
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
