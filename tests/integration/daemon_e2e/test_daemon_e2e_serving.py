"""End to end: `kccm` as a real subprocess against the real apiserver, authenticated as the
shipped ServiceAccount with only the shipped RBAC, the `fake` provider configured through a
--cloud-config file: serving, failover and the lease.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time

import pytest
from daemon_e2e_support import (
    Cluster,
    _has_internal_ip,
    _holder,
    _ingress,
    _initialised,
    _leading,
    _route_created,
    _sa_token,
    eventually,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import Conflict
from kccm.kube.interface import Obj
from kccm.kube.resources import (
    LEASES,
    NODES,
    SERVICES,
)
from kccm.testing.controllers import delete_until_gone
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name


async def test_daemon_initialises_nodes_serves_lbs_routes_and_guards_metrics(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    nodes = [kube_cleanup.add(NODES, unique_name("e2e-node")) for _ in range(2)]
    daemon = cluster.start(cluster.cloud_config(nodes))
    for i, name in enumerate(nodes):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i + 1}.0/24"))
    for name in nodes:
        node = await eventually(lambda name=name: _initialised(kube, name))
        assert node["spec"]["providerID"] == f"fake://{name}"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "e2e-zone"
        await eventually(lambda name=name: _has_internal_ip(kube, name))
        await eventually(lambda name=name: _route_created(kube, name))

    svc = unique_name("e2e-lb")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": svc, "namespace": kube_namespace},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        },
    )
    ingress = await eventually(lambda: _ingress(kube, svc, kube_namespace))
    assert ingress[0]["ip"]

    status, body = await asyncio.to_thread(daemon.get, "/healthz?verbose")
    assert status == 200, body
    for check in (
        "leaderElection",
        "cloud-node-controller",
        "service-lb-controller",
        "node-route-controller",
        "cloud-node-lifecycle-controller",
    ):
        assert f"[+]{check} ok" in body
    anonymous = await asyncio.to_thread(daemon.get, "/metrics")
    assert anonymous[0] == 403
    outsider = await _sa_token(kube, kube_cleanup, [])
    assert (await asyncio.to_thread(daemon.get, "/metrics", outsider))[0] == 403
    reader = await _sa_token(
        kube, kube_cleanup, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )

    async def read_metrics() -> str | None:
        """The new binding reaches the apiserver's authorizer through an informer: until then
        kccm's delegated check is answered "no" (and kccm may cache that answer a while)."""
        status, text = await asyncio.to_thread(daemon.get, "/metrics", reader)
        return text if status == 200 else None

    metrics = await eventually(read_metrics)
    assert "running_managed_controllers" in metrics
    assert "workqueue_adds_total" in metrics
    # The fake's own cloud requests (issue 16): the balancers it created (other tests' Services
    # in the shared apiserver may add theirs), the routes.
    created = 'kccm_cloud_api_requests_total{mutating="true",operation="create_load_balancer"} '
    assert float(metrics.split(created, 1)[1].split()[0]) >= 1
    assert 'operation="create_route"' in metrics
    assert (await asyncio.to_thread(daemon.get, "/metrics", "not-a-token"))[0] == 401
    final = await kube.get(SERVICES, svc, namespace=kube_namespace)
    assert not [k for k in final["metadata"].get("annotations") or {} if "kccm.io" in k]
    await delete_until_gone(kube, SERVICES, [svc], kube_namespace)  # its balancer with it

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(60) == 0, daemon.logs()[-3000:]


async def test_two_replicas_failover_on_sigterm(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    nodes = [kube_cleanup.add(NODES, unique_name("e2e-ha")) for _ in range(2)]
    config = cluster.cloud_config(nodes)
    first = cluster.start(config)
    leader = await eventually(lambda: _leading(kube, first))
    second = cluster.start(config)
    await kube.create(NODES, kubelet_node(nodes[0], "10.244.31.0/24"))
    await eventually(lambda: _initialised(kube, nodes[0]))
    assert await _holder(kube) == leader, "the first replica keeps leading"

    stopped_at = time.monotonic()
    first.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(first.proc.wait, 60) == 0, first.logs()[-3000:]
    new_leader = await eventually(lambda: _holder_other_than(kube, leader))
    takeover = time.monotonic() - stopped_at
    await kube.create(NODES, kubelet_node(nodes[1], "10.244.32.0/24"))
    await eventually(lambda: _initialised(kube, nodes[1]))
    print(f"\nfailover: SIGTERM to the leader -> new leader {new_leader} in {takeover:.2f} s")
    assert second.proc.poll() is None
    second.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(second.proc.wait, 60) == 0


async def _holder_other_than(kube: KubeApiClient, old: str) -> str | None:
    holder = await _holder(kube)
    return holder if holder and holder != old else None


async def test_losing_the_lease_exits_non_zero(cluster: Cluster, kube: KubeApiClient) -> None:
    daemon = cluster.start(cluster.cloud_config([]), "--controllers=service")
    holder = await eventually(lambda: _leading(kube, daemon))

    async def steal() -> Obj | None:
        """Another manager takes the lease (None: kccm renewed it meanwhile, a 409; again)."""
        lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        spec = {"holderIdentity": "usurper", "renewTime": now, "leaseDurationSeconds": 60}
        stolen = {**lease, "spec": {**lease["spec"], **spec}}
        try:
            await kube.replace(LEASES, stolen)
        except Conflict:
            return None
        return stolen

    stolen = await eventually(steal)
    try:
        code = await asyncio.to_thread(daemon.proc.wait, 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kccm kept running after losing its lease:\n{daemon.logs()[-4000:]}")
    assert code == 1, daemon.logs()[-3000:]
    assert "leaderelection lost" in daemon.logs()
    assert holder != "usurper"
    released = {**stolen, "metadata": {**stolen["metadata"], "resourceVersion": None}}
    current = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    released["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    released["spec"] = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
    await kube.replace(LEASES, released)  # hand the lock back for later tests
