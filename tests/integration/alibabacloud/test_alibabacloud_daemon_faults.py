"""kccm's daemon (``--cloud-provider=alibabacloud``, the shipped ServiceAccount and RBAC) on the
Alibaba Cloud emulator and the real apiserver, with faults injected (issue 38 item 5).

Each test starts its own emulator and daemon with two ECS instances and their Nodes, and
leaves the apiserver (Nodes gone, its namespace's Services gone) and the emulator
(``assert_clean`` against what it held before) as it found them:

- Nodes are initialised through ``Throttling.User`` answers on ``DescribeInstances``;
- an instance deleted in ECS deletes its Node, while ``ServiceUnavailable`` (503) answers never
  do (upstream v2.14.0 deletes a Node only when ECS says its instance does not exist; it has
  no shutdown taint, so there is no shutdown case);
- a LoadBalancer Service's life through 503s on SLB writes: published, its port changed (the
  listener follows), Nodes joining and leaving (the vServer group's members follow),
  ``loadBalancerSourceRanges`` (refused with a Warning, as upstream ignores them on a CLB),
  deleted (nothing left).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, event_summaries, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, apply_rbac
from kccm.testing.daemonworld import (
    blocking,
    ingress_ip,
    lb_service,
    node_gone,
    patient,
    set_ready,
    start_world_daemon,
)
from kccm.testing.kubelet import kubelet_node

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
VPC, VSWITCH, CLUSTER = "vpc-e2e-faults", "vsw-e2e-faults", "kccm-ali-faults"
CONFIG = {
    "region": "cn-hangzhou",
    "vpcid": VPC,
    "vswitchid": VSWITCH,
    "accessKeyID": "a2NjbS1haw==",  # base64 of the emulator's default key, as upstream's
    "accessKeySecret": "a2NjbS1zZWNyZXQ=",
    "clusterID": CLUSTER,
}


@dataclass
class World:
    """One test's emulator and daemon, and the instances it made (``names``: their IDs,
    which are also their Nodes' names)."""

    emu: AlibabaEmulator
    daemon: Daemon
    kube: KubeApiClient
    names: list[str] = field(default_factory=list)

    async def until(self, probe: Callable[[], Any]) -> Any:
        """``probe`` (async) truthy within the bound; fails at once if kccm has exited."""

        async def watched() -> Any:
            assert self.daemon.proc.poll() is None, "kccm exited"
            return await probe()

        return await patient(watched)

    async def add_instance(self, index: int) -> str:
        instance = await blocking(
            self.emu.admin.add_instance,
            vpc=VPC,
            vswitch=VSWITCH,
            private_ip=f"10.0.6.{index + 1}",
            instance_type="ecs.g7.xlarge",
        )
        name = str(instance["InstanceId"])
        self.names.append(name)
        return name

    async def add_node(self, name: str, index: int) -> None:
        node = kubelet_node(name, f"10.244.{index}.0/24")
        node["spec"]["providerID"] = f"cn-hangzhou.{name}"
        await self.kube.create(NODES, node)

    def calls(self, action: str, since: int, status: int) -> int:
        return sum(
            1
            for r in self.emu.admin.requests(since)
            if r["path"] == action and r["status"] == status
        )

    def members(self) -> set[str]:
        (lb_id,) = self.emu.state()["balancers"]
        lb = self.emu.admin.balancer(lb_id)
        return {m["ServerId"] for g in lb["VServerGroups"] for m in g["BackendServers"]}

    def listeners(self) -> set[str]:
        return {entry.split(":", 1)[1] for entry in self.emu.state()["listeners"]}


@contextlib.asynccontextmanager
async def world(
    plane: ControlPlane, kube: KubeApiClient, tmp: Path, nodes: int = 2
) -> AsyncIterator[World]:
    """An emulator with ``nodes`` instances and a route table, kccm's daemon on it, the
    instances' Nodes created (not awaited); afterwards the Nodes go, kccm stops cleanly and
    the emulator holds what it held before."""
    with alibaba_emulator() as emu:
        baseline = emu.state()
        table = emu.admin.add_route_table(VPC)
        config = tmp / "cloud-config.yaml"
        config.write_text(json.dumps({"Global": CONFIG}))
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-alibabacloud-faults")
        daemons, daemon = start_world_daemon(
            "alibabacloud",
            config,
            plane,
            tmp,
            cluster=CLUSTER,
            allocate_node_cidrs=False,
            env=emu.endpoint_env(),
        )
        env = World(emu, daemon, kube)
        try:
            for index in range(nodes):
                await env.add_node(await env.add_instance(index), index)
            yield env
            await blocking(emu.admin.clear_faults)
            await delete_until_gone(kube, NODES, env.names, within=120)
            await env.until(lambda: blocking(lambda: emu.state()["route_entries"] == []))
        finally:
            daemons.stop_all(grace=30)
            emu.admin.clear_faults()
            emu.admin.delete_route_table(table)
            for name in env.names:
                with contextlib.suppress(Exception):  # the test may have deleted it
                    emu.admin.delete_instance(name)
        emu.assert_clean(baseline)
        assert daemon.proc.returncode == 0, "kccm did not finish its in-flight work in 30 s"


# -- Nodes ------------------------------------------------------------------------------------


async def test_nodes_are_initialised_through_throttling(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> None:
    """``DescribeInstances`` throttled three times (400 ``Throttling.User``) before the Nodes
    appear: both are initialised all the same, every fault is met, kccm stays up."""
    async with world(control_plane, kube, tmp_path, nodes=0) as env:
        await blocking(env.emu.admin.fault, "DescribeInstances", code="Throttling.User", times=3)
        since = await blocking(env.emu.admin.last_seq)
        for index in range(2):
            await env.add_node(await env.add_instance(index), index)
        nodes = await env.until(lambda: initialised_nodes(kube, env.names))
        assert {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes} == {
            "ecs.g7.xlarge"
        }
        assert await blocking(env.emu.admin.faults) == []
        assert await blocking(env.calls, "DescribeInstances", since, 400) == 3
        assert env.daemon.proc.poll() is None


async def test_a_deleted_instance_deletes_its_node_an_ecs_error_never_does(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> None:
    """Both Nodes NotReady; ECS answers every ``DescribeInstances`` with 503
    ``ServiceUnavailable`` for several lifecycle rounds: no Node goes. Faults cleared, one
    instance deleted in ECS: its Node goes, the other stays."""
    async with world(control_plane, kube, tmp_path) as env:
        await env.until(lambda: initialised_nodes(kube, env.names))
        for name in env.names:
            await set_ready(kube, name, "False")
        admin = env.emu.admin
        since = await blocking(admin.last_seq)
        await blocking(
            admin.fault, "DescribeInstances", code="ServiceUnavailable", status=503, times=0
        )

        async def rounds_survived() -> bool:
            # several lifecycle rounds (--node-monitor-period=1s) answered 503, no Node gone
            for name in env.names:
                assert not await node_gone(kube, name), f"{name} deleted on an ECS error"
            return bool(await blocking(env.calls, "DescribeInstances", since, 503) >= 4)

        await env.until(rounds_survived)
        await blocking(admin.clear_faults)

        gone, kept = env.names
        await blocking(admin.delete_instance, gone)
        await env.until(lambda: node_gone(kube, gone))
        assert not await node_gone(kube, kept)


# -- a LoadBalancer Service -------------------------------------------------------------------


async def _patch_service(kube: KubeApiClient, ns: str, ops: list[dict[str, Any]]) -> None:
    await kube.patch(SERVICES, "web", ops, namespace=ns, patch_type=PatchType.JSON)


async def test_a_balancer_lives_through_slb_write_faults(
    control_plane: ControlPlane, kube: KubeApiClient, kube_namespace: str, tmp_path: Path
) -> None:
    """Created through one 503 on ``CreateVServerGroup`` and one on ``CreateLoadBalancerTCP
    Listener``: published, both Nodes members. Its port 80 -> 8080 (one 503 on
    ``DeleteLoadBalancerListener``): the listener follows. A third Node joins, then leaves
    (one 503 on ``AddVServerGroupBackendServers``): the members follow. Source ranges: a
    Warning, no change in SLB. Deleted (one 503 on ``DeleteLoadBalancer``): nothing left."""
    ns = kube_namespace
    async with world(control_plane, kube, tmp_path) as env:
        admin = env.emu.admin
        await env.until(lambda: initialised_nodes(kube, env.names))
        for action in ("CreateVServerGroup", "CreateLoadBalancerTCPListener"):
            await blocking(admin.fault, action, code="ServiceUnavailable", status=503)
        await kube.create(SERVICES, lb_service("web"), namespace=ns)
        ip = await env.until(lambda: ingress_ip(kube, ns, "web"))
        assert ip
        assert await blocking(admin.faults) == []
        await env.until(lambda: blocking(lambda: env.members() == set(env.names)))
        assert await blocking(env.listeners) == {"80/tcp"}

        await blocking(
            admin.fault, "DeleteLoadBalancerListener", code="ServiceUnavailable", status=503
        )
        await _patch_service(
            kube, ns, [{"op": "replace", "path": "/spec/ports/0/port", "value": 8080}]
        )
        await env.until(lambda: blocking(lambda: env.listeners() == {"8080/tcp"}))

        await blocking(
            admin.fault, "AddVServerGroupBackendServers", code="ServiceUnavailable", status=503
        )
        third = await env.add_instance(2)
        await env.add_node(third, 2)
        await env.until(lambda: blocking(lambda: env.members() == set(env.names)))
        await delete_until_gone(kube, NODES, [third], within=120)
        await env.until(lambda: blocking(lambda: env.members() == set(env.names) - {third}))

        before = await blocking(env.emu.state)
        ranges = {"op": "add", "path": "/spec/loadBalancerSourceRanges", "value": ["10.1.0.0/16"]}
        await _patch_service(kube, ns, [ranges])

        async def warned() -> bool:
            return any(
                kind == "Warning" and reason == "UnsupportedSourceRanges"
                for _, kind, reason, _ in await event_summaries(kube, ns, "web")
            )

        await env.until(warned)
        assert await blocking(env.emu.state) == before

        await blocking(admin.fault, "DeleteLoadBalancer", code="ServiceUnavailable", status=503)
        await delete_until_gone(kube, SERVICES, ["web"], ns, within=120)
        await env.until(lambda: blocking(lambda: env.emu.state()["balancers"] == []))
