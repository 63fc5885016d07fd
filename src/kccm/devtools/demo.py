"""``kccm dev demo``: the local provider end to end on one machine (``make demo``).

A real etcd + kube-apiserver + kube-controller-manager (``--cloud-provider=external``, node
lifecycle grace period 5 s), three local instances whose Nodes are registered as kubelets
with ``--cloud-provider=external`` would and whose Leases are renewed as their kubelets
would, an HTTP server per node at the nodePort (standing in for kube-proxy: it answers with
the node's name and serves :10256/healthz), the kccm daemon with ``--cloud-provider=local``
(which starts the data plane), then a LoadBalancer Service: traffic through its VIP spread
over the nodes; a stopped instance whose kubelet goes silent (kube-controller-manager, not
the demo, marks the Node NotReady; kccm then taints it shutdown; its backend turns unhealthy
and traffic moves); a deleted instance whose kubelet goes silent (NotReady again, then kccm
deletes the Node and the garbage collector its Lease); and the Service deleted (load
balancer, VIP claim and finalizer gone). Every step is timed and checked; the exit
status is 0 only if every step held. Everything started is torn down, on Ctrl-C too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kccm.devtools.demo_net import (
    HEALTH_PORT,
    NodeServers,
    connect_refused,
    fetch,
    spread,
    spread_text,
)
from kccm.devtools.demo_procs import spawn, terminate_pid, wait_or_kill
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import KubeError, NotFound
from kccm.kube.interface import Obj
from kccm.kube.resources import LEASES, NODES, SERVICES
from kccm.providers.local.store import InstanceRecord, LoadBalancerRecord, LocalStore
from kccm.testing.controlplane import (
    ControlPlane,
    ControlPlaneError,
    find_binaries,
    leftover_processes,
)
from kccm.testing.kubelet import NODE_LEASE_NAMESPACE, KubeletHeartbeat
from kccm.testing.nodewatch import first_node_state, ready_condition, ready_unknown
from kccm.testing.ports import free_port

__all__ = ["DemoSettings", "StepFailed", "run_demo"]

T = TypeVar("T")
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
NAMESPACE = "default"
SERVICE = "demo-web"


@dataclass(frozen=True)
class DemoSettings:
    nodes: tuple[str, ...] = ("demo-node-1", "demo-node-2", "demo-node-3")
    node_ip_prefix: str = "127.0.30."
    vip_range: str = "127.0.31.0/24"
    node_port: int = 30080
    service_port: int = 8080
    requests: int = 60
    budget: float = 60.0
    """Seconds any one wait may take."""

    def address(self, index: int) -> str:
        return f"{self.node_ip_prefix}{index + 1}"


async def _outcome(task: asyncio.Task[T]) -> tuple[T | None, str]:
    """For :meth:`Demo.wait`: the task's result once it is done (its error, a failed step)."""
    if not task.done():
        return None, "not yet"
    if (error := task.exception()) is not None:
        raise StepFailed("the awaited state", f"{type(error).__name__}: {error}")
    return task.result(), ""


class StepFailed(Exception):
    """A step did not hold: what was expected and what was seen."""

    def __init__(self, expected: str, seen: str) -> None:
        super().__init__(f"expected {expected}; seen {seen}")
        self.expected = expected
        self.seen = seen


@dataclass
class StepResult:
    title: str
    status: str  # ok | FAILED | skipped
    seconds: float = 0.0
    detail: str = ""


def _say(text: str) -> None:
    print(text, flush=True)


# -- Kubernetes objects ------------------------------------------------------------------------


def kubelet_node(name: str, address: str, pod_cidr: str) -> Obj:
    """A Node as a kubelet with ``--cloud-provider=external`` registers it."""
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {
            "taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}],
            "podCIDR": pod_cidr,
            "podCIDRs": [pod_cidr],
        },
        "status": {
            "addresses": [
                {"type": "Hostname", "address": name},
                {"type": "InternalIP", "address": address},
            ],
            "conditions": [_ready("True", "KubeletReady", "kubelet is posting ready status")],
        },
    }


def _ready(status: str, reason: str, message: str) -> dict[str, str]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def lb_service(settings: DemoSettings) -> Obj:
    port = {
        "name": "http",
        "protocol": "TCP",
        "port": settings.service_port,
        "targetPort": settings.service_port,
        "nodePort": settings.node_port,
    }
    return {
        "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "spec": {"type": "LoadBalancer", "selector": {"app": SERVICE}, "ports": [port]},
    }


def _taint_keys(node: Obj) -> set[str]:
    return {str(t.get("key")) for t in (node.get("spec") or {}).get("taints") or ()}


# -- the demo ----------------------------------------------------------------------------------


@dataclass
class Demo:
    settings: DemoSettings
    tmp: Path
    plane: ControlPlane
    kube: KubeApiClient
    store: LocalStore
    results: list[StepResult] = field(default_factory=list)
    servers: dict[str, NodeServers] = field(default_factory=dict)
    heartbeats: dict[str, KubeletHeartbeat] = field(default_factory=dict)
    daemon: subprocess.Popen[bytes] | None = None
    dataplane_pid: int | None = None
    vip: str = ""
    lb_name: str = ""

    # -- helpers -------------------------------------------------------------------------

    async def wait(self, what: str, probe: Callable[[], Awaitable[tuple[T | None, str]]]) -> T:
        """Poll ``probe`` (value or None, what it saw) until a value, within the budget."""
        began = time.monotonic()
        reported = began
        seen = "nothing yet"
        while True:
            try:
                value, seen = await probe()
            except (KubeError, OSError) as exc:
                value, seen = None, f"{type(exc).__name__}: {exc}"
            if value is not None:
                return value
            now = time.monotonic()
            if now - began > self.settings.budget:
                raise StepFailed(f"{what} within {self.settings.budget:.0f} s", seen)
            if now - reported >= 10.0:
                _say(f"      ... waiting for {what} ({now - began:.0f} s; seen {seen})")
                reported = now
            self._check_daemon()
            await asyncio.sleep(0.2)

    def _check_daemon(self) -> None:
        if self.daemon is not None and self.daemon.poll() is not None:
            raise StepFailed("the kccm daemon running", f"it exited {self.daemon.returncode}")

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(fn, *args)

    def node(self, index: int) -> str:
        return self.settings.nodes[index]

    async def silence_kubelet(self, name: str) -> str:
        """Stop the Node's heartbeat; wait for kube-controller-manager to mark it NotReady,
        read from a watch (kccm may delete the Node right after: a poll could miss it)."""
        version = (await self.kube.get(NODES, name))["metadata"]["resourceVersion"]
        marked = asyncio.create_task(first_node_state(self.kube, name, version, ready_unknown))
        await self.heartbeats[name].stop()
        began = time.monotonic()
        try:
            node = await self.wait(f"{name} Ready=Unknown", lambda: _outcome(marked))
        finally:
            marked.cancel()
        ready = ready_condition(node)
        took = time.monotonic() - began
        grace = self.plane.controller_manager_settings.node_monitor_grace_period
        return (
            f"its kubelet silent: kube-controller-manager set Ready={ready['status']} "
            f"({ready['reason']}) {took:.1f} s later (grace {grace:g} s)"
        )

    async def expect_spread(self, expected: set[str]) -> str:
        seen, failures = await spread(self.vip, self.settings.service_port, self.settings.requests)
        text = spread_text(seen, failures)
        if failures or set(seen) != expected:
            raise StepFailed(f"{self.settings.requests} answers from {sorted(expected)}", text)
        return text

    async def load_balancer(self) -> LoadBalancerRecord | None:
        found = await self.db(self.store.list_load_balancers)
        return next((lb for lb in found if lb.service == f"{NAMESPACE}/{SERVICE}"), None)

    # -- steps ---------------------------------------------------------------------------

    async def create_nodes(self) -> str:
        for i, name in enumerate(self.settings.nodes):
            address = self.settings.address(i)
            addresses = (("InternalIP", address), ("Hostname", name))
            await self.db(self.store.add_instance, InstanceRecord(name, addresses))
            await self.kube.create(NODES, kubelet_node(name, address, f"10.244.{i + 1}.0/24"))
            self.heartbeats[name] = KubeletHeartbeat(self.kube, name, interval=1.0)
            await self.heartbeats[name].start()
        first, last = self.settings.address(0), self.settings.address(len(self.settings.nodes) - 1)
        count = len(self.settings.nodes)
        return f"{count} instances + Nodes ({first}-{last}), uninitialized, Leases renewed"

    async def start_servers(self) -> str:
        for i, name in enumerate(self.settings.nodes):
            servers = NodeServers(name, self.settings.address(i))
            self.servers[name] = servers
            await servers.start(self.settings.node_port)
        for i, name in enumerate(self.settings.nodes):
            answer = await fetch(self.settings.address(i), self.settings.node_port)
            if answer != name:
                raise StepFailed(f"{name} answering", repr(answer))
        return f":{self.settings.node_port} and :{HEALTH_PORT}/healthz on every node address"

    def cloud_config(self) -> Path:
        path = self.tmp / "cloud.conf"
        state = self.tmp / "state.db"
        path.write_text(f"[Global]\nstate-file = {state}\nvip-range = {self.settings.vip_range}\n")
        return path

    async def start_daemon(self) -> str:
        command = [
            sys.executable, "-m", "kccm",
            "--cloud-provider=local",
            f"--cloud-config={self.cloud_config()}",
            f"--kubeconfig={self.plane.admin_kubeconfig}",
            "--cluster-cidr=10.244.0.0/16",
            f"--secure-port={free_port()}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--node-monitor-period=1s",
        ]  # fmt: skip
        self.daemon = spawn(command, self.tmp / "kccm.log")
        beat = await self.wait("the data plane's heartbeat", self._heartbeat)
        self.dataplane_pid = beat.pid
        return f"kccm pid {self.daemon.pid}; it started the data plane (pid {beat.pid})"

    async def _heartbeat(self) -> tuple[Any, str]:
        beat = await self.db(self.store.dataplane_heartbeat)
        fresh = beat is not None and time.time() - beat.heartbeat_at < 5.0
        return (beat if fresh else None), f"heartbeat {beat}"

    async def nodes_initialised(self) -> str:
        for name in self.settings.nodes:
            await self.wait(f"{name} initialised", functools.partial(self._initialised, name))
        return f"providerID local://<name>, {UNINITIALIZED.split('/')[1]} taint removed"

    async def _initialised(self, name: str) -> tuple[Obj | None, str]:
        node = await self.kube.get(NODES, name)
        provider_id = (node.get("spec") or {}).get("providerID", "")
        done = provider_id == f"local://{name}" and UNINITIALIZED not in _taint_keys(node)
        return (node if done else None), f"providerID {provider_id!r}, taints {_taint_keys(node)}"

    async def create_service(self) -> str:
        await self.kube.create(SERVICES, lb_service(self.settings), namespace=NAMESPACE)
        ingress = await self.wait("an ingress IP", self._ingress)
        self.vip = str(ingress["ip"])
        if ingress.get("ipMode") != "Proxy":
            raise StepFailed("ipMode Proxy", f"ingress {ingress}")
        lb = await self.wait("the load_balancers row", self._lb_row)
        self.lb_name = lb.name
        await self.wait("the VIP answering", self._vip_answers)
        return f"{SERVICE} -> {self.vip}:{self.settings.service_port} (ipMode Proxy), {lb.name}"

    async def _ingress(self) -> tuple[dict[str, Any] | None, str]:
        svc = await self.kube.get(SERVICES, SERVICE, namespace=NAMESPACE)
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        return (ingress[0] if ingress else None), f"status {svc.get('status')}"

    async def _lb_row(self) -> tuple[LoadBalancerRecord | None, str]:
        lb = await self.load_balancer()
        return lb, f"row {lb}"

    async def _vip_answers(self) -> tuple[str | None, str]:
        try:
            return await fetch(self.vip, self.settings.service_port, 2.0), ""
        except (OSError, TimeoutError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    async def traffic_all(self) -> str:
        return await self.expect_spread(set(self.settings.nodes))

    async def stop_instance(self) -> str:
        name = self.node(0)
        await self.db(self.store.set_instance_state, name, False)
        await self.servers[name].stop()
        return f"`instances stop {name}`, its servers down, " + await self.silence_kubelet(name)

    async def shutdown_taint(self) -> str:
        name = self.node(0)
        await self.wait(f"the shutdown taint on {name}", lambda: self._tainted(name))
        return f"Ready=Unknown and the instance stopped -> {SHUTDOWN} taint"

    async def _tainted(self, name: str) -> tuple[bool | None, str]:
        taints = _taint_keys(await self.kube.get(NODES, name))
        return (True if SHUTDOWN in taints else None), f"taints {sorted(taints)}"

    async def unhealthy_moves(self) -> str:
        name = self.node(0)
        detail = await self.wait(f"{name}'s backend unhealthy", lambda: self._out(name))
        rest = set(self.settings.nodes) - {name}
        return f"{name}: {detail}; " + await self.expect_spread(rest)

    async def _out(self, name: str) -> tuple[str | None, str]:
        """Unhealthy in backend_health, or no longer a backend of the load balancer."""
        lb = await self.load_balancer()
        if lb is not None and name not in {b["node"] for b in lb.backends}:
            return "no longer a backend", ""
        rows = await self.db(self.store.list_backend_health)
        row = next((r for r in rows if r.load_balancer == self.lb_name and r.node == name), None)
        if row is not None and not row.healthy:
            return f"unhealthy ({row.detail})" if row.detail else "unhealthy", ""
        return None, f"health {row}"

    async def delete_instance(self) -> str:
        name = self.node(1)
        await self.db(self.store.delete_instance, name)
        await self.servers[name].stop()
        return f"`instances delete {name}`, its servers down, " + await self.silence_kubelet(name)

    async def node_deleted(self) -> str:
        name = self.node(1)
        await self.wait(f"Node {name} deleted", lambda: self._deleted(NODES, name, None))
        lease = functools.partial(self._deleted, LEASES, name, NODE_LEASE_NAMESPACE)
        await self.wait(f"Lease {NODE_LEASE_NAMESPACE}/{name} collected", lease)
        return "Ready=Unknown and the instance gone -> Node deleted; its Lease garbage-collected"

    async def _deleted(
        self, resource: Any, name: str, namespace: str | None
    ) -> tuple[bool | None, str]:
        try:
            obj = await self.kube.get(resource, name, namespace=namespace)
        except NotFound:
            return True, ""
        meta = obj.get("metadata") or {}
        return None, f"still there (finalizers {meta.get('finalizers')})"

    async def traffic_one(self) -> str:
        name = self.node(1)
        detail = await self.wait(f"{name} out of the load balancer", lambda: self._out(name))
        return f"{name}: {detail}; " + await self.expect_spread({self.node(2)})

    async def delete_service(self) -> str:
        await self.kube.delete(SERVICES, SERVICE, namespace=NAMESPACE)
        await self.wait("the Service gone", lambda: self._deleted(SERVICES, SERVICE, NAMESPACE))
        await self.wait("the LB row and VIP claim gone", self._lb_gone)
        await self.wait("the VIP refusing connections", self._refused)
        return f"finalizer removed, LB row and claim of {self.vip} gone, VIP refuses"

    async def _lb_gone(self) -> tuple[bool | None, str]:
        lb = await self.load_balancer()
        claims = [c for c in await self.db(self.store.list_ip_claims) if c.ip == self.vip]
        done = lb is None and not claims
        return (True if done else None), f"row {lb}, claims {claims}"

    async def _refused(self) -> tuple[bool | None, str]:
        refused = await connect_refused(self.vip, self.settings.service_port)
        return (True if refused else None), "connection not refused"

    # -- running and tearing down --------------------------------------------------------

    async def step(self, title: str, action: Callable[[], Awaitable[str]]) -> bool:
        number = len(self.results) + 2  # 1 is the control plane
        _say(f"[{number:2}] {title} ...")
        began = time.monotonic()
        try:
            detail = await action()
        except asyncio.CancelledError:
            self._record(title, "stopped", began, "interrupted")
            raise
        except StepFailed as exc:
            return self._record(title, "FAILED", began, f"expected {exc.expected}; seen {exc.seen}")
        except (KubeError, OSError, TimeoutError) as exc:
            return self._record(title, "FAILED", began, f"{type(exc).__name__}: {exc}")
        return self._record(title, "ok", began, detail)

    def _record(self, title: str, status: str, began: float, detail: str) -> bool:
        result = StepResult(title, status, time.monotonic() - began, detail)
        self.results.append(result)
        _say(f"     {status} in {result.seconds:.1f} s: {detail}")
        return status == "ok"

    def steps(self) -> list[tuple[str, Callable[[], Awaitable[str]]]]:
        count = len(self.settings.nodes)
        return [
            (f"create {count} local instances and their Nodes (kubelet-style)", self.create_nodes),
            ("start the nodes' HTTP servers (kube-proxy stand-ins)", self.start_servers),
            ("run the kccm daemon --cloud-provider=local", self.start_daemon),
            ("Nodes initialised by the cloud node controller", self.nodes_initialised),
            ("create a LoadBalancer Service; wait for its VIP", self.create_service),
            (f"{self.settings.requests} requests via the VIP reach every node", self.traffic_all),
            (f"stop instance {self.node(0)}, its kubelet silent: kcm marks it NotReady",
             self.stop_instance),
            (f"kccm taints {self.node(0)} shutdown", self.shutdown_taint),
            (f"{self.node(0)} backend unhealthy; traffic moves", self.unhealthy_moves),
            (f"delete instance {self.node(1)}, its kubelet silent: kcm marks it NotReady",
             self.delete_instance),
            (f"kccm deletes Node {self.node(1)}", self.node_deleted),
            (f"traffic reaches only {self.node(2)}", self.traffic_one),
            ("delete the Service: LB, VIP claim and finalizer gone", self.delete_service),
        ]  # fmt: skip

    async def run(self) -> None:
        pending = self.steps()
        for index, (title, action) in enumerate(pending):
            if not await self.step(title, action):
                self.results += [StepResult(t, "skipped") for t, _ in pending[index + 1 :]]
                self._show_logs()
                return

    def _show_logs(self) -> None:
        for name in ("kccm.log", "dataplane.log"):
            path = self.tmp / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-25:]
                _say(f"---- last lines of {path}")
                _say("\n".join(tail))

    async def teardown(self) -> str:
        stopped = []
        if self.daemon is not None and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(wait_or_kill, self.daemon, 15.0)
            stopped.append(f"kccm (exit {code})")
        pid = await self._dataplane_pid()
        if pid is not None:
            stopped.append(f"data plane ({await asyncio.to_thread(terminate_pid, pid, 15.0)})")
        for servers in self.servers.values():
            await servers.stop()
        for heartbeat in self.heartbeats.values():
            await heartbeat.stop()
        stopped.append("HTTP servers and heartbeats")
        return ", ".join(stopped)

    async def _dataplane_pid(self) -> int | None:
        with contextlib.suppress(Exception):
            beat = await self.db(self.store.dataplane_heartbeat)
            if beat is not None:
                return int(beat.pid)
        return self.dataplane_pid


# -- entry point -------------------------------------------------------------------------------


def _summary(results: Sequence[StepResult]) -> str:
    width = max(len(r.title) for r in results)
    lines = [f"{'#':>3}  {'step':<{width}}  {'result':<7}  {'time':>7}", "-" * (width + 24)]
    for number, r in enumerate(results, 1):
        took = f"{r.seconds:6.1f}s" if r.status != "skipped" else "      -"
        lines.append(f"{number:>3}  {r.title:<{width}}  {r.status:<7}  {took}")
    total = sum(r.seconds for r in results)
    lines.append("-" * (width + 24))
    lines.append(f"{'':>3}  {'total':<{width}}  {'':<7}  {total:6.1f}s")
    return "\n".join(lines)


async def _demo(
    settings: DemoSettings, tmp: Path, plane: ControlPlane, results: list[StepResult]
) -> None:
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)))
    store = LocalStore(tmp / "state.db")
    demo = Demo(settings, tmp, plane, kube, store)
    try:
        await demo.run()
    finally:
        results += demo.results
        _say(f"[{len(results) + 1:2}] teardown ...")
        began = time.monotonic()
        detail = await asyncio.shield(demo.teardown())
        results.append(StepResult("teardown", "ok", time.monotonic() - began, detail))
        _say(f"     ok in {results[-1].seconds:.1f} s: stopped {detail}")
        await kube.close()
        store.close()


def _start_plane(plane: ControlPlane, results: list[StepResult]) -> bool:
    _say("[ 1] start the dev control plane (etcd, kube-apiserver, kube-controller-manager) ...")
    began = time.monotonic()
    try:
        plane.start()
    except ControlPlaneError as exc:
        results.append(StepResult("start the dev control plane", "FAILED", 0.0, str(exc)))
        _say(f"     FAILED: {exc}")
        return False
    took = time.monotonic() - began
    results.append(StepResult("start the dev control plane", "ok", took, plane.url))
    _say(f"     ok in {took:.1f} s: {plane.url}")
    return True


def run_demo(argv: Sequence[str], settings: DemoSettings | None = None) -> int:
    """``kccm dev demo``: 0 when every step held, 1 when one failed, 130 on Ctrl-C."""
    if argv:
        print("usage: kccm dev demo", file=sys.stderr)
        return 2
    settings = settings or DemoSettings()
    try:
        binaries = find_binaries(controller_manager=True)
    except ControlPlaneError as exc:
        print(f"kccm dev demo: {exc} (run `make controlplane`)", file=sys.stderr)
        return 1
    for sig in (signal.SIGINT, signal.SIGTERM):  # even where the parent left SIGINT ignored
        signal.signal(sig, signal.default_int_handler)  # both tear down like Ctrl-C
    tmp = Path(tempfile.mkdtemp(prefix="kccm-demo-"))
    plane = ControlPlane(binaries=binaries, controller_manager=True)
    results: list[StepResult] = []
    interrupted = False
    try:
        if _start_plane(plane, results):
            asyncio.run(_demo(settings, tmp, plane, results))
    except KeyboardInterrupt:
        interrupted = True
        _say("\ninterrupted; tearing down")
    finally:
        plane.stop()
    _check_leftovers(plane, results)
    return _finish(results, tmp, interrupted)


def _check_leftovers(plane: ControlPlane, results: list[StepResult]) -> None:
    left = leftover_processes(str(plane.root))
    if left:
        results.append(StepResult("nothing left running", "FAILED", 0.0, f"still running: {left}"))


def _finish(results: list[StepResult], tmp: Path, interrupted: bool) -> int:
    ok = bool(results) and all(r.status == "ok" for r in results) and not interrupted
    _say("\nsummary\n" + _summary(results or [StepResult("nothing ran", "FAILED")]))
    for r in results:
        if r.status == "FAILED":
            _say(f"\nFAILED: {r.title}\n  {r.detail}")
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
        _say("\ndemo passed: every step held; everything stopped")
        return 0
    _say(f"\ndemo {'interrupted' if interrupted else 'FAILED'}; logs kept in {tmp}")
    return 130 if interrupted else 1
