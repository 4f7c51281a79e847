"""The batched hot path: due slots claimed in chunks, finishes, results and heartbeats batched,
backups re-checked in batches, store operations bounded by ``max_in_flight``, and the same
behaviour on a backend without batch members (the per-item fallback)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from anarchon import MemoryBackend, RunContext, Scheduler
from anarchon._scheduler.store_batches import CHUNK
from anarchon.errors import InvalidConfigError
from anarchon.events import Event
from due_now import yearly_due_now
from instrumented import Probe, ProbedBackend
from plain_backend import PlainBackend

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""

FAST = {"lease": "600ms", "heartbeat": "200ms"}
T = TypeVar("T")


async def _noop(ctx: RunContext) -> None:
    return None


async def _until(done: Callable[[], bool], timeout: float = 3.0) -> None:
    t0 = time.monotonic()
    while not done():
        assert time.monotonic() - t0 < timeout, "condition not reached in time"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("leases", [True, False])
async def test_due_slots_go_to_the_store_in_chunks(leases: bool) -> None:
    """1,200 jobs due together: a few claim_many calls of <= 500, no single-item calls."""
    backend = ProbedBackend(leases=leases)
    probe = backend.probe
    scheduler = Scheduler(backend, instance_id="batcher")
    jobs = 1200
    for n in range(jobs):
        scheduler.every(f"job-{n}", "1s", _noop, jitter=0, max_late="5s", history_size=5)
    async with scheduler:
        await asyncio.sleep(2.3)
    ran = backend.ran()
    assert ran, "nothing ran"
    assert set(ran.values()) == {1}, "a slot ran twice"
    slots_per_job = Counter(job for job, _slot in ran)
    assert len(slots_per_job) == jobs
    claims = "claim_many" if leases else "plain_claim_many"
    sizes = probe.sizes[claims]
    assert max(sizes) <= CHUNK
    # Every run was claimed; a claim may be sent again (an ``overlap`` answer
    # re-checked while an earlier wave's finishes land, docs/leases.md) and a
    # wave may be claimed as stop() begins and handed over unrun.
    assert sum(sizes) >= sum(ran.values())
    # Batched: a few calls per wave of 1,200. A starved CPU splits a wave into more
    # calls (claims answered ``overlap`` are re-checked together), never into single
    # items, so the bound is on the calls' mean size, not their number.
    assert len(sizes) <= sum(sizes) / 50, sizes
    single = ("claim", "finish", "heartbeat", "plain_claim", "save_result")
    assert not any(probe.calls[name] for name in single), probe.calls
    saves = probe.sizes["save_results"]
    assert sum(saves) == sum(ran.values())
    assert len(saves) < sum(ran.values()) / 50, "results were not batched"
    if leases:
        assert sum(probe.sizes["finish_many"]) == sum(ran.values())


async def test_heartbeats_are_one_call_per_tick() -> None:
    """40 held leases renewed by one heartbeat_many per tick, never one call per run."""
    backend = ProbedBackend()
    probe = backend.probe
    started: list[int] = []

    async def hold(ctx: RunContext) -> None:
        started.append(ctx.slot)
        await asyncio.sleep(1.5)

    scheduler = Scheduler(backend, instance_id="holder", **FAST)
    for n in range(40):
        scheduler.cron(f"long-{n}", DUE, hold, jitter=0, max_late="2h")
    async with scheduler:
        await asyncio.sleep(1.7)
    assert len(started) == 40
    beats = probe.sizes["heartbeat_many"]
    assert beats, "no heartbeat was sent"
    assert probe.calls["heartbeat"] == 0
    assert len(beats) <= 1.5 / 0.2 + 3, beats
    assert max(beats) == 40
    history = [r for n in range(40) for r in await backend.history(f"long-{n}", 5)]
    assert {(r.attempt, r.status) for r in history} == {(1, "ok")}


async def test_backups_recheck_in_batches_and_take_over() -> None:
    """30 runs held by a crashed instance: the backup re-checks them in batches, then takes over."""
    probe = Probe()
    backend = ProbedBackend(probe)
    first: list[int] = []
    second: list[int] = []

    async def hold(ctx: RunContext) -> None:
        first.append(ctx.attempt)
        await asyncio.sleep(30)

    async def quick(ctx: RunContext) -> None:
        second.append(ctx.attempt)

    a = Scheduler(backend, instance_id="a", **FAST)
    b = Scheduler(backend, instance_id="b", **FAST)
    for n in range(30):
        a.cron(f"long-{n}", DUE, hold, jitter=0, max_late="2h")
        b.cron(f"long-{n}", DUE, quick, jitter=0, max_late="2h")
    await a.start()
    await _until(lambda: len(first) == 30)
    probe.creates.clear()
    await b.start()
    await asyncio.sleep(0.5)
    assert not second, "the backup ran while the leases were live"
    rechecks = [c for c in probe.creates if c and not any(c)]
    assert rechecks, "no batched re-check was sent"
    assert max(len(c) for c in rechecks) == 30
    for task in a._every_task():  # a crashes: nothing is released or finished
        task.cancel()
    a._started = False
    await _until(lambda: len(second) == 30)
    assert second == [2] * 30
    await asyncio.sleep(0.1)
    await b.stop()


@pytest.mark.parametrize("native", [True, False])
async def test_max_in_flight_bounds_store_operations(native: bool) -> None:
    """2,000 jobs due at once through a slow store: never more than max_in_flight calls at once.

    The bound is the scheduler loop's; the lease thread renews on its own
    connection, one ``heartbeat_many`` at a time (docs/concepts.md).
    """
    probe = Probe(delay_s=0.002)
    if native:
        backend = ProbedBackend(probe)
    else:
        backend = PlainBackend()  # single calls only: the fallback must respect the bound too
        inner = ProbedBackend(probe)
        backend.inner = inner
        backend.runs.inner = inner._store  # type: ignore[union-attr]
    scheduler = Scheduler(backend, instance_id="bounded", max_in_flight=3)
    for n in range(2000):
        scheduler.cron(f"job-{n}", DUE, _noop, jitter=0, max_late="2h", history_size=5)
    async with scheduler:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 20:
            await asyncio.sleep(0.05)
            records = await scheduler.history("job-1999", 1)
            if records and records[0].status == "ok":
                break
        await asyncio.sleep(0.1)
    assert probe.peak <= 3, f"{probe.peak} store operations in flight with max_in_flight=3"
    assert probe.thread_peak <= 1, f"the lease thread had {probe.thread_peak} calls in flight"
    done = 0
    for n in range(2000):
        records = await backend.history(f"job-{n}", 5)
        done += sum(r.status == "ok" for r in records)
    assert done == 2000


def test_max_in_flight_must_be_a_positive_integer() -> None:
    for bad in (0, -1, 1.5, True, "4"):
        with pytest.raises(InvalidConfigError) as refused:
            Scheduler(MemoryBackend(), max_in_flight=bad)  # type: ignore[arg-type]
        assert refused.value.code == "ANARCHON_INVALID_CONFIG"


@pytest.mark.parametrize("leases", [True, False])
async def test_three_schedulers_on_a_backend_without_batch_members(leases: bool) -> None:
    """The pre-batch interface: three instances still run each slot exactly once."""
    backend = PlainBackend(leases=leases)
    ran: list[tuple[int, str]] = []

    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id))

    schedulers = [Scheduler(backend, instance_id=f"p{n}") for n in range(3)]
    for scheduler in schedulers:
        scheduler.every("tick", "100ms", tick, jitter="20ms")
    for scheduler in schedulers:
        await scheduler.start()
    await asyncio.sleep(1.5)
    for scheduler in schedulers:
        await scheduler.stop()
    slots = Counter(slot for slot, _ in ran)
    assert len(slots) >= 10
    assert set(slots.values()) == {1}
    history = await backend.history("tick", 100)
    assert {r.slot for r in history if r.status == "ok"} == set(slots)


class _SlowClaims(Probe):
    """Each ``claim_many`` takes 300 ms; every other call is as fast as the memory store."""

    claiming = 0
    """``claim_many`` calls begun (each waits 300 ms before it reaches the store)."""

    async def watch(self, name: str, size: int, call: Callable[[], Awaitable[T]]) -> T:
        if name == "claim_many":
            self.claiming += 1
            await asyncio.sleep(0.3)
        return await super().watch(name, size, call)


async def test_claims_waiting_behind_the_bound_are_not_sent_once_stop_begins() -> None:
    """1,500 jobs due together, one store operation in flight at a time: stop() while the
    first chunk is in flight sends no other chunk (their slots are left to other instances);
    the chunk in flight is answered, and its wins are handed over unrun, in one release_many."""
    probe = _SlowClaims()
    backend = ProbedBackend(probe)
    handed: list[Event] = []
    scheduler = Scheduler(backend, instance_id="stopper", max_in_flight=1, claim_ahead=0)
    scheduler.on("handed_over", handed.append)
    for n in range(3 * CHUNK):
        # One slot per job, whatever the load: with a short interval a slow first wake-up
        # finds a job's next slot due too, answered "overlap" and not handed over.
        scheduler.cron(f"job-{n}", DUE, _noop, jitter=0, max_late="2h")
    await scheduler.start()
    await _until(lambda: probe.claiming == 1, timeout=5)
    await scheduler.stop()
    assert probe.sizes["claim_many"] == [CHUNK], "a chunk was sent after stop() began"
    assert len(handed) == CHUNK
    assert probe.sizes["release_many"] == [CHUNK], "the hand-overs were not one batch"
    assert probe.calls["release"] == 0
    assert not backend.ran()
