"""``SqlRunStore``: the ``RunStore`` of the SQL backends, over their lease transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from anarchon.backend import RunStore
from anarchon.errors import AnarchonError
from anarchon.types import (
    ActiveRun,
    ClaimOutcome,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRetry,
)

from anarchon_sql._calls import store_call
from anarchon_sql._lease import SqlLeases, outcome

__all__ = ["LeaseBackend", "SqlRunStore"]


class LeaseBackend(Protocol):
    """What a :class:`SqlRunStore` needs of its :class:`~anarchon_sql.SqlBackend`."""

    batch_size: int
    _leases: SqlLeases

    async def translate_error(self, error: Exception) -> AnarchonError:
        """The coded error a driver error is raised as."""
        ...


class SqlRunStore(RunStore):
    """The leases of a :class:`SqlBackend` (docs/leases.md); every step is one transaction.

    Lease times are computed with the database server's clock
    (``dialect.now_ms``), never with an instance's clock. Driver errors are
    raised as ``BackendUnavailableError`` when transient, else as
    ``ForeignDataError`` or ``BackendError`` (see :meth:`SqlBackend.translate_error`).
    """

    def __init__(self, backend: LeaseBackend) -> None:
        self._backend = backend
        # The one read of the backend's internals: SqlRunStore(backend) is the documented
        # constructor, and the lease transactions are the backend's.
        self._leases = backend._leases
        self.overlap_wait = self._leases.overlap_wait

    def _sql_backend(self) -> LeaseBackend:
        return self._backend

    @store_call
    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree (docs/leases.md) in one transaction and return its outcome."""
        return outcome(await self._leases.claim_row(claim))

    @store_call
    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """``claim()`` for each item: one statement or transaction per chunk of ``batch_size``."""
        rows = await self._leases.claim_rows(claims, self._backend.batch_size)
        return [outcome(row) for row in rows]

    @store_call
    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """``heartbeat()`` for each run: one statement or transaction per chunk."""
        return await self._leases.heartbeat_many(runs, lease_ms, self._backend.batch_size)

    @store_call
    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """``finish()`` for each item: one statement or transaction per chunk."""
        return await self._leases.finish_many(finishes, self._backend.batch_size)

    @store_call
    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool]:
        """``finish()`` for each item and, if it answered True, ``save_result()`` of its write.

        One statement (PostgreSQL) or one transaction (SQLite) per chunk, so a
        finished run and its result are committed together.
        """
        return await self._leases.finish_and_save_many(finishes, writes, self._backend.batch_size)

    @store_call
    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to server time + ``lease_ms`` if ``token`` still owns the run."""
        return await self._leases.heartbeat(job, slot, token, lease_ms)

    @store_call
    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Mark the run finished with ``status`` if ``token`` still owns it (state only).

        The scheduler stores the result with :meth:`SqlBackend.save_result`
        after a successful ``finish``. A retried finish is answered True again.
        """
        return await self._leases.finish(job, slot, token, status, error)

    @store_call
    async def release(self, job: str, slot: int, token: str) -> bool:
        """End ``token``'s lease now so a backup takes over at its next re-check (hand-over).

        The released attempt is recorded ``interrupted`` (reason
        ``handed_over``); on the last attempt the run is marked interrupted,
        so no backup starts it again. A retried release is answered True again.
        """
        return await self._leases.release(job, slot, token)

    native_retry = True

    @store_call
    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End a failed attempt and start the next under the same runner, in one transaction."""
        return await self._leases.retry(retry)

    @store_call
    async def now_ms(self) -> int:
        """The database server's clock, in ms since the epoch."""
        return await self._leases.now()

    @store_call
    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)`` (one plain read)."""
        return await self._leases.lease_state(job, slot, token)

    @store_call
    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        return await self._leases.active(job)
