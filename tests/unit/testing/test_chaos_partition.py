"""The chaos bench's partition forwarder: bytes pass both ways until cut; a cut drops the open
connections and refuses new ones until healed."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kccm.testing.chaos.partition import Forwarder, forwarded_kubeconfig
from kccm.testing.ports import free_port


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _round_trip(port: int) -> bytes:
    """What comes back for ``ping`` (b"" when the connection is dropped)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"ping")
        await writer.drain()
        return await _read(reader, 4)
    except ConnectionError:
        return b""
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def _read(reader: asyncio.StreamReader, size: int) -> bytes:
    try:
        return await asyncio.wait_for(reader.readexactly(size), 5)
    except (ConnectionError, asyncio.IncompleteReadError):
        return b""


async def test_forwards_until_cut_and_again_once_healed() -> None:
    upstream = free_port()
    server = await asyncio.start_server(_echo, "127.0.0.1", upstream)
    forwarder = await Forwarder(upstream).start()
    try:
        assert await _round_trip(forwarder.port) == b"ping"
        reader, writer = await asyncio.open_connection("127.0.0.1", forwarder.port)
        writer.write(b"x")
        assert await _read(reader, 1) == b"x"  # an open connection ...
        forwarder.cut()
        assert await _read(reader, 1) == b""  # ... is dropped
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        assert await _round_trip(forwarder.port) == b""  # a new one gets nothing through
        forwarder.heal()
        assert await _round_trip(forwarder.port) == b"ping"
    finally:
        await forwarder.stop()
        server.close()
        await server.wait_closed()


def test_the_kubeconfig_names_the_forwarder(tmp_path: Path) -> None:
    original = tmp_path / "admin.yaml"
    original.write_text("clusters:\n- cluster:\n    server: https://127.0.0.1:21771\n")
    copy = forwarded_kubeconfig(original, 30999, tmp_path / "copy.yaml")
    assert "server: https://127.0.0.1:30999\n" in copy.read_text()
