"""One scheduler process for the handler-lifecycle tests (run as a script, not collected).

    python lease_worker.py URL INSTANCE JOB OUT RUN_S STOP_AFTER_S [MODE]

An hourly job whose current slot is claimable now (lease 3 s, heartbeat 1 s,
stop_grace 3 s). Its sync handler appends ``live <slot> <attempt> <instance>
<wall_ms>`` to OUT, blocks 8 s in ``time.sleep`` (ignoring cancellation),
then appends ``end <slot> <attempt> <instance> <wall_ms>``. The scheduler
runs ``RUN_S`` seconds; with ``STOP_AFTER_S`` > 0 it calls ``stop()`` that
long after its handler started instead, and appends ``stopped <wall_ms>``
once ``stop()`` returned. With MODE ``async-block`` the handler is an
``async def`` that blocks the event loop with ``time.sleep(8)`` instead.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time

from anarchon import RunContext, Scheduler


def _line(out: str, text: str) -> None:
    with open(out, "a", buffering=1) as f:
        f.write(text + "\n")


def _wall_ms() -> int:
    return int(time.time() * 1000)


async def main(
    url: str, instance: str, job: str, out: str, run_s: float, stop_after: float, mode: str
) -> None:
    scheduler = Scheduler(url, instance_id=instance, lease="3s", heartbeat="1s", stop_grace="3s")
    started = threading.Event()

    def handler(ctx: RunContext) -> None:
        _line(out, f"live {ctx.slot} {ctx.attempt} {ctx.instance_id} {_wall_ms()}")
        started.set()
        time.sleep(8)
        _line(out, f"end {ctx.slot} {ctx.attempt} {ctx.instance_id} {_wall_ms()}")

    async def blocking(ctx: RunContext) -> None:
        _line(out, f"live {ctx.slot} {ctx.attempt} {ctx.instance_id} {_wall_ms()}")
        started.set()
        time.sleep(8)  # noqa: ASYNC251 - the mistake under test: blocking the event loop
        _line(out, f"end {ctx.slot} {ctx.attempt} {ctx.instance_id} {_wall_ms()}")

    chosen = blocking if mode == "async-block" else handler
    scheduler.every(job, "1h", chosen, jitter=0, max_late="2h", max_attempts=3)
    await scheduler.start()
    _line(out, f"start {instance} {_wall_ms()}")
    if stop_after > 0:
        await asyncio.to_thread(started.wait, run_s)
        await asyncio.sleep(stop_after)
        await scheduler.stop()
        _line(out, f"stopped {instance} {_wall_ms()}")
        return
    await asyncio.sleep(run_s)
    await scheduler.stop()


if __name__ == "__main__":
    url, instance, job, out, run_s, stop_after = sys.argv[1:7]
    mode = sys.argv[7] if len(sys.argv) > 7 else "sync"
    asyncio.run(main(url, instance, job, out, float(run_s), float(stop_after), mode))
