"""The claim batcher: every slot due in one wake-up goes to the store in chunks of ``claim_many``.

On lease backends each chunk is one ``RunStore.claim_many`` call; otherwise
one ``Backend.claim_many`` call, then one ``record_claims`` for the winners.
Only winners get a handler task (:meth:`ClaimBatcher.on_won`); lease losers
whose runner is alive become backups (:meth:`ClaimBatcher.on_backup`), whose
re-checks come back here as ``create=False`` claims, batched the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from anarchon._scheduler.leases import short_lease_ms
from anarchon._scheduler.overlap_wait import OverlapWait
from anarchon._scheduler.releases import release_runs
from anarchon._scheduler.run_state import Phase, Run
from anarchon._scheduler.skip_log import SkipLog
from anarchon._scheduler.store_batches import NotSentError, StoreBatches, chunks
from anarchon._scheduler.store_retry import GAVE_UP, StorePolicy
from anarchon._scheduler.tasks import TaskSet
from anarchon.clock import Clock
from anarchon.errors import BackendError
from anarchon.events import NO_EVENTS, EventBus, job_zone
from anarchon.types import ClaimInput, ClaimOutcome, RunClaim

__all__ = ["ClaimBatcher"]

Won = Callable[[Run, int, float], None]
"""``on_won(run, attempt, lease_until)``: start the handler (``lease_until`` is monotonic)."""
Backup = Callable[[Run, "int | None"], None]
"""``on_backup(run, lease_expires_at)``: watch the run another instance holds."""

EARLY_ALLOWANCE_MS = 5_000
"""How far beyond a job's jitter a slot may lie ahead of the store's clock before the store answers ``early``."""


class ClaimBatcher:
    """Sends claims in chunks and dispatches the outcomes."""

    events: EventBus = NO_EVENTS
    """Where ``skipped`` (overlap, late) goes (set by the scheduler)."""

    def __init__(
        self,
        *,
        instance_id: str,
        lease_ms: int,
        batches: StoreBatches,
        policy: StorePolicy,
        clock: Clock,
        tasks: TaskSet,
        log: logging.Logger,
        on_won: Won,
        on_backup: Backup,
        local_lease_ms: int | None = None,
        short_leases: bool = False,
        before_claims: Callable[[], Awaitable[None]] | None = None,
        on_early: Callable[[], None] | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.lease_ms = lease_ms
        self.local_lease_s = (lease_ms if local_lease_ms is None else local_lease_ms) / 1000
        """How long a won lease lasts on this instance's clock (the lease minus the safety margin)."""
        self.short_leases = short_leases
        """True: a slot claimed ahead of its fire time gets a short lease (:func:`short_lease_ms`)."""
        self.batches = batches
        self.policy = policy
        self.clock = clock
        self.tasks = tasks
        self.log = log
        self.on_won = on_won
        self.on_backup = on_backup
        self.before_claims = before_claims
        """Awaited before each lease claim chunk (the result batcher's ``landed``)."""
        self.on_early = on_early
        """Called when the store answered ``early``: re-sync the store clock."""
        self.leases = batches.runs is not None
        self.stopping = False
        self._skips = SkipLog(clock, log)
        self._early_logged = False
        self._retrying: set[asyncio.Task[object]] = set()
        self.waiter: OverlapWait | None = None
        self.own_overlap: Callable[[str], None] | None = None
        """Called with a job whose claim was answered ``overlap`` by a run of this instance (set
        by the scheduler: the run's finish may have been lost in a failover)."""
        """Re-checks slots answered ``overlap`` (set by the scheduler if the store can wait)."""

    def cancel_retries(self) -> None:
        """Stopping: end every claim waiting out a store outage now (its slot is left to others)."""
        for task in list(self._retrying):
            task.cancel()
        if self.waiter is not None:
            self.waiter.cancel()

    def submit(self, runs: Sequence[Run]) -> None:
        """Claim ``runs`` now: one task per chunk, none per run."""
        if not runs:
            return
        work = self._lease_chunk if self.leases else self._plain_chunk
        for chunk in chunks(runs):
            self.tasks.spawn(work(chunk), "anarchon-claims")

    # Lease backends ----------------------------------------------------

    def _lease_of(self, run: Run, now_ms: int) -> tuple[int, float]:
        """``(lease ms, local lease s)`` of ``run``'s claim: short when claimed ahead (the
        run's ``short`` flag says which)."""
        if self.short_leases and run.fire_at > now_ms:
            short = short_lease_ms(run.fire_at - now_ms, self.lease_ms)
            if short is not None:
                run.short = True
                return short[0], short[1] / 1000
        run.short = False
        return self.lease_ms, self.local_lease_s

    def _request(self, run: Run, lease_ms: int) -> RunClaim:
        job = run.job
        return RunClaim(
            job.name,
            run.slot,
            run.token,
            self.instance_id,
            lease_ms,
            job.attempt_budget,
            job.overlap,
            run.deadline_ms,
            not run.recheck,
            job.history_size,
            job.history_ttl_ms,
            job.jitter_ms + EARLY_ALLOWANCE_MS,
            run.wait_overlap and self.waiter is not None,
        )

    async def _lease_chunk(self, runs: Sequence[Run]) -> None:
        batches = self.batches
        if self.before_claims is not None:
            await self.before_claims()
        if self.stopping:
            self._not_sent(runs)
            return
        now_ms = self.policy.now_ms()
        leases = [self._lease_of(run, now_ms) for run in runs]
        requests = [self._request(run, lease[0]) for run, lease in zip(runs, leases, strict=True)]
        local = {id(run): lease[1] for run, lease in zip(runs, leases, strict=True)}
        sent = self.clock.monotonic()
        deadline = max(run.deadline_ms for run in runs)
        try:  # the common case without the retry wrapper: this is the hot path
            outcomes = await self.policy.bounded(
                batches.claim_many(requests, self._is_stopping), deadline
            )
        except asyncio.CancelledError:
            raise
        except NotSentError:
            self._not_sent(runs)
            return
        except Exception as error:
            if not self.policy.is_transient(error):
                self._refused(runs, error)
                return
            self.policy.note_outage(error)
            retried = await self._retry(runs, requests)
            if retried is None:
                return
            runs, requests, outcomes, sent = retried
        else:
            if self.policy.outage:
                self.policy.recovered()
        if len(outcomes) != len(runs):
            self._refused(runs, _count_error(len(outcomes), len(runs)))
            return
        latency_ms = (self.clock.monotonic() - sent) * 1000
        released: list[Run] = []
        early = 0
        for run, outcome in zip(runs, outcomes):  # noqa: B905 - lengths checked above
            kind = outcome.kind
            if kind == "won" or kind == "uncertain":  # uncertain: held, not confirmed durable
                run.uncertain = kind == "uncertain"
                if self.stopping:  # won while stopping: handed over at once (released)
                    run.attempt = outcome.attempt
                    released.append(run)
                else:
                    run.claim_latency_ms = latency_ms
                    self.on_won(run, outcome.attempt, sent + local[id(run)])
            elif kind == "running" and not self.stopping:
                self.on_backup(run, outcome.lease_expires_at)
            elif kind == "overlap" and run.wait_overlap and self.waiter is not None:
                if outcome.runner == self.instance_id and self.own_overlap is not None:
                    self.own_overlap(run.job.name)
                self.waiter.add(run)  # nothing was written: claimed again (overlap_wait.py)
            else:
                if kind == "overlap" or (kind == "late" and not run.recheck):
                    self._skipped(run, kind)
                elif kind == "early":
                    early += 1
                run.phase = (
                    Phase.ENDED
                )  # done, none, late, early, or a kind this version does not know
        if early:
            self._early(runs[0], early)
        if released:  # together, not one round trip after another (a wave won during stop)
            await self._release(released)

    def _early(self, run: Run, count: int) -> None:
        """The store refused slots ahead of its clock: log once, re-sync the clock."""
        if not self._early_logged:
            self._early_logged = True
            self.log.warning(
                "anarchon: the store refused %d claim(s) as early (e.g. %s slot %d): this"
                " instance's estimate of the store clock runs ahead; re-syncing it",
                count,
                run.job.name,
                run.slot,
            )
        if self.on_early is not None:
            self.on_early()

    async def _retry(
        self, runs: Sequence[Run], requests: list[RunClaim]
    ) -> tuple[Sequence[Run], list[RunClaim], list[ClaimOutcome], float] | None:
        """Retry a failed chunk (same tokens) while each claim's deadline lasts."""
        sent = 0.0
        current: list[int] = []

        async def attempt() -> list[ClaimOutcome]:
            nonlocal sent, current
            now = self.policy.now_ms()
            current = [i for i, run in enumerate(runs) if now <= run.deadline_ms]
            sent = self.clock.monotonic()
            return await self.batches.claim_many([requests[i] for i in current], self._is_stopping)

        deadline = max(run.deadline_ms for run in runs)
        task = asyncio.current_task()
        if task is not None:
            self._retrying.add(task)
        try:
            outcomes = await self.policy.call(attempt, deadline, gated=False)
        except asyncio.CancelledError:
            if self.stopping:
                self._not_sent(runs)
                return None
            raise
        except NotSentError:
            self._not_sent(runs)
            return None
        except Exception as error:
            self._refused(runs, error)
            return None
        finally:
            if task is not None:
                self._retrying.discard(task)
        if outcomes is GAVE_UP:
            for run in runs:
                run.phase = Phase.ENDED
            return None
        kept = set(current)
        for i, run in enumerate(runs):
            if i not in kept:
                run.phase = Phase.ENDED
        return [runs[i] for i in current], [requests[i] for i in current], outcomes, sent

    def _is_stopping(self) -> bool:
        return self.stopping

    @staticmethod
    def _not_sent(runs: Sequence[Run]) -> None:
        """Stopping: claims not sent yet are not sent; their slots are left to other instances."""
        for run in runs:
            run.phase = Phase.ENDED

    async def _release(self, runs: Sequence[Run]) -> None:
        """Won while stopping: released at once, so a backup may take them (a hand-over)."""
        await release_runs(self.batches, self.policy, runs)
        now = self.policy.now_ms()
        for run in runs:
            run.phase = Phase.ENDED
            job = run.job
            self.events.emit("handed_over", now, job.name, run.slot, run.attempt, job_zone(job))

    # Claim-only backends -------------------------------------------------

    def _input(self, run: Run) -> ClaimInput:
        job = run.job
        return ClaimInput(
            job.name, run.slot, run.token, self.instance_id, job.history_size, job.history_ttl_ms
        )

    async def _plain_chunk(self, runs: Sequence[Run]) -> None:
        inputs = [self._input(run) for run in runs]
        deadline = max(run.deadline_ms for run in runs)
        sent = self.clock.monotonic()
        try:
            try:
                answers = await self.policy.bounded(self.batches.plain_claim_many(inputs), deadline)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not self.policy.is_transient(error):
                    raise
                self.policy.note_outage(error)
                retried = await self._retry_plain(runs, inputs, deadline)
                if retried is None:
                    return
                runs, inputs, answers = retried
            else:
                if self.policy.outage:
                    self.policy.recovered()
            if len(answers) != len(runs):
                raise _count_error(len(answers), len(runs))
            winners = [i for i, won in enumerate(answers) if won]
            won_inputs = [inputs[i] for i in winners]
            if won_inputs and not self.batches.records_nothing:
                recorded = await self.policy.complete(
                    lambda: self.batches.record_claims(won_inputs), deadline, gated=False
                )
                if not recorded:
                    winners = []
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._refused(runs, error)
            return
        won = set(winners)
        latency_ms = (self.clock.monotonic() - sent) * 1000
        for i, run in enumerate(runs):
            if i in won:  # run even while stopping: without leases nobody else can
                run.claim_latency_ms = latency_ms
                self.on_won(run, 1, 0.0)
            else:
                run.phase = Phase.ENDED

    async def _retry_plain(
        self, runs: Sequence[Run], inputs: list[ClaimInput], deadline: int
    ) -> tuple[Sequence[Run], list[ClaimInput], list[bool]] | None:
        """Retry a failed chunk (same tokens), each claim only until its own deadline."""
        current: list[int] = []

        async def attempt() -> list[bool]:
            nonlocal current
            now = self.policy.now_ms()
            current = [i for i, run in enumerate(runs) if now <= run.deadline_ms]
            return await self.batches.plain_claim_many([inputs[i] for i in current])

        answers = await self.policy.call(attempt, deadline, gated=False)
        kept = set(current) if answers is not GAVE_UP else set()
        for i, run in enumerate(runs):
            if i not in kept:
                run.phase = Phase.ENDED
        if answers is GAVE_UP:
            return None
        return [runs[i] for i in current], [inputs[i] for i in current], answers

    def _skipped(self, run: Run, reason: str) -> None:
        """Log (overlap: aggregated by the skip log) and emit ``skipped``."""
        job = run.job
        if reason == "overlap":
            self._skips.skipped(job.name, run.slot)
        self.events.emit(
            "skipped", self.policy.now_ms(), job.name, run.slot, None, job_zone(job), reason=reason
        )

    # Errors ----------------------------------------------------------------

    def _refused(self, runs: Sequence[Run], error: BaseException) -> None:
        """A permanent error: log it once, drop the claims (no run started, nothing to record)."""
        self.policy.report("claims", error)
        for run in runs:
            run.phase = Phase.ENDED


def _count_error(got: int, sent: int) -> Exception:
    return BackendError(f"a batch member returned {got} answers for {sent} items")
