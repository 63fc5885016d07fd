"""Support of the emulator's unit tests: its application in this process on a loopback port
of its own, a fresh default world each time. Octavia changes stay pending (the delay is an
hour) until the test calls ``api.settle()``, which fires the server's timers early."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from kccm.emulators.openstack.admin import config
from kccm.emulators.openstack.app import build_app
from kccm.emulators.openstack.octavia_state import settle_now
from kccm.emulators.openstack.seed import seed_world
from kccm.emulators.openstack.world import World
from kccm.testing.ports import free_port

LB = "/load-balancer/v2/lbaas"
NET = "/network/v2.0"
NOVA = "/compute/v2.1"


@dataclass
class Api:
    """Raw HTTP calls to the emulator with the demo user's token."""

    client: TestClient[Any, Any]
    world: World
    token: str = ""
    cfg: dict[str, Any] = field(default_factory=dict)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        sent = {"X-Auth-Token": self.token if token is None else token, **(headers or {})}
        async with self.client.request(method, path, json=body, headers=sent) as response:
            text = await response.text()
            return response.status, (await response.json() if text else None)

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, found = await self.call(method, path, body, **kw)
        assert status < 300, (status, found)
        return found

    async def auth(self, auth: dict[str, Any]) -> tuple[int, Any, str]:
        async with self.client.post("/identity/v3/auth/tokens", json={"auth": auth}) as resp:
            return resp.status, await resp.json(), resp.headers.get("X-Subject-Token", "")

    def settle(self) -> list[str]:
        """Finish the pending Octavia changes now (the server's timers, fired early)."""
        return settle_now(self.world)


def password_auth(password: str = "secret") -> dict[str, Any]:
    return {
        "identity": {
            "methods": ["password"],
            "password": {
                "user": {"name": "demo", "domain": {"name": "Default"}, "password": password}
            },
        },
        "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}},
    }


async def start_api() -> Api:
    """A fresh default world served on a loopback port, with a token."""
    world = seed_world(World(lb_active_delay=3600.0))
    server = TestServer(build_app(world), host="127.0.0.1", port=free_port())
    client: TestClient[Any, Any] = TestClient(server)
    await client.start_server()
    world.base_url = str(server.make_url("")).rstrip("/")
    api = Api(client, world, cfg=config(world))
    status, _, api.token = await api.auth(password_auth())
    assert status == 201
    return api
