"""Shared by the daemon end-to-end tests: the cluster of `kccm` subprocesses, the polls on what
they write, ServiceAccount tokens, the lease holder and the error-line filter."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    LEASES,
    NODES,
    SERVICE_ACCOUNTS,
    SERVICES,
)
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon, Daemons
from kccm.testing.kubelet import UNINITIALIZED_TAINT
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

ROOT = Path(__file__).resolve().parents[3]
UNINITIALIZED = UNINITIALIZED_TAINT


eventually = functools.partial(shared_eventually, within=60.0, interval=0.2)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


@dataclass
class Cluster:
    plane: ControlPlane
    tmp: Path
    kube: KubeApiClient
    daemons: Daemons

    def cloud_config(self, nodes: list[str]) -> Path:
        lines = ["[Global]", "zone = e2e-zone", "region = e2e-region", ""]
        for i, name in enumerate(nodes):
            lines += [
                f'[Instance "{name}"]',
                f"address = InternalIP=10.77.0.{i + 10}",
                f"address = Hostname={name}",
                "instance-type = fake.e2e",
                "",
            ]
        path = self.tmp / f"cloud-{len(self.daemons)}.conf"
        path.write_text("\n".join(lines))
        return path

    def start(self, cloud_config: Path, *extra: str, env: dict[str, str] | None = None) -> Daemon:
        return self.daemons.start(
            "fake",
            cloud_config,
            self.plane.kubeconfig_for(SA_USER, SA_GROUPS),
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=true",
            "--leader-elect-lease-duration=8s",
            "--leader-elect-renew-deadline=6s",
            "--leader-elect-retry-period=500ms",
            "--node-monitor-period=1s",
            "--v=2",
            *extra,
            env=env,
        )

    def stop_all(self) -> None:
        self.daemons.stop_all(grace=0)


async def _initialised(kube: KubeApiClient, name: str) -> Obj | None:
    node = await kube.get(NODES, name)
    taints = node["spec"].get("taints") or []
    done = node["spec"].get("providerID") and UNINITIALIZED["key"] not in {t["key"] for t in taints}
    return node if done else None


async def _has_internal_ip(kube: KubeApiClient, name: str) -> bool:
    node = await kube.get(NODES, name)
    addresses = node.get("status", {}).get("addresses") or []
    return any(a["type"] == "InternalIP" and a["address"].startswith("10.77.0.") for a in addresses)


async def _route_created(kube: KubeApiClient, name: str) -> Obj | None:
    node = await kube.get(NODES, name)
    for cond in node.get("status", {}).get("conditions") or []:
        if cond["type"] == "NetworkUnavailable" and cond["reason"] == "RouteCreated":
            return cond
    return None


async def _ingress(kube: KubeApiClient, name: str, ns: str) -> list[Any] | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    return (svc.get("status") or {}).get("loadBalancer", {}).get("ingress")


async def grant_cluster_role(
    kube: KubeApiClient, cleanup: KubeCleanup, name: str, rules: list[Any], subject: Obj
) -> None:
    """A ClusterRole ``name`` with ``rules`` bound to ``subject``, both removed after the test."""
    cleanup.add(CLUSTER_ROLES, name)
    cleanup.add(CLUSTER_ROLE_BINDINGS, name)
    await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [subject],
        },
    )


async def _sa_token(kube: KubeApiClient, cleanup: KubeCleanup, rules: list[Any]) -> str:
    """A bearer token (TokenRequest) for a fresh ServiceAccount granted ``rules``."""
    name = unique_name("metrics-reader")
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": "default"}})
    if rules:
        subject = {"kind": "ServiceAccount", "name": name, "namespace": "default"}
        await grant_cluster_role(kube, cleanup, name, rules, subject)
    review = await kube.create(
        SERVICE_ACCOUNTS,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
        namespace="default",
        name=name,
        subresource="token",
    )
    return str(review["status"]["token"])


async def _holder(kube: KubeApiClient) -> str:
    try:
        lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def _identity(daemon: Daemon) -> str | None:
    """The daemon's leader-election identity, once it has logged it."""
    found = re.search(r"leader election on lease \S+ as (\S+)", daemon.logs())
    return found.group(1) if found else None


async def _leading(kube: KubeApiClient, daemon: Daemon) -> str | None:
    """The daemon's identity once it holds the lease (not merely someone: a daemon stopped by
    the previous test may still hold it until its lease expires)."""
    me = _identity(daemon)
    return me if me and await _holder(kube) == me else None


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("E", "Error:"))]
