"""One scheduler process with many interval jobs, for the many-jobs fleet tests (a script).

    python sql_many_jobs_worker.py URL INSTANCE JOBS EVERY UNTIL_MS OUT

declares ``JOBS`` jobs ``m0`` ... ``m<JOBS-1>`` due every ``EVERY`` with no
jitter on the store at ``URL`` and runs until wall time ``UNTIL_MS``. It
writes, in the format of ``anarchon.testing.fleet`` with the job in front,
``start <store_ms>``, ``run <job> <slot> <attempt> <instance>`` per run and
``stop <store_ms>`` to ``OUT``; its log (WARNING and up) goes to stderr.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

from anarchon import RunContext, Scheduler
from anarchon.registry import resolve_backend


async def work(url: str, instance: str, jobs: int, every: str, until_ms: int, out: str) -> None:
    backend = resolve_backend(url)
    scheduler = Scheduler(backend, instance_id=instance, stop_grace=2)
    lines: list[str] = []

    async def handler(ctx: RunContext) -> None:
        lines.append(f"run {ctx.job} {ctx.slot} {ctx.attempt} {ctx.instance_id}\n")

    for k in range(jobs):
        scheduler.every(f"m{k}", every, handler, jitter=0)
    try:
        async with scheduler:
            lines.append(f"start {await backend.now_ms()}\n")
            await asyncio.sleep(max(0.0, until_ms / 1000 - time.time()))
            lines.append(f"stop {await backend.now_ms()}\n")
    finally:
        await backend.close()
        await asyncio.to_thread(Path(out).write_text, "".join(lines))


def main(argv: list[str]) -> None:
    url, instance, jobs, every, until_ms, out = argv[1:7]
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    asyncio.run(work(url, instance, int(jobs), every, int(until_ms), out))


if __name__ == "__main__":
    main(sys.argv)
