"""The finishes of the last lease, kept and re-sent after an outage (docs/durability.md).

The ring and its re-send run against the memory store: a finish whose state
the store no longer has is healed by the re-send, one another instance owns
answers False and stays that instance's. The re-send after a real outage
(a Redis restart that lost the finish) is in
packages/anarchon-redis/tests/test_redis_finish_resend.py.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from anarchon import MemoryBackend
from anarchon._scheduler.finish_resend import RecentFinishes
from anarchon._scheduler.store_batches import StoreBatches
from anarchon._scheduler.store_retry import StorePolicy
from anarchon._scheduler.tasks import TaskSet
from anarchon.testing import FakeClock
from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult

LOG = logging.getLogger("anarchon.test")


def _parts(clock: FakeClock, backend: MemoryBackend, limit: int = 1000) -> RecentFinishes:
    policy = StorePolicy(backend, LOG, clock.now_ms, max_in_flight=4)
    return RecentFinishes(
        lease_s=30,
        batches=StoreBatches(backend, policy),
        policy=policy,
        clock=clock,
        tasks=TaskSet(),
        log=LOG,
        limit=limit,
    )


def _finish(slot: int, token: str) -> tuple[RunFinish, ResultWrite]:
    result = StoredResult(slot, token, "a", "ok", slot, slot + 5, None, 1)
    return RunFinish("job", slot, token, "ok"), ResultWrite("job", result)


def test_the_ring_keeps_one_lease_and_at_most_its_limit() -> None:
    """A finish is dropped one lease after it was kept; the oldest go first past the limit."""
    clock = FakeClock("2026-01-01T00:00:00+00:00")
    recent = _parts(clock, MemoryBackend(clock=clock), limit=3)
    recent.add(*_finish(1000, "t1"))
    clock.advance("20s")
    recent.add(*_finish(2000, "t2"))
    recent.add(*_finish(2000, "t2b"))  # the same run again (a retry): one entry
    assert len(recent) == 2
    clock.advance("11s")  # t1 is 31 s old now
    recent.add(*_finish(3000, "t3"))
    assert len(recent) == 2
    for slot in (4000, 5000, 6000):
        recent.add(*_finish(slot, f"t{slot}"))
    assert len(recent) == 3


async def test_the_re_send_heals_lost_state_and_leaves_other_owners_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One ``finish_many``: a lost state is written finished, another owner's run is not."""
    clock = FakeClock("2026-01-01T00:00:00+00:00")
    backend = MemoryBackend(clock=clock)
    runs = backend.runs
    assert runs is not None
    recent = _parts(clock, backend)
    now = clock.now_ms()
    # Slot A: this instance's finish landed, then the store lost the run (a failover).
    recent.add(*_finish(now, "mine"))
    # Slot B: after the loss another instance claimed the slot and holds it.
    recent.add(*_finish(now + 1000, "mine-too"))
    assert (await runs.claim(RunClaim("job", now + 1000, "theirs", "b", 30_000, 3))).kind == "won"
    with caplog.at_level(logging.INFO, logger="anarchon"):
        assert await recent.resend() == 2
    assert "re-sent the finishes of 2 run(s)" in caplog.text
    assert "failover lost its claim" in caplog.text  # the store's WARNING for slot A
    assert (await runs.claim(RunClaim("job", now, "late", "c", 30_000, 3))).kind == "done"
    records = {r.slot: r for r in await backend.history("job", 10)}
    assert (records[now].status, records[now].instance_id) == ("ok", "a")
    assert (records[now + 1000].status, records[now + 1000].instance_id) == ("running", "b")
    assert [a.runner for a in await runs.active("job")] == ["b"]
    clock.advance("31s")
    assert await recent.resend() == 0  # one lease later nothing is kept


async def test_recovered_re_sends_in_one_task() -> None:
    """``recovered()`` (the end of an outage) starts one re-send; the finish lands."""
    clock = FakeClock("2026-01-01T00:00:00+00:00")
    backend = MemoryBackend(clock=clock)
    recent = _parts(clock, backend)
    recent.add(*_finish(clock.now_ms(), "mine"))
    recent.recovered()
    recent.recovered()  # a second recovery while the first re-send runs: no second task
    tasks = recent.tasks.work()
    assert len(tasks) == 1
    await asyncio.gather(*tasks)
    assert [r.status for r in await backend.history("job", 10)] == ["ok"]
