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
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    EVENTS,
    NODES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Resource,
)
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane, free_port
from kccm.testing.pytest_plugin import KubeCleanup

ROOT = Path(__file__).resolve().parents[2]
SA_USER = "system:serviceaccount:kube-system:cloud-controller-manager"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
RBAC_KINDS: dict[str, Resource] = {
    "ServiceAccount": SERVICE_ACCOUNTS,
    "ClusterRole": CLUSTER_ROLES,
    "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
    "Role": ROLES,
    "RoleBinding": ROLE_BINDINGS,
}
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
NODES_WANTED = int(os.environ.get("KCCM_AWS_E2E_NODES", "6"))
SERVICES_WANTED = int(os.environ.get("KCCM_AWS_E2E_SERVICES", "3"))
BUDGET = 60.0 + 3.0 * NODES_WANTED + 6.0 * SERVICES_WANTED


def _load_support() -> ModuleType:
    """tests/unit/providers/aws/aws_moto.py (the tests directories are not packages)."""
    if "aws_moto" in sys.modules:
        return sys.modules["aws_moto"]
    path = ROOT / "tests" / "unit" / "providers" / "aws" / "aws_moto.py"
    spec = importlib.util.spec_from_file_location("aws_moto", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["aws_moto"] = module
    spec.loader.exec_module(module)
    return module


support = _load_support()


eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.5)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


async def apply_shipped_rbac(kube: KubeApiClient) -> None:
    for doc in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text()):
        if doc and doc["kind"] in RBAC_KINDS:
            meta = doc["metadata"]
            await kube.patch(
                RBAC_KINDS[doc["kind"]],
                meta["name"],
                doc,
                patch_type=PatchType.APPLY,
                namespace=meta.get("namespace"),
                field_manager="kccm-aws-e2e",
                force=True,
            )


@dataclass
class Env:
    world: Any
    proxy: Any
    tmp: Path
    plane: ControlPlane
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def start(self, *flags: str, **config_keys: str) -> Path:
        config = self.tmp / "aws.conf"
        config.write_text(
            self.world.cloud_config(self.proxy.url, APIMaxAttempts="6", **config_keys)
        )
        log = self.tmp / f"kccm-{len(self.procs)}.log"
        args = [
            sys.executable,
            "-m",
            "kccm",
            "--cloud-provider=aws",
            f"--cloud-config={config}",
            f"--kubeconfig={self.plane.kubeconfig_for(SA_USER, SA_GROUPS)}",
            f"--secure-port={free_port()}",
            "--bind-address=127.0.0.1",
            f"--cluster-name={self.world.cluster_id}",
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=false",
            "--node-monitor-period=1s",
            "--route-reconciliation-period=2s",
            "--v=2",
            *flags,
        ]
        env = {**os.environ, **support.CREDENTIALS, "PYTHONUNBUFFERED": "1"}
        env.pop("AWS_PROFILE", None)
        with log.open("w") as sink:
            self.procs.append(
                subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env)
            )
        return log

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


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
    with support.moto_server() as url:
        yield url


@pytest.fixture
async def env(
    control_plane: ControlPlane, kube: KubeApiClient, moto_url: str, tmp_path: Path
) -> AsyncIterator[Env]:
    await apply_shipped_rbac(kube)
    world = await asyncio.to_thread(
        support.build_world,
        moto_url,
        f"e2e{random.randrange(16**6):06x}",
        NODES_WANTED,
        random.randrange(20, 250),
    )
    proxy = support.FaultProxy(moto_url, support.every_nth(7)).start()
    environment = Env(world, proxy, tmp_path, control_plane)
    try:
        yield environment
    finally:
        environment.stop()
        proxy.stop()
        await release_services(kube)


def kubelet_node(name: str, pod_cidr: str) -> Obj:
    """A Node as kubelet registers it with --cloud-provider=external (named after the
    instance's private DNS name, as on EC2)."""
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {
            "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}],
            "podCIDR": pod_cidr,
            "podCIDRs": [pod_cidr],
        },
        "status": {
            "addresses": [{"type": "Hostname", "address": name}],
            "conditions": [_ready("True")],
        },
    }


def _ready(status: str) -> dict[str, str]:
    return {
        "type": "Ready",
        "status": status,
        "reason": "KubeletReady" if status == "True" else "NodeStatusUnknown",
        "message": "test",
        "lastHeartbeatTime": "2026-11-21T00:00:00Z",
        "lastTransitionTime": "2026-11-21T00:00:00Z",
    }


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


async def _all_initialised(kube: KubeApiClient, names: list[str]) -> list[Obj] | None:
    nodes = []
    for name in names:
        node = await kube.get(NODES, name)
        taints = {t["key"] for t in node["spec"].get("taints") or []}
        addresses = {a["type"] for a in node.get("status", {}).get("addresses") or []}
        if not node["spec"].get("providerID") or UNINITIALIZED in taints:
            return None
        if "InternalIP" not in addresses:  # written by a status update of its own
            return None
        nodes.append(node)
    return nodes


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

    async def gone() -> bool:
        for name in names:
            try:
                await kube.get(SERVICES, name, namespace=ns)
            except NotFound:
                continue
            return False
        return True

    await eventually(gone)


async def _lbs_where(
    env: Env, check: Callable[[dict[str, dict[str, Any]]], bool]
) -> dict[str, dict[str, Any]] | None:
    lbs = await asyncio.to_thread(_moto_lbs, env)
    return lbs if check(lbs) else None


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
