"""Claiming ahead (docs/scaling.md, "Claiming ahead"): claimed before the fire time, run at it."""

from __future__ import annotations

import asyncio
import time

import pytest
from anarchon import RunContext, Scheduler
from anarchon._scheduler.wakeup import DEFAULT_CLAIM_AHEAD_MS, MAX_CLAIM_AHEAD_MS
from anarchon.backend.memory import MemoryBackend
from anarchon.errors import InvalidConfigError, UnsupportedError

PERIOD_MS = 2_000
"""A job every 2 s: its lead is a quarter of the gap, 500 ms (below the 1 s default)."""


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def _sleep_until(at_ms: int) -> None:
    await asyncio.sleep(max(0, at_ms - _wall_ms()) / 1000)


def _next_slot(after_ms: int) -> int:
    return (after_ms // PERIOD_MS + 1) * PERIOD_MS


async def test_a_slot_is_claimed_ahead_and_its_handler_starts_at_the_fire_time() -> None:
    backend = MemoryBackend()
    starts: list[tuple[int, int]] = []

    async def tick(ctx: RunContext) -> None:
        starts.append((ctx.slot, _wall_ms()))

    scheduler = Scheduler(backend, instance_id="a")
    assert scheduler.claim_ahead_ms == DEFAULT_CLAIM_AHEAD_MS
    scheduler.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    async with scheduler:
        slot = _next_slot(_wall_ms() + 800)  # at least 300 ms before its claim
        await _sleep_until(slot - 150)  # within the 500 ms lead, before the fire time
        assert backend.runs is not None
        active = await backend.runs.active("tick")
        assert [(a.slot, a.runner, a.live) for a in active] == [(slot, "a", True)]
        assert [s for s, _ in starts if s == slot] == [], "started before its fire time"
        await _sleep_until(slot + 1_000)
    started = dict(starts)
    assert started[slot] >= slot
    history = {r.slot: r for r in await backend.history("tick", 20)}
    assert history[slot].status == "ok"
    started_at = history[slot].started_at
    assert started_at is not None
    assert started_at >= slot


async def test_claim_ahead_zero_claims_at_the_fire_time() -> None:
    backend = MemoryBackend()

    async def tick(ctx: RunContext) -> None:
        return None

    scheduler = Scheduler(backend, instance_id="a", claim_ahead=0)
    scheduler.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    async with scheduler:
        slot = _next_slot(_wall_ms() + 800)
        await _sleep_until(slot - 150)
        assert backend.runs is not None
        assert [a.slot for a in await backend.runs.active("tick") if a.slot == slot] == []
        await _sleep_until(slot + 700)
    assert slot in {r.slot for r in await backend.history("tick", 20) if r.status == "ok"}


async def test_stop_runs_a_run_claimed_ahead_at_its_fire_time() -> None:
    backend = MemoryBackend()
    ran: list[tuple[int, str, int, int]] = []

    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id, ctx.attempt, _wall_ms()))

    scheduler = Scheduler(backend, instance_id="a")
    scheduler.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    await scheduler.start()
    slot = _next_slot(_wall_ms() + 800)
    await _sleep_until(slot - 150)  # claimed ahead, not started
    assert backend.runs is not None
    assert [a.runner for a in await backend.runs.active("tick") if a.slot == slot] == ["a"]
    await scheduler.stop()  # within stop_grace (10 s): the handler starts at its fire time
    of_slot = [(s, i, n) for s, i, n, _at in ran if s == slot]
    assert of_slot == [(slot, "a", 1)], ran
    assert all(at >= slot for s, _i, _n, at in ran if s == slot)
    records = [
        (r.attempt, r.instance_id, r.status)
        for r in await backend.history("tick", 50)
        if r.slot == slot
    ]
    assert records == [(1, "a", "ok")]


async def test_stop_past_its_grace_hands_over_a_run_claimed_ahead_to_a_backup() -> None:
    backend = MemoryBackend()
    ran: list[tuple[int, str, int]] = []

    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id, ctx.attempt))

    first = Scheduler(backend, instance_id="first", stop_grace=0)
    first.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    await first.start()
    slot = _next_slot(_wall_ms() + 800)
    await _sleep_until(slot - 150)  # claimed by `first`, not started
    assert backend.runs is not None
    assert [a.runner for a in await backend.runs.active("tick") if a.slot == slot] == ["first"]
    # The backup starts now; its claim of `slot` finds it running on `first`.
    second = Scheduler(backend, instance_id="second", heartbeat="200ms", lease="1s")
    second.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    await second.start()
    await first.stop()  # stop_grace=0: handed over without starting
    await _sleep_until(slot + 1_500)
    await second.stop()
    of_slot = [r for r in ran if r[0] == slot]
    assert of_slot == [(slot, "second", 2)], ran
    records = sorted(
        (r.attempt, r.instance_id, r.status, r.reason)
        for r in await backend.history("tick", 50)
        if r.slot == slot
    )
    assert records == [(1, "first", "interrupted", "handed_over"), (2, "second", "ok", None)]


def test_claim_ahead_is_checked_where_it_is_given() -> None:
    with pytest.raises(InvalidConfigError) as too_long:
        Scheduler(MemoryBackend(), claim_ahead=MAX_CLAIM_AHEAD_MS / 1000 + 1)
    assert too_long.value.code == "ANARCHON_INVALID_CONFIG"
    assert "claim_ahead" in str(too_long.value)
    with pytest.raises(InvalidConfigError):
        Scheduler(MemoryBackend(), claim_ahead="-1s")
    # A backend without leases has no hand-over for a slot claimed ahead: refused.
    with pytest.raises(UnsupportedError) as no_leases:
        Scheduler(MemoryBackend(leases=False), claim_ahead="1s")
    assert "claim_ahead" in str(no_leases.value)
    assert Scheduler(MemoryBackend(leases=False)).claim_ahead_ms == 0
