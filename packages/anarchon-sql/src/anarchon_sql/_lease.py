"""The lease transactions of the SQL backends (docs/leases.md): claim, renew, finish, hand over, retry.

Each step is one transaction (or one of the dialect's one-statement calls,
:class:`~anarchon_sql._statements.DialectCalls`). The generic claim, release
and retry trees are decided by the reference model
(:mod:`anarchon.backend.lease_model`) and written here in the store's tables; the
retry ends the failed attempt and starts the next under the same runner with
the statements a takeover uses, behind the same per-job lock.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from anarchon.backend.foreign import entry_name, stored_data, stored_flag, stored_int
from anarchon.backend.lease_model import HEALED_WARNING, Blocker, decide_claim, decide_release
from anarchon.backend.lease_model import LeaseState as ModelState
from anarchon.errors import BackendError
from anarchon.types import (
    ActiveRun,
    ClaimOutcome,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRetry,
    lease_state_of,
)

from anarchon_sql._chunks import by_job, chunks
from anarchon_sql._client import Row, SqlClient
from anarchon_sql._dialect import StoreSetup
from anarchon_sql._durability import DurableCalls, in_doubt
from anarchon_sql._history import SqlHistory
from anarchon_sql._session import SqlSession
from anarchon_sql._statements import Statements

__all__ = ["SqlLeases", "outcome"]

log = logging.getLogger("anarchon.sql")

T = TypeVar("T")


def _healed(job: str, slot: int) -> None:
    log.warning("anarchon: %s slot %d: %s", job, int(slot), HEALED_WARNING)


def _answers(rows: Sequence[Row], items: Sequence[RunFinish]) -> list[bool]:
    """A finish call's ``(index, answer[, healed])`` rows in item order; healed items logged."""
    by_index: dict[int, bool] = {}
    for row in rows:
        by_index[int(row[0])] = bool(row[1])
        if len(row) > 2 and row[2]:
            f = items[int(row[0]) - 1]
            _healed(f.job, f.slot)
    return [by_index[i + 1] for i in range(len(items))]


def _lease_state(row: Row) -> ModelState:
    """A ``run_row`` (attempt, max, token, status, runner, lease, started, released) for the model.

    Parse it inside ``stored_data`` (:meth:`SqlLeases._run_name`): garbage raises.
    """
    attempt, max_attempts, token, status, runner, lease, started, released = row
    return ModelState(
        attempt=stored_int(attempt),
        token=str(token),
        runner=str(runner),
        status=str(status),
        lease_expires_at=stored_int(lease),
        max_attempts=stored_int(max_attempts),
        started_at=stored_int(started),
        released=stored_flag(released),
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


def _uncertain(c: RunClaim) -> Row:
    """The row of a claim whose commit could not be confirmed on the standby.

    The attempt is not known (the store did not answer): 1, that of a new
    slot's claim. No stored token: ``Backend.claim`` answers it False.
    """
    return ("uncertain", 1, c.instance_id, None, None)


def _uncertain_chunk(chunk: Sequence[RunClaim]) -> list[Row]:
    return [_uncertain(c) for c in chunk]


def outcome(row: Row) -> ClaimOutcome:
    """A claim row ``(kind, attempt, runner, lease_expires_at, stored_token)`` as an outcome."""
    kind, attempt, runner, lease, _token = row
    return ClaimOutcome(
        str(kind),
        int(attempt or 0),
        None if runner is None else str(runner),
        None if lease is None else int(lease),
    )


class SqlLeases:
    """The lease rows of one backend (``<p>runs``) and the history rows a lease step writes."""

    def __init__(
        self,
        session: SqlSession,
        store: StoreSetup,
        statements: Statements,
        history: SqlHistory,
    ) -> None:
        self._session = session
        self._store = store
        self._sql = statements
        self._history = history
        self.durable: DurableCalls | None = None
        """Set by a backend with ``durability="replicated"``: its synchronous calls."""
        # The generic claim transaction honours it; a dialect's statements only if they say so.
        calls = statements.calls
        self.overlap_wait = store.dialect.claims_take_overlap_wait or (
            calls.claim,
            calls.claim_many,
        ) == (
            None,
            None,
        )

    def _run_name(self, job: str, slot: int | None = None) -> str:
        """How a row (or, without ``slot``, the rows of ``job``) of ``<p>runs`` is named."""
        where = f"job={job!r}" if slot is None else f"job={job!r} slot={int(slot)}"
        return entry_name(self._store.tables.runs, where)

    async def now(self) -> int:
        """The database server's clock, in ms since the epoch."""
        rows = await self._session.all(self._sql.now, ())
        return int(rows[0][0])

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int, size: int) -> list[bool]:
        """``heartbeat()`` for each run: one statement or transaction per chunk."""
        client = await self._session.ready()
        calls = self._sql.calls
        durable = self.durable
        answers: list[bool] = []
        for chunk in chunks(runs, size):
            statement = calls.heartbeat_many if durable is None else durable.heartbeat_many
            if statement is not None:
                params = (
                    int(lease_ms),
                    [r.job for r in chunk],
                    [int(r.slot) for r in chunk],
                    [r.token for r in chunk],
                )
                rows = await self._session.call(client, statement, params)
                renewed = {int(i): bool(ok) for i, ok in rows}
                answers += [renewed[i + 1] for i in range(len(chunk))]
            else:
                answers += await self._session.transaction(
                    client,
                    functools.partial(
                        self._heartbeat_chunk_tx, chunk=chunk, lease_ms=int(lease_ms)
                    ),
                )
        return answers

    async def finish_many(self, finishes: Sequence[RunFinish], size: int) -> list[bool]:
        """``finish()`` for each item: one statement or transaction per chunk."""
        client = await self._session.ready()
        calls = self._sql.calls
        durable = self.durable
        answers: list[bool] = []
        for chunk in chunks(finishes, size):
            statement = calls.finish_many if durable is None else durable.finish_many
            if statement is not None:
                rows = await self._session.call(client, statement, _finish_params(chunk))
                answers += _answers(rows, chunk)
            else:
                answers += await self._session.transaction(
                    client, functools.partial(self._finish_chunk_tx, chunk=chunk)
                )
        return answers

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite], size: int
    ) -> list[bool]:
        """Each finish and, where it answered True, its result save: one call or transaction a chunk."""
        client = await self._session.ready()
        calls = self._sql.calls
        durable = self.durable
        answers: list[bool] = []
        for first in range(0, len(finishes), size):
            chunk = finishes[first : first + size]
            results = writes[first : first + size]
            statement = calls.finish_save_many if durable is None else durable.finish_save_many
            if statement is not None:
                params = (*_finish_params(chunk), *self._history.save_params(results))
                rows = await self._session.call(client, statement, params)
                answers += _answers(rows, chunk)
            else:
                answers += await self._session.transaction(
                    client,
                    functools.partial(self._finish_save_chunk_tx, chunk=chunk, writes=results),
                )
        return answers

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to server time + ``lease_ms`` if ``token`` still owns the run.

        Replicated: the synchronous batch call with one item.
        """
        if self.durable is not None:
            return (await self.heartbeat_many([RunKey(job, int(slot), token)], lease_ms, 1))[0]
        client = await self._session.ready()
        rows = await client.all(self._sql.heartbeat, (int(lease_ms), job, int(slot), token))
        return bool(rows)

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Finish the run if ``token`` owns it; True again for a retried finish.

        A run with no state is written finished by ``token`` (True, a WARNING).
        The dialect's batch call with one item where it has one (it takes the
        job's lock, as a claim does), else one transaction.
        """
        finish = RunFinish(job, int(slot), token, status, error)
        if self.durable is not None or self._sql.calls.finish_many is not None:
            return (await self.finish_many([finish], 1))[0]
        client = await self._session.ready()
        return await self._session.transaction(client, lambda tx: self._finish_tx(tx, finish))

    async def _transaction(self, client: SqlClient, fn: Callable[[SqlClient], Awaitable[T]]) -> T:
        """A generic lease transaction; replicated, its first statement makes the commit synchronous."""
        durable = self.durable
        if durable is None:
            return await self._session.transaction(client, fn)

        async def body(tx: SqlClient) -> T:
            await tx.all(durable.prologue, ())
            return await fn(tx)

        return await self._session.transaction(client, body)

    async def release(self, job: str, slot: int, token: str) -> bool:
        """The hand-over of ``token``'s lease, in one transaction."""
        client = await self._session.ready()
        return await self._transaction(
            client, lambda tx: self._release_tx(tx, job, int(slot), token)
        )

    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End a failed attempt and start the next under the same runner, in one transaction.

        Replicated: a retry whose commit is in doubt is confirmed by running it
        again (it then finds its new token and writes it again, synchronously),
        or answered ``uncertain``.
        """
        client = await self._session.ready()
        if self.durable is None:
            return await self._transaction(client, lambda tx: self._retry_tx(tx, retry))
        return await self._confirmed(
            lambda: self._transaction(client, lambda tx: self._retry_tx(tx, retry)),
            lambda: ClaimOutcome("uncertain", 0, retry.instance_id, None),
            f"{retry.job} slot {int(retry.slot)}: retry",
        )

    async def _confirmed(
        self, call: Callable[[], Awaitable[T]], uncertain: Callable[[], T], what: str
    ) -> T:
        """``call()``; if its fate is in doubt, ``call()`` again to confirm it, else ``uncertain()``.

        Every call of a replicated backend commits synchronously and writes its
        own row, so an answer that arrives is confirmed on the standby. A
        timeout or a dropped connection leaves the first commit in doubt: it
        may be on the primary only. The second call (a new transaction) finds
        the first one's rows if they committed, writes them again and waits
        for the standby, which then holds the first commit too (WAL order).
        If the second call fails as well, nothing is confirmed: ``uncertain``.
        """
        try:
            return await call()
        except Exception as error:
            if not in_doubt(error):
                raise
            log.warning(
                "anarchon: %s: the commit is in doubt (%s); confirming it with a new transaction",
                what,
                error,
            )
        try:
            return await call()
        except Exception as error:
            if not in_doubt(error):
                raise
            log.warning(
                "anarchon: %s: not confirmed on the standby (%s); answered uncertain", what, error
            )
            return uncertain()

    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)`` (one plain read)."""
        client = await self._session.ready()
        rows = await client.all(self._sql.lease_state, (job, int(slot)))
        if not rows:
            return lease_state_of(token, None, False, False)
        stored, status, released = rows[0]
        with stored_data(self._run_name(job, slot), "a run's state"):
            return lease_state_of(
                token, str(stored), str(status) == "running", stored_flag(released)
            )

    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        client = await self._session.ready()
        rows = await client.all(self._sql.active, (job,))
        with stored_data(self._run_name(job), "run state"):
            return [
                ActiveRun(
                    slot=stored_int(slot),
                    attempt=stored_int(attempt),
                    runner=str(runner),
                    lease_expires_at=stored_int(lease),
                    live=stored_int(lease) > stored_int(now),
                    token=str(token),
                )
                for now, slot, attempt, runner, lease, token in rows
            ]

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
        ) + ((bool(c.overlap_wait),) if self._store.dialect.claims_take_overlap_wait else ())

    async def claim_row(self, c: RunClaim) -> Row:
        """``(kind, attempt, runner, lease_expires_at, stored_token)`` of one claim.

        Replicated: the synchronous claim, confirmed when in doubt, else an
        ``uncertain`` row (see :meth:`_confirmed`).
        """
        client = await self._session.ready()
        durable = self.durable
        if durable is not None:

            async def once() -> Row:
                rows = await self._session.call(client, durable.claim, self._claim_params(c))
                return tuple(rows[0])

            return await self._confirmed(
                once, lambda: _uncertain(c), f"{c.job} slot {int(c.slot)}: claim"
            )
        claim = self._sql.calls.claim
        if claim is not None:
            rows = await self._session.call(client, claim, self._claim_params(c))
            return tuple(rows[0])
        return await self._session.transaction(client, lambda tx: self._claim_tx(tx, c))

    async def claim_rows(self, claims: Sequence[RunClaim], size: int) -> list[Row]:
        """``claim_row`` of each claim, one statement or transaction per chunk of ``size``."""
        client = await self._session.ready()
        out: list[Row] = []
        durable = self.durable
        claim_many = self._sql.calls.claim_many if durable is None else durable.claim_many
        for chunk in chunks(claims, size):
            if durable is not None:
                out += await self._confirmed(
                    functools.partial(self._claim_chunk_call, client, durable.claim_many, chunk),
                    functools.partial(_uncertain_chunk, chunk),
                    f"a chunk of {len(chunk)} claims",
                )
            elif claim_many is not None:
                out += await self._claim_chunk_call(client, claim_many, chunk)
            else:
                out += await self._session.transaction(
                    client, functools.partial(self._claim_chunk_tx, chunk=chunk)
                )
        return out

    async def _claim_chunk_call(
        self, client: SqlClient, claim_many: str, chunk: Sequence[RunClaim]
    ) -> list[Row]:
        """One call of the dialect's batch claim statement: the chunk's rows in item order."""
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
        if self._store.dialect.claims_take_overlap_wait:
            params += ([bool(c.overlap_wait) for c in chunk],)
        rows = await self._session.call(client, claim_many, params)
        by_index = {int(row[0]): tuple(row[1:]) for row in rows}
        if len(by_index) != len(chunk):
            raise BackendError(
                f"{self._store.dialect.name} at {self._store.describe()}: the batch claim answered"
                f" {len(by_index)} of {len(chunk)} items"
            )
        return [by_index[i + 1] for i in range(len(chunk))]

    async def _claim_chunk_tx(self, tx: SqlClient, chunk: Sequence[RunClaim]) -> list[Row]:
        claim = self._sql.calls.claim
        rows: list[Row] = [()] * len(chunk)
        for i in by_job([c.job for c in chunk]):
            c = chunk[i]
            if claim is not None:
                rows[i] = tuple((await tx.all(claim, self._claim_params(c)))[0])
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
        """``finish()``'s statements: True if ``f.token`` finished the run (now or before).

        A run with no state at all is written finished by ``f.token`` (healed).
        """
        s = self._sql
        if await tx.all(s.finish, (f.status, f.error, f.job, int(f.slot), f.token)):
            return True
        if await tx.all(s.heal_finish, (f.job, int(f.slot), f.token, f.status, f.error)):
            _healed(f.job, f.slot)
            return True
        rows = await tx.all(s.state_of, (f.job, int(f.slot), f.token))
        return bool(rows) and rows[0][0] == "finished"

    async def _finish_save_chunk_tx(
        self, tx: SqlClient, chunk: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool]:
        answers = [False] * len(chunk)
        for i in by_job([f.job for f in chunk]):
            answers[i] = await self._finish_tx(tx, chunk[i])
            if answers[i]:
                w = writes[i]
                await self._history.save_tx(
                    tx, w.job, w.result, w.history_size, w.history_ttl_ms, finished=True
                )
        return answers

    async def _claim_tx(self, tx: SqlClient, c: RunClaim) -> Row:
        """The claim tree (docs/leases.md) inside one transaction (generic path).

        The reference model (:func:`anarchon.backend.lease_model.decide_claim`)
        decides; this writes what it says, in this store's tables.
        """
        s = self._sql
        await self._store.dialect.serialize(tx, self._store.tables.prefix + "job:" + c.job)
        now = int((await tx.all(s.now, ()))[0][0])
        rows = await tx.all(s.run_row, (c.job, c.slot))
        with stored_data(self._run_name(c.job, c.slot), "a run's state"):
            prior = _lease_state(rows[0]) if rows else None
        blocker = None
        if prior is None and not c.overlap and c.create:
            live = await tx.all(s.live_older, (c.job, c.slot, now))
            if live:
                with stored_data(self._run_name(c.job), "run state"):
                    blocker = Blocker(str(live[0][0]), stored_int(live[0][1]))
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
        """A hand-over, decided by :func:`anarchon.backend.lease_model.decide_release` (generic path)."""
        rows = await tx.all(self._sql.release_row, (job, slot, token))
        if not rows:  # no run, or another token holds it
            return False
        now, attempt, max_attempts, runner, started, status, released, end_reason = rows[0]
        now = int(now)
        with stored_data(self._run_name(job, slot), "a run's state"):
            prior = ModelState(
                attempt=stored_int(attempt),
                token=token,
                runner=str(runner),
                status=str(status),
                lease_expires_at=now,  # not read by the release decision
                max_attempts=stored_int(max_attempts),
                started_at=stored_int(started),
                released=stored_flag(released),
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

    async def _retry_tx(self, tx: SqlClient, r: RunRetry) -> ClaimOutcome:
        """The retry tree of docs/leases.md inside the transaction ``tx``."""
        s = self._sql
        await self._store.dialect.serialize(tx, self._store.tables.prefix + "job:" + r.job)
        now = int((await tx.all(s.now, ()))[0][0])
        rows = await tx.all(s.run_row, (r.job, r.slot))
        if not rows:
            return ClaimOutcome("done")
        attempt, _max, token, status, runner, lease, _started, released = rows[0]
        with stored_data(self._run_name(r.job, r.slot), "a run's state"):
            attempt, lease, released = stored_int(attempt), stored_int(lease), stored_flag(released)
        runner = None if runner is None else str(runner)
        if status == "running" and token == r.new_token and not released:
            if self.durable is not None:  # written again: the synchronous commit confirms it
                await tx.all(s.extend_lease, (lease, r.job, r.slot))
            return ClaimOutcome("won", attempt, runner, lease)  # a repeated call
        if status != "running" or token != r.token or bool(released):
            kind = "running" if status == "running" and token != r.token else "done"
            return ClaimOutcome(kind, attempt, runner, lease)
        if attempt >= r.max_attempts:
            return ClaimOutcome("done", attempt, runner, lease)
        new_lease = now + r.lease_ms
        await tx.all(
            s.take_over,
            (
                attempt + 1,
                r.new_token,
                r.instance_id,
                new_lease,
                r.max_attempts,
                now,
                r.job,
                r.slot,
            ),
        )
        await tx.all(
            s.insert_claim, (r.job, r.new_token, r.slot, attempt + 1, r.instance_id, now, 0)
        )
        return ClaimOutcome("won", attempt + 1, r.instance_id, new_lease)
