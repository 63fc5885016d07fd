"""``kccm local dataplane``: the data plane's command line (run in the foreground)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import signal
from collections.abc import Sequence
from pathlib import Path

from kccm.providers.local.dataplane.health import HealthSettings
from kccm.providers.local.dataplane.server import (
    DataPlane,
    DataplaneBusyError,
    DataplaneSettings,
    default_state_file,
)

__all__ = [
    "main",
]

log = logging.getLogger("kccm.dataplane")


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds from 0.01 to 3600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0.01 <= value <= 3600):
        raise argparse.ArgumentTypeError(f"{text} is not from 0.01 to 3600 seconds")
    return value


def _count(text: str) -> int:
    """An argparse type: a whole number from 1 to 100."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text} is not from 1 to 100")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kccm local dataplane",
        description="Run the local provider's L4 data plane until SIGTERM.",
    )
    parser.add_argument("--state-file", type=Path, default=None, help="the local state file")
    parser.add_argument("--poll-interval", type=_seconds, default=0.5, help="seconds")
    parser.add_argument("--health-interval", type=_seconds, default=2.0, help="seconds")
    parser.add_argument("--health-timeout", type=_seconds, default=3.0, help="seconds")
    parser.add_argument("--unhealthy-threshold", type=_count, default=2)
    parser.add_argument("--healthy-threshold", type=_count, default=1)
    parser.add_argument("--udp-idle-timeout", type=_seconds, default=30.0, help="seconds")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def _settings(ns: argparse.Namespace) -> DataplaneSettings:
    health = HealthSettings(
        interval=ns.health_interval,
        timeout=ns.health_timeout,
        fall=ns.unhealthy_threshold,
        rise=ns.healthy_threshold,
    )
    return DataplaneSettings(
        poll_interval=ns.poll_interval, udp_idle_timeout=ns.udp_idle_timeout, health=health
    )


async def _serve(state_file: Path, settings: DataplaneSettings) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    plane = DataPlane(state_file, settings)
    starting = loop.create_task(plane.start())
    stopping = loop.create_task(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        log.info("signal received while waiting for the state file")
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await plane.close()
        return 0
    if isinstance(starting.exception(), DataplaneBusyError):
        stopping.cancel()
        log.error("%s", starting.exception())
        return 1
    try:
        starting.result()
        await stopping
        log.info("signal received, closing listeners")
    finally:
        await plane.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kccm local dataplane``: run in the foreground until SIGTERM; exit 0."""
    ns = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if ns.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )
    state_file = ns.state_file or default_state_file()
    return asyncio.run(_serve(state_file, _settings(ns)))
