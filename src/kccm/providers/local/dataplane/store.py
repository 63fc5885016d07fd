"""The data plane's side of the state file (plain sqlite3, the contract of issue 7).

It only READS ``load_balancers`` and WRITES ``backend_health`` and ``dataplane``. Every write is
one short ``BEGIN IMMEDIATE`` transaction with a 5 s busy timeout; no read ever holds a lock
across an await. Change detection uses ``PRAGMA data_version``, which moves whenever another
connection commits, so an idle store costs one pragma per poll.

The file is opened without creating it (``mode=rw``): the store owns the schema. A missing
file or table reads as "no load balancers yet".
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kccm.providers.local.backendsets import ParsedSets
from kccm.providers.local.dataplane.model import (
    Backend,
    LoadBalancerSpec,
    parse_backends,
    parse_load_balancer,
)
from kccm.util.process import pid_exists

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DataplaneStore",
    "HealthRow",
    "Heartbeat",
    "pid_alive",
    "read_heartbeat",
]

BUSY_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class Heartbeat:
    pid: int
    heartbeat_at: float


@dataclass(frozen=True, slots=True)
class HealthRow:
    load_balancer: str
    node: str
    healthy: bool
    detail: str


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{path}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


@contextlib.contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _select(conn: sqlite3.Connection, sql: str) -> list[sqlite3.Row] | None:
    """The rows ``sql`` selects; None when its table does not exist (yet)."""
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise


class DataplaneStore:
    """One connection, used from one thread at a time (the data plane's store executor)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._sets = ParsedSets(parse_backends)

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is None and self.path.exists():
            self._conn = _connect(self.path)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def data_version(self) -> int | None:
        """Changes whenever another connection committed; None while there is no file."""
        conn = self._connection()
        if conn is None:
            return None
        return int(conn.execute("PRAGMA data_version").fetchone()[0])

    def load_balancers(self) -> list[LoadBalancerSpec] | None:
        """Every well-formed load balancer row; None when the schema is not there yet."""
        conn = self._connection()
        if conn is None:
            return None
        rows = _select(conn, "SELECT * FROM load_balancers ORDER BY name")
        if rows is None:
            return None
        sets: dict[str, str] = {
            r["id"]: r["backends"]
            for r in _select(conn, "SELECT id, backends FROM backend_sets") or ()
        }
        specs = []
        for row in rows:
            record = dict(row)
            with contextlib.suppress(ValueError):
                specs.append(parse_load_balancer(record, self._backends(record, sets)))
        return specs

    def _backends(self, row: dict[str, Any], sets: dict[str, str]) -> tuple[Backend, ...] | None:
        """The row's backend set (schema 2), parsed once per set and the same tuple for every
        balancer and every reconcile while its text is unchanged; None for a schema 1 row,
        which holds its own list."""
        if "backend_set" not in row:
            return None
        ident = row["backend_set"]
        return self._sets.get(ident, sets.get(ident, "[]"))  # type: ignore[no-any-return]

    def claim(self, pid: int, stale_after: float) -> Heartbeat | None:
        """Become the data plane: None on success, else the live holder's heartbeat."""
        conn = self._connection()
        if conn is None:
            raise FileNotFoundError(self.path)
        now = time.time()
        with _write(conn):
            row = conn.execute("SELECT pid, heartbeat_at FROM dataplane WHERE id = 1").fetchone()
            if row is not None and row["pid"] != pid:
                holder = Heartbeat(int(row["pid"]), float(row["heartbeat_at"]))
                if now - holder.heartbeat_at < stale_after and pid_alive(holder.pid):
                    return holder
            self._upsert_heartbeat(conn, pid, now)
        return None

    def heartbeat(self, pid: int) -> None:
        conn = self._connection()
        if conn is None:
            return
        with _write(conn):
            self._upsert_heartbeat(conn, pid, time.time())

    @staticmethod
    def _upsert_heartbeat(conn: sqlite3.Connection, pid: int, now: float) -> None:
        conn.execute(
            "INSERT INTO dataplane (id, pid, heartbeat_at) VALUES (1, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, "
            "heartbeat_at = excluded.heartbeat_at",
            (pid, now),
        )

    def release(self, pid: int) -> None:
        """Drop our heartbeat row so the next ``ensure_dataplane_running`` starts at once."""
        conn = self._connection()
        if conn is None:
            return
        with _write(conn):
            conn.execute("DELETE FROM dataplane WHERE id = 1 AND pid = ?", (pid,))

    def write_health(self, row: HealthRow) -> None:
        conn = self._connection()
        if conn is None:
            return
        with _write(conn):
            conn.execute(
                "INSERT INTO backend_health (load_balancer, node, healthy, checked_at, detail) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (load_balancer, node) DO UPDATE SET "
                "healthy = excluded.healthy, checked_at = excluded.checked_at, "
                "detail = excluded.detail",
                (row.load_balancer, row.node, int(row.healthy), time.time(), row.detail),
            )

    def forget_health(self, load_balancer: str, node: str) -> None:
        conn = self._connection()
        if conn is None:
            return
        with _write(conn):
            conn.execute(
                "DELETE FROM backend_health WHERE load_balancer = ? AND node = ?",
                (load_balancer, node),
            )


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    if not pid_exists(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def read_heartbeat(path: Path) -> Heartbeat | None:
    """The current ``dataplane`` row, or None (no file, no table, no row)."""
    if not path.exists():
        return None
    conn = _connect(path)
    try:
        rows = _select(conn, "SELECT pid, heartbeat_at FROM dataplane WHERE id = 1")
    finally:
        conn.close()
    if not rows:
        return None
    return Heartbeat(int(rows[0]["pid"]), float(rows[0]["heartbeat_at"]))
