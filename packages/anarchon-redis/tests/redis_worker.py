"""One scheduler process for the multi-process tests (run as a script, not collected).

    python redis_worker.py fleet INSTANCE UNTIL_MS OUT HANDLER_MS SPEC [SPEC ...]
        one Scheduler per SPEC ("label|kind|strategy|url|job|lease|heartbeat";
        lease and heartbeat are ignored by stream-id), each with a
        200 ms interval job (jitter 50 ms), until wall time UNTIL_MS; every
        run appends "run <label> <slot> <attempt> <instance>" to OUT. The
        handler sleeps HANDLER_MS. Each scheduler logs to the logger
        "anarchon.<label>"; its warnings go to stderr as "<label> <message>".
    python redis_worker.py long KIND URL INSTANCE JOB LEASE HEARTBEAT OUT
        an hourly job whose current slot is claimable now; the handler appends
        "started <slot> <attempt> <instance>" and then runs until the process dies

Every scheduler writes "start <label> <store_ms>" once it runs and
"stop <label> <store_ms>" before stopping.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

from anarchon import RunContext, Scheduler
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase


def _line(out: str, text: str) -> None:
    with open(out, "a", buffering=1) as f:
        f.write(text + "\n")


def _backend(kind: str, url: str, strategy: str = "lease") -> RedisBackendBase:
    cls = ValkeyBackend if kind == "valkey" else RedisBackend
    return cls(url, strategy=strategy)


async def _one(spec: str, instance: str, until_ms: int, out: str, handler_ms: int) -> None:
    label, kind, strategy, url, job, lease, heartbeat = spec.split("|")
    backend = _backend(kind, url, strategy)
    logger = logging.getLogger(f"anarchon.{label}")
    options: dict[str, Any] = (
        {"lease": lease, "heartbeat": heartbeat} if strategy == "lease" else {}
    )
    scheduler = Scheduler(backend, instance_id=instance, stop_grace=2, logger=logger, **options)

    async def handler(ctx: RunContext) -> None:
        _line(out, f"run {label} {ctx.slot} {ctx.attempt} {ctx.instance_id}")
        if handler_ms:
            await asyncio.sleep(handler_ms / 1000)

    job_options = {"overlap": True} if strategy == "lease" else {}
    scheduler.every(job, "200ms", handler, jitter="50ms", **job_options)
    try:
        async with scheduler:
            _line(out, f"start {label} {await backend.now_ms()}")
            await asyncio.sleep(max(0.0, until_ms / 1000 - time.time()))
            _line(out, f"stop {label} {await backend.now_ms()}")
    finally:
        await backend.close()


async def fleet(instance: str, until_ms: int, out: str, handler_ms: int, specs: list[str]) -> None:
    await asyncio.gather(*(_one(spec, instance, until_ms, out, handler_ms) for spec in specs))


async def long(
    kind: str, url: str, instance: str, job: str, lease: str, heartbeat: str, out: str
) -> None:
    backend = _backend(kind, url)
    scheduler = Scheduler(backend, instance_id=instance, lease=lease, heartbeat=heartbeat)

    async def handler(ctx: RunContext) -> None:
        _line(out, f"started {ctx.slot} {ctx.attempt} {ctx.instance_id}")
        await asyncio.sleep(3600)

    scheduler.every(job, "1h", handler, jitter=0, max_late="2h", max_attempts=3)
    async with scheduler:
        _line(out, f"start main {await backend.now_ms()}")
        await asyncio.sleep(3600)


class _Labelled(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        label = record.name.rpartition(".")[2]
        return f"{label} {record.levelname} {record.getMessage()}"


def main(argv: list[str]) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Labelled())
    logging.getLogger("anarchon").addHandler(handler)
    logging.getLogger("anarchon").setLevel(logging.INFO)
    mode = argv[1]
    if mode == "fleet":
        instance, until, out, handler_ms = argv[2:6]
        asyncio.run(fleet(instance, int(until), out, int(handler_ms), argv[6:]))
    elif mode == "long":
        kind, url, instance, job, lease, heartbeat, out = argv[2:9]
        asyncio.run(long(kind, url, instance, job, lease, heartbeat, out))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
