"""The alibabacloud provider at scale on kccm's Alibaba Cloud emulator, side by side with
upstream's cloud-provider-alibaba-cloud v2.14.0 manager on the same scenario: the emulator's
RPC calls by product and action.

Usage: .venv/bin/python bench/alibabacloud_scale.py [--nodes 1000] [--services 100]
           [--lb-nodes 3] [--refresh-every 30] [--steady-seconds 120]
           [--only kccm,upstream] [--quick] [--json out.json]

Starts its own etcd + kube-apiserver and the emulator (``kccm.emulators.alibabacloud``) holding
--nodes ECS instances and --lb-nodes more for the balancers, one VPC. Each daemon reads the same
upstream cloud config (access key, region, VPC, vSwitch, cluster id; routes off) and is pointed
at the emulator by upstream's own ``ECS_ENDPOINT``/``VPC_ENDPOINT``/``SLB_ENDPOINT``/
``NLB_ENDPOINT`` and ``ALICLOUD_CLIENT_SCHEME=HTTP``. A Node is named after its instance and
carries ``<region>.<instance id>`` as its providerID (kubelet's ``--provider-id``, as ACK starts
it), Ready, with the uninitialized taint.

For each daemon (kccm: ``--cloud-provider=alibabacloud``, ``--configure-cloud-routes=false``,
``--node-status-update-frequency`` = --refresh-every, every other flag at its default;
upstream: ``--controllers=node,service``, ``--configure-cloud-routes=false``, no leader
election, every other flag at its default):

init      one Node per instance created at once: wall time until every Node is initialised
          (providerID, InternalIP, instance type and zone, no taint), and the calls meanwhile;
steady    then --steady-seconds of the daemon over those Nodes: every call (kccm's periodic
          metadata refresh falls in it: --refresh-every);
ensure    those Nodes deleted, the daemon started again, --lb-nodes Nodes initialised, then
          --services LoadBalancer Services (two TCP ports each) created at once: wall time
          until each has its ingress, and the calls until the log is quiet for 5 s;
restart   the daemon stopped (SIGTERM) and started again, until the log is quiet for 5 s after
          it has read every balancer: the calls, and the mutating ones (expected: none);
then the Services are deleted through the daemon and what is left in the emulator is reported.

--quick is 50 Nodes, 10 Services, a tick every 5 s, 20 s counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from azure_bench_common import create_services, delete_services  # bench/ is on sys.path
from cloud_bench import UNINIT, log, print_tables, scale_arguments, window, work_dir
from cloud_bench import kubelet_node as bench_node
from kube_helpers import Completion, bounded, delete_quietly, metrics_token
from proc import cpu_seconds
from scale import launch_daemon

from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.testing import upstream as upstream_bins
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ROOT / "hack" / "alibabacloud" / "versions.env"
REGION, VPC, VSWITCH, CLUSTER = "cn-hangzhou", "vpc-bench", "vsw-bench", "c-bench"
CONFIG = {
    "accessKeyID": "a2NjbS1haw==",  # base64 of the emulator's default key, as upstream reads it
    "accessKeySecret": "a2NjbS1zZWNyZXQ=",
    "region": REGION,
    "vpcid": VPC,
    "vswitchid": f"{REGION}-h:{VSWITCH}",
    "zoneid": f"{REGION}-h",
    "clusterID": CLUSTER,
}


# -- the emulator, its log and the Nodes -------------------------------------------------------


def seed(emu: AlibabaEmulator, count: int, first: int) -> list[str]:
    """``count`` running instances of the VPC; their ids."""
    return [
        emu.admin.add_instance(
            vpc=VPC, vswitch=VSWITCH, private_ip=f"10.{(first + i) // 250}.{(first + i) % 250}.9"
        )["InstanceId"]
        for i in range(count)
    ]


def node(instance: str, run: str) -> dict[str, Any]:
    made = bench_node(instance, run)
    made["spec"]["providerID"] = f"{REGION}.{instance}"
    return made


def initialised(item: dict[str, Any]) -> bool:
    labels = item["metadata"].get("labels") or {}
    taints = {t["key"] for t in item["spec"].get("taints") or []}
    addresses = {a["type"] for a in (item.get("status") or {}).get("addresses") or []}
    return (
        UNINIT not in taints
        and "InternalIP" in addresses
        and "topology.kubernetes.io/zone" in labels
        and "node.kubernetes.io/instance-type" in labels
    )


def kind(entry: dict[str, Any]) -> str:
    """``slb CreateLoadBalancer``: the product and the action."""
    return f"{entry['service']} {entry['path']}"


def mutating(entries: list[dict[str, Any]]) -> list[str]:
    return [
        kind(e)
        for e in entries
        if e["service"] != "metadata" and not e["path"].startswith(("Describe", "List"))
    ]


async def quiet(emu: AlibabaEmulator, within: float, alive: Callable[[], None]) -> int:
    """Until the emulator's log has not grown for 5 s; its last sequence number then."""
    last, since = -1, time.monotonic()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive()
        seq = await asyncio.to_thread(emu.admin.last_seq)
        if seq != last:
            last, since = seq, time.monotonic()
        elif time.monotonic() - since >= 5.0:
            return last
        await asyncio.sleep(0.5)  # the emulator's log has no watch: quiet is read, not told
    raise SystemExit("the daemon did not settle in time")


async def read_every_balancer(emu: AlibabaEmulator, since: int, services: int, within: float,
                              alive: Callable[[], None]) -> None:  # fmt: skip
    """Until the log since ``since`` has a call naming each balancer (a restarted daemon has
    looked at every Service's balancer)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive()
        entries = await asyncio.to_thread(emu.admin.requests, since)
        params = [e.get("params") or {} for e in entries]
        seen = {p.get("LoadBalancerId") or p.get("LoadBalancerId.1") for p in params}
        if len(seen - {None}) >= services:
            return
        await asyncio.sleep(0.5)
    raise SystemExit("the restarted daemon did not read every balancer in time")


class Figures:
    def __init__(self, who: str) -> None:
        self.who = who
        self.figures: dict[str, Any] = {}
        self.tables: dict[str, Counter[str]] = {}

    def record(self, phase: str, entries: list[dict[str, Any]]) -> None:
        table = Counter(kind(e) for e in entries)
        self.tables[phase] = table
        self.figures[f"{phase}_calls"] = sum(table.values())
        self.figures[f"{phase}_calls_by_kind"] = dict(sorted(table.items()))


def left_behind(emu: AlibabaEmulator, baseline: dict[str, list[Any]]) -> dict[str, int]:
    left = emu.state()
    return {
        k: len(set(v) - set(baseline.get(k, ())))
        for k, v in left.items()
        if set(v) - set(baseline.get(k, ()))
    }


# -- the two daemons ---------------------------------------------------------------------------


class Process:
    """A daemon process logging to a file: kccm's (``launch_daemon``) or upstream's."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc, self.log_path = proc, log_path

    def alive(self) -> None:
        if self.proc.poll() is not None:
            text = self.log_path.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{self.log_path.name} exited {self.proc.returncode}:\n{text}")

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def manager_binary() -> str:
    override = os.environ.get("KCCM_ALIBABACLOUD_BIN")
    if override:
        return override
    version = dict(line.split("=", 1) for line in VERSIONS.read_text().splitlines() if "=" in line)[
        "ALIBABACLOUD_VERSION"
    ]
    path = upstream_bins.bin_cache() / f"alibabacloud-{version}" / "manager"
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{path} not found: build it with `make alibabacloud-upstream`")
    return str(path)


class Bench:
    def __init__(self, who: str, args: argparse.Namespace, plane: ControlPlane,
                 emu: AlibabaEmulator, kube: KubeApiClient, tmp: Path) -> None:  # fmt: skip
        self.who, self.args, self.plane, self.emu = who, args, plane, emu
        self.kube, self.tmp, self.token = kube, tmp, ""
        tmp.mkdir(parents=True, exist_ok=True)
        self.config = tmp / "cloud-config.json"
        self.config.write_text(json.dumps({"Global": CONFIG}))
        self.run = uuid.uuid4().hex[:8]
        self.out = Figures(who)

    def start(self, tick: float | None = None) -> Process:
        port = free_port()
        log_path = self.tmp / f"{self.who}-{port}.log"
        if self.who == "kccm":
            argv = [
                sys.executable, "-m", "kccm", "--cloud-provider=alibabacloud",
                f"--cloud-config={self.config}", f"--kubeconfig={self.plane.admin_kubeconfig}",
                f"--secure-port={port}", "--bind-address=127.0.0.1",
                "--configure-cloud-routes=false",
            ]  # fmt: skip
            if tick is not None:
                argv.append(f"--node-status-update-frequency={tick:g}s")
            return Process(launch_daemon(argv, port, self.token, log_path).proc, log_path)
        argv = [
            manager_binary(), f"--kubeconfig={self.plane.admin_kubeconfig}",
            f"--cloud-config={self.config}", "--controllers=node,service",
            "--configure-cloud-routes=false", "--leader-elect=false",
            "--metrics-bind-addr=0", "--health-probe-bind-addr=0", "--pprof-bind-addr=0",
        ]  # fmt: skip
        with log_path.open("wb") as sink:
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        return Process(proc, log_path)

    async def nodes(self, names: Sequence[str], run: str) -> float:
        """Nodes for ``names`` created at once; seconds until every one is initialised."""
        async with Completion(self.kube, NODES, len(names), initialised,
                              label_selector=f"bench-run={run}") as done:  # fmt: skip
            start = time.perf_counter()
            await bounded(200, [self.kube.create(NODES, node(n, run)) for n in names])
            await asyncio.wait_for(done.finished.wait(), self.args.timeout)
            return time.perf_counter() - start

    async def init_and_steady(self, names: list[str]) -> None:
        daemon = self.start(tick=self.args.refresh_every)
        try:
            since, cpu = self.emu.admin.last_seq(), daemon.cpu()
            took = await self.nodes(names, self.run)
            self.out.figures["init_seconds"] = round(took, 2)
            self.out.figures["init_cpu_seconds"] = round(daemon.cpu() - cpu, 1)
            self.out.record("init", window(self.emu, since))
            log(f"{self.who} init: {len(names)} Nodes in {took:.2f} s")
            mark = self.emu.admin.last_seq()
            await asyncio.sleep(self.args.steady_seconds)  # a bench counts over a fixed span
            daemon.alive()
            self.out.record("steady", window(self.emu, mark))
            log(f"{self.who} steady: {self.out.figures['steady_calls']} calls")
        finally:
            daemon.stop()

    async def ensure(self, drop: list[str], lb_nodes: list[str], namespace: str) -> None:
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in drop])
        daemon = self.start()
        try:
            await self.nodes(lb_nodes, f"{self.run}-lb")
            since, cpu = self.emu.admin.last_seq(), daemon.cpu()
            took = await create_services(
                self.kube, namespace, self.args.services, self.args.timeout
            )
            until = await quiet(self.emu, self.args.timeout, daemon.alive)
            self.out.figures["ensure_seconds"] = round(took, 2)
            self.out.figures["ensure_cpu_seconds"] = round(daemon.cpu() - cpu, 1)
            self.out.record("ensure", window(self.emu, since, until))
            log(f"{self.who} ensure: {self.args.services} Services in {took:.2f} s")
        finally:
            daemon.stop()

    async def restart(self) -> Process:
        since = self.emu.admin.last_seq()
        daemon = self.start()
        await read_every_balancer(
            self.emu, since, self.args.services, self.args.timeout, daemon.alive
        )
        until = await quiet(self.emu, self.args.timeout, daemon.alive)
        entries = window(self.emu, since, until)
        self.out.figures["restart_mutating"] = mutating(entries)
        self.out.record("restart", entries)
        log(f"{self.who} restart: {len(mutating(entries))} mutating calls")
        return daemon

    async def measure(self, names: list[str], lb_nodes: list[str]) -> None:
        baseline = self.emu.state()
        await self.init_and_steady(names)
        namespace = f"bench-{self.who}-{self.run}"
        await self.ensure(names, lb_nodes, namespace)
        daemon = await self.restart()
        try:
            await delete_services(self.kube, namespace, self.args.timeout)
            await bounded(50, [delete_quietly(self.kube, NODES, n) for n in lb_nodes])
            await quiet(self.emu, self.args.timeout, daemon.alive)
            self.out.figures["left_behind"] = left_behind(self.emu, baseline)
        finally:
            daemon.stop()


# -- the run -----------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace, plane: ControlPlane,
                     emu: AlibabaEmulator) -> list[Figures]:  # fmt: skip
    tmp = work_dir(args, "alibabacloud")
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    results = []
    try:
        token = await metrics_token(kube)
        started = time.perf_counter()
        names = await asyncio.to_thread(seed, emu, args.nodes, 0)
        lb_nodes = await asyncio.to_thread(seed, emu, args.lb_nodes, args.nodes)
        log(f"emulator: {len(names) + len(lb_nodes)} instances in "
            f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        for who in ("kccm", "upstream"):
            if who in args.only:
                bench = Bench(who, args, plane, emu, kube, tmp / who)
                bench.token = token
                await bench.measure(names, lb_nodes)
                results.append(bench.out)
    finally:
        await kube.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scale_arguments(parser, timeout=900.0)
    parser.add_argument("--steady-seconds", type=float, default=120.0, help="span counted")
    parser.add_argument("--only", default="kccm,upstream")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.services, args.refresh_every, args.steady_seconds = 50, 10, 5.0, 20.0
    apiserver_args = ("--max-requests-inflight=1000", "--max-mutating-requests-inflight=500")
    load_before = os.getloadavg()
    with alibaba_emulator() as emu:
        os.environ.update(emu.endpoint_env())  # both daemons' environment: upstream's variables
        with ControlPlane(extra_apiserver_args=apiserver_args) as plane:
            log(f"control plane up in {plane.started_in:.1f} s")
            emulator_cpu = cpu_seconds(emu.process.pid)
            results = asyncio.run(main_async(args, plane, emu))
            emulator_cpu = cpu_seconds(emu.process.pid) - emulator_cpu
    load_after = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs; load average (1, 5, 15 min) at start "
          f"{[round(x, 2) for x in load_before]}, at end {[round(x, 2) for x in load_after]}; "
          f"emulator CPU {emulator_cpu:.1f} s")  # fmt: skip
    print_tables(results, ("init", "steady", "ensure", "restart"), "calls", 60)
    if args.json:
        doc: dict[str, Any] = {o.who: o.figures for o in results}
        doc["load_average"] = {"start": load_before, "end": load_after}
        Path(args.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
