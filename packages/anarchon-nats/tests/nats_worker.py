"""One scheduler process for the multi-process test (run as a script, not collected).

    python nats_worker.py URL STREAM PREFIX INSTANCE JOB UNTIL_MS OUT

runs ``Scheduler(NatsBackend(URL, stream=STREAM, prefix=PREFIX))`` with a
200 ms interval job (jitter 50 ms) until wall time UNTIL_MS; every run appends
"run <slot> <instance>" to OUT. It writes "start <ms>" once the scheduler runs
and "stop <ms>" before stopping (wall clock: NATS has no server clock to read).
"""

from __future__ import annotations

import asyncio
import sys
import time

from anarchon import RunContext, Scheduler
from anarchon_nats import NatsBackend


def _line(out: str, text: str) -> None:
    with open(out, "a", buffering=1) as f:
        f.write(text + "\n")


async def interval(
    url: str, stream: str, prefix: str, instance: str, job: str, until_ms: int, out: str
) -> None:
    backend = NatsBackend(url, stream=stream, prefix=prefix)
    scheduler = Scheduler(backend, instance_id=instance, stop_grace=2)

    async def handler(ctx: RunContext) -> None:
        _line(out, f"run {ctx.slot} {ctx.instance_id}")

    scheduler.every(job, "200ms", handler, jitter="50ms")
    try:
        async with scheduler:
            _line(out, f"start {time.time_ns() // 1_000_000}")
            await asyncio.sleep(max(0.0, until_ms / 1000 - time.time()))
            _line(out, f"stop {time.time_ns() // 1_000_000}")
    finally:
        await backend.close()


def main(argv: list[str]) -> None:
    url, stream, prefix, instance, job, until, out = argv[1:8]
    asyncio.run(interval(url, stream, prefix, instance, job, int(until), out))


if __name__ == "__main__":
    main(sys.argv)
