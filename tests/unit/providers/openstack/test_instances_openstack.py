"""InstancesV2 against the emulator: providerID forms, lookup by name, SHUTOFF, flavor,
zone/region, the batch listing's request count, and the #3114 difference."""

from __future__ import annotations

from typing import Any

import pytest
from os_core_world import World

from kccm.cloudprovider import CloudProviderError, InstanceNotFound
from kccm.providers.openstack import OpenStackCloud
from kccm.providers.openstack import instances as instances_module
from kccm.providers.openstack.instances import (
    OpenStackInstances,
    go_quote_meta,
    instance_id_from_provider_id,
    is_valid_label_value,
    sanitize_label,
)


def node(name: str, provider_id: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"providerID": provider_id} if provider_id else {}}


def v2(cloud: OpenStackCloud) -> OpenStackInstances:
    instances = cloud.instances_v2()
    assert isinstance(instances, OpenStackInstances)
    return instances


# -- pure helpers -------------------------------------------------------------------------------

PROVIDER_IDS = [
    ("plain", "openstack:///abc", ("abc", "")),
    ("regional", "openstack://RegionOne/abc", ("abc", "RegionOne")),
    ("schemeless", "/abc", ("abc", "")),
    ("bare-region-form", "RegionOne/abc", ("abc", "RegionOne")),
]


@pytest.mark.parametrize(
    ("provider_id", "expected"), [p[1:] for p in PROVIDER_IDS], ids=[p[0] for p in PROVIDER_IDS]
)
def test_provider_id_parsing(provider_id: str, expected: tuple[str, str]) -> None:
    assert instance_id_from_provider_id(provider_id) == expected


@pytest.mark.parametrize(
    "provider_id",
    ["aws:///i-1", "openstack:///", "openstack://r/a/b"],
    ids=["scheme", "empty", "extra"],
)
def test_bad_provider_ids(provider_id: str) -> None:
    with pytest.raises(CloudProviderError, match="didn't match expected format"):
        instance_id_from_provider_id(provider_id)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("node-1", "node-1"), ("n.1", r"n\.1"), ("a+b*(c)", r"a\+b\*\(c\)"), ("x_y", "x_y")],
    ids=["dash-kept", "dot", "metas", "underscore"],
)
def test_go_quote_meta(text: str, expected: str) -> None:
    assert go_quote_meta(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("nova", True),
        ("m1.small", True),
        ("-x", False),
        ("a" * 64, False),
        ("", True),
        ("a b", False),
    ],
    ids=["plain", "dotted", "leading-dash", "too-long", "empty", "space"],
)
def test_label_values(value: str, expected: bool) -> None:
    assert is_valid_label_value(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("nova", "nova"), ("zone 1", "zone-1"), ("-az_", "az"), ("z" * 70, "z" * 63)],
    ids=["plain", "space", "trimmed", "cut"],
)
def test_sanitize_label(value: str, expected: str) -> None:
    assert sanitize_label(value) == expected


# -- against the emulator -----------------------------------------------------------------------


def test_metadata_by_name_and_by_provider_id(world: World, cloud: OpenStackCloud) -> None:
    server = world.server("meta-1", flavor="m1.medium", az="nova", floating=True)
    by_name = v2(cloud).instance_metadata(node("meta-1"))
    by_id = v2(cloud).instance_metadata(node("meta-1", f"openstack:///{server['id']}"))
    assert by_name == by_id
    assert by_name.provider_id == f"openstack:///{server['id']}"
    assert (by_name.instance_type, by_name.zone, by_name.region) == (
        "m1.medium",
        "nova",
        "RegionOne",
    )
    kinds = {(a.type, a.address) for a in by_name.node_addresses}
    fixed = [a["addr"] for a in server["addresses"]["private"] if a["OS-EXT-IPS:type"] == "fixed"]
    floating = [
        a["addr"] for a in server["addresses"]["private"] if a["OS-EXT-IPS:type"] == "floating"
    ]
    assert {("InternalIP", ip) for ip in fixed} <= kinds
    assert {("ExternalIP", ip) for ip in floating} == {k for k in kinds if k[0] == "ExternalIP"}


EXISTS = [
    ("by-provider-id", True, False, True),
    ("by-name", False, False, True),
    ("deleted-by-provider-id", True, True, False),
    ("deleted-without-provider-id-issue-3114", False, True, False),
]


@pytest.mark.parametrize(
    ("with_id", "deleted", "expected"), [e[1:] for e in EXISTS], ids=[e[0] for e in EXISTS]
)
def test_instance_exists(
    world: World, cloud: OpenStackCloud, with_id: bool, deleted: bool, expected: bool
) -> None:
    server = world.server("exists-1")
    if deleted:
        world.delete(server["id"])
    subject = node("exists-1", f"openstack:///{server['id']}" if with_id else "")
    assert v2(cloud).instance_exists(subject) is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [("ACTIVE", False), ("SHUTOFF", True), ("PAUSED", False), ("SUSPENDED", False)],
)
def test_instance_shutdown_is_shutoff(
    world: World, cloud: OpenStackCloud, status: str, expected: bool
) -> None:
    server = world.server("power-1")
    world.admin.set_server_status(server["id"], status)
    assert v2(cloud).instance_shutdown(node("power-1", f"openstack:///{server['id']}")) is expected


def test_shutdown_of_a_missing_server_is_instance_not_found(cloud: OpenStackCloud) -> None:
    with pytest.raises(InstanceNotFound):
        v2(cloud).instance_shutdown(node("nowhere-1"))


def test_two_servers_with_the_name_are_an_error(world: World, cloud: OpenStackCloud) -> None:
    world.server("twin-1")
    world.server("twin-1")
    with pytest.raises(CloudProviderError, match="multiple servers"):
        v2(cloud).instance_exists(node("twin-1"))


def test_the_name_is_an_anchored_quoted_regex(world: World, cloud: OpenStackCloud) -> None:
    world.server("dotx1")
    world.server("dot.10")
    assert v2(cloud).instance_exists(node("dot.1")) is False


def test_a_foreign_region_in_the_provider_id_is_an_error(
    world: World, cloud: OpenStackCloud
) -> None:
    server = world.server("region-1")
    with pytest.raises(CloudProviderError, match="didn't match supported region"):
        v2(cloud).instance_exists(node("region-1", f"openstack://Elsewhere/{server['id']}"))


def test_regional_provider_ids(world: World, emulator: Any, cloud: OpenStackCloud) -> None:
    server = world.server("regional-1")
    regional = OpenStackCloud(cloud.config, cloud.api, environ={"OS_CCM_REGIONAL": "true"})
    meta = v2(regional).instance_metadata(node("regional-1"))
    assert meta.provider_id == f"openstack://RegionOne/{server['id']}"
    assert v2(regional).instance_exists(node("regional-1", meta.provider_id))


def test_flavor_names_are_cached(world: World, emulator: Any, cloud: OpenStackCloud) -> None:
    world.server("flavor-1", flavor="m1.large")
    world.server("flavor-2", flavor="m1.large")
    since = world.admin.last_seq()
    assert v2(cloud).instance_metadata(node("flavor-1")).instance_type == "m1.large"
    assert v2(cloud).instance_metadata(node("flavor-2")).instance_type == "m1.large"
    flavor_gets = [r for r in world.admin.requests(since) if "/flavors/" in r["path"]]
    assert len(flavor_gets) == 1


# -- the refresh tick ---------------------------------------------------------------------------


def _batch_requests(
    world: World, cloud: OpenStackCloud, nodes: list[Any], flavor_id: str
) -> tuple[Any, list[Any]]:
    v2(cloud).flavor_name(flavor_id)  # warm the cache: count only the listing calls
    since = world.admin.last_seq()
    found = v2(cloud).list_instance_metadata(nodes)
    return found, [r for r in world.admin.requests(since) if r["service"] != "identity"]


@pytest.mark.parametrize("ports_by_device_max", [40, 1], ids=["device-id-filter", "project-ports"])
def test_list_instance_metadata_is_one_server_and_one_port_listing(
    world: World,
    cloud: OpenStackCloud,
    monkeypatch: pytest.MonkeyPatch,
    ports_by_device_max: int,
) -> None:
    monkeypatch.setattr(instances_module, "PORTS_BY_DEVICE_MAX", ports_by_device_max)
    servers = [world.server(f"batch-{i}", flavor="m1.small") for i in range(3)]
    gone = world.server("batch-gone")
    world.delete(gone["id"])
    nodes = [
        node("batch-0", f"openstack:///{servers[0]['id']}"),
        node("batch-1"),
        node("renamed-node", f"openstack:///{servers[2]['id']}"),
        node("batch-gone", f"openstack:///{gone['id']}"),
        node("never-was"),
    ]
    found, calls = _batch_requests(world, cloud, nodes, servers[0]["flavor"]["id"])
    assert sorted(found) == ["batch-0", "batch-1", "renamed-node"]
    for name in found:
        assert found[name] == v2(cloud).instance_metadata(
            next(n for n in nodes if n["metadata"]["name"] == name)
        )
    assert [(c["method"], c["path"].rsplit("/", 2)[-2:]) for c in calls] == [
        ("GET", ["servers", "detail"]),
        ("GET", ["v2.0", "ports"]),
        # the two Nodes the listing left out, read on their own as OCCM reads every Node
        ("GET", ["servers", gone["id"]]),
        ("GET", ["servers", "detail"]),
    ]


def test_a_node_the_project_listing_leaves_out_is_read_on_its_own(
    world: World, cloud: OpenStackCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nova lists the token's project's servers only: a Node whose server is in another
    project (admin credentials) is read by its providerID, as OCCM reads every Node."""
    here = world.server("project-here")
    elsewhere = world.server("project-elsewhere")
    original = cloud.api.paged

    def project_only(service: str, path: str, key: str, params: Any = None, **kw: Any) -> Any:
        for item in original(service, path, key, params, **kw):
            if not (key == "servers" and item["id"] == elsewhere["id"]):
                yield item

    monkeypatch.setattr(cloud.api, "paged", project_only)
    nodes = [
        node("project-here", f"openstack:///{here['id']}"),
        node("project-elsewhere", f"openstack:///{elsewhere['id']}"),
    ]
    found = v2(cloud).list_instance_metadata(nodes)
    assert sorted(found) == ["project-elsewhere", "project-here"]
    assert found["project-elsewhere"] == v2(cloud).instance_metadata(nodes[1])
    assert found["project-elsewhere"].node_addresses


def test_list_instance_metadata_follows_server_pages(
    world: World, cloud: OpenStackCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        world.server(f"paged-{i}")
    original = cloud.api.paged

    def one_per_page(service: str, path: str, key: str, params: Any = None, **kw: Any) -> Any:
        if key == "servers" and not params:
            params = {"limit": 1}
        return original(service, path, key, params, **kw)

    monkeypatch.setattr(cloud.api, "paged", one_per_page)
    found = v2(cloud).list_instance_metadata([node(f"paged-{i}") for i in range(3)])
    assert sorted(found) == ["paged-0", "paged-1", "paged-2"]
