"""Errors of the SQL backends: what is transient, foreign tables, coded driver errors, secrets."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import psycopg.errors
import pytest
from anarchon import Scheduler
from anarchon.errors import (
    BackendError,
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
)
from anarchon.types import RunClaim
from anarchon_sql import PostgresBackend, SqlBackend, SqliteBackend
from anarchon_sql._driver_errors import redact_dsn, secrets_of_dsn
from anarchon_testservers.postgres import free_port
from psycopg_pool import PoolTimeout

SECRET = "hunter2"


def _all_text(error: BaseException) -> str:
    """The error as a user or a log would see it: message, repr and the whole chained traceback."""
    return "\n".join(
        [str(error), repr(error), *traceback.format_exception(error)]
        + [str(getattr(e, "key", "")) for e in (error, error.__cause__) if e is not None]
    )


# Transient or not ---------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.SerializationFailure(),  # 40001
        psycopg.errors.DeadlockDetected(),  # 40P01
        psycopg.errors.AdminShutdown(),  # 57P01
        psycopg.errors.CannotConnectNow(),  # 57P03
        psycopg.errors.ConnectionFailure(),  # 08006
        psycopg.errors.QueryCanceled(),  # 57014 (statement timeout)
        psycopg.errors.LockNotAvailable(),  # 55P03 (lock timeout)
        psycopg.errors.TooManyConnections(),  # 53300
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.InterfaceError("the connection is closed"),
        PoolTimeout("couldn't get a connection after 30.00 sec"),
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("database table is locked"),
        ConnectionResetError("reset by peer"),
        TimeoutError(),
        BackendUnavailableError("gone"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transient_errors(error: BaseException, tmp_path: Path) -> None:
    assert SqliteBackend(str(tmp_path / "x.db")).is_transient(error)


class AsyncpgStyleError(Exception):
    """An asyncpg-like error: the SQLSTATE in ``sqlstate``."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"asyncpg-style {sqlstate}")
        self.sqlstate = sqlstate


class ConnectionDoesNotExistError(Exception):
    """Named like asyncpg's error for a connection that is gone."""


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (AsyncpgStyleError("08003"), True),
        (AsyncpgStyleError("57P01"), True),
        (AsyncpgStyleError("40P01"), True),
        (ConnectionDoesNotExistError("connection was closed in the middle of operation"), True),
        (AsyncpgStyleError("42703"), False),
        (AsyncpgStyleError("23505"), False),
    ],
    ids=lambda v: str(v),
)
def test_asyncpg_style_errors(error: BaseException, transient: bool, tmp_path: Path) -> None:
    assert SqliteBackend(str(tmp_path / "x.db")).is_transient(error) is transient


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.UndefinedColumn(),
        psycopg.errors.UndefinedFunction(),
        psycopg.errors.UniqueViolation(),
        psycopg.errors.SyntaxError(),
        psycopg.errors.InsufficientPrivilege(),
        psycopg.errors.ReadOnlySqlTransaction(),
        sqlite3.OperationalError("no such column: x"),
        sqlite3.IntegrityError("NOT NULL constraint failed"),
        sqlite3.DatabaseError("file is not a database"),
        ValueError("bad"),
        InvalidConfigError("bad"),
        BackendError("bad"),
        ForeignDataError("bad", key="t"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_permanent_errors(error: BaseException, tmp_path: Path) -> None:
    assert not SqliteBackend(str(tmp_path / "x.db")).is_transient(error)


async def test_a_real_deadlock_is_transient(pg_dsn: str, prefix: str) -> None:
    backend = PostgresBackend(pg_dsn, table_prefix=prefix)
    await backend.init()
    a = await psycopg.AsyncConnection.connect(pg_dsn)
    b = await psycopg.AsyncConnection.connect(pg_dsn)
    try:
        await a.execute(f"CREATE TABLE {prefix}dl (k int PRIMARY KEY)")
        await a.execute(f"INSERT INTO {prefix}dl VALUES (1), (2)")
        await a.commit()
        await a.execute(f"UPDATE {prefix}dl SET k = k WHERE k = 1")
        await b.execute(f"UPDATE {prefix}dl SET k = k WHERE k = 2")
        results = await asyncio.gather(
            a.execute(f"UPDATE {prefix}dl SET k = k WHERE k = 2"),
            b.execute(f"UPDATE {prefix}dl SET k = k WHERE k = 1"),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1
        assert isinstance(errors[0], psycopg.errors.DeadlockDetected)
        assert backend.is_transient(errors[0])
        coded = await backend.translate_error(errors[0])
        assert isinstance(coded, BackendUnavailableError)
        assert backend.is_transient(coded)
    finally:
        await a.close()
        await b.close()
        await backend.close()


# Foreign tables -------------------------------------------------------------------


def _pg_make(dsn: str) -> Any:
    return lambda prefix: PostgresBackend(dsn, table_prefix=prefix)


@pytest.mark.parametrize("store", ["postgres", "sqlite"])
@pytest.mark.parametrize(
    ("table", "ddl"),
    [
        ("runs", "(id INTEGER PRIMARY KEY, name TEXT)"),
        ("meta", "(a INTEGER)"),
        ("jobs", "(job TEXT PRIMARY KEY, saves BIGINT, owner TEXT NOT NULL)"),
    ],
)
async def test_foreign_table_is_named(
    store: str, table: str, ddl: str, prefix: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    name = f"{prefix}{table}"
    if store == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        await conn.execute(f"CREATE TABLE {name} {ddl}")
        await conn.close()
        backend: SqlBackend = PostgresBackend(dsn, table_prefix=prefix)
    else:
        path = str(tmp_path / "foreign.db")
        with sqlite3.connect(path) as db:
            db.execute(f"CREATE TABLE {name} {ddl}")
        backend = SqliteBackend(path, table_prefix=prefix)
    with pytest.raises(ForeignDataError) as info:
        await backend.init()
    assert info.value.code == "ANARCHON_FOREIGN_DATA"
    assert info.value.key == name
    assert name in str(info.value)
    await backend.close()


async def test_a_table_changed_later_is_named_at_the_failing_call(pg_dsn: str, prefix: str) -> None:
    backend = PostgresBackend(pg_dsn, table_prefix=prefix)
    await backend.init()
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        await conn.execute(f"ALTER TABLE {prefix}results RENAME COLUMN reason TO why")
        await backend.runs.claim(RunClaim("j", 1, "t", "i", 1, overlap=True))
        await asyncio.sleep(0.01)  # expired: the next claim takes over and writes a result
        with pytest.raises(ForeignDataError) as info:
            await backend.runs.claim(RunClaim("j", 1, "u", "i", 1000, max_attempts=3))
        assert info.value.key == f"{prefix}results"
        assert isinstance(info.value.__cause__, psycopg.Error)
    finally:
        await conn.close()
        await backend.close()


# Driver errors that are not anarchon's ---------------------------------------------


def _with_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    return dsn.replace(f"{parts.username}@", f"{parts.username}:{SECRET}@", 1)


async def test_driver_error_is_a_backend_error_naming_the_url(pg_dsn: str, prefix: str) -> None:
    url = _with_password(pg_dsn)  # the test server trusts every password
    backend = PostgresBackend.from_url(f"{url}?table_prefix={prefix}")
    await backend.init()
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        await conn.execute(f"DROP FUNCTION {prefix}claim_v3 CASCADE")
        with pytest.raises(BackendError) as info:
            await backend.runs.claim(RunClaim("j", 1, "t", "i", 1000))
        assert info.value.code == "ANARCHON_BACKEND_ERROR"
        assert isinstance(info.value.__cause__, psycopg.errors.UndefinedFunction)
        assert "postgres:***@127.0.0.1" in str(info.value)
        assert SECRET not in _all_text(info.value)
        assert not backend.is_transient(info.value)
    finally:
        await conn.close()
        await backend.close()


async def test_sqlite_driver_error_is_a_backend_error(tmp_path: Path, prefix: str) -> None:
    path = tmp_path / "x.db"
    backend = SqliteBackend(str(path), table_prefix=prefix)
    await backend.init()
    try:
        with sqlite3.connect(path) as db:
            db.execute(
                f"CREATE TRIGGER {prefix}no BEFORE INSERT ON {prefix}runs"
                " BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
            )
        with pytest.raises(BackendError, match="refused by a trigger") as info:
            await backend.runs.claim(RunClaim("j", 1, "t", "i", 1000))
        assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
        assert f"sqlite:///{path}" in str(info.value)
    finally:
        await backend.close()


# Secrets and key=value DSNs ---------------------------------------------------------


def _keyvalue(pg_dsn: str, **over: Any) -> str:
    parts = urlsplit(pg_dsn)
    fields = {
        "host": parts.hostname,
        "port": parts.port,
        "user": parts.username,
        "password": SECRET,
        "dbname": parts.path.lstrip("/"),
        **over,
    }
    return " ".join(f"{k}={v}" for k, v in fields.items())


async def test_keyvalue_dsn_is_accepted(pg_dsn: str, prefix: str) -> None:
    dsn = _keyvalue(pg_dsn)
    backend = PostgresBackend(dsn, table_prefix=prefix)
    assert SECRET not in backend.describe()
    assert SECRET not in repr(backend)
    assert "password=***" in backend.describe()
    await backend.init()
    try:
        now = await backend.runs.now_ms()
        assert (await backend.runs.claim(RunClaim("kv", now, "t", "i", 1000))).won
    finally:
        await backend.close()


async def test_keyvalue_dsn_connection_error_never_shows_the_password(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    dsn = _keyvalue(pg_dsn, port=free_port(), connect_timeout=2)
    backend = PostgresBackend(dsn)
    with pytest.raises(BackendUnavailableError) as info:
        await backend.init()
    assert SECRET not in _all_text(info.value)
    assert "password=***" in str(info.value)
    # The same through a scheduler: whatever it logs while the store is unreachable.
    scheduler = Scheduler(PostgresBackend(dsn))
    scheduler.every("secret-job", "1s", lambda ctx: None)
    outcome: BaseException | None = None
    try:
        await asyncio.wait_for(scheduler.start(), 2.0)
    except Exception as error:  # the scheduler may raise or keep retrying: only the text counts
        outcome = error
    finally:
        await scheduler.stop()
    if outcome is not None:
        assert SECRET not in _all_text(outcome)
    logged = caplog.text + "".join(
        "".join(traceback.format_exception(*r.exc_info)) for r in caplog.records if r.exc_info
    )
    assert SECRET not in logged


@pytest.mark.parametrize(
    "dsn",
    [
        f"host=127.0.0.1 password='{SECRET} more' dbname=x bogus_option=1",
        f"host=127.0.0.1 password='{SECRET} more' dbname=x",
        f"host=127.0.0.1 password='{SECRET} unterminated dbname=x",
        f"host=127.0.0.1 password = {SECRET} dbname",
        f"host=127.0.0.1 sslpassword={SECRET} bogus_option=1",
        f"postgresql://u:{SECRET}@h/db?sslpassword={SECRET}&bogus_option=1",
        f"postgresql://u:{SECRET}@h:notaport/db",
    ],
)
def test_malformed_dsns_never_show_the_password(dsn: str) -> None:
    assert SECRET not in redact_dsn(dsn)
    assert SECRET in "".join(secrets_of_dsn(dsn))
    refused: InvalidConfigError | None = None
    try:
        backend = PostgresBackend(dsn)
    except InvalidConfigError as error:
        refused = error
    if refused is not None:
        assert SECRET not in _all_text(refused)
    else:  # libpq takes it: the backend never shows it either
        assert SECRET not in backend.describe() + repr(backend)
        assert SECRET in "".join(backend.secrets())
