"""Run the emulator: ``python -m kccm.testing.openstack --port P [--lb-active-delay S]``.

It prints one JSON line on stdout once it listens (``{"url": ..., "pid": ...}``), which
:mod:`kccm.testing.openstack.launcher` waits for, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence

from aiohttp import web

from kccm.testing.openstack.app import build_app
from kccm.testing.openstack.seed import seed_world
from kccm.testing.openstack.world import World

__all__ = ["main", "parse_args", "serve"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kccm.testing.openstack",
        description="kccm's OpenStack emulator (Keystone, Nova, Neutron, Octavia) on one port",
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
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
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    host = f"[{args.host}]" if ":" in args.host else args.host
    world = seed_world(
        World(
            base_url=f"http://{host}:{args.port}",
            lb_active_delay=args.lb_active_delay,
            token_ttl=args.token_ttl,
        )
    )
    runner = web.AppRunner(build_app(world), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, reuse_address=True)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    sys.stdout.write(json.dumps({"url": world.base_url, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(serve(parse_args(argv)))
    return 0
