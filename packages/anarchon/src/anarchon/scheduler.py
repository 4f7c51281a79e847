"""The :class:`Scheduler`: declares jobs and wires the parts that claim and run their slots.

Each behaviour lives in one module:

- :mod:`anarchon.wakeup`: the wake-up loop over the timetable;
- :mod:`anarchon.claims`: the claim batcher (``claim_many`` in chunks);
- :mod:`anarchon.executor`: the run executor (handlers, timeouts, cancellation);
- :mod:`anarchon.results`: the result batcher (``finish_many``, ``save_results``);
- :mod:`anarchon.leases`: the lease keeper (``heartbeat_many``, backups);
- :mod:`anarchon.store_retry`: the store retry policy and the in-flight bound;
- :mod:`anarchon.store_time`: store time (store clock at the last sync + monotonic time);
- :mod:`anarchon.run_state`: the state of one run.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from anarchon.backend import Backend, RunStore
from anarchon.claims import ClaimBatcher
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
from anarchon.events import EventBus, Listener
from anarchon.executor import RunExecutor
from anarchon.jobs import Handler, Job, build_job
from anarchon.leases import LeaseKeeper
from anarchon.registry import ENV_VAR, resolve_backend
from anarchon.results import ResultBatcher
from anarchon.run_state import Ending, Phase, Run
from anarchon.scheduler_thread import SchedulerThread
from anarchon.schedules import Cron, Every, Schedule
from anarchon.store_batches import StoreBatches
from anarchon.store_retry import GAVE_UP, StorePolicy
from anarchon.store_time import StoreTime
from anarchon.tasks import TaskSet
from anarchon.types import ClaimInput, RunRecord, StoredResult
from anarchon.wakeup import WakeUpLoop

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "Scheduler", "SchedulerThread"]

T = TypeVar("T")
H = TypeVar("H", bound=Handler)

_UNSET: Any = object()
_PREPARE_BATCH = 256

DEFAULT_MAX_IN_FLIGHT = 8
"""Store operations one scheduler has in flight at most, unless ``max_in_flight`` says otherwise."""


def _default_instance_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"


_TOKEN_PREFIX = secrets.token_hex(8)
_token_counter = itertools.count(1)


def _new_token() -> str:
    """A claim token unique to this attempt: a random per-process prefix plus a counter.

    Uniqueness is all a token needs; this avoids a system call per claim.
    """
    return f"{_TOKEN_PREFIX}{next(_token_counter):x}"


class _Parts:
    """The running parts of a started scheduler (built by ``start()``, dropped by ``stop()``)."""

    def __init__(
        self,
        policy: StorePolicy,
        claims: ClaimBatcher,
        executor: RunExecutor,
        results: ResultBatcher,
        keeper: LeaseKeeper | None,
        wakeups: WakeUpLoop,
    ) -> None:
        self.policy = policy
        self.claims = claims
        self.executor = executor
        self.results = results
        self.keeper = keeper
        self.wakeups = wakeups


class Scheduler:
    """Runs recurring jobs so that, across every instance sharing a backend, each slot runs once.

    ``max_in_flight`` bounds the store operations this scheduler has in flight
    at once (a batch call counts as one; default :data:`DEFAULT_MAX_IN_FLIGHT`):
    keep it at or below the connection pool of a client you hand in.

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
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        self._owns_backend = not isinstance(backend, Backend)
        self._implicit_memory = backend is None and not os.environ.get(ENV_VAR, "").strip()
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
        if (
            isinstance(max_in_flight, bool)
            or not isinstance(max_in_flight, int)
            or max_in_flight < 1
        ):
            raise InvalidConfigError(
                f"max_in_flight must be an integer >= 1, got {max_in_flight!r}"
            )
        self.max_in_flight = max_in_flight
        if instance_id is not None and (not isinstance(instance_id, str) or not instance_id):
            raise InvalidConfigError("instance_id must be a non-empty string")
        self.instance_id = instance_id or _default_instance_id()
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
        self._parts: _Parts | None = None
        self._wakeups: WakeUpLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._stopping = False
        self._initialised = False

    # Registration ----------------------------------------------------

    @property
    def jobs(self) -> dict[str, Job]:
        """The registered jobs, by name (a copy)."""
        return dict(self._jobs)

    def on(self, kind: str, callback: Listener) -> Callable[[], None]:
        """Call ``callback(event)`` (sync or async) for each event of ``kind``; returns an unsubscribe function.

        The kinds are in :data:`anarchon.events.EVENT_KINDS`; delivery is off the
        scheduling path (docs/operations.md, "Events").
        """
        return self.events.on(kind, callback)

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
            self._on_loop(lambda: self._tasks.spawn(self._activate(job), "anarchon-activate"))
        return job

    def remove(self, name: str) -> bool:
        """Remove a job; runs in progress finish. True if it was registered."""
        job = self._jobs.pop(name, None)
        if job is None:
            return False
        wakeups = self._wakeups
        if wakeups is not None:
            self._on_loop(lambda: wakeups.remove_job(name))
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
        from anarchon import _core

        if self._implicit_memory:
            self.log.warning(
                "anarchon: no backend given and %s is not set: using memory://, so every"
                " instance runs every job on its own; pass backend=... or set %s to share a store",
                ENV_VAR,
                ENV_VAR,
            )
        await self._ensure_init()
        self._stopping = False
        parts = self._build(_core.Timetable(self.instance_id))
        try:
            await self._time.sync()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not parts.policy.is_transient(error):
                raise
            parts.policy.note_outage(error)
            self._time.postpone()
        self._parts = parts
        self._wakeups = parts.wakeups
        self._loop = asyncio.get_running_loop()
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
        self._started = True
        self.events.start()
        self._tasks.spawn_loop(parts.wakeups.run(), "anarchon-scheduler")
        if parts.keeper is not None:
            self._tasks.spawn_loop(parts.keeper.run(), "anarchon-heartbeats")
        self.log.info(
            "anarchon scheduler %s started on %s with %d job(s)",
            self.instance_id,
            self.backend.name,
            len(self._jobs),
        )

    def _build(self, timetable: Any) -> _Parts:
        """The parts of a started scheduler, wired to each other."""
        policy = StorePolicy(self.backend, self._store_log, self._time.now_ms, self.max_in_flight)
        policy.events = self.events
        batches = StoreBatches(self.backend, policy)
        tasks = self._tasks
        results: ResultBatcher
        executor = RunExecutor(
            instance_id=self.instance_id,
            now_ms=self._time.now_ms,
            tasks=tasks,
            log=self.log,
            on_ended=lambda run, outcome: results.submit(run, outcome),
        )
        results = ResultBatcher(
            instance_id=self.instance_id,
            batches=batches,
            policy=policy,
            clock=self.clock,
            tasks=tasks,
            log=self.log,
            on_stored=executor.ended,
        )
        keeper: LeaseKeeper | None = None
        claims: ClaimBatcher

        def backup(run: Run, lease_expires_at: int | None) -> None:
            assert keeper is not None
            keeper.add_backup(run, lease_expires_at)

        claims = ClaimBatcher(
            instance_id=self.instance_id,
            lease_ms=self.lease_ms,
            batches=batches,
            policy=policy,
            clock=self.clock,
            tasks=tasks,
            log=self.log,
            on_won=executor.start,
            on_backup=backup,
        )
        if self._runs is not None:
            keeper = LeaseKeeper(
                lease_ms=self.lease_ms,
                heartbeat_ms=self.heartbeat_ms,
                batches=batches,
                policy=policy,
                clock=self.clock,
                store_now=self._time.now_ms,
                active=executor.active,
                log=self.log,
                cancel=executor.cancel,
                recheck=claims.submit,
                tasks=tasks,
            )
        leased = self._runs is not None
        wakeups = WakeUpLoop(
            timetable=timetable,
            jobs=self._jobs,
            store_time=self._time,
            policy=policy,
            leases=leased,
            log=self.log,
            new_run=lambda job, slot, deadline: Run(
                job, slot, _new_token(), deadline, leased=leased
            ),
            submit=claims.submit,
        )
        claims.events = executor.events = results.events = wakeups.events = self.events
        if keeper is not None:
            keeper.events = self.events
        return _Parts(policy, claims, executor, results, keeper, wakeups)

    async def stop(self) -> None:
        """Stop claiming, wait ``stop_grace`` for running handlers, then hand the rest over."""
        if not self._started:
            return
        parts = self._parts
        assert parts is not None
        self._stopping = True
        parts.policy.stopping = True
        parts.claims.stopping = True
        await self._tasks.cancel_loops("anarchon-scheduler")
        if parts.keeper is not None:
            parts.keeper.drop_backups()
        loop = asyncio.get_running_loop()
        grace_end = loop.time() + self.stop_grace_ms / 1000
        if not await self._drain(parts, grace_end):
            for run in list(parts.executor.active.values()):
                if run.phase is Phase.RUNNING:
                    if run.leased and run.ending is None:
                        run.ending = Ending.HAND_OVER
                    parts.executor.cancel(run, "stop")
            for task in self._tasks.work():
                if task.get_name() != "anarchon-results":
                    task.cancel()
            await self._drain(parts, loop.time() + max(5.0, self.lease_ms / 1000))
        await self._tasks.cancel_loops()
        await self.events.stop()
        self._started = False
        self._parts = self._wakeups = None
        self.log.info("anarchon scheduler %s stopped", self.instance_id)
        if self._owns_backend:
            await self.backend.close()
            self._initialised = False

    async def _drain(self, parts: _Parts, until: float) -> bool:
        """Wait until no run and no store work is left, or the loop time ``until``."""
        loop = asyncio.get_running_loop()
        while True:
            parts.results.flush()
            work = self._tasks.work() | parts.executor.tasks_running()
            if not work and not parts.executor.active:
                return True
            left = until - loop.time()
            if left <= 0:
                return False
            if work:
                await asyncio.wait(work, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(min(left, 0.005))

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
            await self._sync_for_call(policy)
        token = _new_token()
        slot = self._time.now_ms()
        claim = ClaimInput(
            name, slot, token, self.instance_id, job.history_size, job.history_ttl_ms
        )
        chosen = await policy.call(lambda: self.backend.record_manual_run(claim))
        if chosen is GAVE_UP:
            raise _gave_up(self.backend)
        if chosen is not None:
            slot = chosen
        run = Run(job, slot, token, slot, leased=False)
        run.attempt = 1
        run.ctx = RunContext(name, slot, self.instance_id, 1, token, manual=True)
        run.task = asyncio.current_task()
        executor = RunExecutor(
            instance_id=self.instance_id,
            now_ms=self._time.now_ms,
            tasks=self._tasks,
            log=self.log,
            on_ended=lambda _run, _outcome: None,
        )
        status, error, started, finished = await executor.invoke(run)
        result = StoredResult(
            slot, token, self.instance_id, status, started, finished, error, 1, True
        )
        saved = await policy.complete(
            lambda: self.backend.save_result(name, result, job.history_size, job.history_ttl_ms)
        )
        if not saved:
            raise _gave_up(self.backend)
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
        return StorePolicy(self.backend, self._store_log, self._time.now_ms, self.max_in_flight)

    async def _sync_for_call(self, policy: StorePolicy) -> None:
        try:
            await self._time.sync()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not policy.is_transient(error):
                raise
            policy.note_outage(error)

    async def _activate(self, job: Job) -> None:
        """Prepare a job in the store, then put it in the timetable.

        At ``start()`` a permanent error is raised; for a job added while
        running it is logged once at ERROR and the job is unregistered.
        """
        parts = self._parts
        assert parts is not None
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


def _gave_up(backend: Backend) -> Exception:
    from anarchon.errors import BackendUnavailableError

    return BackendUnavailableError(f"store {backend.name} unreachable while stopping")


def _config_ms(value: Duration, what: str, *, allow_zero: bool = False) -> int:
    try:
        return to_ms(value, what=what, allow_zero=allow_zero)
    except InvalidJobError as error:
        raise InvalidConfigError(error.message) from None
