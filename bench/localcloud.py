"""The local provider's cloud for the benches (bench/economy.py, bench/scale.py), one place.

:func:`local_cloud` writes a SQLite state file that knows an instance (InternalIP) for
every Node, and a cloud config with a loopback VIP range big enough for ``services``
balancers; it returns the config and the daemon's extra flags
(``--configure-cloud-routes=false``: the bench Nodes have no pod CIDRs, as the fake's
config disables routes). ``dataplane=False`` (economy.py's way) sets
``start-dataplane = false``: the daemon only writes the store; ``True`` lets the provider
start and supervise its data plane, whose pid :func:`dataplane_pid` reads from the state
file's heartbeat.
"""

from __future__ import annotations

import ipaddress
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from proc import cpu_seconds, rss_mib  # bench/ is on sys.path when run as a script

from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.store import InstanceRecord, LocalStore

VIP_BASE = "127.0.64.0"


def vip_range(services: int) -> str:
    """A loopback CIDR from :data:`VIP_BASE` with room for ``services`` VIPs (at least a /20,
    the range economy.py always used)."""
    prefix = 20
    while (1 << (32 - prefix)) - 2 < services:
        prefix -= 1
    return str(ipaddress.ip_network(f"{VIP_BASE}/{prefix}", strict=False))


def local_cloud(
    tmp: Path,
    names: Sequence[str],
    ip_of: Callable[[int], str],
    *,
    services: int,
    dataplane: bool = False,
) -> tuple[Path, list[str]]:
    """(cloud config, extra daemon flags) for a local cloud knowing every node in ``names``
    (node ``i`` at InternalIP ``ip_of(i)``)."""
    state = tmp / "local.db"
    with LocalStore(state) as store:
        for i, name in enumerate(names):
            store.add_instance(InstanceRecord(name, (("InternalIP", ip_of(i)),)))
    config = tmp / "local.conf"
    config.write_text(
        f"[Global]\nstate-file = {state}\nvip-range = {vip_range(services)}\n"
        f"start-dataplane = {'true' if dataplane else 'false'}\n"
    )
    return config, ["--configure-cloud-routes=false"]


def state_file_of(config: Path) -> Path:
    for line in config.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "state-file":
            return Path(value.strip())
    raise ValueError(f"{config} names no state-file")


def dataplane_pid(config: Path) -> int | None:
    """The pid of the data plane heartbeating in the config's state file, if one lives."""
    beat = live_dataplane(state_file_of(config))
    return None if beat is None else beat.pid


def local_figures(config: Path, dataplane: bool) -> list[tuple[str, str]]:
    """The state file's size; with a data plane, its RSS and CPU seconds."""
    state = state_file_of(config)
    size = sum(p.stat().st_size for p in state.parent.glob(state.name + "*"))
    rows = [("local state file (+ WAL)", f"{size / 2**20:.1f} MiB")]
    pid = dataplane_pid(config) if dataplane else None
    if pid is not None:
        figure = f"RSS {rss_mib(pid):.0f} MiB, {cpu_seconds(pid):.1f} CPU-s"
        rows.append(("local data plane process", figure))
    return rows


def stop_dataplane(config: Path) -> None:
    """The data plane outlives kccm by design: SIGTERM the one serving this state file."""
    pid = dataplane_pid(config)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
