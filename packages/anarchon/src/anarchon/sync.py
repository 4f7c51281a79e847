"""anarchon for sync programs: :class:`SyncScheduler` and :class:`SchedulerThread` (docs/sync.md).

The scheduler runs on its own event loop in a background thread; every
method here is a plain blocking call, safe from any thread, that runs the
matching coroutine on that loop. A backend's connections are opened on the
scheduler's loop and only ever used there, so reads from a Django or Flask
request thread never touch a connection of another loop.

Layering: :mod:`anarchon.scheduler` imports this module (``start_in_thread()``
returns a :class:`SchedulerThread`), so this module does not import it back.
The class that ``SyncScheduler(backend, **options)`` builds is handed in by
:mod:`anarchon.scheduler` through :func:`use_scheduler_type` when it is
imported (``import anarchon`` always imports it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from anarchon._scheduler.declaring import JobDeclarations
from anarchon.errors import InvalidConfigError
from anarchon.job_options import JobOptions
from anarchon.jobs import Handler, Job
from anarchon.schedules import Schedule
from anarchon.types import RunRecord

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from anarchon.scheduler import Scheduler

__all__ = ["SchedulerLoop", "SchedulerThread", "SyncScheduler", "use_scheduler_type"]

T = TypeVar("T")
H = TypeVar("H", bound=Handler)

_scheduler_type: type[Scheduler] | None = None
"""The class ``SyncScheduler(backend, **options)`` builds (set once by :mod:`anarchon.scheduler`)."""


def use_scheduler_type(kind: type[Scheduler]) -> None:
    """Build ``kind`` for ``SyncScheduler(backend, **options)``; :mod:`anarchon.scheduler` passes ``Scheduler``."""
    global _scheduler_type
    _scheduler_type = kind


class SchedulerLoop:
    """An event loop in a daemon thread that a :class:`Scheduler` lives on.

    It starts with the first call and runs until :meth:`close`. Coroutines are
    handed to it with :meth:`call`, from any thread but its own.
    """

    def __init__(self, name: str = "anarchon-scheduler") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """True while the loop's thread runs."""
        return self._loop is not None and not self._loop.is_closed()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (started on first use)."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                ready = threading.Event()
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=self._serve, args=(loop, ready), name=self._name, daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def call(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float | None = None) -> T:
        """Run ``make()`` on the loop and wait for its result (or ``timeout`` seconds)."""
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise InvalidConfigError(
                "a sync scheduler method was called on the scheduler's own event loop;"
                " await the Scheduler's async method instead"
            )
        future = asyncio.run_coroutine_threadsafe(_awaited(make), loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the scheduler did not answer within {timeout} s") from None

    def close(self, timeout: float | None = None) -> None:
        """Stop the loop and wait for its thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


class SyncScheduler(JobDeclarations):
    """A :class:`Scheduler` used from sync code, with no asyncio in sight.

    >>> scheduler = SyncScheduler(backend="memory://", instance_id="web-1")
    >>> @scheduler.every("tick", "10s")
    ... def tick(ctx) -> None: ...

    ``start()`` returns once the scheduler runs on its own thread; ``stop()``
    hands running work over like ``Scheduler.stop()``. Reads (``history()``,
    ``last_run()``) and ``run_now()`` work before ``start()`` too. Jobs are
    declared with the same decorators and options as :class:`Scheduler`; the
    async scheduler is ``.scheduler``.
    """

    def __init__(
        self, backend: Any = None, *, scheduler: Scheduler | None = None, **options: Any
    ) -> None:
        if scheduler is not None and (backend is not None or options):
            raise InvalidConfigError("pass either scheduler= or the Scheduler's own arguments")
        if scheduler is None:
            assert _scheduler_type is not None, "anarchon.scheduler registers it on import"
            scheduler = _scheduler_type(backend, **options)
        self.scheduler: Scheduler = scheduler
        self._runner = SchedulerLoop()
        self._running = False

    # Declaring jobs (no loop needed) ----------------------------------

    @property
    def jobs(self) -> dict[str, Job]:
        """The registered jobs, by name (a copy)."""
        return self.scheduler.jobs

    def on(self, kind: str, callback: Callable[[Any], Any]) -> Callable[[], None]:
        """``Scheduler.on``: call ``callback(event)`` for each event of ``kind``; returns an unsubscribe function."""
        return self.scheduler.on(kind, callback)

    @property
    def instance_id(self) -> str:
        """This instance's id."""
        return self.scheduler.instance_id

    def add(
        self, name: str, schedule: Schedule, handler: Handler, **options: Unpack[JobOptions]
    ) -> Job:
        """``Scheduler.add``, run on the scheduler's loop once started."""
        if not self._running:
            return self.scheduler.add(name, schedule, handler, **options)
        return self._runner.call(
            _wrap(lambda: self.scheduler.add(name, schedule, handler, **options))
        )

    def remove(self, name: str) -> bool:
        """``Scheduler.remove``; runs in progress finish."""
        if not self._running:
            return self.scheduler.remove(name)
        return self._runner.call(_wrap(lambda: self.scheduler.remove(name)))

    # Lifecycle ---------------------------------------------------------

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``stop()``."""
        return self._running

    def start(self) -> None:
        """Start the scheduler on its own thread; raises what ``Scheduler.start()`` raises."""
        if self._running:
            raise InvalidConfigError("scheduler already started")
        self._runner.call(self.scheduler.start)
        self._running = True

    def stop(self, timeout: float | None = None) -> None:
        """Stop with hand-over (``Scheduler.stop``), close the backend's connections, end the thread.

        The connections were opened on the scheduler's loop and cannot outlive
        it, so they are closed here even when the backend was passed in.
        """
        was_running, self._running = self._running, False
        if self._runner.started:
            self._runner.call(lambda: self._shutdown(was_running), timeout)
        self._runner.close(timeout)

    async def _shutdown(self, was_running: bool) -> None:
        if was_running:
            await self.scheduler.stop()
        await self.scheduler.close()

    def __enter__(self) -> SyncScheduler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # Reads and manual runs ---------------------------------------------

    def history(self, name: str, limit: int = 20, timeout: float | None = None) -> list[RunRecord]:
        """``Scheduler.history``: recent runs of a job on all instances, newest first."""
        return self._runner.call(lambda: self.scheduler.history(name, limit), timeout)

    def last_run(self, name: str, timeout: float | None = None) -> RunRecord | None:
        """``Scheduler.last_run``: the newest run of a job, or None."""
        return self._runner.call(lambda: self.scheduler.last_run(name), timeout)

    def run_now(self, name: str, timeout: float | None = None) -> RunRecord:
        """``Scheduler.run_now``: run the handler here and now, recorded as a manual run."""
        return self._runner.call(lambda: self.scheduler.run_now(name), timeout)


class SchedulerThread(SyncScheduler):
    """A scheduler running on its own event loop in a daemon thread (see ``start_in_thread``).

    Every method of :class:`~anarchon.SyncScheduler` works on it, from any
    thread: ``history()``, ``last_run()``, ``run_now()``, ``add()``,
    ``remove()`` and ``stop()`` (docs/sync.md).
    """

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler=scheduler)


def _wrap(action: Callable[[], T]) -> Callable[[], Coroutine[Any, Any, T]]:
    async def run() -> T:
        return action()

    return run
