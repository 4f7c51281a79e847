"""The lease thread: renews leases from its own thread, event loop and backend connection.

Heartbeats that share the handlers' event loop stop when a handler blocks
that loop (an ``async def`` handler calling ``time.sleep``): the lease
expires and a backup starts beside the blocked handler. The
:class:`LeaseThread` renews the leases of the runs still live from a thread
of its own, with its own loop and its own backend (``Backend.clone()``, or a
second backend built from the same URL), so a blocked loop cannot lose them.

After ``stop()`` it keeps running while runs whose sync handler outlived
``stop()`` (:mod:`anarchon._scheduler.outlived`) still need it: it renews
their leases until their threads return, then stores their ends.

It also watches the scheduler's loop: a loop that has not ticked for longer
than one heartbeat interval is a stall, logged once, as a stall, with the run
that was executing on it; its end is logged too.

Everything that changes scheduler state (a refused renewal, an outage) is
handed back to the scheduler's loop with ``call_soon_threadsafe``; the
thread only writes ``Run.lease_until`` (a float: one atomic store).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from anarchon._scheduler.outlived import OutlivedRun, end_outlived
from anarchon._scheduler.run_state import Run
from anarchon._scheduler.store_retry import CallTimeoutError, describe_error
from anarchon.backend.base import Backend
from anarchon.types import RunKey

__all__ = ["LeaseThread"]

_POLL_S = 0.05
"""How often the thread looks at the scheduler's loop and at its own schedule, at most."""
_START_RETRY_S = 0.25
"""How soon a start renewal that failed (a store outage) is sent again."""


class LeaseThread:
    """Renews held leases off the scheduler's loop; detects stalls of that loop."""

    def __init__(
        self,
        *,
        backend: Backend,
        owns_backend: bool,
        lease_ms: int,
        heartbeat_ms: int,
        local_lease_s: float,
        call_timeout_s: float,
        active: dict[tuple[str, int], Run],
        log: logging.Logger,
        on_refused: Callable[[Sequence[Run]], None],
        on_error: Callable[[tuple[Sequence[Run], BaseException | None]], None],
        starts: deque[Run] | None = None,
    ) -> None:
        self.backend = backend
        self.owns_backend = owns_backend
        self.lease_ms = lease_ms
        self.interval_s = heartbeat_ms / 1000
        self.local_lease_s = local_lease_s
        self.call_timeout_s = call_timeout_s
        self.active = active
        self.log = log
        self.on_refused = on_refused
        self.on_error = on_error
        """Called on the scheduler's loop with ``(runs, error)``; ``error`` None: renewed."""
        self.starts: deque[Run] = deque() if starts is None else starts
        """Runs with a short lease whose handler started (appended on the scheduler's loop):
        renewed within one poll, together (the start renewal, docs/leases.md)."""
        self.last_tick = time.monotonic()
        """Monotonic time of the scheduler loop's last tick (written on that loop)."""
        self._main: asyncio.AbstractEventLoop | None = None
        self._tick_handle: asyncio.TimerHandle | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stalled_since: float | None = None
        self._outlived: list[OutlivedRun] = []
        """Runs left here by ``stop()`` (appended on the scheduler's loop, read here)."""
        self._outlived_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        """The thread's own loop (set in the thread)."""
        self._wake: asyncio.Event | None = None
        """Set by :meth:`poke` to end the thread's poll early."""

    # On the scheduler's loop ------------------------------------------------

    def start(self) -> None:
        """Start the thread and the loop's tick (call on the scheduler's loop)."""
        self._main = asyncio.get_running_loop()
        self._tick()
        self._thread = threading.Thread(
            target=self._thread_main, name="anarchon-lease-keeper", daemon=True
        )
        self._thread.start()

    def _tick(self) -> None:
        self.last_tick = time.monotonic()
        loop = self._main
        if loop is not None and not self._stop.is_set():
            self._tick_handle = loop.call_later(min(self.interval_s / 4, 0.25), self._tick)

    def poke(self) -> None:
        """Runs were added to :attr:`starts`: renew them now, not at the next poll."""
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(wake.set)

    def alive(self) -> bool:
        """True while the thread runs (it can take runs that outlive ``stop()``)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stop.is_set()

    def adopt(self, runs: Sequence[OutlivedRun]) -> None:
        """Keep renewing ``runs`` after ``stop()`` until their threads return, then end them."""
        with self._outlived_lock:
            self._outlived.extend(runs)

    async def stop(self, join_s: float) -> None:
        """Stop renewing the scheduler's runs; wait up to ``join_s`` for the thread.

        A thread stuck in a store call that does not return is left behind
        (it is a daemon thread and renews nothing more once it returns). With
        runs that outlived ``stop()`` the thread goes on until they end, and a
        non-daemon thread waits for it, so the interpreter does not exit before
        their ends are stored.
        """
        self._stop.set()
        self.starts.clear()  # their runs are ended by stop(); the deque must not keep them
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        thread = self._thread
        if thread is None:
            return
        if self._pending_outlived():
            threading.Thread(
                target=thread.join, name="anarchon-lease-keeper-wait", daemon=False
            ).start()
            return
        await asyncio.to_thread(thread.join, join_s)

    def _pending_outlived(self) -> list[OutlivedRun]:
        with self._outlived_lock:
            self._outlived = [run for run in self._outlived if not run.done]
            return list(self._outlived)

    # In the thread ------------------------------------------------------------

    def _thread_main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        try:
            if self.owns_backend:
                await self.backend.init()
            self._wake = wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            next_beat = time.monotonic()
            starting: list[Run] = []
            start_at = 0.0
            while not self._stop.is_set() or self._pending_outlived():
                now = time.monotonic()
                if not self._stop.is_set():
                    self._watch_loop(now)
                    starts = self.starts
                    while starts:
                        starting.append(starts.popleft())
                    if starting and now >= start_at:
                        due = [r for r in starting if r.short and r.holds_lease]
                        starting = []
                        if due and not await self._beat(due):
                            starting, start_at = due, time.monotonic() + _START_RETRY_S
                await self._end_outlived()
                if now >= next_beat:
                    held = [r for r in self._held(now) if r.needs_renewal(now, self.interval_s)]
                    next_beat = now + self.interval_s
                    if held and not await self._beat(held):
                        next_beat = time.monotonic() + self.interval_s / 4
                    if not await self._beat_outlived(now):
                        next_beat = time.monotonic() + self.interval_s / 4
                if self.starts:
                    continue
                wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(
                        wake.wait(), max(0.001, min(_POLL_S, next_beat - time.monotonic()))
                    )
        except Exception as error:  # never silently: heartbeats fall back to nothing
            self.log.error(
                "anarchon: the lease keeper thread failed: %s",
                describe_error(error),
                exc_info=error,
            )
        finally:
            self.starts.clear()
            if self.owns_backend:
                try:
                    await self.backend.close()
                except Exception as error:
                    self.log.debug("anarchon: closing the lease keeper's backend: %s", error)

    def _held(self, now: float) -> list[Run]:
        if self._stop.is_set():
            return []  # stop() ended the scheduler's runs; outlived ones are renewed apart
        for _ in range(3):
            try:
                runs = list(self.active.values())
                break
            except RuntimeError:  # changed size while copied
                continue
        else:
            return []
        return [run for run in runs if run.holds_lease and now < run.lease_until]

    async def _beat(self, held: list[Run]) -> bool:
        """Renew ``held`` in one ``heartbeat_many``; False after a transient error."""
        store = self.backend.runs
        assert store is not None
        keys = [RunKey(run.job.name, run.slot, run.token) for run in held]
        sent = time.monotonic()
        try:
            answers = await asyncio.wait_for(
                store.heartbeat_many(keys, self.lease_ms), self.call_timeout_s
            )
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            self._post(self.on_error, (held, CallTimeoutError(self.call_timeout_s)))
            return False
        except Exception as error:
            self._post(self.on_error, (held, error))
            return False
        self._post(self.on_error, (held, None))
        lease_until = sent + self.local_lease_s
        refused: list[Run] = []
        for run, key, ok in zip(held, keys, answers):  # noqa: B905 - a short answer renews fewer
            if run.token != key.token:
                continue  # a retry started the run's next attempt meanwhile (a new lease)
            if ok:
                if run.holds_lease:
                    run.lease_until = lease_until
                    run.short = False
            else:
                refused.append(run)
        if refused:
            self._post(self.on_refused, refused)
        return True

    async def _end_outlived(self) -> None:
        """Store the ends of outlived runs whose threads returned."""
        for run in self._pending_outlived():
            if run.thread.ended.is_set():
                await end_outlived(self.backend, run, self.call_timeout_s, self.log)

    async def _beat_outlived(self, now: float) -> bool:
        """Renew the leases of outlived runs still running; False after a transient error."""
        due = [
            run
            for run in self._pending_outlived()
            if not run.thread.ended.is_set() and run.lease_until - now <= 2 * self.interval_s
        ]
        if not due:
            return True
        store = self.backend.runs
        assert store is not None
        sent = time.monotonic()
        try:
            answers = await asyncio.wait_for(
                store.heartbeat_many([run.key for run in due], self.lease_ms), self.call_timeout_s
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.log.warning(
                "anarchon: renewing %d lease(s) of runs that outlived stop() failed: %s",
                len(due),
                describe_error(error),
            )
            return False
        for run, ok in zip(due, answers):  # noqa: B905 - a short answer renews fewer
            if ok:
                run.lease_until = sent + self.local_lease_s
            else:
                self.log.warning(
                    "anarchon: %s outlived stop() and lost its lease: another instance may run it",
                    run.describe(),
                    extra=run.extra(),
                )
                run.done = True
        return True

    def _watch_loop(self, now: float) -> None:
        """Log a stall of the scheduler's loop once, when it exceeds one heartbeat interval."""
        behind = now - self.last_tick
        if behind > self.interval_s:
            if self._stalled_since is None:
                self._stalled_since = self.last_tick
                self.log.warning(
                    "anarchon: loop stall: the scheduler's event loop has been blocked for %.1f s%s;"
                    " an async handler must not block (use a sync handler or asyncio.to_thread);"
                    " the lease keeper thread keeps the leases",
                    behind,
                    self._running_on_loop(),
                )
        elif self._stalled_since is not None:
            self.log.warning(
                "anarchon: loop stall over: the scheduler's event loop was blocked for %.1f s",
                self.last_tick - self._stalled_since,
            )
            self._stalled_since = None

    def _running_on_loop(self) -> str:
        loop = self._main
        task = asyncio.current_task(loop) if loop is not None else None
        if task is None:
            return ""
        for run in self._held(time.monotonic()) or []:
            if run.task is task:
                return f" while running {run.job.name} slot {run.slot} attempt {run.attempt}"
        return f" in task {task.get_name()}"

    def _post(self, action: Callable[..., None], arg: object) -> None:
        loop = self._main
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(action, arg)
