"""Helpers of the batch tests: backends on every SQL path, and a statement-counting client."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from anarchon.backend import Backend
from anarchon_sql import PostgresBackend, SqlBackend, SqlClient, SqliteBackend

T = TypeVar("T")

PATHS = ("postgres", "postgres-generic", "postgres-serializable", "sqlite", "example")
"""Every SQL path the batch members take.

- ``postgres``: one statement per chunk (claim_many_v3, unnest, save_many_v1);
- ``postgres-generic``: the generic SqlBackend path on PostgreSQL (one
  transaction per chunk, advisory locks held to its end);
- ``postgres-serializable``: a server default of SERIALIZABLE (each
  statement wrapped in a READ COMMITTED transaction);
- ``sqlite``: one ``BEGIN IMMEDIATE`` per chunk, run whole on aiosqlite's thread;
- ``example``: the documented subclass (generic path through a hand-written client).
"""


class GenericPostgresBackend(PostgresBackend):
    """PostgresBackend with the batch statements switched off: the generic per-chunk transaction."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        calls = self._sql.calls
        calls.claim_many = calls.heartbeat_many = calls.finish_many = calls.save_many = None


def make_backend(
    path: str, *, dsn: str, tmp: str, prefix: str, example: Any, batch_size: int = 500
) -> SqlBackend:
    """A backend of ``path`` (see :data:`PATHS`) with ``prefix``; same store for the same args."""
    if path == "postgres":
        backend: SqlBackend = PostgresBackend(dsn, table_prefix=prefix)
    elif path == "postgres-generic":
        backend = GenericPostgresBackend(dsn, table_prefix=prefix)
    elif path == "postgres-serializable":
        options = "options=-c%20default_transaction_isolation%3Dserializable"
        backend = PostgresBackend(f"{dsn}?{options}", table_prefix=prefix)
    elif path == "sqlite":
        backend = SqliteBackend(os.path.join(tmp, "batch.db"), table_prefix=prefix)
    elif path == "example":
        backend = example.ThreadedSqliteBackend(
            os.path.join(tmp, "example.db"), table_prefix=prefix
        )
    else:
        raise ValueError(path)
    backend.batch_size = batch_size
    return backend


class CountingClient:
    """A SqlClient that counts the statements and transactions it is given."""

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


def store_of(backend: Backend) -> SqlBackend:
    """``backend`` as a SqlBackend (for mypy)."""
    assert isinstance(backend, SqlBackend)
    return backend
