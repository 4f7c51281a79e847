"""``stop()`` ends the wake-up loop even when a store call inside it swallowed the cancellation."""

from __future__ import annotations

import asyncio

from anarchon import MemoryBackend, RunContext, Scheduler
from anarchon.errors import BackendUnavailableError
from anarchon.fleet.types import JobControl


class _CancelTurnedIntoAnError(MemoryBackend):
    """``controls()`` blocks once asked to; a cancellation there becomes a store error, as some
    drivers do (a fleet worker's ``stop()`` once waited for ever on such a wake-up loop)."""

    blocking = False

    async def controls(self) -> dict[str, JobControl]:
        if self.blocking:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                raise BackendUnavailableError("the driver's own error") from None
        return await super().controls()


async def _noop(ctx: RunContext) -> None:
    return None


async def test_stop_ends_a_wakeup_loop_whose_cancellation_a_store_call_swallowed() -> None:
    backend = _CancelTurnedIntoAnError()
    scheduler = Scheduler(backend, instance_id="stopper", control_cache=0)
    scheduler.every("tick", "200ms", _noop, jitter=0)
    await scheduler.start()
    await asyncio.sleep(0.3)
    backend.blocking = True  # the next wake-up with due slots hangs in controls()
    await asyncio.sleep(0.5)
    await asyncio.wait_for(scheduler.stop(), 5)
