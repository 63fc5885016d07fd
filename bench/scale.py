"""kccm at scale against the real kube-apiserver: the scenarios of issue 10, one table.

Usage: .venv/bin/python bench/scale.py [--nodes-init 1000] [--nodes 5000] [--services 1000]
           [--latency 0.05] [--steady-minutes 10] [--kccm "<python> -m kccm"]
           [--only ceiling,init,scale,steady,restart] [--provider fake|local] [--dataplane]
           [--py-spy BINARY DIR]

Each scenario runs the real ``kccm`` daemon as a subprocess at its DEFAULT settings (only
--cloud-provider=fake, --cloud-config, --kubeconfig and a loopback --secure-port are given),
the fake provider answering every call after --latency seconds, against an etcd +
kube-apiserver built from Go modules (started here, ``--max-requests-inflight=1000``):

ceiling   the apiserver's own write ceiling for the writes a node initialisation makes: create
          N kubelet-style Nodes, then per Node one metadata patch (providerID, labels, taint
          removed), one status patch (addresses) and one Event, from a tight client (no rate
          limit, 200 requests in flight), timed from the first create to the last write; best of 3.
init      N kubelet-style tainted Nodes created at once while kccm runs: time from the first
          create until every Node lost the taint; kccm's CPU seconds per Node (utime+stime of
          the daemon process over the run, from /proc).
scale     --nodes initialised, Ready Nodes and --services LoadBalancer Services exist before
          kccm starts: time from start until every Service has an ingress; /metrics and
          /healthz are fetched every second throughout (slowest answers reported); RSS at the
          end. ``--provider local`` runs this scenario (and restart) on the local provider
          instead (bench/localcloud.py: a SQLite state file knowing every Node's instance,
          --configure-cloud-routes=false; its data plane only with --dataplane, whose RSS and
          CPU are reported with the state file's size; then the Nodes are at loopback
          127.64.x.x, so its health probes stay on this machine). The data plane probes every
          (balancer, node): keep --dataplane runs small (bench/dataplane_scale.py).
steady    then --steady-minutes of steady state: cloud calls (from kccm's
          cloudprovider_calls_total) per Node per hour.
restart   then kccm is stopped (SIGTERM) and started again with the same cloud (the fake keeps
          its load balancers in a state file): every Service is ensured again, as upstream;
          the mutating requests the fake made to its cloud (its ledger,
          kccm_cloud_api_requests_total{mutating="true"}) until the service queue has handled
          every Service (for local: writes to its state file).

--kccm runs another checkout's daemon (e.g. the previous commit's, for a before/after).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from informer_nodes import realistic_node  # bench/ is on sys.path when run as a script
from kube_helpers import (
    UNINIT,
    Completion,
    bounded,
    delete_quietly,
    has_ingress,
    metrics_token,
    untainted,
)
from localcloud import local_cloud, local_figures, stop_dataplane
from metrics_text import cloud_calls, metric_sum, request_counts, request_delta, requests_text
from proc import cpu_seconds, rss_mib

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import (
    EVENTS,
    NAMESPACES,
    NODES,
    SERVICES,
)
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

EXTRA_ARGS: list[str] = []  # --kccm-args
PROBE_INTERVAL = [1.0]  # --probe-interval
PY_SPY: list[str] = []  # --py-spy: the py-spy binary, then where its raw stacks go


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- objects ----------------------------------------------------------------------------------


def kubelet_node(name: str, run: str, i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"bench-run": run, "kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": UNINIT, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip_of(i)},
                {"type": "Hostname", "address": name},
            ]
        },
    }


def ready_node(name: str, run: str, i: int, provider: str = "fake") -> dict[str, Any]:
    """A kubelet-shaped Node (labels, annotations, conditions, capacity, ~40 images; the
    shape bench/informer_nodes.py uses) that the cloud-node controller initialised long ago,
    Ready, with a ``provider://name`` providerID."""
    node = realistic_node(i)
    meta = node["metadata"]
    meta["name"] = name
    meta["labels"].update({"bench-run": run, "kubernetes.io/hostname": name})
    meta["annotations"]["alpha.kubernetes.io/provided-node-ip"] = ip_of(i)
    node["spec"]["providerID"] = f"{provider}://{name}"
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": ip_of(i)},
        {"type": "Hostname", "address": name},
    ]
    return node


def lb_service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


NODE_NET = [10]  # --dataplane: 127, so that its health probes stay on this machine


def ip_of(i: int) -> str:
    return f"{NODE_NET[0]}.{64 + i // 65536}.{(i // 256) % 256}.{i % 256}"


def cloud_config(path: Path, names: list[str], latency: float, state_file: Path | None) -> Path:
    # The bench's Nodes have no pod CIDRs: a cloud without routes (the route controller is
    # skipped, as upstream does, and needs no --cluster-cidr).
    lines = ["[Global]", f"latency = {latency}", "disable = routes"]
    if state_file is not None:
        lines.append(f"state-file = {state_file}")
    for i, name in enumerate(names):
        lines += [f'[Instance "{name}"]', f"address = InternalIP={ip_of(i)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


# -- the daemon -------------------------------------------------------------------------------


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    port: int
    token: str
    log_path: Path
    started: float = field(default_factory=time.perf_counter)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def metrics(self) -> tuple[float, str]:
        """(seconds the answer took, the body)."""
        return self.get("/metrics")

    def get(self, path: str) -> tuple[float, str]:
        """GET ``path`` with the metrics token: (seconds the answer took, the body)."""
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}")
        request.add_header("Authorization", f"Bearer {self.token}")
        context = ssl._create_unverified_context()  # the daemon's self-signed serving cert
        start = time.perf_counter()
        with urllib.request.urlopen(request, context=context, timeout=60) as response:
            body = response.read().decode()
        return time.perf_counter() - start, body

    async def wait_logged(self, text: str, within: float = 60.0) -> None:
        """Until the daemon's log has ``text`` (it polls a file another process writes)."""
        deadline = time.monotonic() + within
        while text not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise SystemExit(f"kccm never logged {text!r}:\n{tail}")
            await asyncio.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_daemon(
    kccm: list[str],
    kubeconfig: Path,
    config: Path,
    token: str,
    tmp: Path,
    provider: str = "fake",
    extra: Sequence[str] = (),
) -> Daemon:
    port = free_port()
    log_path = tmp / f"kccm-{port}.log"
    args = [
        *kccm,
        f"--cloud-provider={provider}",
        f"--cloud-config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        *extra,
        *EXTRA_ARGS,
    ]
    return launch_daemon(args, port, token, log_path)


def launch_daemon(args: list[str], port: int, token: str, log_path: Path) -> Daemon:
    """Run the kccm command line ``args`` (logging to ``log_path``) until it serves /metrics."""
    with log_path.open("wb") as sink:
        proc = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT)
    daemon = Daemon(proc, port, token, log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"kccm exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            daemon.metrics()
            return daemon
        time.sleep(0.2)
    raise SystemExit(f"kccm did not serve /metrics within 60 s:\n{log_path.read_text()[-3000:]}")


@contextlib.contextmanager
def profiled(daemon: Daemon, name: str) -> Any:
    """With --py-spy, sample the daemon's stacks (py-spy's raw format) while the block runs."""
    if not PY_SPY:
        yield
        return
    out = Path(PY_SPY[1]) / f"{name}-{daemon.proc.pid}.txt"
    spy = subprocess.Popen(
        [PY_SPY[0], "record", "--format", "raw", "--rate", "200", "--nonblocking",
         "--pid", str(daemon.proc.pid), "--output", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)
        log(f"py-spy stacks: {out}")


class MetricsProbe:
    """Fetches ``path`` (/metrics, /healthz) every ``--probe-interval`` seconds from
    bench/http_probe.py, a process of its own (so the bench's own work is not counted); keeps
    every answer's time."""

    def __init__(self, daemon: Daemon, path: str = "/metrics") -> None:
        self.daemon = daemon
        self.path = path
        self.failures = 0
        self.times: list[float] = []
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> MetricsProbe:
        url = f"https://127.0.0.1:{self.daemon.port}{self.path}"
        self._proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("http_probe.py")),
                url,
                f"--interval={PROBE_INTERVAL[0]}",
            ],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "KCCM_PROBE_TOKEN": self.daemon.token},
        )
        self._reader = threading.Thread(target=self._read, args=(self._proc,), daemon=True)
        self._reader.start()
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("failed"):
                self.failures += 1
            elif line.strip():
                self.times.append(float(line))

    def __exit__(self, *exc: object) -> None:
        if self._proc is None or self._reader is None:
            return
        self._proc.terminate()
        self._proc.wait(60)
        self._reader.join(60)
        self._proc = self._reader = None

    def summary(self) -> str:
        median = statistics.median(self.times) if self.times else 0.0
        return (f"{self.slowest * 1000:.0f} ms (median {median * 1000:.0f} ms; "
                f"{len(self.times)} fetched, {self.failures} failed)")  # fmt: skip

    @property
    def slowest(self) -> float:
        return max(self.times, default=0.0)


# -- scenarios --------------------------------------------------------------------------------


@dataclass
class Bench:
    plane: ControlPlane
    kube: KubeApiClient
    kccm: list[str]
    latency: float
    tmp: Path
    token: str = ""
    rows: list[tuple[str, str]] = field(default_factory=list)
    provider: str = "fake"  # of the scale scenario (and its restart)
    dataplane: bool = False  # local: the provider starts its data plane

    def row(self, what: str, figure: str) -> None:
        self.rows.append((what, figure))
        log(f"{what}: {figure}")

    async def ceiling(self, count: int) -> float:
        run = uuid.uuid4().hex[:8]
        names = [f"ceil-{run}-{i:05d}" for i in range(count)]
        start = time.perf_counter()
        await bounded(200, [self.kube.create(NODES, kubelet_node(n, run, i)) for i, n in
                            enumerate(names)])  # fmt: skip
        await bounded(200, [self._init_writes(n, i) for i, n in enumerate(names)])
        took = time.perf_counter() - start
        self.row(f"apiserver write ceiling, {count} node inits (tight client)", f"{took:.1f} s")
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in names])
        return took

    async def _init_writes(self, name: str, i: int) -> None:
        labels = {"node.kubernetes.io/instance-type": "fake.small"}
        patch = {"metadata": {"labels": labels}, "spec": {"providerID": f"fake://{name}",
                 "taints": None}}  # fmt: skip
        await self.kube.patch(NODES, name, patch)
        status = {"status": {"addresses": [{"type": "InternalIP", "address": ip_of(i)}]}}
        await self.kube.patch(NODES, name, status, subresource="status")
        event = {
            "metadata": {"generateName": f"{name}.", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": name, "apiVersion": "v1"},
            "reason": "Synced",
            "message": "Node synced successfully",
            "type": "Normal",
            "source": {"component": "cloud-node-controller"},
        }
        await self.kube.create(EVENTS, event, namespace="default")

    async def init(self, count: int) -> tuple[float, float]:
        run = uuid.uuid4().hex[:8]
        names = [f"init-{run}-{i:05d}" for i in range(count)]
        config = cloud_config(self.tmp / f"init-{run}.conf", names, self.latency, None)
        daemon = start_daemon(self.kccm, self.plane.admin_kubeconfig, config, self.token, self.tmp)
        try:
            await daemon.wait_logged("caches synced")  # leader elected, informers synced
            async with Completion(
                self.kube, NODES, count, untainted, label_selector=f"bench-run={run}"
            ) as completion:
                cpu0 = daemon.cpu_seconds()
                start = time.perf_counter()
                with profiled(daemon, f"init-{count}"):
                    await bounded(200, [self.kube.create(NODES, kubelet_node(n, run, i))
                                        for i, n in enumerate(names)])  # fmt: skip
                    await completion.finished.wait()
                took = time.perf_counter() - start
                cpu = daemon.cpu_seconds() - cpu0
        finally:
            daemon.stop()
        self.row(f"kccm defaults: {count} nodes initialised", f"{took:.1f} s "
                 f"({count / took:.0f} nodes/s)")  # fmt: skip
        self.row("kccm CPU per node initialisation", f"{cpu / count * 1000:.2f} ms "
                 f"({cpu:.1f} s in all)")  # fmt: skip
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in names])
        return took, cpu

    async def scale(
        self, nodes: int, services: int, steady_minutes: float, *, restart: bool = True
    ) -> None:
        run = uuid.uuid4().hex[:8]
        names = [f"scale-{run}-{i:05d}" for i in range(nodes)]
        namespace = f"bench-{run}"
        await self.kube.create(NAMESPACES, {"metadata": {"name": namespace}})
        log(f"creating {nodes} Ready Nodes and {services} LoadBalancer Services")
        await bounded(200, [self.kube.create(NODES, ready_node(n, run, i, self.provider))
                            for i, n in enumerate(names)])  # fmt: skip
        await bounded(200, [self._ready_status(n, run, i) for i, n in enumerate(names)])
        await bounded(100, [self.kube.create(SERVICES, lb_service(f"svc-{i:05d}", namespace))
                            for i in range(services)])  # fmt: skip
        config, extra = self.cloud(run, names, services)
        served = request_counts(await self.kube.get_text("/metrics"))
        async with Completion(
            self.kube, SERVICES, services, has_ingress, namespace=namespace
        ) as completion:
            daemon = self.start(config, extra)
            try:
                with (
                    MetricsProbe(daemon) as probe,
                    MetricsProbe(daemon, "/healthz") as healthz,
                    profiled(daemon, f"scale-{self.provider}-{nodes}"),
                ):
                    await completion.finished.wait()
                    took = time.perf_counter() - daemon.started
                    cpu = daemon.cpu_seconds()
                    self.row(f"{self.provider}: {nodes} nodes + {services} LB Services at "
                             f"start: all ensured", f"{took:.1f} s after kccm started, "
                             f"{cpu:.1f} CPU-s")  # fmt: skip
                    self.row("slowest /metrics answer while syncing", probe.summary())
                    self.row("slowest /healthz answer while syncing", healthz.summary())
                    self.row(f"RSS with {nodes} nodes + {services} services",
                             f"{daemon.rss_mib():.0f} MiB")  # fmt: skip
                    served_now = request_counts(await self.kube.get_text("/metrics"))
                    self.row("apiserver requests until all ensured (the bench's too)",
                             requests_text(request_delta(served, served_now)))  # fmt: skip
                    if self.provider == "local":
                        for what, figure in local_figures(config, self.dataplane):
                            self.row(what, figure)
                if steady_minutes > 0:
                    await self.steady(daemon, nodes, steady_minutes)
                daemon.stop()
                if restart:
                    await self.restart(config, extra, services)
            finally:
                daemon.stop()
                if self.provider == "local" and self.dataplane:
                    stop_dataplane(config)
        log("cleaning up")
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in names])

    def cloud(self, run: str, names: list[str], services: int) -> tuple[Path, list[str]]:
        """The scale scenario's cloud config and the daemon's extra flags."""
        if self.provider == "local":
            where = self.tmp / f"local-{run}"
            where.mkdir()
            return local_cloud(where, names, ip_of, services=services, dataplane=self.dataplane)
        state = self.tmp / f"fake-lbs-{run}.jsonl"
        return cloud_config(self.tmp / f"scale-{run}.conf", names, self.latency, state), []

    def start(self, config: Path, extra: list[str]) -> Daemon:
        kubeconfig = self.plane.admin_kubeconfig
        return start_daemon(
            self.kccm, kubeconfig, config, self.token, self.tmp, self.provider, extra
        )

    async def _ready_status(self, name: str, run: str, i: int) -> None:
        status = {"status": ready_node(name, run, i)["status"]}
        await self.kube.patch(NODES, name, status, subresource="status")

    async def steady(self, daemon: Daemon, nodes: int, minutes: float) -> None:
        await asyncio.sleep(30)  # let the start-up work drain
        _, before = await asyncio.to_thread(daemon.metrics)
        log(f"steady state: watching cloud calls for {minutes:g} min")
        with MetricsProbe(daemon) as probe:
            await asyncio.sleep(minutes * 60)
        _, after = await asyncio.to_thread(daemon.metrics)
        calls0, calls1 = cloud_calls(before), cloud_calls(after)
        delta = {m: calls1.get(m, 0) - calls0.get(m, 0) for m in calls1}
        total = sum(delta.values())
        per_node_hour = total / nodes * (60 / minutes)
        detail = ", ".join(f"{m} {v:.0f}" for m, v in sorted(delta.items()) if v) or "none"
        self.row(f"steady state ({minutes:g} min): cloud calls per node per hour",
                 f"{per_node_hour:.4f} ({total:.0f} calls: {detail})")  # fmt: skip
        self.row("slowest /metrics answer in steady state", f"{probe.slowest * 1000:.0f} ms")
        self.row("RSS after steady state", f"{daemon.rss_mib():.0f} MiB")

    async def restart(self, config: Path, extra: list[str], services: int) -> None:
        daemon = self.start(config, extra)
        try:
            body = await self._quiet(daemon, services)
            calls = cloud_calls(body)
            mutating = metric_sum(body, "kccm_cloud_api_requests_total", mutating="true")
            detail = ", ".join(f"{m} {v:.0f}" for m, v in sorted(calls.items()) if v) or "none"
            self.row(f"restart with {services} unchanged LBs: mutating cloud requests",
                     f"{mutating:.0f} (framework calls: {detail})")  # fmt: skip
        finally:
            daemon.stop()

    async def _quiet(self, daemon: Daemon, services: int) -> str:
        """Wait until the service queue has taken every Service and nothing moved for 5 s."""
        last: tuple[float, ...] = ()
        since = time.monotonic()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            _, body = await asyncio.to_thread(daemon.metrics)
            adds = metric_sum(body, "workqueue_adds_total", name="service")
            depth = metric_sum(body, "workqueue_depth", name="service")
            state = (adds, depth, *sorted(cloud_calls(body).values()))
            if state != last:
                last, since = state, time.monotonic()
            elif adds >= services and depth == 0 and time.monotonic() - since >= 5:
                return body
            await asyncio.sleep(1.0)
        raise SystemExit("kccm did not settle within 600 s after the restart")


def print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(what) for what, _ in rows)
    print(f"{'scenario'.ljust(width)}  result")
    for what, figure in rows:
        print(f"{what.ljust(width)}  {figure}")


async def main_async(args: argparse.Namespace, plane: ControlPlane, tmp: Path) -> None:
    config = load_cluster_config(str(plane.admin_kubeconfig))
    kube = KubeApiClient(config, qps=0, burst=0)
    bench = Bench(plane, kube, shlex.split(args.kccm), args.latency, tmp)
    bench.provider, bench.dataplane = args.provider, args.dataplane
    if args.dataplane:
        NODE_NET[0] = 127
    only = set(args.only.split(","))
    try:
        bench.token = await metrics_token(kube)
        if "ceiling" in only:  # the best of three: the ceiling, not a noisy sample of it
            ceiling = min([await bench.ceiling(args.nodes_init) for _ in range(3)])
        if "init" in only:
            took, _ = await bench.init(args.nodes_init)
            if "ceiling" in only:
                bench.row("init time / write ceiling", f"{took / ceiling:.2f}x")
        if "scale" in only:
            steady = args.steady_minutes if "steady" in only else 0
            await bench.scale(args.nodes, args.services, steady, restart="restart" in only)
    finally:
        await kube.close()
        print_table(bench.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes-init", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--steady-minutes", type=float, default=10.0)
    parser.add_argument("--kccm", default=f"{sys.executable} -m kccm")
    parser.add_argument("--kccm-args", default="", help="extra kccm flags (not defaults!)")
    parser.add_argument("--only", default="ceiling,init,scale,steady,restart")
    parser.add_argument("--provider", choices=("fake", "local"), default="fake",
                        help="the provider of the scale scenario and its restart")  # fmt: skip
    parser.add_argument("--dataplane", action="store_true",
                        help="local: the provider starts its data plane")  # fmt: skip
    parser.add_argument("--py-spy", nargs=2, metavar=("BINARY", "DIR"), default=[],
                        help="sample the daemon with py-spy during init and scale")  # fmt: skip
    parser.add_argument("--probe-interval", type=float, default=1.0,
                        help="seconds between two /metrics (and /healthz) fetches")  # fmt: skip
    args = parser.parse_args()
    PROBE_INTERVAL[0] = args.probe_interval
    EXTRA_ARGS.extend(shlex.split(args.kccm_args))
    PY_SPY.extend(args.py_spy)
    # The default node-port range holds 2,768 Services; --services may ask for more.
    apiserver_args = (
        "--max-requests-inflight=1000",
        "--max-mutating-requests-inflight=500",
        "--service-node-port-range=30000-45000",
    )
    with (
        tempfile.TemporaryDirectory(prefix="kccm-bench-") as tmp,
        ControlPlane(extra_apiserver_args=apiserver_args) as plane,
    ):
        log(f"control plane up in {plane.started_in:.1f} s")
        asyncio.run(main_async(args, plane, Path(tmp)))


if __name__ == "__main__":
    main()
