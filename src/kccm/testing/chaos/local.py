"""The ``local`` provider's cloud for the chaos bench: one state file (SQLite, WAL, every write
one ``BEGIN IMMEDIATE`` transaction: safe for several processes, see
:mod:`kccm.providers.local.store`) shared by every daemon of the fleet, a loopback net for
the Nodes' addresses and the VIP pool, and the data plane the daemons start (once: a daemon
starts one only when none heartbeats in the file) and supervise.

Who wrote what: each daemon logs ``state file write <operation> <balancer> <outcome>`` once a
balancer's write committed (``--vmodule=balancers=4``); its log is its own, so the line names
the process."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kccm.kube.interface import Obj
from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.desired import ANNOTATION_SOURCE_RANGES
from kccm.providers.local.store import LocalStore
from kccm.testing.chaos.leadership import Mutation, read_process_log
from kccm.testing.chaos.world import Balancer
from kccm.testing.kubelet import kubelet_node
from kccm.testing.ports import loopback_net

__all__ = ["LocalWorld"]

NODE_ADDRESSES = 99
"""Node addresses ``<net>.1`` to ``<net>.99``; VIPs from ``<net>.100`` up."""


@dataclass
class LocalWorld:
    tmp: Path
    run: str
    """Names the bench's Nodes (the control plane may be shared with other tests)."""
    provider: str = "local"
    annotation: str = ANNOTATION_SOURCE_RANGES
    net: str = field(default_factory=lambda: loopback_net((141, 200)))
    _nodes: int = 0
    _live_addresses: dict[str, str] = field(default_factory=dict)

    @property
    def state_file(self) -> Path:
        return self.tmp / "state.db"

    def cloud_config(self) -> Path:
        config = self.tmp / "local.conf"
        config.write_text(
            "[Global]\n"
            f"state-file = {self.state_file}\n"
            f"vip-range = {self.net}.100-{self.net}.250\n"
            "auto-adopt = true\n"
            "dataplane-check-interval = 1\n"
        )
        return config

    def env_for(self, index: int) -> Mapping[str, str]:
        return {}

    def daemon_flags(self) -> Sequence[str]:
        return ("--vmodule=balancers=4",)

    def annotation_value(self, pick: int) -> str:
        return f"10.{pick % 250}.0.0/16"

    def service_annotations(self) -> Mapping[str, str]:
        return {}

    def new_node(self) -> Obj | None:
        used = set(self._live_addresses.values())
        free = [
            f"{self.net}.{i}" for i in range(1, NODE_ADDRESSES + 1) if f"{self.net}.{i}" not in used
        ]
        if not free:
            return None
        self._nodes += 1
        name = f"{self.run}-n{self._nodes}"
        self._live_addresses[name] = free[0]
        node = kubelet_node(name)
        node["status"]["addresses"].append({"type": "InternalIP", "address": free[0]})
        node["metadata"]["labels"]["chaos.kccm.io/run"] = self.run
        return node

    def node_deleted(self, name: str) -> None:
        self._live_addresses.pop(name, None)

    def balancers(self) -> list[Balancer]:
        with LocalStore(self.state_file) as store:
            rows = store.list_load_balancers()
        return [
            Balancer(
                row.name,
                row.service,
                row.vip,
                {
                    "uid": row.service_uid,
                    "ports": sorted(
                        (int(p["port"]), str(p["protocol"]), int(p["node_port"])) for p in row.ports
                    ),
                    "backends": sorted(str(b["address"]) for b in row.backends),
                    "source_ranges": sorted(row.source_ranges),
                },
            )
            for row in rows
        ]

    def stale(self, service: Obj, nodes: Sequence[Obj], balancer: Balancer) -> list[str]:
        spec = service.get("spec") or {}
        ports = sorted(
            (int(p["port"]), str(p.get("protocol", "TCP")), int(p.get("nodePort") or 0))
            for p in spec.get("ports") or ()
        )
        backends = sorted(
            str(a["address"])
            for n in nodes
            for a in (n.get("status") or {}).get("addresses") or ()
            if a.get("type") == "InternalIP"
        )
        annotation = ((service["metadata"].get("annotations") or {}).get(self.annotation)) or ""
        ranges = sorted(
            str(ipaddress.ip_network(r.strip(), strict=False))
            for r in (annotation.split(",") if annotation else ["0.0.0.0/0"])
        )
        wanted = {
            "uid": str(service["metadata"].get("uid")),
            "ports": ports,
            "backends": backends,
            "source_ranges": ranges,
        }
        return [
            f"{key} {balancer.detail.get(key)} != {value}"
            for key, value in wanted.items()
            if balancer.detail.get(key) != value
        ]

    def other_leftovers(self, services: Sequence[Obj]) -> list[str]:
        owners = {f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in services}
        with LocalStore(self.state_file) as store:
            claims = store.list_ip_claims()
        return [f"ip claim {c.ip} ({c.owner})" for c in claims if c.owner not in owners]

    def mutations(self, logs: Mapping[int, Path]) -> list[Mutation]:
        return [
            Mutation(index, at, operation, subject, outcome)
            for index, path in logs.items()
            for at, operation, subject, outcome in read_process_log(path).writes
        ]

    def made_and_deleted(self, mutations: Sequence[Mutation]) -> tuple[int, int]:
        made = sum(
            m.operation == "put_load_balancer" and m.outcome == "generation=1" for m in mutations
        )
        deleted = sum(
            m.operation == "delete_load_balancer" and m.outcome == "deleted=True" for m in mutations
        )
        return made, deleted

    def close(self) -> None:
        """Stop the data plane the daemons started (it outlives them by design)."""
        beat = live_dataplane(self.state_file)
        if beat is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(beat.pid, signal.SIGTERM)
