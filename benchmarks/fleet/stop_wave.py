"""How long ``stop()`` takes when it falls in the middle of a wave claimed ahead (PostgreSQL).

    uv run --frozen --no-sync python benchmarks/fleet/stop_wave.py [--jobs 10000] [--phase 9.5]

One scheduler, ``--jobs`` jobs every 10 s (jitter 0) on a PostgreSQL server
this script starts (as the tests do). After a first wave it calls ``stop()``
``--phase`` seconds into a 10 s period: at 9.5 the next wave is being
claimed (claim_ahead 1 s) and fires 0.5 s later; at 0.1 it has just started.
Printed: the time ``stop()`` took, and the CPU of this process meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from anarchon import RunContext, Scheduler
from anarchon_testservers.postgres import start_postgres


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--phase", type=float, default=9.5)
    args = parser.parse_args()
    server = start_postgres()
    try:

        async def handler(ctx: RunContext) -> None:
            return None

        scheduler = Scheduler(server.dsn, instance_id="stopper")
        for n in range(args.jobs):
            scheduler.every(f"s{n:06d}", "10s", handler, jitter=0)
        await scheduler.start()
        await asyncio.sleep(12)
        await asyncio.sleep((args.phase - time.time() % 10) % 10)
        wall, cpu = time.perf_counter(), time.process_time()
        await scheduler.stop()
        print(
            f"stop() {args.phase:.1f} s into the period, {args.jobs:,} jobs:"
            f" {time.perf_counter() - wall:.2f} s, {time.process_time() - cpu:.2f} s CPU"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
