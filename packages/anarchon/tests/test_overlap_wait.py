"""Overlap answers are re-checked until the slot's time is up, also for a job whose slots are
only a few hundred ms apart (docs/leases.md, "A run ends when its handler ends")."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Sequence

from anarchon import ClaimOutcome, MemoryBackend, RunClaim, RunContext, Scheduler
from anarchon.events import Event
from instrumented import ProbedBackend, ProbedRunStore


async def test_a_short_gap_slot_waits_for_the_run_before_it_instead_of_skipping() -> None:
    """Every 200 ms, each handler 170 ms: the next slot is claimed (50 ms ahead) while its
    predecessor still runs. It is re-checked until the predecessor ends, then runs: no slot is
    skipped and no two handlers are alive together (overlap=False)."""
    intervals: list[tuple[int, float, float]] = []
    skipped: list[Event] = []

    async def slow(ctx: RunContext) -> None:
        begin = time.monotonic()
        await asyncio.sleep(0.17)
        intervals.append((ctx.slot, begin, time.monotonic()))

    scheduler = Scheduler(MemoryBackend(), instance_id="a")
    scheduler.on("skipped", skipped.append)
    scheduler.every("tight", "200ms", slow, jitter=0)
    async with scheduler:
        await asyncio.sleep(2.5)
    slots = sorted(slot for slot, _b, _e in intervals)
    # The first slot is the current one at start: it may start up to 200 ms late and then
    # truly outlive the next slot's time. From the slot after that on, nothing is skipped.
    settled = slots[0] + 400
    assert [e.slot for e in skipped if e.slot >= settled] == []
    steady = [s for s in slots if s >= settled]
    assert len(steady) >= 8
    assert steady == list(range(settled, steady[-1] + 200, 200)), "a slot was skipped"
    ordered = sorted(intervals, key=lambda i: i[1])
    for (_s1, _b1, end), (_s2, begin, _e2) in itertools.pairwise(ordered):
        assert begin >= end, "two runs of the job were alive together"


async def test_a_slot_blocked_by_this_instances_own_run_is_rechecked_once_when_it_ends() -> None:
    """The run blocking the next slot is this instance's own: the store is not polled while it
    lives (a slow link carries one re-check, not one per interval beside the finish it waits
    for); the slot is claimed again as soon as that run's end is stored, and runs."""
    claimed: list[int] = []

    class Store(ProbedRunStore):
        async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
            claimed.extend(c.slot for c in claims)
            return await super().claim_many(claims)

    backend = ProbedBackend()
    backend.runs = backend._store = Store(backend.probe)
    intervals: list[tuple[int, float, float]] = []
    two_ran = asyncio.Event()

    async def first_outlives_its_slot(ctx: RunContext) -> None:
        begin = time.monotonic()
        # The first run ends 1.1 s after its slot however late it started: the next slot
        # (claimed 250 ms ahead of it) is blocked by it, and free again before its own time is up.
        hold = ctx.slot / 1000 + 1.1 - time.time() if not intervals else 0.05
        await asyncio.sleep(max(0.05, hold))
        intervals.append((ctx.slot, begin, time.monotonic()))
        if len(intervals) >= 2:
            two_ran.set()

    # A 100 ms re-check interval (a quarter heartbeat): polling would claim the slot ~4 times.
    scheduler = Scheduler(backend, instance_id="a", lease="2s", heartbeat="400ms")
    scheduler.every("own", "1s", first_outlives_its_slot, jitter=0)
    async with scheduler:
        await asyncio.wait_for(two_ran.wait(), 10)
    (first, _b, first_end), (second, second_begin, _e) = intervals[:2]
    assert second == first + 1000, "the slot after the long run was skipped"
    assert second_begin >= first_end
    assert Counter(claimed)[second] == 2, claimed  # the claim ahead, and one after the end
