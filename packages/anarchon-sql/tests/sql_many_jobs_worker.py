"""One scheduler process with many interval jobs, for the many-jobs fleet tests (a script).

    python sql_many_jobs_worker.py URL INSTANCE JOBS EVERY UNTIL_MS OUT [UNTIL_FILE]

declares ``JOBS`` jobs ``m0`` ... ``m<JOBS-1>`` due every ``EVERY`` with no
jitter and overlap allowed (as in the 8-process fleet test: a run whose finish
is still on its way must not make the next slot an overlap skip) on the store at ``URL`` and runs until wall time ``UNTIL_MS``,
or the earlier wall time written to ``UNTIL_FILE`` once every process has started. It
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
from typing import TextIO

from anarchon import RunContext, Scheduler
from anarchon.backend.registry import resolve_backend


def _until(until_ms: int, until_file: Path | None) -> int:
    """``until_ms``, or the earlier end the test wrote once every process had started."""
    if until_file is None:
        return until_ms
    try:
        return min(until_ms, int(until_file.read_text()))
    except (FileNotFoundError, ValueError):
        return until_ms


async def work(
    url: str,
    instance: str,
    jobs: int,
    every: str,
    until_ms: int,
    out: TextIO,
    until_file: Path | None,
) -> None:
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
            while time.time() * 1000 < _until(until_ms, until_file):  # noqa: ASYNC110 - a file
                await asyncio.sleep(0.1)
            out.write(f"stop {await backend.now_ms()}\n")
    finally:
        flusher.cancel()
        await backend.close()
        out.flush()


def main(argv: list[str]) -> None:
    url, instance, jobs, every, until_ms, out = argv[1:7]
    until_file = Path(argv[7]) if len(argv) > 7 else None
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with open(out, "w") as f:
        asyncio.run(work(url, instance, int(jobs), every, int(until_ms), f, until_file))


if __name__ == "__main__":
    main(sys.argv)
