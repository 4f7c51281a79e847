"""The result batcher: runs that end within a few ms are finished and stored together.

On lease backends one ``finish_many`` per chunk, then one ``save_results``
with the results of the finishes that returned True (False: the lease was
lost, the result is not stored). On claim-only backends one ``save_results``.
A run whose lease was lost stores nothing; a run handed over on stop is
released instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from anarchon._scheduler.executor import Outcome
from anarchon._scheduler.finish_resend import RecentFinishes
from anarchon._scheduler.releases import release_runs
from anarchon._scheduler.run_state import CLAIM_NOT_DURABLE, Ending, Run
from anarchon._scheduler.store_batches import StoreBatches, chunks
from anarchon._scheduler.store_retry import GAVE_UP, StorePolicy, describe_error
from anarchon._scheduler.tasks import TaskSet
from anarchon.clock import Clock
from anarchon.events import NO_EVENTS, EventBus, job_zone, log_extra, slot_iso
from anarchon.types import ResultWrite, RunFinish, StoredResult

__all__ = ["FINISH_WINDOW_S", "ResultBatcher"]

FINISH_WINDOW_S = 0.003
"""Runs that end within this window share one ``finish_many``/``save_results``."""


FINISH_RETRY_S = 60.0
"""How long a finish is retried through a store outage (at least the lease): docs/leases.md."""


def _run_reason(run: Run) -> str | None:
    """The reason a run's own record carries: ``claim_not_durable`` for one run on an uncertain claim."""
    return CLAIM_NOT_DURABLE if run.uncertain else None


class ResultBatcher:
    """Collects ended runs and stores their ends in batches."""

    events: EventBus = NO_EVENTS
    """Where ``run_finished``, ``handed_over`` and a late ``lease_lost`` go (set by the scheduler)."""

    def __init__(
        self,
        *,
        instance_id: str,
        batches: StoreBatches,
        policy: StorePolicy,
        clock: Clock,
        tasks: TaskSet,
        log: logging.Logger,
        on_stored: Callable[[Run], None],
        busy: Callable[[], bool] | None = None,
        recent: RecentFinishes | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.recent = recent
        """The finishes of the last lease, re-sent after an outage (lease backends)."""
        self.batches = batches
        self.policy = policy
        self.clock = clock
        self.tasks = tasks
        self.log = log
        self.on_stored = on_stored
        self.busy = busy
        """True while handlers due now are being started: the timed flush waits for them."""
        self.leases = batches.runs is not None
        self._pending: list[tuple[Run, StoredResult]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._landing: set[asyncio.Task[None]] = set()

    def submit(self, run: Run, outcome: Outcome) -> None:
        """Queue the end of ``run``; it is stored within :data:`FINISH_WINDOW_S`."""
        status, error, started, finished = outcome
        result = StoredResult(
            run.slot,
            run.token,
            self.instance_id,
            status,
            started,
            finished,
            error,
            run.attempt,
            reason=run.skip_reason if run.skip_reason is not None else _run_reason(run),
        )
        self._pending.append((run, result))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FINISH_WINDOW_S, self._timed_flush)

    def _timed_flush(self) -> None:
        busy = self.busy
        if busy is not None and busy():
            self._timer = asyncio.get_running_loop().call_later(FINISH_WINDOW_S, self._timed_flush)
            return
        self.flush()

    def flush(self) -> None:
        """Send everything queued now (one task per chunk)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, []
        if not pending:
            return
        if not self.leases:
            for chunk in chunks(pending):
                self.tasks.spawn(self._save_chunk(chunk), "anarchon-results")
            return
        for chunk in chunks(pending):
            task = self.tasks.spawn(self._finish_chunk(chunk), "anarchon-results")
            self._landing.add(task)
            task.add_done_callback(self._landing.discard)

    async def landed(self, timeout_s: float) -> None:
        """Send the queued ends now and wait (up to ``timeout_s``) until the finishes land.

        The claim batcher waits for this before new claims, so a run that
        ended here is finished in the store before the next slot of its job
        is claimed (no spurious ``overlap`` skip from our own batching delay).
        """
        if self._pending:
            self.flush()
        if self._landing:
            await asyncio.wait(set(self._landing), timeout=timeout_s)

    # Lease backends ----------------------------------------------------

    async def _finish_chunk(self, chunk: Sequence[tuple[Run, StoredResult]]) -> None:
        finishing: list[tuple[Run, StoredResult]] = []
        handing_over: list[Run] = []
        for run, result in chunk:
            if run.ending is Ending.LEASE_LOST:
                zone = job_zone(run.job)
                self.log.info(
                    "anarchon: %s slot %s attempt %d lost its lease; its result is not stored",
                    run.job.name,
                    slot_iso(run.slot, zone),
                    run.attempt,
                    extra=log_extra(run.job.name, run.slot, run.attempt, self.instance_id, zone),
                )
                self.on_stored(run)
            elif run.ending is Ending.HAND_OVER and result.status != "ok":
                handing_over.append(run)
            else:
                finishing.append((run, result))
        if handing_over:
            await self._release(handing_over)
        if not finishing:
            return
        if self.batches.native_finish_saves and await self._finish_and_save(finishing):
            return
        answers = await self._finish(finishing)
        writes: list[ResultWrite] = []
        stored: list[Run] = []
        for (run, result), ok in zip(finishing, answers):  # noqa: B905 - same length
            self.on_stored(run)  # the finish landed (or failed): the lease needs no renewal
            if ok is True:
                write = _write(run, result)
                writes.append(write)
                stored.append(run)
                self._finished(run, result)
                if self.recent is not None:
                    self.recent.add(_finish_request(run, result), write)
            elif isinstance(ok, BaseException):
                result.status = "error"
                result.error = f"the store refused to finish the run: {describe_error(ok)}"
                writes.append(_write(run, result))
                self._finished(run, result)
            else:
                self._lost_before_finish(run)
        await self._save(writes)

    async def _finish_and_save(self, finishing: Sequence[tuple[Run, StoredResult]]) -> bool:
        """Finish and store the results in one call; False: it failed (the caller takes over).

        The two-step path after a failure finishes again with the same tokens
        (a finished run answers True again) and saves, with its retries.
        """
        requests = [_finish_request(run, result) for run, result in finishing]
        writes = [_write(run, result) for run, result in finishing]
        try:
            answers = await self.policy.bounded(self.batches.finish_and_save_many(requests, writes))
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if self.policy.is_transient(error):
                self.policy.note_outage(error)
            return False
        if answers is None or len(answers) != len(requests):
            return False
        if self.policy.outage:
            self.policy.recovered()
        recent = self.recent
        for (run, result), ok, request, write in zip(finishing, answers, requests, writes):  # noqa: B905 - same length
            self.on_stored(run)
            if ok is True:
                self._finished(run, result)
                if recent is not None:
                    recent.add(request, write)
            else:
                self._lost_before_finish(run)
        return True

    def _lost_before_finish(self, run: Run) -> None:
        zone = job_zone(run.job)
        self.log.info(
            "anarchon: %s slot %s attempt %d: lease lost before finish; result not stored",
            run.job.name,
            slot_iso(run.slot, zone),
            run.attempt,
            extra=log_extra(run.job.name, run.slot, run.attempt, self.instance_id, zone),
        )
        self.events.emit(
            "lease_lost",
            self.policy.now_ms(),
            run.job.name,
            run.slot,
            run.attempt,
            zone,
            reason="another instance owns the run now",
        )

    async def _finish(
        self, finishing: Sequence[tuple[Run, StoredResult]]
    ) -> list[bool | BaseException]:
        """``finish_many``; retried (same tokens) for :data:`FINISH_RETRY_S`, past the lease end.

        The store decides: a finish whose token another instance took over
        answers False, so a late finish never overwrites the new owner's run,
        and a run whose handler finished is stored once the store is back.
        """
        requests = [_finish_request(run, result) for run, result in finishing]
        try:
            answers: list[bool | BaseException] = list(
                await self.policy.bounded(self.batches.finish_many(requests))
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not self.policy.is_transient(error):
                self.policy.report("finishes", error)
                return [error] * len(finishing)
            self.policy.note_outage(error)
            return await self._retry_finish(finishing, requests)
        if self.policy.outage:
            self.policy.recovered()
        if len(answers) != len(requests):
            return [False] * len(requests)
        return answers

    async def _retry_finish(
        self, finishing: Sequence[tuple[Run, StoredResult]], requests: list[RunFinish]
    ) -> list[bool | BaseException]:
        answers: list[bool | BaseException] = [False] * len(requests)
        current: list[int] = []

        async def attempt() -> list[bool]:
            nonlocal current
            current = list(range(len(requests)))
            return await self.batches.finish_many(requests)

        left_s = max(run.lease_until for run, _r in finishing) - self.clock.monotonic()
        deadline = self.policy.now_ms() + int(max(left_s, FINISH_RETRY_S) * 1000)
        try:
            got = await self.policy.call(
                attempt, deadline, gated=False, max_delay_s=self.policy.call_timeout_s
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.policy.report("finishes", error)
            return [error] * len(requests)
        if got is GAVE_UP or len(got) != len(current):
            return answers
        for i, ok in zip(current, got):  # noqa: B905 - lengths checked
            answers[i] = ok
        return answers

    async def _release(self, runs: Sequence[Run]) -> None:
        """Hand the runs over on stop: their leases released together (docs/leases.md)."""
        answers = await release_runs(self.batches, self.policy, runs)
        now = self.policy.now_ms()
        for run, released in zip(runs, answers):  # noqa: B905 - same length
            job = run.job
            zone = job_zone(job)
            self.log.info(
                "anarchon: %s slot %s attempt %d handed over on stop (released=%s)",
                job.name,
                slot_iso(run.slot, zone),
                run.attempt,
                released,
                extra=log_extra(job.name, run.slot, run.attempt, self.instance_id, zone),
            )
            self.events.emit("handed_over", now, job.name, run.slot, run.attempt, zone)
            self.on_stored(run)

    def _finished(self, run: Run, result: StoredResult) -> None:
        """Log the end of a run at DEBUG and emit ``run_finished`` (a skip emitted ``skipped``)."""
        if result.status == "skipped":
            return
        log, events = self.log, self.events
        debug = log.isEnabledFor(logging.DEBUG)
        if not debug and not events.wants("run_finished"):
            return
        job = run.job
        zone = job_zone(job)
        started, finished = result.started_at, result.finished_at
        duration = finished - started if started is not None and finished is not None else None
        if debug:
            log.debug(
                "anarchon: %s slot %s attempt %d finished: %s in %s ms",
                job.name,
                slot_iso(run.slot, zone),
                run.attempt,
                result.status,
                duration,
                extra=log_extra(job.name, run.slot, run.attempt, self.instance_id, zone),
            )
        events.emit(
            "run_finished",
            finished if finished is not None else self.policy.now_ms(),
            job.name,
            run.slot,
            run.attempt,
            zone,
            status=result.status,
            duration_ms=duration,
            error=result.error,
        )

    # Claim-only backends -------------------------------------------------

    async def _save_chunk(self, chunk: Sequence[tuple[Run, StoredResult]]) -> None:
        writes = [_write(run, result) for run, result in chunk]
        await self._save(writes)
        for run, result in chunk:
            self._finished(run, result)
            self.on_stored(run)

    async def _save(self, writes: Sequence[ResultWrite]) -> None:
        if not writes:
            return
        try:
            try:
                await self.policy.bounded(self.batches.save_results(writes))
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if not self.policy.is_transient(error):
                    raise
                self.policy.note_outage(error)
                await self.policy.complete(
                    lambda: self.batches.save_results(writes),
                    gated=False,
                    max_delay_s=self.policy.call_timeout_s,
                )
            else:
                if self.policy.outage:
                    self.policy.recovered()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.policy.report("results", error)


def _finish_request(run: Run, result: StoredResult) -> RunFinish:
    """The ``finish`` of ``run`` with its outcome."""
    return RunFinish(run.job.name, run.slot, run.token, result.status, result.error)


def _write(run: Run, result: StoredResult) -> ResultWrite:
    """The history write of ``run``'s result, with its job's history settings."""
    job = run.job
    return ResultWrite(job.name, result, job.history_size, job.history_ttl_ms)
