"""The psycopg 3 adapter: :class:`PsycopgClient`, and the READ COMMITTED wrapper.

``PsycopgClient`` is the :class:`~anarchon_sql.SqlClient` behind
:class:`~anarchon_sql.PostgresBackend` (a connection or a pool); statements
send their list parameters as array literals (:mod:`anarchon_sql.postgres._arrays`)
and run under the call deadline of :mod:`anarchon_sql.postgres._deadline`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from anarchon.errors import BackendUnavailableError

from anarchon_sql._client import Row, SqlClient
from anarchon_sql._driver_errors import is_connection_error
from anarchon_sql.postgres._arrays import literal_params
from anarchon_sql.postgres._deadline import IdleCheck, bounded

__all__ = ["PsycopgClient", "ReadCommitted"]

T = TypeVar("T")

_SYNC_WAIT = "wait for synchronous replication"
"""In the WARNING of a commit whose wait for the standby the server cancelled (the commit
is then local only: a cancel request, ``statement_timeout``, a shutdown)."""

_watched: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def _watch(conn: Any) -> list[str]:
    """The list the notice handler of ``conn`` appends cancelled standby waits to (added once)."""
    seen = _watched.get(conn)
    if seen is None:
        found: list[str] = []

        def handler(diag: Any) -> None:
            text = str(getattr(diag, "message_primary", "") or "")
            if _SYNC_WAIT in text:
                found.append(text)

        conn.add_notice_handler(handler)
        _watched[conn] = seen = found
    return seen


def _unavailable(error: BaseException, where: str) -> BackendUnavailableError | None:
    """A ``BackendUnavailableError`` for a psycopg connection failure, else None."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the adapter is only built with psycopg
        return None
    if isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError)) and (
        is_connection_error(error)
    ):
        return BackendUnavailableError(f"PostgreSQL at {where} is unavailable: {error}")
    return None


async def _execute(conn: Any, sql: str, params: Sequence[Any]) -> list[Row]:
    # Lists go as array literals: psycopg's own list dumping is Python per element.
    cur = await conn.execute(sql, literal_params(params) if params else None)
    if cur.description is None:
        return []
    rows = await cur.fetchall()
    return [tuple(row) for row in rows]


class _PgBound:
    """The client a transaction's function gets: statements run on the transaction's connection."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement inside the transaction."""
        return await _execute(self._conn, sql, params)

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """A nested transaction (savepoint)."""
        async with self._conn.transaction():
            return await fn(self)


class PsycopgClient:
    """A :class:`SqlClient` over a psycopg ``AsyncConnection`` or ``AsyncConnectionPool``.

    With a pool, every call borrows a connection. With one connection, calls
    and transactions take turns (an ``asyncio.Lock``). On a connection that is
    not in autocommit mode each statement is wrapped in its own transaction.
    Connection failures are raised as ``BackendUnavailableError`` with the
    psycopg error chained.
    """

    def __init__(
        self,
        source: Any,
        *,
        pool: bool,
        owned: bool,
        where: str = "PostgreSQL",
        call_timeout: float | None = None,
        check: IdleCheck | None = None,
    ) -> None:
        self.source = source
        self.is_pool = pool
        self.owned = owned
        self.where = where
        self.call_timeout = call_timeout if pool else None
        """Deadline of one call (pools only: a timed-out connection is dropped and replaced)."""
        self.check = check
        self.confirm_commits = False
        """Set by a replicated backend: a commit whose wait for the standby the server
        cancelled (its WARNING) raises ``BackendUnavailableError`` (in doubt) instead of
        answering as if it were confirmed."""
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        if self.is_pool:
            async with self.source.connection() as conn:
                yield conn
                if self.check is not None:
                    self.check.used(conn)
        else:
            async with self._lock:
                yield self.source

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement as its own transaction."""

        async def run(conn: Any) -> list[Row]:
            if conn.autocommit:
                return await _execute(conn, sql, params)
            async with conn.transaction():
                return await _execute(conn, sql, params)

        try:
            async with self._connection() as conn:
                return await self._bounded(conn, lambda: run(conn))
        except Exception as error:
            mapped = _unavailable(error, self.where)
            if mapped is None:
                raise
            raise mapped from error

    async def _bounded(self, conn: Any, call: Callable[[], Awaitable[T]]) -> T:
        """``call()`` under the call deadline; with ``confirm_commits``, an unconfirmed
        commit raises."""
        if not self.confirm_commits:
            return await bounded(conn, call, self.call_timeout, self.where)
        seen = _watch(conn)
        seen.clear()
        result = await bounded(conn, call, self.call_timeout, self.where)
        if seen:
            raise BackendUnavailableError(
                f"PostgreSQL at {self.where}: the commit was not confirmed by a synchronous"
                f" standby ({seen[0]}): it may be on the primary only"
            )
        return result

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """``BEGIN`` … ``COMMIT`` on one connection (``ROLLBACK`` if ``fn`` raises)."""

        async def run(conn: Any) -> T:
            async with conn.transaction():
                return await fn(_PgBound(conn))

        try:
            async with self._connection() as conn:
                return await self._bounded(conn, lambda: run(conn))
        except Exception as error:
            mapped = _unavailable(error, self.where)
            if mapped is None:
                raise
            raise mapped from error

    async def close(self) -> None:
        """Close the pool or connection (only called when the backend opened it)."""
        await self.source.close()


class ReadCommitted:
    """Runs every transaction of ``inner`` at READ COMMITTED (server default is another level)."""

    def __init__(self, inner: SqlClient) -> None:
        self.inner = inner

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement (autocommit, server default isolation)."""
        return await self.inner.all(sql, params)

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """A transaction whose first statement sets READ COMMITTED."""

        async def body(tx: SqlClient) -> T:
            await tx.all("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", ())
            return await fn(tx)

        return await self.inner.transaction(body)

    async def close(self) -> None:
        """Close the wrapped client if it can be closed."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            await close()
