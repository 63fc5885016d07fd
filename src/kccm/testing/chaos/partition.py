"""A network partition between one daemon and the apiserver (the chaos bench's ``partition``
mode): each daemon reaches the apiserver through a TCP forwarder of its own (its kubeconfig
names the forwarder's port; TLS passes through untouched, the serving certificate is for
127.0.0.1 whatever the port). :meth:`Forwarder.cut` drops every connection and refuses new
ones until :meth:`Forwarder.heal`, while the cloud stays reachable: the daemon keeps its
process and its cloud, loses the apiserver, and with it, a renew deadline later, its lease."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from kccm.testing.ports import free_port

__all__ = ["Forwarder", "forwarded_kubeconfig"]

_SERVER = re.compile(r"(server:\s*https://127\.0\.0\.1:)(\d+)")


def forwarded_kubeconfig(kubeconfig: Path, port: int, into: Path) -> Path:
    """A copy of ``kubeconfig`` whose server is ``127.0.0.1:port``."""
    text, count = _SERVER.subn(rf"\g<1>{port}", kubeconfig.read_text())
    if count != 1:
        raise ValueError(f"{kubeconfig}: expected one https://127.0.0.1 server, found {count}")
    into.write_text(text)
    return into


@dataclass
class Forwarder:
    """``127.0.0.1:port`` -> ``127.0.0.1:upstream``, byte for byte, until cut."""

    upstream: int
    port: int = field(default_factory=free_port)
    cut_off: bool = False
    cuts: int = 0
    _server: asyncio.Server | None = None
    _open: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> Forwarder:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        self.cut_off = True
        self.cuts += 1
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    def heal(self) -> None:
        self.cut_off = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, up_writer}
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for end in (writer, up_writer):
                self._open.discard(end)
                end.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
