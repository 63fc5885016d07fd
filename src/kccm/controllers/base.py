"""What every cloud controller is built from, and the metrics they share.

A controller gets one :class:`ControllerContext` (production values, test seams explicit):
the API client, the shared informer factory, the provider behind the call gate, the event
broadcaster, the metrics registry, the clock and the cluster name. Each controller module
exposes ``build(context, options) -> <Controller> | None`` returning None (with a logged
warning) when the provider lacks the capability it needs — upstream skips such a controller
instead of failing. :class:`CloudController` is the shape every controller shares.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from logging import Logger

from prometheus_client import CollectorRegistry, Gauge

from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.syncstate import SyncStates
from kccm.kube.interface import KubeClient
from kccm.runtime.controller import Controller, Outcome, until
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import Informer, SharedInformerFactory
from kccm.runtime.ratelimiters import RateLimiter
from kccm.runtime.workqueue import RateLimitingQueue
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "DEFAULT_CLUSTER_NAME",
    "CloudController",
    "ControllerContext",
    "running_managed_controllers",
]

DEFAULT_CLUSTER_NAME = "kubernetes"


@dataclass
class ControllerContext:
    kube: KubeClient
    informers: SharedInformerFactory
    cloud: GatedCloud
    events: EventBroadcaster
    registry: CollectorRegistry
    clock: Clock = REAL_CLOCK
    cluster_name: str = DEFAULT_CLUSTER_NAME
    sync_states: SyncStates | None = None
    """The daemon's one :class:`SyncStates` (``kccm explain``); None builds one on
    ``registry`` and ``clock`` (a controller run on its own, tests)."""

    def __post_init__(self) -> None:
        if self.sync_states is None:
            self.sync_states = SyncStates(registry=self.registry, clock=self.clock)

    @property
    def states(self) -> SyncStates:
        assert self.sync_states is not None  # set by __post_init__
        return self.sync_states

    def has_instances(self, controller: str, log: Logger) -> bool:
        """Whether the provider has Instances or InstancesV2; when it has neither, ``controller``
        is skipped with a warning (upstream's node controllers skip rather than fail)."""
        if self.cloud.instances() is None and self.cloud.instances_v2() is None:
            log.warning("Skipping %s: cloud provider does not support instances", controller)
            return False
        return True


_GAUGES: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()


def running_managed_controllers(registry: CollectorRegistry, name: str) -> Gauge:
    """``running_managed_controllers{name, manager="cloud-controller-manager"}`` (BETA upstream),
    set to 1 while a controller runs and 0 once stopped; ``name`` is the legacy short name
    (``cloud-node``, ``cloud-node-lifecycle``, ``service``, ``route``)."""
    gauge = _GAUGES.get(registry)
    if gauge is None:
        gauge = Gauge(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            ["name", "manager"],
            registry=registry,
        )
        _GAUGES[registry] = gauge
    return gauge.labels(name=name, manager="cloud-controller-manager")


@dataclass(frozen=True)
class _Periodic:
    fn: Callable[[], Awaitable[None]]
    period: float
    sliding: bool
    cancel_on_stop: bool


class CloudController:
    """What every cloud controller shares, written once: the running gauge, the stop event,
    the cache wait, the work queues with their workers, the periodic loops and the graceful
    stop. A controller declares its watches, queues (``work_queue``) and loops (``every``) in
    its constructor and provides their reconcile functions; ``run``/``stop`` come from here."""

    def __init__(self, context: ControllerContext, name: str, alias: str, logger: Logger) -> None:
        self.clock = context.clock
        self.name = name
        self._context = context
        self._log = logger
        self._gauge = running_managed_controllers(context.registry, alias)
        self._stopping = asyncio.Event()
        self._loops: list[Controller[str]] = []
        self._periodic: list[_Periodic] = []
        self._caches: list[Informer] = []
        self._cancel_on_stop: list[asyncio.Task[None]] = []
        self.starts_informers = False
        """True: ``run`` starts the shared informers itself (a controller run on its own)."""

    def work_queue(
        self,
        queue_name: str,
        rate_limiter: RateLimiter,
        reconcile: Callable[[str], Awaitable[None]],
        *,
        workers: int,
        loop_name: str | None = None,
        on_outcome: Outcome[str] | None = None,
    ) -> RateLimitingQueue[str]:
        """A named queue drained by ``workers`` tasks into ``reconcile(key)``; ``on_outcome``
        learns each sync's result (:class:`~kccm.runtime.controller.Controller`)."""
        context = self._context
        queue: RateLimitingQueue[str] = RateLimitingQueue(
            rate_limiter, queue_name, registry=context.registry, clock=context.clock
        )
        self._loops.append(
            Controller(
                loop_name or self.name,
                queue,
                reconcile,
                workers=workers,
                clock=context.clock,
                logger=self._log,
                on_outcome=on_outcome,
            )
        )
        return queue

    def every(
        self,
        period: float,
        fn: Callable[[], Awaitable[None]],
        *,
        sliding: bool = True,
        cancel_on_stop: bool = False,
    ) -> None:
        """Run ``fn`` every ``period`` seconds while the controller runs (``wait.Until``, or
        ``wait.NonSlidingUntil`` with ``sliding=False``). A stop ends the loop after the pass
        in flight, or at once with ``cancel_on_stop``."""
        self._periodic.append(_Periodic(fn, period, sliding, cancel_on_stop))

    def wait_for_caches(self, *informers: Informer) -> None:
        """Informers whose caches must be synced before the workers and loops start."""
        self._caches.extend(informers)

    @property
    def controller(self) -> Controller[str]:
        """The first work queue's loop."""
        return self._loops[0]

    async def run(self) -> None:
        """Wait for the caches, then run every queue's workers and every periodic loop until
        :meth:`stop` or cancellation."""
        self._gauge.set(1)
        tasks: list[asyncio.Task[None]] = []
        try:
            if self.starts_informers:
                self._context.informers.start()
            for informer in self._caches:
                await informer.wait_for_sync()
            tasks = [
                asyncio.create_task(self._loop(p), name=f"{self.name}-loop") for p in self._periodic
            ]
            self._cancel_on_stop = [
                t for t, p in zip(tasks, self._periodic, strict=True) if p.cancel_on_stop
            ]
            tasks += [asyncio.create_task(loop.run(), name=loop.name) for loop in self._loops]
            await _gather_or_fail(tasks)
        finally:
            self._gauge.set(0)
            await _cancel(tasks)

    async def stop(self, grace: float = 30.0) -> bool:
        """Stop taking work; in-flight reconciles get ``grace`` seconds. True when every
        worker finished in time."""
        self._stopping.set()
        finished = await asyncio.gather(*(loop.stop(grace) for loop in self._loops))
        await _cancel(self._cancel_on_stop)
        return all(finished)

    async def _loop(self, periodic: _Periodic) -> None:
        await until(
            periodic.fn,
            periodic.period,
            stop=self._stopping,
            sliding=periodic.sliding,
            clock=self.clock,
            logger=self._log,
        )


async def _gather_or_fail(tasks: list[asyncio.Task[None]]) -> None:
    """Wait for every task; the first failure cancels the others and is raised."""
    if not tasks:
        return
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc
    await asyncio.gather(*tasks)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
