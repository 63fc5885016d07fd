"""What the cloud-node controller records of each Node (kccm explain node): initialised or not
and why, the providerID, the sync's error with its retry; the periodic address refresh and its
result; the records go with the Node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from node_harness import (
    EXTERNAL,
    INTERNAL,
    PID,
    Env,
    kubelet_node,
    make_cloud,
)

from kccm.cloudprovider import PermissionDenied, Reason
from kccm.controllers.node import CONTROLLER_NAME
from kccm.controllers.node_state import ADDRESS_REFRESH
from kccm.controllers.syncstate import SyncRecord
from kccm.kube.resources import NODES
from kccm.util.clock import FakeClock


def record(env: Env, controller: str, name: str = "node0") -> SyncRecord | None:
    return env.ctrl.sync_states.states.last("node", name, controller)


async def sync_once(env: Env, name: str = "node0") -> SyncRecord:
    env.ctrl.queue.add(name)
    await env.ctrl.controller.process_next()
    found = record(env, CONTROLLER_NAME, name)
    assert found is not None
    return found


def failures(env: Env, controller: str, reason: str) -> float:
    value = env.registry.get_sample_value(
        "kccm_sync_failures_total", {"controller": controller, "reason": reason}
    )
    return value or 0.0


async def test_an_initialised_node_records_its_provider_id(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()])
    found = await sync_once(env)
    assert (found.ok, found.attempts, dict(found.detail)) == (
        True,
        0,
        {"initialized": True, "provider_id": "fake://12345"},
    )


async def test_no_metadata_leaves_it_uninitialised_and_says_why(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.override = lambda _node: None
    env: Env = await env_factory(cloud, [kubelet_node()])
    found = await sync_once(env)
    assert (found.ok, dict(found.detail)) == (
        True,
        {"initialized": False, "why": "the cloud provider returned no metadata"},
    )


async def test_a_failed_initialisation_is_classified_and_retried(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.fail("instance_metadata", PermissionDenied("ec2:DescribeInstances"), times=1)
    env: Env = await env_factory(cloud, [kubelet_node()])
    found = await sync_once(env)
    assert (found.ok, found.reason, found.attempts) == (False, Reason.PERMISSION, 1)
    assert found.next_retry_at is not None
    assert found.next_retry_at > found.at
    assert found.detail["initialized"] is False
    assert "ec2:DescribeInstances" in found.detail["why"]
    assert failures(env, CONTROLLER_NAME, "permission-denied") == 1
    await clock.advance(1)
    again = await sync_once(env)
    assert (again.ok, again.attempts, again.detail["initialized"]) == (True, 0, True)


async def test_an_already_initialised_node_is_recorded_from_its_spec(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    node = kubelet_node(taints=[], provider_id=PID)
    env: Env = await env_factory(make_cloud(True, clock=clock), [node])
    found = await sync_once(env)
    assert dict(found.detail) == {"initialized": True, "provider_id": PID}


@pytest.mark.parametrize(
    ("prepare", "ok", "result"),
    [
        pytest.param(lambda cloud: None, True, "updated", id="updated"),
        pytest.param(
            lambda cloud: cloud.fail("instance_metadata", RuntimeError("boom")),
            False,
            "error: boom",
            id="error",
        ),
        pytest.param(
            lambda cloud: setattr(cloud, "override", lambda _n: None),
            True,
            "skipped: the cloud provider returned no metadata",
            id="no-metadata",
        ),
    ],
)
async def test_the_address_refresh_records_when_and_its_result(
    prepare: Callable[[Any], None],
    ok: bool,
    result: str,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    cloud = make_cloud(True, clock=clock)
    prepare(cloud)
    env: Env = await env_factory(cloud, [kubelet_node(taints=[], provider_id=PID)])
    await env.ctrl.update_node_status()
    found = record(env, ADDRESS_REFRESH)
    assert found is not None
    assert (found.ok, found.detail["result"]) == (ok, result)
    assert found.detail["last_address_refresh"] == clock.now().timestamp()
    assert found.detail["provider_id"] == PID


async def test_an_unchanged_refresh_says_so(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    node = kubelet_node(taints=[], provider_id=PID, addresses=[INTERNAL, EXTERNAL])
    env: Env = await env_factory(make_cloud(True, clock=clock), [node])
    await env.ctrl.update_node_status()
    found = record(env, ADDRESS_REFRESH)
    assert found is not None
    assert found.detail["result"] == "unchanged"


async def test_a_deleted_node_is_forgotten(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(taints=[], provider_id=PID)]
    )
    await sync_once(env)
    await env.ctrl.update_node_status()
    assert len(env.ctrl.sync_states.states.get("node", "node0")) == 2
    await env.kube.delete(NODES, "node0")
    await clock.advance(0)
    assert env.ctrl.sync_states.states.get("node", "node0") == []
