"""One scheduler process for the multi-process tests (run as a script, not collected).

    python sql_worker.py interval URL INSTANCE JOB UNTIL_MS OUT
        a 200 ms interval job (jitter 50 ms) until wall time UNTIL_MS; every run
        appends "run <slot> <attempt> <instance>" to OUT
    python sql_worker.py long URL INSTANCE JOB LEASE HEARTBEAT OUT
        an hourly job whose current slot is claimable now; the handler appends
        "started <slot> <attempt> <instance>" and then runs until the process dies

Both write "start <store_ms>" once the scheduler runs and "stop <store_ms>"
before stopping.
"""

from __future__ import annotations

import asyncio
import sys
import time

from anarchon import RunContext, Scheduler


def _line(out: str, text: str) -> None:
    with open(out, "a", buffering=1) as f:
        f.write(text + "\n")


async def interval(url: str, instance: str, job: str, until_ms: int, out: str) -> None:
    scheduler = Scheduler(url, instance_id=instance, lease="5s", heartbeat="1s", stop_grace=2)

    async def handler(ctx: RunContext) -> None:
        _line(out, f"run {ctx.slot} {ctx.attempt} {ctx.instance_id}")

    scheduler.every(job, "200ms", handler, jitter="50ms", overlap=True)
    async with scheduler:
        now = await scheduler.backend.now_ms()
        _line(out, f"start {now}")
        await asyncio.sleep(max(0.0, until_ms / 1000 - time.time()))
        now = await scheduler.backend.now_ms()
        _line(out, f"stop {now}")


async def long(url: str, instance: str, job: str, lease: str, heartbeat: str, out: str) -> None:
    scheduler = Scheduler(url, instance_id=instance, lease=lease, heartbeat=heartbeat)

    async def handler(ctx: RunContext) -> None:
        _line(out, f"started {ctx.slot} {ctx.attempt} {ctx.instance_id}")
        await asyncio.sleep(3600)

    scheduler.every(job, "1h", handler, jitter=0, max_late="2h", max_attempts=3)
    async with scheduler:
        now = await scheduler.backend.now_ms()
        _line(out, f"start {now}")
        await asyncio.sleep(3600)


def main(argv: list[str]) -> None:
    mode = argv[1]
    if mode == "interval":
        url, instance, job, until, out = argv[2:7]
        asyncio.run(interval(url, instance, job, int(until), out))
    elif mode == "long":
        url, instance, job, lease, heartbeat, out = argv[2:8]
        asyncio.run(long(url, instance, job, lease, heartbeat, out))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
