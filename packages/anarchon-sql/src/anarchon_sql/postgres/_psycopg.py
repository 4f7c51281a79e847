"""The psycopg 3 adapter: :class:`PsycopgClient`, and the READ COMMITTED wrapper.

``PsycopgClient`` is the :class:`~anarchon_sql.SqlClient` behind
:class:`~anarchon_sql.PostgresBackend` (a connection or a pool); statements
send their list parameters as array literals (:mod:`anarchon_sql.postgres._arrays`)
and run under the call deadline of :mod:`anarchon_sql.postgres._deadline`.
"""

from __future__ import annotations

import asyncio
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
                return await bounded(conn, lambda: run(conn), self.call_timeout, self.where)
        except Exception as error:
            mapped = _unavailable(error, self.where)
            if mapped is None:
                raise
            raise mapped from error

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """``BEGIN`` … ``COMMIT`` on one connection (``ROLLBACK`` if ``fn`` raises)."""

        async def run(conn: Any) -> T:
            async with conn.transaction():
                return await fn(_PgBound(conn))

        try:
            async with self._connection() as conn:
                return await bounded(conn, lambda: run(conn), self.call_timeout, self.where)
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
