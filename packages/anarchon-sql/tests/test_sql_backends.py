"""What is specific to the SQL backends: URLs and options, adapters, ownership, the store
format marker, concurrent start-up, one-statement claims, serialisation, server time."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import psycopg
import pytest
from anarchon import RunContext, Scheduler
from anarchon.backend import STORE_FORMAT
from anarchon.backend.registry import installed_backends, resolve_backend
from anarchon.errors import (
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
)
from anarchon.types import ClaimInput, JobLimits, RunClaim, StoredResult
from anarchon_sql import (
    PostgresBackend,
    SqlBackend,
    SqlClient,
    SqliteBackend,
    SqliteDialect,
    from_sqlite_database,
)
from anarchon_sql._dialect import convert_placeholders
from anarchon_sql.postgres import PsycopgClient
from anarchon_testservers.postgres import free_port
from due_now import yearly_due_now
from psycopg_pool import AsyncConnectionPool

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""

T = TypeVar("T")
Factory = Callable[[str], SqlBackend]


@pytest.fixture(params=["postgres", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """A factory of backends (by table prefix) on one store: PostgreSQL or a SQLite file."""
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        return lambda prefix: PostgresBackend(dsn, table_prefix=prefix)
    path = str(tmp_path / "store.db")
    return lambda prefix: SqliteBackend(path, table_prefix=prefix)


# URLs and options -------------------------------------------------------------


def test_sqlite_urls() -> None:
    assert SqliteBackend.from_url("sqlite:///relative.db").path == "relative.db"
    assert SqliteBackend.from_url("sqlite:////abs/path.db").path == "/abs/path.db"
    assert SqliteBackend.from_url("sqlite:///:memory:").path == ":memory:"
    assert SqliteBackend.from_url("sqlite://").path == ":memory:"
    b = SqliteBackend.from_url("sqlite:///x.db?table_prefix=cron_&timeout=1.5&synchronous=normal")
    assert (b.tables.prefix, b.timeout, b.synchronous) == ("cron_", 1.5, "normal")
    assert SqliteBackend.from_url("sqlite:///x.db", table_prefix="k_").tables.runs == "k_runs"
    for bad in (
        "sqlite:///x.db?frobnicate=1",
        "sqlite://host/x.db",
        "sqlite:///x.db?timeout=soon",
        "sqlite:///x.db?synchronous=sometimes",
        "redis:///x.db",
    ):
        with pytest.raises(InvalidConfigError) as info:
            SqliteBackend.from_url(bad)
        assert info.value.code == "ANARCHON_INVALID_CONFIG"


def test_postgres_url_options(pg_dsn: str) -> None:
    b = PostgresBackend.from_url(
        f"{pg_dsn}?sslmode=disable&connect_timeout=5&table_prefix=abc_&pool_size=2"
    )
    assert b.tables.prefix == "abc_"
    assert b.pool_size == 2
    assert b.conninfo is not None
    assert "sslmode=disable" in b.conninfo
    assert "table_prefix" not in b.conninfo
    assert PostgresBackend.from_url(pg_dsn, table_prefix="kw_").tables.prefix == "kw_"
    assert PostgresBackend(f"{pg_dsn}?table_prefix=q_").tables.prefix == "q_"
    assert PostgresBackend(f"{pg_dsn}?table_prefix=q_", table_prefix="k_").tables.prefix == "k_"
    for bad in (
        f"{pg_dsn}?frobnicate=1",
        f"{pg_dsn}?pool_size=0",
        f"{pg_dsn}?pool_timeout=never",
        "mysql://localhost/db",
    ):
        with pytest.raises(InvalidConfigError) as info:
            PostgresBackend.from_url(bad)
        assert info.value.code == "ANARCHON_INVALID_CONFIG"
    with pytest.raises(InvalidConfigError):
        PostgresBackend()
    with pytest.raises(InvalidConfigError):
        PostgresBackend(pg_dsn, pool=object())
    with pytest.raises(InvalidConfigError):
        PostgresBackend(42)


def test_entry_points_resolve(pg_dsn: str, tmp_path: Path) -> None:
    for scheme in ("postgresql", "postgres"):
        url = pg_dsn.replace("postgresql://", f"{scheme}://") + "?table_prefix=ep_"
        backend = resolve_backend(url)
        assert isinstance(backend, PostgresBackend)
        assert backend.tables.prefix == "ep_"
    backend = resolve_backend(f"sqlite:///{tmp_path}/ep.db?timeout=2")
    assert isinstance(backend, SqliteBackend)
    assert backend.path == f"{tmp_path}/ep.db"
    with pytest.raises(InvalidConfigError):
        resolve_backend(f"sqlite:///{tmp_path}/ep.db?nope=1")
    schemes = {row[0]: row[2] for row in installed_backends()}
    assert schemes["postgresql"] == schemes["postgres"] == schemes["sqlite"] == "anarchon-sql"


@pytest.mark.parametrize("bad", ["", "1abc", "a-b", "x;drop table y", "a" * 41, "a b", 5, "é_"])
def test_bad_table_prefix_is_refused(bad: Any, pg_dsn: str) -> None:
    with pytest.raises(InvalidConfigError):
        SqliteBackend("x.db", table_prefix=bad)
    with pytest.raises(InvalidConfigError):
        PostgresBackend(pg_dsn, table_prefix=bad)


def test_placeholders() -> None:
    sql = "SELECT a FROM t WHERE b = ? AND c = '?%' AND d = ?"
    assert convert_placeholders(sql, "qmark") == sql
    assert (
        convert_placeholders(sql, "format")
        == "SELECT a FROM t WHERE b = %s AND c = '?%%' AND d = %s"
    )
    assert (
        convert_placeholders(sql, "numeric")
        == "SELECT a FROM t WHERE b = $1 AND c = '?%' AND d = $2"
    )
    assert (
        convert_placeholders(sql, "qnumeric")
        == "SELECT a FROM t WHERE b = ?1 AND c = '?%' AND d = ?2"
    )
    assert convert_placeholders("SELECT $x$ ? $x$, ?", "format") == "SELECT $x$ ? $x$, %s"


# Connection failures -------------------------------------------------------------


async def test_connection_failure_is_unavailable_and_hides_the_password() -> None:
    url = f"postgresql://cron:s3cret@127.0.0.1:{free_port()}/db?connect_timeout=2"
    backend = PostgresBackend.from_url(url)
    assert "s3cret" not in repr(backend)
    with pytest.raises(BackendUnavailableError) as info:
        await backend.init()
    assert info.value.code == "ANARCHON_BACKEND_UNAVAILABLE"
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    assert "s3cret" not in str(info.value)
    assert "cron:***@127.0.0.1" in str(info.value)
    keyvalue = PostgresBackend(f"host=127.0.0.1 port={free_port()} password=s3cret dbname=x")
    assert "s3cret" not in keyvalue.describe()
    with pytest.raises(BackendUnavailableError) as info:
        await keyvalue.init()
    assert "s3cret" not in str(info.value)


async def test_sqlite_unopenable_file_is_unavailable(tmp_path: Path) -> None:
    backend = SqliteBackend(str(tmp_path / "missing-dir" / "x.db"))
    with pytest.raises(BackendUnavailableError) as info:
        await backend.init()
    assert isinstance(info.value.__cause__, sqlite3.Error)


# Store format, start-up -------------------------------------------------------------


async def test_store_format_marker_and_newer_format_refused(make: Factory, prefix: str) -> None:
    first = make(prefix)
    await first.init()
    client = first.client
    assert client is not None
    rows = await client.all(f"SELECT value FROM {prefix}meta WHERE key = 'store_format'", ())
    assert rows == [(str(STORE_FORMAT),)]
    newer = str(STORE_FORMAT + 1)
    await client.all(
        first.dialect.placeholders(f"UPDATE {prefix}meta SET value = ? WHERE key = 'store_format'"),
        (newer,),
    )
    await first.close()
    second = make(prefix)
    with pytest.raises(StoreFormatError) as info:
        await second.init()
    assert info.value.code == "ANARCHON_STORE_FORMAT"
    assert newer in str(info.value)
    await second.close()


@pytest.mark.parametrize("marker", ["{bad", "1e400", "1.5", "0"])
async def test_a_store_format_marker_anarchon_did_not_write_is_foreign_data(
    make: Factory, prefix: str, marker: str
) -> None:
    first = make(prefix)
    await first.init()
    client = first.client
    assert client is not None
    await client.all(
        first.dialect.placeholders(f"UPDATE {prefix}meta SET value = ? WHERE key = 'store_format'"),
        (marker,),
    )
    await first.close()
    second = make(prefix)
    with pytest.raises(ForeignDataError) as info:
        await second.init()
    assert info.value.key == f"{prefix}meta[key='store_format']"
    await second.close()


async def test_concurrent_start_up_on_fresh_tables(make: Factory, prefix: str) -> None:
    backends = [make(prefix) for _ in range(8)]
    try:
        await asyncio.gather(*(b.init() for b in backends))
        now = await backends[0].runs.now_ms()
        answers = await asyncio.gather(
            *(
                b.claim(ClaimInput("start-up", now, f"token-{i}", f"i-{i}"))
                for i, b in enumerate(backends)
            )
        )
        assert sum(answers) == 1
    finally:
        await asyncio.gather(*(b.close() for b in backends))


async def test_init_is_idempotent_and_reopens_after_close(make: Factory, prefix: str) -> None:
    backend = make(prefix)
    await backend.init()
    await backend.init()
    await backend.close()
    await backend.close()
    assert backend.client is None
    assert await backend.now_ms() > 0  # reads re-initialise
    await backend.close()


# Connections the user owns ------------------------------------------------------------


async def _exercise(backend: SqlBackend, job: str) -> None:
    await backend.init()
    now = await backend.runs.now_ms()
    claim = RunClaim(job, now, "tok", "me", 10_000, deadline_ms=now + 60_000)
    assert (await backend.runs.claim(claim)).won
    assert await backend.runs.finish(job, now, "tok", "ok")
    await backend.save_result(job, StoredResult(now, "tok", "me", "ok", now, now + 1), 100)
    assert [r.status for r in await backend.history(job, 5)] == ["ok"]
    await backend.close()


async def test_postgres_user_connection_is_not_closed(pg_dsn: str, prefix: str) -> None:
    for autocommit in (True, False):
        conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=autocommit)
        try:
            await _exercise(PostgresBackend(conn, table_prefix=prefix), f"conn-{autocommit}")
            assert not conn.closed
            # The work was committed: another backend sees it.
            other = PostgresBackend(pg_dsn, table_prefix=prefix)
            assert len(await other.history(f"conn-{autocommit}", 5)) == 1
            await other.close()
        finally:
            await conn.close()


async def test_postgres_user_pool_is_not_closed(pg_dsn: str, prefix: str) -> None:
    pool = AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False)
    await pool.open(wait=True)
    try:
        await _exercise(PostgresBackend(pool=pool, table_prefix=prefix), "pool")
        assert not pool.closed
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
    finally:
        await pool.close()


class CountingClient:
    """A SqlClient of our own (over psycopg) that counts what the backend sends."""

    def __init__(self, inner: SqlClient) -> None:
        self.inner = inner
        self.statements: list[str] = []
        self.transactions = 0

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.statements.append(sql)
        return await self.inner.all(sql, params)

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        self.transactions += 1
        return await self.inner.transaction(fn)


async def test_postgres_claim_is_one_statement_on_any_sql_client(pg_dsn: str, prefix: str) -> None:
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        client = CountingClient(PsycopgClient(conn, pool=False, owned=False))
        backend = PostgresBackend(database=client, table_prefix=prefix)
        await backend.init()
        now = await backend.runs.now_ms()
        client.statements.clear()
        client.transactions = 0
        for kind, token in (("won", "a"), ("running", "b"), ("won", "a")):
            claim = RunClaim("one-trip", now, token, token, 10_000, deadline_ms=now + 60_000)
            assert (await backend.runs.claim(claim)).kind == kind
        assert len(client.statements) == 3, client.statements
        assert client.transactions == 0
        assert all(f"{prefix}claim_v3(" in s for s in client.statements)
        assert await backend.claim(ClaimInput("one-trip", now + 1, "p", "p"))
        assert len(client.statements) == 4
        await backend.close()
        assert not conn.closed
    finally:
        await conn.close()


async def test_sqlite_user_connections_are_not_closed(sqlite_path: str, prefix: str) -> None:
    conn = await aiosqlite.connect(sqlite_path)
    try:
        await _exercise(
            SqliteBackend(database=from_sqlite_database(conn), table_prefix=prefix), "a"
        )
        await _exercise(SqliteBackend(conn, table_prefix=prefix), "b")  # wrapped for you
        await conn.execute("SELECT 1")
    finally:
        await conn.close()
    plain = sqlite3.connect(sqlite_path)
    try:
        await _exercise(SqliteBackend(database=plain, table_prefix=prefix), "c")
        assert plain.execute("SELECT count(*) FROM " + prefix + "results").fetchone() == (3,)
    finally:
        plain.close()
    with pytest.raises(InvalidConfigError):
        from_sqlite_database(object())


# Serialisation, transactions, server time -----------------------------------------------


async def test_postgres_claims_of_one_job_wait_for_the_job_lock(pg_dsn: str, prefix: str) -> None:
    backend = PostgresBackend(pg_dsn, table_prefix=prefix)
    await backend.init()
    holder = await psycopg.AsyncConnection.connect(pg_dsn)
    try:
        now = await backend.runs.now_ms()
        async with holder.transaction():
            # What dialect.serialize() takes in the generic path and the claim function takes.
            await backend.dialect.serialize(
                PsycopgClient(holder, pool=False, owned=False), f"{prefix}job:locked"
            )
            claim = asyncio.create_task(
                backend.runs.claim(
                    RunClaim("locked", now, "t", "i", 10_000, deadline_ms=now + 60_000)
                )
            )
            other_job = RunClaim("free", now, "t", "i", 10_000, deadline_ms=now + 60_000)
            assert (await asyncio.wait_for(backend.runs.claim(other_job), 5)).won
            await asyncio.sleep(0.3)
            assert not claim.done(), "a claim ran while another transaction held its job's lock"
        assert (await asyncio.wait_for(claim, 5)).won
    finally:
        await holder.close()
        await backend.close()


class RecordingDialect(SqliteDialect):
    def __init__(self) -> None:
        self.keys: list[str] = []

    async def serialize(self, client: SqlClient, key: str) -> None:
        self.keys.append(key)


async def test_generic_claim_calls_serialize_first(sqlite_path: str, prefix: str) -> None:
    backend = SqliteBackend(sqlite_path, table_prefix=prefix)
    dialect = RecordingDialect()
    backend.dialect = dialect
    await backend.init()
    assert dialect.keys == [f"{prefix}init"]
    dialect.keys.clear()
    now = await backend.runs.now_ms()
    await backend.runs.claim(RunClaim("ser", now, "t", "i", 1000, deadline_ms=now + 60_000))
    assert dialect.keys == [f"{prefix}job:ser"]
    await backend.close()


async def test_sqlite_wal_busy_timeout_and_begin_immediate(sqlite_path: str, prefix: str) -> None:
    backend = SqliteBackend(sqlite_path, table_prefix=prefix, timeout=5)
    await backend.init()
    client = backend.client
    assert client is not None
    assert await client.all("PRAGMA journal_mode", ()) == [("wal",)]
    assert await client.all("PRAGMA busy_timeout", ()) == [(5000,)]
    now = await backend.runs.now_ms()
    # Another process-like connection holds the write lock for a while: the claim waits.
    other = sqlite3.connect(sqlite_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    loop = asyncio.get_running_loop()
    loop.call_later(0.4, other.execute, "COMMIT")
    t0 = time.monotonic()
    won = await backend.runs.claim(RunClaim("busy", now, "t", "i", 1000, deadline_ms=now + 60_000))
    assert won.won
    assert time.monotonic() - t0 >= 0.3
    # With a tiny busy timeout the same wait fails as "database is locked": transient.
    impatient = SqliteBackend(sqlite_path, table_prefix=prefix, timeout=0.05)
    await impatient.init()
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(BackendUnavailableError, match="locked") as info:
            await impatient.runs.claim(
                RunClaim("busy", now + 1, "t", "i", 1000, deadline_ms=now + 60_000)
            )
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert impatient.is_transient(info.value)
        assert impatient.is_transient(info.value.__cause__)
    finally:
        other.execute("COMMIT")
        other.close()
        await impatient.close()
        await backend.close()


async def test_lease_times_come_from_the_database_clock(
    make: Factory, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = make(prefix)
    await backend.init()
    before = await backend.runs.now_ms()
    real_time, real_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + 3600 * 10**9)
    won = await backend.runs.claim(
        RunClaim("clock", before, "t", "i", 10_000, deadline_ms=before + 60_000)
    )
    after = await backend.runs.now_ms()
    monkeypatch.undo()
    assert abs(after - time.time() * 1000) < 5_000, "now_ms() must be the server's clock"
    assert won.lease_expires_at is not None
    assert before + 10_000 - 5 <= won.lease_expires_at <= after + 10_000 + 5
    await backend.close()


# Retention ------------------------------------------------------------------------------


async def test_running_state_survives_history_trimming(make: Factory, prefix: str) -> None:
    backend = make(prefix)
    await backend.init()
    job, size = "retain", 4
    backend.check_job(JobLimits(job, 1000, 0, 0, size))
    now = await backend.runs.now_ms()
    # well inside the 60 s the store must keep finished state for (max_late 0 + 1 min margin),
    # however slowly the machine runs this test
    base = (now // 1000) * 1000 - 30_000
    long_run = RunClaim(job, base, "long", "i", 600_000, overlap=True, deadline_ms=base + 10**9)
    assert (await backend.runs.claim(long_run)).won
    for i in range(1, 5 * size):
        slot = base + i * 1000
        assert await backend.claim(ClaimInput(job, slot, f"t{i}", "i", size))
        await backend.save_result(job, StoredResult(slot, f"t{i}", "i", "ok", slot, slot + 1), size)
    records = await backend.history(job, 100)
    assert size <= len(records) - 1 <= 2 * size
    assert [a.slot for a in await backend.runs.active(job)] == [base]
    assert records[-1].slot == base
    assert records[-1].status == "running"
    # Run state of finished slots inside the late/catch-up window is kept: no second winner.
    assert not await backend.claim(ClaimInput(job, base + 1000, "again", "j", size))
    await backend.close()


# The scheduler on a SQL store -------------------------------------------------------------


async def test_graceful_stop_hands_over_to_a_backup(make: Factory, prefix: str) -> None:
    """stop() releases the lease: the backup instance runs attempt 2 within a heartbeat."""
    job = f"handover-{uuid.uuid4().hex[:6]}"
    started: list[tuple[str, int]] = []
    second = asyncio.Event()

    async def handler(ctx: RunContext) -> None:
        started.append((ctx.instance_id, ctx.attempt))
        if ctx.attempt == 2:
            second.set()
        await asyncio.sleep(60)

    backend_a, backend_b = make(prefix), make(prefix)
    a = Scheduler(backend_a, instance_id="a", lease="3s", heartbeat="300ms", stop_grace=0)
    b = Scheduler(backend_b, instance_id="b", lease="3s", heartbeat="300ms", stop_grace=0)
    for scheduler in (a, b):
        scheduler.cron(job, DUE, handler, jitter=0, max_late="2h")
    try:
        await a.start()
        for _ in range(200):
            if started:
                break
            await asyncio.sleep(0.02)
        assert started == [("a", 1)]
        await b.start()
        await asyncio.sleep(0.5)  # b is a backup now
        t0 = time.monotonic()
        await a.stop()
        await asyncio.wait_for(second.wait(), 5)
        assert time.monotonic() - t0 < 3.0, "hand-over waited for the lease to expire"
        assert started == [("a", 1), ("b", 2)]
        records = await b.history(job, 5)
        assert [(r.attempt, r.instance_id, r.status, r.reason) for r in records] == [
            (2, "b", "running", None),
            (1, "a", "interrupted", "handed_over"),
        ]
    finally:
        await a.stop()
        await b.stop()
        await backend_a.close()
        await backend_b.close()
