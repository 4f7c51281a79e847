"""``gc_freeze``: the first start of a scheduler with many jobs freezes the objects alive then."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from anarchon import Scheduler
from anarchon.errors import InvalidConfigError
from anarchon.gc_tuning import YOUNG_THRESHOLD

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
        print(await frozen_after(1000))  # once per process: not again

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
    second = int(lines[5])
    assert opted_out == 0
    assert few_jobs == 0
    assert young_before == 700  # untouched without the freeze
    assert many_jobs > 10_000  # the modules, the jobs and their schedules
    assert thresholds == (YOUNG_THRESHOLD, 11, 12)  # only the youngest generation's is raised
    assert second == 0


def test_gc_freeze_must_be_a_bool() -> None:
    with pytest.raises(InvalidConfigError, match="gc_freeze"):
        Scheduler("memory://", gc_freeze="yes")  # type: ignore[arg-type]
