"""``stop()`` with the store down: the check every backend's stop-bound test calls.

``stop()`` must return within ``stop_grace`` plus one call timeout
(``Scheduler.call_timeout_s``), store outage or not (docs/leases.md,
"Stopping"). :func:`check_stop_bound` runs a job every 500 ms on the
scheduler it is given, waits for a run, starts the outage (a proxy's
blackhole, a database locked by another connection), lets the claims retry
through it for ``settle_s``, then times ``stop()``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable

from anarchon.context import RunContext
from anarchon.scheduler import Scheduler

__all__ = ["check_stop_bound"]


async def check_stop_bound(
    scheduler: Scheduler,
    outage: Callable[[], None] | Callable[[], Awaitable[None]],
    *,
    settle_s: float = 2.0,
    slack_s: float = 0.75,
) -> float:
    """Start ``scheduler``, start ``outage()`` mid-run, time ``stop()``; return the seconds it took.

    Raises AssertionError if ``stop()`` took longer than ``stop_grace`` plus
    one call timeout plus ``slack_s`` (scheduling noise on a loaded machine).
    """
    ran: list[int] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler.every(f"stop-bound-{uuid.uuid4().hex[:8]}", "500ms", tick, jitter=0)
    await scheduler.start()
    try:
        give_up = time.monotonic() + 20
        while not ran:
            if time.monotonic() >= give_up:
                raise AssertionError("nothing ran before the outage")
            await asyncio.sleep(0.05)
        started = outage()
        if inspect.isawaitable(started):
            await started
        await asyncio.sleep(settle_s)  # claims are now retrying through the outage
    finally:
        t0 = time.monotonic()
        await scheduler.stop()
        took = time.monotonic() - t0
    bound = scheduler.stop_grace_ms / 1000 + scheduler.call_timeout_s
    if took > bound + slack_s:
        raise AssertionError(
            f"stop() took {took:.2f} s with the store down, over stop_grace + one call"
            f" timeout = {bound:.2f} s"
        )
    return took
