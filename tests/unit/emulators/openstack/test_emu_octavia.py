"""Octavia as the emulator answers it (octavia/api/v2/controllers/*.py, octavia/db/prepare.py,
octavia/common/exceptions.py)."""

from __future__ import annotations

from typing import Any

import pytest
from emu_api import LB, NET, Api


def octavia_error(message: str) -> dict[str, Any]:
    return {"faultcode": "Client", "faultstring": message, "debuginfo": None}


def full_spec(api: Api, *, monitor: bool = True, members: int = 2) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": "pool_1",
        "protocol": "TCP",
        "lb_algorithm": "ROUND_ROBIN",
        "members": [
            {
                "address": f"10.0.0.{10 + n}",
                "protocol_port": 30080,
                "subnet_id": api.cfg["private_subnet_id"],
                "name": f"node-{n}",
            }
            for n in range(members)
        ],
    }
    if monitor:
        pool["healthmonitor"] = {"type": "TCP", "delay": 5, "timeout": 3, "max_retries": 1}
    return {
        "name": "kube_service_c_ns_svc",
        "vip_subnet_id": api.cfg["private_subnet_id"],
        "tags": ["kube_service_c_ns_svc"],
        "listeners": [
            {
                "name": "listener_0",
                "protocol": "TCP",
                "protocol_port": 80,
                "allowed_cidrs": ["10.0.0.0/8"],
                "default_pool": pool,
            }
        ],
    }


async def create(api: Api, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    status, body = await api.call(
        "POST", f"{LB}/loadbalancers", {"loadbalancer": spec or full_spec(api)}
    )
    assert status == 201, body
    return dict(body["loadbalancer"])


async def get(api: Api, kind: str, ident: str) -> dict[str, Any]:
    key = {
        "loadbalancers": "loadbalancer",
        "listeners": "listener",
        "pools": "pool",
        "healthmonitors": "healthmonitor",
    }[kind]
    return dict((await api.ok("GET", f"{LB}/{kind}/{ident}"))[key])


async def test_version_discovery(api: Api) -> None:
    status, body = await api.call("GET", "/load-balancer/", token="")
    assert status == 200
    ids = [v["id"] for v in body["versions"]]
    assert ids[0] == "v2.0"
    assert "v2.12" in ids
    assert body["versions"][-1] == {**body["versions"][-1], "id": "v2.30", "status": "CURRENT"}
    assert body["versions"][0]["links"][0]["href"] == f"{api.world.base_url}/load-balancer/v2"


async def test_fully_populated_create_then_active(api: Api) -> None:
    lb = await create(api)
    assert (lb["provisioning_status"], lb["operating_status"]) == ("PENDING_CREATE", "OFFLINE")
    assert lb["provider"] == "amphora"
    listener, pool = lb["listeners"][0], lb["pools"][0]
    assert "loadbalancers" not in listener
    assert listener["default_pool_id"] == pool["id"]
    assert listener["allowed_cidrs"] == ["10.0.0.0/8"]
    # NO_MONITOR though the monitor comes in the same request: what octavia 19 answers
    # (tests/integration/openstack/test_emulator_vs_octavia.py, fully-populated-create).
    assert [m["operating_status"] for m in pool["members"]] == ["NO_MONITOR", "NO_MONITOR"]
    assert pool["healthmonitor"]["type"] == "TCP"
    port = (await api.ok("GET", f"{NET}/ports/{lb['vip_port_id']}"))["port"]
    assert (port["device_owner"], port["name"]) == ("Octavia", f"octavia-lb-{lb['id']}")
    assert port["fixed_ips"][0]["ip_address"] == lb["vip_address"]
    assert api.settle() == [lb["id"]]
    found = await get(api, "loadbalancers", lb["id"])
    assert (found["provisioning_status"], found["operating_status"]) == ("ACTIVE", "ONLINE")
    assert found["listeners"] == [{"id": listener["id"]}]
    shown_pool = await get(api, "pools", pool["id"])
    assert shown_pool["healthmonitor_id"] == pool["healthmonitor"]["id"]
    assert shown_pool["loadbalancers"] == [{"id": lb["id"]}]
    assert shown_pool["listeners"] == [{"id": listener["id"]}]
    members = await api.ok("GET", f"{LB}/pools/{pool['id']}/members")
    assert {m["operating_status"] for m in members["members"]} == {"ONLINE"}
    assert members["members_links"] == []


async def test_members_without_monitor_are_no_monitor(api: Api) -> None:
    lb = await create(api, full_spec(api, monitor=False))
    assert {m["operating_status"] for m in lb["pools"][0]["members"]} == {"NO_MONITOR"}
    api.settle()
    members = await api.ok("GET", f"{LB}/pools/{lb['pools'][0]['id']}/members")
    assert {m["operating_status"] for m in members["members"]} == {"NO_MONITOR"}


def _conflicts(lb: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str]]:
    lb_id, pool_id = lb["id"], lb["pools"][0]["id"]
    immutable = f"Load Balancer {lb_id} is immutable and cannot be updated."
    pool_immutable = f"Pool {pool_id} is immutable and cannot be updated."
    return [
        (
            "PUT",
            f"/loadbalancers/{lb_id}",
            {"loadbalancer": {"description": "x"}},
            f"Invalid state PENDING_CREATE of loadbalancer resource {lb_id}",
        ),
        (
            "POST",
            "/listeners",
            {"listener": {"loadbalancer_id": lb_id, "protocol": "TCP", "protocol_port": 81}},
            immutable,
        ),
        ("PUT", f"/listeners/{lb['listeners'][0]['id']}", {"listener": {"name": "x"}}, immutable),
        (
            "POST",
            "/pools",
            {"pool": {"loadbalancer_id": lb_id, "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}},
            immutable,
        ),
        (
            "POST",
            f"/pools/{pool_id}/members",
            {"member": {"address": "10.0.0.99", "protocol_port": 1}},
            pool_immutable,
        ),
        ("PUT", f"/pools/{pool_id}/members", {"members": []}, pool_immutable),
        ("DELETE", f"/healthmonitors/{lb['pools'][0]['healthmonitor']['id']}", {}, pool_immutable),
    ]


async def test_changes_while_pending_are_409_with_octavias_texts(api: Api) -> None:
    lb = await create(api)
    for method, path, body, message in _conflicts(lb):
        status, found = await api.call(method, LB + path, body or None)
        assert (status, found) == (409, octavia_error(message)), (method, path)
    status, found = await api.call("DELETE", f"{LB}/loadbalancers/{lb['id']}?cascade=true")
    assert (status, found["faultstring"]) == (
        409,
        f"Invalid state PENDING_CREATE of loadbalancer resource {lb['id']}",
    )
    api.settle()
    status, _ = await api.call(
        "PUT", f"{LB}/listeners/{lb['listeners'][0]['id']}", {"listener": {"allowed_cidrs": None}}
    )
    assert status == 200
    found = await get(api, "listeners", lb["listeners"][0]["id"])
    assert (found["provisioning_status"], found["allowed_cidrs"]) == ("PENDING_UPDATE", None)
    assert (await get(api, "loadbalancers", lb["id"]))["provisioning_status"] == "PENDING_UPDATE"


def member(n: int, **extra: Any) -> dict[str, Any]:
    return {"address": f"10.0.0.{10 + n}", "protocol_port": 30080, **extra}


@pytest.mark.parametrize(
    ("old", "wanted", "query", "statuses"),
    [
        pytest.param(0, [], "", None, id="noop-nothing-old-nothing-asked"),
        pytest.param(2, [member(0), member(1)], "", {"PENDING_UPDATE": 2}, id="same-is-update"),
        pytest.param(
            2,
            [member(1), member(2)],
            "",
            {"PENDING_DELETE": 1, "PENDING_UPDATE": 1, "PENDING_CREATE": 1},
            id="one-in-one-out",
        ),
        pytest.param(
            2,
            [member(2)],
            "?additive_only=true",
            {"ACTIVE": 2, "PENDING_CREATE": 1},
            id="additive-keeps-others",
        ),
        pytest.param(2, [], "", {"PENDING_DELETE": 2}, id="empty-deletes-all"),
    ],
)
async def test_batch_member_update(
    api: Api, old: int, wanted: list[dict[str, Any]], query: str, statuses: dict[str, int] | None
) -> None:
    lb = await create(api, full_spec(api, members=old))
    pool_id = lb["pools"][0]["id"]
    api.settle()
    status, body = await api.call(
        "PUT", f"{LB}/pools/{pool_id}/members{query}", {"members": wanted}
    )
    assert (status, body) == (202, None)
    found = (await api.ok("GET", f"{LB}/pools/{pool_id}/members"))["members"]
    lb_now = await get(api, "loadbalancers", lb["id"])
    if statuses is None:
        assert lb_now["provisioning_status"] == "ACTIVE"
        assert api.world.timers == {}
        return
    counts: dict[str, int] = {}
    for m in found:
        counts[m["provisioning_status"]] = counts.get(m["provisioning_status"], 0) + 1
    assert counts == statuses
    assert lb_now["provisioning_status"] == "PENDING_UPDATE"
    assert (await get(api, "pools", pool_id))["provisioning_status"] == "PENDING_UPDATE"
    assert (await get(api, "listeners", lb["listeners"][0]["id"]))[
        "provisioning_status"
    ] == "PENDING_UPDATE"
    api.settle()
    found = (await api.ok("GET", f"{LB}/pools/{pool_id}/members"))["members"]
    assert len(found) == sum(n for s, n in statuses.items() if s != "PENDING_DELETE")


async def test_batch_update_refuses_the_same_member_twice(api: Api) -> None:
    lb = await create(api)
    api.settle()
    status, body = await api.call(
        "PUT", f"{LB}/pools/{lb['pools'][0]['id']}/members", {"members": [member(0), member(0)]}
    )
    assert (status, body["faultstring"]) == (
        400,
        "Validation failure: Member must be updated only once in the same request.",
    )


async def test_cascade_delete_takes_the_tree_and_the_vip_port(api: Api) -> None:
    lb = await create(api)
    api.settle()
    status, body = await api.call("DELETE", f"{LB}/loadbalancers/{lb['id']}")
    assert (status, body) == (
        400,
        octavia_error(
            f"Validation failure: Cannot delete Load Balancer {lb['id']} - it has children"
        ),
    )
    assert (await api.call("DELETE", f"{LB}/loadbalancers/{lb['id']}?cascade=true"))[0] == 204
    assert (await get(api, "loadbalancers", lb["id"]))["provisioning_status"] == "PENDING_DELETE"
    api.settle()
    status, body = await api.call("GET", f"{LB}/loadbalancers/{lb['id']}")
    assert (status, body) == (404, octavia_error(f"Load Balancer {lb['id']} not found."))
    assert (await api.call("GET", f"{NET}/ports/{lb['vip_port_id']}"))[0] == 404
    for kind in ("listeners", "pools", "members", "healthmonitors"):
        assert getattr(api.world, kind) == {}, kind


def _bad(api: Api, change: Any) -> dict[str, Any]:
    spec = full_spec(api)
    change(spec)
    return spec


GRAPH_ERRORS = [
    pytest.param(
        lambda s: s["listeners"][0]["default_pool"].pop("name"),
        400,
        "Validation failure: Pools must be named when creating a fully populated loadbalancer.",
        id="unnamed-pool",
    ),
    pytest.param(
        lambda s: s["listeners"][0]["default_pool"].pop("lb_algorithm"),
        400,
        "Validation failure: Pool definition for 'pool_1' missing required attribute: lb_algorithm",
        id="pool-without-algorithm",
    ),
    pytest.param(
        lambda s: s["listeners"][0].update(default_pool={"name": "ghost"}),
        400,
        "Validation failure: Pool 'ghost' was referenced but no full definition was found.",
        id="pool-reference-without-definition",
    ),
    pytest.param(
        lambda s: s["listeners"].append(dict(s["listeners"][0], default_pool=None)),
        409,
        "Another Listener on this Load Balancer is already using protocol TCP and protocol_port 80",
        id="duplicate-listener",
    ),
    pytest.param(
        lambda s: s["listeners"][0].update(protocol="UDP"),
        400,
        "Validation failure: The pool protocol 'TCP' is invalid while the listener "
        "protocol is 'UDP'.",
        id="protocol-mismatch",
    ),
    pytest.param(
        lambda s: s.pop("vip_subnet_id"),
        400,
        "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id.",
        id="no-vip",
    ),
    pytest.param(
        lambda s: s["listeners"][0].update(allowed_cidrs=["fd00::/64"]),
        400,
        "Validation failure: CIDR fd00::/64 IP version incompatible with all VIPs "
        "['10.0.0.2'] IP version.",
        id="cidr-version",
    ),
    pytest.param(
        lambda s: s.update(provider="nope"),
        400,
        "Provider 'nope' is not enabled.",
        id="unknown-provider",
    ),
    pytest.param(
        lambda s: s.update(provider="ovn"),
        501,
        "Provider 'ovn' does not support a requested option: OVN provider does not "
        "support ROUND_ROBIN algorithm",
        id="ovn-algorithm",
    ),
]


@pytest.mark.parametrize(("change", "status", "message"), GRAPH_ERRORS)
async def test_create_errors(api: Api, change: Any, status: int, message: str) -> None:
    got, body = await api.call("POST", f"{LB}/loadbalancers", {"loadbalancer": _bad(api, change)})
    assert (got, body) == (
        status,
        octavia_error(message)
        if status < 500
        else {"faultcode": "Server", "faultstring": message, "debuginfo": None},
    )
    assert api.world.loadbalancers == {}
    assert {p["device_owner"] for p in api.world.ports.values()} <= {
        "network:router_gateway",
        "network:router_interface",
    }


async def test_filters_and_links(api: Api) -> None:
    lb = await create(api)
    other = await create(api, {"name": "other", "vip_network_id": api.cfg["private_network_id"]})
    assert other["vip_subnet_id"] == api.cfg["private_subnet_id"]
    for query, expected in (
        (f"name={lb['name']}", [lb["id"]]),
        (f"vip_port_id={other['vip_port_id']}", [other["id"]]),
        (f"tags={lb['name']}", [lb["id"]]),
        ("provisioning_status=PENDING_CREATE", sorted([lb["id"], other["id"]])),
    ):
        body = await api.ok("GET", f"{LB}/loadbalancers?{query}")
        assert sorted(x["id"] for x in body["loadbalancers"]) == expected, query
        assert body["loadbalancers_links"] == []
    body = await api.ok("GET", f"{LB}/listeners?loadbalancer_id={other['id']}")
    assert body == {"listeners": [], "listeners_links": []}
    body = await api.ok("GET", f"{LB}/pools?loadbalancer_id={lb['id']}")
    assert [p["id"] for p in body["pools"]] == [lb["pools"][0]["id"]]
    api.world.loadbalancers[lb["id"]]["created_at"] = "2000-01-01T00:00:00"
    api.world.loadbalancers[other["id"]]["created_at"] = "2000-01-01T00:00:00"
    body = await api.ok("GET", f"{LB}/loadbalancers")
    assert [x["id"] for x in body["loadbalancers"]] == sorted([lb["id"], other["id"]])


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param(f"/{kind}/nope", f"{name} nope not found.", id=kind)
        for kind, name in (
            ("loadbalancers", "Load Balancer"),
            ("listeners", "Listener"),
            ("pools", "Pool"),
            ("healthmonitors", "Health Monitor"),
        )
    ],
)
async def test_not_found_texts(api: Api, path: str, message: str) -> None:
    for prefix in (LB, "/load-balancer/v2.0/lbaas"):
        assert await api.call("GET", prefix + path) == (404, octavia_error(message))


async def test_single_object_calls_after_active(api: Api) -> None:
    lb = await create(api, {"name": "bare", "vip_subnet_id": api.cfg["private_subnet_id"]})
    api.settle()
    listener = (
        await api.ok(
            "POST",
            f"{LB}/listeners",
            {"listener": {"loadbalancer_id": lb["id"], "protocol": "TCP", "protocol_port": 80}},
        )
    )["listener"]
    assert listener["provisioning_status"] == "PENDING_CREATE"
    api.settle()
    pool = (
        await api.ok(
            "POST",
            f"{LB}/pools",
            {
                "pool": {
                    "listener_id": listener["id"],
                    "protocol": "TCP",
                    "lb_algorithm": "ROUND_ROBIN",
                }
            },
        )
    )["pool"]
    api.settle()
    status, body = await api.call(
        "POST",
        f"{LB}/pools",
        {"pool": {"listener_id": listener["id"], "protocol": "TCP", "lb_algorithm": "ROUND_ROBIN"}},
    )
    assert (status, body["faultstring"]) == (409, "This listener already has a default pool")
    made = (await api.ok("POST", f"{LB}/pools/{pool['id']}/members", {"member": member(0)}))[
        "member"
    ]
    api.settle()
    status, body = await api.call("POST", f"{LB}/pools/{pool['id']}/members", {"member": member(0)})
    assert (status, body["faultstring"]) == (
        409,
        "Another member on this pool is already using ip 10.0.0.10 on protocol_port 30080",
    )
    hm = (
        await api.ok(
            "POST",
            f"{LB}/healthmonitors",
            {
                "healthmonitor": {
                    "pool_id": pool["id"],
                    "type": "HTTP",
                    "delay": 5,
                    "timeout": 3,
                    "max_retries": 2,
                }
            },
        )
    )["healthmonitor"]
    assert (hm["http_method"], hm["url_path"], hm["expected_codes"]) == ("GET", "/", "200")
    api.settle()
    assert (await api.ok("GET", f"{LB}/pools/{pool['id']}/members/{made['id']}"))["member"][
        "operating_status"
    ] == "ONLINE"
    for path in (
        f"/healthmonitors/{hm['id']}",
        f"/pools/{pool['id']}",
        f"/listeners/{listener['id']}",
    ):
        assert (await api.call("DELETE", LB + path))[0] == 204
        api.settle()
    assert (await api.call("DELETE", f"{LB}/loadbalancers/{lb['id']}"))[0] == 204
    api.settle()
    assert api.world.loadbalancers == api.world.members == {}


async def test_status_tree(api: Api) -> None:
    lb = await create(api)
    api.settle()
    tree = (await api.ok("GET", f"{LB}/loadbalancers/{lb['id']}/status"))["statuses"]
    listener = tree["loadbalancer"]["listeners"][0]
    assert listener["pools"][0]["health_monitor"]["type"] == "TCP"
    assert {m["operating_status"] for m in listener["pools"][0]["members"]} == {"ONLINE"}


async def test_unknown_attributes_are_refused_as_wsme_does(api: Api) -> None:
    spec = {"vip_subnet_id": api.cfg["private_subnet_id"], "vip_colour": "red"}
    status, body = await api.call("POST", f"{LB}/loadbalancers", {"loadbalancer": spec})
    assert (status, body["faultstring"]) == (
        400,
        "Unknown attribute for argument load_balancer.loadbalancer: vip_colour",
    )
    lb = await create(api)
    api.settle()
    status, body = await api.call(
        "PUT",
        f"{LB}/listeners/{lb['listeners'][0]['id']}",
        {"listener": {"protocol": "UDP", "colour": "red"}},
    )
    assert (status, body["faultstring"]) == (
        400,
        "Unknown attributes for argument listener_.listener: colour, protocol",
    )
    status, body = await api.call(
        "PUT", f"{LB}/pools/{lb['pools'][0]['id']}/members", {"members": [member(0, colour="red")]}
    )
    assert (status, body["faultstring"]) == (
        400,
        "Unknown attribute for argument members_.members: colour",
    )


async def test_an_older_octavia_knows_no_allowed_cidrs(api: Api) -> None:
    config = await api.ok("PATCH", "/_emu/config", {"octavia_version": "2.11"})
    assert config["octavia_version"] == "2.11"
    versions = (await api.ok("GET", "/load-balancer/"))["versions"]
    assert versions[-1]["id"] == "v2.11"
    assert versions[-1]["status"] == "CURRENT"
    assert len(versions) == 12
    status, body = await api.call("POST", f"{LB}/loadbalancers", {"loadbalancer": full_spec(api)})
    assert (status, body["faultstring"]) == (
        400,
        "Unknown attribute for argument load_balancer.loadbalancer: allowed_cidrs",
    )
    status, _ = await api.call("PATCH", "/_emu/config", {"octavia_version": "3.1"})
    assert status == 400


async def test_paging_links_as_octavia_builds_them(api: Api) -> None:
    """Only ``limit`` survives in Octavia's links (filters do not), ``previous`` comes with
    a marker (octavia/api/common/pagination.py ``_make_links``)."""
    made = [
        await create(api, {"name": f"lb-{n}", "vip_subnet_id": api.cfg["private_subnet_id"]})
        for n in range(3)
    ]
    for n, lb in enumerate(made):
        api.world.loadbalancers[lb["id"]]["created_at"] = f"2000-01-01T00:00:0{n}"
    body = await api.ok("GET", f"{LB}/loadbalancers?limit=2&provisioning_status=PENDING_CREATE")
    assert [x["name"] for x in body["loadbalancers"]] == ["lb-0", "lb-1"]
    base = f"{api.world.base_url}{LB}/loadbalancers"
    assert body["loadbalancers_links"] == [
        {"rel": "next", "href": f"{base}?limit=2&marker={made[1]['id']}"}
    ]
    body = await api.ok("GET", f"{LB}/loadbalancers?limit=2&marker={made[1]['id']}")
    assert [x["name"] for x in body["loadbalancers"]] == ["lb-2"]
    assert body["loadbalancers_links"] == [
        {"rel": "previous", "href": f"{base}?limit=2&marker={made[2]['id']}&page_reverse=True"}
    ]
