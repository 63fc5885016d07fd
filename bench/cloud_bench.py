"""What the per-cloud scale benches (bench/openstack_scale.py, bench/azure_scale.py and its
upstream half) share: the log line, an emulator's request-log window, the Nodes and Services
they create, when a Node counts as initialised, and the command-line options they have in
common."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from kccm.testing.kubelet import UNINITIALIZED_TAINT
from kccm.testing.kubelet import kubelet_node as shared_kubelet_node

UNINIT = str(UNINITIALIZED_TAINT["key"])


class RequestLog(Protocol):
    def requests(self, since: int = 0) -> list[dict[str, Any]]: ...


class LoggingEmulator(Protocol):
    @property
    def admin(self) -> RequestLog: ...


class Tabled(Protocol):
    """One daemon's figures and its calls by kind per phase."""

    who: str
    figures: dict[str, Any]
    tables: dict[str, Counter[str]]


def print_tables(results: Sequence[Tabled], phases: Sequence[str], what: str, width: int) -> None:
    """Each daemon's figures (without the by-kind tables), then per phase present its ``what``
    (requests, calls) by kind, a column per daemon."""
    for out in results:
        print(f"\n== {out.who}: " + json.dumps(
            {k: v for k, v in out.figures.items() if not k.endswith("_by_kind")}))  # fmt: skip
    for phase in [p for p in phases if any(p in out.tables for out in results)]:
        kinds = sorted({k for out in results for k in out.tables.get(phase, {})})
        print(f"\n{phase}: {what} by kind  " + "  ".join(f"{o.who:>9}" for o in results))
        for k in kinds:
            counts = "  ".join(f"{o.tables.get(phase, Counter())[k]:>9}" for o in results)
            print(f"  {k:<{width}} {counts}")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def window(emu: LoggingEmulator, since: int, until: int | None = None) -> list[dict[str, Any]]:
    """The emulator's request log after ``since`` up to ``until`` (every entry when None)."""
    return [e for e in emu.admin.requests(since) if until is None or e["seq"] <= until]


def kubelet_node(name: str, run: str) -> dict[str, Any]:
    """As kubelet --cloud-provider=external registers it (:func:`kccm.testing.kubelet.
    kubelet_node`): a Hostname address, Ready, the uninitialized taint; labelled with the
    bench run."""
    node = shared_kubelet_node(name)
    node["metadata"]["labels"]["bench-run"] = run
    return node


def initialised(node: dict[str, Any], scheme: str) -> bool:
    """The Node has a ``<scheme>://`` providerID, an InternalIP, zone and instance-type
    labels, and no uninitialized taint."""
    labels = node["metadata"].get("labels") or {}
    taints = {t["key"] for t in node["spec"].get("taints") or []}
    addresses = {a["type"] for a in (node.get("status") or {}).get("addresses") or []}
    return (
        str(node["spec"].get("providerID", "")).startswith(f"{scheme}://")
        and UNINIT not in taints
        and "InternalIP" in addresses
        and "topology.kubernetes.io/zone" in labels
        and "node.kubernetes.io/instance-type" in labels
    )


def lb_service(i: int, namespace: str) -> dict[str, Any]:
    """LoadBalancer Service ``web-<i>`` with two TCP ports (80 and 443)."""
    return {
        "metadata": {"name": f"web-{i:04d}", "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": f"web-{i:04d}"},
            "ports": [
                {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
            ],
        },
    }


def scale_arguments(parser: argparse.ArgumentParser, *, timeout: float) -> None:
    """The options every scale bench takes (``--quick`` is each bench's to apply)."""
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--services", type=int, default=100)
    parser.add_argument("--lb-nodes", type=int, default=3, help="the balancers' Nodes")
    parser.add_argument("--refresh-every", type=float, default=30.0, help="seconds per tick")
    parser.add_argument("--timeout", type=float, default=timeout)
    parser.add_argument("--quick", action="store_true", help="50 nodes, 10 services, 5 s ticks")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--workdir",
        help="where the daemons' configs and logs go (default: a new directory in the system's "
        "temporary directory, kept for reading afterwards and named on the first line)",
    )


def work_dir(args: argparse.Namespace, cloud: str) -> Path:
    """``--workdir`` (made if missing), or a new ``kccm-<cloud>-bench-*`` temporary directory
    that outlives the run so its logs can be read; either is named in the log."""
    if args.workdir:
        path = Path(args.workdir)
    else:
        path = Path(tempfile.mkdtemp(prefix=f"kccm-{cloud}-bench-"))
    path.mkdir(parents=True, exist_ok=True)
    log(f"configs and logs in {path}")
    return path
