"""first_node_state: a Node's state that lasts a moment is found from a watch, however soon
the Node goes (on the in-memory kube client)."""

from __future__ import annotations

import asyncio

import pytest

from kccm.kube.fake import FakeKube
from kccm.kube.interface import PatchType
from kccm.kube.resources import NODES
from kccm.testing.nodewatch import first_node_state, ready_condition, ready_unknown

UNKNOWN = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady"}


async def _node(kube: FakeKube, name: str) -> str:
    created = await kube.create(NODES, {"metadata": {"name": name}, "status": {}})
    await _ready(kube, name, READY)
    return str(created["metadata"]["resourceVersion"])


async def _ready(kube: FakeKube, name: str, condition: dict[str, str]) -> None:
    patch = {"status": {"conditions": [condition]}}
    await kube.patch(NODES, name, patch, patch_type=PatchType.MERGE, subresource="status")


async def test_a_state_the_node_leaves_at_once_is_found() -> None:
    kube = FakeKube()
    version = await _node(kube, "a")
    await _ready(kube, "a", UNKNOWN)  # marked ...
    await kube.delete(NODES, "a")  # ... and deleted before anyone polled
    async with asyncio.timeout(5):
        node = await first_node_state(kube, "a", version, ready_unknown)
    assert ready_condition(node) == UNKNOWN


async def test_a_node_deleted_before_the_state_is_an_error() -> None:
    kube = FakeKube()
    version = await _node(kube, "a")
    await kube.delete(NODES, "a")
    with pytest.raises(LookupError, match="Node a was deleted before the awaited state"):
        async with asyncio.timeout(5):
            await first_node_state(kube, "a", version, ready_unknown)


async def test_another_nodes_state_is_not_taken() -> None:
    kube = FakeKube()
    version = await _node(kube, "a")
    await _node(kube, "b")
    await _ready(kube, "b", UNKNOWN)
    waiting = asyncio.create_task(first_node_state(kube, "a", version, ready_unknown))
    await _ready(kube, "a", UNKNOWN)
    async with asyncio.timeout(5):
        node = await waiting
    assert node["metadata"]["name"] == "a"
