"""Run history in SQL: saving results, trimming them, reading them back; run-state retention.

A result save is one transaction: finish a plain claim's run state, upsert
the result, count the save and, every ``history_size // 2`` saves of the job,
trim results and claims to the newest ``history_size`` (never the records of
a run still in progress), then drop what is older than the TTL. Finished run
state is trimmed with them once older than the job's retention
(:func:`anarchon.backend.state_retention_ms`, the core's one rule). A row
that cannot be read as history is skipped and reported once, named by its
table, job, slot and attempt.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from functools import partial
from typing import Any

from anarchon.backend import StateRetention
from anarchon.backend.foreign import (
    entry_name,
    skip_unreadable,
    stored_data,
    stored_flag,
    stored_int,
)
from anarchon.backend.history import build_history
from anarchon.types import ClaimInput, ClaimRecord, JobLimits, ResultWrite, RunRecord, StoredResult

from anarchon_sql._chunks import by_job, chunks
from anarchon_sql._client import Row, SqlClient
from anarchon_sql._dialect import SqlTables
from anarchon_sql._session import SqlSession
from anarchon_sql._statements import Statements

__all__ = ["SqlHistory"]


class SqlHistory:
    """The history tables of one backend (claims, results, jobs) and the retention it learnt."""

    def __init__(
        self, session: SqlSession, statements: Statements, tables: SqlTables | None = None
    ) -> None:
        self._session = session
        self._sql = statements
        self._tables = tables or SqlTables()
        self._retention = StateRetention()

    def learn(self, limits: JobLimits) -> None:
        """Keep the job's finished run state for the longest retention it was told."""
        self._retention.learn(limits)

    def retention_of(self, job: str) -> int | None:
        """The job's run-state retention in ms; None before :meth:`learn` (kept as its history)."""
        return self._retention.get(job)

    async def prepare_job(self, job: str) -> None:
        """Make the job's save counter row, after a read that usually finds it (no write lock)."""
        client = await self._session.ready()
        if await client.all(self._sql.job_row, (job,)):
            return
        await client.all(self._sql.prepare_job, (job,))

    async def record_manual_run(self, input: ClaimInput) -> None:
        """The claim record of a manual run (never de-duplicated), slot as given."""
        await self._session.all(
            self._sql.manual_claim, (input.job, input.token, int(input.slot), input.instance_id)
        )

    async def save_result(
        self, job: str, result: StoredResult, history_size: int, history_ttl_ms: int | None
    ) -> None:
        """One result saved and history trimmed, in one transaction."""
        client = await self._session.ready()
        await self._session.transaction(
            client, lambda tx: self.save_tx(tx, job, result, history_size, history_ttl_ms)
        )

    async def save_results(self, writes: Sequence[ResultWrite], size: int) -> None:
        """:meth:`save_result` of each write: one call or transaction per chunk of ``size``."""
        session = self._session
        client = await session.ready()
        save_many = self._sql.calls.save_many
        for chunk in chunks(writes, size):
            if save_many is not None:
                await session.call(client, save_many, self.save_params(chunk))
            else:
                await session.transaction(
                    client, functools.partial(self._save_chunk_tx, chunk=chunk)
                )

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job``, newest first (one record per attempt)."""
        client = await self._session.ready()
        fetch = int(limit) + 8
        claim_rows = await client.all(self._sql.history_claims, (job, fetch))
        result_rows = await client.all(self._sql.history_results, (job, fetch))
        claims_table, results_table = self._tables.claims, self._tables.results
        claims = [
            c
            for c in (
                skip_unreadable(
                    _row_name(claims_table, job, row), "a claim", partial(_claim, job, row)
                )
                for row in claim_rows
            )
            if c is not None
        ]
        results = [
            r
            for r in (
                skip_unreadable(
                    _row_name(results_table, job, row), "a run's result", partial(_result, row)
                )
                for row in result_rows
            )
            if r is not None
        ]
        return build_history(job, claims, results, limit)

    async def _save_chunk_tx(self, tx: SqlClient, chunk: Sequence[ResultWrite]) -> None:
        for i in by_job([w.job for w in chunk]):
            w = chunk[i]
            await self.save_tx(tx, w.job, w.result, w.history_size, w.history_ttl_ms)

    def save_params(self, chunk: Sequence[ResultWrite]) -> tuple[list[Any], ...]:
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
            [self.retention_of(w.job) for w in chunk],
        )

    async def save_tx(
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
        counted = (await tx.all(s.count_save, (job,)))[0][0]
        with stored_data(entry_name(self._tables.jobs, f"job={job!r}"), "a count of saves"):
            saves = stored_int(counted)  # SQLite adds 1 to '1e400' as inf
        size = max(int(history_size), 1)
        if saves % max(size // 2, 1) == 0:
            cut_rows = await tx.all(s.cut, (job, size - 1))
            # A slot that is not a number (SQLite sorts text above numbers) leaves history
            # untrimmed this time; it is reported once, and history skips its row.
            cut = None
            if cut_rows:
                name = entry_name(self._tables.results, f"job={job!r} slot={cut_rows[0][0]!r}")
                cut = skip_unreadable(name, "a run's result", lambda: stored_int(cut_rows[0][0]))
            if cut is not None:
                await tx.all(s.trim_results, (job, cut))
                await tx.all(s.trim_claims, (job, cut))
                retention = self.retention_of(job)
                if retention is not None:
                    await tx.all(s.trim_runs, (job, cut, retention))
        if history_ttl_ms is not None:
            ttl = int(history_ttl_ms)
            await tx.all(s.ttl_results, (job, ttl))
            await tx.all(s.ttl_claims, (job, ttl))


def _row_name(table: str, job: str, row: Row) -> str:
    """A history row by table, job, slot and attempt (as read, even if unreadable)."""
    slot, attempt = (row[0], row[5]) if len(row) == 6 else (row[0], row[7])
    return entry_name(table, f"job={job!r} slot={slot!r} attempt={attempt!r}")


def _claim(job: str, row: Row) -> ClaimRecord:
    slot, token, instance, at, manual, attempt = row
    return ClaimRecord(
        job=job,
        slot=stored_int(slot),
        token=str(token),
        instance_id=str(instance),
        at=stored_int(at),
        manual=stored_flag(manual),
        attempt=stored_int(attempt),
    )


def _result(row: Row) -> StoredResult:
    slot, token, instance, status, started, finished, error, attempt, manual, reason = row
    return StoredResult(
        slot=stored_int(slot),
        token=str(token),
        instance_id=str(instance),
        status=str(status),
        started_at=None if started is None else stored_int(started),
        finished_at=None if finished is None else stored_int(finished),
        error=None if error is None else str(error),
        attempt=stored_int(attempt),
        manual=stored_flag(manual),
        reason=None if reason is None else str(reason),
    )
