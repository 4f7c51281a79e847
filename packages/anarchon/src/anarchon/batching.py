"""Per-item fallbacks of the batch members of :class:`~anarchon.Backend` and :class:`~anarchon.RunStore`.

A backend that does not implement ``claim_many`` and friends natively gets
these: the single-item calls, at most ``limit`` in flight at once, answers in
request order. Each item is atomic on its own; the batch as a whole is not
(docs/extending.md, "Batch members").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

__all__ = ["DEFAULT_FALLBACK_CONCURRENCY", "per_item"]

Item = TypeVar("Item")
Answer = TypeVar("Answer")

DEFAULT_FALLBACK_CONCURRENCY = 16
"""Single-item calls in flight at once when a batch member falls back to them."""


async def per_item(
    call: Callable[[Item], Awaitable[Answer]],
    items: Sequence[Item],
    limit: int = DEFAULT_FALLBACK_CONCURRENCY,
) -> list[Answer]:
    """Answer ``call(item)`` for every item, with at most ``limit`` calls in flight.

    Every call is awaited to its end; if any raised, the first error (in
    request order) is raised after all of them have ended, so a caller that
    retries the batch with the same tokens repeats only repeat-safe items.
    """
    if not items:
        return []
    if len(items) == 1:
        return [await call(items[0])]
    gate = asyncio.Semaphore(max(1, limit))

    async def one(item: Item) -> Answer:
        async with gate:
            return await call(item)

    answers = await asyncio.gather(*(one(item) for item in items), return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers  # type: ignore[return-value]
