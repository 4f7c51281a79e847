"""The scheduler process of the ``kill -9`` takeover test (run as a script, not collected).

    python redis_worker.py long KIND URL INSTANCE JOB LEASE HEARTBEAT OUT
        an hourly job whose current slot is claimable now; the handler appends
        "started <slot> <attempt> <instance>" and then runs until the process dies

The scheduler writes "start main <store_ms>" once it runs. (The fleet tests
use the shared harness, ``anarchon.testing.fleet``.)
"""

from __future__ import annotations

import asyncio
import logging
import sys

from anarchon import RunContext, Scheduler
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase


def _line(out: str, text: str) -> None:
    with open(out, "a", buffering=1) as f:
        f.write(text + "\n")


def _backend(kind: str, url: str, strategy: str = "lease") -> RedisBackendBase:
    cls = ValkeyBackend if kind == "valkey" else RedisBackend
    return cls(url, strategy=strategy)


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
    if mode == "long":
        kind, url, instance, job, lease, heartbeat, out = argv[2:9]
        asyncio.run(long(kind, url, instance, job, lease, heartbeat, out))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
