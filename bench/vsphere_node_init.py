"""vsphere: time and vSphere API calls to initialise N kubelet-style Nodes, and to refresh them.

Usage: .venv/bin/python bench/vsphere_node_init.py [--nodes 200] [--vcenters 2] [--json out]

Starts its own etcd + kube-apiserver and ``--vcenters`` vcsims (hack/vcsim, ``make vcsim``)
with ``nodes / vcenters`` VMs each, tags each cluster with a zone and each datacenter with a
region, starts the kccm daemon (``--cloud-provider=vsphere``), creates one uninitialised Node
per VM at once and measures the wall time until every Node has its providerID, InternalIP,
instance type and zone/region labels, and the vSphere calls vcsim answered meanwhile (SOAP
per method, REST per path). Then it measures one ``list_instance_metadata`` over all the
Nodes (the node controller's periodic address refresh) from a fresh provider.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kube_helpers import Completion, bounded  # bench/ on path

from kccm.emulators.vsphere.vcsim import Vcsim, start_vcsim
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.providers.vsphere import VSphereCloud
from kccm.providers.vsphere.config import load_vsphere_config
from kccm.testing.controlplane import ControlPlane
from kccm.testing.ports import free_port

ZONE, REGION = "k8s-zone", "k8s-region"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def tag_topology(sim: Vcsim, zone: str) -> None:
    """Region on DC0, ``zone`` on cluster DC0_C0 (vcsim's morefs, found by REST-free SOAP)."""
    from pyVim.connect import Disconnect, SmartConnect
    from pyVmomi import vim

    si = SmartConnect(
        host=sim.host,
        port=sim.port,
        user=sim.username,
        pwd=sim.password,
        disableSslCertValidation=True,
    )
    try:
        content = si.content
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.Datacenter, vim.ClusterComputeResource], True
        )
        found = {obj.name: (obj._wsdlName, obj._moId) for obj in view.view}
        view.DestroyView()
        sim.tag(REGION, "region-1", [found["DC0"]])
        sim.tag(ZONE, zone, [found["DC0_C0"]])
    finally:
        Disconnect(si)
        si._stub.DropConnections()


def config_text(sims: dict[str, Vcsim]) -> str:
    text = "[Global]\nuser = user\npassword = pass\ninsecure-flag = true\n"
    for tenant, sim in sims.items():
        text += f'\n[VirtualCenter "{tenant}"]\nserver = {sim.host}\nport = {sim.port}\n'
    return text + f"\n[Labels]\nzone = {ZONE}\nregion = {REGION}\n"


def kubelet_node(name: str) -> dict[str, Any]:
    """As kubelet registers it with --cloud-provider=external on vSphere: named after the
    guest host name, only a Hostname address, the uninitialised taint."""
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": name}]},
    }


def initialised(node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    taints = {t["key"] for t in node["spec"].get("taints") or []}
    addresses = {a["type"] for a in (node.get("status") or {}).get("addresses") or []}
    return (
        bool(node["spec"].get("providerID"))
        and UNINITIALIZED not in taints
        and "InternalIP" in addresses
        and "topology.kubernetes.io/zone" in labels
        and "node.kubernetes.io/instance-type" in labels
    )


def start_daemon(config: Path, kubeconfig: Path, log_path: Path) -> subprocess.Popen[str]:
    args = [
        sys.executable,
        "-m",
        "kccm",
        "--cloud-provider=vsphere",
        f"--cloud-config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--secure-port={free_port()}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        "--kube-api-qps=0",
    ]
    with log_path.open("w") as sink:
        return subprocess.Popen(
            args,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def total_calls(sims: dict[str, Vcsim]) -> dict[str, int]:
    total: dict[str, int] = {}
    for sim in sims.values():
        found = sim.calls()
        for kind in ("soap", "rest"):
            for op, n in found[kind].items():
                key = op.split("/id:")[0] if op.startswith("GET ") else op
                total[key] = total.get(key, 0) + n
    return total


async def run(args: argparse.Namespace) -> dict[str, Any]:
    per = args.nodes // args.vcenters
    tmp = Path(tempfile.mkdtemp(prefix="kccm-vsphere-bench-"))
    sims: dict[str, Vcsim] = {}
    plane = ControlPlane()
    daemon: subprocess.Popen[str] | None = None
    try:
        log("starting etcd + kube-apiserver")
        await asyncio.to_thread(plane.start)
        for i in range(args.vcenters):
            tenant = f"vc-{chr(ord('a') + i)}"
            sims[tenant] = start_vcsim(
                vms=per, hosts=4, hostname_prefix=f"{tenant[-1]}-", ip_base=f"10.{10 + i}.0.0"
            )
            tag_topology(sims[tenant], f"zone-{tenant[-1]}")
        names = [sim.hostname(f"DC0_C0_RP0_VM{j}") for sim in sims.values() for j in range(per)]
        log(f"{len(names)} VMs in {len(sims)} vcsims")
        config = tmp / "vsphere.conf"
        config.write_text(config_text(sims))
        for sim in sims.values():
            sim.reset_calls()
        daemon = start_daemon(config, plane.admin_kubeconfig, tmp / "kccm.log")
        kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
        try:
            async with Completion(kube, NODES, len(names), initialised) as done:
                started = time.monotonic()
                await bounded(
                    64,
                    [kube.create(NODES, kubelet_node(n)) for n in names],
                )
                await asyncio.wait_for(done.finished.wait(), args.timeout)
                init_s = time.monotonic() - started
        finally:
            await kube.close()
        init_calls = total_calls(sims)
        log(f"{len(names)} Nodes initialised in {init_s:.2f}s, {sum(init_calls.values())} calls")

        for sim in sims.values():
            sim.reset_calls()
        cloud = VSphereCloud(load_vsphere_config(config_text(sims)))
        nodes = [{"metadata": {"name": n}, "spec": {}} for n in names]
        began = time.monotonic()
        listed = await asyncio.to_thread(cloud._instances.list_instance_metadata, nodes)
        list_s = time.monotonic() - began
        list_calls = total_calls(sims)
        cloud.close()
        assert len(listed) == len(names), f"listed {len(listed)} of {len(names)}"
        return {
            "nodes": len(names),
            "vcenters": len(sims),
            "init_seconds": round(init_s, 2),
            "init_vsphere_calls": sum(init_calls.values()),
            "init_vsphere_calls_by_method": init_calls,
            "refresh_seconds": round(list_s, 3),
            "refresh_vsphere_calls_incl_login": sum(list_calls.values()),
            "refresh_vsphere_calls_by_method": list_calls,
        }
    finally:
        if daemon is not None:
            daemon.terminate()
            daemon.wait(30)
        for sim in sims.values():
            sim.stop()
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--vcenters", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    print(json.dumps(figures, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
