"""The scheduler on the memory backend: exactly-once across instances, options, lifecycle."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Sequence

import pytest
from anarchon import (
    ClaimOutcome,
    DedupeWindowError,
    DuplicateJobError,
    InvalidJobError,
    MemoryBackend,
    RunClaim,
    RunContext,
    Scheduler,
)
from anarchon.backend.memory import MemoryRunStore


@pytest.mark.parametrize("leases", [True, False], ids=["lease-path", "claim-only-path"])
async def test_three_schedulers_run_each_slot_exactly_once(leases: bool) -> None:
    backend = MemoryBackend(leases=leases)
    ran: list[tuple[int, str]] = []

    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id))

    schedulers = [Scheduler(backend, instance_id=f"i{n}") for n in range(4)]
    for scheduler in schedulers:
        scheduler.every("tick", "100ms", tick, jitter="30ms")
    for scheduler in schedulers:
        await scheduler.start()
    await asyncio.sleep(6.5)
    for scheduler in schedulers:
        await scheduler.stop()

    slots = Counter(slot for slot, _ in ran)
    assert len(slots) >= 55
    assert all(count == 1 for count in slots.values()), [s for s, c in slots.items() if c > 1]
    ordered = sorted(slots)
    assert ordered == list(range(ordered[0], ordered[-1] + 100, 100)), "a slot was skipped"
    assert len({instance for _, instance in ran}) > 1, "only one instance ever won"
    history = await schedulers[0].history("tick", limit=1000)
    assert sorted(r.slot for r in history) == ordered
    assert all(r.status == "ok" for r in history)


@pytest.mark.parametrize("leases", [True, False], ids=["lease-path", "claim-only-path"])
async def test_handler_error_is_stored_and_scheduler_keeps_running(leases: bool) -> None:
    calls: list[int] = []

    async def flaky(ctx: RunContext) -> None:
        calls.append(ctx.slot)
        if len(calls) == 1:
            raise RuntimeError("boom")

    async with Scheduler(MemoryBackend(leases=leases), instance_id="solo") as scheduler:
        scheduler.every("flaky", "100ms", flaky, jitter=0)
        await asyncio.sleep(0.55)
    history = await scheduler.history("flaky", limit=100)
    assert len(calls) >= 3
    oldest = history[-1]
    assert oldest.status == "error"
    assert oldest.error == "RuntimeError: boom"
    assert all(r.status == "ok" for r in history[:-1])


class _ClaimTimes(MemoryRunStore):
    """The memory lease store, noting the store time of every won claim."""

    def __init__(self) -> None:
        super().__init__()
        self.won: list[tuple[str, int, int]] = []

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        outcomes = await super().claim_many(claims)
        now = self.state.now()
        self.won += [(c.job, c.slot, now) for c, o in zip(claims, outcomes, strict=True) if o.won]
        return outcomes


async def test_max_late_skips_slots_claimed_too_late() -> None:
    """No slot is claimed past ``max_late``; a handler blocking the loop delays starts only."""
    started: list[tuple[int, int]] = []
    backend = MemoryBackend()
    store = backend._store = backend.runs = _ClaimTimes()
    scheduler = Scheduler(backend, instance_id="solo")

    @scheduler.every("fast", "100ms", jitter=0, max_late="30ms")
    async def fast(ctx: RunContext) -> None:
        started.append((ctx.slot, scheduler.clock.now_ms()))

    @scheduler.every("blocker", "1s", jitter=0)
    async def blocker(ctx: RunContext) -> None:
        time.sleep(0.6)  # noqa: ASYNC251 - blocks the event loop on purpose: slots of "fast" go late

    async with scheduler:
        await asyncio.sleep(2.5)
    assert started, "the fast job never ran"
    claimed = [at - slot for job, slot, at in store.won if job == "fast"]
    assert max(claimed) <= 30 + 40  # only the event-loop latency past max_late
    assert len(started) < 22, "slots past max_late were still run"
    # Slots claimed in the blocker's wake-up start after it (batched claims, then handlers).
    lateness = [at - slot for slot, at in started]
    assert max(lateness) <= 600 + 30 + 40 + 40


async def test_jitter_stays_in_bounds_and_spreads() -> None:
    delays: list[int] = []
    slots: list[int] = []
    scheduler = Scheduler(MemoryBackend(), instance_id="jittery")

    @scheduler.every("j", "200ms", jitter="80ms")
    async def job(ctx: RunContext) -> None:
        slots.append(ctx.slot)
        delays.append(scheduler.clock.now_ms() - ctx.slot)

    async with scheduler:
        started = scheduler.clock.now_ms()
        await asyncio.sleep(3)
    # the slot before start is claimed at once (it is inside max_late): not a jitter wait
    delays = [delay for slot, delay in zip(slots, delays, strict=False) if slot > started]
    assert len(delays) >= 10
    assert min(delays) >= 0
    assert max(delays) < 80 + 20
    assert len(set(d // 10 for d in delays)) > 2, "jitter does not spread"


def test_jitter_is_capped_at_half_the_gap() -> None:
    from anarchon import _core

    for slot in range(0, 100_000, 1000):
        assert 0 <= _core.jitter_ms("i", "j", slot, 10_000, 1000) < 500


async def test_add_and_remove_while_running() -> None:
    ran: Counter[str] = Counter()

    async def count(ctx: RunContext) -> None:
        ran[ctx.job] += 1

    async with Scheduler(MemoryBackend(), instance_id="solo") as scheduler:
        scheduler.every("first", "100ms", count, jitter=0)
        await asyncio.sleep(0.35)
        scheduler.every("second", "100ms", count, jitter=0)
        await asyncio.sleep(0.35)
        assert scheduler.remove("first")
        assert not scheduler.remove("first")
        await asyncio.sleep(0.05)  # a run whose handler had started finishes (docstring of remove)
        before = ran["first"]
        await asyncio.sleep(0.4)
    assert ran["second"] >= 5
    assert ran["first"] == before


class _HeldClaims(MemoryRunStore):
    """The memory lease store, holding claims of job ``held`` until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        if any(c.job == "held" for c in claims) and not self.release.is_set():
            self.holding.set()
            await self.release.wait()
        return await super().claim_many(claims)


async def test_a_claim_answered_after_remove_does_not_start_the_handler() -> None:
    """A claim in flight when its job is removed is handed over, not run."""
    ran: list[int] = []
    backend = MemoryBackend()
    store = backend._store = backend.runs = _HeldClaims()

    async def handler(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    async with Scheduler(backend, instance_id="solo") as scheduler:
        scheduler.every("held", "1s", handler, jitter=0, max_late="5s")
        await asyncio.wait_for(store.holding.wait(), 5)
        assert scheduler.remove("held")
        store.release.set()
        await asyncio.sleep(0.3)
    assert ran == []
    records = await scheduler.history("held", limit=10)
    assert records, "the held claims left no record"
    assert {(r.status, r.reason) for r in records} == {("interrupted", "handed_over")}


async def test_stop_waits_for_running_handlers() -> None:
    finished = asyncio.Event()

    async def slow(ctx: RunContext) -> None:
        await asyncio.sleep(0.5)
        finished.set()

    scheduler = Scheduler(MemoryBackend(), instance_id="solo", stop_grace="5s")
    scheduler.every("slow", "10s", slow, jitter=0, max_late="20s")
    await scheduler.start()
    await asyncio.sleep(0.1)
    t0 = time.monotonic()
    await scheduler.stop()
    assert finished.is_set()
    assert time.monotonic() - t0 >= 0.3
    record = await scheduler.last_run("slow")
    assert record is not None
    assert record.status == "ok"


async def test_sync_handler_runs_in_a_worker_thread() -> None:
    threads: list[str] = []
    slots: list[int] = []

    def sync_job(ctx: RunContext) -> None:
        threads.append(threading.current_thread().name)
        slots.append(ctx.slot)

    async with Scheduler(MemoryBackend(), instance_id="solo") as scheduler:
        scheduler.every("sync", "100ms", sync_job, jitter=0)
        await asyncio.sleep(0.45)
    assert threads
    assert threading.main_thread().name not in threads
    # Every slot whose handler ran stored ``ok``. Other records may exist: the
    # slot due just before start runs at once and can overlap the next one
    # (skipped, overlap), and a slot claimed as stop() began is handed over.
    records = {r.slot: r.status for r in await scheduler.history("sync")}
    assert {slot: records.get(slot) for slot in slots} == dict.fromkeys(slots, "ok")


def test_start_in_thread_runs_and_stops_synchronously() -> None:
    ran = threading.Event()
    scheduler = Scheduler(MemoryBackend(), instance_id="threaded")

    @scheduler.every("t", "100ms", jitter=0)
    def job(ctx: RunContext) -> None:
        ran.set()

    handle = scheduler.start_in_thread()
    assert ran.wait(3)
    handle.stop()
    assert not handle.running


def test_jobs_added_and_removed_from_another_thread() -> None:
    ran: Counter[str] = Counter()
    scheduler = Scheduler(MemoryBackend(), instance_id="threaded")
    scheduler.every("first", "100ms", lambda ctx: ran.update([ctx.job]), jitter=0)
    handle = scheduler.start_in_thread()
    try:
        scheduler.every("late", "100ms", lambda ctx: ran.update([ctx.job]), jitter=0)
        time.sleep(0.6)
        assert ran["late"] >= 2
        assert scheduler.remove("first")
        time.sleep(0.2)
        before = ran["first"]
        time.sleep(0.4)
        assert ran["first"] == before
    finally:
        handle.stop()


async def test_run_now_records_a_manual_run() -> None:
    seen: list[RunContext] = []
    scheduler = Scheduler(MemoryBackend(), instance_id="manual")

    @scheduler.cron("nightly", "0 3 * * *", tz="Europe/Athens")
    async def nightly(ctx: RunContext) -> None:
        seen.append(ctx)

    record = await scheduler.run_now("nightly")
    assert record.manual
    assert record.status == "ok"
    assert record.instance_id == "manual"
    assert seen[0].manual
    assert seen[0].run_id == f"nightly:{record.slot}"
    again = await scheduler.run_now("nightly")
    history = await scheduler.history("nightly")
    assert {r.slot for r in history} == {record.slot, again.slot}
    assert all(r.manual for r in history)
    last = await scheduler.last_run("nightly")
    assert last is not None
    assert last.manual


async def test_run_context_fields() -> None:
    got: list[RunContext] = []
    async with Scheduler(MemoryBackend(), instance_id="ctx") as scheduler:
        scheduler.every("c", "100ms", got.append, jitter=0)  # sync callable
        await asyncio.sleep(0.3)
    ctx = got[0]
    assert ctx.job == "c"
    assert ctx.instance_id == "ctx"
    assert ctx.attempt == 1
    assert ctx.slot % 100 == 0
    assert int(ctx.scheduled_at.timestamp() * 1000) == ctx.slot
    assert ctx.token
    assert not ctx.manual
    assert not ctx.cancelled.is_set()


def test_duplicate_name_is_refused() -> None:
    scheduler = Scheduler(MemoryBackend())
    scheduler.every("a", "1s", lambda ctx: None)
    with pytest.raises(DuplicateJobError) as info:
        scheduler.every("a", "2s", lambda ctx: None)
    assert info.value.code == "ANARCHON_DUPLICATE_JOB"


class _ForgetfulMemory(MemoryBackend):
    """A memory backend that claims to remember runs for only 10 s."""

    dedupe_window_ms = 10_000.0


def test_dedupe_window_is_checked_when_the_job_is_added() -> None:
    scheduler = Scheduler(_ForgetfulMemory())
    with pytest.raises(DedupeWindowError) as info:
        scheduler.every("a", "1s", lambda ctx: None)  # 2 s jitter + 60 s max_late
    assert info.value.code == "ANARCHON_DEDUPE_WINDOW"
    scheduler.every("b", "1s", lambda ctx: None, max_late="5s")


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("", {}),
        ("has space", {}),
        ("x" * 201, {}),
        ("brace{", {}),
        ("pipe|", {}),
        ("ctl\x01", {}),
        ("ok", {"jitter": "soon"}),
        ("ok", {"max_late": -1}),
        ("ok", {"timeout": 0}),
        ("ok", {"history_size": 0}),
        ("ok", {"max_attempts": 0}),
        ("ok", {"enabled": "yes"}),
        ("ok", {"colour": "red"}),
    ],
)
def test_bad_job_input_gets_invalid_job(name: str, kwargs: dict[str, object]) -> None:
    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(InvalidJobError) as info:
        scheduler.every(name, "1s", lambda ctx: None, **kwargs)
    assert info.value.code == "ANARCHON_INVALID_JOB"


def test_bad_schedules_get_invalid_job() -> None:
    scheduler = Scheduler(MemoryBackend())
    for interval in ("0s", "-1s", "fortnight", float("nan"), True):
        with pytest.raises(InvalidJobError):
            scheduler.every("e", interval, lambda ctx: None)  # type: ignore[arg-type]
    with pytest.raises(InvalidJobError) as info:
        scheduler.cron("c", "61 * * * *", lambda ctx: None)
    assert info.value.position == 0
    with pytest.raises(InvalidJobError) as info:
        scheduler.cron("c", "0 3 * * *", lambda ctx: None, tz="Mars/Olympus")
    assert info.value.field == "tz"
    with pytest.raises(InvalidJobError):
        scheduler.every("h", "1s", handler="not callable")  # type: ignore[arg-type]
