"""An informer on Nodes converges to the apiserver's list through a forced 410 and through an
apiserver restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.interface import PatchType
from kccm.kube.resources import NODES
from kccm.runtime.informers import EventHandler, Informer
from kccm.testing.controllers import eventually
from kccm.testing.controlplane import ControlPlane, find_binaries
from kccm.testing.faults import PartitionableKube
from kccm.testing.pytest_plugin import unique_name

LABEL = "kccm-informer-test"


@pytest.fixture(scope="module")
def uncached_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane whose apiserver serves Node watches straight from etcd, so an etcd
    compaction really expires old resourceVersions (the watch cache would hide it)."""
    with ControlPlane(
        binaries=find_binaries(), extra_apiserver_args=["--watch-cache=false"]
    ) as plane:
        yield plane


@pytest.fixture
async def client(uncached_plane: ControlPlane) -> AsyncIterator[KubeApiClient]:
    kube = KubeApiClient(load_cluster_config(str(uncached_plane.admin_kubeconfig)), qps=0)
    yield kube
    await kube.close()


@dataclass
class Recorder:
    deletes: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    adds: list[str] = field(default_factory=list)

    def handler(self) -> EventHandler:
        return EventHandler(
            on_add=lambda o: self.adds.append(o["metadata"]["name"]),
            on_update=lambda old, new: self.updates.append(new["metadata"]["name"]),
            on_delete=lambda o: self.deletes.append(o["metadata"]["name"]),
        )


async def _create(kube: KubeApiClient, run: str) -> str:
    name = unique_name("inf")
    await kube.create(NODES, {"metadata": {"name": name, "labels": {LABEL: run}}})
    return name


async def _converged(kube: KubeApiClient, informer: Informer, run: str) -> None:
    """Wait until the cache holds exactly what the apiserver lists (names and versions)."""

    async def converged() -> bool:
        truth = await kube.list(NODES, label_selector=f"{LABEL}={run}")
        want = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in truth.items}
        have = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.items()}
        return want == have

    await eventually(converged, 30, interval=0.1)


@contextlib.asynccontextmanager
async def _running(informer: Informer) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(30):
            await informer.wait_for_sync()
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_forced_410_gap_is_reconciled(
    uncached_plane: ControlPlane, client: KubeApiClient
) -> None:
    run = unique_name("run")
    names = [await _create(client, run) for _ in range(4)]
    partition = PartitionableKube(client)
    informer = Informer(partition, NODES, label_selector=f"{LABEL}={run}")
    recorder = Recorder()
    informer.add_event_handler(recorder.handler())
    async with _running(informer):
        partition.cut()
        await client.delete(NODES, names[0])
        await client.delete(NODES, names[1])
        await client.patch(
            NODES, names[2], {"metadata": {"labels": {"v": "2"}}}, patch_type=PatchType.MERGE
        )
        added = await _create(client, run)
        await asyncio.to_thread(uncached_plane.compact_etcd)
        partition.heal()
        await _converged(client, informer, run)
    assert informer.relists >= 1, "the watch resumed from a compacted version and relisted"
    assert sorted(recorder.deletes) == sorted(names[:2]), "every delete reported exactly once"
    assert names[2] in recorder.updates
    assert added in recorder.adds


async def test_apiserver_restart_under_the_informer(
    uncached_plane: ControlPlane, client: KubeApiClient
) -> None:
    run = unique_name("run")
    names = [await _create(client, run) for _ in range(3)]
    informer = Informer(client, NODES, label_selector=f"{LABEL}={run}")
    recorder = Recorder()
    informer.add_event_handler(recorder.handler())
    async with _running(informer):
        await asyncio.to_thread(uncached_plane.restart_apiserver)
        await client.delete(NODES, names[0])
        added = await _create(client, run)
        await _converged(client, informer, run)
    assert recorder.deletes == [names[0]]
    assert added in recorder.adds


class LogWaiter(logging.Handler):
    """Collects the informer's log lines; ``wait_for`` awaits one containing a text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[int, str]] = []
        self._changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelno, record.getMessage()))
        self._changed.set()

    async def wait_for(self, text: str) -> tuple[int, str]:
        async with asyncio.timeout(60):
            while True:
                found = [line for line in self.lines if text in line[1]]
                if found:
                    return found[0]
                self._changed.clear()
                await self._changed.wait()


async def test_an_apiserver_outage_is_logged_when_it_starts_and_when_it_ends(
    uncached_plane: ControlPlane, client: KubeApiClient
) -> None:
    run = unique_name("run")
    await _create(client, run)
    informer = Informer(client, NODES, label_selector=f"{LABEL}={run}")
    waiter = LogWaiter()
    logger = logging.getLogger("kccm.runtime.informers")
    logger.addHandler(waiter)
    logger.setLevel(logging.INFO)
    try:
        async with _running(informer):
            await asyncio.to_thread(uncached_plane.kill_apiserver)
            level, message = await waiter.wait_for("the cache is stale")
            assert level == logging.WARNING
            assert "nodes" in message
            await asyncio.to_thread(uncached_plane.restart_apiserver)
            added = await _create(client, run)
            level, message = await waiter.wait_for("answers again after")
            assert level == logging.INFO
            await _converged(client, informer, run)
            assert added in {o["metadata"]["name"] for o in informer.items()}
    finally:
        logger.removeHandler(waiter)
        logger.setLevel(logging.NOTSET)
