"""Run the emulator: ``python -m kccm.emulators.azure [--port P] [--imds-port P]
[--lro-delay S] [--page-size N] [--token-ttl S] [--cert-file F --key-file K]``: ARM and
sign-in on one port (HTTPS with that certificate), the instance metadata service on another
(plain HTTP, as IMDS is); port 0, the default, lets the kernel choose.

It prints one JSON line on stdout once both listen (``{"url", "imds_url", "pid"}``), which
:mod:`kccm.emulators.azure.launcher` waits for, and stops on SIGTERM or SIGINT or when the
process named by ``--parent-pid`` is gone.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from aiohttp import web

from kccm.emulators.azure.app import build_app
from kccm.emulators.azure.imds import build_imds_app
from kccm.emulators.azure.seed import seed_world
from kccm.emulators.azure.world import World
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
        prog="python -m kccm.emulators.azure",
        description="kccm's Azure emulator (ADFS sign-in, ARM Compute and Network, IMDS)",
    )
    parser.add_argument("--port", type=int, default=0, help="ARM's port; 0: any free port")
    parser.add_argument("--imds-port", type=int, default=0, help="IMDS's port; 0: any")
    parser.add_argument(
        "--lro-delay", type=float, default=0.0, help="seconds a PUT/DELETE stays InProgress"
    )
    parser.add_argument("--page-size", type=int, default=100, help="items per list page")
    parser.add_argument("--token-ttl", type=float, default=3600.0, help="a token's lifetime")
    serving_args(parser, "ARM")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    arm_sock, imds_sock = listen(args.host, args.port), listen(args.host, args.imds_port)
    host = url_host(args.host)
    context = tls_context(args.cert_file, args.key_file)
    scheme = "https" if context else "http"
    world = seed_world(
        World(
            base_url=f"{scheme}://{host}:{arm_sock.getsockname()[1]}",
            imds_url=f"http://{host}:{imds_sock.getsockname()[1]}",
            lro_delay=args.lro_delay,
            page_size=args.page_size,
            token_ttl=args.token_ttl,
        )
    )
    runners = [
        web.AppRunner(build_app(world), access_log=None),
        web.AppRunner(build_imds_app(world), access_log=None),
    ]
    for runner in runners:
        await runner.setup()
    await web.SockSite(runners[0], arm_sock, ssl_context=context).start()
    await web.SockSite(runners[1], imds_sock).start()
    try:
        ready = {"url": world.base_url, "imds_url": world.imds_url}
        await serve_until_stopped(ready, args.parent_pid)
    finally:
        for runner in runners:
            await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(serve(parse_args(argv)))
    return 0
