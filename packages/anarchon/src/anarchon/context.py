"""What a handler receives: :class:`RunContext` and its thread-safe cancellation signal."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone

__all__ = ["CancelSignal", "RunContext"]


class CancelSignal:
    """A cancellation flag usable from the event loop and from worker threads.

    ``is_set()`` and ``wait_sync(timeout)`` work in any thread; ``await wait()``
    works in any event loop. Cheap to create: the thread primitives are made
    only when someone waits.
    """

    __slots__ = ("_event", "_reason", "_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._reason: str | None = None
        self._event: threading.Event | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def is_set(self) -> bool:
        """True once the run should stop."""
        return self._set

    @property
    def reason(self) -> str | None:
        """Why the run was cancelled: ``lease_lost``, ``timeout``, ``stop``..."""
        return self._reason

    def set(self, reason: str = "cancelled") -> None:
        """Signal cancellation (idempotent; the first reason is kept)."""
        with _LOCK:
            if self._set:
                return
            self._reason = reason
            self._set = True
            event = self._event
            waiters, self._waiters = self._waiters, []
        if event is not None:
            event.set()
        for loop, future in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)

    async def wait(self) -> None:
        """Wait until the signal is set."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with _LOCK:
            if self._set:
                return
            self._waiters.append((loop, future))
        await future

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block the calling thread until set (or ``timeout``); for sync handlers."""
        with _LOCK:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


_LOCK = threading.Lock()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass
class RunContext:
    """Everything a handler knows about the run it is executing."""

    job: str
    slot: int
    instance_id: str
    attempt: int
    token: str
    manual: bool = False
    cancelled: CancelSignal = field(default_factory=CancelSignal)

    @property
    def scheduled_at(self) -> datetime:
        """The slot as an aware UTC datetime."""
        return datetime.fromtimestamp(self.slot / 1000, tz=timezone.utc)

    @property
    def run_id(self) -> str:
        """``"<job>:<slot>"``: stable across attempts, for the user's idempotency keys."""
        return f"{self.job}:{self.slot}"
