"""``kccm dev up``: a development cluster's control plane in the foreground (DESCRIPTION)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NAMESPACES
from kccm.testing.controlplane import (
    Binaries,
    ControlPlane,
    ControlPlaneError,
    find_binaries,
    leftover_processes,
)

__all__ = ["DESCRIPTION", "run_dev_up"]

DESCRIPTION = """\
A development cluster's control plane in the foreground, for humans.

It runs etcd, kube-apiserver and kube-controller-manager (v1.36, built from Go modules by
`make controlplane`) on loopback ports, with a throw-away PKI, client-cert authentication
and RBAC. kube-controller-manager runs with --cloud-provider=external and only the
controllers a cloud-controller-manager needs beside it:
  namespace             `kubectl delete namespace` completes
  garbage collector     ownerReferences are followed (a deleted Node's Lease goes too)
  node lifecycle        a Node whose kubelet stops renewing its Lease turns Ready=Unknown
                        (tainted unreachable) after 5 s, checked every second
  service accounts      the default ServiceAccount, token Secrets, kube-root-ca.crt
There are no kubelets, no scheduler and no cloud loops: Nodes are whatever you create, and
the cloud loops are kccm's, started against the printed kubeconfig:
  kccm --cloud-provider=<name> --kubeconfig=<path> ...

It prints the kubeconfig, an `export KUBECONFIG=...` line and the kubectl built beside the
control plane, then waits for Ctrl-C (or SIGTERM) and stops everything. `make demo`
(`kccm dev demo`) runs the local provider end to end on such a cluster.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kccm dev up",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="start, verify the control plane answers, print a summary, and stop",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        type=Path,
        help="also write the admin kubeconfig to PATH (overwritten on every start), so "
        "other terminals and scripts find it at a path of your choosing",
    )
    parser.add_argument(
        "--no-controller-manager",
        dest="controller_manager",
        action="store_false",
        help="etcd + kube-apiserver only: namespaces then stay Terminating and no Node "
        "ever turns NotReady on its own",
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


def _describe(plane: ControlPlane, binaries: Binaries, kubeconfig: Path) -> list[str]:
    rss = {k: f"{v / 2**20:.0f} MiB" for k, v in plane.rss_bytes().items()}
    lines = [
        f"control plane ready in {plane.started_in:.1f} s at {plane.url}",
        f"  processes  {plane.pids}  rss {rss}",
    ]
    if plane.controller_manager:
        settings = plane.controller_manager_settings
        lines.append(
            "  kube-controller-manager --cloud-provider=external: "
            f"{', '.join(c.removesuffix('-controller') for c in settings.controllers)}; "
            f"Nodes silent for {settings.node_monitor_grace_period:g} s turn Ready=Unknown"
        )
    lines.append(f"  kubeconfig {kubeconfig}")
    if binaries.kubectl is not None:
        lines.append(f"  kubectl    {binaries.kubectl}")
    return lines


def _kubeconfig(plane: ControlPlane, copy_to: Path | None) -> Path:
    """The kubeconfig to tell the user about: the plane's own, or its copy at ``copy_to``."""
    if copy_to is None:
        return plane.admin_kubeconfig
    target = copy_to.absolute()
    target.write_bytes(plane.admin_kubeconfig.read_bytes())
    target.chmod(0o600)
    return target


def run_dev_up(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        binaries = find_binaries(controller_manager=args.controller_manager)
    except ControlPlaneError as exc:
        print(f"kccm dev up: {exc}", file=sys.stderr)
        return 1
    parts = "etcd, kube-apiserver" + (" and kube-controller-manager" * args.controller_manager)
    print(f"starting {parts} ...", flush=True)
    plane = ControlPlane(binaries=binaries, controller_manager=args.controller_manager)
    try:
        plane.start()
        kubeconfig = _kubeconfig(plane, args.kubeconfig)
        print("\n".join(_describe(plane, binaries, kubeconfig)))
        print(f"export KUBECONFIG={kubeconfig}", flush=True)
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
