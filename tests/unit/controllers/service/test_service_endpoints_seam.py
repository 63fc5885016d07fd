"""The endpoints seam (kccm.cloudprovider.EndpointsUser): a provider that asks gets a reader of
each Service's endpoints (from EndpointSlices) and its Services are synced when their endpoints
change; a provider that does not ask costs no EndpointSlice list or watch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from service_harness import NS, Harness, create_service, ensure_all, key, lb_spec, start

from kccm.cloudprovider import EndpointsReader, EndpointsUser, Node, Service, ServiceEndpoint
from kccm.cloudprovider.types import LoadBalancerStatus
from kccm.controllers.service import ServiceController
from kccm.controllers.service_endpointslices import merge_endpoints, slice_endpoints
from kccm.kube.resources import ENDPOINT_SLICES, SERVICES
from kccm.providers.fake import FakeCloud

PORTS = (("http", 8080),)


class EndpointsCloud(FakeCloud):
    """The fake provider asking for endpoints of the Services labelled ``eps: "yes"``; it
    records what the reader gave during each ensure."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reader: EndpointsReader | None = None
        self.seen: list[tuple[str, tuple[str, ...]]] = []

    def uses_endpoints(self, service: Service) -> bool:
        return bool((service["metadata"].get("labels") or {}).get("eps") == "yes")

    def set_endpoints_reader(self, reader: EndpointsReader) -> None:
        self.reader = reader

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        assert self.reader is not None
        found = tuple(f"{e.address}@{e.node_name}" for e in self.reader(service) if e.ready)
        self.seen.append((service["metadata"]["name"], found))
        return await super().ensure_load_balancer(cluster_name, service, nodes)


def _binds(cloud: EndpointsCloud) -> EndpointsUser:
    return cloud  # mypy: the fake is an EndpointsUser


def endpoint(address: str, node: str = "a", **conditions: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"addresses": [address], "nodeName": node}
    item["conditions"] = conditions
    return item


def eps_slice(name: str, service: str, endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }


@pytest.mark.parametrize(
    ("endpoints", "expected"),
    [
        pytest.param(
            [endpoint("10.1.0.1", ready=True)],
            (ServiceEndpoint("10.1.0.1", "a", True, PORTS),),
            id="ready",
        ),
        pytest.param(
            [endpoint("10.1.0.1", ready=False)],
            (ServiceEndpoint("10.1.0.1", "a", False, PORTS),),
            id="unready-kept-with-its-flag",
        ),
        pytest.param(
            [endpoint("10.1.0.1")],
            (ServiceEndpoint("10.1.0.1", "a", True, PORTS),),
            id="ready-unset-counts-as-ready",
        ),
        pytest.param(
            [endpoint("10.1.0.1", ready=False, terminating=True)], (), id="terminating-left-out"
        ),
        pytest.param(
            [{**endpoint("10.1.0.1", ready=True), "targetRef": {"kind": "Pod", "name": "p-1"}}],
            (ServiceEndpoint("10.1.0.1", "a", True, PORTS, "p-1"),),
            id="pod-named",
        ),
        pytest.param(
            [{"addresses": ["10.1.0.1", "10.1.0.2"], "conditions": {"ready": True}}],
            (
                ServiceEndpoint("10.1.0.1", "", True, PORTS),
                ServiceEndpoint("10.1.0.2", "", True, PORTS),
            ),
            id="one-per-address-no-node",
        ),
    ],
)
def test_a_slice_s_endpoints(endpoints: list[dict[str, Any]], expected: tuple[Any, ...]) -> None:
    assert slice_endpoints(eps_slice("s-1", "s", endpoints)) == expected


def test_fqdn_slices_give_nothing() -> None:
    piece = {**eps_slice("s-1", "s", [endpoint("db.example")]), "addressType": "FQDN"}
    assert slice_endpoints(piece) == ()


def test_an_address_in_two_slices_is_given_once_ready_if_either_says_so() -> None:
    one = (ServiceEndpoint("10.1.0.9", "a", False), ServiceEndpoint("10.1.0.1", "a", True))
    two = (ServiceEndpoint("10.1.0.9", "b", True),)
    assert merge_endpoints([one, two]) == (
        ServiceEndpoint("10.1.0.1", "a", True),
        ServiceEndpoint("10.1.0.9", "b", True),
    )


async def test_a_provider_that_does_not_ask_costs_no_endpointslice_watch(
    harness: Harness,
) -> None:
    controller = await start(harness)
    assert controller.endpoint_slices is None
    assert harness.factory.find(ENDPOINT_SLICES) is None


async def asking(h: Harness) -> tuple[EndpointsCloud, ServiceController]:
    cloud = h.cloud = EndpointsCloud(clock=h.clock)
    _binds(cloud)
    for name, labels in (("follows", {"eps": "yes"}), ("plain", {})):
        await h.kube.create(
            SERVICES,
            {"metadata": {"name": name, "namespace": NS, "labels": labels}, "spec": lb_spec()},
        )
    await h.kube.create(ENDPOINT_SLICES, eps_slice("follows-1", "follows", [endpoint("10.1.0.1")]))
    controller = await start(h)
    await ensure_all(h, controller, ["follows", "plain"])
    return cloud, controller


async def queued(h: Harness, controller: ServiceController) -> list[str]:
    await h.settle()
    keys = []
    while len(controller.service_queue):
        got = await controller.service_queue.get()
        controller.service_queue.done(got)
        keys.append(got)
    return keys


async def test_the_reader_gives_the_service_s_endpoints_during_ensure(harness: Harness) -> None:
    cloud, controller = await asking(harness)
    assert harness.factory.find(ENDPOINT_SLICES) is not None
    await controller.sync_service(key("follows"))
    assert cloud.seen[-1] == ("follows", ("10.1.0.1@a",))
    await controller.sync_service(key("plain"))
    assert cloud.seen[-1] == ("plain", ())


SLICE = "follows-1"


async def _move(h: Harness) -> None:
    await h.kube.patch(
        ENDPOINT_SLICES, SLICE, {"endpoints": [endpoint("10.1.0.1", "b")]}, namespace=NS
    )


async def _unready(h: Harness) -> None:
    patch = {"endpoints": [endpoint("10.1.0.1", ready=False)]}
    await h.kube.patch(ENDPOINT_SLICES, SLICE, patch, namespace=NS)


async def _second_slice(h: Harness) -> None:
    await h.kube.create(ENDPOINT_SLICES, eps_slice("follows-2", "follows", [endpoint("10.1.0.2")]))


async def _delete(h: Harness) -> None:
    await h.kube.delete(ENDPOINT_SLICES, SLICE, namespace=NS)


async def _relabel(h: Harness) -> None:
    labels = {"kubernetes.io/service-name": "plain"}
    await h.kube.patch(ENDPOINT_SLICES, SLICE, {"metadata": {"labels": labels}}, namespace=NS)


async def _same_endpoints(h: Harness) -> None:
    patch = {"metadata": {"annotations": {"touched": "yes"}}}
    await h.kube.patch(ENDPOINT_SLICES, SLICE, patch, namespace=NS)


async def _plain_service_slice(h: Harness) -> None:
    await h.kube.create(ENDPOINT_SLICES, eps_slice("plain-1", "plain", [endpoint("10.1.0.7")]))


async def _no_such_service(h: Harness) -> None:
    await h.kube.create(ENDPOINT_SLICES, eps_slice("gone-1", "gone", [endpoint("10.1.0.8")]))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(_move, [key("follows")], id="endpoint-moves-node"),
        pytest.param(_unready, [key("follows")], id="endpoint-unready"),
        pytest.param(_second_slice, [key("follows")], id="second-slice"),
        pytest.param(_delete, [key("follows")], id="slice-deleted"),
        pytest.param(_relabel, [key("follows")], id="slice-relabelled-away"),
        pytest.param(_same_endpoints, [], id="same-endpoints-no-sync"),
        pytest.param(_plain_service_slice, [], id="provider-does-not-use-them"),
        pytest.param(_no_such_service, [], id="no-such-service"),
    ],
)
async def test_a_change_of_endpoints_syncs_the_services_that_follow_them(
    harness: Harness, change: Any, expected: list[str]
) -> None:
    _, controller = await asking(harness)
    await change(harness)
    assert await queued(harness, controller) == expected


async def test_a_service_not_wanting_a_balancer_is_not_synced(harness: Harness) -> None:
    h = harness
    _, controller = await asking(h)
    await create_service(h, "cluster-ip", spec={**lb_spec(), "type": "ClusterIP"})
    await h.kube.patch(
        SERVICES, "cluster-ip", {"metadata": {"labels": {"eps": "yes"}}}, namespace=NS
    )
    await h.kube.create(ENDPOINT_SLICES, eps_slice("cip-1", "cluster-ip", [endpoint("10.1.0.3")]))
    assert await queued(h, controller) == []
