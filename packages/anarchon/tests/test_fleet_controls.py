"""Fleet-wide pause/resume/skip and the registry's drift warning, on the memory backend.

Both lease and claim-only paths. The assertions are causal, not timed: with
``control_cache=0`` every wake-up reads the controls, so no slot after the
moment ``pause()`` returned may run; deadlines only bound how long we wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import pytest
from anarchon import MemoryBackend, RunContext, Scheduler
from anarchon.fingerprints import describe_schedule, parse_schedule
from anarchon.schedules import Cron, Every
from plain_backend import PlainBackend

PERIOD = "200ms"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def _until(predicate: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def _pair(backend: MemoryBackend | PlainBackend, ran: list[tuple[int, str]]) -> list[Scheduler]:
    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id))

    schedulers = [
        Scheduler(backend, instance_id=f"i{n}", control_cache=0, fleet_refresh="1s")
        for n in range(2)
    ]
    for scheduler in schedulers:
        scheduler.every("tick", PERIOD, tick)
    return schedulers


@pytest.mark.parametrize("leases", [True, False], ids=["lease-path", "claim-only-path"])
async def test_pause_stops_every_instance_and_resume_restarts_without_flood(leases: bool) -> None:
    backend = MemoryBackend(leases=leases)
    ran: list[tuple[int, str]] = []
    a, b = _pair(backend, ran)
    await a.start()
    await b.start()
    try:
        await _until(lambda: len(ran) >= 3)
        await a.pause("tick")
        paused_at = _wall_ms()
        await asyncio.sleep(1.5)  # several slots fall due while paused
        after_pause = [slot for slot, _ in ran if slot > paused_at]
        assert after_pause == [], "a slot after pause() returned still ran"
        await b.resume("tick")
        resumed_at = _wall_ms()
        await _until(lambda: any(slot > resumed_at for slot, _ in ran))
        history = await a.history("tick", limit=1000)
    finally:
        await a.stop()
        await b.stop()
    skipped = [r for r in history if r.status == "skipped"]
    assert skipped, "no paused slot recorded"
    assert all(r.reason == "paused" for r in skipped)
    assert all(paused_at - 200 < r.slot < resumed_at + 200 for r in skipped)
    per_slot = Counter(r.slot for r in history)
    assert all(n == 1 for n in per_slot.values()), "a slot recorded twice"
    runs = Counter(slot for slot, _ in ran)
    assert all(n == 1 for n in runs.values())
    # No flood on resume: no slot from the paused interval ran afterwards.
    assert not [s for s in runs if paused_at < s <= resumed_at - 200]


@pytest.mark.parametrize("leases", [True, False], ids=["lease-path", "claim-only-path"])
async def test_skip_next_skips_exactly_one_slot(leases: bool) -> None:
    backend = MemoryBackend(leases=leases)
    ran: list[tuple[int, str]] = []
    a, b = _pair(backend, ran)
    await a.start()
    await b.start()
    try:
        await _until(lambda: len(ran) >= 2)
        control = await b.skip_next("tick")
        assert control.skip_until is not None
        until = control.skip_until
        await _until(lambda: any(slot > until + 400 for slot, _ in ran))
        history = await a.history("tick", limit=1000)
    finally:
        await a.stop()
        await b.stop()
    skipped = [r for r in history if r.status == "skipped"]
    assert [(r.slot, r.reason) for r in skipped] == [(until, "skip_next")]
    slots = sorted(r.slot for r in history if r.slot > until - 1000)
    assert slots == list(range(slots[0], slots[-1] + 200, 200)), "a slot was lost"


async def test_different_schedules_for_one_name_warn_once_on_every_instance(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend()

    async def noop(ctx: RunContext) -> None:
        return None

    drift: dict[str, list[tuple[str, dict[str, int]]]] = {"a": [], "b": []}
    a = Scheduler(backend, instance_id="a", fleet_refresh="300ms")
    b = Scheduler(backend, instance_id="b", fleet_refresh="300ms")
    c = Scheduler(backend, instance_id="c", fleet_refresh="300ms")
    a.every("job", "1s", noop)
    b.every("job", "2s", noop)
    c.every("job", "2s", noop)
    for name, s in (("a", a), ("b", b)):
        original = s._on_drift

        def hook(job: str, prints: dict[str, int], _o=original, _n=name) -> None:  # type: ignore[no-untyped-def]
            drift[_n].append((job, prints))
            _o(job, prints)

        s._on_drift = hook  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, logger="anarchon")
    for s in (a, b, c):
        await s.start()
    try:
        await _until(lambda: drift["a"] and drift["b"])
        await asyncio.sleep(1.0)  # several more refreshes: still one warning each
    finally:
        for s in (a, b, c):
            await s.stop()
    fingerprints = set()
    for name in ("a", "b"):
        assert len(drift[name]) == 1, drift[name]  # once, however many refreshes followed
        job, prints = drift[name][0]
        assert job == "job"
        assert len(prints) == 2
        assert 2 <= sum(prints.values()) <= 3  # c may not have declared yet
        fingerprints |= set(prints)
    assert len(fingerprints) == 2
    warnings = [r for r in caplog.records if "schedule drift" in r.getMessage()]
    assert len(warnings) >= 2
    assert {r.__dict__.get("instance") for r in warnings} >= {"a", "b"}


async def test_backend_without_registry_keeps_scheduling(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[int] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    caplog.set_level(logging.DEBUG, logger="anarchon")
    s = Scheduler(PlainBackend(), instance_id="p", control_cache=0, fleet_refresh="300ms")
    s.every("tick", PERIOD, tick)
    await s.start()
    try:
        await _until(lambda: len(ran) >= 5)
    finally:
        await s.stop()
    notes = [r for r in caplog.records if "no fleet" in r.getMessage()]
    assert len(notes) == 2, [r.getMessage() for r in notes]  # registry once, controls once
    assert all(r.levelno == logging.DEBUG for r in notes)


def test_schedule_text_round_trips() -> None:
    for schedule in (Every("5s"), Every("1m", "10s"), Cron("0 3 * * *", tz="Europe/Athens")):
        text = describe_schedule(schedule)
        assert parse_schedule(text) == schedule
    assert describe_schedule(Every("5s")) == "every 5000ms"
    assert describe_schedule(Cron("0  3 * * *", tz="UTC")) == "cron 0 3 * * * UTC"


def test_one_off_schedule_round_trips() -> None:
    from anarchon.one_off import Once

    once = Once(1_800_000_000_000)
    assert describe_schedule(once) == "once 1800000000000ms"
    assert parse_schedule("once 1800000000000ms") == once


def test_skip_reason_spares_slots_due_before_the_skip_was_stored() -> None:
    from anarchon.fleet_controls import skip_reason
    from anarchon.fleet_types import JobControl

    control = JobControl("j", skip_until=3_000, updated_at=2_100)
    assert skip_reason(control, 2_000) is None  # due before the skip, claimed late
    assert skip_reason(control, 3_000) == "skip_next"
    assert skip_reason(control, 4_000) is None
    assert skip_reason(JobControl("j", paused=True), 1) == "paused"
    assert skip_reason(None, 1) is None
    assert skip_reason(JobControl("j", skip_until=3_000), 3_000) == "skip_next"
    assert skip_reason(JobControl("j", skip_until=3_000), 4_000) is None
