"""Nova as the emulator answers it (nova/api/openstack/compute/servers.py, views/)."""

from __future__ import annotations

from typing import Any

import pytest
from emu_api import NOVA, Api

from kccm.emulators.openstack import nova
from kccm.emulators.openstack.admin import add_server


def names(body: dict[str, Any]) -> list[str]:
    return [s["name"] for s in body["servers"]]


@pytest.fixture
def three(api: Api) -> list[dict[str, Any]]:
    return [
        add_server(api.world, {"name": "node-a"}),
        add_server(api.world, {"name": "node-b", "status": "SHUTOFF"}),
        add_server(api.world, {"name": "other-a", "flavor": "m1.large"}),
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("", ["other-a", "node-b", "node-a"], id="all-newest-first"),
        pytest.param("?name=node", ["node-b", "node-a"], id="name-is-a-regex-search"),
        pytest.param("?name=%5Enode-a%24", ["node-a"], id="anchored-regex"),
        pytest.param("?name=-a", ["other-a", "node-a"], id="substring"),
        pytest.param("?status=SHUTOFF", ["node-b"], id="status"),
        pytest.param("?status=active", ["other-a", "node-a"], id="status-any-case"),
        pytest.param("?flavor=4", ["other-a"], id="flavor"),
    ],
)
async def test_server_filters(
    api: Api, three: list[dict[str, Any]], query: str, expected: list[str]
) -> None:
    assert names(await api.ok("GET", f"{NOVA}/servers/detail{query}")) == expected
    assert names(await api.ok("GET", f"{NOVA}/servers{query}")) == expected


async def test_paging_follows_servers_links(api: Api, three: list[dict[str, Any]]) -> None:
    seen: list[str] = []
    path = f"{NOVA}/servers/detail?limit=2"
    while path:
        body = await api.ok("GET", path)
        seen += names(body)
        links = body.get("servers_links") or []
        path = links[0]["href"].removeprefix(api.world.base_url) if links else ""
    assert seen == ["other-a", "node-b", "node-a"]
    status, body = await api.call("GET", f"{NOVA}/servers/detail?marker=nope")
    assert status == 400
    assert body == {"badRequest": {"code": 400, "message": "marker [nope] not found"}}


async def test_max_limit_pages_without_a_limit(
    api: Api, three: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nova's ``[api] max_limit`` (1000) caps a listing that asks no limit; here 2."""
    monkeypatch.setattr(nova, "MAX_LIMIT", 2)
    body = await api.ok("GET", f"{NOVA}/servers/detail")
    assert names(body) == ["other-a", "node-b"]
    href = body["servers_links"][0]["href"]
    assert "limit=2" in href
    assert names(await api.ok("GET", href.removeprefix(api.world.base_url))) == ["node-a"]
    assert len((await api.ok("GET", f"{NOVA}/servers/detail?limit=5"))["servers"]) == 2


async def test_server_detail_shape(api: Api) -> None:
    server = add_server(api.world, {"name": "n1", "floating": True, "az": "zone-2"})
    body = (await api.ok("GET", f"{NOVA}/servers/{server['id']}"))["server"]
    assert body["flavor"] == {"id": "2", "links": body["flavor"]["links"]}
    assert body["OS-EXT-AZ:availability_zone"] == "zone-2"
    assert body["OS-EXT-STS:power_state"] == 1
    private = body["addresses"]["private"]
    assert [(a["addr"], a["OS-EXT-IPS:type"], a["version"]) for a in private] == [
        ("10.0.0.2", "fixed", 4),
        ("172.24.4.3", "floating", 4),
        ("fd00::2", "fixed", 6),
    ]
    assert len({a["OS-EXT-IPS-MAC:mac_addr"] for a in private}) == 1


@pytest.mark.parametrize(
    ("headers", "flavor_key"),
    [
        pytest.param({}, "id", id="no-microversion"),
        pytest.param({"X-OpenStack-Nova-API-Version": "2.46"}, "id", id="2.46"),
        pytest.param({"X-OpenStack-Nova-API-Version": "2.47"}, "original_name", id="2.47"),
        pytest.param({"OpenStack-API-Version": "compute 2.79"}, "original_name", id="2.79"),
        pytest.param({"OpenStack-API-Version": "compute latest"}, "original_name", id="latest"),
    ],
)
async def test_flavor_view_follows_the_microversion(
    api: Api, headers: dict[str, str], flavor_key: str
) -> None:
    server = add_server(api.world, {"name": "n1", "flavor": "m1.medium"})
    async with api.client.get(
        f"{NOVA}/servers/{server['id']}", headers={"X-Auth-Token": api.token, **headers}
    ) as resp:
        body = (await resp.json())["server"]
        assert resp.headers["OpenStack-API-Version"].startswith("compute 2.")
    assert flavor_key in body["flavor"]
    if flavor_key == "original_name":
        assert body["flavor"]["original_name"] == "m1.medium"
    else:
        assert body["flavor"]["id"] == "3"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/servers/nope", "Instance nope could not be found.", id="server"),
        pytest.param(
            "/servers/nope/os-interface", "Instance nope could not be found.", id="interfaces"
        ),
        pytest.param("/flavors/99", "Flavor 99 could not be found.", id="flavor"),
    ],
)
async def test_not_found_bodies(api: Api, path: str, message: str) -> None:
    status, body = await api.call("GET", NOVA + path)
    assert status == 404
    assert body == {"itemNotFound": {"code": 404, "message": message}}


async def test_flavors_and_interfaces(api: Api) -> None:
    flavors = (await api.ok("GET", f"{NOVA}/flavors/detail"))["flavors"]
    assert {f["name"]: (f["id"], f["vcpus"]) for f in flavors} == {
        "m1.small": ("2", 1),
        "m1.medium": ("3", 2),
        "m1.large": ("4", 4),
    }
    assert (await api.ok("GET", f"{NOVA}/flavors/4"))["flavor"]["ram"] == 8192
    server = add_server(api.world, {"name": "n1", "networks": ["private", "public"]})
    found = await api.ok("GET", f"{NOVA}/servers/{server['id']}/os-interface")
    attachments = found["interfaceAttachments"]
    assert {a["net_id"] for a in attachments} == {
        api.cfg["private_network_id"],
        api.cfg["public_network_id"],
    }
    assert all(a["port_state"] == "ACTIVE" for a in attachments)


async def test_versions_need_no_token(api: Api) -> None:
    status, body = await api.call("GET", f"{NOVA}/", token="")
    assert status == 200
    assert body["version"]["min_version"] == "2.1"
    status, body = await api.call("GET", "/compute/", token="")
    assert body["versions"][0]["id"] == "v2.1"
