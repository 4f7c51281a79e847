"""Client-side deadlines for PostgreSQL (docs/backends/sql.md, "Timeouts and dead connections").

libpq has no statement, socket or connect timeout by default, and psycopg,
when a waiting call is cancelled, asks the server to cancel the query and
then waits for the answer on the same connection: on a silently dead
connection (a NAT forgot the flow, the server's address moved) that wait never
ends, and the call holds a pool connection for ever. So:

- :func:`with_libpq_defaults` adds ``connect_timeout``, keepalives and
  ``tcp_user_timeout`` to a connection string that does not set them;
- :func:`bounded` runs one call under a deadline; when it passes, the
  connection's socket is shut down under the call (psycopg then fails at
  once, and the pool discards the broken connection) and the call raises
  ``BackendUnavailableError("... timeout after X s ...")``, a transient error
  the scheduler retries on a fresh connection;
- :class:`IdleCheck` is the pool's ``check``: a connection idle for a while
  is probed with an empty statement, under the same deadline, before use.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from anarchon.errors import BackendUnavailableError

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "LIBPQ_DEFAULTS",
    "IdleCheck",
    "bounded",
    "with_libpq_defaults",
]

T = TypeVar("T")

DEFAULT_CALL_TIMEOUT_S = 10.0
"""How long one statement or transaction may take before its connection is dropped."""

LIBPQ_DEFAULTS: dict[str, str] = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
    "tcp_user_timeout": "15000",
}
"""libpq parameters added to a connection string that does not set them."""

IDLE_CHECK_S = 5.0
"""A pooled connection unused this long is probed before use."""


def with_libpq_defaults(conninfo: str) -> str:
    """``conninfo`` plus every :data:`LIBPQ_DEFAULTS` entry it does not set itself."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(conninfo)
    missing = {key: value for key, value in LIBPQ_DEFAULTS.items() if key not in given}
    return make_conninfo(conninfo, **missing) if missing else conninfo


def _shut_down(conn: Any) -> None:
    """Shut the connection's socket down: a call waiting on it fails at once."""
    try:
        fd = conn.pgconn.socket
    except Exception:  # already closed
        return
    with contextlib.suppress(OSError):
        dup = socket.socket(fileno=socket.dup(fd))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


async def bounded(
    conn: Any, call: Callable[[], Awaitable[T]], timeout: float | None, where: str
) -> T:
    """``await call()`` on ``conn``; after ``timeout`` s drop the connection and raise."""
    if timeout is None:
        return await call()
    task = asyncio.ensure_future(call())
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        _shut_down(conn)
        task.cancel()
        raise
    if task in done:
        return task.result()
    _shut_down(conn)
    try:
        await asyncio.wait_for(task, 2.0)
    except BaseException as error:  # the broken call's own error: ours says what happened
        cause: BaseException = error
    else:  # pragma: no cover - the answer arrived just as the deadline passed
        return task.result()
    raise BackendUnavailableError(
        f"PostgreSQL at {where}: timeout after {timeout:g} s (no answer on an open"
        " connection; it was dropped and the call may be retried on a fresh one)"
    ) from cause


class IdleCheck:
    """The pool's ``check``: probe a connection that was idle for :data:`IDLE_CHECK_S`."""

    def __init__(self, timeout: float | None, where: str) -> None:
        self.timeout = timeout if timeout is not None else DEFAULT_CALL_TIMEOUT_S
        self.where = where
        self._used: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def used(self, conn: Any) -> None:
        """Note that ``conn`` just answered a call."""
        with contextlib.suppress(TypeError):
            self._used[conn] = time.monotonic()

    async def __call__(self, conn: Any) -> None:
        """Raise if ``conn`` is idle and does not answer an empty statement in time."""
        last = self._used.get(conn)
        if last is not None and time.monotonic() - last < IDLE_CHECK_S:
            return
        await bounded(conn, lambda: conn.execute(""), min(self.timeout, 5.0), self.where)
        self.used(conn)
