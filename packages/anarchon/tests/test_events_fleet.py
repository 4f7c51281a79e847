"""Events from the fleet features: ``skipped`` for paused/skip_next slots, ``schedule_drift``.

On the memory backend, lease and claim-only paths (docs/fleet.md, "Events").
"""

from __future__ import annotations

import asyncio
import time

import pytest
from anarchon import Event, MemoryBackend, RunContext, Scheduler


async def _until(predicate: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("leases", [True, False], ids=["lease-path", "claim-only-path"])
async def test_paused_and_skip_next_slots_emit_skipped_with_their_reason(leases: bool) -> None:
    backend = MemoryBackend(leases=leases)
    ran: list[int] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler = Scheduler(backend, instance_id="a", control_cache=0)
    scheduler.every("tick", "200ms", tick)
    skipped: list[Event] = []
    started: list[Event] = []
    finished: list[Event] = []
    scheduler.on("skipped", skipped.append)
    scheduler.on("run_started", started.append)
    scheduler.on("run_finished", finished.append)
    async with scheduler:
        await _until(lambda: len(ran) >= 2)
        await scheduler.pause("tick")
        await _until(lambda: any(e.reason == "paused" for e in skipped))
        await scheduler.resume("tick")
        control = await scheduler.skip_next("tick")
        until = control.skip_until
        assert until is not None
        await _until(lambda: any(slot > until for slot in ran))
        await _until(lambda: any(e.reason == "skip_next" for e in skipped))
        history = await scheduler.history("tick", limit=1000)
    recorded = {(r.slot, r.reason) for r in history if r.status == "skipped"}
    emitted = {(e.slot, e.reason) for e in skipped}
    assert emitted == recorded
    assert {reason for _slot, reason in emitted} == {"paused", "skip_next"}
    assert (until, "skip_next") in emitted
    assert all(e.job == "tick" and e.instance == "a" and e.attempt is None for e in skipped)
    skipped_slots = {slot for slot, _reason in emitted}
    assert not skipped_slots & {e.slot for e in started}, "a skipped slot emitted run_started"
    assert not skipped_slots & {e.slot for e in finished}, "a skipped slot emitted run_finished"


async def test_schedule_drift_is_emitted_on_every_instance_holding_the_job() -> None:
    backend = MemoryBackend()

    async def noop(ctx: RunContext) -> None:
        return None

    a = Scheduler(backend, instance_id="a", fleet_refresh="300ms")
    b = Scheduler(backend, instance_id="b", fleet_refresh="300ms")
    a.every("job", "1s", noop)
    b.every("job", "2s", noop)
    events: dict[str, list[Event]] = {"a": [], "b": []}
    a.on("schedule_drift", events["a"].append)
    b.on("schedule_drift", events["b"].append)
    await a.start()
    await b.start()
    try:
        await _until(lambda: events["a"] and events["b"])
        await asyncio.sleep(1.0)  # more refreshes: the same drift is emitted once
    finally:
        await a.stop()
        await b.stop()
    for name in ("a", "b"):
        assert len(events[name]) == 1, events[name]
        event = events[name][0]
        assert event.kind == "schedule_drift"
        assert event.job == "job"
        assert event.instance == name
        assert event.slot is None
        assert event.details is not None
        prints = event.details["fingerprints"]
        assert len(prints) == 2
        assert sum(prints.values()) == 2
        assert event.details["this_instance"] in prints
