"""The :class:`Scheduler`: declares jobs, computes slots with the engine, claims and runs them."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import logging
import os
import secrets
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any, TypeVar, overload

from anarchon.backend import Backend, RunStore
from anarchon.clock import Clock, SystemClock
from anarchon.context import RunContext
from anarchon.durations import Duration, to_ms
from anarchon.errors import (
    DedupeWindowError,
    DuplicateJobError,
    InvalidConfigError,
    InvalidJobError,
    UnsupportedError,
)
from anarchon.jobs import Handler, Job, build_job
from anarchon.registry import resolve_backend
from anarchon.schedules import Cron, Every, Schedule
from anarchon.types import ClaimInput, ClaimOutcome, RunClaim, RunRecord, StoredResult

__all__ = ["Scheduler", "SchedulerThread"]

T = TypeVar("T")
H = TypeVar("H", bound=Handler)

_UNSET: Any = object()
_GAVE_UP: Any = object()
_CLOCK_SYNC_S = 60.0
_MAX_DUE_PER_WAKE = 10_000
_MIN_SLEEP_S = 0.004
_PREPARE_BATCH = 256


def _default_instance_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"


_TOKEN_PREFIX = secrets.token_hex(8)
_token_counter = itertools.count(1)


def _new_token() -> str:
    """A claim token unique to this attempt: a random per-process prefix plus a counter.

    Uniqueness is all a token needs; this avoids a system call per claim.
    """
    return f"{_TOKEN_PREFIX}{next(_token_counter):x}"


class _Run:
    """A run executing on this instance."""

    __slots__ = (
        "beating",
        "ctx",
        "finishing",
        "handing_over",
        "in_handler",
        "job",
        "lease_lost",
        "lease_until",
        "leased",
        "next_beat",
        "task",
        "timeout_timer",
    )

    def __init__(
        self,
        job: Job,
        ctx: RunContext,
        task: asyncio.Task[Any] | None,
        *,
        leased: bool,
        lease_until: float = 0.0,
        next_beat: float = 0.0,
    ) -> None:
        self.job = job
        self.ctx = ctx
        self.task = task
        self.leased = leased
        self.lease_until = lease_until  # monotonic: when our last confirmed lease ends
        self.next_beat = next_beat  # monotonic: when the next heartbeat is due
        self.beating = False
        self.in_handler = False
        self.finishing = False
        self.lease_lost = False
        self.handing_over = False
        self.timeout_timer: asyncio.TimerHandle | None = None


class Scheduler:
    """Runs recurring jobs so that, across every instance sharing a backend, each slot runs once.

    >>> scheduler = Scheduler(backend="memory://", instance_id="web-1")
    >>> @scheduler.every("tick", "10s")
    ... async def tick(ctx: RunContext) -> None: ...
    """

    def __init__(
        self,
        backend: Backend | str | None = None,
        *,
        instance_id: str | None = None,
        clock: Clock | None = None,
        logger: logging.Logger | None = None,
        lease: Duration = _UNSET,
        heartbeat: Duration = _UNSET,
        stop_grace: Duration = 10,
    ) -> None:
        self._owns_backend = not isinstance(backend, Backend)
        self.backend: Backend = resolve_backend(backend)
        self._runs: RunStore | None = self.backend.runs
        if self._runs is None:
            given = [n for n, v in (("lease", lease), ("heartbeat", heartbeat)) if v is not _UNSET]
            if given:
                raise UnsupportedError(
                    f"scheduler option(s) {', '.join(given)} need a backend with leases;"
                    f" backend {self.backend.name!r} has none"
                )
        self.lease_ms = 30_000 if lease is _UNSET else _config_ms(lease, "lease")
        self.heartbeat_ms = (
            self.lease_ms // 3 if heartbeat is _UNSET else _config_ms(heartbeat, "heartbeat")
        )
        if self.heartbeat_ms >= self.lease_ms:
            raise InvalidConfigError(
                f"heartbeat ({self.heartbeat_ms} ms) must be shorter than lease ({self.lease_ms} ms)"
            )
        self.stop_grace_ms = _config_ms(stop_grace, "stop_grace", allow_zero=True)
        if instance_id is not None and (not isinstance(instance_id, str) or not instance_id):
            raise InvalidConfigError("instance_id must be a non-empty string")
        self.instance_id = instance_id or _default_instance_id()
        self.clock: Clock = clock or SystemClock()
        self.log = logger or logging.getLogger("anarchon")
        self._jobs: dict[str, Job] = {}
        self._timetable: Any = None
        self._offset_ms = 0
        self._last_sync = float("-inf")
        self._loop_task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._active: dict[tuple[str, int], _Run] = {}
        self._started = False
        self._stopping = False
        self._initialised = False
        self._outage = False

    # Registration ----------------------------------------------------

    @property
    def jobs(self) -> dict[str, Job]:
        """The registered jobs, by name (a copy)."""
        return dict(self._jobs)

    @property
    def leases(self) -> bool:
        """True when the backend provides leases (``backend.runs``)."""
        return self._runs is not None

    @overload
    def every(
        self, name: str, interval: Duration | Every, handler: None = None, **options: Any
    ) -> Callable[[H], H]: ...
    @overload
    def every(self, name: str, interval: Duration | Every, handler: H, **options: Any) -> H: ...

    def every(
        self, name: str, interval: Duration | Every, handler: H | None = None, **options: Any
    ) -> H | Callable[[H], H]:
        """Register a job every ``interval`` (epoch-aligned); a decorator without ``handler``."""
        schedule = interval if isinstance(interval, Every) else Every(interval)
        return self._register(name, schedule, handler, options)

    @overload
    def cron(
        self,
        name: str,
        expression: str | Cron,
        handler: None = None,
        *,
        tz: str = "UTC",
        **options: Any,
    ) -> Callable[[H], H]: ...
    @overload
    def cron(
        self, name: str, expression: str | Cron, handler: H, *, tz: str = "UTC", **options: Any
    ) -> H: ...

    def cron(
        self,
        name: str,
        expression: str | Cron,
        handler: H | None = None,
        *,
        tz: str = "UTC",
        **options: Any,
    ) -> H | Callable[[H], H]:
        """Register a cron job (5 or 6 fields, seconds first) in zone ``tz``; a decorator without ``handler``."""
        schedule = expression if isinstance(expression, Cron) else Cron(expression, tz=tz)
        return self._register(name, schedule, handler, options)

    def _register(
        self, name: str, schedule: Schedule, handler: H | None, options: dict[str, Any]
    ) -> H | Callable[[H], H]:
        if handler is None:

            def decorator(fn: H) -> H:
                self.add(name, schedule, fn, **options)
                return fn

            return decorator
        self.add(name, schedule, handler, **options)
        return handler

    def add(self, name: str, schedule: Schedule, handler: Handler, **options: Any) -> Job:
        """Register a job with a schedule object; validated now, effective at once if started."""
        if not isinstance(schedule, Schedule):
            raise InvalidJobError(
                f"schedule of job {name!r} must be Every or Cron, got {schedule!r}"
            )
        job = build_job(name, schedule, handler, options, leases=self.leases)
        if name in self._jobs:
            raise DuplicateJobError(f"job {name!r} is already registered")
        window = self.backend.dedupe_window_ms
        if job.jitter_ms + job.max_late_ms >= window:
            raise DedupeWindowError(
                f"job {name!r}: jitter ({job.jitter_ms} ms) + max_late ({job.max_late_ms} ms) must be"
                f" below the backend's de-duplication window ({window:g} ms), or a late instance"
                " could run a slot the store has forgotten"
            )
        self.backend.check_job(job.limits(self.lease_ms if self.leases else None))
        self._jobs[name] = job
        if self._started and not self._stopping:
            self._on_loop(lambda: self._spawn(self._activate(job)))
        return job

    def remove(self, name: str) -> bool:
        """Remove a job; runs in progress finish. True if it was registered."""
        job = self._jobs.pop(name, None)
        if job is None:
            return False
        if self._timetable is not None:
            timetable = self._timetable

            def forget() -> None:
                timetable.remove(name)
                self._poke()

            self._on_loop(forget)
        return True

    def _on_loop(self, action: Callable[[], object]) -> None:
        """Run ``action`` on the scheduler's event loop (now, if we are on it).

        ``add()``/``remove()`` may be called from another thread, e.g. while the
        scheduler runs in ``start_in_thread()``.
        """
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or not self._started or loop.is_closed():
            action()
        else:
            loop.call_soon_threadsafe(action)

    # Lifecycle -------------------------------------------------------

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect, prepare the jobs and begin claiming. Returns once running."""
        if self._started:
            raise InvalidConfigError("scheduler already started")
        from anarchon import _core

        await self._ensure_init()
        self._stopping = False
        self._timetable = _core.Timetable(self.instance_id)
        await self._sync_clock()
        jobs = list(self._jobs.values())
        for first in range(0, len(jobs), _PREPARE_BATCH):  # prepare_job may be a round trip each
            await asyncio.gather(
                *(self._activate(job) for job in jobs[first : first + _PREPARE_BATCH])
            )
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._loop_task = asyncio.create_task(self._main_loop(), name="anarchon-scheduler")
        if self._runs is not None:
            self._heartbeat_task = asyncio.create_task(
                self._heartbeat_loop(), name="anarchon-heartbeats"
            )
        self.log.info(
            "anarchon scheduler %s started on %s with %d job(s)",
            self.instance_id,
            self.backend.name,
            len(self._jobs),
        )

    async def stop(self) -> None:
        """Stop claiming, wait ``stop_grace`` for running handlers, then hand the rest over."""
        if not self._started:
            return
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        backups = [t for t in self._tasks if t.get_name() == "anarchon-backup"]
        for task in backups:
            task.cancel()
        pending = {t for t in self._tasks if t is not asyncio.current_task()}
        if pending:
            _, still = await asyncio.wait(pending, timeout=self.stop_grace_ms / 1000)
            if still:
                for run in list(self._active.values()):
                    run.handing_over = run.leased
                    self._cancel_run(run, "stop")
                for task in still:
                    if task.get_name() != "anarchon-run":
                        task.cancel()
                await asyncio.wait(still, timeout=max(5.0, self.lease_ms / 1000))
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            await asyncio.gather(self._heartbeat_task, return_exceptions=True)
            self._heartbeat_task = None
        self._started = False
        self.log.info("anarchon scheduler %s stopped", self.instance_id)
        if self._owns_backend:
            await self.backend.close()
            self._initialised = False

    async def close(self) -> None:
        """Close the backend's connections after ``stop()`` (or after reads without ``start()``).

        ``stop()`` already closes a backend the scheduler built from a URL;
        this also closes one that was passed in, for a program whose event
        loop ends here. Reads reconnect afterwards.
        """
        if self._started:
            raise InvalidConfigError("close() needs a stopped scheduler; call stop() first")
        if self._initialised:
            self._initialised = False
            await self.backend.close()

    def start_in_thread(self) -> SchedulerThread:
        """Run the scheduler on its own event loop in a background thread (for sync programs)."""
        handle = SchedulerThread(self)
        handle.start()
        return handle

    # Reads and manual runs -------------------------------------------

    async def run_now(self, name: str) -> RunRecord:
        """Run a job's handler here and now, record it as a manual run and return its record."""
        job = self._job(name)
        await self._ensure_init()
        if not self._started:
            await self._sync_clock()
        token = _new_token()
        slot = self._now_ms()
        claim = ClaimInput(
            name, slot, token, self.instance_id, job.history_size, job.history_ttl_ms
        )
        chosen = await self.backend.record_manual_run(claim)
        if chosen is not None:
            slot = chosen
        ctx = RunContext(name, slot, self.instance_id, 1, token, manual=True)
        run = _Run(job, ctx, asyncio.current_task(), leased=False)
        status, error, started, finished = await self._invoke(run)
        result = StoredResult(
            slot, token, self.instance_id, status, started, finished, error, 1, True
        )
        await self.backend.save_result(name, result, job.history_size, job.history_ttl_ms)
        return RunRecord(
            job=name,
            slot=slot,
            instance_id=self.instance_id,
            status=status,
            attempt=1,
            manual=True,
            started_at=started,
            finished_at=finished,
            duration_ms=finished - started,
            error=error,
        )

    async def history(self, name: str, limit: int = 20) -> list[RunRecord]:
        """Recent runs of a job on all instances, newest first."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidConfigError(f"limit must be a positive integer, got {limit!r}")
        await self._ensure_init()
        return await self.backend.history(name, limit)

    async def last_run(self, name: str) -> RunRecord | None:
        """The newest run of a job, on any instance, or None."""
        records = await self.history(name, 1)
        return records[0] if records else None

    # Internals: time and store access ---------------------------------

    def _job(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise InvalidJobError(f"no job named {name!r} is registered") from None

    async def _ensure_init(self) -> None:
        if not self._initialised:
            await self.backend.init()
            self._initialised = True

    def _now_ms(self) -> int:
        """Store time as this instance estimates it."""
        return self.clock.now_ms() + self._offset_ms

    async def _sync_clock(self) -> None:
        """Measure the offset of the store clock from ours (store time schedules every slot)."""
        source: Callable[[], Awaitable[int | None]] = (
            self._runs.now_ms if self._runs is not None else self.backend.now_ms
        )
        self._last_sync = self.clock.monotonic()
        before = self.clock.now_ms()
        try:
            store_now = await source()
        except Exception as error:  # an outage: keep the last offset
            self._note_outage(error)
            return
        after = self.clock.now_ms()
        self._note_recovered()
        if store_now is not None:
            self._offset_ms = int(store_now - (before + after) // 2)

    def _note_outage(self, error: BaseException) -> None:
        if not self._outage:
            self._outage = True
            self.log.warning(
                "anarchon: store %s unreachable (%s); retrying with backoff",
                self.backend.name,
                error,
            )

    def _note_recovered(self) -> None:
        if self._outage:
            self._outage = False
            self.log.info("anarchon: store %s reachable again", self.backend.name)

    async def _store(
        self, operation: Callable[[], Awaitable[T]], deadline_ms: int | None = None
    ) -> T:
        """Call the store, retrying with backoff until success or ``deadline_ms`` (store time).

        Returns ``_GAVE_UP`` when the deadline passes first.
        """
        delay = 0.05
        while True:
            try:
                result = await operation()
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._note_outage(error)
                if deadline_ms is not None and self._now_ms() + delay * 1000 > deadline_ms:
                    result_gave_up: T = _GAVE_UP
                    return result_gave_up
                if self._stopping and deadline_ms is None and delay >= 1.0:
                    self.log.error("anarchon: giving up on the store while stopping: %s", error)
                    gave_up: T = _GAVE_UP
                    return gave_up
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            self._note_recovered()
            return result

    # Internals: the wake-up loop --------------------------------------

    def _spawn(
        self, coro: Coroutine[Any, Any, Any], name: str = "anarchon-task"
    ) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(self._tracked(coro), name=name)
        self._tasks.add(task)
        return task

    async def _tracked(self, coro: Coroutine[Any, Any, Any]) -> Any:
        # Cheaper than add_done_callback, which costs one more trip through the event loop.
        try:
            return await coro
        finally:
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type,unused-ignore]

    def _poke(self) -> None:
        """Wake the main loop early (a job was added or removed)."""
        sleeper = self._wake
        if sleeper is not None and not sleeper.done():
            sleeper.set_result(None)

    async def _activate(self, job: Job) -> None:
        """Put a job in the timetable (and claim its catch-up slot)."""
        await self._store(lambda: self.backend.prepare_job(job.name, job.history_size))
        if self._jobs.get(job.name) is not job or not job.enabled:
            return
        now = self._now_ms()
        self._timetable.add(job.name, job.schedule._compiled, job.jitter_ms, now, job.max_late_ms)
        if job.catch_up_ms > job.max_late_ms and self._runs is not None:
            slot = job.schedule._compiled.latest_between(
                now - job.catch_up_ms, now - job.max_late_ms - 1
            )
            if slot is not None:
                self._spawn(self._run_slot(job, slot, slot + job.catch_up_ms), "anarchon-run")
        self._poke()

    async def _main_loop(self) -> None:
        timetable = self._timetable
        loop = asyncio.get_running_loop()
        while True:
            if self.clock.monotonic() - self._last_sync >= _CLOCK_SYNC_S:
                await self._sync_clock()
            now = self._now_ms()
            for name, slot, _fire_at in timetable.due(now, _MAX_DUE_PER_WAKE):
                job = self._jobs.get(name)
                if job is None:
                    continue
                if now > slot + job.max_late_ms:
                    self.log.debug("anarchon: %s slot %d is late, not claimed", name, slot)
                    continue
                self._spawn(self._run_slot(job, slot, slot + job.max_late_ms), "anarchon-run")
            wake_at = timetable.next_wakeup()
            timeout = _CLOCK_SYNC_S if wake_at is None else (wake_at - self._now_ms()) / 1000
            # Never early, but batch: slots due within the next few ms share one wake-up.
            timeout = min(max(timeout, _MIN_SLEEP_S), _CLOCK_SYNC_S)
            sleeper = loop.create_future()
            timer = loop.call_later(timeout, _wake_up, sleeper)
            self._wake = sleeper
            try:
                await sleeper
            finally:
                timer.cancel()
                self._wake = None

    # Internals: one slot ---------------------------------------------

    async def _run_slot(self, job: Job, slot: int, deadline_ms: int) -> None:
        """Claim ``(job, slot)`` and run it if this instance wins."""
        token = _new_token()
        if self._runs is None:
            claim = ClaimInput(
                job.name, slot, token, self.instance_id, job.history_size, job.history_ttl_ms
            )
            won = await self._store(lambda: self.backend.claim(claim), deadline_ms)
            if won is _GAVE_UP or not won:
                return
            await self._store(lambda: self.backend.record_claim(claim), deadline_ms)
            await self._execute(job, slot, token, 1, leased=False)
            return
        await self._claim_with_lease(self._runs, job, slot, token, deadline_ms)

    async def _claim_with_lease(
        self, runs: RunStore, job: Job, slot: int, token: str, deadline_ms: int
    ) -> None:
        request = RunClaim(
            job=job.name,
            slot=slot,
            token=token,
            instance_id=self.instance_id,
            lease_ms=self.lease_ms,
            max_attempts=job.max_attempts,
            overlap=job.overlap,
            deadline_ms=deadline_ms,
            create=True,
            history_size=job.history_size,
            history_ttl_ms=job.history_ttl_ms,
        )
        while True:
            sent = self.clock.monotonic()
            try:  # the common case without the retry wrapper: this is the hot path
                outcome: ClaimOutcome = await runs.claim(request)
            except asyncio.CancelledError:
                raise
            except Exception:
                retry = request
                outcome = await self._store(functools.partial(runs.claim, retry), deadline_ms)
            else:
                if self._outage:
                    self._note_recovered()
            if outcome is _GAVE_UP:
                return
            kind = outcome.kind
            if kind == "won":
                if self._stopping:
                    await self._store(lambda: runs.release(job.name, slot, token))
                    return
                await self._execute(
                    job,
                    slot,
                    token,
                    outcome.attempt,
                    leased=True,
                    lease_until=sent + self.lease_ms / 1000,
                )
                return
            if kind == "overlap":
                self.log.info(
                    "anarchon: %s slot %d skipped: an earlier run still holds its lease (overlap=False)",
                    job.name,
                    slot,
                )
                return
            if kind != "running" or self._stopping:
                return  # done, none, late, or a kind this version does not know (= done)
            # A backup: re-check every heartbeat, and when the lease would expire.
            task = asyncio.current_task()
            if task is not None:
                task.set_name("anarchon-backup")
            wait_ms = float(self.heartbeat_ms)
            if outcome.lease_expires_at is not None:
                wait_ms = min(wait_ms, max(outcome.lease_expires_at - self._now_ms(), 0) + 5)
            await asyncio.sleep(wait_ms / 1000)
            if task is not None:
                task.set_name("anarchon-run")
            request = replace(request, create=False)

    async def _execute(
        self,
        job: Job,
        slot: int,
        token: str,
        attempt: int,
        *,
        leased: bool,
        lease_until: float = 0.0,
    ) -> None:
        ctx = RunContext(job.name, slot, self.instance_id, attempt, token)
        run = _Run(
            job,
            ctx,
            asyncio.current_task(),
            leased=leased,
            lease_until=lease_until,
            next_beat=self.clock.monotonic() + self.heartbeat_ms / 1000,
        )
        key = (job.name, slot)
        self._active[key] = run
        try:
            status, error, started, finished = await self._invoke(run)
            if leased:
                run.finishing = True  # the lease is still renewed until finish() lands
                await self._finish_leased(run, status, error, started, finished)
            else:
                await self._save(run, status, error, started, finished)
        finally:
            run.finishing = False
            self._active.pop(key, None)

    async def _finish_leased(
        self, run: _Run, status: str, error: str | None, started: int, finished: int
    ) -> None:
        job, ctx = run.job, run.ctx
        slot, token, attempt = ctx.slot, ctx.token, ctx.attempt
        runs = self._runs
        if runs is not None:
            if run.lease_lost:
                self.log.warning(
                    "anarchon: %s slot %d attempt %d lost its lease; its result is not stored",
                    job.name,
                    slot,
                    attempt,
                )
                return
            if run.handing_over:
                released = await self._store(lambda: runs.release(job.name, slot, token))
                self.log.info(
                    "anarchon: %s slot %d handed over on stop (released=%s)",
                    job.name,
                    slot,
                    released,
                )
                return
            try:
                finished_ok = await runs.finish(job.name, slot, token, status, error)
            except asyncio.CancelledError:
                raise
            except Exception:
                # Retry only while our lease lasts: after it, a backup may own the run.
                left_ms = int((run.lease_until - self.clock.monotonic()) * 1000)
                finished_ok = await self._store(
                    lambda: runs.finish(job.name, slot, token, status, error),
                    self._now_ms() + left_ms,
                )
            if finished_ok is _GAVE_UP or not finished_ok:
                self.log.warning(
                    "anarchon: %s slot %d: lease lost before finish; result not stored",
                    job.name,
                    slot,
                )
                return
        await self._save(run, status, error, started, finished)

    async def _save(
        self, run: _Run, status: str, error: str | None, started: int, finished: int
    ) -> None:
        job, ctx = run.job, run.ctx
        result = StoredResult(
            ctx.slot, ctx.token, self.instance_id, status, started, finished, error, ctx.attempt
        )
        try:
            await self.backend.save_result(job.name, result, job.history_size, job.history_ttl_ms)
        except asyncio.CancelledError:
            raise
        except Exception:
            await self._store(
                lambda: self.backend.save_result(
                    job.name, result, job.history_size, job.history_ttl_ms
                )
            )

    async def _invoke(self, run: _Run) -> tuple[str, str | None, int, int]:
        """Run the handler; return ``(status, error, started_at, finished_at)``."""
        job, ctx = run.job, run.ctx
        loop = asyncio.get_running_loop()
        if job.timeout_ms is not None:
            run.timeout_timer = loop.call_later(
                job.timeout_ms / 1000, self._cancel_run, run, "timeout"
            )
        started = self._now_ms()
        status, error = "ok", None
        run.in_handler = True
        try:
            if job.is_async:
                await job.handler(ctx)  # type: ignore[misc]
            else:
                call = functools.partial(contextvars.copy_context().run, job.handler, ctx)
                await loop.run_in_executor(None, call)
        except asyncio.CancelledError:
            if not ctx.cancelled.is_set():
                raise
            task = asyncio.current_task()
            if task is not None and sys.version_info >= (3, 11):
                task.uncancel()
            status = "timeout" if ctx.cancelled.reason == "timeout" else "cancelled"
        except Exception as exc:
            status, error = "error", f"{type(exc).__name__}: {exc}"
            self.log.error(
                "anarchon: job %s slot %d failed: %s", job.name, ctx.slot, error, exc_info=exc
            )
        finally:
            run.in_handler = False
            if run.timeout_timer is not None:
                run.timeout_timer.cancel()
        if status == "ok" and ctx.cancelled.is_set() and ctx.cancelled.reason == "timeout":
            status = "timeout"
        return status, error, started, self._now_ms()

    def _cancel_run(self, run: _Run, reason: str) -> None:
        run.ctx.cancelled.set(reason)
        if run.in_handler and run.task is not None:
            run.task.cancel()

    # Internals: heartbeats -------------------------------------------

    async def _heartbeat_loop(self) -> None:
        """One task for every run's heartbeats, apart from the handlers, so no handler starves it.

        Each leased run is renewed every ``heartbeat``; a run whose last
        confirmed lease has expired by our monotonic clock is cancelled.
        """
        interval = self.heartbeat_ms / 1000
        while True:
            now = self.clock.monotonic()
            wake = now + interval
            for run in list(self._active.values()):
                if not run.leased or run.lease_lost or not (run.in_handler or run.finishing):
                    continue
                if now >= run.lease_until:
                    self._lose_lease(run, "its lease expired while the store was unreachable")
                    continue
                if not run.beating and now >= run.next_beat:
                    run.beating = True
                    self._spawn(self._beat(run), "anarchon-heartbeat")
                due = run.lease_until if run.beating else min(run.next_beat, run.lease_until)
                wake = min(wake, due)
            await asyncio.sleep(max(0.001, wake - self.clock.monotonic()))

    async def _beat(self, run: _Run) -> None:
        """Renew one lease; False from the store means another instance owns the run now."""
        runs = self._runs
        assert runs is not None
        ctx = run.ctx
        sent = self.clock.monotonic()
        interval = self.heartbeat_ms / 1000
        try:
            ok = await asyncio.wait_for(
                runs.heartbeat(ctx.job, ctx.slot, ctx.token, self.lease_ms),
                max(0.001, run.lease_until - sent),
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self._note_outage(error)
            run.next_beat = self.clock.monotonic() + interval / 4
            return
        finally:
            run.beating = False
        self._note_recovered()
        if ok:
            run.lease_until = sent + self.lease_ms / 1000
            run.next_beat = sent + interval
        else:
            self._lose_lease(run, "another instance owns the run now")

    def _lose_lease(self, run: _Run, why: str) -> None:
        if run.lease_lost or not (run.in_handler or run.finishing):
            return
        run.lease_lost = True
        ctx = run.ctx
        self.log.warning(
            "anarchon: %s slot %d attempt %d lost its lease (%s); cancelling the handler",
            ctx.job,
            ctx.slot,
            ctx.attempt,
            why,
        )
        self._cancel_run(run, "lease_lost")


def _wake_up(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)


def _config_ms(value: Duration, what: str, *, allow_zero: bool = False) -> int:
    try:
        return to_ms(value, what=what, allow_zero=allow_zero)
    except InvalidJobError as error:
        raise InvalidConfigError(error.message) from None


class SchedulerThread:
    """A scheduler running on its own event loop in a daemon thread (see ``start_in_thread``)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="anarchon-scheduler", daemon=True)

    def start(self) -> None:
        """Start the thread and wait until the scheduler runs (re-raises a start error)."""
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop_event = asyncio.Event()
        try:
            await self.scheduler.start()
        except BaseException as error:
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        await self._stop_event.wait()
        await self.scheduler.stop()

    @property
    def running(self) -> bool:
        """True while the thread runs."""
        return self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the scheduler with hand-over and wait for the thread (sync)."""
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(event.set)
        self._thread.join(timeout)
