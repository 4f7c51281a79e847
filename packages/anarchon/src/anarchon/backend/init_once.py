""":class:`InitOnce`: the lock of an idempotent async ``init()`` (for backend authors).

A backend's ``init()`` may be awaited by many callers at once (the scheduler,
a history read, the lease thread's clone). The first one connects; the others
wait for it and then find the backend ready. The lock is an
:class:`asyncio.Lock`, which belongs to one event loop, so a backend used on
another loop later (after ``close()``, or from ``start_in_thread()``) gets a
fresh lock for that loop instead of an error.

    class MyBackend(Backend):
        def __init__(self) -> None:
            self._conn = None
            self._init = InitOnce()

        async def init(self) -> None:
            await self._init.run(lambda: self._conn is not None, self._connect)

        async def close(self) -> None:
            self._init.reset()
            ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

__all__ = ["InitOnce"]


class InitOnce:
    """Runs a backend's connect step once for concurrent callers, on any event loop."""

    __slots__ = ("_lock", "_loop")

    def __init__(self) -> None:
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def lock(self) -> asyncio.Lock:
        """The lock for the running loop (a new one when the loop changed since the last call).

        Also for other steps that must not overlap ``init()`` (e.g. reconfiguring
        the store). Call it from a coroutine.
        """
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock = asyncio.Lock()
            self._loop = loop
        return self._lock

    async def run(self, ready: Callable[[], bool], start: Callable[[], Awaitable[None]]) -> None:
        """Await ``start()`` unless ``ready()``; concurrent callers wait for the one that starts.

        ``ready()`` is checked before taking the lock (the fast path) and again
        under it, so ``start()`` runs at most once per not-ready period. If
        ``start()`` raises, the error reaches its caller and the next caller
        tries again.
        """
        if ready():
            return
        async with self.lock():
            if ready():
                return
            await start()

    def reset(self) -> None:
        """Forget the lock (``close()``): the next ``init()`` may run on a new loop."""
        self._lock = None
        self._loop = None
