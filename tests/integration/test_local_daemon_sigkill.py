"""Issue 7's acceptance with the real daemon: ≥1000 TCP connections and ≥1000 UDP datagrams
through one VIP of the local provider while the kccm daemon is SIGKILLed and restarted over
and over — zero failures, because the data plane is its own process."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from kccm.devtools.demo import kubelet_node
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.store import InstanceRecord, LocalStore
from kccm.testing.controllers import delete_until_gone
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import daemon_args, daemon_env
from kccm.testing.ports import free_port, loopback_net
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

# nodePorts asked for explicitly come from the range's static band (30000-30085 for the
# default range): the apiserver hands out ports of the upper band to the session's other
# Services first (they outlive their tests: namespaces never finish terminating here), so a
# fixed port there may already be taken. kccm dev demo uses 30080 on its own apiserver.
TCP_NODE_PORT, UDP_NODE_PORT, HEALTH_PORT = 30061, 30062, 10256
DP_NODE_PORT = 30063
TCP_CONNECTIONS, UDP_DATAGRAMS = 1000, 1000
STARTED = "serves "  # the provider's "data plane pid N serves <state file>" log line


class _Echo(asyncio.DatagramProtocol):
    def __init__(self, name: str) -> None:
        self.name = name.encode()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        assert self.transport is not None
        self.transport.sendto(self.name + b":" + data, addr)


async def _node_servers(name: str, address: str, tcp_port: int = TCP_NODE_PORT) -> list[Any]:
    async def tcp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(name.encode() + b"\n")
        await writer.drain()
        writer.close()

    async def health(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        writer.close()

    loop = asyncio.get_running_loop()
    udp, _ = await loop.create_datagram_endpoint(
        lambda: _Echo(name), local_addr=(address, UDP_NODE_PORT)
    )
    return [
        await asyncio.start_server(tcp, address, tcp_port),
        await asyncio.start_server(health, address, HEALTH_PORT),
        udp,
    ]


def _daemon(kubeconfig: Path, cloud_config: Path, log: Path) -> subprocess.Popen[bytes]:
    args = daemon_args(
        "local",
        cloud_config,
        kubeconfig,
        free_port(),
        "--leader-elect=false",
        "--controllers=*,-route",
        "--node-monitor-period=1s",
    )
    with log.open("ab") as sink:  # one log across restarts
        return subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT, env=daemon_env())


async def _tcp_once(vip: str) -> str:
    async with asyncio.timeout(5):
        reader, writer = await asyncio.open_connection(vip, 80)
        line = await reader.readline()
        writer.close()
    return line.decode().strip()


class _Client(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.answers: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self.answers.put_nowait(data)


async def _udp_worker(vip: str, worker: int, count: int) -> int:
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_datagram_endpoint(_Client, remote_addr=(vip, 53))
    ok = 0
    try:
        for i in range(count):
            payload = f"{worker}-{i}".encode()
            transport.sendto(payload)
            async with asyncio.timeout(5):
                answer = await client.answers.get()
            ok += answer.endswith(b":" + payload)
    finally:
        transport.close()
    return ok


_eventually = functools.partial(shared_eventually, within=60.0, interval=0.2)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


@pytest.fixture
async def dataplane_stopper(tmp_path: Path) -> AsyncIterator[Path]:
    state = tmp_path / "state.db"
    yield state
    beat = live_dataplane(state)
    if beat is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(beat.pid, signal.SIGTERM)


async def test_traffic_survives_daemon_sigkill_and_restart(
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
    dataplane_stopper: Path,
) -> None:
    net = loopback_net((40, 90))
    nodes = {unique_name("sk"): f"{net}.{i + 1}" for i in range(3)}
    store = LocalStore(dataplane_stopper)
    servers = []
    for name, address in nodes.items():
        store.add_instance(InstanceRecord(name, (("InternalIP", address),)))
        servers += await _node_servers(name, address)
    store.close()
    cloud_config = tmp_path / "cloud.conf"
    cloud_config.write_text(
        f"[Global]\nstate-file = {dataplane_stopper}\nvip-range = {net}.200-{net}.250\n"
    )
    log = tmp_path / "kccm.log"
    daemon = _daemon(control_plane.admin_kubeconfig, cloud_config, log)
    try:
        for i, (name, address) in enumerate(nodes.items()):
            kube_cleanup.add(NODES, name)
            await kube.create(NODES, kubelet_node(name, address, f"10.245.{i}.0/24"))
        svc = unique_name("sk-lb")
        await kube.create(
            SERVICES,
            {
                "metadata": {"name": svc, "namespace": kube_namespace},
                "spec": {
                    "type": "LoadBalancer",
                    "ports": [
                        {"name": "tcp", "protocol": "TCP", "port": 80, "nodePort": TCP_NODE_PORT},
                        {"name": "udp", "protocol": "UDP", "port": 53, "nodePort": UDP_NODE_PORT},
                    ],
                },
            },
        )

        async def vip() -> str | None:
            got = await kube.get(SERVICES, svc, namespace=kube_namespace)
            ingress = (got.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
            return str(ingress[0]["ip"]) if ingress else None

        address = await _eventually(vip)
        assert await _eventually(lambda: _tcp_once_or_none(address)) in nodes

        stop = asyncio.Event()
        kills = 0

        async def killer() -> None:
            nonlocal daemon, kills
            while not stop.is_set():
                # kill each incarnation once it is up (it logged its data plane), not on a timer
                await _eventually(lambda count=kills + 1: _started(log, count))
                daemon.send_signal(signal.SIGKILL)
                await asyncio.to_thread(daemon.wait)
                kills += 1
                daemon = _daemon(control_plane.admin_kubeconfig, cloud_config, log)

        killing = asyncio.create_task(killer())
        sent = ok_tcp = ok_udp = 0
        while sent == 0 or kills < 2:  # rounds of 1000 + 1000 until the daemon died twice
            tcp = await asyncio.gather(
                *(_tcp_batch(address, TCP_CONNECTIONS // 20) for _ in range(20)),
                *(_udp_worker(address, w, UDP_DATAGRAMS // 10) for w in range(10)),
            )
            ok_tcp, ok_udp = ok_tcp + sum(tcp[:20]), ok_udp + sum(tcp[20:])
            sent += 1
        stop.set()
        await killing
        print(
            f"\n{sent * TCP_CONNECTIONS} TCP + {sent * UDP_DATAGRAMS} UDP through {address} "
            f"while kccm was SIGKILLed and restarted {kills} times"
        )
        assert (ok_tcp, ok_udp) == (sent * TCP_CONNECTIONS, sent * UDP_DATAGRAMS)
        assert kills >= 2
        await delete_until_gone(kube, SERVICES, [svc], kube_namespace)  # while kccm runs
    finally:
        daemon.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(daemon.wait, 30)
        for server in servers:
            server.close()


async def _started(log: Path, count: int) -> bool:
    """At least ``count`` daemons have initialised the provider (each logs its data plane)."""
    text = await asyncio.to_thread(log.read_text, errors="replace")
    return text.count(STARTED) >= count


async def _tcp_once_or_none(vip: str) -> str | None:
    try:
        return await _tcp_once(vip)
    except (OSError, TimeoutError):
        return None


async def _tcp_batch(vip: str, count: int) -> int:
    ok = 0
    for _ in range(count):
        with contextlib.suppress(OSError, TimeoutError):
            ok += bool(await _tcp_once(vip))
    return ok


async def test_a_dead_data_plane_is_restarted_while_kccm_runs(
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
    dataplane_stopper: Path,
) -> None:
    """Issue 13, point 4: SIGKILL the data plane the daemon started; the provider's supervisor
    starts a new one (another pid) and the VIP serves again, without restarting kccm."""
    net = loopback_net((91, 140))
    name, address = unique_name("dp"), f"{net}.1"
    store = LocalStore(dataplane_stopper)
    store.add_instance(InstanceRecord(name, (("InternalIP", address),)))
    store.close()
    servers = await _node_servers(name, address, DP_NODE_PORT)
    cloud_config = tmp_path / "cloud.conf"
    cloud_config.write_text(
        f"[Global]\nstate-file = {dataplane_stopper}\nvip-range = {net}.200-{net}.250\n"
        "dataplane-check-interval = 0.5\n"
    )
    log = tmp_path / "kccm.log"
    daemon = _daemon(control_plane.admin_kubeconfig, cloud_config, log)
    try:
        kube_cleanup.add(NODES, name)
        await kube.create(NODES, kubelet_node(name, address, "10.246.0.0/24"))
        svc = unique_name("dp-lb")
        port = {"name": "tcp", "protocol": "TCP", "port": 80, "nodePort": DP_NODE_PORT}
        await kube.create(
            SERVICES,
            {
                "metadata": {"name": svc, "namespace": kube_namespace},
                "spec": {"type": "LoadBalancer", "ports": [port]},
            },
        )

        async def vip() -> str | None:
            got = await kube.get(SERVICES, svc, namespace=kube_namespace)
            ingress = (got.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
            return str(ingress[0]["ip"]) if ingress else None

        address_vip = await _eventually(vip)
        assert await _eventually(lambda: _tcp_once_or_none(address_vip)) == name
        first = live_dataplane(dataplane_stopper)
        assert first is not None
        os.kill(first.pid, signal.SIGKILL)

        async def replaced() -> int | None:
            beat = live_dataplane(dataplane_stopper)
            return beat.pid if beat is not None and beat.pid != first.pid else None

        second = await _eventually(replaced)
        assert second != first.pid
        assert await _eventually(lambda: _tcp_once_or_none(address_vip)) == name
        assert daemon.poll() is None  # kccm itself was never restarted
        text = await asyncio.to_thread(log.read_text, errors="replace")
        assert f"is not running (last pid {first.pid}): starting a new one" in text
        await delete_until_gone(kube, SERVICES, [svc], kube_namespace)  # while kccm runs
    finally:
        daemon.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(daemon.wait, 30)
        for server in servers:
            server.close()
