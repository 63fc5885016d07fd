"""Run the emulator: ``python -m kccm.emulators.openstack [--port P] [--lb-active-delay S]
[--token-ttl S] [--cert-file F --key-file K]`` (HTTPS with that certificate; port 0, the
default, lets the kernel choose one).

It prints one JSON line on stdout once it listens (``{"url": ..., "pid": ...}``), which
:mod:`kccm.emulators.openstack.launcher` waits for, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from aiohttp import web

from kccm.emulators.openstack.app import build_app
from kccm.emulators.openstack.seed import seed_world
from kccm.emulators.openstack.world import World
from kccm.emulators.serving import (
    listen,
    serve_until_stopped,
    serving_args,
    tls_context,
    url_host,
)

__all__ = ["main", "parse_args", "serve"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kccm.emulators.openstack",
        description="kccm's OpenStack emulator (Keystone, Nova, Neutron, Octavia) on one port",
    )
    parser.add_argument("--port", type=int, default=0, help="0 (the default): any free port")
    parser.add_argument(
        "--lb-active-delay",
        type=float,
        default=0.05,
        help="seconds an Octavia object stays PENDING_* (default 0.05)",
    )
    parser.add_argument(
        "--token-ttl",
        type=float,
        default=3600.0,
        help="seconds a Keystone token lives (default 3600)",
    )
    serving_args(parser, "every service")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    sock = listen(args.host, args.port)
    host = url_host(args.host)
    context = tls_context(args.cert_file, args.key_file)
    scheme = "https" if context else "http"
    world = seed_world(
        World(
            base_url=f"{scheme}://{host}:{sock.getsockname()[1]}",
            lb_active_delay=args.lb_active_delay,
            token_ttl=args.token_ttl,
        )
    )
    runner = web.AppRunner(build_app(world), access_log=None)
    await runner.setup()
    site = web.SockSite(runner, sock, ssl_context=context)
    await site.start()
    try:
        await serve_until_stopped({"url": world.base_url}, args.parent_pid)
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(serve(parse_args(argv)))
    return 0
