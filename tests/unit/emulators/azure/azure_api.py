"""Support of the Azure emulator's unit tests: its ARM application in this process on a
loopback port of its own, a fresh default world and a clock the test moves each time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from kccm.emulators.azure.app import build_app
from kccm.emulators.azure.imds import build_imds_app
from kccm.emulators.azure.seed import seed_world
from kccm.emulators.azure.world import DEFAULTS, World
from kccm.testing.ports import free_port

SUB = DEFAULTS["subscription"]
RG = f"/subscriptions/{SUB}/resourceGroups/{DEFAULTS['resource_group']}"
NET = f"{RG}/providers/Microsoft.Network"
COMPUTE = f"{RG}/providers/Microsoft.Compute"
NET_V = "2025-05-01"  # what upstream v1.36.5 sends
COMPUTE_V = "2025-04-01"
SUBNET = f"{NET}/virtualNetworks/{DEFAULTS['vnet']}/subnets/{DEFAULTS['subnet']}"


@dataclass
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Answer:
    status: int
    body: Any
    headers: CIMultiDict[str]


@dataclass
class Api:
    """Raw HTTP calls to the emulator with the default client's token."""

    client: TestClient[Any, Any]
    world: World
    clock: Clock
    token: str = ""
    extra: list[TestClient[Any, Any]] = field(default_factory=list)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        version: str | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        if version is None:
            version = COMPUTE_V if "/Microsoft.Compute/" in path else NET_V
        if version and "api-version=" not in path:
            path += ("&" if "?" in path else "?") + f"api-version={version}"
        sent = {"Authorization": f"Bearer {self.token if token is None else token}"}
        if token == "":
            sent = {}
        sent.update(headers or {})
        async with self.client.request(method, path, json=body, headers=sent) as response:
            text = await response.text()
            found = await response.json() if text else None
            return Answer(response.status, found, CIMultiDict(response.headers))

    async def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        answer = await self.call(method, path, body, **kw)
        assert answer.status < 300, (answer.status, answer.body)
        return answer.body

    async def sign_in(self, form: dict[str, str]) -> tuple[int, Any]:
        async with self.client.post("/adfs/oauth2/token", data=form) as response:
            return response.status, await response.json()

    async def close(self) -> None:
        for client in (self.client, *self.extra):
            await client.close()


def secret_form(secret: str = DEFAULTS["client_secret"]) -> dict[str, str]:
    return {
        "grant_type": "client_credentials",
        "client_id": DEFAULTS["client_id"],
        "client_secret": secret,
        "scope": "https://management.local/.default",
    }


async def start_api(**world_opts: Any) -> Api:
    """A fresh default world served on a loopback port, with a token."""
    clock = Clock()
    world = seed_world(World(clock=clock, **world_opts))
    server = TestServer(build_app(world), host="127.0.0.1", port=free_port())
    client: TestClient[Any, Any] = TestClient(server)
    await client.start_server()
    world.base_url = str(server.make_url("")).rstrip("/")
    api = Api(client, world, clock)
    status, body = await api.sign_in(secret_form())
    assert status == 200, body
    api.token = body["access_token"]
    return api


async def imds_client(api: Api) -> TestClient[Any, Any]:
    """The metadata service of ``api``'s world on a port of its own."""
    server = TestServer(build_imds_app(api.world), host="127.0.0.1", port=free_port())
    client: TestClient[Any, Any] = TestClient(server)
    await client.start_server()
    api.extra.append(client)
    return client
