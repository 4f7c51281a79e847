"""``SqliteBackend``: the embedded default for one host (aiosqlite, WAL, ``BEGIN IMMEDIATE``).

Processes on one machine coordinate through one database file. Every write is
a ``BEGIN IMMEDIATE`` transaction: it takes SQLite's write lock up front and
waits for it through the busy timeout, so two claims never interleave (in WAL
mode a deferred read-then-write transaction would fail with
``SQLITE_BUSY_SNAPSHOT`` instead of waiting). Server time is the machine's
clock read by SQLite: ``(julianday('now') - 2440587.5) * 86400000``
(``unixepoch('subsec')`` needs SQLite 3.42).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, ClassVar, TypeVar, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from anarchon.errors import BackendUnavailableError, InvalidConfigError

from anarchon_sql._backend import SqlBackend
from anarchon_sql._client import Row, SqlClient, is_sql_client
from anarchon_sql._dialect import DEFAULT_TABLE_PREFIX, SqlDialect

__all__ = ["SqliteBackend", "SqliteDialect", "from_sqlite_database"]

T = TypeVar("T")

MIN_SQLITE = (3, 35, 0)
"""``RETURNING`` came in SQLite 3.35."""

_SYNCHRONOUS = ("off", "normal", "full", "extra")
_URL_OPTIONS = ("table_prefix", "timeout", "synchronous", "durability")


class SqliteDialect(SqlDialect):
    """SQLite: 64-bit ``INTEGER``, no row locks (the whole database is locked by the write
    transaction), ``?`` placeholders, and the machine clock read through ``julianday``."""

    name: ClassVar[str] = "sqlite"
    bigint = "INTEGER"
    text = "TEXT"
    now_ms = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    for_update = ""
    paramstyle = "qmark"

    async def serialize(self, client: SqlClient, key: str) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already serialises every write transaction."""
        return None

    def columns_statement(self) -> str:
        """``pragma_table_info``: the column names of one table."""
        return "SELECT name FROM pragma_table_info(?)"


class _AiosqliteClient:
    """A :class:`SqlClient` over one ``aiosqlite.Connection`` (one transaction at a time)."""

    def __init__(self, conn: Any, *, owned: bool) -> None:
        self.conn = conn
        self.owned = owned
        self._lock = asyncio.Lock()

    async def _run(self, sql: str, params: Sequence[Any]) -> list[Row]:
        rows = await self.conn.execute_fetchall(sql, tuple(params))
        return [tuple(row) for row in rows]

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement as its own transaction."""
        async with self._lock:
            rows = await self._run(sql, params)
            if self.conn.in_transaction:  # a connection with implicit transactions
                await self.conn.commit()
            return rows

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` if ``fn`` raises)."""
        async with self._lock:
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = await fn(_Bound(self._run))
            except BaseException:
                await self.conn.rollback()
                raise
            await self.conn.commit()
            return result

    async def inline_transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """:meth:`transaction`, run whole on aiosqlite's thread: one hop, not one per statement.

        ``fn`` may only await statements on the client it is given (the
        backend's own transactions do just that); anything else raises
        ``RuntimeError``. Falls back to :meth:`transaction` on an aiosqlite
        without its internal ``_execute``.
        """
        execute = getattr(self.conn, "_execute", None)
        if execute is None:
            return await self.transaction(fn)
        async with self._lock:
            result: T = await execute(_run_inline, self.conn, fn)
            return result

    async def close(self) -> None:
        """Close the connection (only called when the backend opened it)."""
        await self.conn.close()


def _drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, synchronously."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("an inline SQLite transaction awaited something other than its statements")


def _run_inline(conn: Any, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
    """On aiosqlite's thread: ``BEGIN IMMEDIATE``, ``fn`` on the raw connection, ``COMMIT``."""
    raw: sqlite3.Connection = conn._conn

    async def run(sql: str, params: Sequence[Any]) -> list[Row]:
        return [tuple(row) for row in raw.execute(sql, tuple(params)).fetchall()]

    raw.execute("BEGIN IMMEDIATE")
    try:
        awaitable = fn(_Bound(run))
        if not inspect.iscoroutine(awaitable):
            raise RuntimeError("an inline SQLite transaction needs a coroutine function")
        result = cast(T, _drive(awaitable))
    except BaseException:
        raw.rollback()
        raise
    raw.commit()
    return result


class _Sqlite3Client:
    """A :class:`SqlClient` over a stdlib ``sqlite3.Connection``.

    Statements run on the event loop's thread (the connection stays in the
    thread that made it); a wait for the write lock blocks the loop for up to
    the busy timeout, so prefer aiosqlite for a busy database.
    """

    def __init__(self, conn: sqlite3.Connection, *, owned: bool) -> None:
        self.conn = conn
        self.owned = owned
        self._lock = asyncio.Lock()

    async def _run(self, sql: str, params: Sequence[Any]) -> list[Row]:
        return [tuple(row) for row in self.conn.execute(sql, tuple(params)).fetchall()]

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement as its own transaction."""
        async with self._lock:
            rows = await self._run(sql, params)
            if self.conn.in_transaction:
                self.conn.commit()
            return rows

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` if ``fn`` raises)."""
        async with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = await fn(_Bound(self._run))
            except BaseException:
                self.conn.rollback()
                raise
            self.conn.commit()
            return result

    async def close(self) -> None:
        """Close the connection (only called when the backend opened it)."""
        self.conn.close()


class _Bound:
    """The client handed to a transaction's function: statements run inside it."""

    def __init__(self, run: Callable[[str, Sequence[Any]], Awaitable[list[Row]]]) -> None:
        self._run = run

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement inside the transaction."""
        return await self._run(sql, params)

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """Already in a transaction: run ``fn`` in it."""
        return await fn(self)


def from_sqlite_database(connection: Any) -> SqlClient:
    """Wrap a SQLite connection you own as a :class:`SqlClient`.

    Accepts an ``aiosqlite.Connection`` (recommended) or a stdlib
    ``sqlite3.Connection``. Transactions are ``BEGIN IMMEDIATE``; a statement
    outside one is committed at once. The connection is never closed by the
    backend; its busy timeout is yours to set (``timeout=`` of ``connect``).

    >>> backend = SqliteBackend(database=from_sqlite_database(conn))  # doctest: +SKIP
    """
    if isinstance(connection, sqlite3.Connection):
        return _Sqlite3Client(connection, owned=False)
    if callable(getattr(connection, "execute_fetchall", None)):
        return _AiosqliteClient(connection, owned=False)
    raise InvalidConfigError(
        "from_sqlite_database() takes an aiosqlite.Connection or a sqlite3.Connection,"
        f" not {type(connection).__name__}"
    )


def _probe_open(path: str, timeout: float) -> None:
    sqlite3.connect(path, timeout=timeout).close()


def _parse_timeout(value: Any) -> float:
    try:
        timeout = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"timeout must be a number of seconds, got {value!r}") from None
    if not timeout >= 0 or timeout == float("inf"):
        raise InvalidConfigError(f"timeout must be a finite number >= 0, got {value!r}")
    return timeout


class SqliteBackend(SqlBackend):
    """SQLite through aiosqlite: processes on one host share one database file.

    ``SqliteBackend("cron.db")`` (or ``path=``) opens the file itself (created
    if missing), switches it to WAL and closes it on ``close()``.
    ``SqliteBackend(database=client)`` uses a :class:`SqlClient` you own
    (``from_sqlite_database(conn)``, or an aiosqlite/sqlite3 connection, which
    is wrapped for you) and never closes it.

    Options: ``table_prefix`` (``"anarchon_"``), ``timeout`` (busy timeout in
    seconds, default 5: how long a write waits for another process's
    transaction), ``synchronous`` (``"full"`` by default; ``"normal"`` is
    about 3 times faster, and in WAL mode loses no data on an application crash,
    only on power loss), ``durability`` (``"fast"`` only: one file has no
    replica; ``"replicated"`` is refused). URL: ``sqlite:///relative.db``,
    ``sqlite:////abs/path.db``, ``sqlite:///:memory:``.
    """

    name: ClassVar[str] = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str] | SqlClient | Any = None,
        *,
        database: SqlClient | Any | None = None,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        timeout: float = 5.0,
        synchronous: str = "full",
        durability: str = "fast",
    ) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            if database is not None:
                raise InvalidConfigError("pass either a path or database=, not both")
            path, database = None, path
        if (path is None) == (database is None):
            raise InvalidConfigError("SqliteBackend needs exactly one of path= or database=")
        super().__init__(dialect=SqliteDialect(), table_prefix=table_prefix, durability=durability)
        self.path: str | None = None if path is None else os.fspath(path)
        if database is not None and not is_sql_client(database):
            database = from_sqlite_database(database)
        self.database: SqlClient | None = database
        self.timeout = _parse_timeout(timeout)
        if not isinstance(synchronous, str) or synchronous.lower() not in _SYNCHRONOUS:
            raise InvalidConfigError(
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}"
            )
        self.synchronous = synchronous.lower()

    def clone(self) -> SqliteBackend | None:
        """A second backend on the same file, for the lease thread (None for ``:memory:`` or a
        ``database=`` you passed in: only that one connection sees its data)."""
        if self.path is None or self.path == ":memory:" or self.path.startswith("file::memory:"):
            return None
        return SqliteBackend(
            self.path,
            table_prefix=self.tables.prefix,
            timeout=self.timeout,
            synchronous=self.synchronous,
            durability=self.durability,
        )

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SqliteBackend:
        """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``.

        Query options (or keywords): ``table_prefix``, ``timeout`` (seconds),
        ``synchronous``, ``durability``; any other is an ``InvalidConfigError``.
        """
        parts = urlsplit(url)
        if parts.scheme.lower() != "sqlite":
            raise InvalidConfigError(f"not a sqlite:// URL: {url!r}")
        if parts.netloc:
            raise InvalidConfigError(
                f"sqlite URLs have no host: use sqlite:///relative.db or sqlite:////abs/path.db,"
                f" got {url!r}"
            )
        path = unquote(parts.path)
        path = path[1:] if path.startswith("/") else path
        if not path:
            path = ":memory:"
        given: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
        given.update(options)
        unknown = sorted(set(given) - set(_URL_OPTIONS))
        if unknown:
            raise InvalidConfigError(
                f"unknown sqlite:// option(s): {', '.join(unknown)}"
                f" (known: {', '.join(_URL_OPTIONS)})"
            )
        kwargs: dict[str, Any] = {}
        if "table_prefix" in given:
            kwargs["table_prefix"] = given["table_prefix"]
        if "timeout" in given:
            kwargs["timeout"] = _parse_timeout(given["timeout"])
        if "synchronous" in given:
            kwargs["synchronous"] = given["synchronous"]
        if "durability" in given:
            kwargs["durability"] = given["durability"]
        return cls(path, **kwargs)

    def describe(self) -> str:
        """``sqlite:///<path>`` or ``"a SqlClient"``."""
        if self.path is not None:
            return f"sqlite:///{self.path}"
        return f"a {type(self.database).__name__}"

    async def connect(self) -> tuple[SqlClient, bool]:
        """Open the file with aiosqlite (WAL, busy timeout), or adopt the given client."""
        if self.database is not None:
            return self.database, False
        try:
            import aiosqlite
        except ImportError:
            raise InvalidConfigError(
                'SqliteBackend needs aiosqlite: pip install "anarchon[sqlite]"'
            ) from None
        assert self.path is not None
        try:
            # Open once in a worker thread first: a file that cannot be opened then fails
            # here, before aiosqlite starts a connection thread it would leave behind.
            await asyncio.to_thread(_probe_open, self.path, self.timeout)
            conn = await aiosqlite.connect(self.path, isolation_level=None, timeout=self.timeout)
        except (sqlite3.Error, OSError) as error:
            raise BackendUnavailableError(
                f"cannot open the SQLite database {self.describe()}: {error}"
            ) from error
        try:
            await conn.execute_fetchall(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            await self._enable_wal(conn)
            await conn.execute_fetchall(f"PRAGMA synchronous = {self.synchronous.upper()}")
        except sqlite3.Error as error:
            await conn.close()
            raise BackendUnavailableError(
                f"cannot set up the SQLite database {self.describe()}: {error}"
            ) from error
        return _AiosqliteClient(conn, owned=True), True

    async def _enable_wal(self, conn: Any) -> None:
        """Switch the file to WAL (persistent), retrying while another process holds it.

        Changing the journal mode needs an exclusive lock, and SQLite may answer
        "database is locked" at once instead of calling the busy handler (when
        several processes open a fresh file together), so retry up to the
        busy timeout.
        """
        loop = asyncio.get_running_loop()
        give_up = loop.time() + max(self.timeout, 1.0)
        while True:
            try:
                rows = await conn.execute_fetchall("PRAGMA journal_mode")
                if str(next(iter(rows))[0]).lower() != "wal":
                    await conn.execute_fetchall("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or loop.time() > give_up:
                    raise
                await asyncio.sleep(0.01)

    async def check_server(self, client: SqlClient) -> None:
        """Refuse SQLite older than 3.35 (no ``RETURNING``)."""
        rows = await client.all("SELECT sqlite_version()", ())
        version = str(rows[0][0])
        numbers = tuple(int(part) for part in version.split(".")[:3] if part.isdigit())
        if numbers < MIN_SQLITE:
            raise BackendUnavailableError(
                f"SQLite {version} at {self.describe()} is too old: anarchon-sql needs"
                f" {'.'.join(map(str, MIN_SQLITE))} or newer (RETURNING)"
            )
