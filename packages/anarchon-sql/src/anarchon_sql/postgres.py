"""``PostgresBackend``: PostgreSQL through psycopg 3 (async), one round trip per claim.

At start the backend creates (once per table prefix and version) a PL/pgSQL
function ``<prefix>claim_v3(...)`` that runs the whole claim tree (docs/leases.md):
it takes a transaction-scoped advisory lock on the job
(``pg_advisory_xact_lock``, the dialect's ``serialize``), reads the server
clock with ``clock_timestamp()`` after the lock, locks the run's row
(``FOR UPDATE``) and writes the state and history rows. A claim is then one
statement — ``SELECT ... FROM <prefix>claim_v3(...)`` — in its own
transaction at READ COMMITTED, where every statement inside the function sees
the rows committed before it (so the row a concurrent winner inserted is seen
once its transaction commits and the lock is released).

Batches are one statement per chunk too: ``<prefix>claim_many_v3(arrays)``
calls ``claim_v3`` for each item (in job-lock order); heartbeats, finishes
and result writes are one call each of ``<prefix>heartbeat_many_v1``,
``finish_many_v1`` and ``save_many_v1``, and a run's finish with its result
one call of ``finish_save_many_v1`` (see :mod:`anarchon_sql.pg_functions`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from anarchon.errors import BackendUnavailableError, InvalidConfigError
from anarchon.registry import redact_url

from anarchon_sql.base import SqlBackend
from anarchon_sql._client import Row, SqlClient, is_sql_client
from anarchon_sql._dialect import DEFAULT_TABLE_PREFIX, ParamStyle, SqlDialect
from anarchon_sql._driver_errors import is_connection_error, redact_dsn, scrub, secrets_of_dsn
from anarchon_sql.pg_arrays import literal_params
from anarchon_sql.pg_deadline import DEFAULT_CALL_TIMEOUT_S, IdleCheck, bounded, with_libpq_defaults
from anarchon_sql.pg_functions import (
    CLAIM_FUNCTION,
    CLAIM_MANY_FUNCTION,
    FINISH_MANY_FUNCTION,
    FINISH_SAVE_MANY_FUNCTION,
    HEARTBEAT_MANY_FUNCTION,
    SAVE_MANY_FUNCTION,
    claim_function,
    claim_many_function,
    finish_many_function,
    finish_save_many_function,
    heartbeat_many_function,
    save_many_function,
)

__all__ = ["PostgresBackend", "PostgresDialect", "PsycopgClient"]

T = TypeVar("T")

MIN_SERVER_VERSION = 110000
"""PostgreSQL 11 (``hashtextextended``)."""

_OPTIONS = ("table_prefix", "pool_size", "pool_timeout", "call_timeout")
"""anarchon's own options; every other URL option goes to libpq (which validates it)."""


class PostgresDialect(SqlDialect):
    """PostgreSQL: ``BIGINT``, ``clock_timestamp()``, ``FOR UPDATE``, advisory locks.

    ``paramstyle`` is ``"format"`` (``%s``, psycopg); pass ``"numeric"``
    (``$1``) for a :class:`SqlClient` built on asyncpg.
    """

    name: ClassVar[str] = "postgresql"
    bigint = "BIGINT"
    text = "TEXT"
    now_ms = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"
    for_update = " FOR UPDATE"
    claims_take_overlap_wait = True

    def __init__(self, paramstyle: ParamStyle = "format") -> None:
        if paramstyle not in ("format", "numeric", "qmark"):
            raise InvalidConfigError(
                f"paramstyle must be 'format', 'numeric' or 'qmark', got {paramstyle!r}"
            )
        self.paramstyle = paramstyle

    async def serialize(self, client: SqlClient, key: str) -> None:
        """``pg_advisory_xact_lock`` on a 64-bit hash of ``key``; released at commit.

        A hash collision only makes two unrelated keys wait for each other;
        the rows stay the truth.
        """
        await client.all(
            self.placeholders("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"), (key,)
        )

    def is_already_created(self, error: BaseException) -> bool:
        """Concurrent ``CREATE ... IF NOT EXISTS`` / ``CREATE OR REPLACE`` races."""
        state = getattr(error, "sqlstate", None)
        if state in ("42P07", "42710", "42723"):
            return True
        if state == "23505" and "pg_" in str(error):  # unique violation in a system catalog
            return True
        return super().is_already_created(error)

    def extra_tables(self, table: Callable[[str], str]) -> list[str]:
        """The functions ``<prefix>claim_v3`` and the batch functions (``claim_many_v3``, ``*_many_v1``)."""
        return [
            claim_function(table, self.now_ms),
            claim_many_function(table, self.now_ms),
            heartbeat_many_function(table, self.now_ms),
            finish_many_function(table, self.now_ms),
            save_many_function(table, self.now_ms),
            finish_save_many_function(table, self.now_ms),
        ]

    def claim_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>claim_v3(...)``: the whole claim in one statement."""
        return (
            "SELECT out_kind, out_attempt, out_runner, out_lease, out_token"
            f" FROM {table(CLAIM_FUNCTION)}(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT),"
            " CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS BOOLEAN),"
            " CAST(? AS BIGINT), CAST(? AS BOOLEAN), CAST(? AS BIGINT), CAST(? AS BOOLEAN))"
        )

    def claim_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>claim_many_v3(arrays)``: a chunk of claims in one statement."""
        return (
            "SELECT out_i, out_kind, out_attempt, out_runner, out_lease, out_token"
            f" FROM {table(CLAIM_MANY_FUNCTION)}(CAST(? AS TEXT[]), CAST(? AS BIGINT[]),"
            " CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS INTEGER[]),"
            " CAST(? AS BOOLEAN[]), CAST(? AS BIGINT[]), CAST(? AS BOOLEAN[]),"
            " CAST(? AS BIGINT[]), CAST(? AS BOOLEAN[]))"
        )

    def heartbeat_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>heartbeat_many_v1(lease_ms, arrays)``: ``(index, renewed)`` rows."""
        return (
            f"SELECT out_i, out_ok FROM {table(HEARTBEAT_MANY_FUNCTION)}(CAST(? AS BIGINT),"
            " CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]))"
        )

    def finish_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>finish_many_v1(arrays)``: ``(index, answer)`` rows.

        An item not finished now is answered True when its run was already
        finished by the same token (a retried finish), as ``finish()`` does.
        """
        return (
            f"SELECT out_i, out_ok FROM {table(FINISH_MANY_FUNCTION)}(CAST(? AS TEXT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]))"
        )

    def finish_save_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>finish_save_many_v1(arrays)``: ``(index, answer)`` rows."""
        return (
            f"SELECT out_i, out_ok FROM {table(FINISH_SAVE_MANY_FUNCTION)}(CAST(? AS TEXT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]),"
            " CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS INTEGER[]),"
            " CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS INTEGER[]), CAST(? AS INTEGER[]),"
            " CAST(? AS BIGINT[]), CAST(? AS BIGINT[]))"
        )

    def save_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT <prefix>save_many_v1(arrays)``: a chunk of result writes in one statement."""
        return (
            f"SELECT {table(SAVE_MANY_FUNCTION)}(CAST(? AS TEXT[]), CAST(? AS TEXT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS INTEGER[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]),"
            " CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]),"
            " CAST(? AS INTEGER[]), CAST(? AS INTEGER[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]))"
        )

    def columns_statement(self) -> str:
        """Column names of the table named by the one parameter (search path applies)."""
        return (
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(CAST(? AS TEXT))"
            " AND attnum > 0 AND NOT attisdropped"
        )


# The psycopg adapter -------------------------------------------------------


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


class _ReadCommitted:
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


# The backend ----------------------------------------------------------------


def _redact(dsn: str) -> str:
    return redact_dsn(dsn)


def _positive_int(name: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{name} must be a positive integer, got {value!r}") from None
    if isinstance(value, bool) or number < 1:
        raise InvalidConfigError(f"{name} must be a positive integer, got {value!r}")
    return number


def _positive_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{name} must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not number > 0 or number == float("inf"):
        raise InvalidConfigError(f"{name} must be a positive number of seconds, got {value!r}")
    return number


def _driver_hint() -> InvalidConfigError:
    return InvalidConfigError('PostgresBackend needs psycopg 3: pip install "anarchon[postgres]"')


_UNSET: Any = object()


class PostgresBackend(SqlBackend):
    """PostgreSQL through psycopg 3 (async): leases and history, one round trip per claim.

    Give exactly one of:

    - ``dsn`` — a URL (``postgresql://user:pass@host:5432/db?sslmode=require``)
      or a libpq key/value string; the backend opens a psycopg pool
      (``pool_size`` connections at most, autocommit) and closes it on
      ``close()``. Query options libpq knows pass through to it; anarchon's
      own (``table_prefix``, ``pool_size``, ``pool_timeout``) may ride in the
      URL too; any other is an ``InvalidConfigError``;
    - ``connection`` — a ``psycopg.AsyncConnection`` you own (autocommit
      recommended); calls take turns on it;
    - ``pool`` — an open ``psycopg_pool.AsyncConnectionPool`` you own;
    - ``database`` — any :class:`SqlClient` (SQL arrives in psycopg's ``%s``
      style unless ``paramstyle="numeric"``).

    The first positional argument may be any of them. What you pass in is
    never closed by ``close()``.
    """

    name: ClassVar[str] = "postgresql"

    def __init__(
        self,
        dsn: str | Any | None = None,
        *,
        connection: Any | None = None,
        pool: Any | None = None,
        database: SqlClient | None = None,
        table_prefix: str = _UNSET,
        pool_size: int = _UNSET,
        pool_timeout: float = _UNSET,
        call_timeout: float = _UNSET,
        paramstyle: ParamStyle = "format",
    ) -> None:
        if dsn is not None and not isinstance(dsn, str):
            given, dsn = dsn, None
            if is_sql_client(given):
                database = database if database is not None else given
            elif callable(getattr(given, "getconn", None)):
                pool = pool if pool is not None else given
            elif callable(getattr(given, "cursor", None)):
                connection = connection if connection is not None else given
            else:
                raise InvalidConfigError(
                    "PostgresBackend takes a DSN or URL, a psycopg AsyncConnection, an"
                    f" AsyncConnectionPool or a SqlClient, not {type(given).__name__}"
                )
        sources = [s for s in (dsn, connection, pool, database) if s is not None]
        if len(sources) != 1:
            raise InvalidConfigError(
                "PostgresBackend needs exactly one of dsn=, connection=, pool= or database="
            )
        url_options: dict[str, str] = {}
        self.conninfo: str | None = None
        self.shown = "PostgreSQL"
        self._secrets: list[str] = []
        if dsn is not None:
            self.shown = _redact(dsn)
            self._secrets = secrets_of_dsn(dsn)
            self.conninfo, url_options = self._parse_dsn(dsn)
        prefix = url_options.get("table_prefix", DEFAULT_TABLE_PREFIX)
        if table_prefix is not _UNSET:
            prefix = table_prefix
        size = url_options.get("pool_size", 4) if pool_size is _UNSET else pool_size
        timeout = url_options.get("pool_timeout", 30.0) if pool_timeout is _UNSET else pool_timeout
        super().__init__(dialect=PostgresDialect(paramstyle), table_prefix=prefix)
        self.pool_size = _positive_int("pool_size", size)
        self.pool_timeout = _positive_float("pool_timeout", timeout)
        deadline = (
            url_options.get("call_timeout", DEFAULT_CALL_TIMEOUT_S)
            if call_timeout is _UNSET
            else call_timeout
        )
        self.call_timeout = _positive_float("call_timeout", deadline)
        """Seconds one statement or transaction on a pool may take (docs/backends/sql.md)."""
        self.connection = connection
        self.pool = pool
        self.database = database
        self.read_committed_default = True
        """False when the server's default isolation is not READ COMMITTED (claims then
        run in an explicit READ COMMITTED transaction: four round trips instead of one)."""

    @staticmethod
    def _parse_dsn(dsn: str) -> tuple[str, dict[str, str]]:
        """Split anarchon's options out of a URL's query; validate the rest with libpq."""
        shown = _redact(dsn)
        ours: dict[str, str] = {}
        conninfo = dsn
        if "://" in dsn:
            parts = urlsplit(dsn)
            if parts.scheme.lower() not in ("postgresql", "postgres"):
                raise InvalidConfigError(f"not a postgresql:// URL: {shown!r}")
            driver: list[tuple[str, str]] = []
            for key, value in parse_qsl(parts.query, keep_blank_values=True):
                if key in _OPTIONS:
                    ours[key] = value
                else:
                    driver.append((key, value))
            conninfo = urlunsplit(parts._replace(query=urlencode(driver, quote_via=quote)))
        try:
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            raise _driver_hint() from None
        try:
            conninfo_to_dict(conninfo)
        except Exception as error:
            message = scrub(str(error).replace(dsn, shown).strip(), secrets_of_dsn(dsn))
            raise InvalidConfigError(
                f"bad PostgreSQL connection string {shown!r}: {message}"
                f" (anarchon options: {', '.join(_OPTIONS)}; others go to libpq)"
            ) from None
        return conninfo, ours

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresBackend:
        """``postgresql://`` or ``postgres://`` URL; query options (or keywords) as in the class doc."""
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("postgresql", "postgres"):
            raise InvalidConfigError(f"not a postgresql:// URL: {redact_url(url)!r}")
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        query.update({key: str(value) for key, value in options.items()})
        merged = urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))
        backend = cls(merged)
        backend.shown = redact_dsn(url)
        return backend

    def secrets(self) -> list[str]:
        """The passwords written in the DSN (hidden from every message)."""
        return list(self._secrets)

    def describe(self) -> str:
        """The URL with its password hidden, or what was passed in."""
        if self.conninfo is not None:
            return self.shown
        source = self.connection or self.pool or self.database
        return f"a {type(source).__name__}"

    async def connect(self) -> tuple[SqlClient, bool]:
        """Adopt the given connection/pool/client, or open a pool from the DSN."""
        where = self.describe()
        if self.database is not None:
            return self.database, False
        if self.connection is not None:
            return PsycopgClient(self.connection, pool=False, owned=False, where=where), False
        if self.pool is not None:
            return (
                PsycopgClient(
                    self.pool, pool=True, owned=False, where=where, call_timeout=self.call_timeout
                ),
                False,
            )
        try:
            import psycopg
        except ImportError:
            raise _driver_hint() from None
        assert self.conninfo is not None
        conninfo = with_libpq_defaults(self.conninfo)
        try:
            probe = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        except psycopg.Error as error:
            raise BackendUnavailableError(
                f"cannot connect to PostgreSQL at {where}: {str(error).strip()}"
            ) from error
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError:  # no pool installed: one connection, calls take turns
            return PsycopgClient(probe, pool=False, owned=True, where=where), True
        await probe.close()
        check = IdleCheck(self.call_timeout, where)
        pool: Any = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=self.pool_size,
            open=False,
            kwargs={"autocommit": True},
            timeout=self.pool_timeout,
            name=f"anarchon-{self.tables.prefix}",
            check=check,
        )
        try:
            await pool.open(wait=True, timeout=self.pool_timeout)
        except psycopg.Error as error:
            await pool.close()
            raise BackendUnavailableError(
                f"cannot connect to PostgreSQL at {where}: {str(error).strip()}"
            ) from error
        client = PsycopgClient(
            pool, pool=True, owned=True, where=where, call_timeout=self.call_timeout, check=check
        )
        return client, True

    async def check_server(self, client: SqlClient) -> None:
        """Refuse servers older than PostgreSQL 11; note the default isolation level."""
        rows = await client.all(
            "SELECT current_setting('server_version_num'), current_setting('transaction_isolation')",
            (),
        )
        version, isolation = int(rows[0][0]), str(rows[0][1])
        if version < MIN_SERVER_VERSION:
            raise BackendUnavailableError(
                f"PostgreSQL at {self.describe()} is version {version}; anarchon-sql needs 11+"
            )
        self.read_committed_default = isolation == "read committed"

    async def init(self) -> None:
        """Connect, check the server, create the tables and the claim function. Idempotent."""
        await super().init()
        client = self._client
        if (
            not self.read_committed_default
            and client is not None
            and not isinstance(client, _ReadCommitted)
        ):
            self._client = _ReadCommitted(client)

    async def _install(self, client: SqlClient) -> None:
        if not self.read_committed_default:
            client = _ReadCommitted(client)
        await super()._install(client)

    async def _statement(self, client: SqlClient, sql: str, params: Sequence[Any]) -> list[Row]:
        if self.read_committed_default:
            return await client.all(sql, params)

        async def body(tx: SqlClient) -> list[Row]:
            return await tx.all(sql, params)

        return await client.transaction(body)

    async def close_client(self, client: SqlClient) -> None:
        """Close the pool or connection the backend opened."""
        if isinstance(client, _ReadCommitted):
            client = client.inner
        await super().close_client(client)
