"""The openstack provider's Service patch seam on the real apiserver: annotations written through
the status subresource (tests/unit/providers/openstack/test_lb_servicepatch.py tests the patch
itself)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kccm.kube.resources import SERVICES
from kccm.providers.openstack.loadbalancer.annotations import ADDRESS, LB_ID
from kccm.providers.openstack.loadbalancer.servicepatch import KubeServicePatcher


@pytest.mark.asyncio
async def test_annotations_reach_a_real_apiserver_through_status(
    kube: Any, kube_namespace: str
) -> None:
    """On the real apiserver the status subresource takes the annotations (the Service
    status strategy keeps metadata) and leaves the others and the spec alone."""
    created = await kube.create(
        SERVICES,
        {
            "metadata": {"name": "web", "namespace": kube_namespace, "annotations": {"keep": "me"}},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    patcher = KubeServicePatcher(kube, asyncio.get_running_loop())
    await asyncio.to_thread(patcher.patch_annotations, created, {LB_ID: "x", ADDRESS: "1.2.3.4"})
    got = await kube.get(SERVICES, "web", namespace=kube_namespace)
    assert got["metadata"]["annotations"] == {"keep": "me", LB_ID: "x", ADDRESS: "1.2.3.4"}
    assert got["spec"]["ports"][0]["port"] == 80
