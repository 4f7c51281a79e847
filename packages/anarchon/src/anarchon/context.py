"""What a handler receives: :class:`RunContext` and its thread-safe cancellation signal."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from anarchon.errors import InvalidConfigError

__all__ = ["CancelSignal", "OwnerCheck", "RunContext"]

OwnerCheck = Callable[[], Awaitable[bool]]
"""Asks the store whether this attempt still holds its lease (runs on the scheduler's loop)."""


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
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] | None = None
        """Made by the first ``wait()`` (most runs are never waited on: one object less each)."""

    def is_set(self) -> bool:
        """True once the run should stop."""
        return self._set

    def __bool__(self) -> bool:
        """``is_set()``: ``if ctx.cancelled:`` reads as it should."""
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
            waiters, self._waiters = self._waiters, None
        if event is not None:
            event.set()
        for loop, future in waiters or ():
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
            if self._waiters is None:
                self._waiters = []
            self._waiters.append((loop, future))
        await future

    def raise_if_set(self) -> None:
        """Raise ``asyncio.CancelledError`` if set: the handler stops without completing its run.

        A handler that returns normally has completed its run, even after a
        cancellation, and the run is finished with its result; one that ends
        by raising is not: on ``stop()`` its run is handed over to another
        instance (docs/leases.md, "Stopping"). A sync handler that stops early
        calls this (an async handler lets its task's ``CancelledError`` through).
        """
        if self._set:
            raise asyncio.CancelledError(self._reason)

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


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _ask(check: OwnerCheck) -> bool:
    return await check()


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
    """The claim token of this attempt: unique per attempt, part of :attr:`fencing_key`."""
    manual: bool = False
    cancelled: CancelSignal = field(default_factory=CancelSignal)
    owner_check: OwnerCheck | None = field(default=None, repr=False, compare=False)
    """Set by the scheduler on lease backends; see :meth:`still_owner`."""
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False, compare=False)
    """The scheduler's event loop (for :meth:`still_owner_sync`)."""
    catch_up_of: int | None = None
    """The paused slot (epoch ms) this run stands for, when it is the catch-up run after
    ``resume`` (its own ``slot`` is then the resume's store time, docs/fleet.md,
    "Pause, resume and skip"); None for every other run."""

    @property
    def fencing_token(self) -> int:
        """A number that strictly increases with each attempt of this slot (docs/leases.md, "Fencing").

        It is the attempt number the store gave this run: 1 for the first
        attempt, 2 for the backup that took over, and so on. A failover that
        loses a claim can hand the slot out again as attempt 1: guard writes
        with :attr:`fencing_key`, which tells those two attempts apart.
        """
        return self.attempt

    @property
    def fencing_key(self) -> tuple[int, str]:
        """``(attempt, claim token)``: what a fenced write presents (docs/leases.md, "Fencing").

        Store both with the side effect, keyed by :attr:`run_id`. A write is
        refused when the stored attempt is higher, and also when it is the
        same attempt with another token: after a failover that lost the
        first claim, a second instance can win the slot again as attempt 1,
        with a token of its own. The token is unique per attempt (a retry or
        a takeover gets a new one).
        """
        return (self.attempt, self.token)

    async def still_owner(self) -> bool:
        """Ask the store whether this attempt still holds the lease of its run.

        False once the lease is lost (locally expired, or another attempt
        owns the run) or the run was cancelled because its lease was lost.
        On backends without leases, and for manual runs, there is no takeover:
        True unless the run was cancelled. Call it right before a side
        effect; it costs one store round trip (docs/leases.md, "Fencing").
        """
        check = self.owner_check
        if check is None:
            return self.cancelled.reason != "lease_lost"
        loop = self.loop
        if loop is None or loop is _running_loop():
            return await check()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_ask(check), loop))

    def still_owner_sync(self, timeout: float | None = None) -> bool:
        """:meth:`still_owner` for sync handlers (from a worker thread, not the event loop).

        Waits at most ``timeout`` seconds for the store (None: as long as the
        call takes, which the scheduler bounds); a store that does not answer
        in time counts as False: the attempt cannot prove it still owns the run.
        """
        check = self.owner_check
        if check is None:
            return self.cancelled.reason != "lease_lost"
        loop = self.loop
        if loop is None or loop is _running_loop():
            raise InvalidConfigError(
                "still_owner_sync() blocks: call it from a sync handler's thread;"
                " an async handler awaits ctx.still_owner()"
            )
        future = asyncio.run_coroutine_threadsafe(_ask(check), loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return False

    @property
    def scheduled_at(self) -> datetime:
        """The slot as an aware UTC datetime."""
        return datetime.fromtimestamp(self.slot / 1000, tz=timezone.utc)

    @property
    def run_id(self) -> str:
        """``"<job>:<slot>"``: the idempotency key of the run's side effects.

        The same for every attempt of the slot, on every instance, and after
        a failover: a side effect keyed on it (an upsert, a message id, a
        unique constraint) happens once however often the slot runs
        (docs/durability.md, "Side effects").
        """
        return f"{self.job}:{self.slot}"
