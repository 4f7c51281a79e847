"""The :class:`Scheduler`: declares jobs, starts and stops the parts that claim and run their slots.

The parts are private, in :mod:`anarchon._scheduler` (one behaviour a module:
wake-ups, claims, the executor, results, leases, the store policy, store
time, fleet sync, ...); :mod:`anarchon._scheduler.assembly` wires them for
each ``start()`` and :mod:`anarchon._scheduler.drain` is ``stop()``'s wait.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon import _core
from anarchon._scheduler.assembly import Parts, build_parts, default_instance_id, new_token
from anarchon._scheduler.candidates import DEFAULT_CANDIDATES, DEFAULT_STAGGER_MS
from anarchon._scheduler.config import (
    UNSET,
    candidate_count,
    claim_ahead_ms,
    config_ms,
    lease_timings,
)
from anarchon._scheduler.declaring import JobDeclarations
from anarchon._scheduler.drain import JOIN_S, close_within, drain, drain_for_stop
from anarchon._scheduler.due import due_records, take_due
from anarchon._scheduler.fleet_sync import (
    DEFAULT_CONTROL_CACHE_S,
    DEFAULT_REFRESH_MS,
    report_drift,
)
from anarchon._scheduler.gc_tuning import freeze_once
from anarchon._scheduler.manual import run_manually
from anarchon._scheduler.run_state import Run
from anarchon._scheduler.store_retry import DEFAULT_CALL_TIMEOUT_S, StorePolicy
from anarchon._scheduler.store_time import StoreTime, sync_under
from anarchon._scheduler.tasks import TaskSet
from anarchon._scheduler.wakeup import WakeUpLoop
from anarchon.backend.base import Backend, RunStore
from anarchon.backend.registry import ENV_VAR, resolve_backend
from anarchon.clock import Clock, SystemClock
from anarchon.durations import Duration
from anarchon.errors import (
    DedupeWindowError,
    DuplicateJobError,
    InvalidConfigError,
    InvalidJobError,
)
from anarchon.events import EventBus, Listener
from anarchon.fleet.controls import pause_job, resume_job, skip_slots
from anarchon.fleet.types import JobControl
from anarchon.job_options import JobOptions
from anarchon.jobs import Handler, Job, build_job
from anarchon.schedules import Once, Schedule
from anarchon.sync import SchedulerThread, use_scheduler_type
from anarchon.types import RunRecord

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "Scheduler", "SchedulerThread"]

T = TypeVar("T")
H = TypeVar("H", bound=Handler)

_PREPARE_BATCH = 256

DEFAULT_MAX_IN_FLIGHT = 8
"""Store operations one scheduler has in flight at most, unless ``max_in_flight`` says otherwise."""


class Scheduler(JobDeclarations):
    """Runs recurring jobs so that, across every instance sharing a backend, each slot runs once.

    ``max_in_flight`` bounds the store operations this scheduler has in flight
    at once (a batch call counts as one; default :data:`DEFAULT_MAX_IN_FLIGHT`):
    keep it at or below the connection pool of a client you hand in.
    ``gc_freeze`` (default True): the first ``start()`` in the process of a
    scheduler with at least 1,000 jobs calls ``gc.freeze()``, so the cyclic
    garbage collector stops walking the jobs on every burst of slots
    (:mod:`anarchon._scheduler.gc_tuning`, docs/scaling.md "Many jobs in one process").
    ``claim_ahead`` (lease backends, default 2 s, at most 4 s, 0 turns it off):
    each slot is claimed this long before its fire time (at most a quarter of
    the gap to the job's next slot) and its handler starts at the fire time,
    so thousands of slots due together start on time (docs/scaling.md,
    "Claiming ahead").

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
        lease: Duration = UNSET,
        heartbeat: Duration = UNSET,
        stop_grace: Duration = 10,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        fleet_refresh: Duration = DEFAULT_REFRESH_MS / 1000,
        control_cache: Duration = DEFAULT_CONTROL_CACHE_S,
        gc_freeze: bool = True,
        claim_ahead: Duration = UNSET,
        candidates: int | None = DEFAULT_CANDIDATES,
        candidate_stagger: Duration = DEFAULT_STAGGER_MS / 1000,
    ) -> None:
        self._owns_backend = not isinstance(backend, Backend)
        self._url: str | None = (
            backend
            if isinstance(backend, str)
            else (os.environ.get(ENV_VAR, "").strip() or None)
            if backend is None
            else None
        )
        self._implicit_memory = backend is None and not os.environ.get(ENV_VAR, "").strip()
        self.backend: Backend = resolve_backend(backend)
        self._runs: RunStore | None = self.backend.runs
        leases = self._runs is not None
        self.lease_ms, self.heartbeat_ms = lease_timings(
            self.backend.name, leases, lease, heartbeat, claim_ahead
        )
        self.stop_grace_ms = config_ms(stop_grace, "stop_grace", allow_zero=True)
        self.claim_ahead_ms = claim_ahead_ms(leases, claim_ahead)
        """How long before its fire time a slot is claimed (lease backends; docs/scaling.md, "Claiming ahead")."""
        self.fleet_refresh_ms = config_ms(fleet_refresh, "fleet_refresh")
        self.candidates = candidate_count(candidates)
        """How many instances claim each job-slot; None: every instance (docs/scaling.md, "Candidates")."""
        self.candidate_stagger_ms = config_ms(
            candidate_stagger, "candidate_stagger", allow_zero=True
        )
        self.control_cache_ms = config_ms(control_cache, "control_cache", allow_zero=True)
        if (
            isinstance(max_in_flight, bool)
            or not isinstance(max_in_flight, int)
            or max_in_flight < 1
        ):
            raise InvalidConfigError(
                f"max_in_flight must be an integer >= 1, got {max_in_flight!r}"
            )
        self.max_in_flight = max_in_flight
        if not isinstance(gc_freeze, bool):
            raise InvalidConfigError(f"gc_freeze must be True or False, got {gc_freeze!r}")
        self.gc_freeze = gc_freeze
        """Freeze the objects alive at the first start of a scheduler with many jobs (:mod:`anarchon._scheduler.gc_tuning`)."""
        if instance_id is not None and (not isinstance(instance_id, str) or not instance_id):
            raise InvalidConfigError("instance_id must be a non-empty string")
        self.instance_id = instance_id or default_instance_id()
        self.clock: Clock = clock or SystemClock()
        self.log = logger or logging.getLogger("anarchon.scheduler")
        self._store_log = (
            logger.getChild("store") if logger else logging.getLogger("anarchon.store")
        )
        self.events = EventBus(self.instance_id, self.log)
        """The event bus: :meth:`on` subscribes; other parts (e.g. drift detection) call ``events.emit``."""
        self._jobs: dict[str, Job] = {}
        self._time = StoreTime(self.clock, self._clock_source())
        self._tasks = TaskSet()
        self._parts: Parts | None = None
        self._wakeups: WakeUpLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._stopping = False
        self._initialised = False
        self._due_log: list[Run] | None = None
        """The runs submitted during ``run_due()`` (catch-up claims included), else None."""

    # Registration ----------------------------------------------------

    @property
    def jobs(self) -> dict[str, Job]:
        """The registered jobs, by name (a copy)."""
        return dict(self._jobs)

    def on(self, kind: str, callback: Listener) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for each event of ``kind``; returns an unsubscribe function.

        The kinds are in :data:`anarchon.events.EVENT_KINDS`; delivery is off the
        scheduling path (docs/fleet.md, "Events").
        """
        return self.events.on(kind, callback)

    @property
    def leases(self) -> bool:
        """True when the backend provides leases (``backend.runs``)."""
        return self._runs is not None

    def add(
        self, name: str, schedule: Schedule, handler: Handler, **options: Unpack[JobOptions]
    ) -> Job:
        """Register a job with a schedule object; validated now, effective at once if started.

        Bad input and the backend's ``check_job`` refusal raise here, with
        their codes. On a running scheduler the job is then prepared in the
        store in the background: a permanent ``prepare_job`` error is logged
        once at ERROR and the job is unregistered again (transient ones are
        retried).
        """
        if not isinstance(schedule, Schedule):
            raise InvalidJobError(
                f"schedule of job {name!r} must be Every or Cron, got {schedule!r}"
            )
        job = build_job(
            name,
            schedule,
            handler,
            dict(options),
            leases=self.leases,
            once=isinstance(schedule, Once),
        )
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
            self._on_loop(lambda: self._tasks.spawn(self._activate(job), "anarchon-activate"))
        return job

    def remove(self, name: str) -> bool:
        """Remove a job; runs in progress finish. True if it was registered.

        A run of it claimed ahead whose handler has not started is handed over
        (another instance that declares the job runs it).
        """
        job = self._jobs.pop(name, None)
        if job is None:
            return False
        wakeups = self._wakeups
        parts = self._parts
        if wakeups is not None:

            def drop() -> None:
                wakeups.remove_job(name)
                if parts is not None:
                    parts.executor.hand_over_waiting(name)

            self._on_loop(drop)
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
        """Connect, prepare the jobs and begin claiming. Returns once running.

        A store error that is not transient (``backend.is_transient``) is
        raised here with its code; transient ones are retried with backoff.
        """
        if self._started:
            raise InvalidConfigError("scheduler already started")
        if self._parts is not None:
            raise InvalidConfigError(
                "this scheduler is driven by run_due(); call stop() before start()"
            )
        await self._open(members=True)
        parts = self._parts
        assert parts is not None
        await parts.fleet.refresh_controls(wait=False)  # the wake-up loop waits for them
        await parts.fleet.declare()
        self._started = True
        self.events.start()
        self._tasks.spawn_loop(parts.wakeups.run(), "anarchon-scheduler")
        self._tasks.spawn_loop(parts.fleet.run(), "anarchon-fleet")
        self._tasks.spawn_loop(parts.candidates.run(), "anarchon-members")
        if parts.keeper is not None:
            self._tasks.spawn_loop(parts.keeper.run(), "anarchon-heartbeats")
            if parts.keeper.thread is not None:
                parts.keeper.thread.start()
        if self.gc_freeze:
            freeze_once(len(self._jobs), self.log)
        self.log.info(
            "anarchon scheduler %s started on %s with %d job(s)",
            self.instance_id,
            self.backend.name,
            len(self._jobs),
        )

    async def _open(self, *, members: bool = False) -> None:
        """Connect, build the parts and prepare the jobs (no background loop yet).

        With ``members`` (``start()``), this instance's membership record is
        written first, so each job goes into the timetable only if this
        instance is one of its candidates."""
        if self._implicit_memory:
            self.log.warning(
                "anarchon: no backend given and %s is not set: using memory://, so every"
                " instance runs every job on its own; pass backend=... or set %s to share a store",
                ENV_VAR,
                ENV_VAR,
            )
        await self._ensure_init()
        self._stopping = False
        parts = build_parts(
            backend=self.backend,
            runs=self._runs,
            url=self._url,
            jobs=self._jobs,
            timetable=_core.Timetable(self.instance_id),
            policy=self._new_policy(),
            store_time=self._time,
            tasks=self._tasks,
            events=self.events,
            clock=self.clock,
            log=self.log,
            instance_id=self.instance_id,
            lease_ms=self.lease_ms,
            heartbeat_ms=self.heartbeat_ms,
            claim_ahead_ms=self.claim_ahead_ms,
            fleet_refresh_ms=self.fleet_refresh_ms,
            control_cache_ms=self.control_cache_ms,
            candidates=self.candidates,
            stagger_ms=self.candidate_stagger_ms,
            call_timeout_s=self.call_timeout_s,
            on_drift=self._on_drift,
            still_owner=self._still_owner,
            due_log=lambda: self._due_log,
        )
        if not await sync_under(self._time, parts.policy):
            self._time.postpone()
        self._parts = parts
        self._wakeups = parts.wakeups
        self._loop = asyncio.get_running_loop()
        if members:
            await parts.candidates.refresh()
        try:
            jobs = list(self._jobs.values())
            for first in range(
                0, len(jobs), _PREPARE_BATCH
            ):  # prepare_job may be a round trip each
                await asyncio.gather(
                    *(self._activate(job) for job in jobs[first : first + _PREPARE_BATCH])
                )
        except BaseException:
            self._parts = self._wakeups = None
            raise

    async def run_due(self) -> list[RunRecord]:
        """Claim and run every slot due by the clock now; return when they ended (for tests).

        For a scheduler that is not started: its first call connects and
        prepares the jobs, without any background loop, so a test advances
        an :class:`anarchon.testing.FakeClock` and calls ``run_due()`` to run
        exactly the slots up to the clock's time (docs/testing-your-jobs.md).
        A slot is due at its scheduled time (jitter is not waited for);
        slots more than ``max_late`` behind the clock are skipped, as
        always. Returns the history records of the slots it ran (every
        attempt), oldest first. ``stop()`` ends this mode.
        """
        if self._started:
            raise InvalidConfigError(
                "run_due() drives a scheduler that is not started; it was started with start()"
            )
        submitted: list[Run] = []
        self._due_log = submitted
        try:
            return await self._run_due(submitted)
        finally:
            self._due_log = None

    async def _run_due(self, submitted: list[Run]) -> list[RunRecord]:
        if self._parts is None:
            await self._open()
        self.events.start()
        parts = self._parts
        assert parts is not None
        await sync_under(self._time, parts.policy)
        for job in list(self._jobs.values()):
            if job.enabled and job.name not in parts.wakeups.timetable:
                await self._activate(job)
        await parts.fleet.refresh_controls()  # pause/skip, and the catch-up after a resume
        due = take_due(
            parts.wakeups.timetable,
            self._jobs,
            self._time.now_ms(),
            lambda job, slot, deadline: Run(
                job, slot, new_token(), deadline, leased=self._runs is not None
            ),
        )
        parts.claims.submit(due)
        runs = [*submitted, *due]
        loop = asyncio.get_running_loop()
        await drain(self._tasks, parts, loop.time() + 3600)
        return await due_records(self.backend, self._jobs, runs)

    async def stop(self) -> None:
        """Stop claiming, wait ``stop_grace`` for running handlers, then hand the rest over.

        The bound (docs/leases.md, "Stopping"): claims waiting out an outage
        end at once; running handlers get ``stop_grace``, then are cancelled
        and handed over; their ends are stored within one call timeout
        (:attr:`call_timeout_s`). So without a handler that outlives its
        cancellation, ``stop()`` returns within ``stop_grace`` plus one call
        timeout, store outage or not. A handler that still lives after that
        (a sync handler's thread, an async one that swallows cancellation)
        keeps its lease: a warning names it and ``stop()`` waits up to
        ``stop_grace`` more, renewing its lease, then finishes it with its
        result once it returns normally (it did its work), or hands it over if
        it raised. If a sync handler's thread still lives then, ``stop()``
        returns and the lease thread keeps renewing its lease until the thread
        returns, then stores its end: a backup never starts beside a live
        handler. Without a lease thread ``stop()`` waits for such a handler.
        """
        if not self._started:
            manual = self._parts
            if manual is not None:  # driven by run_due()
                await drain(self._tasks, manual, asyncio.get_running_loop().time() + 5)
                await self._tasks.cancel_loops()
                await manual.fleet.close()
                self._parts = self._wakeups = None
                if self._owns_backend:
                    await self.backend.close()
                    self._initialised = False
            return
        parts = self._parts
        assert parts is not None
        self._stopping = True
        parts.policy.stopping = True
        parts.claims.stopping = True
        parts.claims.cancel_retries()
        if self._wakeups is not None:
            self._wakeups.stop()
        await self._tasks.cancel_loops("anarchon-scheduler", "anarchon-members")
        await parts.candidates.leave(self.call_timeout_s)  # before hand-over: backups rank up
        if parts.keeper is not None:
            parts.keeper.drop_backups()
        loop = asyncio.get_running_loop()
        grace_end = loop.time() + self.stop_grace_ms / 1000
        budget_end = grace_end + self.call_timeout_s
        await drain_for_stop(
            self._tasks,
            parts,
            self.log,
            grace_end=grace_end,
            stop_grace_s=self.stop_grace_ms / 1000,
            call_timeout_s=self.call_timeout_s,
            lease_ms=self.lease_ms,
        )
        if parts.keeper is not None and parts.keeper.thread is not None:
            await parts.keeper.thread.stop(max(JOIN_S, budget_end - loop.time()))
        await self._tasks.cancel_loops()
        await parts.fleet.close()
        parts.executor.starts.clear()  # runs whose start renewal stop() made moot
        await self.events.stop()
        self._started = False
        self._parts = self._wakeups = None
        self.log.info("anarchon scheduler %s stopped", self.instance_id)
        if self._owns_backend:
            self._initialised = False
            await close_within(self.backend, self.log, max(JOIN_S, budget_end - loop.time()))

    async def _still_owner(self, run: Run) -> bool:
        parts = self._parts
        if parts is None or parts.keeper is None:
            return False
        return await parts.keeper.still_owner(run)

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
        """Run a job's handler here and now, record it as a manual run and return its record.

        A store error that is not transient is raised with its code.
        """
        job = self._job(name)
        await self._ensure_init()
        policy = self._policy()
        if not self._started:
            await sync_under(self._time, policy)
        return await run_manually(
            job,
            backend=self.backend,
            policy=policy,
            instance_id=self.instance_id,
            token=new_token(),
            now_ms=self._time.now_ms,
            tasks=self._tasks,
            log=self.log,
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

    # Fleet-wide controls (docs/fleet.md, "Pause, resume and skip") ----

    async def pause(self, name: str) -> JobControl:
        """Pause job ``name`` on every instance sharing the store (within one wake-up).

        Each slot that falls due while paused is claimed as usual and recorded
        once, by the winner, as ``skipped`` with reason ``paused``.
        """
        await self._ensure_init()
        return await pause_job(self.backend, self._job(name).name, self.instance_id)

    async def resume(self, name: str) -> JobControl:
        """Resume job ``name`` on every instance.

        Slots skipped while paused stay skipped; with ``catch_up`` (lease
        backends), the newest of them within ``catch_up`` of the resume runs
        once, at slot ``resumed_at`` (docs/fleet.md, "Pause, resume and skip").
        """
        await self._ensure_init()
        return await resume_job(self.backend, self._job(name).name, self.instance_id)

    async def skip_next(self, name: str, count: int = 1) -> JobControl:
        """Skip ``count`` slots of job ``name`` on every instance (reason ``skip_next``).

        The first is the first slot no instance can have claimed under the old
        controls (default ``claim_ahead`` and ``control_cache``; docs/fleet.md).
        """
        job = self._job(name)
        await self._ensure_init()
        control, _ = await skip_slots(self.backend, name, job.schedule, count, self.instance_id)
        return control

    def _on_drift(self, job: str, fingerprints: dict[str, int]) -> None:
        """Instances declare different schedules for ``job``: emit ``schedule_drift`` once.

        ``fingerprints`` maps each fingerprint to the number of instances that hold it.
        """
        parts = self._parts
        report_drift(
            self.log,
            self.events,
            self.instance_id,
            self._jobs.get(job),
            job,
            fingerprints,
            parts.fleet if parts is not None else None,
            self._time.now_ms(),
        )

    # Internals -------------------------------------------------------

    def _every_task(self) -> list[asyncio.Task[Any]]:
        """Every task of this scheduler, handlers included (tests end them to simulate a crash)."""
        handlers = self._parts.executor.tasks_running() if self._parts is not None else set()
        return [*self._tasks.all(), *handlers]

    def _job(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise InvalidJobError(f"no job named {name!r} is registered") from None

    async def _ensure_init(self) -> None:
        if not self._initialised:
            await self.backend.init()
            self._initialised = True

    def _clock_source(self) -> Callable[[], Awaitable[int | None]]:
        runs = self._runs
        return runs.now_ms if runs is not None else self.backend.now_ms

    def _now_ms(self) -> int:
        """Store time as this instance estimates it."""
        return self._time.now_ms()

    def _policy(self) -> StorePolicy:
        """The running scheduler's policy, or a fresh one for a call outside ``start()``."""
        if self._parts is not None:
            return self._parts.policy
        return self._new_policy()

    @property
    def call_timeout_s(self) -> float:
        """The per-call timeout of every store call (docs/leases.md, "Stopping").

        One heartbeat interval on lease backends (a renewal slower than that
        is already late); :data:`~anarchon._scheduler.store_retry.DEFAULT_CALL_TIMEOUT_S`
        otherwise. A claim's timeout is cut short by its slot's deadline.
        """
        return self.heartbeat_ms / 1000 if self.leases else DEFAULT_CALL_TIMEOUT_S

    def _new_policy(self) -> StorePolicy:
        policy = StorePolicy(
            self.backend,
            self._store_log,
            self._time.now_ms,
            self.max_in_flight,
            self.call_timeout_s,
        )
        policy.events = self.events
        return policy

    async def _activate(self, job: Job) -> None:
        """Prepare a job in the store, then put it in the timetable.

        At ``start()`` a permanent error is raised; for a job added while
        running it is logged once at ERROR and the job is unregistered.
        """
        parts = self._parts
        if parts is None:  # stopped before the activation ran
            return
        try:
            prepared = await parts.policy.complete(
                lambda: self.backend.prepare_job(job.name, job.history_size)
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not self._started:
                raise
            parts.policy.report("prepare_job", error, job=job.name)
            if self._jobs.get(job.name) is job:
                del self._jobs[job.name]  # not scheduled: a later add() may try again
            return
        if not prepared or self._jobs.get(job.name) is not job or not job.enabled:
            return
        if self._parts is parts:
            parts.wakeups.add_job(job)
            if self._started:  # added while running: declare it now (start() declares all at once)
                self._tasks.spawn(parts.fleet.declare([job]), "anarchon-fleet-declare")


use_scheduler_type(Scheduler)
