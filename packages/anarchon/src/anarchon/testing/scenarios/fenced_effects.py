"""A fenced side-effect store for the fault scenarios: one SQLite file shared by the workers.

It is the guard of docs/leases.md ("Fencing") made observable. Each run
(``ctx.run_id``) has a fence, the highest ``ctx.fencing_token`` presented so
far. An attempt first *registers* its token (raises the fence to it, refused if
a later attempt has registered already), and commits its side effect with a
conditional UPDATE that succeeds only while the fence is still its own token:

.. code-block:: sql

    UPDATE fences SET committed = committed + 1 WHERE run_id = ? AND fence = ?

Every registration and every accepted commit is logged with the wall-clock
time taken inside the same ``BEGIN IMMEDIATE`` transaction, so the log is in
the order SQLite serialised the writes. The file is independent of the
scheduler's store: every store's scenario uses it the same way.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Effect", "commit", "connect", "read_log", "register"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fences (
    run_id TEXT PRIMARY KEY, fence INTEGER NOT NULL, committed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS log (
    kind TEXT NOT NULL, run_id TEXT NOT NULL, fence INTEGER NOT NULL,
    instance TEXT NOT NULL, at_ms INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class Effect:
    """One logged write: ``kind`` is ``register`` or ``commit``."""

    kind: str
    run_id: str
    fence: int
    instance: str
    at_ms: int


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (and create) the shared file; autocommit mode, transactions are explicit."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.executescript(_SCHEMA)
    return conn


_LOCK = threading.Lock()
"""One transaction at a time on a connection shared by a process's handler threads."""


def _write(
    conn: sqlite3.Connection, kind: str, sql: str, run_id: str, fence: int, who: str
) -> bool:
    with _LOCK:
        return _transaction(conn, kind, sql, run_id, fence, who)


def _transaction(
    conn: sqlite3.Connection, kind: str, sql: str, run_id: str, fence: int, who: str
) -> bool:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR IGNORE INTO fences (run_id, fence) VALUES (?, 0)", (run_id,))
        accepted = conn.execute(sql, (fence, run_id, fence)).rowcount == 1
        if accepted:
            conn.execute(
                "INSERT INTO log VALUES (?, ?, ?, ?, ?)",
                (kind, run_id, fence, who, time.time_ns() // 1_000_000),
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return accepted


def register(conn: sqlite3.Connection, run_id: str, fence: int, instance: str) -> bool:
    """Raise the run's fence to ``fence``; False if an attempt with a token ≥ it registered."""
    sql = "UPDATE fences SET fence = ? WHERE run_id = ? AND fence < ?"
    return _write(conn, "register", sql, run_id, fence, instance)


def commit(conn: sqlite3.Connection, run_id: str, fence: int, instance: str) -> bool:
    """Commit the side effect; refused (False) unless ``fence`` is still the run's fence."""
    sql = "UPDATE fences SET committed = committed + 1, fence = ? WHERE run_id = ? AND fence = ?"
    return _write(conn, "commit", sql, run_id, fence, instance)


def read_log(path: Path | str) -> list[Effect]:
    """Every registration and accepted commit, in the order they were written."""
    if not Path(path).exists():
        return []
    conn = connect(path)
    try:
        rows = conn.execute("SELECT kind, run_id, fence, instance, at_ms FROM log ORDER BY rowid")
        return [Effect(*row) for row in rows]
    finally:
        conn.close()
