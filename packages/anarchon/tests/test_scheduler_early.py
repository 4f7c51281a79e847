"""The scheduler against a store that answers ``early`` (docs/leases.md, the claim tree).

The memory store reads its own clock object; stepping that clock 40 s back
makes this instance's estimate of store time run 40 s ahead, exactly what an
instance with a fast clock between two syncs sees.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from anarchon import MemoryBackend, RunContext, Scheduler
from due_now import yearly_due_now

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""


class StoreClock:
    """The memory store's clock: wall time plus a settable offset."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms


async def _until(predicate: object, timeout: float = 10.0) -> None:
    assert callable(predicate)
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_early_claims_are_refused_logged_once_and_resync_the_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = StoreClock()
    backend = MemoryBackend(clock=clock)
    slots: list[int] = []
    ahead: list[int] = []  # how far each run's slot was ahead of the store clock when it started

    async def job(ctx: RunContext) -> None:
        slots.append(ctx.slot)
        ahead.append(ctx.slot - clock.now_ms())

    scheduler = Scheduler(backend, instance_id="fast", lease="2s", heartbeat="500ms")
    scheduler.every("tick", "200ms", job, jitter=0)
    caplog.set_level(logging.INFO, logger="anarchon")
    await scheduler.start()
    try:
        await _until(lambda: len(slots) >= 2)
        clock.offset_ms = -40_000  # the store is now 40 s behind this instance's estimate
        before = len(slots)
        await _until(lambda: "refused" in caplog.text and "early" in caplog.text)
        # Re-synced: the instance's estimate of store time is the store's again.
        await _until(lambda: abs(scheduler._time.now_ms() - clock.now_ms()) < 1_000)
        await asyncio.sleep(1.0)
    finally:
        await scheduler.stop()
    early_lines = [r for r in caplog.records if "as early" in r.getMessage()]
    assert len(early_lines) == 1, [r.getMessage() for r in early_lines]
    assert early_lines[0].levelno == logging.WARNING
    # A slot claimed ahead as stop() began is handed over without running
    # (docs/scaling.md, "Claiming ahead"): not a run of this instance.
    store_slots = [
        r.slot
        for r in await backend.history("tick", 1000)
        if r.status != "skipped" and r.reason != "handed_over"
    ]
    assert sorted(store_slots) == sorted(slots)
    assert not [ms for ms in ahead if ms > 5_000], ahead
    assert len(slots) > before, "runs resume on the store's time after the re-sync"


async def test_a_wiped_store_is_reported_as_state_gone(caplog: pytest.LogCaptureFixture) -> None:
    """A store that lost its state (a restart without persistence) is not "another instance"."""
    backend = MemoryBackend()
    started = asyncio.Event()

    async def job(ctx: RunContext) -> None:
        started.set()
        await asyncio.sleep(30)

    scheduler = Scheduler(backend, instance_id="a", lease="900ms", heartbeat="300ms")
    scheduler.cron("long", DUE, job, jitter=0, max_late="2h")
    caplog.set_level(logging.INFO, logger="anarchon")
    await scheduler.start()
    try:
        await asyncio.wait_for(started.wait(), 10)
        store = backend._store
        with store.state.lock:
            store.state.jobs.clear()  # what a Redis restart without persistence leaves
        await _until(lambda: "lost its lease" in caplog.text, 5)
    finally:
        await scheduler.stop()
    lost = [m for r in caplog.records if "cancelling the handler" in (m := r.getMessage())]
    assert len(lost) == 1, lost
    assert "the store has no state for this run" in lost[0]
    assert "another instance" not in lost[0]
