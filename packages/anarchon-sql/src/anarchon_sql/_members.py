"""Fleet membership in SQL (docs/backends/sql.md, "Tables"; docs/fleet.md, "Membership").

One table beside the others (``<p>`` is the table prefix):

================  ==========================================================
``<p>members``    one row per live instance: ``instance_id`` (key),
                  ``roster``, ``seen_at`` and ``expires_at`` (server clock, ms)
================  ==========================================================

A refresh is one transaction: the upsert reads the server clock once
(``seen_at``, and ``expires_at`` = ``seen_at`` + TTL), expired rows are
deleted and the live ones read back, so its cost grows with the members,
never with the jobs. Stores made before the table existed get it at the next
start (the schema digest changes, so the ``CREATE TABLE IF NOT EXISTS`` runs).
A row that cannot be read is skipped and reported once, named by its table
and instance (:mod:`anarchon.backend.foreign`).
"""

from __future__ import annotations

from functools import partial

from anarchon.backend.foreign import entry_name, skip_unreadable, stored_int
from anarchon.fleet.types import Member

from anarchon_sql._client import Row, SqlClient
from anarchon_sql._dialect import SqlDialect, SqlTables

__all__ = ["MemberStatements", "members_ddl"]


def members_ddl(dialect: SqlDialect, tables: SqlTables) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` of the members table."""
    big, text = dialect.bigint, dialect.text
    return [
        f"CREATE TABLE IF NOT EXISTS {tables('members')} ("
        f"instance_id {text} PRIMARY KEY, roster {text} NOT NULL, seen_at {big} NOT NULL,"
        f" expires_at {big} NOT NULL)",
    ]


def _member(row: Row) -> Member:
    instance, roster, seen, expires = row
    return Member(str(instance), str(roster), stored_int(seen), stored_int(expires))


class MemberStatements:
    """The statements of the members table, placeholders converted, and the reads of its rows."""

    def __init__(self, dialect: SqlDialect, tables: SqlTables) -> None:
        q, now = dialect.placeholders, dialect.now_ms
        self.table = members = tables("members")
        # INSERT ... SELECT reads the clock once; "WHERE 1 = 1" keeps SQLite's parser from
        # taking ON CONFLICT for a join constraint.
        self.upsert = q(
            f"INSERT INTO {members} (instance_id, roster, seen_at, expires_at)"
            f" SELECT ?, ?, clock.n, clock.n + ? FROM (SELECT {now} AS n) AS clock WHERE 1 = 1"
            " ON CONFLICT (instance_id) DO UPDATE SET roster = excluded.roster,"
            " seen_at = excluded.seen_at, expires_at = excluded.expires_at RETURNING seen_at"
        )
        self.expire = q(f"DELETE FROM {members} WHERE expires_at <= ?")
        columns = "instance_id, roster, seen_at, expires_at"
        self.live_at = q(f"SELECT {columns} FROM {members} WHERE expires_at > ?")
        self.live = q(f"SELECT {columns} FROM {members} WHERE expires_at > {now}")
        self.leave = q(f"DELETE FROM {members} WHERE instance_id = ?")

    async def refresh_tx(
        self, tx: SqlClient, instance_id: str, roster: str, ttl_ms: int
    ) -> list[Row]:
        """Upsert the row at server time, delete expired rows; the live rows (one transaction)."""
        stamped = await tx.all(self.upsert, (instance_id, roster, int(ttl_ms)))
        now = int(stamped[0][0])
        await tx.all(self.expire, (now,))
        return await tx.all(self.live_at, (now,))

    def members_of(self, rows: list[Row]) -> list[Member]:
        """The readable rows as members, sorted by instance id (an unreadable row is reported)."""
        found = (
            skip_unreadable(
                entry_name(self.table, f"instance_id={row[0]!r}"),
                "a member record",
                partial(_member, row),
            )
            for row in rows
        )
        return sorted((m for m in found if m is not None), key=lambda m: m.instance_id)
