"""``TaskSet.cancel_loops``: a loop that swallowed its cancellation is cancelled again."""

from __future__ import annotations

import asyncio

from anarchon.tasks import RECANCEL_S, TaskSet


async def test_a_loop_that_swallows_one_cancellation_still_ends() -> None:
    """A driver may turn a ``CancelledError`` into its own error, which the loop logs and carries
    on from (the wake-up loop once kept a fleet worker's ``stop()`` waiting for ever so)."""
    swallowed: list[int] = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed.append(1)  # as a driver error would: logged, and the loop goes on

    tasks = TaskSet()
    loop_task = tasks.spawn_loop(stubborn(), "stubborn")
    await asyncio.sleep(0)
    await asyncio.wait_for(tasks.cancel_loops(), 5 * RECANCEL_S)
    assert loop_task.cancelled()
    assert swallowed == [1]


async def test_a_loop_that_fails_has_its_error_retrieved() -> None:
    async def failing() -> None:
        raise RuntimeError("boom")

    tasks = TaskSet()
    loop_task = tasks.spawn_loop(failing(), "failing")
    await asyncio.sleep(0)
    await tasks.cancel_loops()
    assert isinstance(loop_task.exception(), RuntimeError)
