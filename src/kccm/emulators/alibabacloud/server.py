"""Run the emulator: ``python -m kccm.emulators.alibabacloud [--port P] [--region R]
[--page-size N] [--cert-file F --key-file K]``: the RPC APIs, the metadata service and the test
API on one port (0, the default: the kernel chooses). It prints one JSON line on stdout once it
listens (``{"url", "pid"}``) and stops on SIGTERM or SIGINT or when ``--parent-pid`` is gone."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from aiohttp import web

from kccm.emulators.alibabacloud.app import build_app
from kccm.emulators.alibabacloud.world import World
from kccm.emulators.serving import listen, serve_until_stopped, serving_args, tls_context, url_host

__all__ = ["main"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kccm.emulators.alibabacloud",
        description="kccm's Alibaba Cloud emulator (ECS, VPC, SLB, NLB RPC APIs; metadata)",
    )
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--region", default="cn-hangzhou")
    parser.add_argument("--page-size", type=int, default=100, help="instances per page")
    serving_args(parser, "the APIs")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    sock = listen(args.host, args.port)
    context = tls_context(args.cert_file, args.key_file)
    scheme = "https" if context else "http"
    world = World(region=args.region, page_size=args.page_size)
    runner = web.AppRunner(build_app(world), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock, ssl_context=context).start()
    try:
        url = f"{scheme}://{url_host(args.host)}:{sock.getsockname()[1]}"
        await serve_until_stopped({"url": url}, args.parent_pid)
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(serve(parse_args(argv)))
    return 0
