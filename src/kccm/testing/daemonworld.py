"""A daemon test module's world: one cloud emulator and one kccm daemon on the real apiserver,
the steady state every test must return to, and the probes its tests wait on.

A module fixture starts the emulator, applies the shipped RBAC, starts the daemon
(:func:`start_world_daemon`: the shipped ServiceAccount, routes on, short periods), makes its
base Nodes inside :func:`module_world` (which removes them at the end and checks that the
daemon stopped cleanly and the emulator is as it was) and, once their routes are there,
takes the steady state with
:meth:`EmulatorWorld.quiet_state` (never while the cloud still has a write in progress: such a
snapshot lists what is gone a moment later, so no later state could equal it). Each test's
``settled`` fixture ends with :meth:`EmulatorWorld.back_to_steady`: faults cleared, the
emulator back at the steady state, else the test fails naming what it left. Each cloud's
subclass adds its own readers, and :meth:`EmulatorWorld.quiet` when its state shows pending
work.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from kccm.emulators.control import ControlledEmulator
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import absent, delete_until_gone, eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon, DaemonExited, Daemons
from kccm.testing.kubelet import ready_condition

__all__ = [
    "POD_CIDRS",
    "SHUTDOWN",
    "UNINITIALIZED",
    "EmulatorWorld",
    "blocking",
    "get_service",
    "has_taint",
    "ingress_ip",
    "lb_service",
    "module_world",
    "node_gone",
    "patient",
    "set_ready",
    "start_world_daemon",
    "taints",
]

SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
POD_CIDRS = "10.244.0.0/16"
T = TypeVar("T")
EmulatorT = TypeVar("EmulatorT", bound=ControlledEmulator[Any])

patient = functools.partial(eventually, within=120.0, interval=0.2)
"""The shared :func:`kccm.testing.controllers.eventually` with a daemon module's bound and pace
(it polls the apiserver and the emulator, two other processes)."""


def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    """``fn(*args, **kwargs)`` in a thread (the emulator's admin API blocks)."""
    return asyncio.to_thread(fn, *args, **kwargs)


@dataclass
class EmulatorWorld(Generic[EmulatorT]):
    """A module's emulator and daemon, what the emulator held before them (``baseline``) and
    the steady state its tests return to (``steady``); ``figures`` for the module's print."""

    emulator: EmulatorT
    daemon: Daemon
    baseline: dict[str, list[Any]]
    steady: dict[str, list[Any]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def admin(self) -> Any:
        return self.emulator.admin

    def quiet(self, state: Mapping[str, list[Any]]) -> bool:
        """Whether ``state`` holds no work the cloud still has in progress (each cloud whose
        state lists such work says so)."""
        return True

    async def until(self, probe: Callable[[], Awaitable[T | None]]) -> T:
        """:data:`patient`, failing at once (with the log) when the daemon has exited."""

        async def watched() -> T | None:
            if self.daemon.proc.poll() is not None:
                logs = await blocking(self.daemon.logs)
                raise DaemonExited(f"kccm exited ({self.daemon.proc.returncode}):\n{logs[-3000:]}")
            return await probe()

        return await patient(watched)

    async def state_is(self, wanted: Mapping[str, list[Any]]) -> bool:
        return bool(await blocking(self.admin.state) == wanted)

    async def quiet_state(self) -> dict[str, list[Any]]:
        """The emulator's state once :meth:`quiet`: the steady state tests return to."""

        async def quiet() -> dict[str, list[Any]] | None:
            found: dict[str, list[Any]] = await blocking(self.admin.state)
            return found if self.quiet(found) else None

        return await self.until(quiet)

    def leftovers(self) -> dict[str, list[Any]]:
        """What the emulator holds beyond the steady state (for a failing test's message)."""
        now = self.admin.state()
        return {k: sorted(set(v) - set(self.steady.get(k, ()))) for k, v in now.items() if v}

    async def back_to_steady(self) -> None:
        """A test's end: faults cleared, then the emulator back at the steady state, else an
        AssertionError naming what is left."""
        await blocking(self.admin.clear_faults)
        try:
            await self.until(lambda: self.state_is(self.steady))
        except TimeoutError as exc:
            raise AssertionError(f"left behind: {await blocking(self.leftovers)}") from exc


@contextlib.asynccontextmanager
async def module_world(
    world: EmulatorWorld[Any],
    kube: KubeClient,
    daemons: Daemons,
    *,
    nodes: list[str],
    routes_gone: Callable[[], Awaitable[bool]],
    remove_base: Callable[[], Awaitable[None]],
    label: str,
) -> AsyncIterator[None]:
    """A module fixture's block and its end: the module's base ``nodes`` (filled in the block)
    are deleted while the daemon runs and their routes go with them (``routes_gone``); then
    the daemons stop (30 s grace), the base machines go (``remove_base``) and ``kube`` is
    closed, even when that failed; and the emulator must hold what it held before (the
    world's ``baseline``), the daemon must have finished its in-flight work, and the world's
    figures are printed as ``label``."""
    try:
        yield
    finally:
        try:
            await delete_until_gone(kube, NODES, nodes)
            await world.until(routes_gone)
        finally:
            daemons.stop_all(grace=30)
            stopped = world.daemon.proc.returncode
            await remove_base()
            await kube.close()
    world.admin.assert_clean(world.baseline)
    assert stopped == 0, f"kccm did not finish its in-flight work within 30 s ({stopped})"
    print(f"\n{label} figures:", json.dumps(world.figures, indent=1))


def start_world_daemon(
    provider: str,
    cloud_config: Path,
    plane: ControlPlane,
    tmp: Path,
    *,
    cluster: str,
    allocate_node_cidrs: bool,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
) -> tuple[Daemons, Daemon]:
    """kccm as the shipped ServiceAccount on ``cloud_config``: cluster ``cluster``, routes
    for :data:`POD_CIDRS` (allocated by kccm or not), no leader election, short periods."""
    daemons = Daemons(tmp)
    daemon = daemons.start(
        provider,
        cloud_config,
        plane.kubeconfig_for(SA_USER, SA_GROUPS),
        f"--cluster-name={cluster}",
        f"--cluster-cidr={POD_CIDRS}",
        f"--allocate-node-cidrs={str(allocate_node_cidrs).lower()}",
        "--configure-cloud-routes=true",
        "--leader-elect=false",
        "--node-monitor-period=1s",
        "--route-reconciliation-period=2s",
        "--v=2",
        env=env,
        unset=unset,
    )
    return daemons, daemon


# -- Nodes ------------------------------------------------------------------------------------


async def set_ready(kube: KubeClient, name: str, status: str) -> None:
    # a patch, not get + replace: kccm may write the Node in between (409)
    await kube.patch(
        NODES, name, {"status": {"conditions": [ready_condition(status)]}}, subresource="status"
    )


async def taints(kube: KubeClient, name: str) -> set[str]:
    node = await kube.get(NODES, name)
    return {t["key"] for t in node["spec"].get("taints") or []}


async def has_taint(kube: KubeClient, name: str, taint: str, wanted: bool) -> bool:
    return (taint in await taints(kube, name)) == wanted


async def node_gone(kube: KubeClient, name: str) -> bool:
    return await absent(kube, NODES, name)


# -- Services ---------------------------------------------------------------------------------


def lb_service(
    name: str, port: int = 80, annotations: Mapping[str, str] | None = None, **spec: Any
) -> Obj:
    """A LoadBalancer Service ``name`` with one TCP port ``http`` (``spec`` merged in)."""
    return {
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            **spec,
        },
    }


async def get_service(kube: KubeClient, ns: str, name: str) -> Obj:
    return await kube.get(SERVICES, name, namespace=ns)


async def ingress_ip(kube: KubeClient, ns: str, name: str) -> str | None:
    svc = await get_service(kube, ns, name)
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return str(ingress[0]["ip"]) if ingress and ingress[0].get("ip") else None
