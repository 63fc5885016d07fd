"""Informer memory and sync time for N realistic Nodes on the real control plane.

Usage: .venv/bin/python bench/informer_nodes.py [N=5000]

Starts its own etcd + kube-apiserver, creates N Nodes shaped like a kubelet's (labels,
annotations, conditions, addresses, capacity, ~40 container images), then in a fresh
subprocess measures the RSS delta and wall time of an informer's initial sync, slimmed (the
default) and unslimmed, and the cost of one relist.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.testing.controlplane import ControlPlane


def realistic_node(i: int) -> dict[str, Any]:
    name = f"bench-node-{i:05d}"
    ip = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
    images = [
        {
            "names": [
                f"registry.example.com/team{j % 7}/service-{j}@sha256:{(i * 131 + j):064x}",
                f"registry.example.com/team{j % 7}/service-{j}:v1.{j}.{i % 10}",
            ],
            "sizeBytes": 10_000_000 + j * 1_234_567,
        }
        for j in range(40)
    ]
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"Kubelet{t}",
            "message": f"kubelet has no {t}",
            "lastHeartbeatTime": "2026-11-21T05:00:00Z",
            "lastTransitionTime": "2026-11-20T05:00:00Z",
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
    ] + [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": "2026-11-21T05:00:00Z",
            "lastTransitionTime": "2026-11-20T05:00:00Z",
        }
    ]
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m5.xlarge",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "topology.kubernetes.io/region": "region-1",
                "pool": f"pool-{i % 5}",
                "bench": "informer",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "alpha.kubernetes.io/provided-node-ip": ip,
            },
        },
        "spec": {"providerID": f"fake://{name}", "podCIDR": f"10.244.{i % 256}.0/24"},
        "status": {
            "addresses": [
                {
                    "type": "InternalIP",
                    "address": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
                },
                {"type": "Hostname", "address": name},
            ],
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {
                "cpu": "3900m",
                "memory": "15Gi",
                "pods": "110",
                "ephemeral-storage": "95Gi",
            },
            "conditions": conditions,
            "images": images,
            "nodeInfo": {
                "kubeletVersion": "v1.36.3",
                "osImage": "Debian GNU/Linux 12",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kernelVersion": "6.1.0",
                "architecture": "amd64",
                "operatingSystem": "linux",
                "machineID": f"{i:032x}",
                "systemUUID": f"{i:032x}",
                "bootID": f"{i:032x}",
                "kubeProxyVersion": "",
            },
        },
    }


async def create_nodes(kubeconfig: str, count: int) -> float:
    client = KubeApiClient(load_cluster_config(kubeconfig), qps=0, burst=0)
    began = time.monotonic()
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            await client.create(NODES, realistic_node(i))

    try:
        for start in range(0, count, 500):
            await asyncio.gather(*(one(i) for i in range(start, min(count, start + 500))))
            print(
                f"  created {min(count, start + 500)}/{count} nodes "
                f"({time.monotonic() - began:.0f} s)",
                flush=True,
            )
    finally:
        await client.close()
    return time.monotonic() - began


MEASURE = r"""
import asyncio, gc, json, sys, time
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.runtime.informers import Informer

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

async def main(kubeconfig, slim):
    client = KubeApiClient(load_cluster_config(kubeconfig), qps=0, burst=0)
    kwargs = {} if slim else {"slim": lambda o: o}
    informer = Informer(client, NODES, label_selector="bench=informer", **kwargs)
    gc.collect(); before = rss()
    began = time.monotonic()
    task = asyncio.create_task(informer.run())
    await informer.wait_for_sync()
    synced = time.monotonic() - began
    gc.collect(); after = rss()
    relist_began = time.monotonic()
    await informer._list_and_replace()
    relist = time.monotonic() - relist_began
    task.cancel()
    await client.close()
    print(json.dumps({"objects": len(informer.keys()), "sync_s": synced, "relist_s": relist,
                      "rss_delta_mib": (after - before) / 2**20}))

asyncio.run(main(sys.argv[1], sys.argv[2] == "slim"))
"""


def measure(kubeconfig: str, mode: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, kubeconfig, mode],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main(count: int) -> None:
    args = ["--max-requests-inflight=1000", "--max-mutating-requests-inflight=500"]
    with ControlPlane(extra_apiserver_args=args) as plane:
        print(f"control plane up in {plane.started_in:.1f} s; creating {count} nodes", flush=True)
        size = len(json.dumps(realistic_node(0)))
        took = asyncio.run(create_nodes(str(plane.admin_kubeconfig), count))
        print(
            f"created {count} nodes ({size / 1024:.1f} KiB JSON each before server "
            f"defaults) in {took:.1f} s"
        )
        for mode in ("slim", "full"):
            r = measure(str(plane.admin_kubeconfig), mode)
            print(
                f"informer ({mode}): {r['objects']:.0f} nodes synced in {r['sync_s']:.2f} s, "
                f"relist {r['relist_s']:.2f} s, RSS delta {r['rss_delta_mib']:.1f} MiB "
                f"({r['rss_delta_mib'] * 1024 / max(1, r['objects']):.1f} KiB/node)"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
