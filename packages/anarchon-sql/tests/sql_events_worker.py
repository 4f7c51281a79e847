"""One scheduler process for the events-vs-history test (run as a script, not collected).

    python sql_events_worker.py URL INSTANCE OUT JOBS

Every event of every kind is appended to ``OUT`` as one JSON line (written by
a sync callback, so through the event bus's worker thread); ``{"kind":
"ready"}`` once the scheduler runs. ``JOBS`` is a comma-separated subset of:

- ``handoff``: hourly, its current slot claimable now; attempts 1 and 2 run
  until cancelled, a later attempt returns after 0.3 s;
- ``ovl``: every 1 s with ``overlap=False``; each run takes 1.5 s, so the
  slot after it is skipped (overlap).

SIGTERM stops with a 0.1 s grace (running runs are handed over); SIGINT stops
with a 30 s grace (running runs finish).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
import threading

from anarchon import Event, RunContext, Scheduler
from anarchon.events import EVENT_KINDS

LEASE = "1200ms"
HEARTBEAT = "300ms"


async def main(url: str, instance: str, out: str, jobs: str) -> None:
    scheduler = Scheduler(url, instance_id=instance, lease=LEASE, heartbeat=HEARTBEAT)
    lock = threading.Lock()
    sink = open(out, "a", buffering=1)  # noqa: SIM115, ASYNC230 - once, before the scheduler runs

    def write(record: dict[str, object]) -> None:
        with lock:
            sink.write(json.dumps(record) + "\n")
            sink.flush()

    def on_event(event: Event) -> None:
        record = dataclasses.asdict(event)
        record["scheduled_at"] = (
            None if event.scheduled_at is None else event.scheduled_at.isoformat()
        )
        write(record)

    for kind in EVENT_KINDS:
        scheduler.on(kind, on_event)

    async def handoff(ctx: RunContext) -> None:
        if ctx.attempt <= 2:
            await asyncio.sleep(3600)
        await asyncio.sleep(0.3)

    async def ovl(ctx: RunContext) -> None:
        await asyncio.sleep(1.5)

    chosen = jobs.split(",")
    if "handoff" in chosen:
        scheduler.every("handoff", "1h", handoff, jitter=0, max_late="2h", max_attempts=5)
    if "ovl" in chosen:
        scheduler.every("ovl", "1s", ovl, jitter=0, overlap=False, max_late="900ms")

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stop_with(grace_ms: int) -> None:
        scheduler.stop_grace_ms = grace_ms
        stop.set()

    loop.add_signal_handler(signal.SIGTERM, stop_with, 100)
    loop.add_signal_handler(signal.SIGINT, stop_with, 30_000)
    await scheduler.start()
    write({"kind": "ready", "instance": instance})
    await stop.wait()
    await scheduler.stop()
    write({"kind": "stopped", "instance": instance})
    sink.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
