"""The fake cloud's optional persistence: a JSON-lines journal of load balancer changes,
replayed at start, so balancers survive a restart of the process as a real cloud's do.

Lines are ``{"balancer": {...}}`` (created or changed), ``{"deleted": name}`` and
``{"hosts_list": n, "hosts": [...]}``: a host list is written once and balancers refer to it
as ``"hosts_ref": n`` (1,000 balancers over the same 5,000 nodes would otherwise write the
5,000 names 1,000 times). Journals with inline ``"hosts"`` in a balancer still replay.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from kccm.cloudprovider import LoadBalancerIPMode, NodeName, PortStatus
from kccm.providers.fake.model import FakeBalancer

__all__ = ["BalancerJournal", "replay_journal"]

_REMEMBERED_LISTS = 8


class BalancerJournal:
    """Appends changes to ``path``; the caller serialises calls (the cloud's lock)."""

    def __init__(self, path: Path, *, next_ref: int = 0) -> None:
        self.path = path
        self._refs: dict[int, tuple[Sequence[NodeName], int]] = {}
        """By ``id`` of the host list (the cloud hands every balancer of one list the same
        object; hashing a 10,000-name tuple per change would cost more than the write), with
        the list itself, so the id is not reused while remembered."""
        self._next_ref = next_ref

    def deleted(self, name: str) -> None:
        self._append([{"deleted": name}])

    def changed(self, balancer: FakeBalancer) -> None:
        entries: list[dict[str, Any]] = []
        hosts = balancer.hosts
        known = self._refs.pop(id(hosts), None)
        if known is None:
            ref = self._next_ref
            self._next_ref += 1
            entries.append({"hosts_list": ref, "hosts": list(hosts)})
        else:
            ref = known[1]
        self._refs[id(hosts)] = (hosts, ref)  # most recently used last
        while len(self._refs) > _REMEMBERED_LISTS:
            del self._refs[next(iter(self._refs))]
        entries.append(
            {
                "balancer": {
                    "name": balancer.name,
                    "service": balancer.service,
                    "ip": balancer.ip,
                    "ports": [[p.port, p.protocol] for p in balancer.ports],
                    "hosts_ref": ref,
                    "ip_mode": balancer.ip_mode.value,
                }
            }
        )
        self._append(entries)

    def _append(self, entries: list[dict[str, Any]]) -> None:
        with self.path.open("ab") as sink:
            sink.write(b"".join(msgspec.json.encode(e) + b"\n" for e in entries))


def replay_journal(path: Path) -> tuple[dict[str, FakeBalancer], int]:
    """The balancers ``path`` describes, and the next free host-list reference."""
    balancers: dict[str, FakeBalancer] = {}
    lists: dict[int, tuple[NodeName, ...]] = {}
    for entry in _entries(path):
        if "deleted" in entry:
            balancers.pop(str(entry["deleted"]), None)
        elif "hosts_list" in entry:
            lists[int(entry["hosts_list"])] = tuple(sorted(entry["hosts"]))
        else:
            raw = entry["balancer"]
            if "hosts_ref" in raw:  # shared: one tuple for every balancer of the list
                hosts = lists[int(raw["hosts_ref"])]
            else:
                hosts = tuple(sorted(raw["hosts"]))
            balancers[raw["name"]] = _balancer(raw, hosts)
    return balancers, max(lists, default=-1) + 1


def _entries(path: Path) -> Iterator[Mapping[str, Any]]:
    if path.exists():
        for line in path.read_bytes().splitlines():
            yield msgspec.json.decode(line)


def _balancer(raw: Mapping[str, Any], hosts: tuple[NodeName, ...]) -> FakeBalancer:
    ports = tuple(PortStatus(port=int(p[0]), protocol=str(p[1])) for p in raw["ports"])
    return FakeBalancer(
        raw["name"],
        raw["service"],
        raw["ip"],
        ports,
        hosts,
        LoadBalancerIPMode(raw.get("ip_mode", LoadBalancerIPMode.VIP.value)),
    )
