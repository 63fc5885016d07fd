"""cloud-node-controller (upstream node_controller_test.go: TestNodeAddressesNotUpdate, the
periodic address refresh, TestUpdateNodeStatus)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from node_harness import (
    ALL_LABELS,
    EXTERNAL,
    INTERNAL,
    INTERNAL2,
    KUBELET_HOSTNAME,
    KUBELET_IP,
    OTHER_TAINT,
    PID,
    Env,
    ScriptedCloud,
    addr,
    kubelet_node,
    make_cloud,
)

from kccm.controllers import node as node_controller
from kccm.controllers.node import NodeControllerOptions
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeInstance
from kccm.util.clock import FakeClock

# -- TestNodeAddressesNotUpdate, addresses ----------------------------------------------------


@pytest.mark.parametrize(
    "v2", [pytest.param(False, id="legacy"), pytest.param(True, id="instanceV2")]
)
async def test_node_addresses_not_updated_when_unchanged(
    v2: bool, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    node = kubelet_node(
        taints=[], provider_id=PID, addresses=[EXTERNAL, KUBELET_HOSTNAME, INTERNAL]
    )
    env: Env = await env_factory(make_cloud(v2, clock=clock), [node])
    await env.ctrl.update_node_status()
    assert env.writes() == []


@pytest.mark.parametrize(
    ("annotation", "cloud_addresses", "expected"),
    [
        pytest.param(
            None, (INTERNAL, EXTERNAL), [INTERNAL, EXTERNAL, KUBELET_HOSTNAME],
            id="kubelet-hostname-appended",
        ),
        pytest.param(
            "10.0.0.1", (INTERNAL, EXTERNAL), [INTERNAL, EXTERNAL, KUBELET_HOSTNAME],
            id="node-ip-single",
        ),
        pytest.param(
            "10.0.0.2", (INTERNAL, INTERNAL2, EXTERNAL), [INTERNAL2, EXTERNAL, KUBELET_HOSTNAME],
            id="node-ip-drops-other-same-type",
        ),
        pytest.param(
            "2001:db8::1,10.0.0.2",
            (INTERNAL, {"type": "InternalIP", "address": "2001:db8::1"}, INTERNAL2, EXTERNAL),
            [{"type": "InternalIP", "address": "2001:db8::1"}, INTERNAL2, EXTERNAL,
             KUBELET_HOSTNAME],
            id="node-ip-dual-stack",
        ),
        pytest.param(
            "10.9.9.9", (INTERNAL, EXTERNAL), [KUBELET_HOSTNAME, KUBELET_IP],
            id="node-ip-not-in-cloud-skips-update",
        ),
        pytest.param(None, (), [KUBELET_HOSTNAME, KUBELET_IP], id="empty-cloud-list-no-change"),
    ],
)  # fmt: skip
async def test_periodic_address_refresh(
    annotation: str | None,
    cloud_addresses: tuple[dict[str, str], ...],
    expected: list[dict[str, str]],
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    annotations = {"alpha.kubernetes.io/provided-node-ip": annotation} if annotation else None
    node = kubelet_node(taints=[], provider_id=PID, annotations=annotations)
    cloud = make_cloud(True, clock=clock, addresses=tuple(addr(a) for a in cloud_addresses))
    env: Env = await env_factory(cloud, [node])
    await env.ctrl.update_node_status()
    assert (await env.node())["status"]["addresses"] == expected


async def test_periodic_refresh_touches_only_addresses(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """Instance type, zone and labels changed in the cloud: only addresses follow."""
    node = kubelet_node(taints=[OTHER_TAINT], provider_id=PID, labels=ALL_LABELS)
    cloud = make_cloud(
        True, clock=clock, instance_type="t2.big", zone="z9", region="r9",
        additional_labels={"my.org/new": "1"}, addresses=(addr(INTERNAL2),),
    )  # fmt: skip
    env: Env = await env_factory(cloud, [node])
    before = await env.node()
    await env.ctrl.update_node_status()
    after = await env.node()
    assert after["status"]["addresses"] == [INTERNAL2, KUBELET_HOSTNAME]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"] == before["spec"]


async def test_periodic_refresh_skips_tainted_nodes(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()])
    await env.ctrl.update_node_status()
    assert env.cloud.calls == []
    assert env.writes() == []


async def test_periodic_refresh_legacy_uses_provider_id_else_name(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(False, clock=clock)
    cloud.add_instance(FakeInstance(name="node1", addresses=(addr(INTERNAL2),)))
    nodes = [kubelet_node(taints=[], provider_id=PID), kubelet_node("node1", taints=[])]
    env: Env = await env_factory(cloud, nodes)
    await env.ctrl.update_node_status()
    assert sorted((c.method, c.args) for c in cloud.call_log) == [
        ("node_addresses", ("node1",)),
        ("node_addresses_by_provider_id", (PID,)),
    ]


async def test_periodic_refresh_error_skips_node(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.fail("instance_metadata", RuntimeError("boom"))
    env: Env = await env_factory(cloud, [kubelet_node(taints=[], provider_id=PID)])
    await env.ctrl.update_node_status()
    assert env.writes() == []


# -- TestUpdateNodeStatus: parallel workers ---------------------------------------------------


@pytest.mark.parametrize("workers", [1, 5, 10, 30])
async def test_update_node_status_workers(
    workers: int, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = ScriptedCloud(clock=clock)
    nodes = []
    for i in range(100):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL),)))
        nodes.append(kubelet_node(f"node{i}", taints=[], addresses=[]))
    cloud.set_latency("instance_metadata", 0.01)
    options = NodeControllerOptions(
        concurrent_node_syncs=1,
        concurrent_node_status_updates=workers,
        node_metadata_refresh_period=0,
    )
    env: Env = await env_factory(cloud, nodes, options=options)
    start = clock.monotonic()
    task = asyncio.create_task(env.ctrl.update_node_status())
    await clock.run_until_idle()
    await task
    assert cloud.calls.count("instance_metadata") == 100
    assert clock.monotonic() - start == pytest.approx(0.01 * -(-100 // workers))
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))


def test_status_update_workers_default_to_node_syncs() -> None:
    assert (
        NodeControllerOptions().concurrent_node_syncs
        == node_controller.DEFAULT_CONCURRENT_NODE_SYNCS
    )
    assert NodeControllerOptions(concurrent_node_syncs=7).status_update_workers == 7
    assert NodeControllerOptions(concurrent_node_status_updates=3).status_update_workers == 3
    assert NodeControllerOptions().node_status_update_frequency == 300.0


async def test_run_refreshes_status_every_period(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(taints=[], provider_id=PID)]
    )
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    await clock.advance(0)
    assert env.cloud.calls.count("instance_metadata") == 1
    assert (
        env.registry.get_sample_value(
            "running_managed_controllers",
            {"name": "cloud-node", "manager": "cloud-controller-manager"},
        )
        == 1
    )
    await clock.advance(299)
    assert env.cloud.calls.count("instance_metadata") == 1
    await clock.advance(1)
    assert env.cloud.calls.count("instance_metadata") == 2
    assert await env.ctrl.stop(grace=1)
    await run
    assert (
        env.registry.get_sample_value(
            "running_managed_controllers",
            {"name": "cloud-node", "manager": "cloud-controller-manager"},
        )
        == 0
    )


async def test_run_initialises_with_workers(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = ScriptedCloud(clock=clock)
    nodes = []
    for i in range(20):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL),)))
        nodes.append(kubelet_node(f"node{i}"))
    env: Env = await env_factory(cloud, nodes)
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    for _ in range(100):
        await clock.advance(0.01)
        if all(not n["spec"].get("taints") for n in env.kube.objects(NODES)):
            break
    assert all(n["spec"].get("providerID") for n in env.kube.objects(NODES))
    assert env.ctrl.queue.name == "Nodes"
    await env.ctrl.stop(grace=1)
