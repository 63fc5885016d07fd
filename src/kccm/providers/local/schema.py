"""The state file's schema, one step per version (:data:`kccm.providers.local.store.MIGRATIONS`
lists them; append only).

1. the tables of issue 7: ``instances``, ``load_balancers`` (its ``backends`` a JSON list),
   ``ip_claims``, ``routes``, ``backend_health``, ``dataplane``, ``meta``;
2. ``backend_sets``: a backend list is stored once and each ``load_balancers`` row names it
   (``backend_set``, the SHA-256 of the list's canonical JSON) instead of holding a copy:
   3,000 balancers over 10,000 nodes held 3,000 copies of a 600 KB list (1.8 GB); now one.
   Existing rows move their lists there; the ``backends`` column goes. And ``ip_claims`` gets
   an index on ``owner``: every ensure reads its Service's claims, which scanned every claim.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from kccm.providers.local.backendsets import dumps, set_id

__all__ = ["V1", "V2"]

_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE instances (
  name TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL UNIQUE,
  instance_type TEXT NOT NULL DEFAULT 'local.standard',
  zone TEXT NOT NULL DEFAULT 'local-zone-a',
  region TEXT NOT NULL DEFAULT 'local',
  state TEXT NOT NULL CHECK (state IN ('running','stopped')),
  addresses TEXT NOT NULL,
  created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE load_balancers (
  name TEXT PRIMARY KEY,
  service TEXT NOT NULL UNIQUE,
  service_uid TEXT NOT NULL,
  vip TEXT NOT NULL,
  ports TEXT NOT NULL,
  backends TEXT NOT NULL,
  health TEXT NOT NULL,
  source_ranges TEXT NOT NULL,
  session_affinity TEXT NOT NULL DEFAULT 'None',
  generation INTEGER NOT NULL,
  updated_at REAL NOT NULL
);
CREATE TABLE ip_claims (
  ip TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  retain INTEGER NOT NULL DEFAULT 0,
  claimed_at REAL NOT NULL
);
CREATE TABLE routes (
  name TEXT PRIMARY KEY, cluster TEXT NOT NULL, target_node TEXT NOT NULL,
  destination_cidr TEXT NOT NULL, blackhole INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL
);
CREATE TABLE backend_health (
  load_balancer TEXT NOT NULL, node TEXT NOT NULL, healthy INTEGER NOT NULL,
  checked_at REAL NOT NULL, detail TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (load_balancer, node)
);
CREATE TABLE dataplane (
  id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, heartbeat_at REAL NOT NULL
);
"""

_V2 = """
CREATE TABLE backend_sets (id TEXT PRIMARY KEY, backends TEXT NOT NULL);
ALTER TABLE load_balancers ADD COLUMN backend_set TEXT NOT NULL DEFAULT '';
CREATE INDEX load_balancers_backend_set ON load_balancers (backend_set);
CREATE INDEX ip_claims_owner ON ip_claims (owner)
"""


def _run_script(script: str) -> Callable[[sqlite3.Connection], None]:
    def migrate(conn: sqlite3.Connection) -> None:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)

    return migrate


V1 = _run_script(_V1)


def V2(conn: sqlite3.Connection) -> None:
    """Move every row's backend list into ``backend_sets`` (one row per distinct list, in
    canonical JSON) and drop ``load_balancers.backends``."""
    _run_script(_V2)(conn)
    rows = conn.execute("SELECT name, backends FROM load_balancers").fetchall()
    known: dict[str, str] = {}
    for name, text in rows:
        try:
            backends = json.loads(text)
        except ValueError:
            backends = []
        if not isinstance(backends, list):
            backends = []  # unreadable: none (the next ensure writes the right ones)
        canonical = dumps(backends)
        ident = known.get(canonical)
        if ident is None:
            ident = known[canonical] = set_id(backends)
            conn.execute(
                "INSERT OR IGNORE INTO backend_sets (id, backends) VALUES (?, ?)",
                (ident, canonical),
            )
        conn.execute("UPDATE load_balancers SET backend_set = ? WHERE name = ?", (ident, name))
    conn.execute("ALTER TABLE load_balancers DROP COLUMN backends")
