"""Concurrent first lookups share one request: the flavor of many Nodes initialised at once
(found by bench/openstack_scale.py: 8 flavor GETs for 3 flavors over 1,000 Nodes) and Octavia's
version discovery by the service workers of a start (10 for 100 balancers)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kccm.providers.openstack.instances import OpenStackInstances
from kccm.providers.openstack.provider import OpenStackCloud

WORKERS = 8


def _at_once(fn: Callable[[], Any]) -> list[Any]:
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(lambda _: fn(), range(WORKERS)))


def _requests(emulator: Any, since: int, path: str) -> list[dict[str, Any]]:
    return [r for r in emulator.admin.requests(since) if r["path"].endswith(path)]


def test_concurrent_first_lookups_of_a_flavor_fetch_it_once(
    emulator: Any, cloud: OpenStackCloud
) -> None:
    instances = cloud.instances_v2()
    assert isinstance(instances, OpenStackInstances)
    server = emulator.admin.add_server("flavor-probe", flavor="m1.large")
    flavor = server["flavor"]["id"]
    # slow answers, so the workers' lookups overlap
    emulator.admin.fault("compute", "GET", rf"/flavors/{flavor}$", kind="latency", latency=0.2)
    before = emulator.admin.last_seq()
    try:
        assert set(_at_once(lambda: instances.flavor_name(flavor))) == {"m1.large"}
    finally:
        emulator.admin.clear_faults()
        emulator.admin.delete_server(server["id"])
    assert len(_requests(emulator, before, f"/flavors/{flavor}")) == 1


def test_concurrent_first_version_discoveries_ask_octavia_once(
    emulator: Any, make_cloud: Callable[..., OpenStackCloud]
) -> None:
    balancers = make_cloud().load_balancer()
    octavia = balancers.octavia  # type: ignore[union-attr]
    emulator.admin.fault("load-balancer", "GET", r"^/load-balancer/$", kind="latency", latency=0.2)
    before = emulator.admin.last_seq()
    try:
        assert len(set(_at_once(octavia.version))) == 1
    finally:
        emulator.admin.clear_faults()
    assert len(_requests(emulator, before, "/load-balancer/")) == 1
