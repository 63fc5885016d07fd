"""The azure provider at scale on kccm's Azure emulator, side by side with upstream's
cloud-provider-azure v1.36.5 binaries on the same scenario: ARM requests by kind.

Usage: .venv/bin/python bench/azure_scale.py [--nodes 1000] [--services 100] [--lb-nodes 3]
           [--refresh-every 30] [--steady-seconds 120] [--cnm-sample 10]
           [--only kccm,upstream] [--quick] [--json out.json]

Starts its own etcd + kube-apiserver and the Azure emulator (``kccm.emulators.azure``, HTTPS
with its own CA) holding --nodes VMs (zones 1-3) and --lb-nodes more for the balancers. Each
daemon reads the emulator's upstream ``azure.json`` (``"cloud": "AzureStackCloud"``, ADFS
sign-in, ``vmType: standard``, a Standard balancer, no route table in use: routes are off).
Requests are counted from the emulator's request log, by service (``arm``, ``adfs``,
``imds``) and operation (method and resource types without names).

kccm (``--cloud-provider=azure``, ``--configure-cloud-routes=false``,
``--node-status-update-frequency`` = --refresh-every, every other flag at its default):

init      one kubelet-style Node per VM (no providerID, the uninitialized taint) created at
          once: wall time until every Node has its providerID, InternalIP, instance type and
          zone, and the requests meanwhile;
refresh   the next periodic metadata refresh tick over every Node (the node controller's
          ``Update N nodes status took`` line): its requests;
steady    then --steady-seconds of the daemon over those Nodes: every request;
ensure    those Nodes deleted, kccm started again, --lb-nodes Nodes initialised, then
          --services LoadBalancer Services (two ports each) created at once: wall time until
          each has its ingress, and the requests until the log is quiet for 5 s;
restart   kccm stopped (SIGTERM) and started again: every Service ensured again (another
          ``EnsuredLoadBalancer`` Event each) and the log quiet for 5 s: the requests, the
          mutating ones (expected: none);
then the Services are deleted through kccm and what is left in the emulator is reported.

upstream (the binaries ``make azure-upstream`` builds):

init      cloud-node-manager is a DaemonSet, one process per Node: --cnm-sample of them (each
          with its VM's own metadata service, as on Azure; ``--use-instance-metadata=true``,
          the DaemonSet's default; ``--node-status-update-frequency`` = --refresh-every)
          initialise their Nodes: their requests, scaled to --nodes Nodes (1,000 processes do
          not fit on this machine);
steady    every other Node created as cloud-node-manager leaves it, the cloud-controller-
          manager (``cloud-node-lifecycle,service``) started over all of them; once its start
          is done, --steady-seconds counted: the sample's metadata reads scaled to every Node
          (cloud-node-manager caches the metadata for a minute), the CCM's requests as they are;
ensure    and restart as for kccm, with the CCM (``service`` and ``cloud-node-lifecycle``);
then the Services are deleted through the CCM.

--quick is 50 Nodes, 10 Services, a tick every 5 s, 20 s counted, a sample of 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from azure_bench_common import (  # bench/ is on sys.path when run as a script
    Figures,
    create_services,
    delete_services,
    ensured_again,
    ensured_counts,
    initialised,
    left_behind,
    quiet,
    seed_vms,
    writes,
)
from azure_bench_upstream import UpstreamBench
from cloud_bench import kubelet_node, log, print_tables, scale_arguments, window, work_dir
from kube_helpers import Completion, bounded, delete_quietly, metrics_token
from proc import cpu_seconds
from scale import Daemon, launch_daemon

from kccm.emulators.azure.cloudfiles import CloudFiles
from kccm.emulators.azure.launcher import AzureEmulator, start_azure
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.testing.certs import emulator_tls
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

TICK = "nodes status took"
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


class KccmBench:
    def __init__(self, args: argparse.Namespace, plane: ControlPlane, emu: AzureEmulator,
                 files: CloudFiles, kube: KubeApiClient, tmp: Path) -> None:  # fmt: skip
        self.args, self.plane, self.emu, self.files = args, plane, emu, files
        self.kube, self.tmp, self.token = kube, tmp, ""
        self.run = uuid.uuid4().hex[:8]
        self.out = Figures("kccm")

    async def steady(self, daemon: Daemon) -> None:
        """--steady-seconds of the daemon over every Node, counted."""
        mark = self.emu.admin.last_seq()
        await asyncio.sleep(self.args.steady_seconds)  # a bench counts over a fixed span
        alive(daemon)
        entries = window(self.emu, mark)
        self.out.record("steady", entries)
        log(f"kccm steady: {len(entries)} requests in {self.args.steady_seconds:g} s")

    def daemon(self, tick: float | None = None) -> Daemon:
        port = free_port()
        args = [
            sys.executable, "-m", "kccm", "--cloud-provider=azure",
            f"--cloud-config={self.files.azure_json}",
            f"--kubeconfig={self.plane.admin_kubeconfig}",
            f"--secure-port={port}", "--bind-address=127.0.0.1",
            "--configure-cloud-routes=false",  # as upstream's CCM here: no routes
        ]  # fmt: skip
        if tick is not None:
            args.append(f"--node-status-update-frequency={tick:g}s")
        return launch_daemon(args, port, self.token, self.tmp / f"kccm-{port}.log")

    async def init(self, names: list[str]) -> Daemon:
        daemon = self.daemon(tick=self.args.refresh_every)
        since = self.emu.admin.last_seq()
        selector = f"bench-run={self.run}"
        async with Completion(self.kube, NODES, len(names), initialised,
                              label_selector=selector) as done:  # fmt: skip
            cpu = daemon.cpu_seconds()
            start = time.perf_counter()
            await bounded(200, [self.kube.create(NODES, kubelet_node(n, self.run)) for n in names])
            await asyncio.wait_for(done.finished.wait(), self.args.timeout)
            took = time.perf_counter() - start
        self.out.figures["init_seconds"] = round(took, 2)
        self.out.figures["init_cpu_seconds"] = round(daemon.cpu_seconds() - cpu, 1)
        self.out.record("init", window(self.emu, since))
        log(f"kccm init: {len(names)} Nodes in {took:.2f} s")
        return daemon

    async def refresh(self, daemon: Daemon, count: int) -> None:
        """The first full tick that begins after a tick ended."""
        seen = await self._tick(daemon, 0, 0)
        mark = self.emu.admin.last_seq()
        seen = await self._tick(daemon, seen, count)
        entries = window(self.emu, mark)
        self.out.record("refresh", entries)
        log(f"kccm refresh: {count} Nodes, {len(entries)} requests")

    async def _tick(self, daemon: Daemon, after: int, count: int) -> int:
        deadline = time.monotonic() + 3 * self.args.refresh_every + self.args.timeout
        while time.monotonic() < deadline:
            lines = [x for x in daemon.log_path.read_text(errors="replace").splitlines()
                     if TICK in x]  # fmt: skip
            for index in range(after, len(lines)):
                if not count or f"Update {count} nodes" in lines[index]:
                    return index + 1
            after = max(after, len(lines))
            await asyncio.sleep(0.05)  # the daemon's log file: read until the tick's line
        raise SystemExit("no node status refresh tick was logged in time")

    async def ensure(self, drop: list[str], lb_nodes: list[str], namespace: str) -> None:
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in drop])
        daemon = self.daemon()
        try:
            run = f"{self.run}-lb"
            async with Completion(self.kube, NODES, len(lb_nodes), initialised,
                                  label_selector=f"bench-run={run}") as done:  # fmt: skip
                await bounded(50, [self.kube.create(NODES, kubelet_node(n, run)) for n in lb_nodes])
                await asyncio.wait_for(done.finished.wait(), self.args.timeout)
            since = self.emu.admin.last_seq()
            cpu = daemon.cpu_seconds()
            took = await create_services(
                self.kube, namespace, self.args.services, self.args.timeout
            )
            until = await quiet(self.emu, self.args.timeout, lambda: alive(daemon))
            self.out.figures["ensure_seconds"] = round(took, 2)
            self.out.figures["ensure_cpu_seconds"] = round(daemon.cpu_seconds() - cpu, 1)
            self.out.record("ensure", window(self.emu, since, until))
            log(f"kccm ensure: {self.args.services} Services in {took:.2f} s")
        finally:
            daemon.stop()

    async def restart(self, namespace: str) -> Daemon:
        before = await ensured_counts(self.kube, namespace)
        since = self.emu.admin.last_seq()
        daemon = self.daemon()
        await ensured_again(self.kube, namespace, before, self.args.services, self.args.timeout)
        until = await quiet(self.emu, self.args.timeout, lambda: alive(daemon))
        entries = window(self.emu, since, until)
        self.out.figures["restart_mutating"] = writes(entries)
        self.out.record("restart", entries)
        log(f"kccm restart: {len(writes(entries))} mutating ARM requests")
        return daemon


def alive(daemon: Daemon) -> None:
    if daemon.proc.poll() is not None:
        text = daemon.log_path.read_text(errors="replace")[-3000:]
        raise SystemExit(f"kccm exited {daemon.proc.returncode}:\n{text}")


async def run_kccm(bench: KccmBench, names: list[str], lb_nodes: list[str]) -> None:
    baseline = bench.emu.admin.state()
    daemon = await bench.init(names)
    try:
        await bench.refresh(daemon, len(names))
        await bench.steady(daemon)
    finally:
        daemon.stop()
    namespace = f"bench-kccm-{bench.run}"
    await bench.ensure(names, lb_nodes, namespace)
    daemon = await bench.restart(namespace)
    try:
        await delete_services(bench.kube, namespace, bench.args.timeout)
        await bounded(50, [delete_quietly(bench.kube, NODES, n) for n in lb_nodes])
        await quiet(bench.emu, bench.args.timeout, lambda: alive(daemon))
        bench.out.figures["left_behind"] = left_behind(bench.emu, baseline)
    finally:
        daemon.stop()


async def main_async(args: argparse.Namespace, plane: ControlPlane, emu: AzureEmulator,
                     files: CloudFiles) -> list[Figures]:  # fmt: skip
    tmp = work_dir(args, "azure")
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    results = []
    try:
        token = await metrics_token(kube)
        started = time.perf_counter()
        names = seed_vms(emu, args.nodes, "az-node")
        lb_nodes = seed_vms(emu, args.lb_nodes, "az-lb-node")
        log(f"emulator: {len(names) + len(lb_nodes)} VMs in {time.perf_counter() - started:.1f} s")
        if "kccm" in args.only:
            bench = KccmBench(args, plane, emu, files, kube, tmp)
            bench.token = token
            await run_kccm(bench, names, lb_nodes)
            results.append(bench.out)
        if "upstream" in args.only:
            upstream = UpstreamBench(args, plane, emu, files, kube, tmp)
            await upstream.measure(names, lb_nodes)
            results.append(upstream.out)
    finally:
        await kube.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scale_arguments(parser, timeout=900.0)
    parser.add_argument("--steady-seconds", type=float, default=120.0, help="span counted")
    parser.add_argument("--cnm-sample", type=int, default=10, help="cloud-node-managers run")
    parser.add_argument("--only", default="kccm,upstream")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.services, args.refresh_every, args.cnm_sample = 50, 10, 5.0, 3
        args.steady_seconds = 20.0
    apiserver_args = ("--max-requests-inflight=1000", "--max-mutating-requests-inflight=500")
    for var in PROXY_VARS:
        os.environ.pop(var, None)
        os.environ.pop(var.upper(), None)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kccm-azure-emu-") as tmp:
        emu = start_azure(tls=emulator_tls(), log_path=Path(tmp) / "emulator.log")
        try:
            files = emu.cloud_files(Path(tmp) / "cloud")
            os.environ.update(files.env)  # the daemons' environment: the cloud and its CA
            with ControlPlane(extra_apiserver_args=apiserver_args) as plane:
                log(f"control plane up in {plane.started_in:.1f} s")
                emulator_cpu = cpu_seconds(emu.process.pid)
                results = asyncio.run(main_async(args, plane, emu, files))
                emulator_cpu = cpu_seconds(emu.process.pid) - emulator_cpu
        finally:
            emu.stop()
    load_after = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs; load average (1, 5, 15 min) at start "
          f"{[round(x, 2) for x in load_before]}, at end {[round(x, 2) for x in load_after]}; "
          f"emulator CPU {emulator_cpu:.1f} s")  # fmt: skip
    print_tables(results, ("init", "refresh", "steady", "ensure", "restart"), "requests", 78)
    if args.json:
        doc = {o.who: o.figures for o in results}
        doc["load_average"] = {"start": load_before, "end": load_after}
        Path(args.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
