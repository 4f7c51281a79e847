"""The ``durability`` setting and the healing finish of the SQL backends (docs/backends/sql.md).

Validation, the start-up refusal of ``replicated`` on a server without a
synchronous standby, and finishes that find no state (single, batch and
finish+save, PostgreSQL and SQLite). The failover rounds are in
``test_sql_failover.py`` (scenario tier).
"""

from __future__ import annotations

import logging

import pytest
from anarchon.errors import InvalidConfigError
from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend


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
