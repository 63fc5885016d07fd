"""The aiohttp transport under KubeApiClient, against a scripted HTTP endpoint on loopback:
client-go's retry on Retry-After, token-file rotation on 401, watch lines of any length."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from kccm.kube import http11
from kccm.kube.client import MAX_RETRIES, KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import TooManyRequests, TransportError, Unauthorized
from kccm.kube.resources import CONFIG_MAPS
from kccm.testing.ports import free_port

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CM = {"kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


def scripted(answers: list[tuple[int, dict[str, str]]], seen: list[web.Request]) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        status, headers = answers[min(len(seen), len(answers)) - 1]
        if status == 200:
            return web.json_response(CM)
        body = {"kind": "Status", "code": status, "message": "slow down"}
        return web.json_response(body, status=status, headers=headers)

    return handler


@pytest.mark.parametrize(
    ("answers", "requests", "outcome"),
    [
        pytest.param([(429, {"Retry-After": "0"}), (200, {})], 2, None,
                     id="429-with-retry-after-is-retried"),
        pytest.param([(503, {"Retry-After": "0"}), (200, {})], 2, None,
                     id="503-with-retry-after-is-retried"),
        pytest.param([(429, {})], 1, TooManyRequests, id="429-without-retry-after-fails-at-once"),
        pytest.param([(429, {"Retry-After": "0"})], MAX_RETRIES + 1, TooManyRequests,
                     id="gives-up-after-client-go-max-retries"),
    ],
)  # fmt: skip
async def test_retry_after_is_honoured_like_client_go(
    answers: list[tuple[int, dict[str, str]]],
    requests: int,
    outcome: type[Exception] | None,
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    seen: list[web.Request] = []
    url = await serve(scripted(answers, seen))
    client = KubeApiClient(load_cluster_config(master=url), qps=0, burst=0)
    try:
        if outcome is None:
            assert (await client.get(CONFIG_MAPS, "x", namespace="default")) == CM
        else:
            with pytest.raises(outcome):
                await client.get(CONFIG_MAPS, "x", namespace="default")
    finally:
        await client.close()
    assert len(seen) == requests


def token_kubeconfig(tmp_path: Path, url: str, token_file: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{url}"}}}}]
users: [{{name: u, user: {{tokenFile: "{token_file}"}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    return str(path)


async def test_a_rotated_token_file_is_read_again_after_401(
    tmp_path: Path, serve: Callable[[Handler], Awaitable[str]]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old\n")
    seen: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response(CM)

    url = await serve(handler)
    client = KubeApiClient(load_cluster_config(token_kubeconfig(tmp_path, url, token_file)))
    try:
        with pytest.raises(Unauthorized):
            await client.get(CONFIG_MAPS, "x", namespace="default")
        token_file.write_text("new\n")
        assert (await client.get(CONFIG_MAPS, "x", namespace="default")) == CM
    finally:
        await client.close()
    assert seen == ["Bearer old", "Bearer old", "Bearer new"]


async def test_watch_lines_of_any_length_split_across_chunks(
    serve: Callable[[Handler], Awaitable[str]],
) -> None:
    big = "v" * (3 * 1024 * 1024)
    lines = [
        b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}',
        b'{"type":"MODIFIED","object":{"metadata":{"name":"b"},"data":{"k":"' + big.encode()
        + b'"}}}',
        b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}',
    ]  # fmt: skip
    payload = b"\n".join(lines) + b"\n\n"

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for start in range(0, len(payload), 7919):  # chunks that cut lines anywhere
            await response.write(payload[start : start + 7919])
        await response.write_eof()
        return response

    url = await serve(handler)
    client = KubeApiClient(load_cluster_config(master=url), qps=0, burst=0)
    try:
        events = [e async for e in client.watch(CONFIG_MAPS, resource_version="1")]
    finally:
        await client.close()
    assert [e.type.value for e in events] == ["ADDED", "MODIFIED", "BOOKMARK"]
    assert events[1].object["data"]["k"] == big
    assert events[2].resource_version == "9"


async def test_a_refused_connection_is_a_transport_error() -> None:
    client = KubeApiClient(load_cluster_config(master=f"http://127.0.0.1:{free_port()}"))
    try:
        with pytest.raises(TransportError, match="GET /api/v1/namespaces/default/configmaps/x"):
            await client.get(CONFIG_MAPS, "x", namespace="default")
    finally:
        await client.close()


def rotating_server(seen: list[str], *, watch: bool) -> Handler:
    """Accepts only ``Bearer new``; a GET with watch=1 answers one bookmark line."""

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        if watch:
            bookmark = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}\n'
            return web.Response(body=bookmark)
        return web.json_response(CM)

    return handler


async def test_a_watch_survives_token_rotation(
    tmp_path: Path, serve: Callable[[Handler], Awaitable[str]]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old\n")
    seen: list[str] = []
    url = await serve(rotating_server(seen, watch=True))
    client = KubeApiClient(load_cluster_config(token_kubeconfig(tmp_path, url, token_file)))
    try:
        with pytest.raises(Unauthorized):
            [e async for e in client.watch(CONFIG_MAPS, resource_version="1")]
        token_file.write_text("new\n")
        events = [e async for e in client.watch(CONFIG_MAPS, resource_version="1")]
    finally:
        await client.close()
    assert [e.resource_version for e in events] == ["7"]
    assert seen == ["Bearer old", "Bearer old", "Bearer new"]


async def test_requests_caught_by_one_rotation_all_retry(
    tmp_path: Path, serve: Callable[[Handler], Awaitable[str]]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old\n")
    seen: list[str] = []
    url = await serve(rotating_server(seen, watch=False))
    client = KubeApiClient(load_cluster_config(token_kubeconfig(tmp_path, url, token_file)))
    try:
        with pytest.raises(Unauthorized):  # caches "old"
            await client.get(CONFIG_MAPS, "x", namespace="default")
        token_file.write_text("new\n")
        answers = await asyncio.gather(
            *(client.get(CONFIG_MAPS, "x", namespace="default") for _ in range(5))
        )
    finally:
        await client.close()
    assert answers == [CM] * 5


async def test_a_request_cancelled_before_its_answer_leaves_no_connection_behind(
    serve: Callable[[Handler], Awaitable[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lean pool (kccm.kube.http11) closes the connection of a request cancelled while it
    waits for its answer: the connection is watched itself (every one the pool opens is
    recorded), not the pool's bookkeeping, and the next request gets a connection of its own."""
    opened: list[http11._Connection] = []

    class Recorded(http11._Connection):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            opened.append(self)

    monkeypatch.setattr(http11, "_Connection", Recorded)
    answer = asyncio.Event()
    arrived = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        arrived.set()
        await answer.wait()
        return web.json_response(CM)

    url = await serve(handler)
    client = KubeApiClient(load_cluster_config(master=url), qps=0, burst=0)
    try:
        pending = asyncio.create_task(client.get(CONFIG_MAPS, "x", namespace="default"))
        await arrived.wait()
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        [abandoned] = opened
        assert abandoned.transport is not None
        assert abandoned.transport.is_closing(), "the cancelled request's connection is open"
        answer.set()  # the abandoned request's answer goes nowhere
        assert (await client.get(CONFIG_MAPS, "x", namespace="default")) == CM
        assert len(opened) == 2, "the next request did not reuse the abandoned connection"
        kept = opened[1].transport
        assert kept is not None
        assert not kept.is_closing(), "a completed request keeps its connection"
    finally:
        await client.close()
