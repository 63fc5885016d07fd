"""The fake provider's read-compare-write and its ledger (issue 16): what each ensure,
update and delete reads and changes; drift and a changed cloud config are repaired; the
ipMode survives a restart through the state file."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from kccm.cloudprovider import (
    CloudConfigError,
    LoadBalancerIPMode,
    PortStatus,
    default_load_balancer_name,
)
from kccm.providers.fake import FakeCloud, new_fake_cloud
from kccm.testing.conformance import make_node, make_service

NODES = [make_node("b"), make_node("a")]
SERVICE = make_service("web", ports=(80, 443))
NAME = default_load_balancer_name(SERVICE)


def counts(cloud: FakeCloud) -> tuple[dict[str, int], dict[str, int]]:
    snapshot = cloud.cloud_api_calls().snapshot()
    return dict(snapshot.reads), dict(snapshot.writes)


async def test_create_then_nothing_to_change() -> None:
    cloud = FakeCloud()
    await cloud.ensure_load_balancer("k", SERVICE, NODES)
    assert counts(cloud) == ({"describe_load_balancer": 1}, {"create_load_balancer": 1})
    assert cloud.balancers[NAME].hosts == ("a", "b"), "hosts kept sorted"
    await cloud.ensure_load_balancer("k", SERVICE, list(reversed(NODES)))
    await cloud.update_load_balancer("k", SERVICE, NODES)
    assert counts(cloud) == ({"describe_load_balancer": 3}, {"create_load_balancer": 1})


def _no_ports(cloud: FakeCloud) -> None:
    cloud.alter_balancer(NAME, ports=(PortStatus(port=8080, protocol="TCP"),))


def _no_hosts(cloud: FakeCloud) -> None:
    cloud.alter_balancer(NAME, hosts=())


def _gone(cloud: FakeCloud) -> None:
    cloud.remove_balancer(NAME)


def _proxy_mode(cloud: FakeCloud) -> None:
    cloud.load_balancer_ip_mode = LoadBalancerIPMode.PROXY


@pytest.mark.parametrize(
    ("drift", "writes"),
    [
        pytest.param(_no_ports, {"set_load_balancer_ports": 1}, id="ports"),
        pytest.param(_no_hosts, {"set_load_balancer_hosts": 1}, id="hosts"),
        pytest.param(_gone, {"create_load_balancer": 1}, id="deleted"),
        pytest.param(_proxy_mode, {"set_load_balancer_ip_mode": 1}, id="cloud-config"),
    ],
)
async def test_the_next_ensure_repairs_drift(
    drift: Callable[[FakeCloud], None], writes: dict[str, int]
) -> None:
    cloud = FakeCloud()
    first = await cloud.ensure_load_balancer("k", SERVICE, NODES)
    cloud.cloud_api_calls().reset()
    drift(cloud)
    assert counts(cloud) == ({}, {}), "changes behind the provider's back are not its requests"
    status = await cloud.ensure_load_balancer("k", SERVICE, NODES)
    assert counts(cloud)[1] == writes
    balancer = cloud.balancers[NAME]
    assert [p.port for p in balancer.ports] == [80, 443]
    assert balancer.hosts == ("a", "b")
    assert balancer.ip_mode is cloud.load_balancer_ip_mode
    assert status.ingress[0].ip_mode is cloud.load_balancer_ip_mode
    if drift is not _gone:
        assert status.ingress[0].ip == first.ingress[0].ip


async def test_delete_reads_then_deletes_once() -> None:
    cloud = FakeCloud()
    await cloud.ensure_load_balancer_deleted("k", SERVICE)
    await cloud.ensure_load_balancer("k", SERVICE, NODES)
    await cloud.ensure_load_balancer_deleted("k", SERVICE)
    await cloud.ensure_load_balancer_deleted("k", SERVICE)
    reads, writes = counts(cloud)
    assert writes == {"create_load_balancer": 1, "delete_load_balancer": 1}
    assert reads == {"describe_load_balancer": 4}


async def test_other_calls_are_reads_and_routes_are_writes() -> None:
    cloud = FakeCloud()
    await cloud.list_instance_metadata(NODES)
    await cloud.get_load_balancer("k", SERVICE)
    await cloud.list_routes("k")
    assert counts(cloud) == (
        {"list_instance_metadata": 1, "get_load_balancer": 1, "list_routes": 1},
        {},
    )


async def test_ip_mode_and_drift_survive_a_restart_through_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "lbs.jsonl"
    config = f"[Global]\nstate-file = {state}\nload-balancer-ip-mode = Proxy\n"
    first = new_fake_cloud(io.StringIO(config))
    await first.ensure_load_balancer("k", SERVICE, NODES)
    first.alter_balancer(NAME, hosts=("a",))
    again = new_fake_cloud(io.StringIO(config))
    balancer = again.balancers[NAME]
    assert (balancer.ip_mode, balancer.hosts) == (LoadBalancerIPMode.PROXY, ("a",))
    await again.ensure_load_balancer("k", SERVICE, NODES)
    assert counts(again)[1] == {"set_load_balancer_hosts": 1}


def test_a_bad_ip_mode_is_a_config_error() -> None:
    with pytest.raises(CloudConfigError, match="load-balancer-ip-mode: 'proxy' is not one of"):
        new_fake_cloud(io.StringIO("[Global]\nload-balancer-ip-mode = proxy\n"))
