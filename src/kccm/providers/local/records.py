"""The local provider's records (instances, load balancers, IP claims, routes, health), the
state file's location and the store's errors; :mod:`.store` keeps them in SQLite."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kccm.providers.local.backendsets import canonical_text
from kccm.providers.local.backendsets import dumps as _dumps

__all__ = [
    "BUSY_TIMEOUT_MS",
    "ENV_STATE_FILE",
    "STATE_FILE_MODE",
    "BackendHealth",
    "DataplaneHeartbeat",
    "IPClaim",
    "IPUnavailable",
    "InstanceExists",
    "InstanceRecord",
    "LoadBalancerRecord",
    "PoolExhausted",
    "RouteRecord",
    "SchemaTooNew",
    "StoreError",
    "UnknownInstance",
    "default_state_path",
    "private_file",
    "resolve_state_path",
]

ENV_STATE_FILE = "KCCM_LOCAL_STATE"
BUSY_TIMEOUT_MS = 5000
_RUNNING, _STOPPED = "running", "stopped"


class StoreError(Exception):
    """A failure of the local state that a user can act on (message says how)."""


class SchemaTooNew(StoreError):
    """The file was written by a newer kccm whose schema this one does not know."""


class UnknownInstance(StoreError, LookupError):
    """No instance by that name."""


class InstanceExists(StoreError):
    """An instance by that name already exists."""


class IPUnavailable(StoreError):
    """A VIP cannot be claimed: taken by another Service, outside the pool, or pool empty."""


class PoolExhausted(IPUnavailable):
    """Every address of the VIP pool is claimed."""


STATE_FILE_MODE = 0o600


def private_file(path: Path) -> None:
    """Create ``path`` (and missing parent directories, 0700) readable by its owner only, or
    tighten an existing one of ours to 0600: the state names every machine and Service.
    SQLite gives its -wal and -shm files the database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, STATE_FILE_MODE)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            os.fchmod(fd, STATE_FILE_MODE)
    finally:
        os.close(fd)


def default_state_path() -> Path:
    """``${XDG_DATA_HOME:-~/.local/share}/kccm/local/state.db``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kccm" / "local" / "state.db"


def resolve_state_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The state file: ``explicit`` (cloud config or ``--state-file``), else
    ``$KCCM_LOCAL_STATE``, else :func:`default_state_path`."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_STATE_FILE)
    return Path(env).expanduser() if env else default_state_path()


# -- records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstanceRecord:
    """A row of ``instances``; ``addresses`` are ``(type, address)`` pairs."""

    name: str
    addresses: tuple[tuple[str, str], ...] = ()
    instance_type: str = "local.standard"
    zone: str = "local-zone-a"
    region: str = "local"
    state: str = _RUNNING
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def provider_id(self) -> str:
        return f"local://{self.name}"

    @property
    def running(self) -> bool:
        return self.state == _RUNNING


@dataclass(frozen=True)
class LoadBalancerRecord:
    """A row of ``load_balancers``; the JSON columns are decoded."""

    name: str
    service: str
    service_uid: str
    vip: str
    ports: tuple[Mapping[str, Any], ...]
    backends: tuple[Mapping[str, Any], ...]
    health: Mapping[str, Any]
    source_ranges: tuple[str, ...] = ("0.0.0.0/0",)
    session_affinity: str = "None"
    generation: int = 0
    updated_at: float = 0.0

    def same_spec(self, other: LoadBalancerRecord) -> bool:
        """True when the two describe the same desired state (ignoring bookkeeping)."""
        return _spec_key(self) == _spec_key(other)


def _spec_key(lb: LoadBalancerRecord) -> tuple[Any, ...]:
    return (
        lb.name,
        lb.service,
        lb.service_uid,
        lb.vip,
        _dumps(lb.ports),
        canonical_text(lb.backends),
        _dumps(lb.health),
        tuple(lb.source_ranges),
        lb.session_affinity,
    )


@dataclass(frozen=True)
class IPClaim:
    ip: str
    owner: str
    retain: bool
    claimed_at: float


@dataclass(frozen=True)
class RouteRecord:
    name: str
    cluster: str
    target_node: str
    destination_cidr: str
    blackhole: bool = False
    created_at: float = 0.0


@dataclass(frozen=True)
class BackendHealth:
    load_balancer: str
    node: str
    healthy: bool
    checked_at: float
    detail: str = ""


@dataclass(frozen=True)
class DataplaneHeartbeat:
    pid: int
    heartbeat_at: float


# -- rows to records ---------------------------------------------------------------------------


def _instance(row: sqlite3.Row) -> InstanceRecord:
    addresses = tuple((str(a["type"]), str(a["address"])) for a in json.loads(row["addresses"]))
    return InstanceRecord(
        name=row["name"],
        addresses=addresses,
        instance_type=row["instance_type"],
        zone=row["zone"],
        region=row["region"],
        state=row["state"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _balancer(row: sqlite3.Row, backends: tuple[Mapping[str, Any], ...]) -> LoadBalancerRecord:
    """A ``load_balancers`` row; ``backends`` its set's list (schema 2 keeps it apart)."""
    return LoadBalancerRecord(
        name=row["name"],
        service=row["service"],
        service_uid=row["service_uid"],
        vip=row["vip"],
        ports=tuple(json.loads(row["ports"])),
        backends=backends,
        health=json.loads(row["health"]),
        source_ranges=tuple(json.loads(row["source_ranges"])),
        session_affinity=row["session_affinity"],
        generation=row["generation"],
        updated_at=row["updated_at"],
    )


def _claim(row: sqlite3.Row) -> IPClaim:
    return IPClaim(row["ip"], row["owner"], bool(row["retain"]), row["claimed_at"])


def _route(row: sqlite3.Row) -> RouteRecord:
    return RouteRecord(
        name=row["name"],
        cluster=row["cluster"],
        target_node=row["target_node"],
        destination_cidr=row["destination_cidr"],
        blackhole=bool(row["blackhole"]),
        created_at=row["created_at"],
    )
