"""The chaos bench's workload: LoadBalancer Services created, changed (ports; an annotation
the balancer depends on) and deleted, Nodes registered and deleted, at random moments drawn
from a seeded RNG, while the faults happen. A call the apiserver does not answer (it may be
restarting) is counted and the step skipped: the workload goes on."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kccm.kube.errors import KubeError, NotFound
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.chaos.world import ChaosWorld

__all__ = ["Workload"]

PAUSE = (0.3, 1.5)
"""Seconds between two steps, drawn uniformly."""


@dataclass
class Workload:
    kube: KubeClient
    world: ChaosWorld
    rng: random.Random
    namespace: str
    max_services: int = 6
    max_nodes: int = 5
    min_nodes: int = 2
    services: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    _made: int = 0

    async def seed_nodes(self) -> None:
        """Register ``min_nodes`` Nodes (retrying through apiserver restarts)."""
        while len(self.nodes) < self.min_nodes:
            if not await self._step("add_node", self.add_node):
                await asyncio.sleep(0.2)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(self.rng.uniform(*PAUSE))
            name, step = self._pick()
            await self._step(name, step)

    def _pick(self) -> tuple[str, Any]:
        choices: list[tuple[str, Any]] = []
        if len(self.services) < self.max_services:
            choices += [("create_service", self.create_service)] * 3
        if self.services:
            choices += [
                ("change_ports", self.change_ports),
                ("change_annotation", self.change_annotation),
                ("delete_service", self.delete_service),
            ]
        if len(self.nodes) < self.max_nodes:
            choices.append(("add_node", self.add_node))
        if len(self.nodes) > self.min_nodes:
            choices.append(("delete_node", self.delete_node))
        return self.rng.choice(choices)

    async def _step(self, name: str, step: Any) -> bool:
        try:
            await step()
        except (KubeError, OSError, TimeoutError) as exc:
            self.failed[f"{name}: {type(exc).__name__}"] += 1
            return False
        except Exception as exc:  # aiohttp's client errors while the apiserver restarts
            if type(exc).__module__.startswith("aiohttp"):
                self.failed[f"{name}: {type(exc).__name__}"] += 1
                return False
            raise
        self.done[name] += 1
        return True

    def _ports(self) -> list[Obj]:
        count = self.rng.choice((1, 1, 2))
        numbers = self.rng.sample(range(80, 90), count)
        return [{"name": f"p{n}", "port": n, "protocol": "TCP"} for n in numbers]

    async def create_service(self) -> None:
        self._made += 1
        name = f"svc-{self._made}"
        body = {
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "annotations": dict(self.world.service_annotations()),
            },
            "spec": {"type": "LoadBalancer", "ports": self._ports()},
        }
        self.services.append(name)  # before the call: it may be created though unanswered
        await self.kube.create(SERVICES, body)

    async def change_ports(self) -> None:
        name = self.rng.choice(self.services)
        patch = [{"op": "replace", "path": "/spec/ports", "value": self._ports()}]
        await self._patch(name, patch, PatchType.JSON)

    async def change_annotation(self) -> None:
        name = self.rng.choice(self.services)
        value = self.world.annotation_value(self.rng.randrange(1000))
        patch = {"metadata": {"annotations": {self.world.annotation: value}}}
        await self._patch(name, patch, PatchType.MERGE)

    async def _patch(self, name: str, patch: Any, patch_type: PatchType) -> None:
        try:
            await self.kube.patch(
                SERVICES, name, patch, patch_type=patch_type, namespace=self.namespace
            )
        except NotFound:
            self.services.remove(name)  # its create was never done

    async def delete_service(self) -> None:
        name = self.rng.choice(self.services)
        with contextlib.suppress(NotFound):
            await self.kube.delete(SERVICES, name, namespace=self.namespace)
        self.services.remove(name)  # after the call: one that failed may be tried again

    async def add_node(self) -> None:
        node = self.world.new_node()
        if node is None:
            return
        self.nodes.append(node["metadata"]["name"])
        await self.kube.create(NODES, node)

    async def delete_node(self) -> None:
        name = self.rng.choice(self.nodes)
        with contextlib.suppress(NotFound):
            await self.kube.delete(NODES, name)
        self.nodes.remove(name)  # after the call: one that failed may be tried again
        self.world.node_deleted(name)
