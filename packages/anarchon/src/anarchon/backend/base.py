"""The store interface: :class:`Backend` for claims and history, :class:`RunStore` for leases.

Compatibility promises (docs/extending.md): members added later are optional, with a
default here and a fallback in the scheduler; a required member only comes
with a major version. Errors a backend raises reach the user unchanged.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Sequence
from typing import Any, ClassVar

from anarchon.backend.batching import job_of, per_item
from anarchon.errors import (
    AnarchonError,
    BackendUnavailableError,
    InvalidConfigError,
    UnsupportedError,
)
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import (
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    JobLimits,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRecord,
    RunRetry,
    StoredResult,
)

__all__ = ["STORE_FORMAT", "Backend", "RunStore"]

STORE_FORMAT = 1
"""The store format this version writes and reads; a newer one in a store is refused."""


class RunStore(abc.ABC):
    """Leases per ``(job, slot)``, computed with the store's clock (docs/leases.md).

    Every method is one atomic step in the store.
    """

    @abc.abstractmethod
    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree of docs/leases.md and return its outcome.

        A store with ``durability="replicated"`` answers ``uncertain`` for a
        claim it won but could not confirm on its replicas (it still holds
        the lease for ``claim.token``).
        """

    @abc.abstractmethod
    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to store time + ``lease_ms`` if ``token`` still owns it."""

    @abc.abstractmethod
    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Mark the run finished with ``status``, only if ``token`` still owns it.

        A run with no state at all (a failover lost its claim) is written
        finished with ``token`` and the answer is True, with a WARNING; a
        state held by another token answers False; a repeated finish of the
        same token answers True (:func:`anarchon.backend.lease_model.decide_finish`).
        """

    @abc.abstractmethod
    async def release(self, job: str, slot: int, token: str) -> bool:
        """End a live lease now so a backup takes over; on the last attempt mark it interrupted."""

    @abc.abstractmethod
    async def now_ms(self) -> int:
        """The store's clock, in ms since the epoch."""

    @abc.abstractmethod
    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job`` and whether each lease is live."""

    # Optional members ---------------------------------------------------

    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)`` (one read, no writes).

        Asked after a heartbeat was refused, so the scheduler can tell "another
        instance owns the run" from "the store has no state for this run".
        Default, for stores written before this member existed: ``unknown``.
        """
        return "unknown"

    overlap_wait: bool = False
    """True when the store honours :attr:`RunClaim.overlap_wait` (an ``overlap``
    answer then writes nothing). The default, for stores written before this
    member existed: False, and the scheduler records an overlap skip at the
    first ``overlap`` answer, as before."""

    native_retry: ClassVar[bool] = False
    """True when :meth:`retry` is one atomic step in the store (not the fallback)."""

    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End attempt ``retry.token`` after a handler error and start the next attempt.

        In one atomic step, if ``retry.token`` still owns the running run and
        fewer than ``retry.max_attempts`` attempts have started: the attempt
        number goes up by one, the run belongs to ``retry.new_token`` and
        ``retry.instance_id`` with a lease of store time + ``retry.lease_ms``,
        a claim record of the new attempt is written, and the answer is
        ``won``. A repeated call (``new_token`` already owns it) answers
        ``won`` again. Otherwise: ``done`` (the run ended, or no attempts are
        left) or ``running`` (another instance owns it). The scheduler then
        stores the failed attempt's result itself (docs/leases.md, "Retries").

        Default, for lease stores written before this member existed:
        ``release()`` then a ``claim()`` with ``create=False`` and the new
        token: two steps, so a backup may win the next attempt in between,
        which the lease rules allow.
        """
        released = await self.release(retry.job, retry.slot, retry.token)
        if not released:
            return ClaimOutcome("done")
        return await self.claim(
            RunClaim(
                job=retry.job,
                slot=retry.slot,
                token=retry.new_token,
                instance_id=retry.instance_id,
                lease_ms=retry.lease_ms,
                max_attempts=retry.max_attempts,
                overlap=True,
                deadline_ms=None,
                create=False,
                history_size=retry.history_size,
                history_ttl_ms=retry.history_ttl_ms,
            )
        )

    # Optional batch members (docs/run-store.md, "Batch members") ----------
    # Each answers exactly what the same items answer one by one, in order.
    # Each item is atomic on its own; the batch need not be. A failed batch is
    # retried whole with the same tokens, so every item must be repeat-safe.

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """``claim()`` for each item. Default: the single calls under bounded concurrency."""
        return await per_item(self.claim, claims, key=job_of)

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """``heartbeat()`` for each run. Default: the single calls under bounded concurrency."""
        return await per_item(
            lambda run: self.heartbeat(run.job, run.slot, run.token, lease_ms), runs, key=job_of
        )

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """``finish()`` for each item. Default: the single calls under bounded concurrency."""
        return await per_item(
            lambda f: self.finish(f.job, f.slot, f.token, f.status, f.error),
            finishes,
            key=job_of,
        )

    async def release_many(self, runs: Sequence[RunKey]) -> list[bool]:
        """``release()`` for each run. Default: the single calls under bounded concurrency."""
        return await per_item(lambda r: self.release(r.job, r.slot, r.token), runs, key=job_of)

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool] | None:
        """Finish each run and, for each one finished by its token, store its result, in one step.

        ``writes[i]`` is the result of ``finishes[i]``. Per item this is
        ``finish()`` followed, if it answered True, by ``Backend.save_result``
        of ``writes[i]``; each item is atomic on its own (a crash never leaves
        a finished run without its result), a batch need not be, and a
        retried batch (same tokens, same results) changes nothing more.
        Answers per item as ``finish()`` does. Default: None, meaning "not
        offered": the scheduler calls ``finish_many`` and then
        ``Backend.save_results`` (docs/run-store.md, "Batch members").
        """
        return None

    # Optional fencing member (docs/leases.md, "Fencing") -----------------

    async def still_owner(self, run: RunKey, lease_ms: int) -> bool:
        """True if ``run.token`` holds a live lease on its run in the store now.

        Default: one heartbeat (which also renews the lease by ``lease_ms``):
        its answer is exactly whether the token still owns a live lease. A
        backend may override it with a read that renews nothing.
        """
        answers = await self.heartbeat_many([run], lease_ms)
        return bool(answers) and answers[0] is True


class Backend(abc.ABC):
    """A store that decides which instance runs each ``(job, slot)``.

    Subclasses implement the abstract methods; optional members have working
    defaults so a third-party backend keeps working when members are added.
    """

    name: ClassVar[str] = "backend"
    dedupe_window_ms: float = math.inf
    """How long the store remembers a claimed run (``math.inf``: forever)."""

    runs: RunStore | None = None
    """The lease store, on lease backends."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Backend:
        """Build the backend from a URL and its query options (entry-point resolution)."""
        raise InvalidConfigError(f"backend {cls.__name__} cannot be built from a URL")

    @abc.abstractmethod
    async def init(self) -> None:
        """Connect and check the server; called by ``start()`` and before reads. Idempotent."""

    @abc.abstractmethod
    async def prepare_job(self, job: str, history_size: int) -> None:
        """One-time per-job setup (table, stream, keys)."""

    @abc.abstractmethod
    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one instance per ``(job, slot)``; repeat-safe with the same token."""

    @abc.abstractmethod
    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Record a ``run_now()`` (no de-duplication); return the slot used if the store chose another."""

    @abc.abstractmethod
    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Store how a run ended."""

    @abc.abstractmethod
    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of all instances, newest first (use :func:`anarchon.build_history`)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close only what the backend opened itself."""

    # Optional members -------------------------------------------------

    async def history_many(self, jobs: Sequence[str], limit: int) -> dict[str, list[RunRecord]]:
        """``history(job, limit)`` of each of ``jobs``, by job (every job given is a key).

        For reading a whole fleet (``anarchon history`` without a job, the
        fleet checks of :mod:`anarchon.testing.fleet`). Default: ``history``
        of each job, a few at a time; a store that can read many jobs in one
        pass overrides it (docs/extending.md, "The members").
        """
        names = list(dict.fromkeys(jobs))
        found = await per_item(lambda job: self.history(job, limit), names, limit=16)
        return dict(zip(names, found, strict=True))

    def check_job(self, limits: JobLimits) -> None:
        """Raise to refuse a job this backend cannot run safely. Default: accept."""
        return None

    def clone(self) -> Backend | None:
        """A backend on the same store for the lease keeper thread, or None (docs/extending.md).

        The scheduler renews leases from a thread with its own event loop, so
        a handler that blocks the scheduler's loop cannot lose its lease. That
        thread needs a backend of its own: return a new, unconnected instance
        with the same configuration (its own connections; the scheduler calls
        ``init()`` and ``close()`` on it in that thread), or ``self`` if this
        instance may be used from any thread and loop at once. Default: None,
        and the scheduler builds one from the URL it was given, if any; a
        backend passed in as an object then keeps its heartbeats on the
        scheduler's loop.
        """
        return None

    async def record_claim(self, input: ClaimInput) -> None:
        """Called after a won claim when ``claim()`` is not itself a history record."""
        return None

    async def now_ms(self) -> int | None:
        """The store's clock in ms, or None when the store has none (the local clock is used)."""
        return None

    def is_transient(self, error: BaseException) -> bool:
        """True when ``error`` may pass if the same call is retried (docs/concepts.md, "Errors").

        Only transient errors are retried with backoff; every other error
        reaches the caller. Default: connection loss, timeouts and
        :class:`~anarchon.BackendUnavailableError`; a backend adds its driver's
        transient errors (server loading or busy, a fail-over in progress).
        """
        if isinstance(error, BackendUnavailableError):
            return True
        if isinstance(error, AnarchonError):
            return False
        return isinstance(error, (ConnectionError, TimeoutError, OSError))

    # Optional fleet members (docs/fleet.md, "Fleet registry") --------------
    # A backend without them still schedules; the fleet view, drift warnings
    # and pause/resume/skip then raise UnsupportedError naming the backend.

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Record (or refresh) what one instance declares; entries expire ``ttl_ms`` after now."""
        raise UnsupportedError(f"backend {self.name!r} has no fleet registry")

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        raise UnsupportedError(f"backend {self.name!r} has no fleet registry")

    async def set_control(self, control: JobControl) -> None:
        """Store the fleet-wide control of ``control.job`` (replacing the old one)."""
        raise UnsupportedError(f"backend {self.name!r} has no fleet-wide controls")

    async def controls(self) -> dict[str, JobControl]:
        """The fleet-wide controls of every job that has one."""
        raise UnsupportedError(f"backend {self.name!r} has no fleet-wide controls")

    # Membership (docs/fleet.md, "Membership"): one record per live instance.
    # Input is checked with anarchon.backend.membership before the store is touched.

    async def refresh_member(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Upsert this instance's record and return every live member, sorted by instance id.

        The record gets ``seen_at`` = store time now and ``expires_at`` = store
        time now + ``ttl_ms``; expired records are dropped; the answer holds
        every unexpired record, this one included. One round trip where the
        store allows it; its cost grows with the number of members, never
        with the number of jobs. ``roster`` is stored as given (at most
        :data:`~anarchon.backend.membership.MAX_ROSTER_CHARS` characters).
        Bad input raises ``InvalidConfigError``.
        """
        raise UnsupportedError(f"backend {self.name!r} has no fleet membership")

    async def leave_member(self, instance_id: str) -> None:
        """Remove this instance's record now (a stopping instance); idempotent."""
        raise UnsupportedError(f"backend {self.name!r} has no fleet membership")

    async def members(self) -> list[Member]:
        """Every live member, sorted by instance id (a read: nothing is written or dropped)."""
        raise UnsupportedError(f"backend {self.name!r} has no fleet membership")

    # Optional batch members (docs/run-store.md, "Batch members") ----------

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item. Default: the single calls under bounded concurrency."""
        return await per_item(self.claim, inputs, key=job_of)

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """``record_claim()`` for each won claim. Default: the single calls."""
        await per_item(self.record_claim, inputs, key=job_of)

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item. Default: the single calls under bounded concurrency."""
        await per_item(
            lambda w: self.save_result(w.job, w.result, w.history_size, w.history_ttl_ms),
            writes,
            key=job_of,
        )
