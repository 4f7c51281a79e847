"""A fenced side-effect store for the fault scenarios: one SQLite file shared by the workers.

It is the guard of docs/leases.md ("Fencing") made observable. Each run
(``ctx.run_id``) has a fence, the ``ctx.fencing_key`` (attempt, claim token)
that presented itself last. An attempt first *registers* its key: the fence
takes it if its attempt is higher than the fence's, and it is refused if a
later attempt registered already, or if an attempt with the same number but
another token did (a re-claim after a failover lost the first claim: both
are attempt 1). It commits its side effect with a conditional UPDATE that
succeeds only while the fence is still its own key:

.. code-block:: sql

    UPDATE fences SET committed = committed + 1
    WHERE run_id = ? AND fence = ? AND token = ?

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

__all__ = ["Effect", "FencingKey", "commit", "connect", "read_log", "register"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS fences (
    run_id TEXT PRIMARY KEY, fence INTEGER NOT NULL, token TEXT NOT NULL DEFAULT '',
    committed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS log (
    kind TEXT NOT NULL, run_id TEXT NOT NULL, fence INTEGER NOT NULL,
    instance TEXT NOT NULL, at_ms INTEGER NOT NULL, token TEXT NOT NULL DEFAULT ''
);
"""


@dataclass(frozen=True)
class Effect:
    """One logged write: ``kind`` is ``register`` or ``commit``; ``fence`` the attempt."""

    kind: str
    run_id: str
    fence: int
    instance: str
    at_ms: int
    token: str = ""
    """The claim token of the attempt (``ctx.fencing_key[1]``)."""

    def supersedes(self, other: Effect) -> bool:
        """True if this registration shuts ``other`` out: a higher attempt, or the same with
        another token (a re-claim after a lossy failover)."""
        return self.fence > other.fence or (self.fence == other.fence and self.token != other.token)


def connect(path: Path | str) -> sqlite3.Connection:
    """Open (and create) the shared file; autocommit mode, transactions are explicit."""
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.executescript(_SCHEMA)
    return conn


_LOCK = threading.Lock()
"""One transaction at a time on a connection shared by a process's handler threads."""


FencingKey = tuple[int, str] | int
"""``ctx.fencing_key`` (attempt, claim token), or a bare attempt (its token is ``""``)."""


def _key(fence: FencingKey) -> tuple[int, str]:
    return (fence, "") if isinstance(fence, int) else (fence[0], fence[1])


def _write(
    conn: sqlite3.Connection, kind: str, sql: str, run_id: str, fence: FencingKey, who: str
) -> bool:
    attempt, token = _key(fence)
    with _LOCK:
        return _transaction(conn, kind, sql, run_id, attempt, token, who)


def _transaction(
    conn: sqlite3.Connection,
    kind: str,
    sql: str,
    run_id: str,
    attempt: int,
    token: str,
    who: str,
) -> bool:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR IGNORE INTO fences (run_id, fence) VALUES (?, 0)", (run_id,))
        params = {"run_id": run_id, "attempt": attempt, "token": token}
        accepted = conn.execute(sql, params).rowcount == 1
        if accepted:
            conn.execute(
                "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
                (kind, run_id, attempt, who, time.time_ns() // 1_000_000, token),
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return accepted


def register(conn: sqlite3.Connection, run_id: str, fence: FencingKey, instance: str) -> bool:
    """Present ``fence`` (``ctx.fencing_key``) as the run's fence.

    True when its attempt is higher than the fence's (the fence takes it), or
    the fence is already this very key. False when a later attempt has
    registered, or the same attempt with another claim token.
    """
    sql = (
        "UPDATE fences SET fence = :attempt, token = :token WHERE run_id = :run_id"
        " AND (fence < :attempt OR (fence = :attempt AND token = :token))"
    )
    return _write(conn, "register", sql, run_id, fence, instance)


def commit(conn: sqlite3.Connection, run_id: str, fence: FencingKey, instance: str) -> bool:
    """Commit the side effect; refused (False) unless ``fence`` is still the run's fence."""
    sql = (
        "UPDATE fences SET committed = committed + 1"
        " WHERE run_id = :run_id AND fence = :attempt AND token = :token"
    )
    return _write(conn, "commit", sql, run_id, fence, instance)


def read_log(path: Path | str) -> list[Effect]:
    """Every registration and accepted commit, in the order they were written."""
    if not Path(path).exists():
        return []
    conn = connect(path)
    try:
        rows = conn.execute(
            "SELECT kind, run_id, fence, instance, at_ms, token FROM log ORDER BY rowid"
        )
        return [Effect(*row) for row in rows]
    finally:
        conn.close()
