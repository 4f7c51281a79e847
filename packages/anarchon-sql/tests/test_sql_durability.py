"""The ``durability`` setting and the healing finish of the SQL backends (docs/backends/sql.md).

Validation, the start-up refusal of ``replicated`` on a server without a
synchronous standby, claims whose commit is never confirmed (a server whose
``synchronous_standby_names`` names a standby that never connects: every
synchronous commit waits), and finishes that find no state (single, batch
and finish+save, PostgreSQL and SQLite). The failover rounds are in
``test_sql_failover.py`` (scenario tier).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import psycopg
import pytest
from anarchon.errors import BackendUnavailableError, InvalidConfigError
from anarchon.types import ClaimInput, ResultWrite, RunClaim, RunFinish, StoredResult
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend
from anarchon_testservers.postgres import PgServer, start_postgres


def test_durability_values_are_validated(pg_dsn: str, sqlite_path: str) -> None:
    assert PostgresBackend(pg_dsn).durability == "fast"
    assert PostgresBackend(pg_dsn, durability="replicated").durability == "replicated"
    assert PostgresBackend.from_url(pg_dsn + "?durability=replicated").durability == "replicated"
    for bad in ("sync", "", None, 1):
        with pytest.raises(InvalidConfigError, match="durability must be one of") as caught:
            PostgresBackend(pg_dsn, durability=bad)  # type: ignore[arg-type]
        assert caught.value.code == "ANARCHON_INVALID_CONFIG"
        assert "'fast', 'replicated'" in caught.value.message
    with pytest.raises(InvalidConfigError, match="durability must be one of"):
        PostgresBackend.from_url(pg_dsn + "?durability=strong")
    assert SqliteBackend(sqlite_path).durability == "fast"
    with pytest.raises(InvalidConfigError, match="no replica") as refused:
        SqliteBackend(sqlite_path, durability="replicated")
    assert refused.value.code == "ANARCHON_INVALID_CONFIG"
    with pytest.raises(InvalidConfigError, match="no replica"):
        SqliteBackend.from_url(f"sqlite:///{sqlite_path}?durability=replicated")


async def test_replicated_is_refused_without_a_synchronous_standby(
    pg_dsn: str, prefix: str
) -> None:
    backend = PostgresBackend(pg_dsn, table_prefix=prefix, durability="replicated")
    try:
        with pytest.raises(InvalidConfigError, match="synchronous_standby_names empty") as caught:
            await backend.init()
        assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    finally:
        await backend.close()


@pytest.fixture(scope="module")
def waiting_server() -> Iterator[PgServer]:
    """A server whose synchronous standby never connects: synchronous commits wait for ever."""
    server = start_postgres()
    try:
        server.set_synchronous_standby_names("nobody")
        yield server
    finally:
        server.stop()


async def test_an_unconfirmed_claim_is_uncertain(
    waiting_server: PgServer, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="anarchon.sql")
    dsn = waiting_server.dsn
    a = PostgresBackend(dsn, table_prefix=prefix, durability="replicated", call_timeout=1.0)
    b = PostgresBackend(dsn, table_prefix=prefix)
    try:
        await b.init()  # installs the tables: a's start-up only reads them under its short deadline
        await a.init()
        assert any("no synchronous standby is streaming" in r.getMessage() for r in caplog.records)
        now = await a.runs.now_ms()
        started = time.monotonic()
        answer = await a.runs.claim(_claim("waits", now, "a"))
        assert answer.kind == "uncertain", answer
        assert time.monotonic() - started < 10
        assert any("not confirmed on the standby" in r.getMessage() for r in caplog.records)
        # Batches, plain claims and retries are never answered won either.
        many = await a.runs.claim_many([_claim(f"waits-{i}", now, f"a{i}") for i in range(3)])
        assert [o.kind for o in many] == ["uncertain"] * 3
        assert not await a.claim(ClaimInput("waits-plain", now, "p", "a"))
        # A fast backend's claims do not wait (the test server commits asynchronously).
        assert (await b.runs.claim(_claim("fast", now, "b"))).won
        with pytest.raises(BackendUnavailableError):
            await a.runs.heartbeat("fast", now, "b", 10_000)
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_a_cancelled_standby_wait_is_not_a_win(waiting_server: PgServer, prefix: str) -> None:
    """The server cancels the commit's wait (a cancel request): committed locally only.

    The claim statement then returns its row with a WARNING; the backend
    treats it as in doubt, confirms (waits again, cancelled again) and
    answers ``uncertain``; the row is on the primary, so another instance's
    claim is refused there.
    """
    dsn = waiting_server.dsn
    a = PostgresBackend(dsn, table_prefix=prefix, durability="replicated", call_timeout=30)
    b = PostgresBackend(dsn, table_prefix=prefix)
    await a.init()
    await b.init()
    stop = asyncio.Event()

    async def cancel_waits() -> int:
        cancelled = 0
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
            while not stop.is_set():
                cur = await admin.execute(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                    " WHERE wait_event = 'SyncRep' AND query LIKE %s",
                    (f"%{prefix}claim_durable_v1%",),
                )
                cancelled += len(await cur.fetchall())
                await asyncio.sleep(0.05)
        return cancelled

    canceller = asyncio.ensure_future(cancel_waits())
    try:
        now = await a.runs.now_ms()
        answer = await a.runs.claim(_claim("cancelled", now, "a"))
        assert answer.kind == "uncertain", answer
        assert (await b.runs.claim(_claim("cancelled", now, "b"))).kind == "running"
    finally:
        stop.set()
        assert await canceller >= 2
        await asyncio.gather(a.close(), b.close())


@pytest.fixture(params=["postgresql", "sqlite"])
async def backend(request: pytest.FixtureRequest, pg_dsn: str, sqlite_path: str, prefix: str):  # type: ignore[no-untyped-def]
    made: SqlBackend = (
        PostgresBackend(pg_dsn, table_prefix=prefix)
        if request.param == "postgresql"
        else SqliteBackend(sqlite_path, table_prefix=prefix)
    )
    await made.init()
    yield made
    await made.close()


def _claim(job: str, slot: int, token: str) -> RunClaim:
    return RunClaim(job, slot, token, "instance-b", 10_000, deadline_ms=slot + 60_000, overlap=True)


async def test_a_finish_without_state_heals(
    backend: SqlBackend, caplog: pytest.LogCaptureFixture
) -> None:
    runs = backend.runs
    now = await runs.now_ms()
    job = "heal"
    caplog.set_level(logging.WARNING, logger="anarchon.sql")
    assert await runs.finish(job, now, "lost-1", "ok")
    assert [r for r in caplog.records if "no state for the run" in r.getMessage()]
    assert f"{job} slot {now}" in caplog.records[-1].getMessage()
    assert await runs.finish(job, now, "lost-1", "ok"), "a repeated finish is True again"
    assert not await runs.finish(job, now, "other", "ok"), "another token owns the run"
    assert (await runs.claim(_claim(job, now, "late-backup"))).kind == "done"
    assert await runs.active(job) == []

    # Batches: one healed item, one ordinary finish, one owned by another token.
    won = _claim(job, now + 1, "alive")
    assert (await runs.claim(won)).won
    taken = _claim(job, now + 2, "owner")
    assert (await runs.claim(taken)).won
    items = [
        RunFinish(job, now + 3, "lost-2", "error", "boom"),
        RunFinish(job, now + 1, "alive", "ok"),
        RunFinish(job, now + 2, "intruder", "ok"),
    ]
    assert await runs.finish_many(items) == [True, True, False]
    assert await runs.finish_many(items) == [True, True, False]
    assert (await runs.claim(_claim(job, now + 3, "late"))).kind == "done"

    # finish + save: the healed run's result is stored in history.
    result = StoredResult(now + 4, "lost-3", "instance-a", "ok", now, now + 1)
    answers = await runs.finish_and_save_many(
        [RunFinish(job, now + 4, "lost-3", "ok")], [ResultWrite(job, result, 100)]
    )
    assert answers == [True]
    assert [r.status for r in await backend.history(job, 10) if r.slot == now + 4] == ["ok"]
    assert (await runs.claim(_claim(job, now + 4, "late"))).kind == "done"
