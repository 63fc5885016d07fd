"""Fixtures of the data plane tests: a fresh loopback world and an in-process DataPlane."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from dataplane_world import (
    FAST,
    NODES,
    Node,
    World,
    _health_server,
    _tcp_backend,
    _UdpBackend,
    subnet,
)

from kccm.providers.local.dataplane.server import DataPlane
from kccm.providers.local.store import LocalStore
from kccm.testing.ports import free_port


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    net = subnet()
    nodes = {n: Node(n, f"{net}.{i + 1}") for i, n in enumerate(NODES)}
    vip = f"{net}.100"
    node_port = free_port(f"{net}.1")
    health_port = free_port(f"{net}.1")
    loop = asyncio.get_running_loop()
    for node in nodes.values():
        node.servers.append(await _tcp_backend(node, node_port))
        transport, _ = await loop.create_datagram_endpoint(
            lambda node=node: _UdpBackend(node.name),  # type: ignore[misc]
            local_addr=(node.address, node_port),
        )
        node.servers.append(transport)
        node.health = await _health_server(node, health_port)
    state_file = tmp_path / "state.db"
    store = LocalStore(state_file)
    w = World(store, state_file, nodes, vip, node_port, health_port)
    w.tcp_port, w.udp_port = free_port(vip), free_port(vip, socket.SOCK_DGRAM)
    yield w
    store.close()
    for node in nodes.values():
        for server in node.servers:
            server.close()
        if node.health is not None:
            node.health.close()
        await node.close_connections()


@pytest.fixture
async def plane(world: World) -> AsyncIterator[DataPlane]:
    dp = DataPlane(world.state_file, FAST)
    await dp.start()
    yield dp
    await dp.close()
