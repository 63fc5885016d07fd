"""The emulator's test API: faults, the request log, leak state, and the launcher."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from emu_api import LB, NET, NOVA, Api

from kccm.emulators.openstack import EmulatorError, openstack_emulator
from kccm.emulators.openstack.admin import add_server
from kccm.testing.certs import emulator_tls
from kccm.testing.controllers import eventually


async def fault(api: Api, **spec: Any) -> dict[str, Any]:
    return dict(await api.ok("POST", "/_emu/faults", spec))


@pytest.mark.parametrize(
    ("spec", "path", "status", "body"),
    [
        pytest.param(
            {"service": "network", "method": "GET", "path_regex": "/ports$", "status": 503},
            f"{NET}/ports",
            503,
            {
                "NeutronError": {
                    "type": "ServiceUnavailable",
                    "message": "Injected fault (503)",
                    "detail": "",
                }
            },
            id="neutron-503",
        ),
        pytest.param(
            {"service": "compute", "method": "*", "path_regex": "servers", "status": 500},
            f"{NOVA}/servers",
            500,
            {"computeFault": {"code": 500, "message": "Injected fault (500)"}},
            id="nova-500",
        ),
        pytest.param(
            {
                "service": "load-balancer",
                "method": "GET",
                "path_regex": "loadbal",
                "status": 429,
                "body": {"x": 1},
            },
            f"{LB}/loadbalancers",
            429,
            {"x": 1},
            id="given-body",
        ),
        pytest.param(
            {"service": "*", "method": "GET", "path_regex": "/networks", "status": 401},
            f"{NET}/networks",
            401,
            {"error": {"code": 401, "title": "Unauthorized", "message": "Injected fault (401)"}},
            id="keystone-shaped-401",
        ),
    ],
)
async def test_error_faults_answer_n_times_in_the_services_shape(
    api: Api, spec: dict[str, Any], path: str, status: int, body: Any
) -> None:
    await fault(api, **spec, times=2)
    assert await api.call("GET", path) == (status, body)
    assert await api.call("GET", path) == (status, body)
    assert (await api.call("GET", path))[0] == 200
    assert await api.ok("GET", "/_emu/faults") == []


async def test_conflict_storm_names_the_balancer(api: Api) -> None:
    lb = (
        await api.ok(
            "POST",
            f"{LB}/loadbalancers",
            {"loadbalancer": {"vip_subnet_id": api.cfg["private_subnet_id"]}},
        )
    )["loadbalancer"]
    api.settle()
    await fault(
        api,
        service="load-balancer",
        method="PUT",
        path_regex="/loadbalancers/",
        kind="conflict",
        times=3,
    )
    for _ in range(3):
        status, body = await api.call(
            "PUT", f"{LB}/loadbalancers/{lb['id']}", {"loadbalancer": {"name": "x"}}
        )
        assert (status, body["faultstring"]) == (
            409,
            f"Load Balancer {lb['id']} is immutable and cannot be updated.",
        )
    assert (
        await api.call("PUT", f"{LB}/loadbalancers/{lb['id']}", {"loadbalancer": {"name": "x"}})
    )[0] == 200


async def test_latency_fault_delays_then_serves(api: Api) -> None:
    await fault(
        api,
        service="network",
        method="GET",
        path_regex="/networks",
        kind="latency",
        latency=0.2,
        times=0,
    )
    started = time.monotonic()
    assert (await api.call("GET", f"{NET}/networks"))[0] == 200
    assert time.monotonic() - started >= 0.2
    found = await api.ok("GET", "/_emu/faults")
    assert found[0]["hits"] == 1
    assert (await api.call("DELETE", "/_emu/faults"))[0] == 204
    assert await api.ok("GET", "/_emu/faults") == []


async def test_fault_headers(api: Api) -> None:
    await fault(
        api,
        service="compute",
        method="GET",
        path_regex="servers",
        status=429,
        headers={"Retry-After": "3"},
    )
    async with api.client.get(f"{NOVA}/servers", headers={"X-Auth-Token": api.token}) as resp:
        assert (resp.status, resp.headers["Retry-After"]) == (429, "3")
        assert (await resp.json())["overLimit"]["code"] == 429


async def test_unknown_fault_kind_is_refused(api: Api) -> None:
    status, _ = await api.call("POST", "/_emu/faults", {"kind": "explode"})
    assert status == 400


async def test_request_log(api: Api) -> None:
    first = max(r["seq"] for r in await api.ok("GET", "/_emu/requests"))
    await api.call("GET", f"{NET}/ports?device_id=x")
    await api.call("PUT", f"{NET}/ports/nope", {"port": {"name": "x"}})
    found = await api.ok("GET", f"/_emu/requests?since={first}")
    assert [(r["method"], r["path"], r["query"], r["service"], r["status"]) for r in found] == [
        ("GET", "/network/v2.0/ports", "device_id=x", "network", 200),
        ("PUT", "/network/v2.0/ports/nope", "", "network", 404),
    ]


async def test_state_lists_what_tests_leave(api: Api) -> None:
    before = await api.ok("GET", "/_emu/state")
    server = add_server(api.world, {"name": "n", "floating": True})
    assert (await api.ok("GET", "/_emu/state"))["floatingips"] == []
    port = next(p for p in api.world.ports.values() if p["device_id"] == server["id"])
    await api.ok(
        "PUT",
        f"{NET}/ports/{port['id']}",
        {"port": {"allowed_address_pairs": [{"ip_address": "10.244.0.0/24"}]}},
    )
    await api.ok(
        "PUT",
        f"{NET}/routers/{api.cfg['router_id']}/add_extraroutes",
        {"router": {"routes": [{"destination": "10.244.0.0/24", "nexthop": "10.0.0.2"}]}},
    )
    lb = (
        await api.ok(
            "POST",
            f"{LB}/loadbalancers",
            {"loadbalancer": {"vip_subnet_id": api.cfg["private_subnet_id"]}},
        )
    )["loadbalancer"]
    after = await api.ok("GET", "/_emu/state")
    assert after["loadbalancers"] == [lb["id"]]
    assert after["ports"] == [lb["vip_port_id"]]
    assert after["routes"] == ["router1: 10.244.0.0/24 via 10.0.0.2"]
    assert after["allowed_address_pairs"] == [f"{port['id']}: 10.244.0.0/24"]
    assert after["servers"] == [server["id"]]
    assert (await api.call("DELETE", f"/_emu/servers/{server['id']}"))[0] == 204
    assert (await api.ok("GET", "/_emu/state"))["servers"] == before["servers"]


async def test_server_status_and_unknowns(api: Api) -> None:
    server = add_server(api.world, {"name": "n"})
    found = await api.ok("PUT", f"/_emu/servers/{server['id']}/status", {"status": "shutoff"})
    assert (found["status"], found["OS-EXT-STS:power_state"]) == ("SHUTOFF", 4)
    assert (await api.call("PUT", f"/_emu/servers/{server['id']}/status", {"status": "melted"}))[
        0
    ] == 400
    assert (await api.call("POST", "/_emu/servers", {"name": "x", "flavor": "m9"}))[0] == 404


def test_launcher_runs_the_server_as_a_process() -> None:
    """The subprocess, the admin client and the cloud.conf, end to end (no token needed by
    the admin API; the process stops with the block)."""
    with openstack_emulator(lb_active_delay=0.0) as emu:
        baseline = emu.admin.state()
        server = emu.admin.add_server("node-1", floating=True, az="az-2")
        assert server["OS-EXT-AZ:availability_zone"] == "az-2"
        conf = emu.cloud_conf({"LoadBalancer": {"lb-provider": "ovn"}}, Global={"region": None})
        assert f"auth-url = {emu.auth_url}" in conf
        assert f"floating-network-id = {emu.config['public_network_id']}" in conf
        assert "lb-provider = ovn" in conf
        assert "region" not in conf
        assert f"router-id = {emu.config['router_id']}" in conf
        with pytest.raises(AssertionError, match="servers"):
            emu.admin.assert_clean(baseline)
        emu.admin.delete_server(server["id"])
        emu.admin.assert_clean(baseline)
        emu.admin.fault("network", "GET", "/ports", status=503)
        assert emu.admin.faults()[0]["status"] == 503
        emu.admin.clear_faults()
        assert emu.admin.set_config(lb_active_delay=0.5)["lb_active_delay"] == 0.5
        assert emu.admin.expire_tokens() == 0
        assert emu.admin.settle() == []
        assert emu.admin.mutating() == []
        with pytest.raises(EmulatorError, match="404"):
            emu.admin.delete_server("nope")
        process = emu.process
    assert process.poll() is not None


async def test_timers_settle_on_the_servers_loop(api: Api) -> None:
    """With a short delay the server's own timer moves the balancer on (awaited by polling
    the API, never by a fixed sleep)."""
    api.world.lb_active_delay = 0.01
    lb = (
        await api.ok(
            "POST",
            f"{LB}/loadbalancers",
            {"loadbalancer": {"vip_subnet_id": api.cfg["private_subnet_id"]}},
        )
    )["loadbalancer"]

    async def active() -> bool:
        found = await api.ok("GET", f"{LB}/loadbalancers/{lb['id']}")
        return bool(found["loadbalancer"]["provisioning_status"] == "ACTIVE")

    assert await eventually(active, interval=0.01)


def test_launcher_serves_https_with_the_given_certificate() -> None:
    with openstack_emulator(tls=emulator_tls()) as emu:
        assert emu.base_url.startswith("https://127.0.0.1:")
        assert emu.config["auth_url"] == emu.auth_url
        assert f"ca-file = {emu.ca_file}" in emu.cloud_conf()
        ca_file = emu.ca_file
    assert not os.path.exists(ca_file)


async def test_emulator_stops_when_its_starter_dies() -> None:
    """A test process killed outright leaves no emulator behind: the server watches it."""
    script = (
        "import sys\n"
        "from kccm.emulators.openstack import start_emulator\n"
        "emu = start_emulator()\n"
        "print(emu.process.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    starter = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert starter.stdout is not None
    child = int(await starter.stdout.readline())
    starter.kill()
    await starter.wait()

    async def gone() -> bool:
        """No such process, or a zombie left for whoever reaps it."""
        try:
            text = await asyncio.to_thread(Path(f"/proc/{child}/stat").read_text)
            state = text.rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state in ("Z", "X")

    assert await eventually(gone, interval=0.1)
