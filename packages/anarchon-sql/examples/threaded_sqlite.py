"""The extension path: another SQL database as a subclass of ``SqlBackend`` and ``SqlDialect``.

This example adds a backend on the standard library's ``sqlite3`` driver,
with a hand-written :class:`~anarchon_sql.SqlClient` that runs every call on
one worker thread (so a wait for SQLite's write lock never blocks the event
loop). It is deliberately written the way a backend for another database
would be: nothing here is SQLite-specific except the driver calls and the
three dialect members.

It passes ``anarchon.testing.BackendContract`` and ``LeaseContract``
(``packages/anarchon-sql/tests/test_sql_example.py``). Usage::

    backend = ThreadedSqliteBackend("/var/lib/app/cron.db")
    scheduler = Scheduler(backend)

Steps for your own database:

1. a ``SqlDialect`` subclass: ``now_ms`` (the server clock in ms, as an SQL
   integer expression), ``bigint``/``text`` types, ``for_update`` (the row
   lock, if the database has one), ``paramstyle`` or ``placeholders()``,
   ``serialize()`` (make two claims of one job wait for each other inside a
   transaction — an advisory or named lock; nothing if write transactions
   are serialised anyway) and ``is_already_created()``;
2. a ``SqlClient``: ``all(sql, params)`` and ``transaction(fn)``;
3. a ``SqlBackend`` subclass: ``connect()`` returning ``(client, owned)``,
   optionally ``check_server()``, ``describe()`` and ``from_url()``;
4. register it under the entry-point group ``anarchon.backends`` with the
   URL scheme as the name, and run the two contract suites against it.

The SQL the base class writes needs ``ON CONFLICT ... DO NOTHING/UPDATE`` and
``UPDATE ... RETURNING`` (PostgreSQL, SQLite >= 3.35, CockroachDB, DuckDB).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

from anarchon.errors import BackendUnavailableError
from anarchon_sql import SqlBackend, SqlClient, SqlDialect

T = TypeVar("T")
Row = tuple[Any, ...]


class NumberedSqliteDialect(SqlDialect):
    """SQLite with numbered placeholders (``?1``, ``?2``) to show ``placeholders()`` at work."""

    name: ClassVar[str] = "sqlite3-threaded"
    bigint = "INTEGER"
    text = "TEXT"
    now_ms = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    for_update = ""  # BEGIN IMMEDIATE locks the whole database
    paramstyle = "qnumeric"

    async def serialize(self, client: SqlClient, key: str) -> None:
        """Nothing: ``BEGIN IMMEDIATE`` already serialises every write transaction."""
        return None

    def is_already_created(self, error: BaseException) -> bool:
        """SQLite says "table ... already exists"."""
        return isinstance(error, sqlite3.OperationalError) and "already exists" in str(error)


def _enable_wal(conn: sqlite3.Connection, give_up: float) -> None:
    """Switch the file to WAL, retrying while another connection holds it.

    Changing the journal mode needs an exclusive lock, and SQLite may answer
    "database is locked" at once instead of calling the busy handler when
    several connections open a fresh file together.
    """
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > give_up:
                raise
            time.sleep(0.01)


class ThreadedSqliteClient:
    """A hand-written :class:`SqlClient`: one ``sqlite3`` connection on one worker thread."""

    def __init__(self, path: str, timeout: float = 5.0) -> None:
        self.path = path
        self.timeout = timeout
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite3-client")
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def open(self) -> None:
        """Open the connection on the worker thread (WAL, busy timeout, no implicit BEGIN)."""

        def opener() -> None:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            try:
                _enable_wal(conn, give_up=time.monotonic() + max(self.timeout, 1.0))
            except BaseException:
                conn.close()
                raise
            self._conn = conn

        await self._call(opener)

    def _execute(self, sql: str, params: Sequence[Any]) -> list[Row]:
        assert self._conn is not None
        return [tuple(row) for row in self._conn.execute(sql, tuple(params)).fetchall()]

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """One statement, autocommit."""
        async with self._lock:
            return await self._call(lambda: self._execute(sql, params))

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """``BEGIN IMMEDIATE``, ``fn`` with a client bound to the transaction, ``COMMIT``."""
        async with self._lock:
            await self._call(lambda: self._execute("BEGIN IMMEDIATE", ()))
            try:
                result = await fn(_InTransaction(self))
            except BaseException:
                await self._call(lambda: self._execute("ROLLBACK", ()))
                raise
            await self._call(lambda: self._execute("COMMIT", ()))
            return result

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await self._call(conn.close)
        self._executor.shutdown(wait=True)


class _InTransaction:
    """What ``transaction(fn)`` hands to ``fn``: statements run inside the open transaction."""

    def __init__(self, client: ThreadedSqliteClient) -> None:
        self._client = client

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """One statement inside the transaction."""
        client = self._client
        return await client._call(lambda: client._execute(sql, params))

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """Already inside one: run ``fn`` here."""
        return await fn(self)


class ThreadedSqliteBackend(SqlBackend):
    """An example SQL backend: stdlib ``sqlite3`` on a worker thread, via ``SqlBackend``."""

    name: ClassVar[str] = "sqlite3-threaded"

    def __init__(self, path: str, *, table_prefix: str = "anarchon_", timeout: float = 5.0) -> None:
        super().__init__(dialect=NumberedSqliteDialect(), table_prefix=table_prefix)
        self.path = path
        self.timeout = timeout

    def describe(self) -> str:
        """Where the store is (for messages)."""
        return f"sqlite3:{self.path}"

    async def connect(self) -> tuple[SqlClient, bool]:
        """Open our own client (so ``close()`` closes it: owned=True)."""
        client = ThreadedSqliteClient(self.path, self.timeout)
        try:
            await client.open()
        except sqlite3.Error as error:
            await client.close()
            raise BackendUnavailableError(f"cannot open {self.describe()}: {error}") from error
        return client, True

    async def check_server(self, client: SqlClient) -> None:
        """``RETURNING`` needs SQLite 3.35."""
        (version,) = (await client.all("SELECT sqlite_version()", ()))[0]
        if tuple(int(x) for x in str(version).split(".")[:2]) < (3, 35):
            raise BackendUnavailableError(f"SQLite {version} is too old (needs 3.35+)")
