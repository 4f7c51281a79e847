"""The status page's answer cache: one store read per page and refresh period, however many readers.

Every open tab polls ``api/status`` each refresh period; the answer of a key
(page, page size, whether errors are shown) is built once, shared by the
requests that arrive while it is being built, and served for ``ttl_s``. A
read that fails is not kept. A write (pause, resume) clears the cache.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable

__all__ = ["AnswerCache"]


class AnswerCache:
    """At most ``size`` answers, each kept ``ttl_s`` seconds after it was asked for."""

    def __init__(self, ttl_s: float, size: int = 64) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._entries: dict[Hashable, tuple[float, asyncio.Task[bytes]]] = {}

    def clear(self) -> None:
        """Forget every answer (the next request reads the store)."""
        self._entries.clear()

    async def get(self, key: Hashable, build: Callable[[], Awaitable[bytes]]) -> bytes:
        """The answer of ``key``: a fresh one being built or kept, else ``build()``'s."""
        now = time.monotonic()
        loop = asyncio.get_running_loop()
        entry = self._entries.get(key)
        if entry is not None and now - entry[0] < self.ttl_s:
            kept = entry[1]
            if kept.done() and not kept.cancelled() and kept.exception() is None:
                return kept.result()
            if not kept.done() and kept.get_loop() is loop:
                return await asyncio.shield(kept)
        self._evict(now)

        async def run() -> bytes:
            return await build()

        task = loop.create_task(run())
        self._entries[key] = (now, task)
        task.add_done_callback(lambda done: self._forget_failed(key, done))
        return await asyncio.shield(task)

    def _forget_failed(self, key: Hashable, task: asyncio.Task[bytes]) -> None:
        failed = task.cancelled() or task.exception() is not None
        if failed and key in self._entries and self._entries[key][1] is task:
            del self._entries[key]

    def _evict(self, now: float) -> None:
        for key in [k for k, (born, _) in self._entries.items() if now - born >= self.ttl_s]:
            del self._entries[key]
        while len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]
