"""A finish lost by the store is re-sent once it answers again (docs/durability.md).

The store loses a finish the way a failover does: the run's claim is on disk
(an RDB snapshot taken while the handler runs), its finish and result are
acknowledged afterwards, then the server is killed (``kill -9``) and
restarted from the snapshot. The restarted store shows the run ``running``
with a 30 s lease nobody renews: without the re-send the job's slot stays
blocked for the lease and history shows the completed run ``running``. The
scheduler notices the outage (its next claims fail), and once the store
answers again it re-sends the finishes of the last lease: the run is
finished, and its result is stored again.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from anarchon import Event, RunContext, Scheduler
from anarchon.types import RunClaim
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import Server, start_server


@pytest.fixture
def own_redis() -> Iterator[Server]:
    """A redis-server of this test alone (it is killed and restarted)."""
    server = start_server("redis")
    try:
        yield server
    finally:
        server.stop()


async def _until(what: str, predicate: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.02)


def test_a_finish_lost_in_a_restart_is_re_sent(
    own_redis: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """After the restart the run is ``done`` for a backup and ``ok`` in history, within seconds."""
    job = f"resend-{uuid.uuid4().hex[:8]}"
    snapshots: list[int] = []
    finished: list[int] = []
    store_events: list[str] = []

    def handler(ctx: RunContext) -> None:
        if not snapshots:  # the claim is stored; the finish that follows will not be
            client = redis.Redis.from_url(own_redis.redis_url)
            try:
                client.save()
            finally:
                client.close()
            snapshots.append(ctx.slot)

    scheduler = Scheduler(RedisBackend(own_redis.url), instance_id="a", lease="30s", heartbeat="1s")
    scheduler.every(job, "1s", handler, jitter=0)

    def on_finished(event: Event) -> None:
        if event.slot is not None:
            finished.append(event.slot)

    scheduler.on("run_finished", on_finished)
    scheduler.on("store_unavailable", lambda e: store_events.append(e.kind))
    scheduler.on("store_recovered", lambda e: store_events.append(e.kind))

    async def main() -> None:
        probe = RedisBackend(own_redis.url)
        await scheduler.start()
        try:
            await _until("the first run finished", lambda: snapshots and snapshots[0] in finished)
            slot = snapshots[0]
            await asyncio.to_thread(own_redis.kill)
            await _until(
                "the scheduler saw the outage", lambda: "store_unavailable" in store_events
            )
            await asyncio.to_thread(own_redis.start)
            await probe.init()
            assert probe.runs is not None
            backup = RunClaim(job, slot, uuid.uuid4().hex, "b", 30_000, 3, create=False)
            # Right after the restart the snapshot's run is live, held by a's token ...
            restarted = await probe.runs.claim(backup)
            # ... and once a re-sent its finish it is done (the 30 s lease is not waited out).
            answers: list[str] = [restarted.kind]

            async def probe_done() -> None:
                while True:
                    answers.append((await probe.runs.claim(backup)).kind)  # type: ignore[union-attr]
                    if answers[-1] == "done":
                        return
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(probe_done(), 15)
            assert "store_recovered" in store_events
            assert set(answers) <= {"running", "done"}, answers
            records = [r for r in await probe.history(job, 100) if r.slot == slot]
            assert [(r.attempt, r.instance_id, r.status) for r in records] == [(1, "a", "ok")]
            await probe.close()
        finally:
            await scheduler.stop()

    with caplog.at_level(logging.INFO, logger="anarchon"):
        asyncio.run(main())
    assert "re-sent the finishes of" in caplog.text
