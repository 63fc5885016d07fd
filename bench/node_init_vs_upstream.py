"""CPU per 1,000 Node initialisations: kccm vs upstream's cloud-controller-manager (issue 28).

Usage: .venv/bin/python bench/node_init_vs_upstream.py [--nodes 1000] [--repetitions 5]
           [--latency 0.05] [--shape kubelet|realistic] [--controllers LIST]
           [--only kccm,upstream] [--kccm "<python> -m kccm"] [--kccm-args ARGS]
           [--upstream PATH] [--upstream-args ARGS] [--json FILE]
           [--py-spy BINARY DIR]

Needs upstream's binary: ``make upstream-ccm`` (hack/upstream-ccm: k8s.io/cloud-provider
v0.36.3's framework as an external provider builds it, with upstream's own fake cloud
registered as ``fake``).

Starts one etcd + kube-apiserver (``--max-requests-inflight=1000
--max-mutating-requests-inflight=500``, as bench/scale.py), then runs the two daemons one after
the other, alternating (kccm, upstream, kccm, ...), ``--repetitions`` times each. Each run:

- a fresh daemon process on a fresh cloud config naming the run's N Nodes, every cloud call
  answered after ``--latency`` seconds (kccm: the fake provider's config exactly as
  bench/scale.py's ``init`` scenario writes it; upstream: fake.Cloud.RequestDelay, every
  instance with providerID ``fake://<name>``, instance type ``fake.small``, zone
  ``fake-zone-a``, region ``fake-region`` and the Node's own InternalIP, as kccm's fake);
- once it serves /metrics and has synced its caches, the bench waits until it is idle
  (< 0.03 CPU-s in a second), so start-up costs are excluded;
- N tainted Nodes are created at once (bench/scale.py's ``kubelet_node``, or with
  ``--shape realistic`` bench/informer_nodes.py's kubelet-shaped Node: conditions with
  Ready=True, capacity, 40 images; its cloud labels and providerID removed, the taint added);
- measured: the daemon's CPU seconds (utime+stime of its process, /proc/<pid>/stat) from just
  before the first create until every Node lost ``node.cloudprovider.kubernetes.io/
  uninitialized`` ("to done", the issue's figure), and until it is idle again ("to idle": what
  it still does afterwards, e.g. Events it posts late); the wall time; the apiserver's CPU
  over the same span; the 1-minute load average at the start and the end;
- checked: every Node has providerID ``fake://<name>``, the instance-type, zone and region
  labels (GA and beta) and no taint left: a daemon that does not initialise fails the bench;
- counted: the apiserver's ``apiserver_request_total`` by verb/resource/subresource until
  done and over the run (the bench's own 1,000 creates included, the same for both; the
  apiserver labels requests by no client, so the counts are those of the whole apiserver while
  one daemon runs): what a daemon wrote by done (e.g. how many of its Events) is what its CPU
  to done paid for;
- then the daemon is stopped (SIGTERM) and the Nodes deleted.

kccm runs at its defaults (``--cloud-provider=fake``, ``--cloud-config``, ``--kubeconfig``,
a loopback ``--secure-port``; nothing else unless ``--kccm-args``). Upstream runs with
``--leader-elect=false`` (kccm keeps its default lease; renewing it every 2 s costs little),
delegated authentication/authorization against the same apiserver (the bench reads /metrics
with a ServiceAccount token), and the settings of ``--upstream-args`` (see UPSTREAM_TUNING).
``--controllers`` is given to both daemons (default: each daemon's defaults, i.e. ``*``:
cloud-node, cloud-node-lifecycle, service; route is skipped by both, the cloud has no routes).

Reported per daemon: median, min and max of the CPU seconds per 1,000 initialisations (to
done and to idle), of the wall time and of the apiserver's CPU, the loads, and the median
request counts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from informer_nodes import realistic_node
from kube_helpers import UNINIT, Completion, bounded, delete_quietly, metrics_token, untainted
from metrics_text import request_counts, request_delta  # bench/ is on sys.path
from proc import CLK_TCK
from scale import (
    PY_SPY,
    Daemon,
    cloud_config,
    ip_of,
    kubelet_node,
    launch_daemon,
    log,
    profiled,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

REPO = Path(__file__).resolve().parent.parent

# Upstream "tuned to its best" (the cheapest in CPU of the settings tried, docs/measurements.md
# "Node initialisation CPU vs upstream"): as many node workers as kccm's default (upstream's
# default is 1: 1,000 initialisations then take over a minute at 50 ms per call) and an API
# client limit as high as kccm's default (upstream's 20 qps / burst 30 would pace the writes).
UPSTREAM_TUNING = "--concurrent-node-syncs=32 --kube-api-qps=1000 --kube-api-burst=2000"

GO_ENV = ("GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG")  # inherited by upstream's process

CLOUD_LABELS = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
)


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def log_tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:]


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def realistic_tainted(name: str, run: str, i: int) -> dict[str, Any]:
    """bench/informer_nodes.py's kubelet-shaped Node as a kubelet registers it with
    ``--cloud-provider=external``: no providerID, no cloud labels, the taint."""
    node = realistic_node(i)
    meta = node["metadata"]
    meta["name"] = name
    for label in (*CLOUD_LABELS, "bench", "pool"):
        meta["labels"].pop(label, None)
    meta["labels"].update({"bench-run": run, "kubernetes.io/hostname": name})
    meta["annotations"].pop("alpha.kubernetes.io/provided-node-ip", None)
    node["spec"] = {"taints": [{"key": UNINIT, "value": "true", "effect": "NoSchedule"}]}
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": ip_of(i)},
        {"type": "Hostname", "address": name},
    ]
    return node


SHAPES = {"kubelet": kubelet_node, "realistic": realistic_tainted}


def upstream_cloud_config(path: Path, names: list[str], latency: float) -> Path:
    """hack/upstream-ccm/main.go's JSON config: the same instances as kccm's fake config."""
    config = {
        "requestDelay": f"{latency * 1000:g}ms",
        "zone": "fake-zone-a",
        "region": "fake-region",
        "instanceType": "fake.small",
        "instances": {
            name: {"addresses": [{"type": "InternalIP", "address": ip_of(i)}]}
            for i, name in enumerate(names)
        },
    }
    path.write_text(json.dumps(config))
    return path


def upstream_binary() -> Path:
    out = subprocess.run(
        ["bash", str(REPO / "hack/upstream-ccm/build.sh"), "--print-dir"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return Path(out) / "cloud-controller-manager"


@dataclass
class Run:
    daemon: str
    repetition: int
    nodes: int
    cpu_done: float
    cpu_idle: float
    wall: float
    apiserver_cpu: float
    load_start: float
    load_end: float
    requests: dict[str, int] = field(default_factory=dict)
    requests_by_done: dict[str, int] = field(default_factory=dict)

    def per_1000(self, value: float) -> float:
        return value / self.nodes * 1000


@dataclass
class Bench:
    plane: ControlPlane
    kube: KubeApiClient
    args: argparse.Namespace
    tmp: Path
    token: str = ""
    runs: list[Run] = field(default_factory=list)

    def command(self, daemon: str, names: list[str], run: str, port: int) -> list[str]:
        kubeconfig = self.plane.admin_kubeconfig
        controllers = [f"--controllers={self.args.controllers}"] if self.args.controllers else []
        common = [
            "--cloud-provider=fake",
            f"--kubeconfig={kubeconfig}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            *controllers,
        ]
        if daemon == "kccm":
            config = cloud_config(self.tmp / f"{run}.conf", names, self.args.latency, None)
            return [
                *shlex.split(self.args.kccm),
                *common,
                f"--cloud-config={config}",
                *shlex.split(self.args.kccm_args),
            ]
        config = upstream_cloud_config(self.tmp / f"{run}.json", names, self.args.latency)
        return [
            str(self.args.upstream),
            *common,
            f"--cloud-config={config}",
            "--leader-elect=false",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            *shlex.split(self.args.upstream_args),
        ]

    async def wait_idle(self, daemon: Daemon, within: float = 60.0) -> float:
        """Until the daemon used < 0.03 CPU-s in a second; the time it took."""
        start = time.monotonic()
        last = daemon.cpu_seconds()
        while time.monotonic() - start < within:
            await asyncio.sleep(1.0)
            now = daemon.cpu_seconds()
            if now - last < 0.03:
                return time.monotonic() - start
            last = now
        log(f"  {Path(daemon.proc.args[0]).name} never idle within {within:.0f} s; going on")
        return time.monotonic() - start

    async def one(self, daemon_name: str, repetition: int) -> Run:
        count = self.args.nodes
        run = uuid.uuid4().hex[:8]
        names = [f"vs-{run}-{i:05d}" for i in range(count)]
        port = free_port()
        log_path = self.tmp / f"{daemon_name}-{run}.log"
        args = self.command(daemon_name, names, run, port)
        daemon = await asyncio.to_thread(launch_daemon, args, port, self.token, log_path)
        apiserver = self.plane.pids["kube-apiserver"]
        shape = SHAPES[self.args.shape]
        try:
            if daemon_name == "kccm":
                await daemon.wait_logged("caches synced")
            else:
                await daemon.wait_logged("Caches are synced")
            async with Completion(
                self.kube, NODES, count, untainted, label_selector=f"bench-run={run}"
            ) as completion:
                await self.wait_idle(daemon)
                before = request_counts(await self.kube.get_text("/metrics"))
                load_start = load1()
                api0, cpu0 = cpu_of(apiserver), daemon.cpu_seconds()
                start = time.perf_counter()
                # profiled() samples only with --py-spy; py-spy reads CPython's stacks, not Go's
                kccm = daemon_name == "kccm"
                with profiled(daemon, f"node-init-{repetition}") if kccm else nullcontext():
                    await bounded(200, [self.kube.create(NODES, shape(n, run, i))
                                        for i, n in enumerate(names)])  # fmt: skip
                    await completion.finished.wait()
                wall = time.perf_counter() - start
                cpu_done = daemon.cpu_seconds() - cpu0
                api_done = cpu_of(apiserver) - api0
                load_end = load1()
                at_done = request_counts(await self.kube.get_text("/metrics"))
                await self.wait_idle(daemon)
                # the idle second wait_idle saw is not the daemon's work: < 0.03 s, kept in
                cpu_idle = daemon.cpu_seconds() - cpu0
                after = request_counts(await self.kube.get_text("/metrics"))
            await self.check(names, run, daemon_name, log_path)
        finally:
            daemon.stop()
        result = Run(
            daemon=daemon_name,
            repetition=repetition,
            nodes=count,
            cpu_done=cpu_done,
            cpu_idle=cpu_idle,
            wall=wall,
            apiserver_cpu=api_done,
            load_start=load_start,
            load_end=load_end,
            requests=request_delta(before, after),
            requests_by_done=request_delta(before, at_done),
        )
        log(
            f"{daemon_name} #{repetition}: {count} initialised in {wall:.1f} s; CPU "
            f"{cpu_done:.2f} s to done, {cpu_idle:.2f} s to idle; apiserver {api_done:.2f} s; "
            f"load {load_start:.2f} -> {load_end:.2f}"
        )
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in names])
        return result

    async def check(self, names: list[str], run: str, daemon: str, log_path: Path) -> None:
        """Every Node initialised as the cloud says: providerID, cloud labels, no taint."""
        nodes = await self.kube.list(NODES, label_selector=f"bench-run={run}")
        items = {n["metadata"]["name"]: n for n in nodes.items}
        wrong = []
        for name in names:
            node = items.get(name)
            if node is None:
                wrong.append(f"{name}: missing")
                continue
            labels = node["metadata"].get("labels") or {}
            problems = [f"no label {label}" for label in CLOUD_LABELS if label not in labels]
            if node["spec"].get("providerID") != f"fake://{name}":
                problems.append(f"providerID {node['spec'].get('providerID')!r}")
            problems += ["still tainted"] if not untainted(node) else []
            if problems:
                wrong.append(f"{name}: {', '.join(problems)}")
        if wrong:
            tail = log_tail(log_path)
            raise SystemExit(
                f"{daemon} did not initialise {len(wrong)} of {len(names)} Nodes, e.g. "
                f"{wrong[:3]}\nits log ends:\n{tail}"
            )


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def report(runs: list[Run], args: argparse.Namespace) -> None:
    print()
    print(
        f"{args.nodes} Node initialisations, {args.latency * 1000:g} ms per cloud call, "
        f"shape {args.shape}, controllers {args.controllers or 'each daemon default'}"
    )
    print(f"kccm: {args.kccm} {args.kccm_args}".rstrip())
    print(f"upstream: {args.upstream} --leader-elect=false {args.upstream_args}".rstrip())
    go_env = " ".join(f"{k}={os.environ[k]}" for k in GO_ENV if k in os.environ)
    print(f"upstream's Go runtime environment: {go_env or 'defaults'}")
    print()
    print("run            CPU-s to done  to idle  wall s  apiserver CPU-s  load1 start -> end")
    for r in runs:
        print(
            f"{r.daemon:<8} #{r.repetition:<3}  {r.cpu_done:13.2f}  {r.cpu_idle:7.2f}  "
            f"{r.wall:6.1f}  {r.apiserver_cpu:15.2f}  {r.load_start:.2f} -> {r.load_end:.2f}"
        )
    print()
    medians: dict[str, float] = {}
    for daemon in ("kccm", "upstream"):
        mine = [r for r in runs if r.daemon == daemon]
        if not mine:
            continue
        done = [r.per_1000(r.cpu_done) for r in mine]
        medians[daemon] = statistics.median(done)
        print(f"{daemon} ({len(mine)} runs), per 1,000 initialisations:")
        print(f"  CPU-s to done     {spread(done)}")
        print(f"  CPU-s to idle     {spread([r.per_1000(r.cpu_idle) for r in mine])}")
        print(f"  wall s (all)      {spread([r.wall for r in mine])}")
        print(f"  apiserver CPU-s   {spread([r.per_1000(r.apiserver_cpu) for r in mine])}")
        print(f"  load1 at starts   {spread([r.load_start for r in mine])}")
        print(f"  load1 at ends     {spread([r.load_end for r in mine])}")
        for label, of in (("by done", "requests_by_done"), ("over a run", "requests")):
            keys = sorted({k for r in mine for k in getattr(r, of)})
            counts = ", ".join(
                f"{k} {statistics.median([getattr(r, of).get(k, 0) for r in mine]):g}" for k in keys
            )
            print(f"  apiserver requests {label} (median): {counts}")
    if len(medians) == 2:
        ratio = medians["kccm"] / medians["upstream"]
        print(f"\nkccm / upstream, median CPU to done: {ratio:.2f}x")


async def main_async(args: argparse.Namespace, plane: ControlPlane, tmp: Path) -> list[Run]:
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    bench = Bench(plane, kube, args, tmp)
    daemons = [d for d in ("kccm", "upstream") if d in args.only.split(",")]
    try:
        bench.token = await metrics_token(kube)
        for repetition in range(1, args.repetitions + 1):
            order = daemons if repetition % 2 else daemons[::-1]
            for daemon in order:
                bench.runs.append(await bench.one(daemon, repetition))
    finally:
        await kube.close()
    return bench.runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="kubelet")
    parser.add_argument("--controllers", default="", help="--controllers for both daemons")
    parser.add_argument("--only", default="kccm,upstream")
    parser.add_argument("--kccm", default=f"{sys.executable} -m kccm")
    parser.add_argument("--kccm-args", default="", help="extra kccm flags (not defaults!)")
    parser.add_argument("--upstream", type=Path, default=None, help="default: make upstream-ccm's")
    parser.add_argument("--upstream-args", default=UPSTREAM_TUNING)
    parser.add_argument("--json", type=Path, default=None, help="write every run here too")
    parser.add_argument("--py-spy", nargs=2, metavar=("BINARY", "DIR"), default=[],
                        help="sample kccm with py-spy from the first create to done")  # fmt: skip
    args = parser.parse_args()
    PY_SPY.extend(args.py_spy)
    if args.upstream is None and "upstream" in args.only:
        args.upstream = upstream_binary()
        if not os.access(args.upstream, os.X_OK):
            raise SystemExit(f"no {args.upstream}: run `make upstream-ccm` first")
    apiserver_args = ("--max-requests-inflight=1000", "--max-mutating-requests-inflight=500")
    with (
        tempfile.TemporaryDirectory(prefix="kccm-bench-") as tmp,
        ControlPlane(extra_apiserver_args=apiserver_args) as plane,
    ):
        log(f"control plane up in {plane.started_in:.1f} s; load1 {load1():.2f}")
        runs = asyncio.run(main_async(args, plane, Path(tmp)))
    report(runs, args)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
