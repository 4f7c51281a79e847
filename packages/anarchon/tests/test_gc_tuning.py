"""``gc_freeze``: the first start of a scheduler with many jobs freezes the objects alive then."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap

import pytest
from anarchon import Scheduler
from anarchon._scheduler.gc_tuning import YOUNG_MAX, YOUNG_THRESHOLD, young_threshold
from anarchon.errors import InvalidConfigError

# Each case in order in one fresh process (the freeze happens once per process).
SCRIPT = textwrap.dedent(
    """
    import asyncio, gc
    from anarchon import MemoryBackend, Scheduler

    async def handler(ctx):
        pass

    async def frozen_after(jobs, **options):
        scheduler = Scheduler(MemoryBackend(), instance_id="gc", **options)
        for n in range(jobs):
            scheduler.every(f"job-{n}", "1h", handler)
        async with scheduler:
            pass
        return gc.get_freeze_count()

    async def main():
        gc.set_threshold(700, 11, 12)
        print(await frozen_after(1000, gc_freeze=False))
        print(await frozen_after(999))
        print(gc.get_threshold()[0])
        print(await frozen_after(1000))
        print(*gc.get_threshold())
        gc.unfreeze()
        print(await frozen_after(20_000))  # once per process: not again
        print(gc.get_threshold()[0])  # nor its threshold

    asyncio.run(main())
    """
)


def test_freeze_once_for_many_jobs_unless_disabled() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    opted_out, few_jobs, young_before, many_jobs = (int(line) for line in lines[:4])
    thresholds = tuple(int(t) for t in lines[4].split())
    second, young_after = int(lines[5]), int(lines[6])
    assert opted_out == 0
    assert few_jobs == 0
    assert young_before == 700  # untouched without the freeze
    assert many_jobs > 10_000  # the modules, the jobs and their schedules
    assert thresholds == (YOUNG_THRESHOLD, 11, 12)  # only the youngest generation's is raised
    assert second == 0
    assert young_after == YOUNG_THRESHOLD


def test_the_young_threshold_grows_with_the_jobs_between_bounds() -> None:
    assert young_threshold(1000) == YOUNG_THRESHOLD
    assert young_threshold(10_000) == 200_000  # above the objects a wave of 10,000 keeps alive
    assert young_threshold(10**7) == YOUNG_MAX


def test_gc_freeze_must_be_a_bool() -> None:
    with pytest.raises(InvalidConfigError, match="gc_freeze"):
        Scheduler("memory://", gc_freeze="yes")  # type: ignore[arg-type]


async def test_a_run_that_ended_leaves_no_garbage_cycle() -> None:
    """A run is freed by its reference count when it ends, not by a later full collection."""
    from anarchon import RunContext
    from anarchon._scheduler.run_state import Run

    ran: list[int] = []
    owner: list[bool] = []
    enough = asyncio.Event()

    async def handler(ctx: RunContext) -> None:
        ran.append(ctx.slot)
        owner.append(await ctx.still_owner())
        if len(ran) >= 60:
            enough.set()

    gc.collect()
    scheduler = Scheduler("memory://", instance_id="cycles", gc_freeze=False)
    for n in range(20):
        scheduler.every(f"job-{n}", "100ms", handler, jitter=0)
    async with scheduler:
        await asyncio.wait_for(enough.wait(), 30)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        cyclic = [o for o in gc.garbage if isinstance(o, (Run, RunContext))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert all(owner)  # the weakly held run still answers while its handler runs
    assert cyclic == []
