"""``SqlSession``: the one owner of a SQL backend's connection state.

It holds the connected :class:`~anarchon_sql.SqlClient`, whether the backend
opened it (and so closes it), and the lock that makes ``init()`` run once
however many callers race to it; and it runs statements and transactions on
that client for the parts of the backend (leases, history, fleet).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from anarchon.backend import InitOnce

from anarchon_sql._client import Row, SqlClient

__all__ = ["SqlSession"]

T = TypeVar("T")


class SqlSession:
    """The client of one backend, opened once, and the ways the backend's parts use it."""

    def __init__(
        self,
        init: Callable[[], Awaitable[None]],
        calls_in_transaction: Callable[[], bool],
    ) -> None:
        self._init = init
        self._calls_in_transaction = calls_in_transaction
        self.client: SqlClient | None = None
        """The connected client (None before ``init()`` and after ``close()``)."""
        self._owned = False
        self._open = InitOnce()

    async def open_once(self, open_client: Callable[[], Awaitable[tuple[SqlClient, bool]]]) -> None:
        """Run ``open_client`` (``(client, owned)``) unless a client is there: the idempotent init.

        Callers that race here wait on one lock; the first opens, the others
        find its client.
        """

        async def start() -> None:
            self.client, self._owned = await open_client()

        await self._open.run(lambda: self.client is not None, start)

    async def close(self, close_client: Callable[[SqlClient], Awaitable[None]]) -> None:
        """Forget the client; close it with ``close_client`` if the backend opened it."""
        client, owned = self.client, self._owned
        self.client, self._owned = None, False
        self._open.reset()
        if client is not None and owned:
            await close_client(client)

    async def ready(self) -> SqlClient:
        """The client, after the backend's ``init()`` if it is not connected yet."""
        if self.client is None:
            await self._init()
        assert self.client is not None
        return self.client

    async def all(self, sql: str, params: Sequence[Any]) -> list[Row]:
        """One plain statement (its own transaction) on the ready client."""
        client = await self.ready()
        return await client.all(sql, params)

    async def call(self, client: SqlClient, sql: str, params: Sequence[Any]) -> list[Row]:
        """One of the dialect's one-statement calls; in a transaction of its own if the backend asks."""
        if not self._calls_in_transaction():
            return await client.all(sql, params)

        async def body(tx: SqlClient) -> list[Row]:
            return await tx.all(sql, params)

        return await client.transaction(body)

    @staticmethod
    async def transaction(client: SqlClient, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """``client.transaction(fn)``, or the client's ``inline_transaction`` when it has one.

        ``fn`` only awaits statements on the client it is given, so a client
        may run it whole on its driver's thread (one hop instead of one per
        statement).
        """
        inline = getattr(client, "inline_transaction", None)
        if inline is not None:
            result: T = await inline(fn)
            return result
        return await client.transaction(fn)
