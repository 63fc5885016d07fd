"""The local data plane end to end on loopback, running in this event loop (``DataPlane``):
real TCP/UDP backends, a real state file written with the local provider's own store
(:class:`kccm.providers.local.store.LocalStore`); no API server.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from dataplane_world import (
    FAST,
    NODES,
    WAIT,
    World,
    all_checked,
    ask_tcp,
    refused,
    udp_client,
    until_listening,
)

from kccm.providers.local.dataplane.server import DataPlane, DataplaneBusyError

# --- in-process data plane -------------------------------------------------------------


async def test_tcp_and_udp_spread_across_backends(world: World, plane: DataPlane) -> None:
    world.put_lb()
    await until_listening(plane, 2)
    seen = Counter([await ask_tcp(world.vip, world.tcp_port) for _ in range(30)])
    assert set(seen) == set(NODES), seen
    udp_seen: Counter[str] = Counter()
    for _ in range(30):
        async with udp_client(world.vip, world.udp_port) as ask:
            udp_seen[await ask(b"ping")] += 1
    assert set(udp_seen) == set(NODES), udp_seen


async def test_unhealthy_backend_is_taken_out_and_recorded(world: World, plane: DataPlane) -> None:
    world.put_lb()
    await until_listening(plane, 2)
    await all_checked(plane, "lb-a")
    await world.health_down("n3")
    await asyncio.wait_for(
        plane.health.wait_for(lambda: not plane.health.usable("lb-a", "n3")), WAIT
    )
    seen = {await ask_tcp(world.vip, world.tcp_port) for _ in range(30)}
    assert seen == {"n1", "n2"}
    await plane.flush()
    rows = {(h.node, h.healthy) for h in world.store.list_backend_health()}
    assert rows == {("n1", True), ("n2", True), ("n3", False)}
    await world.health_up("n3")
    await asyncio.wait_for(plane.health.wait_for(lambda: plane.health.usable("lb-a", "n3")), WAIT)
    assert {await ask_tcp(world.vip, world.tcp_port) for _ in range(30)} == set(NODES)


async def test_no_healthy_backend_refuses_tcp_and_drops_udp(world: World, plane: DataPlane) -> None:
    world.put_lb()
    await until_listening(plane, 2)
    for name in NODES:
        await world.health_down(name)

    def none_usable() -> bool:
        return not any(plane.health.usable("lb-a", n) for n in NODES)

    await asyncio.wait_for(plane.health.wait_for(none_usable), WAIT)
    assert await refused(world.vip, world.tcp_port)
    async with udp_client(world.vip, world.udp_port) as ask:
        with pytest.raises(TimeoutError):
            await ask(b"dropped", wait=0.3)


@pytest.mark.parametrize(
    ("ranges", "source", "allowed"),
    [
        pytest.param(("127.0.0.2/32",), "127.0.0.2", True, id="inside"),
        pytest.param(("127.0.0.2/32",), "127.0.0.3", False, id="outside"),
        pytest.param(("10.0.0.0/8", "127.0.0.0/30"), "127.0.0.3", True, id="second-range"),
    ],
)
async def test_source_ranges_enforced(
    world: World, plane: DataPlane, ranges: tuple[str, ...], source: str, allowed: bool
) -> None:
    world.put_lb(ranges=ranges)
    await until_listening(plane, 2)
    assert await refused(world.vip, world.tcp_port, source) is not allowed
    async with udp_client(world.vip, world.udp_port, source) as ask:
        if allowed:
            assert await ask(b"hi") in NODES
        else:
            with pytest.raises(TimeoutError):
                await ask(b"hi", wait=0.3)


async def test_client_ip_affinity_is_sticky(world: World, plane: DataPlane) -> None:
    world.put_lb(affinity="ClientIP")
    await until_listening(plane, 2)
    by_source = {}
    for i in range(2, 40):
        source = f"127.0.0.{i}"
        picks = {await ask_tcp(world.vip, world.tcp_port, source) for _ in range(3)}
        assert len(picks) == 1, (source, picks)
        by_source[source] = picks.pop()
    assert len(set(by_source.values())) > 1
    async with udp_client(world.vip, world.udp_port, "127.0.0.7") as ask:
        assert await ask(b"x") == by_source["127.0.0.7"]


async def test_backend_change_keeps_a_long_lived_stream(world: World, plane: DataPlane) -> None:
    world.put_lb(udp=False)
    await until_listening(plane, 1)
    reader, writer = await asyncio.open_connection(world.vip, world.tcp_port)
    owner = (await reader.readline()).decode().strip()
    others = tuple(n for n in NODES if n != owner)
    listener = plane.listeners[next(iter(plane.listeners))]
    world.put_lb(nodes=others, udp=False)
    await asyncio.wait_for(
        plane.wait_reconciled(lambda: len(listener.spec.backends) == len(others)), WAIT
    )
    assert plane.listeners[listener.spec.key] is listener
    for i in range(20):
        payload = f"chunk {i}\n".encode()
        writer.write(payload)
        assert await asyncio.wait_for(reader.readexactly(len(payload)), 10) == payload
    assert {await ask_tcp(world.vip, world.tcp_port) for _ in range(12)} == set(others)
    writer.close()


async def test_deleted_load_balancer_closes_its_listener(world: World, plane: DataPlane) -> None:
    world.put_lb(udp=False)
    await until_listening(plane, 1)
    assert await ask_tcp(world.vip, world.tcp_port) in NODES
    world.store.delete_load_balancer("lb-a", "default/lb-a", keep_claim=False)
    await until_listening(plane, 0)
    assert await refused(world.vip, world.tcp_port)


async def test_thousand_connections_and_datagrams_while_state_changes(
    world: World, plane: DataPlane
) -> None:
    """Issue 7's acceptance on the data plane: zero failures while other LBs change."""
    world.put_lb()
    other_vip = world.vip.rsplit(".", 1)[0] + ".101"
    await until_listening(plane, 2)
    stop = asyncio.Event()

    async def writer() -> int:
        changes = 0
        while not stop.is_set():
            subset = NODES[: 1 + changes % 3]
            await asyncio.to_thread(world.put_lb, "lb-other", nodes=subset, vip=other_vip)
            changes += 1
            await asyncio.sleep(0.02)
        return changes

    async def tcp_load(worker: int) -> int:
        ok = 0
        for _ in range(50):
            ok += await ask_tcp(world.vip, world.tcp_port) in NODES
        return ok

    async def udp_load(worker: int) -> int:
        ok = 0
        async with udp_client(world.vip, world.udp_port) as ask:
            for i in range(100):
                ok += await ask(f"{worker}-{i}".encode()) in NODES
        return ok

    changes = asyncio.create_task(writer())
    tcp = await asyncio.gather(*(tcp_load(w) for w in range(20)))
    udp = await asyncio.gather(*(udp_load(w) for w in range(10)))
    stop.set()
    assert sum(tcp) == 1000
    assert sum(udp) == 1000
    assert await changes > 5


async def test_refusing_backend_is_skipped(world: World, plane: DataPlane) -> None:
    """Health still says yes, the nodePort says no: the next backend takes the connection."""
    world.put_lb(udp=False)
    await until_listening(plane, 1)
    await all_checked(plane, "lb-a")
    tcp_backend = world.nodes["n3"].servers[0]
    tcp_backend.close()
    await tcp_backend.wait_closed()
    assert plane.health.usable("lb-a", "n3")
    assert {await ask_tcp(world.vip, world.tcp_port) for _ in range(30)} == {"n1", "n2"}


async def test_second_data_plane_is_refused(world: World, plane: DataPlane) -> None:
    other = DataPlane(world.state_file, FAST, pid=plane.pid + 1)
    with pytest.raises(DataplaneBusyError, match=f"pid {plane.pid}"):
        await other.start()
