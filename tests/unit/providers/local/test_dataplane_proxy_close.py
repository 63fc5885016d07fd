"""A TCP listener of the local data plane that is closing refuses (resets) a connection whose
``connection_made`` only comes after ``close()``: accepted just before the listener closed,
it would otherwise be proxied to a backend and outlive the listener, never closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kccm.providers.local.dataplane.model import Backend, ListenerKey, ListenerSpec
from kccm.providers.local.dataplane.proxy import TcpListener, _ClientSide


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True

    def abort(self) -> None:
        self.aborted = True


def _listener() -> TcpListener:
    backend = Backend(node="n1", address="127.0.0.1", draining=False)
    spec = ListenerSpec(
        key=ListenerKey(vip="127.0.0.1", protocol="TCP", port=1),
        load_balancer="default/web",
        node_port=30080,
        backends=(backend,),
        source_ranges=(),
        client_ip_affinity=False,
    )
    return TcpListener(spec, lambda lb, node: True)


@pytest.mark.parametrize(
    ("closed", "proxied"),
    [
        pytest.param(False, True, id="open-listener-proxies"),
        pytest.param(True, False, id="closed-listener-resets-a-late-connection"),
    ],
)
async def test_a_connection_made_after_close_is_reset(closed: bool, proxied: bool) -> None:
    listener = _listener()
    if closed:
        await listener.close()
    transport = _Transport()
    _ClientSide(listener).connection_made(transport)
    assert (transport.aborted, bool(listener.connections)) == (not proxied, proxied)
    await listener.close()  # the open case's pending connect is cancelled
