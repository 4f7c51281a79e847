"""The members table on PostgreSQL and SQLite: stores made before it, pruning, foreign tables.

The contract (``MembershipContract`` in test_sql_contracts.py) checks the
answers; here: a store whose schema predates the table gets it at the next
start, a refresh (not a read) deletes expired rows, and a ``members`` table
that is not anarchon's is refused with ``ANARCHON_FOREIGN_DATA`` naming it.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from anarchon.errors import ForeignDataError
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend
from anarchon_sql._schema import ddl


def _backend(kind: str, request: pytest.FixtureRequest, prefix: str) -> SqlBackend:
    if kind == "sqlite":
        return SqliteBackend(request.getfixturevalue("sqlite_path"), table_prefix=prefix)
    return PostgresBackend(request.getfixturevalue("pg_dsn"), table_prefix=prefix)


@pytest.fixture(params=["sqlite", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def _sql(
    backend: SqlBackend, statement: str, params: tuple[object, ...] = ()
) -> list[tuple[Any, ...]]:
    client = await backend._session.ready()
    return await client.all(backend.dialect.placeholders(statement), params)


async def test_a_store_made_before_the_table_gets_it_at_start(
    kind: str, request: pytest.FixtureRequest, prefix: str
) -> None:
    """The tables and schema digest of a store without ``members``: the next start adds it."""
    old = _backend(kind, request, prefix)
    await old.init()
    members, meta = old.tables("members"), old.tables("meta")
    statements = [s for s in ddl(old.dialect, old.tables) if members not in s]
    digest = hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()[:16]
    await _sql(old, f"DROP TABLE {members}")
    await _sql(old, f"UPDATE {meta} SET value = ? WHERE key = 'schema'", (digest,))
    await old.declare([], 60_000)  # the older tables still work
    await old.close()

    new = _backend(kind, request, prefix)
    await new.init()
    try:
        answer = await new.refresh_member("web-1", "digest", 60_000)
        assert [(m.instance_id, m.roster) for m in answer] == [("web-1", "digest")]
        assert [m.instance_id for m in await new.members()] == ["web-1"]
    finally:
        await new.close()


async def test_a_refresh_deletes_expired_rows_and_a_read_does_not(
    kind: str, request: pytest.FixtureRequest, prefix: str
) -> None:
    backend = _backend(kind, request, prefix)
    await backend.init()
    try:
        members = backend.tables("members")
        first = await backend.refresh_member("gone", "r", 50)
        assert first[0].expires_at - first[0].seen_at == 50
        await asyncio.sleep(0.5)
        assert [m.instance_id for m in await backend.members()] == []
        assert await _sql(backend, f"SELECT instance_id FROM {members}") == [("gone",)]
        answer = await backend.refresh_member("web-1", "r", 60_000)
        assert [m.instance_id for m in answer] == ["web-1"]
        rows = await _sql(backend, f"SELECT instance_id, expires_at - seen_at FROM {members}")
        assert [tuple(r) for r in rows] == [("web-1", 60_000)]
        await backend.leave_member("web-1")
        assert await _sql(backend, f"SELECT instance_id FROM {members}") == []
    finally:
        await backend.close()


async def test_a_foreign_members_table_is_refused_at_start(
    kind: str, request: pytest.FixtureRequest, prefix: str
) -> None:
    setup = _backend(kind, request, prefix)
    await setup.init()
    members = setup.tables("members")
    await _sql(setup, f"DROP TABLE {members}")
    await _sql(setup, f"CREATE TABLE {members} (name TEXT PRIMARY KEY, email TEXT)")
    await _sql(setup, f"UPDATE {setup.tables('meta')} SET value = 'x' WHERE key = 'schema'")
    await setup.close()
    backend = _backend(kind, request, prefix)
    with pytest.raises(ForeignDataError) as raised:
        await backend.init()
    assert raised.value.key == members
    await backend.close()
