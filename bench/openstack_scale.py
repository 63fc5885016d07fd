"""The openstack provider at scale on the emulator: Nodes initialised and refreshed, unchanged
load balancers restarted without a write.

Usage: .venv/bin/python bench/openstack_scale.py [--nodes 1000] [--services 100] [--lb-nodes 3]
           [--refresh-every 30] [--quick] [--json out.json]

Starts its own etcd + kube-apiserver and the OpenStack emulator (``kccm.emulators.openstack`` as a
subprocess) with a tenant network ``nodes`` (one subnet of --nodes-cidr, made through Neutron:
the default ``private`` /24 holds 253 servers) holding --nodes ACTIVE servers, and --lb-nodes
servers on ``private`` (routed to the public network, so floating IPs reach its ports). It
runs the real kccm daemon (``--cloud-provider=openstack``, the emulator's OCCM-style
cloud.conf without [Route], ``--node-status-update-frequency`` = --refresh-every for the
init daemon, every other flag at its default) as a subprocess:

init      one kubelet-style Node per server (named after it, no providerID, the uninitialized
          taint) created at once: wall time until every Node has its providerID, InternalIP,
          instance type and zone, and the emulator's requests meanwhile (``admin.requests``) by
          service, method and path kind (ids as {id}, the query's keys);
refresh   the next periodic metadata refresh tick over every Node: its wall time (the node
          controller's ``Update N nodes status took`` line) and its requests (expected: one
          paged servers/detail listing and one paged ports listing, nothing per node);
ensure    those Nodes deleted, kccm started again, --lb-nodes Nodes of servers on the
          routed network ``private`` initialised, then --services LoadBalancer Services (two
          ports each) created at once: wall time until each has its ingress (a floating IP),
          and the requests;
restart   kccm stopped (SIGTERM) and started again: every Service is ensured again, as upstream
          does at start; the requests until the service queue has taken every Service and
          nothing moved for 5 s, the mutating ones (non-GET, less Keystone token POSTs;
          expected: none), and whether every balancer was read.
Then the Services are deleted (by the restarted kccm) and the emulator is checked to hold no
balancer, floating IP, security group or port left behind.

--quick is 50 Nodes, 10 Services, a tick every 5 s: tests/integration/openstack/
test_openstack_bench_smoke.py runs it with --json and checks the figures' shape (never a time).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from cloud_bench import initialised as node_initialised  # bench/ is on sys.path as a script
from cloud_bench import kubelet_node, lb_service, log, scale_arguments, window, work_dir
from keystoneauth1 import session
from keystoneauth1.identity import v3
from kube_helpers import (
    Completion,
    bounded,
    delete_quietly,
    has_ingress,
    metrics_token,
)
from metrics_text import cloud_calls, metric_sum
from scale import Daemon, launch_daemon

from kccm.emulators.openstack.launcher import Emulator, start_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NAMESPACES, NODES, SERVICES
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

NETWORK = "nodes"
TICK = re.compile(r"Update (\d+) nodes status took ([\d.]+)s\.")
UUID = re.compile(r"/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?=/|$)")
CLK_TCK = os.sysconf("SC_CLK_TCK")
initialised = functools.partial(node_initialised, scheme="openstack")
"""A Node initialised by the openstack provider."""

PROVIDER = (
    "openstack"
    if entry_points(group="kccm.cloud_providers", name="openstack")
    else "kccm.providers.openstack:new_openstack_cloud"
)
"""``openstack`` where the entry point is installed; else the same factory by reference (a
checkout run on a venv installed before the provider existed)."""


# -- the emulator -----------------------------------------------------------------------------


def add_network(emu: Emulator, cidr: str) -> None:
    """A tenant network ``nodes`` with one IPv4 subnet of ``cidr``, made through Neutron as the
    cloud.conf's user (keystoneauth1, as the provider): the default world's ``private`` has
    one /24 (devstack's), which holds 253 servers."""
    conf = emu.config
    auth = v3.Password(
        auth_url=emu.auth_url,
        username=conf["user"],
        password=conf["password"],
        user_domain_name=conf["domain"],
        project_name=conf["project"],
        project_domain_name=conf["domain"],
    )
    neutron = {"service_type": "network", "interface": "public", "region_name": conf["region"]}
    sess = session.Session(auth=auth)
    try:
        body = {"network": {"name": NETWORK}}
        net = sess.post("/v2.0/networks", endpoint_filter=neutron, json=body).json()["network"]
        subnet = {"network_id": net["id"], "cidr": cidr, "ip_version": 4}
        sess.post("/v2.0/subnets", endpoint_filter=neutron, json={"subnet": subnet})
    finally:
        sess.session.close()


def seed_servers(emu: Emulator, count: int, prefix: str, network: str) -> list[str]:
    """``count`` ACTIVE servers on ``network``; their names."""
    names = [f"{prefix}-{i:05d}" for i in range(count)]
    flavors = ("m1.small", "m1.medium", "m1.large")
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda i: emu.admin.add_server(
                    names[i], flavor=flavors[i % 3], networks=(network,)
                ),
                range(count),
            )
        )
    return names


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (from /proc, as scale.Daemon.cpu_seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def path_kind(entry: dict[str, Any]) -> str:
    """``/compute/v2.1/servers/{id}?name``: the path with ids as {id}, the query's keys."""
    path = UUID.sub("/{id}", entry["path"])
    keys = sorted({k for k, _ in parse_qsl(entry.get("query") or "", keep_blank_values=True)})
    return path + ("?" + "&".join(keys) if keys else "")


def by_kind(entries: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    return Counter((e["service"], e["method"], path_kind(e)) for e in entries)


def last_seq(emu: Emulator) -> int:
    return emu.admin.last_seq()


# -- Kubernetes objects -----------------------------------------------------------------------


# -- the bench --------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, plane: ControlPlane, emu: Emulator, tmp: Path):
        self.args = args
        self.plane = plane
        self.emu = emu
        self.tmp = tmp
        self.run = uuid.uuid4().hex[:8]
        self.kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
        self.config = tmp / "cloud.conf"
        no_routes: dict[str, Any] = {"Route": {"router-id": None}}  # None drops the key
        self.config.write_text(emu.cloud_conf(no_routes))
        self.token = ""
        self.figures: dict[str, Any] = {}
        self.tables: dict[str, Counter[tuple[str, str, str]]] = {}

    def daemon(self, tick: float | None = None) -> Daemon:
        """kccm at its defaults; ``tick``: its --node-status-update-frequency in seconds."""
        port = free_port()
        args = [
            sys.executable,
            "-m",
            "kccm",
            f"--cloud-provider={PROVIDER}",
            f"--cloud-config={self.config}",
            f"--kubeconfig={self.plane.admin_kubeconfig}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
        ]
        if tick is not None:
            args.append(f"--node-status-update-frequency={tick:g}s")
        return launch_daemon(args, port, self.token, self.tmp / f"kccm-{port}.log")

    def record(self, phase: str, entries: list[dict[str, Any]]) -> None:
        self.tables[phase] = by_kind(entries)
        self.figures[f"{phase}_requests"] = len(entries)
        self.figures[f"{phase}_requests_by_kind"] = {
            " ".join(k): n for k, n in sorted(self.tables[phase].items())
        }

    async def init(self, names: list[str]) -> Daemon:
        daemon = self.daemon(tick=self.args.refresh_every)
        await daemon.wait_logged("caches synced")
        since = last_seq(self.emu)
        async with Completion(
            self.kube, NODES, len(names), initialised, label_selector=f"bench-run={self.run}"
        ) as done:
            cpu = (daemon.cpu_seconds(), cpu_seconds(self.emu.process.pid))
            start = time.perf_counter()
            await bounded(200, [self.kube.create(NODES, kubelet_node(n, self.run)) for n in names])
            await asyncio.wait_for(done.finished.wait(), self.args.timeout)
            took = time.perf_counter() - start
        self.figures["init_seconds"] = round(took, 2)
        self.figures["init_cpu_seconds_kccm"] = round(daemon.cpu_seconds() - cpu[0], 1)
        self.figures["init_cpu_seconds_emulator"] = round(
            cpu_seconds(self.emu.process.pid) - cpu[1], 1
        )
        self.record("init", window(self.emu, since))
        log(f"init: {len(names)} Nodes in {took:.2f} s, {self.figures['init_requests']} requests")
        return daemon

    async def refresh(self, daemon: Daemon, count: int) -> None:
        """The first tick over all ``count`` Nodes that begins after a tick ended (so the
        requests between the two lines are that tick's alone)."""
        ended = len(TICK.findall(daemon.log_path.read_text(errors="replace")))
        _, seen = await self._tick(daemon, ended, lambda n: True)
        mark = last_seq(self.emu)
        _, seen = await self._tick(daemon, seen, lambda n: n == count)
        entries = window(self.emu, mark)
        took = float(TICK.findall(daemon.log_path.read_text(errors="replace"))[seen - 1][1])
        self.figures["refresh_seconds"] = took
        self.record("refresh", entries)
        log(f"refresh: {count} Nodes in {took:.3f} s, {len(entries)} requests")

    async def _tick(self, daemon: Daemon, after: int, wanted: Any) -> tuple[int, int]:
        """Wait for a tick line, the ``after``-th or later, whose count ``wanted`` accepts;
        returns (its count, how many tick lines there are then)."""
        deadline = time.monotonic() + 3 * self.args.refresh_every + self.args.timeout
        while time.monotonic() < deadline:
            ticks = TICK.findall(daemon.log_path.read_text(errors="replace"))
            for index in range(after, len(ticks)):
                if wanted(int(ticks[index][0])):
                    return int(ticks[index][0]), index + 1
            after = max(after, len(ticks))
            await asyncio.sleep(0.05)
        raise SystemExit("no node status refresh tick was logged in time")

    async def ensure(self, drop: list[str], lb_nodes: list[str], namespace: str) -> list[str]:
        """The init Nodes deleted, kccm started again, one Node per ``lb_nodes`` server
        initialised, then the Services created at once."""
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in drop])
        await self.kube.create(NAMESPACES, {"metadata": {"name": namespace}})
        daemon = self.daemon()
        try:
            await daemon.wait_logged("caches synced")
            run = f"{self.run}-lb"
            selector = f"bench-run={run}"
            async with Completion(
                self.kube, NODES, len(lb_nodes), initialised, label_selector=selector
            ) as done:
                await bounded(50, [self.kube.create(NODES, kubelet_node(n, run)) for n in lb_nodes])
                await asyncio.wait_for(done.finished.wait(), self.args.timeout)
            since = last_seq(self.emu)
            count = self.args.services
            async with Completion(
                self.kube, SERVICES, count, has_ingress, namespace=namespace
            ) as done:
                start = time.perf_counter()
                await bounded(
                    100,
                    [self.kube.create(SERVICES, lb_service(i, namespace)) for i in range(count)],
                )
                await asyncio.wait_for(done.finished.wait(), self.args.timeout)
                took = time.perf_counter() - start
            await self._quiet(daemon, count)
            self.figures["ensure_seconds"] = round(took, 2)
            self.record("ensure", window(self.emu, since))
            log(f"ensure: {count} Services with {len(lb_nodes)} nodes in {took:.2f} s")
        finally:
            daemon.stop()
        return sorted(self.emu.admin.state()["loadbalancers"])

    async def restart(self, balancers: list[str], namespace: str) -> Daemon:
        since = last_seq(self.emu)
        daemon = self.daemon()
        start = time.perf_counter()
        await self._quiet(daemon, self.args.services)
        took = time.perf_counter() - start
        entries = window(self.emu, since)
        writes = [e for e in self.emu.admin.mutating(since) if e["seq"] <= entries[-1]["seq"]]
        read = {e["path"].rsplit("/", 1)[-1] for e in entries if e["method"] == "GET"}
        services = (await self.kube.list(SERVICES, namespace=namespace)).items
        self.figures["restart_seconds_until_quiet"] = round(took, 2)
        self.figures["restart_mutating"] = len(writes)
        self.figures["restart_mutating_requests"] = [f"{e['method']} {e['path']}" for e in writes]
        self.figures["restart_balancers"] = len(balancers)
        self.figures["restart_balancers_read"] = sum(lb in read for lb in balancers)
        self.figures["restart_services_with_ingress"] = sum(map(has_ingress, services))
        self.record("restart", entries)
        log(f"restart: {len(writes)} mutating requests, {len(entries)} in all")
        return daemon

    async def _quiet(self, daemon: Daemon, services: int) -> None:
        """Until the service queue has taken every Service, is empty, and neither it nor the
        provider's load balancer calls (``cloudprovider_calls_total``) moved for 5 s."""
        last: tuple[float, ...] = ()
        since = time.monotonic()
        deadline = time.monotonic() + self.args.timeout
        while time.monotonic() < deadline:
            _, body = await asyncio.to_thread(daemon.metrics)
            adds = metric_sum(body, "workqueue_adds_total", name="service")
            depth = metric_sum(body, "workqueue_depth", name="service")
            calls = cloud_calls(body)
            state = (adds, depth, *(calls[m] for m in sorted(calls) if "load_balancer" in m))
            if state != last:
                last, since = state, time.monotonic()
            elif adds >= services and depth == 0 and time.monotonic() - since >= 5:
                return
            await asyncio.sleep(0.5)
        raise SystemExit("kccm did not settle in time")

    async def cleanup(self, daemon: Daemon, namespace: str, baseline: dict[str, Any]) -> None:
        """Delete the Services through the running kccm (it removes their finalizers once the
        balancers are gone); the emulator must be left as found."""
        try:
            names = [i["metadata"]["name"] for i in
                     (await self.kube.list(SERVICES, namespace=namespace)).items]  # fmt: skip
            await bounded(100, [delete_quietly(self.kube, SERVICES, n, namespace) for n in names])
            deadline = time.monotonic() + self.args.timeout
            while (await self.kube.list(SERVICES, namespace=namespace)).items:
                if time.monotonic() > deadline:
                    raise SystemExit("the Services were not deleted in time")
                await asyncio.sleep(0.5)
            await delete_quietly(self.kube, NAMESPACES, namespace)
            left = {k: v for k, v in self.emu.admin.state().items() if k != "servers"}
            leaked = {k: sorted(set(v) - set(baseline.get(k, ()))) for k, v in left.items()}
            self.figures["left_behind"] = {k: len(v) for k, v in leaked.items() if v}
        finally:
            daemon.stop()


async def main_async(args: argparse.Namespace, plane: ControlPlane, emu: Emulator) -> Bench:
    tmp = work_dir(args, "openstack")
    bench = Bench(args, plane, emu, tmp)
    try:
        bench.token = await metrics_token(bench.kube)
        started = time.perf_counter()
        names = seed_servers(emu, args.nodes, "os-node", NETWORK)
        lb_nodes = seed_servers(emu, args.lb_nodes, "os-lb-node", "private")
        log(f"emulator: {len(names) + len(lb_nodes)} servers in "
            f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        baseline = emu.admin.state()
        daemon = await bench.init(names)
        try:
            await bench.refresh(daemon, len(names))
        finally:
            daemon.stop()
        namespace = f"bench-{bench.run}"
        balancers = await bench.ensure(names, lb_nodes, namespace)
        daemon = await bench.restart(balancers, namespace)
        await bench.cleanup(daemon, namespace, baseline)
        await bounded(200, [delete_quietly(bench.kube, NODES, n) for n in lb_nodes])
    finally:
        await bench.kube.close()
    return bench


def print_table(bench: Bench, args: argparse.Namespace) -> None:
    f = bench.figures
    rows = [
        (f"{args.nodes} Nodes initialised", f"{f['init_seconds']:.2f} s, "
         f"{f['init_requests']} OpenStack requests; CPU: kccm {f['init_cpu_seconds_kccm']} s, "
         f"emulator {f['init_cpu_seconds_emulator']} s"),
        (f"one refresh tick over {args.nodes} Nodes", f"{f['refresh_seconds']:.3f} s, "
         f"{f['refresh_requests']} OpenStack requests"),
        (f"{args.services} LB Services ensured ({args.lb_nodes} nodes)",
         f"{f['ensure_seconds']:.2f} s, {f['ensure_requests']} OpenStack requests"),
        (f"restart with {args.services} unchanged balancers",
         f"{f['restart_mutating']} mutating requests, {f['restart_requests']} in all; "
         f"{f['restart_balancers_read']}/{f['restart_balancers']} balancers read, "
         f"{f['restart_services_with_ingress']}/{args.services} Services with ingress"),
        ("left in the emulator after the Services' deletion", str(f["left_behind"] or "nothing")),
        (f"machine load (1, 5, 15 min; {os.cpu_count()} CPUs)",
         f"at start {f['load_average_at_start']}, at end {f['load_average_at_end']}"),
    ]  # fmt: skip
    width = max(len(what) for what, _ in rows)
    print(f"{'scenario'.ljust(width)}  result")
    for what, figure in rows:
        print(f"{what.ljust(width)}  {figure}")
    for phase, table in bench.tables.items():
        print(f"\n{phase}: OpenStack requests by service, method and path kind")
        for (service, method, kind), count in sorted(table.items()):
            print(f"  {count:6d}  {service:<14} {method:<6} {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    scale_arguments(parser, timeout=600.0)
    parser.add_argument("--nodes-cidr", default="10.64.0.0/20", help="the servers' subnet")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.services, args.refresh_every = 50, 10, 5.0
    apiserver_args = ("--max-requests-inflight=1000", "--max-mutating-requests-inflight=500")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kccm-openstack-emu-") as tmp:
        emu = start_emulator(log_path=Path(tmp) / "emulator.log")
        try:
            add_network(emu, args.nodes_cidr)
            with ControlPlane(extra_apiserver_args=apiserver_args) as plane:
                log(f"control plane up in {plane.started_in:.1f} s; --cloud-provider={PROVIDER}")
                bench = asyncio.run(main_async(args, plane, emu))
        finally:
            emu.stop()
    bench.figures["load_average_at_start"] = [round(x, 2) for x in load_before]
    bench.figures["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print_table(bench, args)
    if args.json:
        Path(args.json).write_text(json.dumps(bench.figures, indent=1))


if __name__ == "__main__":
    main()
