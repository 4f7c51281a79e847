"""Events: subscriptions, delivery off the scheduling path, and the run logs (memory store)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import pytest
from anarchon import (
    Cron,
    Event,
    InvalidConfigError,
    MemoryBackend,
    RunContext,
    Scheduler,
    SyncScheduler,
)
from anarchon.events import QUEUE_LIMIT, EventBus
from instrumented import ProbedBackend


def test_unknown_kind_and_non_callable_are_errors() -> None:
    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(InvalidConfigError) as raised:
        scheduler.on("run_begun", lambda event: None)
    assert raised.value.code == "ANARCHON_INVALID_CONFIG"
    assert "run_started" in str(raised.value)
    with pytest.raises(InvalidConfigError):
        scheduler.on("run_started", "not callable")  # type: ignore[arg-type]


async def test_unsubscribe_stops_delivery() -> None:
    bus = EventBus("i1", logging.getLogger("test"))
    seen: list[Event] = []
    off = bus.on("skipped", seen.append)
    assert bus.wants("skipped")
    bus.start()
    bus.emit("skipped", 1, "job", 1000, None, reason="late")
    await bus.stop()
    off()
    assert not bus.wants("skipped")
    bus.start()
    bus.emit("skipped", 2, "job", 2000, None, reason="late")
    await bus.stop()
    assert [(e.kind, e.slot, e.reason, e.instance) for e in seen] == [
        ("skipped", 1000, "late", "i1")
    ]


async def test_a_full_queue_drops_and_counts() -> None:
    bus = EventBus("i1", logging.getLogger("test"))
    seen: list[int] = []
    bus.on("run_started", lambda event: seen.append(event.at_ms))
    for n in range(QUEUE_LIMIT + 3):
        bus.emit("run_started", n, "job", n, 1)
    assert bus.dropped == 3
    bus.start()
    await bus.stop(timeout=60)
    assert seen == list(range(QUEUE_LIMIT))


async def test_raising_and_sleeping_callbacks_change_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Callbacks that raise or sleep 5 s: every slot still runs once, on time (max_late 2 s)."""
    caplog.set_level(logging.ERROR, logger="anarchon.scheduler")
    backend = MemoryBackend()
    ran: list[int] = []
    ran_by: list[tuple[int, str]] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)
        ran_by.append((ctx.slot, ctx.instance_id))

    def raising(event: Event) -> None:
        raise RuntimeError("callback broke")

    async def raising_async(event: Event) -> None:
        raise ValueError("async callback broke")

    def sleeping(event: Event) -> None:
        time.sleep(5)

    async def sleeping_async(event: Event) -> None:
        await asyncio.sleep(5)

    schedulers = [Scheduler(backend, instance_id=f"i{n}") for n in range(2)]
    for scheduler in schedulers:
        # every 500 ms, not faster: on a loaded machine a 200 ms slot could be skipped as
        # an overlap behind a finish delayed by the load alone, which is not what this checks
        scheduler.every("tick", "500ms", tick, jitter=0, max_late="2s")
        for kind in ("run_started", "run_finished", "skipped"):
            for callback in (raising, raising_async, sleeping, sleeping_async):
                scheduler.on(kind, callback)
        await scheduler.start()
    await asyncio.sleep(5.5)
    for scheduler in schedulers:
        await scheduler.stop()

    counts = Counter(ran)
    assert len(counts) >= 8
    assert all(n == 1 for n in counts.values())
    ordered = sorted(counts)
    assert ordered == list(range(ordered[0], ordered[-1] + 500, 500)), "a slot was skipped"
    history = await schedulers[0].history("tick", limit=1000)
    # A slot claimed ahead (docs/scaling.md, "Claiming ahead") as stop() began was handed
    # over without running: it is recorded so, after every slot that ran.
    handed = [r for r in history if r.status != "ok"]
    assert all(r.status == "interrupted" and r.reason == "handed_over" for r in handed), handed
    assert all(r.slot > ordered[-1] for r in handed), handed
    assert sorted(r.slot for r in history if r.status == "ok") == ordered
    logged = [r for r in caplog.records if "logged once per callback" in r.getMessage()]
    # each raising callback is logged once per subscription (kind and instance), never again
    messages = Counter(r.getMessage().split(" raised ")[0] for r in logged)
    assert all(n == 1 for n in messages.values()), messages
    # The delivery task awaits sleeping_async (5 s) per event, so only the first events of
    # each instance are delivered in this window: raising_async is awaited for the first one.
    for instance in {i for _slot, i in ran_by}:
        assert any(
            ".raising_async at " in m and m.endswith(f" for run_started on {instance}")
            for m in messages
        ), (instance, messages)


async def test_run_logs_carry_iso_slots_and_extra_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="anarchon")
    scheduler = Scheduler(MemoryBackend(), instance_id="paris-1")
    done = asyncio.Event()

    async def tick(ctx: RunContext) -> None:
        done.set()

    scheduler.add("tick", Cron("* * * * * *", tz="Europe/Paris"), tick, jitter=0)
    await scheduler.start()
    await asyncio.wait_for(done.wait(), 30)
    await asyncio.sleep(0.2)
    await scheduler.stop()
    runs = [r for r in caplog.records if getattr(r, "job", None) == "tick"]
    started = [r for r in runs if "started" in r.getMessage()]
    finished = [r for r in runs if "finished" in r.getMessage()]
    assert started
    assert finished
    for record in (started[0], finished[0]):
        assert record.name == "anarchon.scheduler"
        assert record.levelno == logging.DEBUG
        fields = record.__dict__
        assert fields["instance"] == "paris-1"
        assert fields["attempt"] == 1
        assert isinstance(fields["slot"], int)
        assert fields["slot_at"].endswith(("+01:00", "+02:00"))  # Europe/Paris
        assert fields["slot_at"] in record.getMessage()


async def test_a_store_outage_is_one_unavailable_and_one_recovered_event() -> None:
    """ConnectionErrors from prepare_job for 0.4 s (the probed memory store): one outage."""
    backend = ProbedBackend()
    backend.probe.faults["prepare_job"] = ConnectionError("refused")
    scheduler = Scheduler(backend, instance_id="s")
    seen: list[Event] = []
    scheduler.on("store_unavailable", seen.append)
    scheduler.on("store_recovered", seen.append)

    async def tick(ctx: RunContext) -> None:
        return None

    scheduler.every("job", "1s", tick)

    async def heal() -> None:
        await asyncio.sleep(0.4)
        del backend.probe.faults["prepare_job"]

    healer = asyncio.create_task(heal())
    await asyncio.wait_for(scheduler.start(), 60)
    await healer
    await scheduler.stop()
    assert backend.probe.calls["prepare_job"] >= 3
    assert [(e.kind, e.store, e.job, e.slot, e.instance) for e in seen] == [
        ("store_unavailable", "memory", None, None, "s"),
        ("store_recovered", "memory", None, None, "s"),
    ]
    assert seen[0].error == "ConnectionError: refused"


def test_sync_scheduler_delivers_events() -> None:
    scheduler = SyncScheduler(backend=MemoryBackend(), instance_id="sync-1")
    seen: list[Event] = []
    scheduler.on("run_finished", seen.append)

    @scheduler.every("once", "1h", jitter=0, max_late="2h")
    def once(ctx: RunContext) -> None:
        return None

    scheduler.start()
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    scheduler.stop()
    assert [(e.job, e.status, e.attempt, e.instance) for e in seen] == [("once", "ok", 1, "sync-1")]
