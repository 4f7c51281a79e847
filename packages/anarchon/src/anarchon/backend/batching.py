"""Per-item fallbacks of the batch members of :class:`~anarchon.Backend` and :class:`~anarchon.RunStore`.

A backend that does not implement ``claim_many`` and friends natively gets
these: the single-item calls, at most ``limit`` in flight at once, the items of
one job one after the other, answers in request order. Each item is atomic on
its own; the batch as a whole is not (docs/run-store.md, "Batch members").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Protocol, TypeVar

__all__ = ["DEFAULT_FALLBACK_CONCURRENCY", "job_of", "per_item"]

Item = TypeVar("Item")
Answer = TypeVar("Answer")

DEFAULT_FALLBACK_CONCURRENCY = 16
"""Single-item calls in flight at once when a batch member falls back to them."""


class _AboutAJob(Protocol):
    @property
    def job(self) -> str: ...


def job_of(item: _AboutAJob) -> str:
    """The job a batch item is about: the ``per_item`` key of the batch members' fallbacks.

    Items of one job go one after the other, in request order: their answers
    may depend on each other (a repeated claim, an overlap check, a store that
    needs one job's slots in order), and the batch must answer as the same
    calls made one by one would.
    """
    return item.job


async def per_item(
    call: Callable[[Item], Awaitable[Answer]],
    items: Sequence[Item],
    limit: int = DEFAULT_FALLBACK_CONCURRENCY,
    key: Callable[[Item], Hashable] | None = None,
) -> list[Answer]:
    """Answer ``call(item)`` for every item, with at most ``limit`` calls in flight.

    Items with the same ``key`` (the members' fallbacks use :func:`job_of`)
    run one after the other, in request order, so the answers equal those of
    the same calls made one by one; items with different keys overlap. Every call is awaited to its end;
    if any raised, the first error (in request order) is raised after all of
    them have ended, so a caller that retries the batch with the same tokens
    repeats only repeat-safe items.
    """
    if not items:
        return []
    if len(items) == 1:
        return [await call(items[0])]
    gate = asyncio.Semaphore(max(1, limit))
    before: list[asyncio.Future[None] | None] = [None] * len(items)
    after: list[asyncio.Future[None] | None] = [None] * len(items)
    if key is not None:
        keys = [key(item) for item in items]
        if len(set(keys)) < len(keys):
            loop = asyncio.get_running_loop()
            last: dict[Hashable, asyncio.Future[None]] = {}
            for i, k in enumerate(keys):
                before[i] = last.get(k)
                last[k] = after[i] = loop.create_future()

    async def one(i: int) -> Answer:
        waiting = before[i]
        try:
            if waiting is not None:
                await asyncio.shield(waiting)
            async with gate:
                return await call(items[i])
        finally:
            done = after[i]
            if done is not None and not done.done():
                done.set_result(None)

    answers = await asyncio.gather(*(one(i) for i in range(len(items))), return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers  # type: ignore[return-value]
