"""Fixtures of the cloud-node-controller's unit tests (see node_harness.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from node_harness import (
    UPSTREAM_REFRESH,
    Env,
    ScriptedCloud,
)
from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import node as node_controller
from kccm.controllers.base import ControllerContext
from kccm.controllers.node import NodeControllerOptions
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock


@pytest.fixture
async def env_factory() -> AsyncIterator[Callable[..., Any]]:
    made: list[Env] = []

    async def factory(
        cloud: ScriptedCloud,
        nodes: list[Obj],
        *,
        kube: FakeKube | None = None,
        options: NodeControllerOptions | None = None,
    ) -> Env:
        kube = kube or FakeKube()
        clock = cloud._clock
        assert isinstance(clock, FakeClock)
        for n in nodes:
            await kube.create(NODES, n)
        registry = CollectorRegistry()
        gate = CallGate(registry=registry, clock=clock)
        informers = SharedInformerFactory(kube, clock=clock)
        events = EventBroadcaster(kube, clock=clock)
        context = ControllerContext(
            kube, informers, GatedCloud(cloud, gate), events, registry, clock
        )
        # Upstream's tests describe a refresh of every node at every tick: period 0.
        ctrl = node_controller.build(context, options or UPSTREAM_REFRESH)
        assert ctrl is not None
        informers.start()
        await informers.wait_for_sync()
        events.start()
        kube.requests.clear()
        cloud.clear_calls()
        env = Env(kube, cloud, clock, registry, events, informers, gate, ctrl)
        made.append(env)
        return env

    yield factory
    for env in made:
        for task in env.tasks:
            task.cancel()
        await asyncio.gather(*env.tasks, return_exceptions=True)
        await env.events.shutdown(grace=0)
        await env.informers.stop()
        env.gate.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
