"""The one interface the SQL backends need from a driver: :class:`SqlClient`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["Row", "SqlClient", "is_sql_client"]

T = TypeVar("T")

Row = tuple[Any, ...]
"""One result row."""


@runtime_checkable
class SqlClient(Protocol):
    """Anything that runs SQL for the backend: two coroutines.

    - ``await client.all(sql, params)`` runs one statement and returns its rows
      as tuples (``[]`` for a statement without rows). Outside
      :meth:`transaction`, the statement is its own transaction (autocommit).
    - ``await client.transaction(fn)`` runs ``await fn(tx)`` inside one
      transaction, where ``tx`` is a ``SqlClient`` bound to it, commits, and
      returns ``fn``'s result; if ``fn`` raises, it rolls back and re-raises.

    SQL reaches a client with placeholders already converted to its style by
    :meth:`SqlDialect.placeholders`. Statements without parameters get an empty
    ``params``. Ready-made clients: ``from_sqlite_database()`` (aiosqlite or
    sqlite3) and the psycopg adapter behind :class:`PostgresBackend`.
    """

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement; return its rows."""
        ...

    async def transaction(self, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """Run ``fn`` in one transaction and return its result."""
        ...


def is_sql_client(value: object) -> bool:
    """True if ``value`` has the two coroutines of a :class:`SqlClient`."""
    return callable(getattr(value, "all", None)) and callable(getattr(value, "transaction", None))
