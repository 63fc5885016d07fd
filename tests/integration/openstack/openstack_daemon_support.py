"""Support for ``test_openstack_daemon.py``: the module's :class:`World` (emulator, daemon,
base Nodes), starting the daemon with its RBAC, and the probes its tests wait on."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from openstack_operator import BalancerView, Operator

from kccm.emulators.openstack.launcher import Emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import absent
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon, DaemonExited, Daemons
from kccm.testing.kubelet import ready_condition

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "kccm-os-e2e"
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
MONITOR = "loadbalancer.openstack.org/enable-health-monitor"
LB_ID = "loadbalancer.openstack.org/load-balancer-id"
T = TypeVar("T")

eventually = functools.partial(shared_eventually, within=120.0, interval=0.2)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls the apiserver and the emulator, two other processes)."""


def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """``fn(*args, **kwargs)`` in a thread (the emulator's admin API and the operator block)."""
    return asyncio.to_thread(fn, *args, **kwargs)


@dataclass
class World:
    """The module's emulator, daemon and base Nodes (server name -> server)."""

    emulator: Emulator
    ops: Operator
    daemon: Daemon
    baseline: dict[str, list[Any]]
    base: dict[str, dict[str, Any]] = field(default_factory=dict)
    steady: dict[str, list[Any]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def admin(self) -> Any:
        return self.emulator.admin

    def balancer_name(self, namespace: str, name: str) -> str:
        return f"kube_service_{CLUSTER}_{namespace}_{name}"

    async def view(self, namespace: str, name: str) -> BalancerView | None:
        return await blocking(self.ops.view, self.balancer_name(namespace, name))

    async def until(self, probe: Callable[[], Awaitable[T | None]]) -> T:
        """:data:`eventually`, failing at once (with the log) when the daemon has exited."""

        async def watched() -> T | None:
            if self.daemon.proc.poll() is not None:
                logs = await blocking(self.daemon.logs)
                raise DaemonExited(f"kccm exited ({self.daemon.proc.returncode}):\n{logs[-3000:]}")
            return await probe()

        return await eventually(watched)

    async def state_is(self, wanted: dict[str, list[Any]]) -> bool:
        return await blocking(self.admin.state) == wanted


def fixed_ipv4(server: dict[str, Any]) -> str:
    return next(
        a["addr"]
        for addresses in server["addresses"].values()
        for a in addresses
        if a["version"] == 4 and a.get("OS-EXT-IPS:type", "fixed") == "fixed"
    )


def start_daemon(emulator: Emulator, plane: ControlPlane, tmp: Path) -> tuple[Daemons, Daemon]:
    config = tmp / "cloud.conf"
    config.write_text(emulator.cloud_conf())
    daemons = Daemons(tmp)
    daemon = daemons.start(
        "openstack",
        config,
        plane.kubeconfig_for(SA_USER, SA_GROUPS),
        f"--cluster-name={CLUSTER}",
        "--cluster-cidr=10.244.0.0/16",
        "--allocate-node-cidrs=true",
        "--configure-cloud-routes=true",
        "--leader-elect=false",
        "--node-monitor-period=1s",
        "--route-reconciliation-period=2s",
        "--v=2",
    )
    return daemons, daemon


async def routes_are(env: World, wanted: set[tuple[str, str]]) -> bool:
    router = env.emulator.config["router_id"]
    return await blocking(env.ops.router_routes, router) == wanted


async def set_ready(kube: KubeApiClient, name: str, status: str) -> None:
    # a patch, not get + replace: kccm may write the Node in between (409)
    await kube.patch(
        NODES, name, {"status": {"conditions": [ready_condition(status)]}}, subresource="status"
    )


async def taints(kube: KubeApiClient, name: str) -> set[str]:
    node = await kube.get(NODES, name)
    return {t["key"] for t in node["spec"].get("taints") or []}


async def node_gone(kube: KubeApiClient, name: str) -> bool:
    return await absent(kube, NODES, name)


async def has_taint(kube: KubeApiClient, name: str, taint: str, wanted: bool) -> bool:
    return (taint in await taints(kube, name)) == wanted


def lb_service(
    name: str, port: int = 80, annotations: dict[str, str] | None = None, **spec: Any
) -> Obj:
    return {
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            **spec,
        },
    }


async def ingress_ip(kube: KubeApiClient, ns: str, name: str) -> str | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return str(ingress[0]["ip"]) if ingress and ingress[0].get("ip") else None


async def balancer_where(
    world: World, ns: str, name: str, check: Callable[[BalancerView], bool]
) -> BalancerView | None:
    view = await world.view(ns, name)
    return (
        view if view is not None and view.provisioning_status == "ACTIVE" and check(view) else None
    )


def serves(view: BalancerView, port: int, node_port: int, addresses: set[str]) -> bool:
    """One listener, on ``port``, whose members are ``addresses`` on ``node_port``."""
    if set(view.listeners) != {port}:
        return False
    return {(a, p) for a, p, _ in view.listeners[port].members} == {
        (a, node_port) for a in addresses
    }


async def balancer_gone(world: World, ns: str, name: str) -> bool:
    return await world.view(ns, name) is None


async def get_service(kube: KubeApiClient, ns: str, name: str) -> Obj:
    return await kube.get(SERVICES, name, namespace=ns)


async def annotated(kube: KubeApiClient, ns: str, name: str) -> Obj | None:
    svc = await get_service(kube, ns, name)
    return svc if LB_ID in (svc["metadata"].get("annotations") or {}) else None


async def shows(
    world: World,
    kube: KubeApiClient,
    ns: str,
    name: str,
    check: Callable[[BalancerView, Obj, str], bool],
) -> bool:
    view, ip = await world.view(ns, name), await ingress_ip(kube, ns, name)
    if view is None or ip is None or view.provisioning_status != "ACTIVE":
        return False
    return check(view, await get_service(kube, ns, name), ip)
