"""Slots claimed ahead hold a short lease; retries wake when the store answers again.

docs/leases.md, "Slots claimed ahead hold a short lease" and "Retries wake on recovery".
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time

import pytest
from anarchon import RunContext, Scheduler
from anarchon._scheduler.leases import START_WINDOW_MIN_MS, short_lease_ms
from anarchon._scheduler.store_retry import PROBE_S, StorePolicy
from anarchon.backend.memory import MemoryBackend
from anarchon.errors import BackendUnavailableError

PERIOD_MS = 2_000
"""A job every 2 s: claimed 500 ms ahead (a quarter of the period)."""
LEAD_MS = PERIOD_MS // 4


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _next_slot(after_ms: int) -> int:
    return (after_ms // PERIOD_MS + 1) * PERIOD_MS


async def _sleep_until(at_ms: int) -> None:
    await asyncio.sleep(max(0, at_ms - _wall_ms()) / 1000)


# The arithmetic -----------------------------------------------------------------


def test_a_short_lease_lasts_a_start_window_past_the_fire_time() -> None:
    # Claimed 500 ms ahead, lease 30 s: held until 3 s past the fire time, 1.5 s locally.
    assert short_lease_ms(500, 30_000) == (3_500, 2_000)
    # Claimed 2 s ahead: the window is twice the lead, 4 s; the renewal has 2 s to land.
    assert short_lease_ms(2_000, 30_000) == (6_000, 4_000)
    # The local end is always half the window before the store's, and past the fire time.
    for ahead in (1, 10, 499, 1_500, 1_501, 4_000):
        lease, local = short_lease_ms(ahead, 60_000) or (0, 0)
        window = lease - ahead
        assert window == max(2 * ahead, START_WINDOW_MIN_MS)
        assert local - ahead == window - window // 2 >= START_WINDOW_MIN_MS // 2


def test_no_short_lease_at_or_after_the_fire_time_or_when_no_shorter() -> None:
    assert short_lease_ms(0, 30_000) is None
    assert short_lease_ms(-50, 30_000) is None
    assert short_lease_ms(500, 3_000) is None  # lease 3 s: 3.5 s would be longer
    assert short_lease_ms(500, 3_500) is None


# On the memory store ---------------------------------------------------------------


async def test_a_slot_claimed_ahead_is_leased_short_and_extended_when_it_starts() -> None:
    backend = MemoryBackend()
    started = asyncio.Event()

    async def tick(ctx: RunContext) -> None:
        started.set()
        await asyncio.sleep(0.6)

    scheduler = Scheduler(backend, instance_id="a")  # lease 30 s, heartbeat 10 s
    scheduler.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    runs = backend.runs
    assert runs is not None
    async with scheduler:
        slot = _next_slot(_wall_ms() + LEAD_MS + 300)
        await _sleep_until(slot - 150)  # claimed, not started
        (held,) = [a for a in await runs.active("tick") if a.slot == slot]
        assert held.lease_expires_at is not None
        # time to fire (<= 500 ms) plus the 3 s window: far below the 30 s lease
        assert slot + 2_900 <= held.lease_expires_at <= slot + START_WINDOW_MIN_MS + 50
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.sleep(0.3)  # the start renewal, sent at once by the lease thread
        (held,) = [a for a in await runs.active("tick") if a.slot == slot]
        assert held.lease_expires_at is not None
        assert held.lease_expires_at >= slot + 25_000  # the full lease from its start
    history = {r.slot: r for r in await backend.history("tick", 20)}
    assert history[slot].status == "ok"


async def test_a_paused_instance_blocks_its_unstarted_slot_for_the_window_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A claims a slot ahead, then its loop is blocked past the slot's short lease.

    B (another loop in another thread, same store) is the slot's backup and
    takes it over once the short lease has ended, not a whole lease later; A,
    waking up, never starts the slot.
    """
    backend = MemoryBackend()
    ran: list[tuple[str, int, int, int]] = []

    def record(ctx: RunContext) -> None:
        ran.append((ctx.instance_id, ctx.slot, ctx.attempt, _wall_ms()))

    async def tick(ctx: RunContext) -> None:
        record(ctx)

    a = Scheduler(backend, instance_id="a")
    a.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    slot_box: list[int] = []
    b_ready = threading.Event()
    b_done = threading.Event()

    async def b_main() -> None:
        b = Scheduler(backend, instance_id="b")
        b.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
        b_ready.wait(10)
        async with b:
            await asyncio.to_thread(b_done.wait, 20)

    thread = threading.Thread(target=lambda: asyncio.run(b_main()))
    caplog.set_level(logging.INFO, logger="anarchon")
    async with a:
        slot = _next_slot(_wall_ms() + LEAD_MS + 400)
        slot_box.append(slot)
        await _sleep_until(slot - LEAD_MS + 150)  # A has claimed the slot
        thread.start()
        b_ready.set()  # B starts inside the lead: it claims the slot too, as its backup
        await _sleep_until(slot - 100)
        time.sleep((slot + 4_500 - _wall_ms()) / 1000)  # noqa: ASYNC251 - A "paused" across the slot's window
        await asyncio.sleep(0.5)
    b_done.set()
    thread.join(20)
    of_slot = [(who, attempt, at) for who, s, attempt, at in ran if s == slot]
    assert [(who, attempt) for who, attempt, _at in of_slot] == [("b", 2)], ran
    taken_at = of_slot[0][2]
    # Taken over at the end of the start window (3 s past the fire time), not a lease later.
    assert slot + START_WINDOW_MIN_MS <= taken_at <= slot + START_WINDOW_MIN_MS + 1_500
    history = [r for r in await backend.history("tick", 20) if r.slot == slot]
    assert {(r.attempt, r.status) for r in history} >= {(2, "ok")}
    lost = [r.message for r in caplog.records if "before its handler could start" in r.message]
    assert lost, "A did not log that the slot's short lease ended before its start"


# Retries wake on recovery -----------------------------------------------------------


async def test_a_retry_in_backoff_tries_again_at_once_when_another_call_succeeds() -> None:
    backend = MemoryBackend()
    policy = StorePolicy(backend, logging.getLogger("anarchon.test"), _wall_ms, 8)
    up = False
    tries: list[float] = []
    loop = asyncio.get_running_loop()

    async def finish() -> str:
        tries.append(loop.time())
        if not up:
            raise BackendUnavailableError("connection refused")
        return "done"

    async def other() -> str:
        return "ok"

    # A second waiting call probes, so the first one's backoff grows to its cap.
    waiting = asyncio.create_task(policy.call(finish, max_delay_s=30.0))
    prober = asyncio.create_task(policy.call(lambda: finish()))
    await asyncio.sleep(2.5)
    assert not waiting.done()
    up = True
    before = len(tries)
    assert await policy.call(other) == "ok"  # the store answers a call again
    assert not policy.outage
    for _ in range(5):
        await asyncio.sleep(0)
    assert await asyncio.wait_for(waiting, 0.05) == "done"  # woken, not at its next backoff
    assert await asyncio.wait_for(prober, 0.05) == "done"
    assert len(tries) == before + 2


async def test_a_call_the_store_dropped_is_sent_again_when_another_call_succeeds() -> None:
    """A request sent before the outage was seen and never answered (a store electing a
    leader drops it) does not wait out its call timeout once the store answers again."""
    backend = MemoryBackend()
    policy = StorePolicy(backend, logging.getLogger("anarchon.test"), _wall_ms, 8)
    sends: list[str] = []
    dropped = asyncio.Event()

    async def claim() -> str:
        sends.append("claim")
        if len(sends) == 1:
            dropped.set()
            await asyncio.sleep(3600)  # the first request is dropped: no answer ever
        return "won"

    async def down() -> str:
        raise BackendUnavailableError("connection refused")

    async def other() -> str:
        return "ok"

    waiting = asyncio.create_task(policy.call(claim))
    await dropped.wait()
    failed = asyncio.create_task(policy.call(down))  # another call sees the outage
    await asyncio.sleep(0.1)
    assert policy.outage
    failed.cancel()
    await asyncio.gather(failed, return_exceptions=True)
    assert await policy.call(other) == "ok"  # the store answers again
    assert await asyncio.wait_for(waiting, 0.5) == "won"  # sent again at once, same request
    assert sends == ["claim", "claim"]
    assert not policy.outage  # the cut-short call started no outage of its own


async def test_while_calls_wait_in_backoff_one_of_them_probes_every_quarter_second() -> None:
    backend = MemoryBackend()
    policy = StorePolicy(backend, logging.getLogger("anarchon.test"), _wall_ms, 8)
    loop = asyncio.get_running_loop()
    tries: list[float] = []

    async def down() -> None:
        tries.append(loop.time())
        raise BackendUnavailableError("connection refused")

    calls = [asyncio.create_task(policy.call(down)) for _ in range(5)]
    await asyncio.sleep(4.0)
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    late = sorted(t for t in tries if t - tries[0] > 1.0)
    gaps = [b - a for a, b in itertools.pairwise(late)]
    assert max(gaps) <= PROBE_S + 0.2, gaps  # never a second without a try
    # ... but not every call: five calls capped at the probe would try about 60 times.
    assert len(late) <= 3 * 3.0 / PROBE_S, len(late)


class _NoClone(MemoryBackend):
    """A backend object that cannot be cloned: heartbeats stay on the scheduler's loop."""

    def clone(self) -> None:  # type: ignore[override]  # Backend.clone allows None
        return None


async def test_without_a_lease_thread_the_start_renewal_goes_from_the_loop() -> None:
    backend = _NoClone()
    started = asyncio.Event()

    async def tick(ctx: RunContext) -> None:
        started.set()
        await asyncio.sleep(0.6)

    scheduler = Scheduler(backend, instance_id="a")
    scheduler.every("tick", f"{PERIOD_MS}ms", tick, jitter=0)
    runs = backend.runs
    assert runs is not None
    async with scheduler:
        parts = scheduler._parts
        assert parts is not None
        assert parts.keeper is not None
        assert parts.keeper.thread is None
        slot = _next_slot(_wall_ms() + LEAD_MS + 300)
        await _sleep_until(slot - 150)
        (held,) = [a for a in await runs.active("tick") if a.slot == slot]
        assert held.lease_expires_at is not None
        assert held.lease_expires_at <= slot + START_WINDOW_MIN_MS + 50
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.sleep(0.3)
        (held,) = [a for a in await runs.active("tick") if a.slot == slot]
        assert held.lease_expires_at is not None
        assert held.lease_expires_at >= slot + 25_000
