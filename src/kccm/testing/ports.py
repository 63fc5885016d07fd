"""Loopback ports that nothing can take between the moment a test chooses one and the moment
its server (often a child process: etcd, kube-apiserver, a kccm daemon, moto) binds it.

``bind(port 0)`` then ``close()`` hands out a port from the kernel's ephemeral range, which
the kernel gives the next outgoing connection or ``bind(0)`` of any process, so a parallel
test, worker or client could bind it first. Here a port is instead:

- taken from a band *below* the ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``)
  and below the Services' nodePort range (30000-32767), so the kernel never hands it out on
  its own;
- claimed with an exclusive ``flock`` on ``/tmp/kccm-ports/<port>`` (``$KCCM_PORTS_DIR``;
  fixed, not ``$TMPDIR``, so a test that gives its children a TMPDIR of their own still
  shares it) that this process holds until it exits (the kernel drops it even on SIGKILL),
  so no other process choosing here (pytest-xdist workers, a CI step beside the tests, a
  benchmark) picks it;
- bindable right now on the asked address and protocol (a foreign program may hold it);
- never handed out twice by one process.

:func:`loopback_net` does the same for a ``127.X.Y.0/24`` of the test's own (addresses a test
binds several servers on, e.g. the local provider's nodes and VIPs), out of ``127.0.0.0/16``.

Choices come from the system's randomness, not :mod:`random`, which pytest-randomly re-seeds
alike in every worker before every test.

The claims this process holds are bounded (:data:`HELD_AT_MOST`): the oldest is released
when that many are held, long after its server bound it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import threading
from collections import OrderedDict
from pathlib import Path

__all__ = ["HELD_AT_MOST", "PortsExhausted", "after", "free_port", "loopback_net", "port_band"]

BAND = (20000, 30000)
"""The band ports are chosen from: below Kubernetes' nodePort range and (checked) below the
kernel's ephemeral range."""
HELD_AT_MOST = 2048
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")

_lock = threading.Lock()
_held: OrderedDict[int | str, int] = OrderedDict()  # port or net -> the fd holding its flock
_random = random.SystemRandom()
_cursor: list[int] = []


class PortsExhausted(RuntimeError):
    """Every port of the band is claimed or bound."""


def port_band() -> tuple[int, int]:
    """``[low, high)``: :data:`BAND` cut below the kernel's ephemeral range if it reaches in;
    where the ephemeral range starts lower still (some containers use 1024-65535), the ports
    above it, else :data:`BAND` as it is (the locks still keep choosers apart)."""
    low, high = BAND
    with contextlib.suppress(OSError, ValueError, IndexError):
        ephemeral_low, ephemeral_high = (int(v) for v in _EPHEMERAL.read_text().split()[:2])
        if ephemeral_low - low >= 100:
            high = min(high, ephemeral_low)
        elif 65536 - (ephemeral_high + 1) >= 100:
            low, high = ephemeral_high + 1, 65536
    return low, high


def after(port: int, band: tuple[int, int] | None = None) -> int:
    """The port tried after ``port`` (the band wraps around)."""
    low, high = band or port_band()
    return low + (port + 1 - low) % (high - low)


def _lock_dir() -> Path:
    directory = Path(os.environ.get("KCCM_PORTS_DIR", "/tmp/kccm-ports"))
    directory.mkdir(mode=0o1777, parents=True, exist_ok=True)
    return directory


def _claim(what: int | str) -> int | None:
    """The fd holding ``what``'s lock (a port or a net), or None when another process
    holds it."""
    fd = os.open(_lock_dir() / str(what), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _bindable(host: str, port: int, kind: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, kind) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _release_oldest() -> None:
    while len(_held) >= HELD_AT_MOST:
        _, fd = _held.popitem(last=False)
        os.close(fd)  # closing drops the flock


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port free on ``host`` for ``kind`` (TCP by default), claimed for this process."""
    low, high = port_band()
    with _lock:
        if not _cursor:
            _cursor.append(_random.randrange(low, high))
        for _ in range(high - low):
            port = _cursor[0]
            _cursor[0] = after(port, (low, high))
            if port in _held:
                continue
            fd = _claim(port)
            if fd is None:
                continue
            if not _bindable(host, port, kind):
                os.close(fd)
                continue
            _release_oldest()
            _held[port] = fd
            return port
    raise PortsExhausted(f"every port in [{low}, {high}) is claimed or bound")


def loopback_net(second: tuple[int, int] = (1, 250)) -> str:
    """``"127.X.Y"``: a /24 of the loopback range claimed for this process, ``X`` drawn from
    ``second`` (inclusive)."""
    with _lock:
        for _ in range(10_000):
            net = f"127.{_random.randint(*second)}.{_random.randint(1, 250)}"
            if net in _held:
                continue
            fd = _claim(f"net-{net}")
            if fd is None:
                continue
            _release_oldest()
            _held[net] = fd
            return net
    raise PortsExhausted(f"no free 127.X.Y.0/24 with X in {second}")
