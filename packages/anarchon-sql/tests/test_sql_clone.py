"""A SQL backend passed in as an object still gets a lease thread (``clone()``, docs/leases.md).

Built from a DSN or a file path, the backend copies itself for the lease
thread; built from a connection, a pool or a client the user owns it cannot,
and the scheduler says so at start.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from anarchon import RunContext, Scheduler
from anarchon.backend import Backend
from anarchon_sql import PostgresBackend, SqliteBackend
from anarchon_testservers.postgres import PgServer
from due_now import yearly_due_now

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""

_SHARED = "heartbeats share the scheduler's event loop"


def _lease_thread_of(backend: Backend, caplog: pytest.LogCaptureFixture) -> bool:
    """Start a scheduler on ``backend``; True if it has a lease thread (and warned of none)."""
    ran: list[int] = []

    async def handler(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    async def main() -> bool:
        scheduler = Scheduler(backend, instance_id="a", lease="3s", heartbeat="1s")
        scheduler.cron("clone", DUE, handler, jitter=0, max_late="2h")
        async with scheduler:
            parts = scheduler._parts  # the lease thread is internal: is it there?
            threaded = parts is not None and parts.keeper is not None
            has = threaded and parts.keeper.thread is not None  # type: ignore[union-attr]
        await backend.close()
        return has

    with caplog.at_level(logging.WARNING, logger="anarchon"):
        has = asyncio.run(main())
    assert has == (_SHARED not in caplog.text), caplog.text
    return has


def test_a_postgres_backend_from_a_dsn_clones_itself(
    pg_server: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    backend = PostgresBackend(f"{pg_server.dsn}?table_prefix=clone_&durability=fast")
    twin = backend.clone()
    assert isinstance(twin, PostgresBackend)
    assert twin.tables.prefix == "clone_"
    assert twin.durability == "fast"
    assert _lease_thread_of(backend, caplog)


def test_a_sqlite_backend_on_a_file_clones_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = SqliteBackend(tmp_path / "clone.db", table_prefix="c_")
    twin = backend.clone()
    assert isinstance(twin, SqliteBackend)
    assert twin.path == str(tmp_path / "clone.db")
    assert _lease_thread_of(backend, caplog)


def test_an_in_memory_sqlite_backend_cannot_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    backend = SqliteBackend(":memory:")
    assert backend.clone() is None
    assert not _lease_thread_of(backend, caplog)
