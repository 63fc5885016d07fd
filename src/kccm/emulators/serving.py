"""What every emulator's server process does the same way: bind its socket before it says it
is ready, serve TLS with the certificate it was given, and stop once the process that started it
is gone (used by :mod:`kccm.emulators.openstack.server` and :mod:`kccm.emulators.azure.server`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl

__all__ = ["listen", "tls_context", "watch_parent"]


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
