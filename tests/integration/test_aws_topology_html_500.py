"""Issue 25 item 3 through the real daemon (``--cloud-provider=aws``, real apiserver, moto behind
the fault proxy): EC2 answers ``DescribeInstanceTopology`` with an HTML 500 (as stock moto 5, a
proxy or an EC2-compatible cloud do), and the Nodes of a type not expected to answer are
initialised anyway, with their zone-id label and without topology labels, as upstream's
``getAdditionalLabels`` moves on (``pkg/providers/v1/instances_v2.go``)."""

from __future__ import annotations

import asyncio

from test_aws_daemon import (  # the daemon module's environment (fixtures included)
    Env,
    _all_initialised,
    env,
    eventually,
    kubelet_node,
    moto_url,
    support,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES
from kccm.testing.pytest_plugin import KubeCleanup

__all__ = ["env", "moto_url"]  # fixtures re-exported for this module

ZONE_ID = "topology.k8s.aws/zone-id"
LAYER = "topology.k8s.aws/network-node-layer-"


async def test_an_html_500_for_the_topology_does_not_keep_nodes_tainted(
    env: Env, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    names = [kube_cleanup.add(NODES, dns) for dns in env.world.instances.values()]
    with support.html_500(env.world.url, "describe_instance_topology"):
        log = env.start()
        for i, name in enumerate(names):
            await kube.create(NODES, kubelet_node(name, f"10.244.{i}.0/24"))
        nodes = await eventually(lambda: _all_initialised(kube, names))
    ec2, _ = support.clients(env.world.url)
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    zone_ids = {z["ZoneName"]: z["ZoneId"] for z in zones}
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels[ZONE_ID] == zone_ids[labels["topology.kubernetes.io/zone"]]
        assert not [k for k in labels if k.startswith(LAYER)]
    text = await asyncio.to_thread(log.read_text)
    assert "Moving on without setting labels" in text
    assert "not an AWS answer" in text
    assert "failed to get instance metadata" not in text
