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
one call of ``finish_save_many_v1`` (see :mod:`anarchon_sql.postgres._functions`).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from anarchon.backend.registry import redact_url
from anarchon.errors import BackendUnavailableError, InvalidConfigError

from anarchon_sql._backend import SqlBackend
from anarchon_sql._client import SqlClient, is_sql_client
from anarchon_sql._dialect import DEFAULT_TABLE_PREFIX, ParamStyle
from anarchon_sql._driver_errors import redact_dsn, scrub, secrets_of_dsn
from anarchon_sql._durability import DURABILITIES
from anarchon_sql.postgres._deadline import DEFAULT_CALL_TIMEOUT_S, IdleCheck, with_libpq_defaults
from anarchon_sql.postgres._dialect import PostgresDialect
from anarchon_sql.postgres._durable import durable_calls
from anarchon_sql.postgres._psycopg import PsycopgClient, ReadCommitted
from anarchon_sql.postgres._replication import check_replication

__all__ = ["PostgresBackend"]

log = logging.getLogger("anarchon.sql")

MIN_SERVER_VERSION = 110000
"""PostgreSQL 11 (``hashtextextended``)."""

_OPTIONS = ("table_prefix", "pool_size", "pool_timeout", "call_timeout", "durability")
"""anarchon's own options; every other URL option goes to libpq (which validates it)."""


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

    ``durability`` (keyword or URL option, default ``"fast"``): ``"replicated"``
    commits claims, lease extensions and finishes with ``synchronous_commit``
    on, confirms a claim whose commit is in doubt with a second synchronous
    write (else answers it ``uncertain``), and is refused at ``init()`` when
    the server has no ``synchronous_standby_names`` (docs/backends/sql.md,
    "Durability").
    """

    name: ClassVar[str] = "postgresql"
    durabilities: ClassVar[tuple[str, ...]] = DURABILITIES

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
        durability: str = _UNSET,
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
        super().__init__(
            dialect=PostgresDialect(paramstyle),
            table_prefix=prefix,
            durability=url_options.get("durability", "fast")
            if durability is _UNSET
            else durability,
        )
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
        self._paramstyle: ParamStyle = paramstyle
        self.read_committed_default = True
        """False when the server's default isolation is not READ COMMITTED (claims then
        run in an explicit READ COMMITTED transaction: four round trips instead of one)."""

    def clone(self) -> PostgresBackend | None:
        """A second backend on the same DSN (a pool of one), for the lease thread.

        None when built from a connection, pool or client you passed in: the
        scheduler then logs that heartbeats share its event loop.
        """
        if self.conninfo is None:
            return None
        return PostgresBackend(
            self.conninfo,
            table_prefix=self.tables.prefix,
            pool_size=1,
            pool_timeout=self.pool_timeout,
            call_timeout=self.call_timeout,
            paramstyle=self._paramstyle,
            durability=self.durability,
        )

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
        if self.durability == "replicated":
            await check_replication(client, self.describe())

    def _install_durability(self) -> None:
        """Replicated: the leases run the synchronous wrappers of the dialect's calls."""
        if self.durability != "replicated":
            self._leases.durable = None
            return
        calls = self._sql.calls
        plain = {
            "claim": calls.claim,
            "claim_many": calls.claim_many,
            "heartbeat_many": calls.heartbeat_many,
            "finish_many": calls.finish_many,
            "finish_save_many": calls.finish_save_many,
        }
        self._leases.durable = durable_calls(self.tables, self.dialect.placeholders, plain)

    async def init(self) -> None:
        """Connect, check the server, create the tables and the claim function. Idempotent.

        With ``durability="replicated"``: refuse a server without
        ``synchronous_standby_names`` (``InvalidConfigError``) and log what the
        setting protects (INFO; WARNING when no synchronous standby streams).
        """
        self._install_durability()
        await super().init()

    def _working_client(self, client: SqlClient) -> SqlClient:
        """On a server whose default isolation is not READ COMMITTED: transactions set it.

        Replicated: a psycopg client raises on a commit whose wait for the
        standby the server cancelled (it is in doubt, and gets confirmed).
        """
        inner = client.inner if isinstance(client, ReadCommitted) else client
        if isinstance(inner, PsycopgClient):
            inner.confirm_commits = self.durability == "replicated"
        if self.read_committed_default or isinstance(client, ReadCommitted):
            return client
        return ReadCommitted(client)

    def _calls_in_transaction(self) -> bool:
        """The claim functions run at READ COMMITTED: in a transaction setting it, if not the default."""
        return not self.read_committed_default

    async def close_client(self, client: SqlClient) -> None:
        """Close the pool or connection the backend opened."""
        if isinstance(client, ReadCommitted):
            client = client.inner
        await super().close_client(client)
