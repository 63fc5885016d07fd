"""What every emulator's server process does the same way: take the options every one takes,
bind its socket before it says it is ready, serve TLS with the certificate it was given, say
that it listens, and stop on SIGTERM/SIGINT or once the process that started it is gone (used
by :mod:`kccm.emulators.openstack.server` and :mod:`kccm.emulators.azure.server`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import ssl
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "listen",
    "serve_until_stopped",
    "serving_args",
    "tls_context",
    "url_host",
    "watch_parent",
]


def serving_args(parser: argparse.ArgumentParser, https: str) -> None:
    """``--host``, ``--cert-file`` (HTTPS for ``https``), ``--key-file``, ``--parent-pid``."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--cert-file", default="", help=f"serve {https} over HTTPS with this")
    parser.add_argument("--key-file", default="", help="the certificate's private key")
    parser.add_argument(
        "--parent-pid", type=int, default=0, help="stop when this process is gone (the launcher's)"
    )


def url_host(host: str) -> str:
    """``host`` as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


async def serve_until_stopped(ready: Mapping[str, Any], parent_pid: int) -> None:
    """Say that the server listens (``ready`` and this pid as one JSON line on stdout, what
    :func:`kccm.emulators.process.read_ready` waits for), then wait for SIGTERM, SIGINT or the
    end of ``parent_pid``."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    sys.stdout.write(json.dumps({**ready, "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    watcher = asyncio.create_task(watch_parent(parent_pid, stop))
    try:
        await stop.wait()
    finally:
        watcher.cancel()


async def watch_parent(pid: int, stop: asyncio.Event) -> None:
    """Stop once ``pid`` is gone (checked every second), so an emulator never outlives the
    test process that started it, whichever thread started it."""
    while pid and not stop.is_set():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            stop.set()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


def tls_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    """A server TLS context for ``cert_file`` (and ``key_file``), or None: plain HTTP."""
    if not cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file or None)
    return context


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a port the kernel chooses), held from now on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock
