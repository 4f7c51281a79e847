"""``SqlBackend``: the base of the SQL backends: tables, claims, leases and history on any SQL database.

A subclass supplies a connection (:meth:`SqlBackend.connect` → ``(client,
owned)``), a server check (:meth:`SqlBackend.check_server`) and a
:class:`~anarchon_sql.SqlDialect`. The rest is written once, in neutral SQL
(``?`` placeholders, ``ON CONFLICT``, ``RETURNING``), by the backend's parts:
the statements (:mod:`anarchon_sql._statements`), the schema
(:mod:`anarchon_sql._schema`), the connection (:mod:`anarchon_sql._session`),
the lease transactions (:mod:`anarchon_sql._lease`, behind
:class:`~anarchon_sql.SqlRunStore`), history (:mod:`anarchon_sql._history`)
the fleet registry (:mod:`anarchon_sql._fleet`) and membership
(:mod:`anarchon_sql._members`).
"""

from __future__ import annotations

import abc
import inspect
import math
from collections.abc import Sequence
from functools import partial
from typing import ClassVar

from anarchon.backend import Backend
from anarchon.backend.foreign import skip_unreadable
from anarchon.backend.membership import check_member_id, check_refresh
from anarchon.errors import (
    AnarchonError,
    BackendError,
    BackendUnavailableError,
    InvalidConfigError,
)
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import (
    PLAIN_CLAIM_LEASE_MS,
    ClaimInput,
    JobLimits,
    ResultWrite,
    RunClaim,
    RunRecord,
    StoredResult,
)

from anarchon_sql._calls import store_call
from anarchon_sql._client import SqlClient
from anarchon_sql._dialect import DEFAULT_TABLE_PREFIX, SqlDialect, SqlTables
from anarchon_sql._driver_errors import is_connection_error, is_transient_sql_error, scrub
from anarchon_sql._durability import check_durability
from anarchon_sql._fleet import FleetStatements, control_of, declaration_of, row_name
from anarchon_sql._foreign import find_foreign_table
from anarchon_sql._history import SqlHistory
from anarchon_sql._lease import SqlLeases
from anarchon_sql._members import MemberStatements
from anarchon_sql._run_store import SqlRunStore
from anarchon_sql._schema import Schema
from anarchon_sql._session import SqlSession
from anarchon_sql._statements import Statements

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "PLAIN_CLAIM_LEASE_MS",
    "SqlBackend",
    "SqlRunStore",
]

DEFAULT_BATCH_SIZE = 500
"""Items per store call (one statement or one transaction) of the batch members."""


class SqlBackend(Backend):
    """Abstract base of the SQL backends: tables, claims, leases and history.

    Subclasses implement :meth:`connect` and may override :meth:`check_server`
    and :meth:`describe`; they pass a :class:`SqlDialect` to ``__init__``.
    Options common to every SQL backend:

    - ``table_prefix`` (default ``"anarchon_"``): prefix of every table, index
      and function; validated as an SQL identifier (``InvalidConfigError``);
    - ``batch_size`` (default 500): items per store call of the batch members
      (``claim_many``, ``heartbeat_many``, ``finish_many``, ``save_results``);
    - ``durability`` (default ``"fast"``): ``"fast"`` or ``"replicated"``
      (docs/backends/sql.md, "Durability"); a subclass names the values it
      accepts in ``durabilities`` (SQLite: ``"fast"`` only).

    Errors: a transient driver error (connection lost, timeout, server going
    down or starting, serialisation failure or deadlock, SQLite busy) is
    raised as ``BackendUnavailableError``; a table of the backend's name that
    is not anarchon's as ``ForeignDataError`` naming it; any other driver error
    as ``BackendError`` naming the store. The driver's error is the
    ``__cause__``; passwords are never shown.

    The backend is a lease backend (``runs``), remembers claims as long as
    late and catch-up claims may ask (``dedupe_window_ms = inf``), and writes
    a store format marker, refusing a newer one (``ANARCHON_STORE_FORMAT``).
    """

    name: ClassVar[str] = "sql"
    dedupe_window_ms: float = math.inf
    durabilities: ClassVar[tuple[str, ...]] = ("fast",)
    """The ``durability`` values this backend can hold."""
    runs: SqlRunStore

    def __init__(
        self,
        *,
        dialect: SqlDialect,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        batch_size: int = DEFAULT_BATCH_SIZE,
        durability: str = "fast",
    ) -> None:
        self.durability = check_durability(
            durability, accepted=self.durabilities, store=f"{type(self).__name__}"
        )
        """``"fast"`` or ``"replicated"`` (docs/backends/sql.md, "Durability")."""
        if not isinstance(dialect, SqlDialect):
            raise InvalidConfigError(f"dialect must be a SqlDialect, not {type(dialect).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.dialect = dialect
        self.tables = SqlTables(table_prefix)
        self.batch_size = batch_size
        self._sql = Statements(dialect, self.tables)
        """The backend's statements (benchmarks read their texts to run the same SQL raw)."""
        self._fleet = FleetStatements(dialect, self.tables)
        self._members = MemberStatements(dialect, self.tables)
        self._schema = Schema(self, self._sql)
        self._session = SqlSession(self.init, self._calls_in_transaction)
        self._history = SqlHistory(self._session, self._sql, self.tables)
        self._leases = SqlLeases(self._session, self, self._sql, self._history)
        self.runs = SqlRunStore(self)

    # To implement or override -----------------------------------------

    @abc.abstractmethod
    async def connect(self) -> tuple[SqlClient, bool]:
        """Open (or adopt) the connection: ``(client, owned)``.

        ``owned`` is True when the backend opened it and must close it in
        :meth:`close`; a connection the user passed in is never closed.
        A connection failure is raised as ``BackendUnavailableError`` with the
        driver error chained.
        """

    async def check_server(self, client: SqlClient) -> None:
        """Check the server (version, settings); raise ``BackendUnavailableError`` to refuse it."""
        return None

    async def close_client(self, client: SqlClient) -> None:
        """Close a client the backend opened: calls its ``close()`` (awaited if a coroutine)."""
        close = getattr(client, "close", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result

    def describe(self) -> str:
        """Where the store is, for messages (never with a password)."""
        return type(self).__name__

    def secrets(self) -> list[str]:
        """Passwords that must never be shown; removed from every message of :meth:`translate_error`."""
        return []

    def is_transient(self, error: BaseException) -> bool:
        """True for errors a retry may cure (docs/backends/sql.md, "Errors").

        Anarchon's own errors as in :class:`~anarchon.Backend`; driver errors:
        connection lost or closed, timeouts, the server shutting down or
        starting up (SQLSTATE ``08xxx``, ``57P01``-``57P03``), too many
        connections (``53300``), serialisation failures and deadlocks
        (``40001``, ``40P01``), lock and statement timeouts (``55P03``,
        ``57014``), SQLite ``SQLITE_BUSY``/``SQLITE_LOCKED``.
        """
        if isinstance(error, AnarchonError):
            return super().is_transient(error)
        return is_transient_sql_error(error) or super().is_transient(error)

    async def translate_error(self, error: Exception) -> AnarchonError:
        """The coded error a driver error is raised as (the driver error becomes its cause).

        Transient → ``BackendUnavailableError``; a table of the backend's name
        that is not anarchon's → ``ForeignDataError`` naming it; anything else
        → ``BackendError``. Messages name the store (password hidden).
        """
        if isinstance(error, AnarchonError):
            return error
        where = self.describe()
        detail = scrub(f"{type(error).__name__}: {str(error).strip()}", self.secrets())
        if self.is_transient(error):
            state = "is unavailable" if is_connection_error(error) else "failed transiently"
            return BackendUnavailableError(
                f"{self.dialect.name} at {where} {state}: {detail} (the call may be retried)"
            )
        client = self._session.client
        if client is not None:
            foreign = await find_foreign_table(client, self.dialect, self.tables, where)
            if foreign is not None:
                return foreign
        return BackendError(f"{self.dialect.name} at {where}: {detail}")

    def _sql_backend(self) -> SqlBackend:
        return self

    # Lifecycle ----------------------------------------------------------

    @property
    def client(self) -> SqlClient | None:
        """The connected :class:`SqlClient` (None before :meth:`init` and after :meth:`close`)."""
        return self._session.client

    async def init(self) -> None:
        """Connect, check the server, create the tables and check the store format. Idempotent.

        Safe to run from many processes at once: the set-up is one transaction
        serialised by ``dialect.serialize``, and "already exists" races are
        retried.
        """
        await self._session.open_once(self._open)

    async def _open(self) -> tuple[SqlClient, bool]:
        """Connect, check the server and install: the client :meth:`init` keeps, and whether owned."""
        try:
            client, owned = await self.connect()
        except AnarchonError:
            raise
        except Exception as error:
            raise await self.translate_error(error) from error
        try:
            await self.check_server(client)
            working = self._working_client(client)
            await self._install_checked(working)
        except BaseException:
            if owned:
                await self.close_client(client)
            raise
        return working, owned

    async def _install_checked(self, client: SqlClient) -> None:
        """Install, then make sure every table is anarchon's (``ForeignDataError`` if not)."""
        where = self.describe()
        try:
            await self._schema.install(client)
        except AnarchonError:
            raise
        except Exception as error:
            if self.is_transient(error):
                raise await self.translate_error(error) from error
            foreign = await find_foreign_table(client, self.dialect, self.tables, where)
            if foreign is not None:
                raise foreign from error
            raise await self.translate_error(error) from error
        foreign = await find_foreign_table(client, self.dialect, self.tables, where)
        if foreign is not None:
            raise foreign

    async def close(self) -> None:
        """Close the connection if the backend opened it; a user's connection stays open."""
        await self._session.close(self.close_client)

    def _working_client(self, client: SqlClient) -> SqlClient:
        """The client the backend works through once :meth:`check_server` passed (a subclass may wrap it)."""
        return client

    def _calls_in_transaction(self) -> bool:
        """True to run the dialect's one-statement calls each in a transaction of its own."""
        return False

    # Kept for benchmarks/claims_sql.py, which swaps the client to count round trips
    # and drops the claim call to time the generic claim transaction.

    @property
    def _client(self) -> SqlClient | None:
        return self._session.client

    @_client.setter
    def _client(self, client: SqlClient | None) -> None:
        self._session.client = client

    @property
    def _claim_sql(self) -> str | None:
        return self._sql.calls.claim

    @_claim_sql.setter
    def _claim_sql(self, sql: str | None) -> None:
        self._sql.calls.claim = sql

    # Backend --------------------------------------------------------------

    @store_call
    async def prepare_job(self, job: str, history_size: int) -> None:
        """Register the job's counter row (idempotent).

        A read first: the row usually exists (another instance or an earlier
        start made it), and a read takes no write lock (on SQLite, no commit
        and no fsync), so a fleet starting with thousands of jobs does not
        queue on the database's write lock.
        """
        await self._history.prepare_job(job)

    def check_job(self, limits: JobLimits) -> None:
        """Accept every job; learn how long late and catch-up claims may ask for a slot.

        Finished run state is kept at least ``max(max_late, catch_up) + jitter``
        plus a minute (and never trimmed while running); without this call it
        is kept as long as its history.
        """
        self._history.learn(limits)

    @store_call
    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one token per ``(job, slot)``, and again for that token.

        Equals ``runs.claim()`` with ``create=True``, no overlap check, one
        attempt and a one-day lease, mapped to a bool. The claim is itself the
        history record.
        """
        row = await self._leases.claim_row(RunClaim.plain(input))
        return bool(row[0] == "won" or row[4] == input.token)

    @store_call
    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item: one statement or transaction per chunk of ``batch_size``."""
        rows = await self._leases.claim_rows([RunClaim.plain(i) for i in inputs], self.batch_size)
        return [bool(r[0] == "won" or r[4] == i.token) for r, i in zip(rows, inputs, strict=True)]

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: a claim is itself the history record."""
        return None

    @store_call
    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Record a manual run (never de-duplicated); the slot is kept as given."""
        await self._history.record_manual_run(input)
        return None

    @store_call
    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Store how a run ended, then trim history (about ``history_size`` runs, and the TTL).

        A plain claim's run state is marked finished too. Trimming by count
        runs every ``history_size // 2`` saves of the job and keeps the newest
        ``history_size`` results, so between N and 2N runs are kept; records of
        a run still in progress are never trimmed.
        """
        await self._history.save_result(job, result, history_size, history_ttl_ms)

    @store_call
    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item: one statement or transaction per chunk.

        Each item is its own ``save_result`` (finish a plain claim's state,
        store the result, trim history); a chunk of one job keeps its order.
        """
        await self._history.save_results(writes, self.batch_size)

    @store_call
    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` on all instances, newest first (one record per attempt)."""
        if limit <= 0:
            return []
        return await self._history.history(job, limit)

    @store_call
    async def now_ms(self) -> int:
        """The database server's clock in ms."""
        return await self._leases.now()

    # Fleet registry and controls (anarchon_sql._fleet) ------------------

    @store_call
    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Upsert this instance's declarations (server clock) and drop expired ones."""
        client = await self._session.ready()
        fleet = self._fleet
        await self._session.transaction(
            client, lambda tx: fleet.declare_tx(tx, declarations, ttl_ms)
        )

    @store_call
    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        client = await self._session.ready()
        if job is None:
            rows = await client.all(self._fleet.all, ())
        else:
            rows = await client.all(self._fleet.of_job, (job,))
        table = self.tables("fleet")
        found = (
            skip_unreadable(row_name(table, row), "a declaration", partial(declaration_of, row))
            for row in rows
        )
        return [d for d in found if d is not None]

    @store_call
    async def set_control(self, control: JobControl) -> None:
        """Replace the job's control row (``updated_at``: server clock)."""
        client = await self._session.ready()
        await client.all(
            self._fleet.set_control,
            (
                control.job,
                1 if control.paused else 0,
                control.skip_until,
                control.updated_by,
                control.paused_at,
                control.resumed_at,
            ),
        )

    @store_call
    async def controls(self) -> dict[str, JobControl]:
        """Every job's readable control row (an unreadable row is skipped and reported once)."""
        client = await self._session.ready()
        table = self.tables("controls")
        found = (
            skip_unreadable(row_name(table, row), "a job's control", partial(control_of, row))
            for row in await client.all(self._fleet.controls, ())
        )
        return {c.job: c for c in found if c is not None}

    # Membership (anarchon_sql._members) ----------------------------------

    @store_call
    async def refresh_member(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Upsert this instance's row (server clock), delete expired rows; every live member.

        One transaction of three statements, whatever the number of jobs.
        """
        check_refresh(instance_id, roster, ttl_ms)
        client = await self._session.ready()
        members = self._members
        rows = await self._session.transaction(
            client, lambda tx: members.refresh_tx(tx, instance_id, roster, ttl_ms)
        )
        return members.members_of(rows)

    @store_call
    async def leave_member(self, instance_id: str) -> None:
        """Delete this instance's row (nothing if there is none)."""
        check_member_id(instance_id)
        client = await self._session.ready()
        await client.all(self._members.leave, (instance_id,))

    @store_call
    async def members(self) -> list[Member]:
        """Every live member (one read), sorted by instance id."""
        client = await self._session.ready()
        return self._members.members_of(await client.all(self._members.live, ()))

    # Internals -------------------------------------------------------------

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()}, table_prefix={self.tables.prefix!r})"
