"""kccm.testing.ports: a chosen port is outside the kernel's ephemeral range, claimed for this
process by a lock another chooser respects, bindable when handed out, never handed out twice.

Other processes (xdist workers) choose ports meanwhile, so the tests assert what must not be
handed out rather than which port comes next."""

from __future__ import annotations

import os
import socket
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.testing import ports


@pytest.fixture
def cursor_at() -> Iterator[list[int]]:
    """Where the next choice starts (restored afterwards)."""
    saved = list(ports._cursor)
    yield ports._cursor
    ports._cursor[:] = saved


def test_ports_come_from_below_the_ephemeral_and_node_port_ranges() -> None:
    low, high = ports.port_band()
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    chosen = [ports.free_port() for _ in range(20)]
    assert all(low <= port < high <= min(int(ephemeral[0]), 30000) for port in chosen), chosen


def test_one_process_never_hands_out_a_port_twice() -> None:
    chosen = [ports.free_port() for _ in range(50)]
    assert len(set(chosen)) == len(chosen)


def test_a_port_another_chooser_holds_is_skipped(cursor_at: list[int]) -> None:
    target = ports.after(ports.free_port())
    other = ports._claim(target)  # a lock holder of its own, as another process is
    if other is None:
        pytest.skip(f"port {target} is claimed by another process already")
    try:
        cursor_at[:] = [target]
        assert ports.free_port() != target
    finally:
        os.close(other)


@pytest.mark.parametrize("kind", [socket.SOCK_STREAM, socket.SOCK_DGRAM], ids=["tcp", "udp"])
def test_a_port_something_else_has_bound_is_skipped(cursor_at: list[int], kind: int) -> None:
    target = ports.after(ports.free_port())
    with socket.socket(socket.AF_INET, kind) as busy:
        try:
            busy.bind(("127.0.0.1", target))
        except OSError:
            pytest.skip(f"port {target} is bound by another process already")
        cursor_at[:] = [target]
        chosen = ports.free_port(kind=kind)
        assert chosen != target
        with socket.socket(socket.AF_INET, kind) as probe:
            probe.bind(("127.0.0.1", chosen))  # what was handed out is bindable


def test_the_claim_is_held_until_released(monkeypatch: pytest.MonkeyPatch) -> None:
    held: OrderedDict[int | str, int] = OrderedDict()  # this test's claims only
    monkeypatch.setattr(ports, "_held", held)
    monkeypatch.setattr(ports, "HELD_AT_MOST", 3)
    try:
        first = ports.free_port()
        fd = held[first]
        assert ports._claim(first) is None, "held by this process: another chooser must skip it"
        for _ in range(3):
            ports.free_port()
        assert first not in held, "the oldest claim is let go once too many are held"
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)  # its lock file closed: the flock is dropped
    finally:
        for fd in held.values():
            os.close(fd)


def test_a_loopback_net_is_claimed_and_never_handed_out_twice() -> None:
    nets = [ports.loopback_net((200, 201)) for _ in range(20)]
    assert len(set(nets)) == len(nets)
    assert all(n.startswith(("127.200.", "127.201.")) for n in nets), nets
    assert ports._claim(f"net-{nets[0]}") is None, "held: another process must skip it"
