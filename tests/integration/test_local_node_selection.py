"""Target Nodes per Service (``service.kccm.io/target-node-selector``) with the local provider
behind the real service controller, on the real apiserver: three Nodes, a selector picking
two (the load_balancers row's backends), a relabel converging, a bad selector a Warning that
leaves the backends as they were, and ``kccm explain``'s node set naming the Node left out."""

from __future__ import annotations

from typing import Any

from test_local_provider import PREFIX, Running, _row, running

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR as SELECTOR
from kccm.app.explain_rules import node_set
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import ENDPOINT_SLICES, EVENTS, NODES, SERVICES
from kccm.testing.controllers import eventually
from kccm.testing.pytest_plugin import unique_name

__all__ = ["running"]  # the fixture, re-exported for this module


async def test_three_nodes_a_selector_picking_two_and_a_relabel_converging(
    running: Running, kube: KubeApiClient, kube_namespace: str
) -> None:
    base = unique_name(PREFIX)
    names = [f"{base}-{i}" for i in range(3)]
    pools = ["web", "web", "db"]
    for i, (name, pool) in enumerate(zip(names, pools, strict=True)):
        address = f"127.0.11.{50 + i}"
        running.instance(name, address)
        await running.node(name, address, "True")
        await kube.patch(NODES, name, {"metadata": {"labels": {"kccm-test/pool": pool}}})
    svc = unique_name("picky")
    selector = "kccm-test/pool=web,kubernetes.io/hostname notin (nobody)"
    await kube.create(
        SERVICES,
        {
            "metadata": {
                "name": svc,
                "namespace": kube_namespace,
                "annotations": {SELECTOR: selector},
            },
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        },
    )
    key = f"{kube_namespace}/{svc}"

    def backends_are(*wanted: str) -> Any:
        async def probe() -> bool:
            rows = [r for r in running.store.list_load_balancers() if r.service == key]
            return bool(rows) and sorted(b["node"] for b in rows[0].backends) == sorted(wanted)

        return probe

    await eventually(backends_are(names[0], names[1]))

    # -- kccm explain's node set: the Node the selector leaves out, and why ---------------
    nodes = [await kube.get(NODES, n) for n in names]
    found = node_set(nodes, await kube.get(SERVICES, svc, namespace=kube_namespace))
    assert found.eligible == tuple(sorted(names[:2]))
    assert found.excluded == {names[2]: f"not selected by annotation {SELECTOR}={selector}"}

    # -- relabels converge: one Node joins, another leaves ---------------------------------
    await kube.patch(NODES, names[2], {"metadata": {"labels": {"kccm-test/pool": "web"}}})
    await eventually(backends_are(*names))
    await kube.patch(NODES, names[0], {"metadata": {"labels": {"kccm-test/pool": "db"}}})
    await eventually(backends_are(names[1], names[2]))

    # -- a bad selector: a Warning naming it, the backends stay ----------------------------
    bad = {"metadata": {"annotations": {SELECTOR: "kccm-test/pool in web"}}}
    await kube.patch(SERVICES, svc, bad, namespace=kube_namespace)

    async def warned() -> list[str]:
        events = await kube.list(EVENTS, namespace=kube_namespace)
        return [
            e["message"]
            for e in events.items
            if e["involvedObject"]["name"] == svc
            and e["reason"] == "SyncLoadBalancerFailed"
            and SELECTOR in e["message"]
        ]

    [message] = await eventually(warned)
    assert "is not a label selector" in message
    row = _row(running.store, key)  # the failed sync came before its Warning: no ensure
    assert sorted(b["node"] for b in row.backends) == sorted(names[1:])

    # -- the annotation removed: upstream's set, every Node ---------------------------------
    gone = {"metadata": {"annotations": {SELECTOR: None}}}
    await kube.patch(SERVICES, svc, gone, namespace=kube_namespace)
    await eventually(backends_are(*names))
    await kube.delete(SERVICES, svc, namespace=kube_namespace)

    async def released() -> bool:
        return not any(r.service == key for r in running.store.list_load_balancers())

    await eventually(released)


async def test_local_endpoints_outside_the_selection_are_a_warning(
    running: Running, kube: KubeApiClient, kube_namespace: str
) -> None:
    """``externalTrafficPolicy: Local`` with endpoints (an EndpointSlice, as the endpoint
    slice controller writes it) on a Node the selector leaves out: a Warning naming it."""
    base = unique_name(PREFIX)
    names = [f"{base}-{i}" for i in range(2)]
    for i, (name, pool) in enumerate(zip(names, ["web", "db"], strict=True)):
        running.instance(name, f"127.0.11.{60 + i}")
        await running.node(name, f"127.0.11.{60 + i}", "True")
        await kube.patch(NODES, name, {"metadata": {"labels": {"kccm-test/pool": pool}}})
    svc = unique_name("local")
    await kube.create(
        ENDPOINT_SLICES,
        {
            "metadata": {
                "name": f"{svc}-a",
                "namespace": kube_namespace,
                "labels": {"kubernetes.io/service-name": svc},
            },
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": [f"10.1.0.{i}"], "nodeName": n, "conditions": {"ready": True}}
                for i, n in enumerate(names)
            ],
            "ports": [{"port": 8080, "protocol": "TCP"}],
        },
    )
    await kube.create(
        SERVICES,
        {
            "metadata": {
                "name": svc,
                "namespace": kube_namespace,
                "annotations": {SELECTOR: "kccm-test/pool=web"},
            },
            "spec": {
                "type": "LoadBalancer",
                "externalTrafficPolicy": "Local",
                "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
            },
        },
    )

    async def warned() -> list[str]:
        events = await kube.list(EVENTS, namespace=kube_namespace)
        return [
            e["message"]
            for e in events.items
            if e["involvedObject"]["name"] == svc and e["reason"] == "EndpointsOutsideTargetNodes"
        ]

    [message] = await eventually(warned)
    assert f"({names[1]}; annotation {SELECTOR}=kccm-test/pool=web)" in message
    await kube.delete(SERVICES, svc, namespace=kube_namespace)
    key = f"{kube_namespace}/{svc}"

    async def released() -> bool:
        return not any(r.service == key for r in running.store.list_load_balancers())

    await eventually(released)
