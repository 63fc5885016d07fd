"""The fake provider: state, call log, injected errors and latency, capability switches."""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path

import pytest

from kccm.cloudprovider import (
    ForeignProviderID,
    InstanceMetadata,
    InstanceNotFound,
    Node,
    NodeAddress,
    NotImplementedByProvider,
    RetryError,
    Route,
    Zone,
)
from kccm.providers.fake import (
    FakeCloud,
    FakeCloudError,
    FakeInstance,
    new_fake_cloud,
)
from kccm.testing.conformance import make_node, make_service
from kccm.util.clock import FakeClock

ADDR = NodeAddress("InternalIP", "10.0.0.5")


def cloud_with_node() -> FakeCloud:
    cloud = FakeCloud()
    cloud.add_instance(
        FakeInstance(
            name="n1",
            instance_id="i-1",
            addresses=(ADDR,),
            zone="z1",
            region="r1",
            additional_labels={"team": "a"},
        )
    )
    return cloud


async def test_metadata_describes_the_instance() -> None:
    meta = await cloud_with_node().instance_metadata(make_node("n1"))
    assert meta == InstanceMetadata(
        provider_id="fake://i-1",
        instance_type="fake.small",
        node_addresses=(ADDR,),
        zone="z1",
        region="r1",
        additional_labels={"team": "a"},
    )


@pytest.mark.parametrize(
    ("node", "exists"),
    [
        pytest.param(make_node("n1"), True, id="by-name-without-provider-id"),
        pytest.param(make_node("other", provider_id="fake://i-1"), True, id="provider-id-wins"),
        pytest.param(make_node("n1", provider_id="fake://i-9"), False, id="unknown-provider-id"),
        pytest.param(make_node("ghost"), False, id="unknown-name"),
    ],
)
async def test_instance_exists_looks_at_the_provider_id_first(node: Node, exists: bool) -> None:
    assert await cloud_with_node().instance_exists(node) is exists


@pytest.mark.parametrize(
    "provider_id",
    [
        pytest.param("aws:///us-east-1a/i-1", id="aws"),
        pytest.param("gce://p/z/i-1", id="gce"),
        pytest.param("i-1", id="no-scheme"),
    ],
)
async def test_another_providers_id_is_an_error_not_a_missing_instance(provider_id: str) -> None:
    cloud = cloud_with_node()
    node = make_node("n1", provider_id=provider_id)
    calls = [
        cloud.instance_exists(node),
        cloud.instance_shutdown(node),
        cloud.instance_metadata(node),
        cloud.instance_exists_by_provider_id(provider_id),
        cloud.instance_shutdown_by_provider_id(provider_id),
        cloud.get_zone_by_provider_id(provider_id),
    ]
    for pending in calls:
        with pytest.raises(ForeignProviderID, match=f"providerID '{provider_id}' is not a fake"):
            await pending


async def test_a_stopped_instance_exists_and_is_shut_down() -> None:
    cloud = cloud_with_node()
    cloud.set_shutdown("n1")
    node = make_node("n1", provider_id="fake://i-1")
    assert await cloud.instance_exists(node) is True
    assert await cloud.instance_shutdown(node) is True
    assert await cloud.instance_shutdown_by_provider_id("fake://i-1") is True
    assert await cloud.instance_id("n1") == "i-1"  # never InstanceNotFound for stopped ones


async def test_removed_instance_is_gone() -> None:
    cloud = cloud_with_node()
    cloud.remove_instance("n1")
    assert await cloud.instance_exists_by_provider_id("fake://i-1") is False
    with pytest.raises(InstanceNotFound):
        await cloud.node_addresses("n1")


async def test_legacy_and_zone_lookups() -> None:
    cloud = cloud_with_node()
    assert await cloud.node_addresses_by_provider_id("fake://i-1") == (ADDR,)
    assert await cloud.instance_type_by_provider_id("fake://i-1") == "fake.small"
    assert await cloud.get_zone_by_node_name("n1") == Zone("z1", "r1")
    assert await cloud.get_zone_by_provider_id("fake://i-1") == Zone("z1", "r1")
    assert await cloud.current_node_name("host") == "host"
    with pytest.raises(NotImplementedByProvider):
        await cloud.add_ssh_key_to_all_instances("root", b"ssh-ed25519 AAAA")
    with pytest.raises(FakeCloudError, match="provider ID is empty"):
        await cloud.instance_shutdown_by_provider_id("")


async def test_balancers_keep_their_address_and_follow_updates() -> None:
    cloud, svc = FakeCloud(), make_service("web", ports=(80, 443))
    first = await cloud.ensure_load_balancer("c", svc, [make_node("a")])
    other = await cloud.ensure_load_balancer("c", make_service("db"), [])
    await cloud.update_load_balancer("c", svc, [make_node("b"), make_node("c")])
    again = await cloud.ensure_load_balancer("c", svc, [make_node("b")])
    assert first.ingress[0].ip == again.ingress[0].ip == "192.0.2.1"
    assert other.ingress[0].ip == "192.0.2.2"
    assert [p.port for p in first.ingress[0].ports] == [80, 443]
    (balancer,) = [b for b in cloud.balancers.values() if b.service == "default/web"]
    assert balancer.hosts == ("b",)


async def test_update_of_a_missing_balancer_fails() -> None:
    with pytest.raises(FakeCloudError, match="does not exist"):
        await FakeCloud().update_load_balancer("c", make_service("web"), [])


async def test_routes_are_named_and_duplicates_and_misses_fail() -> None:
    cloud, route = FakeCloud(), Route(target_node="n1", destination_cidr="10.244.1.0/24")
    await cloud.create_route("c", "uid-1", route)
    with pytest.raises(FakeCloudError, match="already exists"):
        await cloud.create_route("c", "uid-1", route)
    assert [r.name for r in await cloud.list_routes("c")] == ["c-uid-1-10.244.1.0/24"]
    assert await cloud.list_routes("other-cluster") == []
    await cloud.delete_route("c", route)
    with pytest.raises(FakeCloudError, match=r"no route to 10\.244\.1\.0/24 via n1"):
        await cloud.delete_route("c", route)


async def test_every_call_is_recorded_in_a_bounded_log() -> None:
    cloud = FakeCloud(call_log_size=3)
    for name in ("a", "b", "c", "d"):
        await cloud.current_node_name(name)
    await cloud.get_zone()
    assert cloud.calls == ["current_node_name"] * 2 + ["get_zone"]
    assert [c.args for c in cloud.call_log[:2]] == [("c",), ("d",)]
    cloud.clear_calls()
    assert cloud.calls == []


async def test_injected_errors_fire_the_requested_number_of_times() -> None:
    cloud = cloud_with_node()
    cloud.fail("instance_id", RetryError("slow down", 3), times=2)
    for _ in range(2):
        with pytest.raises(RetryError):
            await cloud.instance_id("n1")
    assert await cloud.instance_id("n1") == "i-1"
    cloud.fail("get_zone", OSError("down"))
    for _ in range(3):
        with pytest.raises(OSError, match="down"):
            await cloud.get_zone()
    cloud.clear_failures()
    assert await cloud.get_zone() == cloud.zone


async def test_injected_latency_runs_on_the_given_clock() -> None:
    clock = FakeClock()
    cloud = FakeCloud(clock=clock)
    cloud.set_latency("get_zone", 5.0)
    call = asyncio.create_task(cloud.get_zone())
    await clock.advance(4.9)
    assert not call.done()
    await clock.advance(0.2)
    assert call.done()


@pytest.mark.parametrize(
    ("switch", "getter"),
    [
        pytest.param("enable_load_balancers", "load_balancer", id="load-balancers"),
        pytest.param("enable_instances", "instances", id="instances"),
        pytest.param("enable_instances_v2", "instances_v2", id="instances-v2"),
        pytest.param("enable_zones", "zones", id="zones"),
        pytest.param("enable_clusters", "clusters", id="clusters"),
        pytest.param("enable_routes", "routes", id="routes"),
    ],
)
def test_capabilities_can_be_switched_off(switch: str, getter: str) -> None:
    switches: dict[str, bool] = {switch: False}
    assert getattr(FakeCloud(), getter)() is not None
    assert getattr(FakeCloud(**switches), getter)() is None  # type: ignore[arg-type]


async def test_initialize_clusters_and_volume_labels() -> None:
    cloud = new_fake_cloud(None)
    await cloud.initialize(None, asyncio.Event())
    assert cloud.initialized
    assert cloud.has_cluster_id()
    assert await cloud.list_clusters() == ["kubernetes"]
    assert await cloud.master("kubernetes") == "https://127.0.0.1:6443"
    cloud.volume_labels["pv1"] = {"topology.kubernetes.io/zone": "z1"}
    labels = await cloud.get_labels_for_volume({"metadata": {"name": "pv1"}})
    assert labels == {"topology.kubernetes.io/zone": "z1"}


def test_state_is_safe_under_concurrent_threads() -> None:
    cloud = FakeCloud()

    def churn(worker: int) -> None:
        for i in range(200):
            cloud.add_instance(FakeInstance(name=f"w{worker}-{i}"))
            asyncio.run(cloud.instance_exists(make_node(f"w{worker}-{i}")))

    threads = [threading.Thread(target=churn, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cloud.instances_by_name) == 800
    assert cloud.calls.count("instance_exists") == 800


async def test_balancers_survive_a_restart_through_the_state_file(tmp_path: Path) -> None:
    journal = tmp_path / "fake-lbs.jsonl"
    before = FakeCloud()
    before.persist_balancers(journal)
    web, db = make_service("web", ports=(80,)), make_service("db")
    await before.ensure_load_balancer("c", web, [make_node("a")])
    await before.ensure_load_balancer("c", db, [])
    await before.update_load_balancer("c", web, [make_node("b")])
    await before.ensure_load_balancer_deleted("c", db)
    after = FakeCloud()
    after.persist_balancers(journal)
    assert after.balancers == before.balancers
    status, exists = await after.get_load_balancer("c", web)
    assert exists
    assert status is not None
    assert status.ingress[0].ip == "192.0.2.1"
    fresh = await after.ensure_load_balancer("c", make_service("cache"), [])
    assert fresh.ingress[0].ip not in {b.ip for b in before.balancers.values()}


def test_the_state_file_is_a_cloud_config_key(tmp_path: Path) -> None:
    journal = tmp_path / "lbs.jsonl"
    cloud = new_fake_cloud(io.StringIO(f"[Global]\nstate-file = {journal}\n"))
    asyncio.run(cloud.ensure_load_balancer("c", make_service("web"), []))
    assert journal.read_text().count('{"balancer":') == 1


async def test_the_journal_writes_a_host_list_once_and_replays_it_shared(tmp_path: Path) -> None:
    journal = tmp_path / "lbs.jsonl"
    cloud = FakeCloud()
    cloud.persist_balancers(journal)
    nodes = tuple(make_node(f"n{i}") for i in range(50))
    services = {name: make_service(name) for name in ("a", "b", "c")}
    for service in services.values():
        await cloud.ensure_load_balancer("c", service, nodes)
    await cloud.update_load_balancer("c", services["a"], nodes[:5])
    await cloud.ensure_load_balancer_deleted("c", services["b"])
    text = journal.read_text()
    assert text.count('"hosts_list"') == 2  # the 50 names once, the 5 names once
    replayed = FakeCloud()
    replayed.persist_balancers(journal)
    assert replayed.balancers == cloud.balancers
    hosts = {b.service: b.hosts for b in replayed.balancers.values()}
    assert hosts["default/a"] == tuple(sorted(f"n{i}" for i in range(5)))
    assert len(hosts["default/c"]) == 50
    await replayed.ensure_load_balancer("c", make_service("d"), nodes)
    assert journal.read_text().count('"hosts_list"') == 3  # refs go on after the replayed ones
    again = FakeCloud()
    again.persist_balancers(journal)
    assert again.balancers == replayed.balancers


def test_a_journal_with_inline_host_lists_still_replays(tmp_path: Path) -> None:
    journal = tmp_path / "lbs.jsonl"
    journal.write_text(
        '{"balancer":{"name":"x","service":"default/x","ip":"192.0.2.7","ports":[[80,"TCP"]],'
        '"hosts":["n2","n1"],"ip_mode":"VIP"}}\n'
    )
    cloud = FakeCloud()
    cloud.persist_balancers(journal)
    assert cloud.balancers["x"].hosts == ("n1", "n2")


async def test_a_node_list_changed_between_calls_is_read_again() -> None:
    cloud = FakeCloud()
    nodes, service = [make_node("n1"), make_node("n2")], make_service("a")
    await cloud.ensure_load_balancer("c", service, nodes)
    nodes.append(make_node("n3"))
    await cloud.ensure_load_balancer("c", service, nodes)
    assert next(iter(cloud.balancers.values())).hosts == ("n1", "n2", "n3")


async def test_provider_id_lookup_follows_replaced_and_removed_instances() -> None:
    cloud = cloud_with_node()
    cloud.add_instance(FakeInstance(name="n1", instance_id="i-2"))
    assert not await cloud.instance_exists_by_provider_id("fake://i-1")
    assert await cloud.instance_exists_by_provider_id("fake://i-2")
    cloud.remove_instance("n1")
    assert not await cloud.instance_exists_by_provider_id("fake://i-2")


async def test_balancers_over_the_same_nodes_share_one_host_list() -> None:
    cloud = FakeCloud()
    nodes = [make_node(f"n{i}") for i in range(100)]
    services = [make_service(name) for name in ("a", "b", "c")]
    for service in services:
        await cloud.ensure_load_balancer("c", service, list(nodes))
    first, *others = cloud.balancers.values()
    assert all(b.hosts is first.hosts for b in others)
    await cloud.update_load_balancer("c", services[0], nodes[:10])
    assert [len(b.hosts) for b in cloud.balancers.values()] == [10, 100, 100]
