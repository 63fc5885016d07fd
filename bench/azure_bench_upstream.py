"""Upstream's half of bench/azure_scale.py: cloud-provider-azure v1.36.5's cloud-node-manager
and cloud-controller-manager (built by ``make azure-upstream`` into
``$KCCM_CACHE_DIR/bin/azure-<version>/``, ``KCCM_AZURE_BIN_DIR`` overrides) on the same
emulator, Nodes and Services as kccm's half. See that module's docstring for the phases."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from azure_bench_common import (
    Figures,
    create_services,
    delete_services,
    ensured_again,
    ensured_counts,
    initialised,
    left_behind,
    quiet,
    writes,
)
from cloud_bench import kubelet_node, log, window
from kube_helpers import Completion, bounded, delete_quietly

from kccm.emulators.azure.cloudfiles import CloudFiles
from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES
from kccm.testing import upstream
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
GO_MOD = ROOT / "hack" / "azure" / "go.mod"


def bin_dir() -> Path:
    override = os.environ.get("KCCM_AZURE_BIN_DIR")
    if override:
        return Path(override)
    version = upstream.required_version(GO_MOD, "sigs.k8s.io/cloud-provider-azure")
    return upstream.bin_cache() / f"azure-{version}"


def binary(name: str) -> str:
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{path} not found: build it with `make azure-upstream`")
    return str(path)


class Process:
    """A running upstream binary, logging to a file."""

    def __init__(self, argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.log_path = log_path
        with log_path.open("wb") as sink:
            self.proc = subprocess.Popen(list(argv), stdout=sink, stderr=subprocess.STDOUT,
                                         env=dict(env))  # fmt: skip

    def alive(self) -> None:
        if self.proc.poll() is not None:
            text = self.log_path.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{self.log_path.name} exited {self.proc.returncode}:\n{text}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def provider_id(resource_id: str) -> str:
    parts = resource_id.split("/")
    parts[2], parts[4] = parts[2].lower(), parts[4].lower()
    return "azure://" + "/".join(parts)


def as_cnm_leaves_it(name: str, vm_id: str, run: str) -> dict[str, Any]:
    """A Node as cloud-node-manager leaves it (providerID, zone, region, type; no taint)."""
    node = kubelet_node(name, run)
    node["spec"] = {"providerID": provider_id(vm_id)}
    node["metadata"]["labels"] |= {
        "topology.kubernetes.io/region": "eastus",
        "topology.kubernetes.io/zone": "eastus-1",
        "node.kubernetes.io/instance-type": "Standard_D2s_v3",
    }
    return node


class UpstreamBench:
    def __init__(self, args: argparse.Namespace, plane: ControlPlane, emu: AzureEmulator,
                 files: CloudFiles, kube: KubeApiClient, tmp: Path) -> None:  # fmt: skip
        self.args, self.plane, self.emu, self.files = args, plane, emu, files
        self.kube, self.tmp = kube, tmp
        self.run = uuid.uuid4().hex[:8]
        self.out = Figures("upstream")
        self.started = 0

    def _log(self, name: str) -> Path:
        self.started += 1
        return self.tmp / f"{name}-{self.started}.log"

    def cnm(self, node: str, vm_id: str) -> Process:
        """cloud-node-manager as its DaemonSet runs it: from its VM's metadata service."""
        imds = self.emu.admin.imds_for(vm_id)
        argv = [
            binary("cloud-node-manager"), f"--node-name={node}",
            f"--kubeconfig={self.plane.admin_kubeconfig}", "--wait-routes=false",
            f"--node-status-update-frequency={self.args.refresh_every:g}s", "--v=2",
        ]  # fmt: skip
        env = {**os.environ, "HTTP_PROXY": imds, "NODE_NAME": node}
        return Process(argv, self._log(f"cnm-{node}"), env)

    def ccm(self) -> Process:
        kubeconfig = self.plane.admin_kubeconfig
        cert_dir = self.tmp / f"ccm-certs-{self.started}"
        cert_dir.mkdir(exist_ok=True)
        argv = [
            binary("cloud-controller-manager"), "--cloud-provider=azure",
            f"--cloud-config={self.files.azure_json}", f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}", f"--cert-dir={cert_dir}",
            "--authentication-skip-lookup=true", "--use-service-account-credentials=false",
            "--leader-elect=false", "--cluster-name=kubernetes",
            "--controllers=cloud-node-lifecycle,service", "--configure-cloud-routes=false",
            "--v=2",
        ]  # fmt: skip
        return Process(argv, self._log("ccm"), os.environ)

    async def init(self, names: dict[str, str]) -> list[Process]:
        """A sample of cloud-node-managers initialise their Nodes, then refresh them for one
        period; both counted per Node and scaled to every Node."""
        sample = dict(list(names.items())[: self.args.cnm_sample])
        scale = len(names) / len(sample)
        since = self.emu.admin.last_seq()
        selector = f"bench-run={self.run}"
        async with Completion(self.kube, NODES, len(sample), initialised,
                              label_selector=selector) as done:  # fmt: skip
            start = time.perf_counter()
            await bounded(50, [self.kube.create(NODES, kubelet_node(n, self.run)) for n in sample])
            cnms = [self.cnm(n, vm_id) for n, vm_id in sample.items()]
            await asyncio.wait_for(done.finished.wait(), self.args.timeout)
            took = time.perf_counter() - start
        self.out.figures["init_seconds_sample"] = round(took, 2)
        self.out.figures["init_sample"] = len(sample)
        self.out.record("init", window(self.emu, since), lambda e: scale)
        log(f"upstream init: {len(sample)} Nodes by as many cloud-node-managers in {took:.2f} s")
        return cnms

    async def steady(self, names: dict[str, str], cnms: list[Process]) -> Process:
        """Every other Node as cloud-node-manager leaves it, the CCM started over all of them
        and settled; then --steady-seconds counted: the sample's metadata reads scaled to
        every Node, the CCM's calls as they are."""
        rest = list(names.items())[self.args.cnm_sample :]
        run = self.run
        await bounded(200, [self.kube.create(NODES, as_cnm_leaves_it(n, i, run)) for n, i in rest])
        ccm = self.ccm()
        await quiet(self.emu, self.args.timeout, ccm.alive, services=("arm", "adfs"))
        mark = self.emu.admin.last_seq()
        await asyncio.sleep(self.args.steady_seconds)  # a bench counts over a fixed span
        for process in [ccm, *cnms]:
            process.alive()
        entries = window(self.emu, mark)
        per_node = len(names) / len(cnms)  # the sample's metadata reads, for every Node
        self.out.record("steady", entries, lambda e: per_node if e["service"] == "imds" else 1)
        log(f"upstream steady: {len(names)} Nodes, {len(entries)} requests")
        return ccm

    async def ensure(self, ccm: Process, names: dict[str, str], lb_nodes: dict[str, str],
                     namespace: str) -> None:  # fmt: skip
        await bounded(200, [delete_quietly(self.kube, NODES, n) for n in names])
        run = f"{self.run}-lb"
        async with Completion(self.kube, NODES, len(lb_nodes), initialised,
                              label_selector=f"bench-run={run}") as done:  # fmt: skip
            await bounded(50, [self.kube.create(NODES, kubelet_node(n, run)) for n in lb_nodes])
            cnms = [self.cnm(n, vm_id) for n, vm_id in lb_nodes.items()]
            await asyncio.wait_for(done.finished.wait(), self.args.timeout)
        for process in cnms:
            process.stop()
        await quiet(self.emu, self.args.timeout, ccm.alive)
        since = self.emu.admin.last_seq()
        took = await create_services(self.kube, namespace, self.args.services, self.args.timeout)
        until = await quiet(self.emu, self.args.timeout, ccm.alive)
        self.out.figures["ensure_seconds"] = round(took, 2)
        self.out.record("ensure", window(self.emu, since, until))
        log(f"upstream ensure: {self.args.services} Services in {took:.2f} s")

    async def restart(self, namespace: str) -> Process:
        before = await ensured_counts(self.kube, namespace)
        since = self.emu.admin.last_seq()
        ccm = self.ccm()
        await ensured_again(self.kube, namespace, before, self.args.services, self.args.timeout)
        until = await quiet(self.emu, self.args.timeout, ccm.alive)
        entries = window(self.emu, since, until)
        self.out.figures["restart_mutating"] = writes(entries)
        self.out.record("restart", entries)
        log(f"upstream restart: {len(writes(entries))} mutating ARM requests")
        return ccm

    async def measure(self, names: list[str], lb_nodes: list[str]) -> None:
        ids = self.vm_ids()
        baseline = self.emu.admin.state()
        nodes = {n: ids[n] for n in names}
        lbs = {n: ids[n] for n in lb_nodes}
        cnms = await self.init(nodes)
        ccm = None
        try:
            ccm = await self.steady(nodes, cnms)
        finally:
            for process in cnms:
                process.stop()
        namespace = f"bench-upstream-{self.run}"
        try:
            await self.ensure(ccm, nodes, lbs, namespace)
        finally:
            ccm.stop()
        ccm = await self.restart(namespace)
        try:
            await delete_services(self.kube, namespace, self.args.timeout)
            await bounded(50, [delete_quietly(self.kube, NODES, n) for n in lb_nodes])
            await quiet(self.emu, self.args.timeout, ccm.alive)
            self.out.figures["left_behind"] = left_behind(self.emu, baseline)
        finally:
            ccm.stop()

    def vm_ids(self) -> dict[str, str]:
        vms = self.emu.admin.state()["virtualMachines"]
        return {vm_id.rsplit("/", 1)[-1]: vm_id for vm_id in vms}
