"""One scheduler process for the ``kill -9`` takeover tests (run as a script, not collected).

    python sql_worker.py long URL INSTANCE JOB LEASE HEARTBEAT OUT
        an hourly job whose current slot is claimable now; it writes
        "start <store_ms>" once the scheduler runs, and the handler appends
        "started <slot> <attempt> <instance>" and then runs until the process dies

(The fleet tests use the worker of ``anarchon.testing.fleet``.)
"""

from __future__ import annotations

import asyncio
import sys

from anarchon import RunContext, Scheduler


def _line(out: str, text: str) -> None:
    with open(out, "a", buffering=1) as f:
        f.write(text + "\n")


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
    if mode == "long":
        url, instance, job, lease, heartbeat, out = argv[2:8]
        asyncio.run(long(url, instance, job, lease, heartbeat, out))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
