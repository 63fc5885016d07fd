"""End to end: the daemon counts its sync failures by reason (kccm_sync_failures_total) in the
registry /metrics serves, on the real apiserver, with failures the fake provider causes for a
Service annotated fake.kccm.io/fail; the Service is served once the annotation goes."""

from __future__ import annotations

import asyncio
import re

from daemon_e2e_support import Cluster, _ingress, _initialised, _sa_token, eventually

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FAULT_ANNOTATION
from kccm.testing.controllers import delete_until_gone
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

SERVICE_CONTROLLER = "service-lb-controller"


def failures(metrics: str, reason: str) -> float:
    pattern = (
        r"^kccm_sync_failures_total\{(?=[^}]*controller=\"" + SERVICE_CONTROLLER + r"\")"
        r"(?=[^}]*reason=\"" + re.escape(reason) + r"\")[^}]*\} (\S+)$"
    )
    found = re.search(pattern, metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_sync_failures_are_counted_by_reason(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    node = kube_cleanup.add(NODES, unique_name("e2e-reasons"))
    daemon = cluster.start(cluster.cloud_config([node]))
    await kube.create(NODES, kubelet_node(node, "10.244.41.0/24"))
    await eventually(lambda: _initialised(kube, node))
    reader = await _sa_token(
        kube, kube_cleanup, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )

    async def metrics_once(reason: str) -> str | None:
        status, text = await asyncio.to_thread(daemon.get, "/metrics", reader)
        return text if status == 200 and failures(text, reason) >= 1 else None

    svc = unique_name("e2e-quota")
    await kube.create(
        SERVICES,
        {
            "metadata": {
                "name": svc,
                "namespace": kube_namespace,
                "annotations": {FAULT_ANNOTATION: "quota-exceeded"},
            },
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        },
    )
    await eventually(lambda: metrics_once("quota-exceeded"))
    await kube.patch(
        SERVICES,
        svc,
        {"metadata": {"annotations": {FAULT_ANNOTATION: "no-such-fault"}}},
        namespace=kube_namespace,
    )
    await eventually(lambda: metrics_once("invalid-config"))
    await kube.patch(
        SERVICES,
        svc,
        {"metadata": {"annotations": {FAULT_ANNOTATION: None}}},
        namespace=kube_namespace,
    )
    assert await eventually(lambda: _ingress(kube, svc, kube_namespace))
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)
