"""What one request costs kccm's client, and what a TLS handshake costs (issue 28, third pass).

Usage: .venv/bin/python bench/request_cost.py [--rounds 4] [--concurrency 32] [--per-task 30]
           [--handshakes 33] [--loop uvloop|asyncio] [--blocking 500]

Starts one etcd + kube-apiserver, then, in this one process (CPU from ``getrusage``):

- ``--handshakes`` TLS connections opened one after another with the client's TLS context, all
  full handshakes, then as many resumed (kccm.kube.http11.TlsSessions offers the session of a
  first connection): the CPU of each set;
- ``--rounds`` rounds of ``--concurrency`` tasks each PATCHing its own Node ``--per-task``
  times through :class:`~kccm.kube.client.KubeApiClient` (the first round warms the pool up):
  the client's CPU per PATCH, user and system;
- a floor to compare with: ``--blocking`` PATCHes one after another on one blocking TLS socket
  (no event loop, a dozen lines of Python per request), the CPU per PATCH.

The Nodes it creates are deleted at the end; the control plane is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import socket
import ssl
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

import uvloop

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.http11 import TlsSessions, _Connection
from kccm.kube.interface import PatchType
from kccm.kube.resources import NODES
from kccm.kube.transport import _ssl_context
from kccm.testing.controlplane import ControlPlane


def cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


async def handshakes(url: str, kubeconfig: str, count: int) -> None:
    context = _ssl_context(load_cluster_config(kubeconfig))
    assert not isinstance(context, bool)
    sessions = TlsSessions.of(context)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    loop = asyncio.get_running_loop()
    for label in ("full", "resumed"):
        opened = []
        user, system = cpu()
        for _ in range(count):
            transport, connection = await loop.create_connection(
                _Connection, host, port, ssl=context, server_hostname=host
            )
            opened.append(transport)
        spent = sum(cpu()) - user - system
        resumed = sum(t.get_extra_info("ssl_object").session_reused for t in opened)
        print(f"{count} {label} handshakes: {spent * 1000:.0f} ms CPU ({resumed} resumed)")
        if label == "full":  # one answer read, so the server's session ticket has come
            answer = await connection.send(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
            assert answer.status in (200, 401, 403)
            connection.done()
            sessions.remember(opened[-1], host)
        for transport in opened:
            transport.abort()


async def patches(kube: KubeApiClient, args: argparse.Namespace) -> None:
    names = [f"request-cost-{i}" for i in range(args.concurrency)]
    for name in names:
        await kube.create(NODES, {"metadata": {"name": name}})

    async def task(name: str) -> None:
        for i in range(args.per_task):
            body = {"metadata": {"labels": {"round": str(i)}}}
            await kube.patch(NODES, name, body, patch_type=PatchType.STRATEGIC)

    try:
        for round_ in range(args.rounds):
            user, system = cpu()
            start = time.perf_counter()
            await asyncio.gather(*(task(name) for name in names))
            wall = time.perf_counter() - start
            count = args.concurrency * args.per_task
            user2, system2 = cpu()
            print(
                f"round {round_}{' (warm-up)' if round_ == 0 else ''}: {count} PATCHes in "
                f"{wall:.2f} s; client CPU per PATCH {(user2 - user) / count * 1e6:.0f} µs user "
                f"+ {(system2 - system) / count * 1e6:.0f} µs system"
            )
    finally:
        for name in names:
            await kube.delete(NODES, name)


def blocking(url: str, kubeconfig: str, count: int) -> None:
    context = _ssl_context(load_cluster_config(kubeconfig))
    assert isinstance(context, ssl.SSLContext)
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    with context.wrap_socket(socket.create_connection((host, port)), server_hostname=host) as tls:

        def send(method: str, path: str, body: Mapping[str, object], kind: str) -> int:
            data = json.dumps(body).encode()
            tls.sendall(
                f"{method} {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: {kind}\r\n"
                f"Accept: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += tls.recv(65536)
            head, _, rest = answer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(rest) < length:
                rest += tls.recv(65536)
            json.loads(rest)
            return int(head.split(b" ")[1])

        name = "request-cost-blocking"
        assert (
            send("POST", "/api/v1/nodes", {"metadata": {"name": name}}, "application/json") == 201
        )
        try:
            user, system = cpu()
            for i in range(count):
                body = {"metadata": {"labels": {"round": str(i)}}}
                kind = "application/strategic-merge-patch+json"
                assert send("PATCH", f"/api/v1/nodes/{name}", body, kind) == 200
            user2, system2 = cpu()
            print(
                f"blocking socket, one PATCH after another: {(user2 - user) / count * 1e6:.0f} µs "
                f"user + {(system2 - system) / count * 1e6:.0f} µs system per PATCH"
            )
        finally:
            send("DELETE", f"/api/v1/nodes/{name}", {}, "application/json")


async def main_async(args: argparse.Namespace, plane: ControlPlane) -> None:
    await handshakes(plane.url, str(plane.admin_kubeconfig), args.handshakes)
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    try:
        await patches(kube, args)
    finally:
        await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--per-task", type=int, default=30)
    parser.add_argument("--handshakes", type=int, default=33)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--blocking", type=int, default=500, help="0: skip the floor")
    args = parser.parse_args()
    with ControlPlane() as plane:
        run = uvloop.run if args.loop == "uvloop" else asyncio.run
        run(main_async(args, plane))
        if args.blocking:
            blocking(plane.url, str(plane.admin_kubeconfig), args.blocking)


if __name__ == "__main__":
    main()
