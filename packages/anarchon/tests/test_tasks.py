"""``anarchon._scheduler.tasks``: spawned work leaves the set when it ends, however it ends; gather_or_cancel."""

from __future__ import annotations

import asyncio
import gc
import warnings

import pytest
from anarchon._scheduler.tasks import TaskSet, gather_or_cancel


async def _work(done: list[str]) -> None:
    await asyncio.sleep(0)
    done.append("ran")


def test_work_leaves_the_set_when_it_ends_and_work_lists_only_unfinished_tasks() -> None:
    async def main() -> None:
        tasks = TaskSet()
        done: list[str] = []
        first = tasks.spawn(_work(done), "a")
        second = tasks.spawn(_work(done), "b")
        assert tasks.work() == {first, second}
        await asyncio.gather(first, second)
        assert done == ["ran", "ran"]
        assert tasks.work() == set()
        await asyncio.sleep(0)  # the done callbacks
        assert tasks.all() == []

    asyncio.run(main())


def test_a_task_cancelled_before_it_started_leaves_no_unawaited_coroutine() -> None:
    # stop() (or a crash test) may cancel work spawned in the same turn of the loop.
    async def main() -> None:
        tasks = TaskSet()
        done: list[str] = []
        task = tasks.spawn(_work(done), "cancelled at once")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()
        assert done == []
        await asyncio.sleep(0)
        assert tasks.all() == []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


async def test_gather_or_cancel_cancels_and_awaits_the_others_when_one_fails() -> None:
    """The first error is raised only once the other awaitables have ended (cancelled)."""
    ended: list[str] = []

    async def fails() -> int:
        await asyncio.sleep(0)
        raise ValueError("bad record")

    async def slow() -> int:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        return 1

    with pytest.raises(ValueError, match="bad record"):
        await gather_or_cancel(slow(), fails(), slow())
    assert ended == ["cancelled", "cancelled"]
    assert await gather_or_cancel(asyncio.sleep(0, 1), asyncio.sleep(0, 2)) == [1, 2]


async def test_cancel_loops_ends_a_loop_that_lost_its_cancellation() -> None:
    """A loop whose cancellation a driver swallowed (it returned instead) still ends at stop."""
    swallowed: list[int] = []

    async def driver_call() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            swallowed.append(1)  # the reply came as the cancellation did: returned

    async def loop() -> None:
        while True:
            if not swallowed:
                await driver_call()
            await asyncio.sleep(0.01)

    tasks = TaskSet()
    task = tasks.spawn_loop(loop(), "anarchon-test-loop")
    await asyncio.sleep(0.01)
    await asyncio.wait_for(tasks.cancel_loops(), 5)
    assert swallowed == [1]
    assert task.cancelled()
