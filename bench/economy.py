"""Issue 16's economy figures, per provider, against the real kube-apiserver and daemon.

Usage: .venv/bin/python bench/economy.py [--providers fake,local] [--nodes 1000]
           [--services 300] [--steady-minutes 10] [--kccm "<python> -m kccm"]

For each provider (a fresh etcd + kube-apiserver each): --nodes initialised, Ready,
kubelet-shaped Nodes whose instances the cloud knows and --services LoadBalancer Services
exist; the real ``kccm`` daemon starts at its defaults (``--cloud-provider``, its cloud
config, ``--kubeconfig``, a loopback ``--secure-port``; for ``local`` also
``--configure-cloud-routes=false``, as the fake's config disables routes: the route
controller's 10 s route listing is not part of this measurement) and ensures every Service.

steady    --steady-minutes of steady state: the provider's own cloud requests (its ledger,
          ``kccm_cloud_api_requests_total``) and the framework's calls into it
          (``cloudprovider_calls_total``), per Node per hour. The node controller re-reads
          every Node at every --node-status-update-frequency tick (5 min), one list call each.
restart   kccm is stopped (SIGTERM) and started again over the same cloud (the fake's state
          file, the local provider's SQLite file): every Service is ensured again, as
          upstream does; reported are the mutating requests the provider sent to its cloud
          (must be 0: nothing changed) and its reads, once the service queue has handled
          every Service and nothing moved for 5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kube_helpers import Completion, bounded, has_ingress, metrics_token
from localcloud import local_cloud  # bench/ is on sys.path when run as a script
from metrics_text import cloud_calls, metric_sum
from scale import (
    Daemon,
    cloud_config,
    ip_of,
    launch_daemon,
    lb_service,
    log,
    print_table,
    ready_node,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NAMESPACES, NODES, SERVICES
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

APISERVER_ARGS = ("--max-requests-inflight=1000", "--max-mutating-requests-inflight=500")


def api_requests(body: str) -> tuple[float, float]:
    """(reads, writes) in the provider's ledger, from ``kccm_cloud_api_requests_total``."""
    reads = metric_sum(body, "kccm_cloud_api_requests_total", mutating="false")
    writes = metric_sum(body, "kccm_cloud_api_requests_total", mutating="true")
    return reads, writes


def by_operation(body: str) -> dict[str, float]:
    """Requests per operation; mutating ones marked ``*``."""
    pattern = r'^kccm_cloud_api_requests_total\{mutating="(\w+)",operation="([^"]+)"\} (\S+)$'
    return {f"{m[2]}{'*' if m[1] == 'true' else ''}": float(m[3]) for m in
            re.finditer(pattern, body, re.M)}  # fmt: skip


def delta(after: dict[str, float], before: dict[str, float]) -> str:
    changed = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(changed.items())) or "none"


class Run:
    """One provider's scenario on its own control plane."""

    def __init__(self, provider: str, args: argparse.Namespace, tmp: Path) -> None:
        self.provider, self.args, self.tmp = provider, args, tmp
        self.rows: list[tuple[str, str]] = []
        self.names = [f"{provider}-{uuid.uuid4().hex[:6]}-{i:05d}" for i in range(args.nodes)]

    def row(self, what: str, figure: str) -> None:
        self.rows.append((f"{self.provider}: {what}", figure))
        log(f"{self.provider}: {what}: {figure}")

    def cloud(self) -> tuple[Path, list[str]]:
        """The cloud config, and the provider's extra flags."""
        if self.provider == "fake":
            state = self.tmp / "fake-lbs.jsonl"
            return cloud_config(self.tmp / "fake.conf", self.names, 0.0, state), []
        return local_cloud(self.tmp, self.names, ip_of, services=self.args.services)

    def start(self, plane: ControlPlane, config: Path, extra: list[str], token: str) -> Daemon:
        port = free_port()
        log_path = self.tmp / f"kccm-{self.provider}-{port}.log"
        command = [
            *shlex.split(self.args.kccm),
            f"--cloud-provider={self.provider}",
            f"--cloud-config={config}",
            f"--kubeconfig={plane.admin_kubeconfig}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            *extra,
        ]
        return launch_daemon(command, port, token, log_path)

    async def objects(self, kube: KubeApiClient, namespace: str) -> None:
        run = namespace
        log(f"{self.provider}: creating {len(self.names)} Nodes, {self.args.services} Services")
        await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
        nodes = []
        for i, name in enumerate(self.names):
            nodes.append(ready_node(name, run, i, provider=self.provider))
        await bounded(200, [kube.create(NODES, n) for n in nodes])
        await bounded(
            200,
            [kube.patch(NODES, n["metadata"]["name"], {"status": n["status"]},
                        subresource="status") for n in nodes],
        )  # fmt: skip
        services = [lb_service(f"svc-{i:05d}", namespace) for i in range(self.args.services)]
        await bounded(100, [kube.create(SERVICES, s) for s in services])

    async def main(self, plane: ControlPlane) -> None:
        kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
        try:
            token = await metrics_token(kube)
            namespace = f"bench-{uuid.uuid4().hex[:8]}"
            await self.objects(kube, namespace)
            config, extra = self.cloud()
            total = self.args.services
            async with Completion(kube, SERVICES, total, has_ingress, namespace=namespace) as done:
                daemon = self.start(plane, config, extra, token)
                try:
                    await done.finished.wait()
                    took = time.perf_counter() - daemon.started
                    self.row(f"{total} LB Services at start: all ensured", f"{took:.1f} s")
                    await self.quiet(daemon, total)
                    if self.args.steady_minutes > 0:
                        await self.steady(daemon)
                finally:
                    daemon.stop()
            await self.restart(plane, config, extra, token)
        finally:
            await kube.close()

    async def steady(self, daemon: Daemon) -> None:
        minutes, nodes = self.args.steady_minutes, self.args.nodes
        _, before = await asyncio.to_thread(daemon.metrics)
        log(f"{self.provider}: steady state for {minutes:g} min")
        await asyncio.sleep(minutes * 60)
        _, after = await asyncio.to_thread(daemon.metrics)
        (r0, w0), (r1, w1) = api_requests(before), api_requests(after)
        per_hour = 60 / minutes / nodes
        self.row(
            f"steady state ({minutes:g} min, {nodes} nodes): cloud requests per node per hour",
            f"{(r1 - r0 + w1 - w0) * per_hour:.4f} ({r1 - r0:.0f} reads, {w1 - w0:.0f} writes: "
            f"{delta(by_operation(after), by_operation(before))})",
        )
        calls0, calls1 = cloud_calls(before), cloud_calls(after)
        framework = sum(calls1.values()) - sum(calls0.values())
        self.row(
            "steady state: framework calls into the provider per node per hour",
            f"{framework * per_hour:.4f} ({delta(calls1, calls0)})",
        )

    async def restart(
        self, plane: ControlPlane, config: Path, extra: list[str], token: str
    ) -> None:
        daemon = self.start(plane, config, extra, token)
        try:
            body = await self.quiet(daemon, self.args.services)
            reads, writes = api_requests(body)
            calls = cloud_calls(body)
            self.row(
                f"restart with {self.args.services} unchanged LBs: mutating cloud requests",
                f"{writes:.0f} (reads {reads:.0f}: {delta(by_operation(body), {})}; "
                f"framework calls: {delta(calls, {})})",
            )
        finally:
            daemon.stop()

    async def quiet(self, daemon: Daemon, services: int) -> str:
        """Until the service queue took every Service and nothing moved for 5 s."""
        last: tuple[float, ...] = ()
        since, deadline = time.monotonic(), time.monotonic() + 900
        while time.monotonic() < deadline:
            _, body = await asyncio.to_thread(daemon.metrics)
            adds = metric_sum(body, "workqueue_adds_total", name="service")
            depth = metric_sum(body, "workqueue_depth", name="service")
            state = (adds, depth, *api_requests(body), *sorted(cloud_calls(body).values()))
            if state != last:
                last, since = state, time.monotonic()
            elif adds >= services and depth == 0 and time.monotonic() - since >= 5:
                return body
            await asyncio.sleep(1.0)
        raise SystemExit("kccm did not settle within 900 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", default="fake,local")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--services", type=int, default=300)
    parser.add_argument("--steady-minutes", type=float, default=10.0)
    parser.add_argument("--kccm", default=f"{sys.executable} -m kccm")
    args = parser.parse_args()
    rows: list[tuple[str, str]] = []
    try:
        for provider in args.providers.split(","):
            with (
                tempfile.TemporaryDirectory(prefix=f"kccm-economy-{provider}-") as tmp,
                ControlPlane(extra_apiserver_args=APISERVER_ARGS) as plane,
            ):
                log(f"{provider}: control plane up in {plane.started_in:.1f} s")
                run = Run(provider, args, Path(tmp))
                try:
                    asyncio.run(run.main(plane))
                finally:
                    rows += run.rows
    finally:
        if rows:
            print_table(rows)


if __name__ == "__main__":
    main()
