"""One APScheduler 4 process of ``benchmarks/fleet/fleet.py`` (the peer; run by it, not by hand).

Runs in the peer's own virtual environment (APScheduler 4.0.0a6, anyio 4.4.0,
SQLAlchemy, asyncpg; no anarchon), with the same arguments and result file as
``fleet_worker.py``:

    python fleet_apscheduler.py --url postgresql://... --jobs J --every-ms I --instance NAME
                                --plan PLAN.json --out FILE

Setup, as its documentation has it for a shared PostgreSQL: an
``AsyncScheduler`` on a ``SQLAlchemyDataStore`` (asyncpg engine) with an
``AsyncpgEventBroker`` on the same engine. One task ``tick`` is registered with
``configure_task`` in every process (``max_running_jobs=None``: no cap, so the
task's limit does not serialise the jobs). The first process (instance
``...-p0``) adds the ``J`` schedules ``j000000`` ... to the shared store
(``IntervalTrigger`` every ``I`` ms on the epoch grid,
``ConflictPolicy.do_nothing``, no jitter, every other option at its default),
10 at a time; the others find them there (APScheduler 4 keeps schedules in
the data store; adding 10,000 one by one in every process took minutes).
The handler records ``[job, scheduled fire time ms, lateness ms]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from datetime import datetime, timedelta, timezone

import anyio
from apscheduler import AsyncScheduler, ConflictPolicy, current_job
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.eventbrokers.asyncpg import AsyncpgEventBroker
from apscheduler.triggers.interval import IntervalTrigger
from fleet_common import Sampler, read_plan, signal_ready, signal_stopped, wall_ms, write_result
from sqlalchemy.ext.asyncio import (  # type: ignore[import-not-found,unused-ignore]
    create_async_engine,
)

STARTS: list[tuple[int, int, float]] = []


async def tick(n: int) -> None:
    """The job: record when it started, against its scheduled fire time."""
    job = current_job.get()
    fire = job.scheduled_fire_time
    slot = round(fire.timestamp() * 1000) if fire is not None else 0
    STARTS.append((n, slot, wall_ms() - slot))


async def run(args: argparse.Namespace) -> None:
    url = args.url.replace("postgresql://", "postgresql+asyncpg://", 1)
    engine = create_async_engine(url)
    store = SQLAlchemyDataStore(engine)
    broker = AsyncpgEventBroker.from_async_sqla_engine(engine)
    every = timedelta(milliseconds=args.every_ms)
    began = time.time()
    # Fire times on the epoch grid, like anarchon's every(): the next boundary from now.
    now_ms = int(began * 1000)
    start = datetime.fromtimestamp(
        (now_ms // args.every_ms + 1) * args.every_ms / 1000, tz=timezone.utc
    )
    try:
        async with AsyncScheduler(store, broker, identity=args.instance) as scheduler:
            await scheduler.configure_task("tick", func=tick, max_running_jobs=None)
            if args.instance.endswith("-p0"):
                gate = anyio.Semaphore(10)

                async def add(n: int) -> None:
                    async with gate:
                        await scheduler.add_schedule(
                            "tick",
                            IntervalTrigger(seconds=every.total_seconds(), start_time=start),
                            id=f"j{n:06d}",
                            args=(n,),
                            conflict_policy=ConflictPolicy.do_nothing,
                        )

                async with anyio.create_task_group() as group:
                    for n in range(args.jobs):
                        group.start_soon(add, n)
            await scheduler.start_in_background()
            ready = time.time()
            signal_ready(args.out)
            plan = read_plan(args.plan)
            while plan is None:
                await anyio.sleep(0.05)
                plan = read_plan(args.plan)
            sampler = Sampler([float(t) for t in plan["samples"]])
            sampler.start()
            await anyio.sleep(max(0.0, float(plan["stop"]) - time.time()))
            sampler.join(timeout=max(0.0, sampler.instants[-1] - time.time()) + 5)
            write_result(  # before stop(), as fleet_worker.py does
                args.out,
                {
                    "instance": args.instance,
                    "began": began,
                    "ready": ready,
                    "stopping": time.time(),
                    "samples": sampler.samples,
                    "starts": list(STARTS),
                },
            )
            await scheduler.stop()
            await scheduler.wait_until_stopped()
    finally:
        await engine.dispose()
    signal_stopped(args.out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", default="postgres")
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--every-ms", type=int, required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s %(message)s"
    )
    anyio.run(run, args)


if __name__ == "__main__":
    main()
