"""One scheduler process with many interval jobs, for the many-jobs fleet tests (a script).

    python sql_many_jobs_worker.py URL INSTANCE JOBS EVERY UNTIL_MS OUT

declares ``JOBS`` jobs ``m0`` ... ``m<JOBS-1>`` due every ``EVERY`` with no
jitter and overlap allowed (as in the 8-process fleet test: a run whose finish
is still on its way must not make the next slot an overlap skip) on the store at ``URL`` and runs until wall time ``UNTIL_MS``. It
writes, in the format of ``anarchon.testing.fleet`` with the job in front,
``start <store_ms>``, ``run <job> <slot> <attempt> <instance>`` per run and
``stop <store_ms>`` to ``OUT``; its log (WARNING and up) goes to stderr.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TextIO

from anarchon import RunContext, Scheduler
from anarchon.registry import resolve_backend


async def work(url: str, instance: str, jobs: int, every: str, until_ms: int, out: TextIO) -> None:
    backend = resolve_backend(url)
    scheduler = Scheduler(backend, instance_id=instance, stop_grace=2)

    async def handler(ctx: RunContext) -> None:
        out.write(f"run {ctx.job} {ctx.slot} {ctx.attempt} {ctx.instance_id}\n")

    async def flush() -> None:  # a killed process still leaves what it ran
        while True:
            await asyncio.sleep(0.5)
            out.flush()

    for k in range(jobs):
        scheduler.every(f"m{k}", every, handler, jitter=0, overlap=True)
    flusher = asyncio.create_task(flush())
    try:
        async with scheduler:
            out.write(f"start {await backend.now_ms()}\n")
            await asyncio.sleep(max(0.0, until_ms / 1000 - time.time()))
            out.write(f"stop {await backend.now_ms()}\n")
    finally:
        flusher.cancel()
        await backend.close()
        out.flush()


def main(argv: list[str]) -> None:
    url, instance, jobs, every, until_ms, out = argv[1:7]
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with open(out, "w") as f:
        asyncio.run(work(url, instance, int(jobs), every, int(until_ms), f))


if __name__ == "__main__":
    main(sys.argv)
