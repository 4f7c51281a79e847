"""The run executor: runs a won slot's handler, with its timeout and cancellation.

A handler task exists only for a run this instance won. When the handler
ends, the run moves to ``FINISHING`` and its outcome goes to the result
batcher (``on_ended``); the run stays in :attr:`RunExecutor.active` until its
end is stored, so its lease is renewed until the finish lands. A run claimed
ahead of its fire time (docs/scaling.md, "Claiming ahead") waits without a
task, in one list per fire time, and is started by one timer.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import sys
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from anarchon._scheduler.resume_catch_up import log_catch_up
from anarchon._scheduler.run_state import CLAIM_NOT_DURABLE, Ending, HandlerThread, Phase, Run
from anarchon._scheduler.tasks import TaskSet
from anarchon.context import OwnerCheck, RunContext
from anarchon.events import NO_EVENTS, EventBus, job_zone, log_extra, slot_iso
from anarchon.jobs import Job

__all__ = ["LAUNCH_SLICE", "Outcome", "RunExecutor"]

LAUNCH_SLICE = 500
"""Runs due at one fire time started per turn of the event loop."""

Outcome = tuple[str, "str | None", int, int]
"""``(status, error, started_at, finished_at)`` of one handler call (store time, ms)."""

Retries = Callable[[Run, Outcome, Callable[[Run], Awaitable[Outcome]]], Awaitable["Outcome | None"]]
"""``retries(run, outcome, invoke)``: the retry step (:mod:`anarchon._scheduler.retry_step`); None: end stored."""


class RunExecutor:
    """Starts handler tasks for winners and reports how each ended."""

    events: EventBus = NO_EVENTS
    """Where ``run_started`` and ``taken_over`` go (set by the scheduler)."""

    def __init__(
        self,
        *,
        instance_id: str,
        now_ms: Callable[[], int],
        tasks: TaskSet,
        log: logging.Logger,
        on_ended: Callable[[Run, Outcome], None],
        owner_check: Callable[[Run], Awaitable[bool]] | None = None,
        retries: Retries | None = None,
        skip_check: Callable[[str, int], str | None] | None = None,
        max_wait_ms: int = 0,
        registered: Callable[[Job], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance_id = instance_id
        self.now_ms = now_ms
        self.tasks = tasks
        self.log = log
        self.on_ended = on_ended
        self.owner_check = owner_check
        """Answers ``ctx.still_owner()`` (None on backends without leases)."""
        self.retries = retries
        self.skip_check = skip_check
        """``skip_check(job, slot)``: the fleet-wide control's reason to skip a won slot, or None."""
        self.max_wait_ms = max_wait_ms
        """The longest a won run waits for its fire time (``claim_ahead``): a store clock that
        stepped back after the claim does not hold a won run for longer."""
        self.registered = registered
        """``registered(job)``: False once the job was removed (a claim answered after
        ``remove()`` hands its run over instead of starting the handler)."""
        self.active: dict[tuple[str, int], Run] = {}
        """Runs this instance won, by ``(job, slot)``, until their end is stored."""
        self._live_jobs: dict[str, int] = {}
        """How many runs of each job are in :attr:`active`."""
        self.after_end: Callable[[str], None] | None = None
        """Called with the job's name when one of its runs leaves :attr:`active`."""
        self._waiting: dict[int, list[Run]] = {}
        """Runs claimed ahead, by fire time (store ms), until their handlers start."""
        self._bursts = 0
        """Fire times whose runs are being started over several turns of the loop."""
        self.monotonic = monotonic
        self.starts: deque[Run] = deque()
        """Runs with a short lease whose handler just started: the lease keeper (or its thread)
        takes them from here and extends their leases together (the start renewal)."""
        self.on_start: Callable[[], None] | None = None
        """Called when a run is added to :attr:`starts` (wakes the lease keeper)."""
        self.on_expired: Callable[[Run], None] | None = None
        """Called with a run whose short lease ended before its handler could start (the lease
        keeper's ``lose``: the handler never starts here; a backup takes the slot over)."""

    def start(self, run: Run, attempt: int, lease_until: float) -> None:
        """Start the handler of a won run (``lease_until``: monotonic end of the new lease)."""
        run.attempt = attempt
        run.lease_until = lease_until
        run.phase = Phase.RUNNING
        job = run.job
        ctx = RunContext(
            job.name, run.slot, self.instance_id, attempt, run.token, catch_up_of=run.catch_up_of
        )
        check = self.owner_check
        if check is not None and run.leased:
            ctx.owner_check = _owner_check(check, run)
            ctx.loop = asyncio.get_running_loop()
        run.ctx = ctx
        if self.active.setdefault(run.key, run) is not run:
            self.active[run.key] = run  # the same slot again (a retry): one run counted
        else:
            self._live_jobs[job.name] = self._live_jobs.get(job.name, 0) + 1
        if self.registered is not None and not self.registered(job):
            run.waiting = True  # never started here: handed over like a run claimed ahead
            self._hand_over(run)
            return
        if run.fire_at > self.now_ms():  # claimed ahead: the handler starts at its fire time
            self._wait(run)
            return
        self._launch(run)

    def _launch(self, run: Run) -> None:
        job = run.job
        if run.short and run.leased and run.ending is None:
            if self.monotonic() >= run.lease_until and self.on_expired is not None:
                # Paused or starved past the local end of its short lease: a backup may
                # already hold the slot, so the handler must not start here.
                run.waiting = True  # ended like a run claimed ahead that never started
                self.on_expired(run)
                return
            first = not self.starts
            self.starts.append(run)
            if first and self.on_start is not None:  # once per burst: it drains them all
                self.on_start()
        reason = self.skip_check(job.name, run.slot) if self.skip_check is not None else None
        if reason is None and run.uncertain:
            reason = self._uncertain(run)
        if reason is None:
            if run.catch_up_of is not None:
                log_catch_up(self.log, run, self.instance_id)
            self._started(run, run.attempt)
        # A plain task (no name, no tracking wrapper): the run itself is tracked in ``active``.
        run.task = asyncio.get_running_loop().create_task(self._execute(run, reason))

    def _uncertain(self, run: Run) -> str | None:
        """A claim not confirmed durable: the skip reason (``if_uncertain="skip"``), or None to run it."""
        job = run.job
        zone = job_zone(job)
        if job.if_uncertain == "run":
            self.log.warning(
                "anarchon: %s slot %s: the store could not confirm the claim durable;"
                " running it anyway (if_uncertain='run'): a failover now may run it twice",
                job.name,
                slot_iso(run.slot, zone),
                extra=log_extra(job.name, run.slot, run.attempt, self.instance_id, zone),
            )
            return None
        return CLAIM_NOT_DURABLE

    def _wait(self, run: Run) -> None:
        """Hold a run claimed ahead until its fire time: one timer per fire time, no task yet."""
        run.waiting = True
        group = self._waiting.get(run.fire_at)
        if group is None:
            group = self._waiting[run.fire_at] = []
            delay = min(max(0, run.fire_at - self.now_ms()), self.max_wait_ms) / 1000
            asyncio.get_running_loop().call_later(delay, self._fire, run.fire_at, 0)
        group.append(run)

    def _fire(self, fire_at: int, first: int) -> None:
        """Start the runs waiting for ``fire_at``, :data:`LAUNCH_SLICE` per turn of the loop.

        The handlers of one slice start before the next slice is launched, so
        the first of thousands of runs due together do not wait for the last.
        """
        group = self._waiting.get(fire_at)
        if group is None:
            return
        end = first + LAUNCH_SLICE
        for run in group[first:end]:
            if run.waiting:
                run.waiting = False
                self._launch(run)
        if end < len(group):
            if first == 0:
                self._bursts += 1
            asyncio.get_running_loop().call_soon(self._fire, fire_at, end)
        else:
            if first > 0:
                self._bursts -= 1
            del self._waiting[fire_at]

    def launching(self) -> bool:
        """True while a burst of runs due together is being started (their ends can wait)."""
        return self._bursts > 0

    def hand_over_waiting(self, job: str) -> None:
        """``job`` was removed: its runs claimed ahead that have not started are handed over."""
        for run in list(self.active.values()):
            if run.waiting and run.job.name == job:
                self._hand_over(run)

    def _hand_over(self, run: Run) -> None:
        """End a run whose handler has not started because its job was removed."""
        if run.leased and run.ending is None:
            run.ending = Ending.HAND_OVER
        self.cancel(run, "removed")

    def alive(self) -> list[Run]:
        """Runs whose handler still lives (a task not done, or a thread not returned)."""
        return [
            run
            for run in self.active.values()
            if run.phase is Phase.RUNNING and run.task is not None and not run.task.done()
        ]

    def _started(self, run: Run, attempt: int) -> None:
        """Log the start (DEBUG; a takeover at INFO) and emit ``run_started``/``taken_over``."""
        log, events = self.log, self.events
        takeover = attempt > 1
        if not (takeover or log.isEnabledFor(logging.DEBUG) or events.wants("run_started")):
            return
        job, slot = run.job, run.slot
        zone = job_zone(job)
        now = self.now_ms()
        if takeover:
            log.info(
                "anarchon: %s slot %s taken over (attempt %d)",
                job.name,
                slot_iso(slot, zone),
                attempt,
                extra=log_extra(job.name, slot, attempt, self.instance_id, zone),
            )
            events.emit("taken_over", now, job.name, slot, attempt, zone)
        elif log.isEnabledFor(logging.DEBUG):
            log.debug(
                "anarchon: %s slot %s started (attempt %d)",
                job.name,
                slot_iso(slot, zone),
                attempt,
                extra=log_extra(job.name, slot, attempt, self.instance_id, zone),
            )
        events.emit(
            "run_started",
            now,
            job.name,
            slot,
            attempt,
            zone,
            lateness_ms=now - slot,
            claim_latency_ms=run.claim_latency_ms,
        )

    def tasks_running(self) -> set[asyncio.Task[Any]]:
        """The handler tasks still running."""
        return {
            run.task for run in self.active.values() if run.task is not None and not run.task.done()
        }

    async def _execute(self, run: Run, reason: str | None) -> None:
        """Run the handler; ``reason``: why the slot is skipped instead (a fleet-wide control,
        or a claim not confirmed durable)."""
        if reason is not None:  # the winner records the skip, so it is recorded once
            run.skip_reason = reason
            now = self.now_ms()
            job = run.job
            zone = job_zone(job)
            self.log.log(
                logging.WARNING if reason == CLAIM_NOT_DURABLE else logging.INFO,
                "anarchon: %s slot %s skipped (%s)",
                job.name,
                slot_iso(run.slot, zone),
                reason,
                extra=log_extra(job.name, run.slot, None, self.instance_id, zone),
            )
            self.events.emit("skipped", now, job.name, run.slot, None, zone, reason=reason)
            run.phase = Phase.FINISHING
            self.on_ended(run, ("skipped", None, now, now))
            return
        try:
            first = await self.invoke(run)
            outcome: Outcome | None = first
            if self.retries is not None and run.job.retry is not None and first[0] == "error":
                outcome = await self.retries(run, first, self.invoke)
        except BaseException:
            self._forget(self.active.get(run.key, run))
            run.phase = Phase.ENDED
            raise
        run.phase = Phase.FINISHING
        if outcome is None:  # a retry's end is already stored
            self.ended(run)
            return
        self.on_ended(run, outcome)

    def ended(self, run: Run) -> None:
        """The run's end is stored (or dropped): forget it."""
        run.phase = Phase.ENDED
        self._forget(run)

    def holds(self, job: str) -> bool:
        """True while this instance has a run of ``job`` whose end is not stored yet."""
        return job in self._live_jobs

    def _forget(self, run: Run) -> None:
        run.exception = None  # its traceback's frames refer to the run: a cycle otherwise
        key = run.key
        if self.active.get(key) is not run:
            return
        del self.active[key]
        name = run.job.name
        left = self._live_jobs.get(name, 1) - 1
        if left > 0:
            self._live_jobs[name] = left
        else:
            self._live_jobs.pop(name, None)
        if self.after_end is not None:
            self.after_end(name)

    async def invoke(self, run: Run) -> Outcome:
        """Run the handler; return ``(status, error, started_at, finished_at)``."""
        job, ctx = run.job, run.ctx
        assert ctx is not None
        loop = asyncio.get_running_loop()
        if job.timeout_ms is not None:
            run.timeout_timer = loop.call_later(job.timeout_ms / 1000, self.cancel, run, "timeout")
        started = self.now_ms()
        status, error = "ok", None
        run.phase = Phase.RUNNING
        try:
            if job.is_async:
                await job.handler(ctx)  # type: ignore[misc]
            else:
                thread = run.handler_thread = HandlerThread(started)
                call = functools.partial(
                    thread.call, contextvars.copy_context().run, job.handler, ctx
                )
                await _outlive(run, loop.run_in_executor(None, call))
        except asyncio.CancelledError:
            if not ctx.cancelled.is_set() or run.abandoned:
                raise  # torn down, or left to the lease thread by stop(): no outcome here
            task = asyncio.current_task()
            if task is not None and sys.version_info >= (3, 11):
                task.uncancel()
            status = "timeout" if ctx.cancelled.reason == "timeout" else "cancelled"
        except Exception as exc:
            run.exception = exc
            status, error = "error", f"{type(exc).__name__}: {exc}"
            zone = job_zone(job)
            self.log.error(
                "anarchon: job %s slot %s failed: %s",
                job.name,
                slot_iso(ctx.slot, zone),
                error,
                exc_info=exc,
                extra=log_extra(job.name, ctx.slot, ctx.attempt, self.instance_id, zone),
            )
        finally:
            run.phase = Phase.FINISHING
            if run.timeout_timer is not None:
                run.timeout_timer.cancel()
        reason = ctx.cancelled.reason if ctx.cancelled.is_set() else None
        if status == "ok" and reason == "timeout":
            status = "timeout"
        if run.ending is Ending.STORE_ERROR and status in ("ok", "cancelled"):
            status, error = "error", run.store_error
        return status, error, started, self.now_ms()

    def cancel(self, run: Run, reason: str) -> None:
        """Signal ``ctx.cancelled`` and cancel the handler if it is still running."""
        ctx = run.ctx
        if ctx is None:
            return
        ctx.cancelled.set(reason)
        if run.waiting:  # claimed ahead, not started: it never runs here
            run.waiting = False
            run.phase = Phase.FINISHING
            now = self.now_ms()
            self.on_ended(run, ("cancelled", None, now, now))
            return
        if run.phase is Phase.RUNNING and run.task is not None:
            run.task.cancel()


async def _outlive(run: Run, thread: asyncio.Future[Any]) -> None:
    """Wait for a sync handler's thread to return, however often the run is cancelled.

    A thread cannot be stopped: after ``ctx.cancelled`` is set the run stays
    ``RUNNING`` (its lease renewed) until the thread returns, so no backup
    starts beside it (docs/leases.md, "A lease lives as long as its handler").
    Only a cancellation without ``ctx.cancelled`` (the task is being torn
    down) or a run ``abandoned`` by ``stop()`` stops the wait: ``stop()`` has
    then handed the run to the lease thread, which renews its lease until the
    thread returns and then finishes it; its lease is never released while
    the thread lives. A thread that returns normally after a cancellation
    completed its run: the run ends with its result.
    """
    ctx = run.ctx
    assert ctx is not None
    while True:
        try:
            await asyncio.shield(thread)
        except asyncio.CancelledError:
            if thread.done() and not thread.cancelled():
                break  # the thread ended as the cancellation came in
            if not ctx.cancelled.is_set() or run.abandoned:
                raise
            task = asyncio.current_task()
            if task is not None and sys.version_info >= (3, 11):
                task.uncancel()
            continue
        break
    # The thread's own error, if it raised one. A thread that returned after its
    # run was cancelled has done its work: its result is the run's (handing the
    # run over would have another instance do it again).
    thread.result()


def _owner_check(check: Callable[[Run], Awaitable[bool]], run: Run) -> OwnerCheck:
    """``ctx.still_owner()`` of ``run``: ``check(run)``, False once the run is gone.

    It refers to the run weakly: a strong reference would close a cycle (run,
    its ctx, the check, the run), and with thousands of runs a wave every
    cycle outlived its run until a full collection walked them all (hundreds
    of ms each, benchmarks/README.md, "Garbage collection").
    """
    ref = weakref.ref(run)

    async def ask() -> bool:
        alive = ref()
        return alive is not None and await check(alive)

    return ask
