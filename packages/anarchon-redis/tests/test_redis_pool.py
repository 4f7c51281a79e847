"""A client with a small connection pool: many jobs due at once all run, and no outage is logged.

The backend never has more calls in flight than the client's pool holds
(``connection_pool.max_connections``), so redis-py never refuses a call with
"Too many connections", which the scheduler would otherwise take for an outage.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections import Counter

import pytest
import redis.asyncio
from anarchon import RunContext, Scheduler
from anarchon.types import ClaimInput, ResultWrite, StoredResult
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import Server

JOBS = 2000
POOL = 4


def test_calls_never_exceed_the_pool(redis_server: Server) -> None:
    """4,000 single calls at once through a 4-connection pool: none refused, all answered."""

    async def main() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port, max_connections=POOL)
        backend = RedisBackend(client, prefix=f"p{uuid.uuid4().hex[:8]}:")
        await backend.init()
        try:
            now = await backend.now_ms()
            slot = now - now % 1000
            inputs = [ClaimInput(f"job-{i}", slot, f"t{i}", "w", 10) for i in range(JOBS)]
            won = await asyncio.gather(*(backend.claim(i) for i in inputs))
            assert all(won)
            writes = [
                backend.save_result(i.job, StoredResult(slot, i.token, "w", "ok", slot, slot), 10)
                for i in inputs
            ]
            await asyncio.gather(*writes)
            pool = client.connection_pool
            assert len(pool._in_use_connections) + len(pool._available_connections) <= POOL
            await backend.save_results(
                [
                    ResultWrite(i.job, StoredResult(slot, i.token, "w", "ok", slot, slot), 10)
                    for i in inputs
                ]
            )
        finally:
            await backend.close()
            await client.aclose()

    asyncio.run(main())


@pytest.mark.scenario
def test_two_thousand_jobs_due_at_once_through_a_pool_of_four(
    redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """A real scheduler, 2,000 ``every("1s", jitter=0)`` jobs, a client with ``max_connections=4``.

    Every slot of every job in the middle of the run runs exactly once, and
    nothing is logged at WARNING or above (an outage would be).

    The backend's part (no call beyond the pool, so no "Too many connections"
    outage) holds on its own; running all 2,000 job-slots a second on time
    also needs the scheduler's batched claim path.
    """
    runs: Counter[tuple[str, int]] = Counter()

    async def handler(ctx: RunContext) -> None:
        runs[(ctx.job, ctx.slot)] += 1

    async def main() -> tuple[float, float]:
        client = redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port, max_connections=POOL)
        backend = RedisBackend(client, prefix=f"p{uuid.uuid4().hex[:8]}:")
        scheduler = Scheduler(backend, instance_id="pool-4", stop_grace=5)
        for i in range(JOBS):
            scheduler.every(f"job-{i}", "1s", handler, jitter=0)
        await scheduler.start()
        began = time.time()
        try:
            await asyncio.sleep(8)
        finally:
            ended = time.time()
            await scheduler.stop()
            await client.aclose()
        return began, ended

    # Earlier tests' garbage (the cluster contract suites hand in RedisCluster clients they
    # do not close) is collected now, not by a collection during this run: redis-py reports
    # an unclosed client to the running loop, whose handler would log it here.
    gc.collect()
    with caplog.at_level(logging.WARNING, logger="anarchon"):
        began, ended = asyncio.run(main())
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # The scheduler's outage line ("store ... unreachable (...); retrying with backoff").
    outages = [m for m in problems if "retrying with backoff" in m or "Too many connections" in m]
    assert outages == [], outages[:5]
    # Slots due well inside the run: from 2 s after start to 2 s before the end.
    first = (int(began * 1000) // 1000 + 2) * 1000
    last = (int(ended * 1000) // 1000 - 2) * 1000
    slots = range(first, last + 1, 1000)
    assert len(slots) >= 3
    missed = [(f"job-{i}", s) for s in slots for i in range(JOBS) if runs[(f"job-{i}", s)] == 0]
    twice = {key: n for key, n in runs.items() if n > 1}
    assert twice == {}, list(twice.items())[:10]
    assert missed == [], f"{len(missed)} of {len(slots) * JOBS} job-slots missed: {missed[:10]}"
    assert problems == [], f"{len(problems)} warnings: {problems[:5]}"
