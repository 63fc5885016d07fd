"""``kccm explain openstack-annotations`` on the real apiserver: a process with a user's
kubeconfig lists the namespace's LoadBalancer Services and names every annotation kccm reads
differently from OCCM v1.36.0, or that OCCM did not use either; no kccm, no cloud."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import SERVICES
from kccm.testing.controlplane import ControlPlane

LB = "loadbalancer.openstack.org/"


def _service(name: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}], **spec},
    }


SERVICES_MADE = [
    _service("plain", {LB + "x-forwarded-for": "true", LB + "connection-limit": "100"}),
    _service(
        "typos",
        {
            LB + "x-forwarded-for": "True",
            LB + "proxy-protocol": "enabled",
            LB + "connection-limit": "ten",
        },
    ),
    _service("method", {LB + "lb-method": "RANDOM"}),
    _service("misspelt", {LB + "keep-floating-ip": "true"}),
    # not OCCM's: another class, or not a balancer at all
    _service("classed", {LB + "x-forwarded-for": "yes"}, loadBalancerClass="example.com/lb"),
    {
        "metadata": {"name": "internal", "annotations": {LB + "x-forwarded-for": "yes"}},
        "spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]},
    },
]


def _run(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kccm",
            "explain",
            "openstack-annotations",
            *args,
            f"--kubeconfig={kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_preflight_lists_what_kccm_reads_differently(
    control_plane: ControlPlane, kube: KubeApiClient, kube_namespace: str
) -> None:
    for svc in SERVICES_MADE:
        await kube.create(SERVICES, svc, namespace=kube_namespace)
    admin = control_plane.admin_kubeconfig

    result = await asyncio.to_thread(_run, admin, kube_namespace, "-o", "json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["services_checked"] == 4
    found = {
        (f["service"].split("/")[1], f["annotation"].removeprefix(LB), f["value"], f["differs"])
        for f in answer["findings"]
    }
    assert found == {
        ("typos", "x-forwarded-for", '"True"', False),
        ("typos", "proxy-protocol", '"enabled"', False),
        ("typos", "connection-limit", '"ten"', False),
        ("method", "lb-method", '"RANDOM"', True),
        ("misspelt", "keep-floating-ip", '"true"', False),
    }

    result = await asyncio.to_thread(_run, admin, kube_namespace)
    assert result.returncode == 0, result.stderr
    print(f"$ kccm explain openstack-annotations NAMESPACE\n{result.stdout}")
    lines = result.stdout.splitlines()
    assert lines[0].startswith("4 LoadBalancer Services checked against OCCM v1.36.0: 1 ")
    assert f'{kube_namespace}/method  {LB}lb-method="RANDOM"' in lines
    assert "kccm:         the same on a pool that exists;" in result.stdout  # OCCM's Warning
    assert "never read as true" in result.stdout  # "True" under OCCM was the default, false


async def test_a_user_who_may_not_list_services_is_told(
    control_plane: ControlPlane, kube_namespace: str
) -> None:
    nobody = control_plane.kubeconfig_for("kccm-test-nobody")
    result = await asyncio.to_thread(_run, nobody, kube_namespace)
    assert result.returncode == 1
    assert f"cannot list Services in namespace {kube_namespace}" in result.stderr
