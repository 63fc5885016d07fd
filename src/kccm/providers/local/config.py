"""The local provider's cloud config (``[Global]``) and its VIP pool.

gcfg example::

    [Global]
    state-file = /var/lib/kccm/local.db   ; default: $KCCM_LOCAL_STATE, else XDG data dir
    vip-range = 127.0.20.0/24             ; CIDR or first-last, e.g. 127.0.20.10-127.0.20.99
    health-check-mode = kube-proxy        ; or tcp
    auto-adopt = true
    start-dataplane = true                ; initialize() starts `kccm local dataplane` if none runs
    dataplane-check-interval = 2          ; seconds between supervisor checks (restart if dead)
    zone = local-zone-a
    region = local
"""

# ruff: noqa: RUF009 - setting() is a dataclasses.field() factory

from __future__ import annotations

import functools
import ipaddress
import itertools
import math
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.config import load_cloud_config, setting

__all__ = [
    "DEFAULT_VIP_RANGE",
    "HEALTH_CHECK_MODES",
    "LocalCloudConfig",
    "LocalGlobalConfig",
    "VipPool",
    "load_local_config",
    "pool_problems",
]

DEFAULT_VIP_RANGE = "127.0.20.0/24"
MIN_CHECK_INTERVAL, MAX_CHECK_INTERVAL = 0.1, 3600.0
MAX_POOL_SIZE = 65536
HEALTH_CHECK_MODES = ("kube-proxy", "tcp")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class LocalGlobalConfig:
    """``[Global]`` of the local provider's cloud config."""

    state_file: str = ""
    """SQLite state file; empty: ``$KCCM_LOCAL_STATE``, else the user's data directory."""
    vip_range: str = DEFAULT_VIP_RANGE
    """Load-balancer VIPs: a CIDR (network and broadcast excluded) or ``first-last``."""
    health_check_mode: str = "kube-proxy"
    """``kube-proxy``: kube-proxy's /healthz (or healthCheckNodePort); ``tcp``: TCP connect."""
    auto_adopt: bool = False
    """A Node without an instance becomes one, from its reported addresses."""
    start_dataplane: bool = True
    """The provider starts the data plane (detached) at initialization unless one is running;
    ``false`` when it runs separately (e.g. as a systemd unit)."""
    dataplane_check_interval: float = 2.0
    """Seconds between the provider's checks that the data plane it started still runs (a
    dead one is started again)."""
    zone: str = "local-zone-a"
    region: str = "local"
    instance_type: str = "local.standard"


@dataclass(frozen=True)
class LocalCloudConfig:
    global_: LocalGlobalConfig = setting(default_factory=LocalGlobalConfig)


@dataclass(frozen=True)
class VipPool:
    """An inclusive range of addresses VIPs are allocated from, lowest first."""

    first: IPAddress
    last: IPAddress

    @classmethod
    def parse(cls, text: str) -> VipPool:
        """``a.b.c.d/nn`` (hosts only) or ``first-last``; raises ValueError."""
        text = text.strip()
        if "-" in text:
            low, _, high = text.partition("-")
            first, last = ipaddress.ip_address(low.strip()), ipaddress.ip_address(high.strip())
        else:
            network = ipaddress.ip_network(text, strict=False)
            hosts = list(_ends(network))
            first, last = hosts[0], hosts[-1]
        if first.version != last.version or first > last:  # type: ignore[operator]
            raise ValueError(f"{text!r} is not a range (first-last, first <= last)")
        return cls(first, last)

    def __contains__(self, ip: object) -> bool:
        try:
            address = ipaddress.ip_address(str(ip))
        except ValueError:
            return False
        return address.version == self.first.version and self.first <= address <= self.last  # type: ignore[operator]

    def addresses(self) -> Iterator[str]:
        """Every address, lowest first (formatted once per pool and kept: a VIP claim walks
        the pool from its start, 3,000 claims 4.5 million steps)."""
        return iter(_address_list(self.first, self.last))

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


class _AddressList:
    """A pool's addresses as strings, formatted as far as iteration reached and kept (at most
    :data:`MAX_POOL_SIZE`; past that formatted anew each time). Thread-safe."""

    CHUNK = 256

    def __init__(self, first: IPAddress, last: IPAddress) -> None:
        self._first, self._last = first, last
        self._kept: list[str] = []
        self._lock = threading.Lock()

    def _grow(self) -> bool:
        with self._lock:
            start = self._first + len(self._kept)
            count = min(self.CHUNK, int(self._last) - int(start) + 1)
            if count <= 0 or len(self._kept) >= MAX_POOL_SIZE:
                return False
            self._kept.extend(str(start + i) for i in range(count))
        return True

    def __iter__(self) -> Iterator[str]:
        index = 0
        while index < len(self._kept) or self._grow():
            end = len(self._kept)  # the list is only appended to
            yield from itertools.islice(self._kept, index, end)
            index = end
        current = self._first + index
        while current <= self._last:  # type: ignore[operator]
            yield str(current)
            current = current + 1


@functools.lru_cache(maxsize=8)
def _address_list(first: IPAddress, last: IPAddress) -> _AddressList:
    return _AddressList(first, last)


def _ends(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> Iterator[IPAddress]:
    if network.num_addresses <= 2:
        yield network[0]
        yield network[-1]
        return
    yield network[1]
    yield network[-2] if network.version == 4 else network[-1]


def _bindable(ip: IPAddress) -> bool:
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((str(ip), 0))
    except OSError:
        return False
    return True


def pool_problems(pool: VipPool, bindable: Callable[[IPAddress], bool] = _bindable) -> list[str]:
    """Why ``pool`` cannot serve as VIPs: unspecified or multicast ends, too many addresses,
    or addresses this machine does not have (loopback ranges are always local)."""
    problems = []
    for ip in dict.fromkeys((pool.first, pool.last)):
        if ip.is_unspecified:
            problems.append(f"{ip} is the unspecified address (it means every address)")
        elif ip.is_multicast:
            problems.append(f"{ip} is a multicast address")
    size = int(pool.last) - int(pool.first) + 1
    if size > MAX_POOL_SIZE:
        problems.append(f"{size} addresses; a pool has at most {MAX_POOL_SIZE}")
    if problems or (pool.first.is_loopback and pool.last.is_loopback):
        return problems
    foreign = [str(ip) for ip in dict.fromkeys((pool.first, pool.last)) if not bindable(ip)]
    if foreign:
        problems.append(
            f"{', '.join(foreign)} is not an address of this machine (it cannot be bound); "
            f"use local addresses, e.g. the default {DEFAULT_VIP_RANGE}"
        )
    return problems


def _validate(config: LocalCloudConfig) -> list[str]:
    glob = config.global_
    issues = []
    try:
        pool = VipPool.parse(glob.vip_range)
    except ValueError as err:
        issues.append(f"[Global] vip-range: {err}")
    else:
        shown = glob.vip_range.strip()
        issues += [f"[Global] vip-range {shown!r}: {p}" for p in pool_problems(pool)]
    interval = glob.dataplane_check_interval
    if not (math.isfinite(interval) and MIN_CHECK_INTERVAL <= interval <= MAX_CHECK_INTERVAL):
        issues.append(
            f"[Global] dataplane-check-interval: {interval} is not a number of seconds from "
            f"{MIN_CHECK_INTERVAL} to {MAX_CHECK_INTERVAL}"
        )
    if glob.health_check_mode not in HEALTH_CHECK_MODES:
        issues.append(
            f"[Global] health-check-mode: {glob.health_check_mode!r} is not one of "
            f"{', '.join(HEALTH_CHECK_MODES)}"
        )
    return issues


def load_local_config(stream: TextIO | str | None) -> LocalCloudConfig:
    """Parse and check the cloud config (``None``: every default)."""
    config = load_cloud_config(stream, LocalCloudConfig)
    issues = _validate(config)
    if issues:
        raise CloudConfigError(issues)
    return config
