"""``SqlBackend``: tables, the claim transaction, leases and history on any SQL database.

A subclass supplies a connection (:meth:`SqlBackend.connect` → ``(client,
owned)``), a server check (:meth:`SqlBackend.check_server`) and a
:class:`~anarchon_sql.SqlDialect`. Everything else lives here, written
once in neutral SQL (``?`` placeholders, ``ON CONFLICT``, ``RETURNING``).

Tables (``<p>`` is the table prefix, default ``anarchon_``):

================  ==========================================================
``<p>meta``       ``store_format`` marker and schema digest
``<p>runs``       lease state per ``(job, slot)``: attempt, token, status,
                  runner, lease expiry (server clock), start/finish times
``<p>claims``     one row per won attempt and per manual run (history)
``<p>results``    one row per ended attempt (history)
``<p>jobs``       per job: a counter of saved results (drives trimming)
``<p>fleet``      the fleet registry: one row per ``(job, instance_id)``
``<p>controls``   fleet-wide pause and skip, one row per job
================  ==========================================================

The last two are in :mod:`anarchon_sql._fleet`.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import hashlib
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

from anarchon.backend import STORE_FORMAT, Backend, RunStore
from anarchon.errors import (
    AnarchonError,
    BackendError,
    BackendUnavailableError,
    InvalidConfigError,
    StoreFormatError,
)
from anarchon.fleet_types import Declaration, JobControl
from anarchon.history import build_history
from anarchon.lease_model import Blocker, decide_claim, decide_release
from anarchon.lease_model import LeaseState as ModelState
from anarchon.types import (
    PLAIN_CLAIM_LEASE_MS,
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    ClaimRecord,
    JobLimits,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRecord,
    RunRetry,
    StoredResult,
    lease_state_of,
)

from anarchon_sql._calls import store_call
from anarchon_sql._client import Row, SqlClient
from anarchon_sql._dialect import DEFAULT_TABLE_PREFIX, SqlDialect, SqlTables
from anarchon_sql._driver_errors import is_connection_error, is_transient_sql_error, scrub
from anarchon_sql._fleet import FleetStatements, control_of, declaration_of, fleet_ddl
from anarchon_sql._foreign import find_foreign_table
from anarchon_sql.retry import retry_tx

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "PLAIN_CLAIM_LEASE_MS",
    "RETENTION_MARGIN_MS",
    "SqlBackend",
    "SqlRunStore",
]

T = TypeVar("T")
Item = TypeVar("Item")

DEFAULT_BATCH_SIZE = 500
"""Items per store call (one statement or one transaction) of the batch members."""


RETENTION_MARGIN_MS = 60_000
"""Extra time finished run state is kept beyond what late and catch-up claims need."""

_FORMAT_KEY = "store_format"


def _chunks(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _by_job(jobs: Sequence[str]) -> list[int]:
    """Indexes in the order a chunk is worked: by job, request order within a job.

    Two chunks that lock the same jobs then take the locks in the same order.
    """
    return sorted(range(len(jobs)), key=lambda i: jobs[i])


_SCHEMA_KEY = "schema"


class _Statements:
    """Every statement the backend runs, built once per (dialect, prefix), placeholders converted."""

    def __init__(self, dialect: SqlDialect, tables: SqlTables) -> None:
        if not dialect.now_ms:
            raise InvalidConfigError(
                f"{type(dialect).__name__}.now_ms must be an SQL expression reading the server clock"
            )
        q = dialect.placeholders
        now = dialect.now_ms
        runs, claims, results, jobs, meta = (
            tables.runs,
            tables.claims,
            tables.results,
            tables.jobs,
            tables.meta,
        )
        keep_running = (
            f"NOT EXISTS (SELECT 1 FROM {runs} AS r WHERE r.job = {{t}}.job"
            f" AND r.slot = {{t}}.slot AND r.status = 'running')"
        )
        self.now = q(f"SELECT {now}")
        # Meta and set-up.
        self.create_meta = (
            f"CREATE TABLE IF NOT EXISTS {meta} ("
            f"key {dialect.text} PRIMARY KEY, value {dialect.text} NOT NULL)"
        )
        self.meta_get = q(f"SELECT key, value FROM {meta}")
        self.meta_put = q(
            f"INSERT INTO {meta} (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self.job_row = q(f"SELECT 1 FROM {jobs} WHERE job = ?")
        self.prepare_job = q(
            f"INSERT INTO {jobs} (job, saves) VALUES (?, 0) ON CONFLICT (job) DO NOTHING"
        )
        # The claim transaction (generic path).
        self.run_row = q(
            "SELECT attempt, max_attempts, token, status, runner, lease_expires_at,"
            f" started_at, released FROM {runs} WHERE job = ? AND slot = ?{dialect.for_update}"
        )
        self.lease_state = q(
            f"SELECT token, status, released FROM {runs} WHERE job = ? AND slot = ?"
        )
        self.live_older = q(
            f"SELECT runner, lease_expires_at FROM {runs} WHERE job = ? AND status = 'running'"
            " AND slot < ? AND lease_expires_at > ? ORDER BY slot DESC LIMIT 1"
        )
        self.insert_run = q(
            f"INSERT INTO {runs} (job, slot, attempt, max_attempts, token, status, runner,"
            " lease_expires_at, started_at, finished_at, released)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
        )
        self.insert_claim = q(
            f"INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job, slot, token) DO NOTHING"
        )
        self.insert_result = q(
            f"INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,"
            " started_at, finished_at, error, manual) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job, slot, token) DO NOTHING"
        )
        self.extend_lease = q(f"UPDATE {runs} SET lease_expires_at = ? WHERE job = ? AND slot = ?")
        self.take_over = q(
            f"UPDATE {runs} SET attempt = ?, token = ?, runner = ?, lease_expires_at = ?,"
            " max_attempts = ?, started_at = ?, released = 0, end_reason = NULL"
            " WHERE job = ? AND slot = ?"
        )
        self.end_run = q(
            f"UPDATE {runs} SET status = ?, finished_at = ?, end_reason = ?"
            " WHERE job = ? AND slot = ?"
        )
        # Leases.
        self.heartbeat = q(
            f"UPDATE {runs} SET lease_expires_at = {now} + ? WHERE job = ? AND slot = ?"
            " AND token = ? AND status = 'running' AND released = 0 RETURNING lease_expires_at"
        )
        self.finish = q(
            f"UPDATE {runs} SET status = 'finished', finished_at = {now}, outcome = ?, error = ?"
            " WHERE job = ? AND slot = ? AND token = ? AND status = 'running' AND released = 0"
            " RETURNING slot"
        )
        self.state_of = q(
            f"SELECT status, end_reason FROM {runs} WHERE job = ? AND slot = ? AND token = ?"
        )
        self.release_row = q(
            f"SELECT {now}, attempt, max_attempts, runner, started_at, status, released,"
            f" end_reason FROM {runs} WHERE job = ? AND slot = ? AND token = ?{dialect.for_update}"
        )
        self.release_lease = q(
            f"UPDATE {runs} SET lease_expires_at = ?, released = 1, end_reason = 'handed_over'"
            " WHERE job = ? AND slot = ?"
        )
        self.active = q(
            f"SELECT {now}, slot, attempt, runner, lease_expires_at, token FROM {runs}"
            " WHERE job = ? AND status = 'running' ORDER BY slot"
        )
        # History.
        self.manual_claim = q(
            f"INSERT INTO {claims} (job, token, slot, attempt, instance_id, claimed_at, manual)"
            f" VALUES (?, ?, ?, 1, ?, {now}, 1) ON CONFLICT (job, slot, token) DO NOTHING"
        )
        self.finish_plain = q(
            f"UPDATE {runs} SET status = 'finished', finished_at = {now}, outcome = ?, error = ?"
            " WHERE job = ? AND slot = ? AND token = ? AND status = 'running'"
        )
        self.upsert_result = q(
            f"INSERT INTO {results} (job, token, slot, attempt, instance_id, status, reason,"
            " started_at, finished_at, error, manual) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job, slot, token) DO UPDATE SET slot = excluded.slot,"
            " attempt = excluded.attempt, instance_id = excluded.instance_id,"
            " status = excluded.status, reason = excluded.reason,"
            " started_at = excluded.started_at, finished_at = excluded.finished_at,"
            " error = excluded.error, manual = excluded.manual"
        )
        self.count_save = q(
            f"INSERT INTO {jobs} (job, saves) VALUES (?, 1)"
            f" ON CONFLICT (job) DO UPDATE SET saves = {jobs}.saves + 1 RETURNING saves"
        )
        self.cut = q(
            f"SELECT slot FROM {results} WHERE job = ? ORDER BY slot DESC LIMIT 1 OFFSET ?"
        )
        self.trim_results = q(
            f"DELETE FROM {results} WHERE job = ? AND slot < ? AND "
            + keep_running.format(t=results)
        )
        self.trim_claims = q(
            f"DELETE FROM {claims} WHERE job = ? AND slot < ? AND " + keep_running.format(t=claims)
        )
        self.trim_runs = q(
            f"DELETE FROM {runs} WHERE job = ? AND slot < ? AND status <> 'running'"
            f" AND slot < {now} - ?"
        )
        self.ttl_results = q(
            f"DELETE FROM {results} WHERE job = ? AND slot < {now} - ? AND "
            + keep_running.format(t=results)
        )
        self.ttl_claims = q(
            f"DELETE FROM {claims} WHERE job = ? AND slot < {now} - ? AND "
            + keep_running.format(t=claims)
        )
        self.history_claims = q(
            f"SELECT slot, token, instance_id, claimed_at, manual, attempt FROM {claims}"
            " WHERE job = ? ORDER BY slot DESC, attempt DESC LIMIT ?"
        )
        self.history_results = q(
            "SELECT slot, token, instance_id, status, started_at, finished_at, error, attempt,"
            f" manual, reason FROM {results} WHERE job = ? ORDER BY slot DESC, attempt DESC LIMIT ?"
        )


def _ddl(dialect: SqlDialect, tables: SqlTables) -> list[str]:
    """The tables and indexes (``IF NOT EXISTS``), then the dialect's extra DDL."""
    big, text = dialect.bigint, dialect.text
    t = tables
    return [
        f"CREATE TABLE IF NOT EXISTS {t.runs} ("
        f"job {text} NOT NULL, slot {big} NOT NULL, attempt INTEGER NOT NULL,"
        f" max_attempts INTEGER NOT NULL, token {text} NOT NULL, status {text} NOT NULL,"
        f" runner {text} NOT NULL, lease_expires_at {big} NOT NULL, started_at {big} NOT NULL,"
        f" finished_at {big}, released INTEGER NOT NULL DEFAULT 0, end_reason {text},"
        f" outcome {text}, error {text}, PRIMARY KEY (job, slot))",
        f"CREATE INDEX IF NOT EXISTS {t('runs_status')} ON {t.runs} (job, status, slot)",
        f"CREATE TABLE IF NOT EXISTS {t.claims} ("
        f"job {text} NOT NULL, token {text} NOT NULL, slot {big} NOT NULL,"
        f" attempt INTEGER NOT NULL, instance_id {text} NOT NULL, claimed_at {big} NOT NULL,"
        f" manual INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (job, slot, token))",
        f"CREATE TABLE IF NOT EXISTS {t.results} ("
        f"job {text} NOT NULL, token {text} NOT NULL, slot {big} NOT NULL,"
        f" attempt INTEGER NOT NULL, instance_id {text} NOT NULL, status {text} NOT NULL,"
        f" reason {text}, started_at {big}, finished_at {big}, error {text},"
        f" manual INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (job, slot, token))",
        f"CREATE TABLE IF NOT EXISTS {t.jobs} ("
        f"job {text} PRIMARY KEY, saves {big} NOT NULL DEFAULT 0)",
        *fleet_ddl(dialect, tables),
        *dialect.extra_tables(tables),
    ]


def _lease_state(row: Row) -> ModelState:
    """A ``run_row`` (attempt, max, token, status, runner, lease, started, released) for the model."""
    attempt, max_attempts, token, status, runner, lease, started, released = row
    return ModelState(
        attempt=int(attempt),
        token=str(token),
        runner=str(runner),
        status=str(status),
        lease_expires_at=int(lease),
        max_attempts=int(max_attempts),
        started_at=int(started),
        released=bool(released),
    )


def _finish_params(chunk: Sequence[RunFinish]) -> tuple[list[Any], ...]:
    """The arrays of a chunk's finishes: jobs, slots, tokens, statuses, errors."""
    return (
        [f.job for f in chunk],
        [int(f.slot) for f in chunk],
        [f.token for f in chunk],
        [f.status for f in chunk],
        [f.error for f in chunk],
    )


def _outcome(row: Row) -> ClaimOutcome:
    kind, attempt, runner, lease, _token = row
    return ClaimOutcome(
        str(kind),
        int(attempt or 0),
        None if runner is None else str(runner),
        None if lease is None else int(lease),
    )


class SqlRunStore(RunStore):
    """The leases of a :class:`SqlBackend` (docs/leases.md); every step is one transaction.

    Lease times are computed with the database server's clock
    (``dialect.now_ms``), never with an instance's clock. Driver errors are
    raised as ``BackendUnavailableError`` when transient, else as
    ``ForeignDataError`` or ``BackendError`` (see :meth:`SqlBackend.translate_error`).
    """

    def __init__(self, backend: SqlBackend) -> None:
        self._backend = backend
        # The generic claim transaction honours it; a dialect's statements only if they say so.
        dialect = backend.dialect
        statements = (
            dialect.claim_statement(backend.tables),
            dialect.claim_many_statement(backend.tables),
        )
        self.overlap_wait = dialect.claims_take_overlap_wait or statements == (None, None)

    def _sql_backend(self) -> SqlBackend:
        return self._backend

    @store_call
    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree (docs/leases.md) in one transaction and return its outcome."""
        return _outcome(await self._backend._claim_row(claim))

    @store_call
    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """``claim()`` for each item: one statement or transaction per chunk of ``batch_size``."""
        return [_outcome(row) for row in await self._backend._claim_rows(claims)]

    @store_call
    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """``heartbeat()`` for each run: one statement or transaction per chunk."""
        b = self._backend
        client = await b._ready()
        answers: list[bool] = []
        for chunk in _chunks(runs, b.batch_size):
            if b._heartbeat_many_sql is not None:
                params = (
                    int(lease_ms),
                    [r.job for r in chunk],
                    [int(r.slot) for r in chunk],
                    [r.token for r in chunk],
                )
                rows = await b._statement(client, b._heartbeat_many_sql, params)
                renewed = {int(i): bool(ok) for i, ok in rows}
                answers += [renewed[i + 1] for i in range(len(chunk))]
            else:
                answers += await b._in_transaction(
                    client,
                    functools.partial(b._heartbeat_chunk_tx, chunk=chunk, lease_ms=int(lease_ms)),
                )
        return answers

    @store_call
    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """``finish()`` for each item: one statement or transaction per chunk."""
        b = self._backend
        client = await b._ready()
        answers: list[bool] = []
        for chunk in _chunks(finishes, b.batch_size):
            if b._finish_many_sql is not None:
                rows = await b._statement(client, b._finish_many_sql, _finish_params(chunk))
                by_index = {int(i): bool(done) for i, done in rows}
                answers += [by_index[i + 1] for i in range(len(chunk))]
            else:
                answers += await b._in_transaction(
                    client, functools.partial(b._finish_chunk_tx, chunk=chunk)
                )
        return answers

    @store_call
    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool]:
        """``finish()`` for each item and, if it answered True, ``save_result()`` of its write.

        One statement (PostgreSQL) or one transaction (SQLite) per chunk, so a
        finished run and its result are committed together.
        """
        b = self._backend
        client = await b._ready()
        answers: list[bool] = []
        size = b.batch_size
        for first in range(0, len(finishes), size):
            chunk = finishes[first : first + size]
            results = writes[first : first + size]
            if b._finish_save_many_sql is not None:
                params = (*_finish_params(chunk), *b._save_params(results))
                rows = await b._statement(client, b._finish_save_many_sql, params)
                by_index = {int(i): bool(done) for i, done in rows}
                answers += [by_index[i + 1] for i in range(len(chunk))]
            else:
                answers += await b._in_transaction(
                    client,
                    functools.partial(b._finish_save_chunk_tx, chunk=chunk, writes=results),
                )
        return answers

    @store_call
    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to server time + ``lease_ms`` if ``token`` still owns the run."""
        b = self._backend
        client = await b._ready()
        rows = await client.all(b._sql.heartbeat, (int(lease_ms), job, int(slot), token))
        return bool(rows)

    @store_call
    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Mark the run finished with ``status`` if ``token`` still owns it (state only).

        The scheduler stores the result with :meth:`SqlBackend.save_result`
        after a successful ``finish``. A retried finish is answered True again.
        """
        b = self._backend
        client = await b._ready()
        rows = await client.all(b._sql.finish, (status, error, job, int(slot), token))
        if rows:
            return True
        rows = await client.all(b._sql.state_of, (job, int(slot), token))
        return bool(rows) and rows[0][0] == "finished"

    @store_call
    async def release(self, job: str, slot: int, token: str) -> bool:
        """End ``token``'s lease now so a backup takes over at its next re-check (hand-over).

        The released attempt is recorded ``interrupted`` (reason
        ``handed_over``); on the last attempt the run is marked interrupted,
        so no backup starts it again. A retried release is answered True again.
        """
        b = self._backend
        client = await b._ready()
        return await b._in_transaction(client, lambda tx: b._release_tx(tx, job, int(slot), token))

    native_retry = True

    @store_call
    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End a failed attempt and start the next under the same runner, in one transaction."""
        b = self._backend
        client = await b._ready()
        return await b._in_transaction(client, lambda tx: retry_tx(b, tx, retry))

    @store_call
    async def now_ms(self) -> int:
        """The database server's clock, in ms since the epoch."""
        return await self._backend._server_now()

    @store_call
    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)`` (one plain read)."""
        b = self._backend
        client = await b._ready()
        rows = await client.all(b._sql.lease_state, (job, int(slot)))
        if not rows:
            return lease_state_of(token, None, False, False)
        stored, status, released = rows[0]
        return lease_state_of(token, str(stored), str(status) == "running", bool(int(released)))

    @store_call
    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        b = self._backend
        client = await b._ready()
        rows = await client.all(b._sql.active, (job,))
        return [
            ActiveRun(
                slot=int(slot),
                attempt=int(attempt),
                runner=str(runner),
                lease_expires_at=int(lease),
                live=int(lease) > int(now),
                token=str(token),
            )
            for now, slot, attempt, runner, lease, token in rows
        ]


class SqlBackend(Backend):
    """Abstract base of the SQL backends: tables, claims, leases and history.

    Subclasses implement :meth:`connect` and may override :meth:`check_server`
    and :meth:`describe`; they pass a :class:`SqlDialect` to ``__init__``.
    Options common to every SQL backend:

    - ``table_prefix`` (default ``"anarchon_"``): prefix of every table, index
      and function; validated as an SQL identifier (``InvalidConfigError``);
    - ``batch_size`` (default 500): items per store call of the batch members
      (``claim_many``, ``heartbeat_many``, ``finish_many``, ``save_results``).

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
    runs: SqlRunStore

    def __init__(
        self,
        *,
        dialect: SqlDialect,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if not isinstance(dialect, SqlDialect):
            raise InvalidConfigError(f"dialect must be a SqlDialect, not {type(dialect).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.dialect = dialect
        self.tables = SqlTables(table_prefix)
        self.batch_size = batch_size
        self._sql = _Statements(dialect, self.tables)
        self._fleet = FleetStatements(dialect, self.tables)

        def prepared(sql: str | None) -> str | None:
            return None if sql is None else dialect.placeholders(sql)

        self._claim_sql = prepared(dialect.claim_statement(self.tables))
        self._claim_many_sql = prepared(dialect.claim_many_statement(self.tables))
        self._heartbeat_many_sql = prepared(dialect.heartbeat_many_statement(self.tables))
        self._finish_many_sql = prepared(dialect.finish_many_statement(self.tables))
        self._save_many_sql = prepared(dialect.save_many_statement(self.tables))
        self._finish_save_many_sql = prepared(dialect.finish_save_many_statement(self.tables))
        self.runs = SqlRunStore(self)
        self._client: SqlClient | None = None
        self._owned = False
        self._init_lock: asyncio.Lock | None = None
        self._retention: dict[str, int] = {}

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
        client = self._client
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
        return self._client

    async def init(self) -> None:
        """Connect, check the server, create the tables and check the store format. Idempotent.

        Safe to run from many processes at once: the set-up is one transaction
        serialised by ``dialect.serialize``, and "already exists" races are
        retried.
        """
        if self._client is not None:
            return
        if self._init_lock is None:
            self._init_lock = asyncio.Lock()
        async with self._init_lock:
            if self._client is not None:
                return
            try:
                client, owned = await self.connect()
            except AnarchonError:
                raise
            except Exception as error:
                raise await self.translate_error(error) from error
            try:
                await self.check_server(client)
                await self._install_checked(client)
            except BaseException:
                if owned:
                    await self.close_client(client)
                raise
            self._client, self._owned = client, owned

    async def _install_checked(self, client: SqlClient) -> None:
        """Install, then make sure every table is anarchon's (``ForeignDataError`` if not)."""
        where = self.describe()
        try:
            await self._install(client)
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
        client, owned = self._client, self._owned
        self._client, self._owned = None, False
        self._init_lock = None
        if client is not None and owned:
            await self.close_client(client)

    async def _ready(self) -> SqlClient:
        if self._client is None:
            await self.init()
        assert self._client is not None
        return self._client

    async def _install(self, client: SqlClient) -> None:
        for attempt in range(5):
            try:
                await client.transaction(self._install_tx)
                return
            except Exception as error:
                if attempt < 4 and self.dialect.is_already_created(error):
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise

    async def _install_tx(self, tx: SqlClient) -> None:
        await self.dialect.serialize(tx, self.tables.prefix + "init")
        await tx.all(self._sql.create_meta, ())
        meta = {str(k): str(v) for k, v in await tx.all(self._sql.meta_get, ())}
        found = meta.get(_FORMAT_KEY)
        if found is not None:
            try:
                version = int(found)
            except ValueError:
                version = -1
            if version < 0 or version > STORE_FORMAT:
                raise StoreFormatError(
                    f"the tables {self.tables.prefix}* at {self.describe()} hold store format"
                    f" {found!r}; this anarchon-sql reads format {STORE_FORMAT} at most:"
                    " upgrade anarchon-sql on this instance"
                )
        ddl = _ddl(self.dialect, self.tables)
        digest = hashlib.sha256("\n;\n".join(ddl).encode()).hexdigest()[:16]
        if found == str(STORE_FORMAT) and meta.get(_SCHEMA_KEY) == digest:
            return
        for statement in ddl:
            await tx.all(statement, ())
        await tx.all(self._sql.meta_put, (_FORMAT_KEY, str(STORE_FORMAT)))
        await tx.all(self._sql.meta_put, (_SCHEMA_KEY, digest))

    # Backend --------------------------------------------------------------

    @store_call
    async def prepare_job(self, job: str, history_size: int) -> None:
        """Register the job's counter row (idempotent).

        A read first: the row usually exists (another instance or an earlier
        start made it), and a read takes no write lock (on SQLite, no commit
        and no fsync), so a fleet starting with thousands of jobs does not
        queue on the database's write lock.
        """
        client = await self._ready()
        if await client.all(self._sql.job_row, (job,)):
            return
        await client.all(self._sql.prepare_job, (job,))

    def check_job(self, limits: JobLimits) -> None:
        """Accept every job; learn how long late and catch-up claims may ask for a slot.

        Finished run state is kept at least ``max(max_late, catch_up) + jitter``
        plus a minute (and never trimmed while running); without this call it
        is kept as long as its history.
        """
        needed = (
            max(limits.max_late_ms, limits.catch_up_ms or 0)
            + limits.jitter_ms
            + RETENTION_MARGIN_MS
        )
        self._retention[limits.job] = max(self._retention.get(limits.job, 0), needed)

    @store_call
    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one token per ``(job, slot)``, and again for that token.

        Equals ``runs.claim()`` with ``create=True``, no overlap check, one
        attempt and a one-day lease, mapped to a bool. The claim is itself the
        history record.
        """
        row = await self._claim_row(RunClaim.plain(input))
        return bool(row[0] == "won" or row[4] == input.token)

    @store_call
    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item: one statement or transaction per chunk of ``batch_size``."""
        rows = await self._claim_rows([RunClaim.plain(i) for i in inputs])
        return [bool(r[0] == "won" or r[4] == i.token) for r, i in zip(rows, inputs, strict=True)]

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: a claim is itself the history record."""
        return None

    @store_call
    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Record a manual run (never de-duplicated); the slot is kept as given."""
        client = await self._ready()
        await client.all(
            self._sql.manual_claim, (input.job, input.token, int(input.slot), input.instance_id)
        )
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
        client = await self._ready()
        await self._in_transaction(
            client, lambda tx: self._save_tx(tx, job, result, history_size, history_ttl_ms)
        )

    @store_call
    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item: one statement or transaction per chunk.

        Each item is its own ``save_result`` (finish a plain claim's state,
        store the result, trim history); a chunk of one job keeps its order.
        """
        client = await self._ready()
        for chunk in _chunks(writes, self.batch_size):
            if self._save_many_sql is not None:
                await self._statement(client, self._save_many_sql, self._save_params(chunk))
            else:
                await self._in_transaction(
                    client, functools.partial(self._save_chunk_tx, chunk=chunk)
                )

    @store_call
    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` on all instances, newest first (one record per attempt)."""
        if limit <= 0:
            return []
        client = await self._ready()
        fetch = int(limit) + 8
        claim_rows = await client.all(self._sql.history_claims, (job, fetch))
        result_rows = await client.all(self._sql.history_results, (job, fetch))
        claims = [
            ClaimRecord(
                job=job,
                slot=int(slot),
                token=str(token),
                instance_id=str(instance),
                at=int(at),
                manual=bool(manual),
                attempt=int(attempt),
            )
            for slot, token, instance, at, manual, attempt in claim_rows
        ]
        results = [
            StoredResult(
                slot=int(slot),
                token=str(token),
                instance_id=str(instance),
                status=str(status),
                started_at=None if started is None else int(started),
                finished_at=None if finished is None else int(finished),
                error=error,
                attempt=int(attempt),
                manual=bool(manual),
                reason=reason,
            )
            for (
                slot,
                token,
                instance,
                status,
                started,
                finished,
                error,
                attempt,
                manual,
                reason,
            ) in result_rows
        ]
        return build_history(job, claims, results, limit)

    @store_call
    async def now_ms(self) -> int:
        """The database server's clock in ms."""
        return await self._server_now()

    # Fleet registry and controls (anarchon_sql._fleet) ------------------

    @store_call
    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Upsert this instance's declarations (server clock) and drop expired ones."""
        client = await self._ready()
        fleet = self._fleet
        await self._in_transaction(client, lambda tx: fleet.declare_tx(tx, declarations, ttl_ms))

    @store_call
    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        client = await self._ready()
        if job is None:
            rows = await client.all(self._fleet.all, ())
        else:
            rows = await client.all(self._fleet.of_job, (job,))
        return [declaration_of(row) for row in rows]

    @store_call
    async def set_control(self, control: JobControl) -> None:
        """Replace the job's control row (``updated_at``: server clock)."""
        client = await self._ready()
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
        """Every job's control row."""
        client = await self._ready()
        found = [control_of(row) for row in await client.all(self._fleet.controls, ())]
        return {c.job: c for c in found}

    # Internals -------------------------------------------------------------

    async def _server_now(self) -> int:
        client = await self._ready()
        rows = await client.all(self._sql.now, ())
        return int(rows[0][0])

    def _claim_params(self, c: RunClaim) -> tuple[Any, ...]:
        return (
            c.job,
            int(c.slot),
            c.token,
            c.instance_id,
            int(c.lease_ms),
            int(c.max_attempts),
            bool(c.overlap),
            None if c.deadline_ms is None else int(c.deadline_ms),
            bool(c.create),
            None if c.early_ms is None else int(c.early_ms),
        ) + ((bool(c.overlap_wait),) if self.dialect.claims_take_overlap_wait else ())

    async def _claim_row(self, c: RunClaim) -> Row:
        """``(kind, attempt, runner, lease_expires_at, stored_token)`` of one claim."""
        client = await self._ready()
        if self._claim_sql is not None:
            rows = await self._statement(client, self._claim_sql, self._claim_params(c))
            return tuple(rows[0])
        return await self._in_transaction(client, lambda tx: self._claim_tx(tx, c))

    async def _claim_rows(self, claims: Sequence[RunClaim]) -> list[Row]:
        """``_claim_row`` of each claim, one statement or transaction per chunk."""
        client = await self._ready()
        out: list[Row] = []
        for chunk in _chunks(claims, self.batch_size):
            if self._claim_many_sql is not None:
                params: tuple[list[Any], ...] = (
                    [c.job for c in chunk],
                    [int(c.slot) for c in chunk],
                    [c.token for c in chunk],
                    [c.instance_id for c in chunk],
                    [int(c.lease_ms) for c in chunk],
                    [int(c.max_attempts) for c in chunk],
                    [bool(c.overlap) for c in chunk],
                    [None if c.deadline_ms is None else int(c.deadline_ms) for c in chunk],
                    [bool(c.create) for c in chunk],
                    [None if c.early_ms is None else int(c.early_ms) for c in chunk],
                )
                if self.dialect.claims_take_overlap_wait:
                    params += ([bool(c.overlap_wait) for c in chunk],)
                rows = await self._statement(client, self._claim_many_sql, params)
                by_index = {int(row[0]): tuple(row[1:]) for row in rows}
                if len(by_index) != len(chunk):
                    raise BackendError(
                        f"{self.dialect.name} at {self.describe()}: the batch claim answered"
                        f" {len(by_index)} of {len(chunk)} items"
                    )
                out += [by_index[i + 1] for i in range(len(chunk))]
            else:
                out += await self._in_transaction(
                    client, functools.partial(self._claim_chunk_tx, chunk=chunk)
                )
        return out

    async def _claim_chunk_tx(self, tx: SqlClient, chunk: Sequence[RunClaim]) -> list[Row]:
        rows: list[Row] = [()] * len(chunk)
        for i in _by_job([c.job for c in chunk]):
            c = chunk[i]
            if self._claim_sql is not None:
                rows[i] = tuple((await tx.all(self._claim_sql, self._claim_params(c)))[0])
            else:
                rows[i] = await self._claim_tx(tx, c)
        return rows

    async def _heartbeat_chunk_tx(
        self, tx: SqlClient, chunk: Sequence[RunKey], lease_ms: int
    ) -> list[bool]:
        s = self._sql
        answers: list[bool] = []
        for r in chunk:
            answers.append(bool(await tx.all(s.heartbeat, (lease_ms, r.job, int(r.slot), r.token))))
        return answers

    async def _finish_chunk_tx(self, tx: SqlClient, chunk: Sequence[RunFinish]) -> list[bool]:
        return [await self._finish_tx(tx, f) for f in chunk]

    async def _finish_tx(self, tx: SqlClient, f: RunFinish) -> bool:
        """``finish()``'s statements: True if ``f.token`` finished the run (now or before)."""
        s = self._sql
        if await tx.all(s.finish, (f.status, f.error, f.job, int(f.slot), f.token)):
            return True
        rows = await tx.all(s.state_of, (f.job, int(f.slot), f.token))
        return bool(rows) and rows[0][0] == "finished"

    async def _finish_save_chunk_tx(
        self, tx: SqlClient, chunk: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool]:
        answers = [False] * len(chunk)
        for i in _by_job([f.job for f in chunk]):
            answers[i] = await self._finish_tx(tx, chunk[i])
            if answers[i]:
                w = writes[i]
                await self._save_tx(
                    tx, w.job, w.result, w.history_size, w.history_ttl_ms, finished=True
                )
        return answers

    async def _save_chunk_tx(self, tx: SqlClient, chunk: Sequence[ResultWrite]) -> None:
        for i in _by_job([w.job for w in chunk]):
            w = chunk[i]
            await self._save_tx(tx, w.job, w.result, w.history_size, w.history_ttl_ms)

    def _save_params(self, chunk: Sequence[ResultWrite]) -> tuple[list[Any], ...]:
        results = [w.result for w in chunk]
        return (
            [w.job for w in chunk],
            [r.token for r in results],
            [int(r.slot) for r in results],
            [int(r.attempt) for r in results],
            [r.instance_id for r in results],
            [r.status for r in results],
            [getattr(r, "reason", None) for r in results],
            [None if r.started_at is None else int(r.started_at) for r in results],
            [None if r.finished_at is None else int(r.finished_at) for r in results],
            [r.error for r in results],
            [1 if r.manual else 0 for r in results],
            [max(int(w.history_size), 1) for w in chunk],
            [None if w.history_ttl_ms is None else int(w.history_ttl_ms) for w in chunk],
            [self._retention.get(w.job) for w in chunk],
        )

    async def _statement(self, client: SqlClient, sql: str, params: Sequence[Any]) -> list[Row]:
        """Run one of the dialect's one-statement calls (a subclass may wrap it in a transaction)."""
        return await client.all(sql, params)

    async def _in_transaction(
        self, client: SqlClient, fn: Callable[[SqlClient], Awaitable[T]]
    ) -> T:
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

    async def _claim_tx(self, tx: SqlClient, c: RunClaim) -> Row:
        """The claim tree (docs/leases.md) inside one transaction (generic path).

        The reference model (:func:`anarchon.lease_model.decide_claim`)
        decides; this writes what it says, in this store's tables.
        """
        s = self._sql
        await self.dialect.serialize(tx, self.tables.prefix + "job:" + c.job)
        now = int((await tx.all(s.now, ()))[0][0])
        rows = await tx.all(s.run_row, (c.job, c.slot))
        prior = _lease_state(rows[0]) if rows else None
        blocker = None
        if prior is None and not c.overlap and c.create:
            live = await tx.all(s.live_older, (c.job, c.slot, now))
            if live:
                blocker = Blocker(runner=str(live[0][0]), lease_expires_at=int(live[0][1]))
        decision = decide_claim(prior, c, now, blocker)
        state = decision.state
        if prior is None:
            if decision.skipped:
                await tx.all(
                    s.insert_run,
                    (
                        c.job,
                        c.slot,
                        0,
                        c.max_attempts,
                        c.token,
                        "skipped",
                        c.instance_id,
                        now,
                        now,
                        now,
                    ),
                )
                await self._result_row(
                    tx, c.job, c.token, c.slot, 1, c.instance_id, "skipped", "overlap", now, now
                )
            elif decision.claim_record and state is not None:
                await tx.all(
                    s.insert_run,
                    (
                        c.job,
                        c.slot,
                        1,
                        c.max_attempts,
                        c.token,
                        "running",
                        c.instance_id,
                        state.lease_expires_at,
                        now,
                        None,
                    ),
                )
                await tx.all(s.insert_claim, (c.job, c.token, c.slot, 1, c.instance_id, now, 0))
        elif state is not None and decision.claim_record:  # a takeover
            if decision.interrupted is not None:
                ended_at = max(decision.interrupted_at or now, prior.started_at)
                await self._result_row(
                    tx,
                    c.job,
                    prior.token,
                    c.slot,
                    prior.attempt,
                    prior.runner,
                    "interrupted",
                    decision.interrupted,
                    prior.started_at,
                    ended_at,
                )
            await tx.all(
                s.take_over,
                (
                    state.attempt,
                    c.token,
                    c.instance_id,
                    state.lease_expires_at,
                    c.max_attempts,
                    now,
                    c.job,
                    c.slot,
                ),
            )
            await tx.all(
                s.insert_claim, (c.job, c.token, c.slot, state.attempt, c.instance_id, now, 0)
            )
        elif state is not None and prior.status == "running" and state.status == "interrupted":
            if decision.interrupted is not None:  # attempts exhausted
                await self._result_row(
                    tx,
                    c.job,
                    prior.token,
                    c.slot,
                    prior.attempt,
                    prior.runner,
                    "interrupted",
                    decision.interrupted,
                    prior.started_at,
                    max(now, prior.started_at),
                )
            await tx.all(s.end_run, ("interrupted", now, None, c.job, c.slot))
        elif state is not None and state.lease_expires_at != prior.lease_expires_at:
            await tx.all(s.extend_lease, (state.lease_expires_at, c.job, c.slot))
        out = decision.outcome
        stored = state.token if state is not None else None
        return (out.kind, out.attempt, out.runner, out.lease_expires_at, stored)

    async def _result_row(
        self,
        tx: SqlClient,
        job: str,
        token: str,
        slot: int,
        attempt: int,
        instance_id: str,
        status: str,
        reason: str,
        started_at: int,
        finished_at: int,
    ) -> None:
        """A result row written by the claim tree (``skipped`` or ``interrupted``)."""
        await tx.all(
            self._sql.insert_result,
            (
                job,
                token,
                slot,
                attempt,
                instance_id,
                status,
                reason,
                started_at,
                finished_at,
                None,
                0,
            ),
        )

    async def _release_tx(self, tx: SqlClient, job: str, slot: int, token: str) -> bool:
        """A hand-over, decided by :func:`anarchon.lease_model.decide_release` (generic path)."""
        rows = await tx.all(self._sql.release_row, (job, slot, token))
        if not rows:  # no run, or another token holds it
            return False
        now, attempt, max_attempts, runner, started, status, released, end_reason = rows[0]
        now = int(now)
        prior = ModelState(
            attempt=int(attempt),
            token=token,
            runner=str(runner),
            status=str(status),
            lease_expires_at=now,  # not read by the release decision
            max_attempts=int(max_attempts),
            started_at=int(started),
            released=bool(released),
            end_reason=None if end_reason is None else str(end_reason),
        )
        decision = decide_release(prior, token, now)
        if decision.record:
            await self._result_row(
                tx,
                job,
                token,
                slot,
                prior.attempt,
                prior.runner,
                "interrupted",
                "handed_over",
                prior.started_at,
                max(now, prior.started_at),
            )
            state = decision.state
            if state is not None and state.status == "interrupted":
                await tx.all(self._sql.end_run, ("interrupted", now, "handed_over", job, slot))
            else:
                await tx.all(self._sql.release_lease, (now, job, slot))
        return decision.ok

    async def _save_tx(
        self,
        tx: SqlClient,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None,
        *,
        finished: bool = False,
    ) -> None:
        """Store a result and trim history (``finished``: its lease run was finished just now)."""
        s = self._sql
        slot = int(result.slot)
        if not finished and not result.manual and result.status != "running":
            await tx.all(s.finish_plain, (result.status, result.error, job, slot, result.token))
        await tx.all(
            s.upsert_result,
            (
                job,
                result.token,
                slot,
                int(result.attempt),
                result.instance_id,
                result.status,
                getattr(result, "reason", None),
                result.started_at,
                result.finished_at,
                result.error,
                1 if result.manual else 0,
            ),
        )
        saves = int((await tx.all(s.count_save, (job,)))[0][0])
        size = max(int(history_size), 1)
        if saves % max(size // 2, 1) == 0:
            cut_rows = await tx.all(s.cut, (job, size - 1))
            if cut_rows:
                cut = int(cut_rows[0][0])
                await tx.all(s.trim_results, (job, cut))
                await tx.all(s.trim_claims, (job, cut))
                retention = self._retention.get(job)
                if retention is not None:
                    await tx.all(s.trim_runs, (job, cut, retention))
        if history_ttl_ms is not None:
            ttl = int(history_ttl_ms)
            await tx.all(s.ttl_results, (job, ttl))
            await tx.all(s.ttl_claims, (job, ttl))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()}, table_prefix={self.tables.prefix!r})"
