"""kube-controller-manager beside kccm: the controllers a cloud-controller-manager needs around it.

A cluster whose cloud provider is external runs kube-controller-manager with
``--cloud-provider=external`` (the cloud loops then live in the CCM, here kccm). Without it,
``kubectl delete namespace`` never finishes (the namespace controller empties and finalizes
namespaces), nothing turns a silent kubelet's Node NotReady (the node lifecycle controller
watches Node Leases and the Ready condition), and owner references are never followed (the
garbage collector). :class:`ControllerManagerSettings` says which controllers run and how
quickly the node lifecycle controller gives up on a Node; :func:`controller_manager_argv`
is the command line :class:`~kccm.testing.controlplane.ControlPlane` starts.

The cloud loops (``cloud-node-lifecycle``, ``service-lb``, ``node-route``) are not among the
controllers: with ``--cloud-provider=external`` they belong to the CCM, as upstream's
``cmd/kube-controller-manager/app/controllermanager.go`` (``NewControllerDescriptors``) and
``cmd/cloud-controller-manager`` divide them.
"""

from __future__ import annotations

import contextlib
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CONTROLLERS",
    "ControllerManagerSettings",
    "controller_manager_argv",
    "controller_manager_healthy",
    "serving_flags",
]

CONTROLLERS = (
    "namespace-controller",  # empties and finalizes deleted namespaces
    "garbage-collector-controller",  # follows ownerReferences (a Node's Lease, ...)
    "node-lifecycle-controller",  # Ready=Unknown + unreachable taints when heartbeats stop
    "serviceaccount-controller",  # the "default" ServiceAccount of every namespace
    "serviceaccount-token-controller",  # tokens of kubernetes.io/service-account-token Secrets
    "root-ca-certificate-publisher-controller",  # kube-root-ca.crt in every namespace
)
"""Upstream's names (``cmd/kube-controller-manager/names``); never the cloud controllers."""


@dataclass(frozen=True)
class ControllerManagerSettings:
    """How the node lifecycle controller judges Nodes: short periods for tests and demos.

    Upstream's defaults are 5 s / 50 s / 60 s; here a Node whose Lease and Ready heartbeat
    stop is marked ``Ready=Unknown`` after ``node_monitor_grace_period`` seconds, checked
    every ``node_monitor_period`` seconds."""

    node_monitor_period: float = 1.0
    node_monitor_grace_period: float = 5.0
    node_startup_grace_period: float = 10.0
    controllers: tuple[str, ...] = CONTROLLERS
    qps: int = 100
    burst: int = 200


def _seconds(value: float) -> str:
    return f"{int(value * 1000)}ms"


def serving_flags(*, kubeconfig: Path, cert_dir: Path, port: int) -> list[str]:
    """A Go controller manager's API and serving flags as the tests run one: ``kubeconfig``
    for the API and for delegated authentication/authorization, health paths open, HTTPS
    on ``127.0.0.1:port`` with a self-signed certificate kept in ``cert_dir``."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
    ]


def controller_manager_argv(
    binary: Path,
    *,
    kubeconfig: Path,
    pki: Path,
    cert_dir: Path,
    port: int,
    settings: ControllerManagerSettings,
) -> list[str]:
    """The command line: ``--cloud-provider=external``, each controller under its own
    ServiceAccount (``--use-service-account-credentials``, as kubeadm runs it), serving
    /healthz on ``127.0.0.1:port``."""
    return [
        str(binary),
        *serving_flags(kubeconfig=kubeconfig, cert_dir=cert_dir, port=port),
        "--cloud-provider=external",
        f"--controllers={','.join(settings.controllers)}",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--leader-elect=false",
        f"--node-monitor-period={_seconds(settings.node_monitor_period)}",
        f"--node-monitor-grace-period={_seconds(settings.node_monitor_grace_period)}",
        f"--node-startup-grace-period={_seconds(settings.node_startup_grace_period)}",
        f"--kube-api-qps={settings.qps}",
        f"--kube-api-burst={settings.burst}",
        "--profiling=false",
    ]


def controller_manager_healthy(port: int) -> bool:
    """True when kube-controller-manager's /healthz answers ok (its certificate is
    self-signed, so it is not verified: this only asks whether the process serves)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with contextlib.suppress(OSError, urllib.error.URLError):
        url = f"https://127.0.0.1:{port}/healthz"
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(resp.status == 200)
    return False
