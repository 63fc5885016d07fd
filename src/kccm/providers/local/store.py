"""The local provider's state: one SQLite file shared by the daemon, the data plane and the CLI.

The schema is the contract in ``docs/local-provider.md`` (version 1). Rules every writer follows:

- WAL journal, so readers never block the writer and the writer never blocks readers;
- ``busy_timeout`` 5000 ms, so concurrent writers from several processes queue instead of
  failing with "database is locked";
- every write is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken up front, so a
  read-modify-write never deadlocks on the lock upgrade);
- ``synchronous=FULL``: in WAL mode, NORMAL already survives a crash of any *process* (the WAL
  pages reach the OS before COMMIT returns) but may lose the last commits on a power loss or
  kernel crash; FULL fsyncs the WAL at every commit, so a commit that returned is durable.
  Writes here are rare (an instance change, a Service ensure), so the fsync costs nothing
  that matters.

Schema versions live in ``meta.schema_version``; :data:`MIGRATIONS` lists the steps, and
opening an older file applies the missing ones in one transaction. A file written by a newer
kccm is refused with :class:`SchemaTooNew`.

The API is synchronous (``sqlite3``); a :class:`LocalStore` may be shared by threads (one
connection behind a lock). Async callers run it in a thread.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from kccm.providers.local import schema
from kccm.providers.local.backendsets import ParsedSets, canonical_text, set_id
from kccm.providers.local.backendsets import dumps as _dumps
from kccm.providers.local.records import (
    _RUNNING,
    _STOPPED,
    BUSY_TIMEOUT_MS,
    ENV_STATE_FILE,
    STATE_FILE_MODE,
    BackendHealth,
    DataplaneHeartbeat,
    InstanceExists,
    InstanceRecord,
    IPClaim,
    IPUnavailable,
    LoadBalancerRecord,
    PoolExhausted,
    RouteRecord,
    SchemaTooNew,
    StoreError,
    UnknownInstance,
    _balancer,
    _claim,
    _instance,
    _route,
    default_state_path,
    private_file,
    resolve_state_path,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "ENV_STATE_FILE",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SHARE_CLAIM_PREFIX",
    "STATE_FILE_MODE",
    "BackendHealth",
    "DataplaneHeartbeat",
    "IPClaim",
    "IPUnavailable",
    "InstanceExists",
    "InstanceRecord",
    "LoadBalancerRecord",
    "LocalStore",
    "PoolExhausted",
    "RouteRecord",
    "SchemaTooNew",
    "StoreError",
    "UnknownInstance",
    "default_state_path",
    "private_file",
    "resolve_state_path",
]

# -- schema and migrations -----------------------------------------------------------------

MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (schema.V1, schema.V2)
"""``MIGRATIONS[i]`` takes a file from schema version ``i`` to ``i + 1`` (:mod:`.schema`);
append only."""
SCHEMA_VERSION = len(MIGRATIONS)

SHARE_CLAIM_PREFIX = "share:"
"""``ip_claims.owner`` of a share group's VIP: ``share:<namespace>/<group>`` (a Service's own
claim is ``<namespace>/<name>``, which never holds a ``:``)."""


def _read_version(conn: sqlite3.Connection) -> int:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def _migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Bring the file to :data:`SCHEMA_VERSION` (the caller holds the write lock)."""
    version = _read_version(conn)
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path}: schema version {version} was written by a newer kccm "
            f"(this one knows up to {SCHEMA_VERSION}); upgrade kccm or use another --state-file"
        )
    for step in MIGRATIONS[version:]:
        step(conn)
    if version < SCHEMA_VERSION:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
    return version


# -- JSON columns --------------------------------------------------------------------------


class LocalStore:
    """An open state file. Thread-safe; open one per process (or per thread group)."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self._now = clock
        self._lock = threading.RLock()
        self._sets = ParsedSets()
        self._claimed: tuple[int, set[str]] | None = None
        """The claimed IPs as of ``PRAGMA data_version`` (which moves when another connection
        commits); this connection's own changes keep it up to date or drop it."""
        private_file(self.path)
        self._conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
            check_same_thread=False,
        )  # fmt: skip
        self._conn.row_factory = sqlite3.Row
        try:
            self._configure()
            with self._write() as conn:
                self.migrated_from = _migrate(conn, self.path)
        except BaseException:
            self._conn.close()
            raise

    def _configure(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot switch to WAL journal mode (got {mode})")
        self._conn.execute("PRAGMA synchronous = FULL")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> LocalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, holding the database write lock from the start."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._claimed = None
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several SELECTs."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def schema_version(self) -> int:
        with self._read() as conn:
            return _read_version(conn)

    # -- instances -----------------------------------------------------------------------

    def add_instance(self, instance: InstanceRecord, *, replace: bool = False) -> InstanceRecord:
        """Insert ``instance`` (``replace``: overwrite one of the same name)."""
        now = self._now()
        with self._write() as conn:
            old = conn.execute(
                "SELECT created_at FROM instances WHERE name = ?", (instance.name,)
            ).fetchone()
            if old is not None and not replace:
                raise InstanceExists(f"instance {instance.name!r} already exists")
            created = old["created_at"] if old is not None else now
            conn.execute("DELETE FROM instances WHERE name = ?", (instance.name,))
            conn.execute(
                "INSERT INTO instances (name, provider_id, instance_type, zone, region, state,"
                " addresses, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    instance.name,
                    instance.provider_id,
                    instance.instance_type,
                    instance.zone,
                    instance.region,
                    instance.state,
                    _dumps([{"type": t, "address": a} for t, a in instance.addresses]),
                    created,
                    now,
                ),
            )
        return self.get_instance(instance.name)

    def adopt_instance(self, instance: InstanceRecord) -> InstanceRecord:
        """Insert ``instance`` unless one of that name exists; return what is stored."""
        try:
            return self.add_instance(instance)
        except InstanceExists:
            return self.get_instance(instance.name)

    def set_instance_state(self, name: str, running: bool) -> InstanceRecord:
        state = _RUNNING if running else _STOPPED
        with self._write() as conn:
            updated = conn.execute(
                "UPDATE instances SET state = ?, updated_at = ? WHERE name = ?",
                (state, self._now(), name),
            ).rowcount
            if not updated:
                raise UnknownInstance(f"no instance named {name!r}")
        return self.get_instance(name)

    def delete_instance(self, name: str) -> None:
        with self._write() as conn:
            if not conn.execute("DELETE FROM instances WHERE name = ?", (name,)).rowcount:
                raise UnknownInstance(f"no instance named {name!r}")

    def find_instance(self, name: str) -> InstanceRecord | None:
        with self._lock:
            row = self._conn.execute("SELECT * FROM instances WHERE name = ?", (name,)).fetchone()
        return _instance(row) if row is not None else None

    def get_instance(self, name: str) -> InstanceRecord:
        found = self.find_instance(name)
        if found is None:
            raise UnknownInstance(f"no instance named {name!r}")
        return found

    def find_instance_by_provider_id(self, provider_id: str) -> InstanceRecord | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT * FROM instances WHERE provider_id = ?", (provider_id,)
            ).fetchone()
        return _instance(row) if row is not None else None

    def list_instances(self) -> list[InstanceRecord]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM instances ORDER BY name").fetchall()
        return [_instance(row) for row in rows]

    # -- load balancers and IP claims ----------------------------------------------------

    def ensure_load_balancer(
        self,
        desired: LoadBalancerRecord,
        *,
        candidates: Callable[[], Iterable[str]],
        requested_ip: str | None,
        in_pool: Callable[[str], bool],
        retain: bool,
        claimant: str | None = None,
    ) -> LoadBalancerRecord:
        """Claim a VIP for ``desired.service`` (or for ``claimant``, a share group whose rows
        all use its one VIP) and write its row, in one transaction.

        The Service keeps the IP it already claims (also a retained claim from an earlier
        incarnation), unless ``requested_ip`` names another one. ``desired.vip`` and
        ``desired.generation`` are ignored. Raises :class:`IPUnavailable` and writes nothing
        when the requested IP is taken or outside the pool, or the pool is exhausted. The
        generation is bumped only when the desired state changed.
        """
        with self._write() as conn:
            owner = claimant or desired.service
            vip = self._claim(conn, owner, candidates, requested_ip, in_pool, retain)
            record = self._put_balancer(conn, _with(desired, vip=vip))
            self._drop_unused_claims(conn, desired.service)
            return record

    def _drop_unused_claims(self, conn: sqlite3.Connection, service: str) -> None:
        """Free the claims no row uses any more (not retained ones) of ``service`` and of the
        share groups: what a Service joining or leaving a group left behind."""
        dropped = conn.execute(
            "DELETE FROM ip_claims WHERE retain = 0 AND (owner = ? OR (owner >= ? AND owner < ?))"
            " AND ip NOT IN (SELECT vip FROM load_balancers)",
            (service, SHARE_CLAIM_PREFIX, SHARE_CLAIM_PREFIX[:-1] + ";"),  # ';' follows ':'
        ).rowcount
        if dropped:
            self._claimed = None

    def _claim(
        self,
        conn: sqlite3.Connection,
        owner: str,
        candidates: Callable[[], Iterable[str]],
        requested: str | None,
        in_pool: Callable[[str], bool],
        retain: bool,
    ) -> str:
        held = conn.execute("SELECT ip FROM ip_claims WHERE owner = ?", (owner,)).fetchall()
        held_ips = [row["ip"] for row in held]
        if requested and requested not in held_ips:
            _check_requested(conn, requested, in_pool)
            ip = requested
        elif requested:
            ip = requested
        elif held_ips:
            ip = held_ips[0]
        else:
            ip = self._first_free(conn, candidates)
        conn.execute("DELETE FROM ip_claims WHERE owner = ? AND ip != ?", (owner, ip))
        if self._claimed is not None:
            self._claimed[1].difference_update(held_ips)
            self._claimed[1].add(ip)
        conn.execute(
            "INSERT INTO ip_claims (ip, owner, retain, claimed_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (ip) DO UPDATE SET retain = excluded.retain",
            (ip, owner, int(retain), self._now()),
        )
        return ip

    def _first_free(self, conn: sqlite3.Connection, candidates: Callable[[], Iterable[str]]) -> str:
        """The first candidate nobody claims. The claimed IPs are read again only when another
        connection committed since (3,000 Services claiming one by one read 4.5 million rows
        otherwise)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if self._claimed is None or self._claimed[0] != version:
            self._claimed = (version, {row[0] for row in conn.execute("SELECT ip FROM ip_claims")})
        return _first_free(self._claimed[1], candidates)

    def _put_balancer(
        self, conn: sqlite3.Connection, desired: LoadBalancerRecord
    ) -> LoadBalancerRecord:
        row = conn.execute(
            "SELECT * FROM load_balancers WHERE name = ? OR service = ? ORDER BY name = ? DESC",
            (desired.name, desired.service, desired.name),
        ).fetchone()
        old = self._balancer(conn, row) if row is not None else None
        if old is not None and old.same_spec(desired):
            return old
        generation = old.generation + 1 if old is not None else 1
        conn.execute(
            "DELETE FROM load_balancers WHERE name = ? OR service = ?",
            (desired.name, desired.service),
        )
        new = _with(desired, generation=generation, updated_at=self._now())
        backend_set = set_id(new.backends)
        conn.execute(  # once per list; a set edited by hand is put right
            "INSERT INTO backend_sets (id, backends) VALUES (?, ?) ON CONFLICT (id)"
            " DO UPDATE SET backends = excluded.backends WHERE backends != excluded.backends",
            (backend_set, canonical_text(new.backends)),
        )
        conn.execute(
            "INSERT INTO load_balancers (name, service, service_uid, vip, ports, backend_set,"
            " health, source_ranges, session_affinity, generation, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                new.name,
                new.service,
                new.service_uid,
                new.vip,
                _dumps(list(new.ports)),
                backend_set,
                _dumps(new.health),
                _dumps(list(new.source_ranges)),
                new.session_affinity,
                new.generation,
                new.updated_at,
            ),
        )
        _drop_unused_sets(conn)
        return new

    def _balancer(self, conn: sqlite3.Connection, row: sqlite3.Row) -> LoadBalancerRecord:
        """A ``load_balancers`` row with its backends: the parsed set, one tuple for every row
        of that set (a missing set reads as no backends, which the next ensure repairs)."""
        found = conn.execute(
            "SELECT backends FROM backend_sets WHERE id = ?", (row["backend_set"],)
        ).fetchone()
        return _balancer(row, self._sets.get(row["backend_set"], found[0] if found else "[]"))

    def update_backends(
        self, name: str, backends: Sequence[Mapping[str, Any]]
    ) -> LoadBalancerRecord | None:
        """Rewrite the backends of balancer ``name``; ``None`` when it does not exist."""
        with self._write() as conn:
            row = conn.execute("SELECT * FROM load_balancers WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            current = self._balancer(conn, row)
            return self._put_balancer(conn, _with(current, backends=tuple(backends)))

    def delete_load_balancer(self, name: str, owner: str, *, keep_claim: bool) -> bool:
        """Delete balancer ``name``; free ``owner``'s IP claim unless ``keep_claim`` (then it
        is marked retained) or another balancer row of that owner, or using its VIP (a share
        group's), still exists. Returns whether a row was deleted."""
        with self._write() as conn:
            deleted = conn.execute("DELETE FROM load_balancers WHERE name = ?", (name,)).rowcount
            conn.execute("DELETE FROM backend_health WHERE load_balancer = ?", (name,))
            still_used = conn.execute(
                "SELECT 1 FROM load_balancers WHERE service = ?"
                " OR vip IN (SELECT ip FROM ip_claims WHERE owner = ?)",
                (owner, owner),
            ).fetchone()
            _drop_unused_sets(conn)
            self._claimed = None
            if keep_claim:
                conn.execute("UPDATE ip_claims SET retain = 1 WHERE owner = ?", (owner,))
            elif not still_used:
                conn.execute("DELETE FROM ip_claims WHERE owner = ?", (owner,))
        return bool(deleted)

    def describe_load_balancer(
        self, name: str, owner: str
    ) -> tuple[LoadBalancerRecord | None, list[IPClaim]]:
        """Balancer ``name`` and the IP claims of ``owner`` (the service), in one snapshot."""
        with self._read() as conn:
            row = conn.execute("SELECT * FROM load_balancers WHERE name = ?", (name,)).fetchone()
            claims = conn.execute(
                "SELECT * FROM ip_claims WHERE owner = ? ORDER BY ip", (owner,)
            ).fetchall()
            record = self._balancer(conn, row) if row is not None else None
        return record, [_claim(c) for c in claims]

    def find_load_balancer(self, name: str) -> LoadBalancerRecord | None:
        with self._read() as conn:
            row = conn.execute("SELECT * FROM load_balancers WHERE name = ?", (name,)).fetchone()
            return self._balancer(conn, row) if row is not None else None

    def list_load_balancers(self) -> list[LoadBalancerRecord]:
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM load_balancers ORDER BY service").fetchall()
            sets = dict(conn.execute("SELECT id, backends FROM backend_sets").fetchall())
        return [
            _balancer(row, self._sets.get(row["backend_set"], sets.get(row["backend_set"], "[]")))
            for row in rows
        ]

    def list_ip_claims(self) -> list[IPClaim]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM ip_claims ORDER BY owner, ip").fetchall()
        return [_claim(row) for row in rows]

    def release_ip(self, ip: str) -> bool:
        """Free a claim by hand (e.g. a retained one nobody wants any more)."""
        with self._write() as conn:
            self._claimed = None
            return bool(conn.execute("DELETE FROM ip_claims WHERE ip = ?", (ip,)).rowcount)

    # -- routes --------------------------------------------------------------------------

    def put_route(self, route: RouteRecord) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO routes (name, cluster, target_node, destination_cidr,"
                " blackhole, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    route.name,
                    route.cluster,
                    route.target_node,
                    route.destination_cidr,
                    int(route.blackhole),
                    self._now(),
                ),
            )

    def delete_route(self, cluster: str, target_node: str, destination_cidr: str) -> bool:
        with self._write() as conn:
            return bool(
                conn.execute(
                    "DELETE FROM routes WHERE cluster = ? AND target_node = ?"
                    " AND destination_cidr = ?",
                    (cluster, target_node, destination_cidr),
                ).rowcount
            )

    def list_routes(self, cluster: str | None = None) -> list[RouteRecord]:
        query, args = "SELECT * FROM routes", tuple[str, ...]()
        if cluster is not None:
            query, args = query + " WHERE cluster = ?", (cluster,)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY name", args).fetchall()
        return [_route(row) for row in rows]

    # -- written by the data plane, read here --------------------------------------------

    def list_backend_health(self) -> list[BackendHealth]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT * FROM backend_health ORDER BY load_balancer, node"
            ).fetchall()
        return [
            BackendHealth(
                r["load_balancer"], r["node"], bool(r["healthy"]), r["checked_at"], r["detail"]
            )
            for r in rows
        ]

    def describe_backends(self, name: str) -> tuple[LoadBalancerRecord | None, list[BackendHealth]]:
        """Balancer ``name`` and the data plane's verdicts on its backends, in one snapshot."""
        with self._read() as conn:
            row = conn.execute("SELECT * FROM load_balancers WHERE name = ?", (name,)).fetchone()
            rows = conn.execute(
                "SELECT * FROM backend_health WHERE load_balancer = ? ORDER BY node", (name,)
            ).fetchall()
            record = self._balancer(conn, row) if row is not None else None
        health = [
            BackendHealth(
                r["load_balancer"], r["node"], bool(r["healthy"]), r["checked_at"], r["detail"]
            )
            for r in rows
        ]
        return record, health

    def dataplane_heartbeat(self) -> DataplaneHeartbeat | None:
        with self._lock:
            row = self._conn.execute("SELECT * FROM dataplane WHERE id = 1").fetchone()
        return DataplaneHeartbeat(row["pid"], row["heartbeat_at"]) if row else None


def _with(record: LoadBalancerRecord, **changes: Any) -> LoadBalancerRecord:
    return replace(record, **changes)


def _drop_unused_sets(conn: sqlite3.Connection) -> None:
    """Delete the backend sets no balancer names any more (reads ids only, not the lists)."""
    conn.execute(
        "DELETE FROM backend_sets WHERE id NOT IN (SELECT backend_set FROM load_balancers)"
    )


def _check_requested(conn: sqlite3.Connection, ip: str, in_pool: Callable[[str], bool]) -> None:
    if not in_pool(ip):
        raise IPUnavailable(f"requested loadBalancerIP {ip} is not in the local VIP pool")
    taken = conn.execute("SELECT owner, retain FROM ip_claims WHERE ip = ?", (ip,)).fetchone()
    if taken is None:
        return
    used = conn.execute("SELECT 1 FROM load_balancers WHERE service = ?", (taken[0],)).fetchone()
    if taken[1] and used is None:  # a retained address nobody uses: asking for it takes it
        conn.execute("DELETE FROM ip_claims WHERE ip = ?", (ip,))
        return
    raise IPUnavailable(f"requested loadBalancerIP {ip} is already claimed by {taken[0]}")


def _first_free(claimed: set[str], candidates: Callable[[], Iterable[str]]) -> str:
    for ip in candidates():
        if ip not in claimed:
            return ip
    raise PoolExhausted(f"the local VIP pool is exhausted ({len(claimed)} addresses claimed)")
