"""Running a :class:`~anarchon.Scheduler` on its own event loop in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["SchedulerThread"]


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
