"""Support for ``test_openstack_daemon.py``: the module's :class:`World` (emulator, daemon,
base Nodes), starting the daemon with its RBAC, and the probes its tests wait on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openstack_operator import BalancerView, Operator

from kccm.emulators.openstack.launcher import Emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, Daemons
from kccm.testing.daemonworld import (
    SHUTDOWN,
    UNINITIALIZED,
    EmulatorWorld,
    blocking,
    get_service,
    has_taint,
    ingress_ip,
    lb_service,
    node_gone,
    set_ready,
    start_world_daemon,
    taints,
)
from kccm.testing.daemonworld import patient as eventually

__all__ = [
    "CLUSTER",
    "INTERNAL",
    "LB_ID",
    "MONITOR",
    "ROOT",
    "SHUTDOWN",
    "UNINITIALIZED",
    "World",
    "annotated",
    "balancer_gone",
    "balancer_where",
    "blocking",
    "eventually",
    "fixed_ipv4",
    "get_service",
    "has_taint",
    "ingress_ip",
    "lb_service",
    "node_gone",
    "routes_are",
    "serves",
    "set_ready",
    "shows",
    "start_daemon",
    "taints",
]

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "kccm-os-e2e"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
MONITOR = "loadbalancer.openstack.org/enable-health-monitor"
LB_ID = "loadbalancer.openstack.org/load-balancer-id"


@dataclass
class World(EmulatorWorld[Emulator]):
    """The module's emulator, daemon, operator and base Nodes (server name -> server)
    (:class:`EmulatorWorld`: ``until``, ``state_is``, ``quiet_state``, ``back_to_steady``).
    Its state lists Octavia's objects by id, never their provisioning status, so no pending
    change can be in it: :meth:`EmulatorWorld.quiet` holds for every state (a route is
    another matter: its router entry and its port's allowed address pair are two writes,
    which the module fixture waits for)."""

    ops: Operator = field(kw_only=True)
    base: dict[str, dict[str, Any]] = field(default_factory=dict)

    def balancer_name(self, namespace: str, name: str) -> str:
        return f"kube_service_{CLUSTER}_{namespace}_{name}"

    async def view(self, namespace: str, name: str) -> BalancerView | None:
        return await blocking(self.ops.view, self.balancer_name(namespace, name))


def fixed_ipv4(server: dict[str, Any]) -> str:
    return next(
        a["addr"]
        for addresses in server["addresses"].values()
        for a in addresses
        if a["version"] == 4 and a.get("OS-EXT-IPS:type", "fixed") == "fixed"
    )


def start_daemon(emulator: Emulator, plane: ControlPlane, tmp: Path) -> tuple[Daemons, Daemon]:
    """kccm as the shipped ServiceAccount on the emulator's ``cloud.conf``, routes on
    ``router1`` (pod CIDRs allocated by kccm)."""
    config = tmp / "cloud.conf"
    config.write_text(emulator.cloud_conf())
    return start_world_daemon(
        "openstack", config, plane, tmp, cluster=CLUSTER, allocate_node_cidrs=True
    )


async def routes_are(env: World, wanted: set[tuple[str, str]]) -> bool:
    router = env.emulator.config["router_id"]
    return await blocking(env.ops.router_routes, router) == wanted


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
