"""The kccm daemon with ``--cloud-provider=aws`` against the real apiserver and moto (a real
HTTP server), through a fault proxy that answers ``Throttling`` to every 7th AWS request.

Sizes: ``KCCM_AWS_E2E_NODES`` instances/Nodes and ``KCCM_AWS_E2E_SERVICES`` LoadBalancer
Services (defaults small for CI). ``KCCM_AWS_E2E_REPORT=<file>`` writes the figures as JSON.
The acceptance run::

    KCCM_AWS_E2E_NODES=100 KCCM_AWS_E2E_SERVICES=20 KCCM_AWS_E2E_REPORT=/tmp/aws-e2e.json \\
        .venv/bin/python -m pytest tests/integration/test_aws_daemon.py -q -s
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kccm.emulators import aws as support
from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import (
    EVENTS,
    NODES,
    SERVICES,
)
from kccm.testing.controllers import all_absent
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controllers import initialised_nodes as _all_initialised
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemons, apply_rbac
from kccm.testing.kubelet import kubelet_node
from kccm.testing.kubelet import ready_condition as _ready
from kccm.testing.pytest_plugin import KubeCleanup

ROOT = Path(__file__).resolve().parents[2]
NODES_WANTED = int(os.environ.get("KCCM_AWS_E2E_NODES", "6"))
SERVICES_WANTED = int(os.environ.get("KCCM_AWS_E2E_SERVICES", "3"))
BUDGET = 60.0 + 3.0 * NODES_WANTED + 6.0 * SERVICES_WANTED


eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.5)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


@dataclass
class Env:
    world: Any
    proxy: Any
    tmp: Path
    plane: ControlPlane
    daemons: Daemons
    figures: dict[str, Any] = field(default_factory=dict)

    def start(self, *flags: str, **config_keys: str) -> Path:
        config = self.tmp / "aws.conf"
        config.write_text(
            self.world.cloud_config(self.proxy.url, APIMaxAttempts="6", **config_keys)
        )
        daemon = self.daemons.start(
            "aws",
            config,
            self.plane.kubeconfig_for(SA_USER, SA_GROUPS),
            f"--cluster-name={self.world.cluster_id}",
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=false",
            "--node-monitor-period=1s",
            "--route-reconciliation-period=2s",
            "--v=2",
            *flags,
            env=support.CREDENTIALS,
            unset=("AWS_PROFILE",),
        )
        return daemon.log

    def stop(self) -> None:
        self.daemons.stop_all(grace=30)


async def release_services(kube: KubeApiClient) -> None:
    """Once kccm is stopped: a Service a failed test left in its namespace, its finalizer held
    by the stopped daemon, would be ensured by the next test's daemon on this shared apiserver
    (in another world) and fail that test too. Deleted here, finalizer and all."""
    for svc in (await kube.list(SERVICES)).items:
        meta = svc["metadata"]
        name, ns = meta["name"], meta["namespace"]
        if not ns.startswith("kccm-test") or not meta.get("finalizers"):
            continue
        try:
            await kube.delete(SERVICES, name, namespace=ns)
            await kube.patch(
                SERVICES,
                name,
                {"metadata": {"finalizers": None}},
                patch_type=PatchType.MERGE,
                namespace=ns,
            )
        except NotFound:
            continue


@pytest.fixture
def moto_url() -> Iterator[str]:
    with support.moto_emulator() as moto, support.no_leaked_balancers(moto.url):
        yield moto.url


_RANDOM = random.SystemRandom()  # pytest-randomly re-seeds `random` alike before each test


@pytest.fixture
async def env(
    control_plane: ControlPlane, kube: KubeApiClient, moto_url: str, tmp_path: Path
) -> AsyncIterator[Env]:
    await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-aws-e2e")
    world = await asyncio.to_thread(
        support.build_world,
        moto_url,
        f"e2e{_RANDOM.randrange(16**6):06x}",
        NODES_WANTED,
        _RANDOM.randrange(20, 250),
    )
    proxy = support.FaultProxy(moto_url, support.every_nth(7)).start()
    environment = Env(world, proxy, tmp_path, control_plane, Daemons(tmp_path))
    try:
        yield environment
    finally:
        environment.stop()
        proxy.stop()
        await release_services(kube)


def lb_service(name: str) -> Obj:
    return {
        "metadata": {
            "name": name,
            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        },
    }


def _moto_lbs(env: Env) -> dict[str, dict[str, Any]]:
    """The NLBs in the world's VPC by DNS name, with listener ports and target instance IDs."""
    _, elbv2 = support.clients(env.world.url)
    result = {}
    for lb in elbv2.describe_load_balancers()["LoadBalancers"]:
        if lb["VpcId"] != env.world.vpc_id:
            continue
        listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
        targets: set[str] = set()
        for listener in listeners:
            health = elbv2.describe_target_health(
                TargetGroupArn=listener["DefaultActions"][0]["TargetGroupArn"]
            )
            targets |= {t["Target"]["Id"] for t in health["TargetHealthDescriptions"]}
        result[lb["DNSName"]] = {
            "ports": sorted(li["Port"] for li in listeners),
            "targets": targets,
        }
    return result


async def _hostnames(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, str] | None:
    found = {}
    for name in names:
        svc = await kube.get(SERVICES, name, namespace=ns)
        ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        if not ingress or not ingress[0].get("hostname"):
            return None
        found[name] = ingress[0]["hostname"]
    return found


async def _failures(kube: KubeApiClient, ns: str) -> list[str]:
    events = await kube.list(EVENTS, namespace=ns)
    return [
        f"{e['reason']}: {e.get('message', '')}"
        for e in events.items
        if e.get("type") == "Warning"
        and (e.get("source") or {}).get("component") == "service-controller"
    ]


async def delete_services(kube: KubeApiClient, ns: str, names: list[str]) -> None:
    """Delete the Services and wait until kccm has removed their load-balancer finalizer:
    a Service left terminating would be seen by the next test's daemon on this apiserver."""
    for name in names:
        await kube.delete(SERVICES, name, namespace=ns)

    await eventually(lambda: all_absent(kube, SERVICES, names, ns))


async def _lbs_where(
    env: Env, check: Callable[[dict[str, dict[str, Any]]], bool]
) -> dict[str, dict[str, Any]] | None:
    lbs = await asyncio.to_thread(support.read_while_changing, lambda: _moto_lbs(env))
    return lbs if lbs is not None and check(lbs) else None


async def _routes(env: Env, count: int) -> list[str] | None:
    routes = (await asyncio.to_thread(support.leftovers, env.world.url, env.world.vpc_id))["routes"]
    return routes if len(routes) == count else None


async def test_daemon_runs_nodes_routes_and_nlbs_on_moto_absorbing_throttling(
    env: Env, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    world, ns = env.world, kube_namespace
    env.start()
    names = {instance: kube_cleanup.add(NODES, dns) for instance, dns in world.instances.items()}
    started = time.monotonic()

    # -- Nodes initialised from EC2, routes in the VPC table -----------------------------------
    for i, name in enumerate(names.values()):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
    nodes = await eventually(lambda: _all_initialised(kube, list(names.values())))
    for node, instance in zip(nodes, names, strict=True):
        assert node["spec"]["providerID"].endswith(f"/{instance}")
        assert node["spec"]["providerID"].startswith("aws:///eu-west-1")
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "m5.large"
        assert labels["topology.kubernetes.io/region"] == "eu-west-1"
        assert any(a["type"] == "InternalIP" for a in node["status"]["addresses"])
    env.figures["nodes_initialised_s"] = round(time.monotonic() - started, 1)
    await eventually(lambda: _routes(env, len(names)))
    env.figures["routes_created_s"] = round(time.monotonic() - started, 1)

    # -- LoadBalancer Services: NLB DNS name as the ingress hostname, every node a target ------
    phase = time.monotonic()
    services = [f"web-{i}" for i in range(SERVICES_WANTED)]
    for name in services:
        await kube.create(SERVICES, lb_service(name), namespace=ns)
    hostnames = await eventually(lambda: _hostnames(kube, ns, services))
    everyone = set(names)
    lbs = await eventually(
        lambda: _lbs_where(
            env,
            lambda lbs: (
                len(lbs) == len(services) and all(lb["targets"] == everyone for lb in lbs.values())
            ),
        )
    )
    assert set(hostnames.values()) == set(lbs)
    env.figures["services_provisioned_s"] = round(time.monotonic() - phase, 1)

    # -- update: a new port on every Service --------------------------------------------------
    phase = time.monotonic()
    for name in services:  # a patch, not get + replace: kccm may write the Service between
        port = [{"op": "replace", "path": "/spec/ports/0/port", "value": 8080}]
        await kube.patch(SERVICES, name, port, patch_type=PatchType.JSON, namespace=ns)
    await eventually(
        lambda: _lbs_where(env, lambda lbs: all(lb["ports"] == [8080] for lb in lbs.values()))
    )
    env.figures["services_updated_s"] = round(time.monotonic() - phase, 1)

    # -- targets follow nodes: a new instance joins; an instance terminated, its Node deleted ---
    phase = time.monotonic()
    [joined] = await asyncio.to_thread(support.add_instances, world, 1)
    names[joined] = kube_cleanup.add(NODES, world.instances[joined])
    await kube.create(NODES, kubelet_node(names[joined], f"10.244.{len(names) - 1}.0/24"))
    everyone = set(names)
    await eventually(
        lambda: _lbs_where(env, lambda lbs: all(lb["targets"] == everyone for lb in lbs.values()))
    )
    gone = next(iter(names))
    ec2, _ = support.clients(world.url)
    await asyncio.to_thread(ec2.terminate_instances, InstanceIds=[gone])
    # a patch, not get + replace: kccm may write the Node in between (409)
    unknown = {"status": {"conditions": [_ready("Unknown")]}}
    await kube.patch(NODES, names[gone], unknown, subresource="status")

    async def node_deleted() -> bool:
        try:
            await kube.get(NODES, names[gone])
        except NotFound:
            return True
        return False

    await eventually(node_deleted)
    left = everyone - {gone}
    await eventually(
        lambda: _lbs_where(env, lambda lbs: all(lb["targets"] == left for lb in lbs.values()))
    )
    await eventually(lambda: _routes(env, len(left)))
    env.figures["targets_followed_node_changes_s"] = round(time.monotonic() - phase, 1)

    # -- deletion leaves nothing in moto ------------------------------------------------------
    phase = time.monotonic()
    for name in services:
        await kube.delete(SERVICES, name, namespace=ns)

    async def nothing_left(kinds: tuple[str, ...]) -> bool:
        found = await asyncio.to_thread(support.leftovers, world.url, world.vpc_id)
        return not any(found[kind] for kind in kinds)

    await eventually(lambda: nothing_left(("load_balancers", "target_groups")))
    env.figures["services_deleted_s"] = round(time.monotonic() - phase, 1)
    for instance in left:
        await kube.delete(NODES, names[instance])
    await eventually(lambda: nothing_left(("load_balancers", "target_groups", "routes")))
    env.figures["services_and_routes_deleted_s"] = round(time.monotonic() - phase, 1)
    env.figures["total_s"] = round(time.monotonic() - started, 1)

    # -- throttling was injected and absorbed: no failed reconcile ----------------------------
    assert await _failures(kube, ns) == []
    throttled = sum(env.proxy.throttled.values())
    assert throttled > 0
    env.figures.update(
        nodes=NODES_WANTED,
        services=len(services),
        aws_requests=sum(env.proxy.requests.values()),
        aws_requests_throttled=throttled,
        aws_requests_by_action=dict(sorted(env.proxy.requests.items())),
    )
    print("\naws e2e figures:", json.dumps(env.figures, indent=1))
    if report := os.environ.get("KCCM_AWS_E2E_REPORT"):
        await asyncio.to_thread(Path(report).write_text, json.dumps(env.figures, indent=1))
