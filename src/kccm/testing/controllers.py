"""Test support for running controllers against a real (or fake) API server.

- :func:`eventually`: poll an async probe until it returns something truthy, bounded; the one
  polling helper of the integration tests (they wait for a condition, never for a fixed time);
- :func:`absent` / :func:`all_absent`: probes for ``eventually`` that an object (all the named
  objects) no longer exists;
- :func:`initialised_nodes`: a probe for Nodes the cloud node controller has initialised;
- :func:`events_about` / :func:`event_summaries`: the Events about an object (as
  (component, type, reason, message));
- :func:`event_counts`: how often a component recorded each reason about an object;
- :func:`controller_run`: one run of controllers as the daemon wires them — a
  :class:`~kccm.controllers.base.ControllerContext` with its own registry, call gate, informer
  factory and event broadcaster; :meth:`ControllerRun.start` starts the informers and the
  controllers; leaving the block stops the controllers gracefully and releases everything.
  The pytest fixture ``controller_runs`` (:mod:`kccm.testing.pytest_plugin`) opens runs that
  are closed at the test's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.interface import Interface
from kccm.controllers.base import ControllerContext
from kccm.kube.errors import NotFound
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import EVENTS, NODES, Resource
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.testing.kubelet import UNINITIALIZED_TAINT

__all__ = [
    "ControllerRun",
    "Runnable",
    "absent",
    "all_absent",
    "controller_run",
    "delete_until_gone",
    "event_counts",
    "event_summaries",
    "events_about",
    "eventually",
    "initialised_nodes",
]

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], within: float = 60.0, *, interval: float = 0.05
) -> T:
    """Await ``probe()`` every ``interval`` seconds until it returns something truthy (which is
    returned); ``TimeoutError`` after ``within`` seconds (generous by default: a loaded CI
    machine delays informers and controllers, and a bound costs nothing when the test passes;
    speed targets belong in bench/)."""
    async with asyncio.timeout(within):
        while True:
            value = await probe()
            if value:
                return value
            await asyncio.sleep(interval)


async def absent(
    kube: KubeClient, resource: Resource, name: str, namespace: str | None = None
) -> bool:
    """Whether ``name`` is gone (a GET answers NotFound)."""
    try:
        await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return True
    return False


async def all_absent(
    kube: KubeClient, resource: Resource, names: Iterable[str], namespace: str | None = None
) -> bool:
    """Whether every one of ``names`` is gone."""
    for name in names:
        if not await absent(kube, resource, name, namespace):
            return False
    return True


async def delete_until_gone(
    kube: KubeClient,
    resource: Resource,
    names: Iterable[str],
    namespace: str | None = None,
    *,
    within: float = 60.0,
) -> None:
    """Delete each of ``names`` and wait until every one is gone: call it while the controller
    that holds their finalizers (a LoadBalancer Service's cleanup finalizer) still runs, so the
    test leaves neither a finalizer nor a balancer behind (the plugin's leak check)."""
    names = list(names)
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.delete(resource, name, namespace=namespace)
    await eventually(lambda: all_absent(kube, resource, names, namespace), within)


async def initialised_nodes(kube: KubeClient, names: Iterable[str]) -> list[Obj] | None:
    """The Nodes ``names`` once the cloud node controller has initialised every one (a
    providerID, no uninitialized taint, an InternalIP address: the last comes with a status
    update of its own); None while any is not."""
    nodes = []
    for name in names:
        node = await kube.get(NODES, name)
        taints = {t["key"] for t in node["spec"].get("taints") or []}
        addresses = {a["type"] for a in node.get("status", {}).get("addresses") or []}
        if not node["spec"].get("providerID") or UNINITIALIZED_TAINT["key"] in taints:
            return None
        if "InternalIP" not in addresses:
            return None
        nodes.append(node)
    return nodes


async def events_about(kube: KubeClient, namespace: str, name: str) -> list[Obj]:
    """The Events in ``namespace`` whose involvedObject is named ``name``."""
    listed = await kube.list(
        EVENTS, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    return listed.items


async def event_summaries(
    kube: KubeClient, namespace: str, name: str
) -> list[tuple[str, str, str, str]]:
    """(source component, type, reason, message) of each Event about ``name``."""
    return [
        (
            str((e.get("source") or {}).get("component", "")),
            str(e.get("type", "")),
            str(e.get("reason", "")),
            str(e.get("message", "")),
        )
        for e in await events_about(kube, namespace, name)
    ]


async def event_counts(kube: KubeClient, namespace: str, name: str, component: str) -> Counter[str]:
    """Per reason, how many times ``component`` recorded an event about ``name`` (an Event's
    ``count`` included: the recorder folds repeats into one object)."""
    counts: Counter[str] = Counter()
    for event in await events_about(kube, namespace, name):
        if (event.get("source") or {}).get("component") == component:
            counts[str(event.get("reason", ""))] += int(event.get("count") or 1)
    return counts


class Runnable(Protocol):
    """What every controller provides: ``run()`` until stopped, ``stop(grace)``."""

    async def run(self) -> None: ...

    async def stop(self, grace: float = ...) -> bool: ...


@dataclass
class ControllerRun:
    """The context of one run and the controllers started in it."""

    context: ControllerContext
    gate: CallGate
    grace: float = 5.0
    controllers: list[Runnable] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    stopped: bool = False

    def start(self, *controllers: Runnable | None) -> None:
        """Start the informers (after the controllers registered their handlers) and run
        ``controllers``; ``None`` (a builder that declined to start) is refused."""
        for controller in controllers:
            if controller is None:
                raise ValueError("controller_run: a builder returned None (not started)")
            self.controllers.append(controller)
        self.context.informers.start()
        self.tasks.extend(asyncio.create_task(c.run()) for c in self.controllers[len(self.tasks) :])

    async def stop(self) -> None:
        """Stop every controller (``grace`` seconds for in-flight work; a run still going
        ``2 * grace`` later is cancelled), then the rest; a controller's crash is re-raised.
        Stopping twice is a no-op (a test may stop a run before its fixture does)."""
        if self.stopped:
            return
        self.stopped = True
        try:
            await asyncio.gather(*(c.stop(self.grace) for c in self.controllers))
            outcomes = await self._finish_tasks()
        finally:
            await self.context.events.shutdown(grace=self.grace)
            await self.context.informers.stop()
            self.gate.close()
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome

    async def _finish_tasks(self) -> list[BaseException | None]:
        if not self.tasks:
            return []
        _, pending = await asyncio.wait(self.tasks, timeout=2 * self.grace)
        for task in pending:
            task.cancel()
        return await asyncio.gather(*self.tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def controller_run(
    kube: KubeClient,
    cloud: Interface,
    *,
    cluster_name: str | None = None,
    grace: float = 5.0,
) -> AsyncIterator[ControllerRun]:
    """A fresh context for ``cloud`` (behind a real call gate); see the module docstring."""
    registry = CollectorRegistry()
    gate = CallGate(registry=registry)
    events = EventBroadcaster(kube, registry=registry)
    events.start()
    context = ControllerContext(
        kube=kube,
        informers=SharedInformerFactory(kube),
        cloud=GatedCloud(cloud, gate),
        events=events,
        registry=registry,
    )
    if cluster_name is not None:
        context.cluster_name = cluster_name
    run = ControllerRun(context, gate, grace)
    try:
        yield run
    finally:
        await run.stop()
