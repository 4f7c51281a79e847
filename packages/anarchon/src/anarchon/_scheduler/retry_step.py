"""Running the retries of a failed handler (docs/retries.md): the retry step the executor calls.

When a handler of a job with ``retry=Retry(...)`` raises a matching error,
:meth:`RetrySteps.run` decides whether to retry (retries left, the retry
starts before the job's next slot unless ``overlap=True``), then:

- on lease backends it asks the store for the next attempt of the same slot
  (``RunStore.retry``: the failed attempt ends and the next starts under this
  instance, with a new token and a new lease), stores the failed attempt's
  result, waits the backoff while the lease keeper renews the new lease, and
  runs the handler again. A crash during the backoff or the retry is taken
  over like any crash (docs/leases.md);
- on backends without leases it stores the failed attempt's result and runs
  the handler again here, as the next attempt with a new token.

The returned outcome is the last attempt's; the executor hands it to the
result batcher as usual.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable

from anarchon._scheduler.run_state import CLAIM_NOT_DURABLE, Phase, Run
from anarchon._scheduler.store_retry import GAVE_UP, StorePolicy
from anarchon.backend.base import Backend
from anarchon.clock import Clock
from anarchon.context import RunContext
from anarchon.events import NO_EVENTS, EventBus, job_zone, log_extra, slot_iso
from anarchon.types import ClaimOutcome, RunRetry, StoredResult

__all__ = ["RetrySteps"]

Outcome = tuple[str, "str | None", int, int]
Invoke = Callable[[Run], Awaitable[Outcome]]


class RetrySteps:
    """Retries failed handlers of the jobs that have a ``retry`` option."""

    events: EventBus = NO_EVENTS
    """Where ``skipped`` (an attempt on a claim not confirmed durable) goes (set by the scheduler)."""

    def __init__(
        self,
        *,
        backend: Backend,
        policy: StorePolicy,
        instance_id: str,
        lease_ms: int,
        clock: Clock,
        now_ms: Callable[[], int],
        new_token: Callable[[], str],
        log: logging.Logger,
    ) -> None:
        self.backend = backend
        self.runs = backend.runs
        self.policy = policy
        self.instance_id = instance_id
        self.lease_ms = lease_ms
        self.clock = clock
        self.now_ms = now_ms
        self.new_token = new_token
        self.log = log

    async def run(self, run: Run, outcome: Outcome, invoke: Invoke) -> Outcome | None:
        """Retry ``run`` while its handler fails with a retried error.

        Returns the outcome to store as usual, or None when the run's end is
        already stored (its lease went to another instance during a retry).
        """
        policy = run.job.retry
        assert policy is not None
        errors = 1
        while (
            outcome[0] == "error"
            and run.exception is not None
            and policy.matches(run.exception)
            and errors < policy.attempts
            and run.ending is None
        ):
            delay_ms = policy.delay_ms(errors)
            if not self._before_next_slot(run, delay_ms):
                self.log.warning(
                    "anarchon: %s slot %d: no retry, it would start after the next slot",
                    run.job.name,
                    run.slot,
                )
                return outcome
            started = await self._next_attempt(run, outcome)
            if started is None:
                return None
            if not started:
                return outcome
            if run.uncertain and run.job.if_uncertain != "run":
                return self._skip_uncertain(run)
            errors += 1
            self.log.info(
                "anarchon: %s slot %d: attempt %d in %d ms (retry %d of %d)",
                run.job.name,
                run.slot,
                run.attempt,
                delay_ms,
                errors - 1,
                policy.retries,
            )
            waited = await self._backoff(run, delay_ms)
            if waited is not None:
                return waited
            outcome = await invoke(run)
        return outcome

    def _skip_uncertain(self, run: Run) -> Outcome:
        """The next attempt's claim was not confirmed durable: it ends ``skipped`` unrun."""
        job = run.job
        zone = job_zone(job)
        now = self.now_ms()
        run.skip_reason = CLAIM_NOT_DURABLE
        self.log.warning(
            "anarchon: %s slot %s attempt %d skipped (%s)",
            job.name,
            slot_iso(run.slot, zone),
            run.attempt,
            CLAIM_NOT_DURABLE,
            extra=log_extra(job.name, run.slot, run.attempt, self.instance_id, zone),
        )
        self.events.emit("skipped", now, job.name, run.slot, None, zone, reason=CLAIM_NOT_DURABLE)
        return "skipped", None, now, now

    def _before_next_slot(self, run: Run, delay_ms: int) -> bool:
        """True when a retry in ``delay_ms`` starts before the job's next slot (or overlap is on)."""
        job = run.job
        if job.overlap or job.once:
            return True
        following = job.schedule.next_after(run.slot)
        return following is None or self.now_ms() + delay_ms < following

    async def _next_attempt(self, run: Run, outcome: Outcome) -> bool | None:
        """Start the next attempt: True if started, False if not (the outcome stands), None if ended."""
        status, error, started_at, finished_at = outcome
        job = run.job
        old_token, old_attempt = run.token, run.attempt
        new_token = self.new_token()
        runs = self.runs
        if runs is not None:
            if old_attempt >= job.attempt_budget:
                return False
            request = RunRetry(
                job.name,
                run.slot,
                old_token,
                new_token,
                self.instance_id,
                self.lease_ms,
                job.attempt_budget,
                job.history_size,
                job.history_ttl_ms,
            )
            sent = self.clock.monotonic()
            try:
                answer: ClaimOutcome = await self.policy.call(lambda: runs.retry(request))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.policy.report("retry", exc, job=job.name)
                return False
            if answer is GAVE_UP:
                return False
            native = type(runs).native_retry
            if not answer.holds_lease:
                if native:
                    return False  # still ours to finish (no attempts left), or already lost
                # The fallback released the attempt: its error is stored here, nothing else.
                await self._store_failed(run, old_token, old_attempt, outcome, native=False)
                return None
            run.lease_until = sent + self.lease_ms / 1000
            run.attempt = answer.attempt
            run.uncertain = answer.kind == "uncertain"
        else:
            run.attempt = old_attempt + 1
        run.token = new_token
        run.exception = None
        run.ctx = RunContext(
            job.name,
            run.slot,
            self.instance_id,
            run.attempt,
            new_token,
            catch_up_of=run.catch_up_of,
        )
        run.phase = Phase.RUNNING
        await self._store_failed(
            run,
            old_token,
            old_attempt,
            (status, error, started_at, finished_at),
            native=runs is None or type(runs).native_retry,
        )
        return True

    async def _store_failed(
        self, run: Run, token: str, attempt: int, outcome: Outcome, *, native: bool
    ) -> None:
        status, error, started_at, finished_at = outcome
        if not native:
            # release() recorded the attempt interrupted at store time; the error must be the
            # later record of that attempt (history keeps the latest end of one token).
            assert self.runs is not None
            try:
                finished_at = max(finished_at, await self.runs.now_ms() + 1)
            except Exception:
                finished_at = max(finished_at, self.now_ms() + 1)
        job = run.job
        result = StoredResult(
            run.slot,
            token,
            self.instance_id,
            status,
            started_at,
            finished_at,
            error,
            attempt,
            reason="retried",
        )
        try:
            saved = await self.policy.complete(
                lambda: self.backend.save_result(
                    job.name, result, job.history_size, job.history_ttl_ms
                )
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.policy.report("results", exc, job=job.name)
            return
        if not saved:
            self.log.warning(
                "anarchon: %s slot %d attempt %d: result not stored (store unreachable)",
                job.name,
                run.slot,
                attempt,
            )

    async def _backoff(self, run: Run, delay_ms: int) -> Outcome | None:
        """Wait before the retry; a cancellation (stop, lost lease) ends the new attempt instead."""
        if delay_ms <= 0:
            return None
        ctx = run.ctx
        assert ctx is not None
        start = self.now_ms()
        try:
            await self.clock.sleep(delay_ms / 1000)
        except asyncio.CancelledError:
            if not ctx.cancelled.is_set():
                raise
            task = asyncio.current_task()
            if task is not None and sys.version_info >= (3, 11):
                task.uncancel()
            status = "timeout" if ctx.cancelled.reason == "timeout" else "cancelled"
            return status, None, start, self.now_ms()
        return None
