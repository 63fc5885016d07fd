"""``kccm dev up``: a real etcd + kube-apiserver in the foreground for humans.

Prints the kubeconfig path and an ``export KUBECONFIG=...`` line, then waits for Ctrl-C
(or SIGTERM) and stops both processes. ``--check`` starts, shows the control plane healthy
through kccm.kube, and stops again (a smoke test of the build; ``make demo`` runs the full
local-provider demo, ``kccm dev demo``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time
from collections.abc import Sequence

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NAMESPACES
from kccm.testing.controlplane import (
    ControlPlane,
    ControlPlaneError,
    find_binaries,
    leftover_processes,
)

__all__ = ["run_dev_up"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kccm dev up", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="start, verify the control plane answers, print a summary, and stop",
    )
    return parser


async def _health_summary(plane: ControlPlane) -> list[str]:
    client = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)))
    try:
        began = time.monotonic()
        version = await client.get_raw("/version")
        namespaces = await client.list(NAMESPACES)
        readyz = await client.get_text("/readyz", {"verbose": "1"})
        took = (time.monotonic() - began) * 1000
    finally:
        await client.close()
    checks = [line for line in readyz.splitlines() if line.startswith("[+]")]
    return [
        f"apiserver version   {version.get('gitVersion')} (go {version.get('goVersion')})",
        f"readyz              {len(checks)} checks passed",
        f"namespaces          {', '.join(n['metadata']['name'] for n in namespaces.items)}",
        f"API round trips     {took:.0f} ms for version + list + readyz",
    ]


def _stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (even where the parent left SIGINT ignored)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def run_dev_up(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        binaries = find_binaries()
    except ControlPlaneError as exc:
        print(f"kccm dev up: {exc}", file=sys.stderr)
        return 1
    print("starting etcd and kube-apiserver ...", flush=True)
    plane = ControlPlane(binaries=binaries)
    try:
        plane.start()
        rss = {k: f"{v / 2**20:.0f} MiB" for k, v in plane.rss_bytes().items()}
        print(f"control plane ready in {plane.started_in:.1f} s at {plane.url}")
        print(f"  processes  {plane.pids}  rss {rss}")
        print(f"  kubeconfig {plane.admin_kubeconfig}")
        print(f"export KUBECONFIG={plane.admin_kubeconfig}", flush=True)
        if args.check:
            for line in asyncio.run(_health_summary(plane)):
                print(f"  {line}")
            print("control plane healthy; stopping (--check)")
        else:
            stop = _stop_on_signals()  # installed before the prompt, so no signal is missed
            print("press Ctrl-C to stop", flush=True)
            stop.wait()
            print("\nstopping ...", flush=True)
    except ControlPlaneError as exc:
        print(f"kccm dev up: {exc}", file=sys.stderr)
        return 1
    finally:
        plane.stop()
    left = leftover_processes(str(plane.root))
    if left:
        print(f"kccm dev up: processes still running after stop: {left}", file=sys.stderr)
        return 1
    print("stopped; nothing left running")
    return 0
