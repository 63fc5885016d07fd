"""What the OCCM migration tests share (``test_occm_migration*.py``): the emulator (skipped
without the OCCM binary), OCCM's processes, kccm's daemon on OCCM's flags, and the hand-over:
kccm started once OCCM is stopped, waited for until it ensured every Service and judged every
Node's route twice, with no mutating OpenStack request and no error answered.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from occm_support import (
    CLUSTER_CIDR,
    CLUSTER_NAME,
    CONTROLLERS,
    CloudReader,
    OccmProcesses,
    error_answers,
    occm_processes,
    require_occm,
    routes_removed,
)

from kccm.emulators.openstack.launcher import Emulator, openstack_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import SERVICES
from kccm.testing.controllers import event_counts
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, DaemonExited, Daemons

__all__ = [
    "BUDGET",
    "ENSURED",
    "SERVICE_CONTROLLER",
    "emulator",
    "eventually",
    "hand_over",
    "ingress_of",
    "kccm",
    "lb_service",
    "occms",
    "routes_gone",
    "summary",
]

BUDGET = 120.0
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
SERVICE_CONTROLLER = "service-controller"
ENSURED = "EnsuredLoadBalancer"


def kccm_provider() -> str:
    """``openstack`` where the entry point is installed; else the factory by reference (a
    checkout run on a venv installed before the provider existed)."""
    if entry_points(group="kccm.cloud_providers", name="openstack"):
        return "openstack"
    return "kccm.providers.openstack:new_openstack_cloud"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    require_occm()  # skip (or fail under KCCM_REQUIRE_CONTROL_PLANE=1) before starting anything
    with openstack_emulator() as emu:
        yield emu


@pytest.fixture
def occms(tmp_path: Path) -> Iterator[OccmProcesses]:
    yield from occm_processes(tmp_path)


@pytest.fixture
def kccm(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Callable[[str], Daemon]]:
    """Start kccm's openstack provider (as cluster-admin, as OCCM ran) with a cloud.conf text
    and OCCM's controllers and route flags."""
    daemons = Daemons(tmp_path)

    def start(cloud_conf: str) -> Daemon:
        config = tmp_path / "kccm-cloud.conf"
        config.write_text(cloud_conf)
        return daemons.start(
            kccm_provider(),
            config,
            control_plane.admin_kubeconfig,
            f"--cluster-name={CLUSTER_NAME}",
            f"--controllers={','.join(CONTROLLERS)}",
            "--configure-cloud-routes=true",
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={CLUSTER_CIDR}",
            "--route-reconciliation-period=2s",
            "--leader-elect=false",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--v=2",
        )

    yield start
    daemons.stop_all(grace=30)


def lb_service(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            **spec,
        },
    }


async def ingress_of(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, Any] | None:
    """Each Service's published ingress, once every one has an IP."""
    found = {}
    for name in names:
        svc = await kube.get(SERVICES, name, namespace=ns)
        ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        if not ingress or not ingress[0].get("ip"):
            return None
        found[name] = ingress
    return found


def _running(daemon: Daemon) -> None:
    if daemon.proc.poll() is not None:
        raise DaemonExited(f"kccm exited ({daemon.proc.returncode}):\n{daemon.logs()[-3000:]}")


async def _ensured_counts(kube: KubeApiClient, ns: str, names: list[str]) -> dict[str, int]:
    return {
        name: (await event_counts(kube, ns, name, SERVICE_CONTROLLER))[ENSURED] for name in names
    }


async def _ensured_again(
    kube: KubeApiClient, ns: str, before: dict[str, int], daemon: Daemon
) -> bool:
    """Every Service has another EnsuredLoadBalancer event (only kccm runs now)."""
    _running(daemon)
    now = await _ensured_counts(kube, ns, list(before))
    return all(now[name] > count for name, count in before.items())


async def _routes_judged_twice(daemon: Daemon, nodes: list[str]) -> bool:
    """kccm's route controller planned every Node's route in two reconciles: whatever the
    first wrote (nothing, the test asserts) is written before the second starts."""
    _running(daemon)
    logs = await asyncio.to_thread(daemon.logs)
    return all(logs.count(f"action for node {name!r} with CIDR") >= 2 for name in nodes)


async def routes_gone(reader: CloudReader, router_id: str, daemon: Daemon) -> bool:
    _running(daemon)
    return await asyncio.to_thread(routes_removed, reader, router_id)


def summary(requests: list[dict[str, Any]]) -> str:
    """``N requests (M mutating; <service> <method>: n, ...)``: Keystone token requests are
    not mutating (the emulator's ``mutating``)."""
    counts = Counter(f"{r['service']} {r['method']}" for r in requests)
    writes = [
        r
        for r in requests
        if r["method"] not in ("GET", "HEAD") and not r["path"].endswith("/auth/tokens")
    ]
    detail = ", ".join(f"{key}: {n}" for key, n in sorted(counts.items()))
    return f"{len(requests)} requests ({len(writes)} mutating; {detail})"


async def hand_over(
    kube: KubeApiClient,
    ns: str,
    services: list[str],
    nodes: list[str],
    emulator: Emulator,
    kccm: Callable[[str], Daemon],
    cloud_conf: str,
) -> tuple[Daemon, list[dict[str, Any]]]:
    """Start kccm once OCCM is stopped; wait until it ensured every Service and judged every
    Node's route twice; assert it wrote nothing to OpenStack and met no error. Returns the
    daemon and its OpenStack requests."""
    admin = emulator.admin
    ensured = await _ensured_counts(kube, ns, services)
    since = admin.last_seq()
    daemon = kccm(cloud_conf)
    await eventually(lambda: _ensured_again(kube, ns, ensured, daemon))
    await eventually(lambda: _routes_judged_twice(daemon, nodes))
    requests = admin.requests(since)
    assert admin.mutating(since) == []
    assert error_answers(requests) == []
    return daemon, requests
