"""The tasks one scheduler owns, tracked so ``stop()`` can wait for them and a crash test can end them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Iterable
from typing import Any, TypeVar

__all__ = ["TaskSet", "cancel_until_done", "gather_or_cancel"]

T = TypeVar("T")

RECANCEL_S = 0.1
"""How often :func:`cancel_until_done` cancels again a task that has not ended."""


async def gather_or_cancel(*awaitables: Awaitable[T]) -> list[T]:
    """Like ``asyncio.gather``, but when one fails the others are cancelled and awaited first.

    ``asyncio.gather`` raises the first error and leaves the others running: a
    caller that then closes the store under them (the CLI) turns them into
    errors nobody awaits ("Task exception was never retrieved").
    """
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def cancel_until_done(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait for them to end, cancelling again until each has.

    A cancellation can be lost below us: a store driver that is cancelled as
    its reply arrives may return the reply instead of raising (seen with
    redis-py on Python 3.11). A loop that lost it would go on for ever and a
    plain ``gather`` would wait for it for ever; the next cancellation lands
    at the loop's next wait.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=RECANCEL_S)


class TaskSet:
    """Tasks spawned by one scheduler; each leaves the set when it ends."""

    __slots__ = ("_loops", "_tasks")

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loops: dict[str, asyncio.Task[Any]] = {}

    def spawn(
        self, coro: Coroutine[Any, Any, Any], name: str = "anarchon-task"
    ) -> asyncio.Task[Any]:
        """Start ``coro`` as a task of this set (work: ``stop()`` waits for it)."""
        # The task owns ``coro`` itself (no wrapper coroutine): a task cancelled before its
        # first step then closes ``coro``, where a wrapper never started left it unawaited
        # ("coroutine ... was never awaited" when it was collected). Tasks are spawned per
        # chunk of work, so the done callback's extra turn of the loop does not count.
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def spawn_loop(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Start a long-lived loop of the scheduler (cancelled by ``stop()``, never awaited as work)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._loops[name] = task
        return task

    def work(self) -> set[asyncio.Task[Any]]:
        """Unfinished work tasks, except the caller's own."""
        current = asyncio.current_task()
        return {t for t in self._tasks if t is not current and not t.done()}

    def all(self) -> list[asyncio.Task[Any]]:
        """Every task, loops included."""
        return [*self._tasks, *self._loops.values()]

    async def cancel_loops(self, *names: str) -> None:
        """Cancel the loops named (all without names) and wait for them to end."""
        chosen = list(self._loops) if not names else [n for n in names if n in self._loops]
        loops = [self._loops.pop(name) for name in chosen]
        await cancel_until_done(loops)
        for task in loops:  # retrieved, so none is logged as never retrieved
            if not task.cancelled():
                task.exception()
