"""Testing your own jobs (docs/testing-your-jobs.md): FakeClock and run_due(), as a user writes them."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest
from anarchon import InvalidConfigError, MemoryBackend, Retry, RunContext, Scheduler
from anarchon.testing import FakeClock


def _scheduler(clock: FakeClock) -> Scheduler:
    return Scheduler(MemoryBackend(clock=clock), clock=clock, instance_id="test")


async def test_24_hours_of_an_hourly_cron_job_in_under_a_second() -> None:
    clock = FakeClock("2026-03-01T00:00:00+00:00")
    scheduler = _scheduler(clock)
    seen: list[int] = []

    @scheduler.cron("report", "0 * * * *")
    async def report(ctx: RunContext) -> None:
        seen.append(ctx.slot)

    started = time.monotonic()
    for _hour in range(24):
        clock.advance("1h")
        ran = await scheduler.run_due()
        assert [(r.job, r.status) for r in ran] == [("report", "ok")]
    elapsed = time.monotonic() - started
    await scheduler.stop()
    assert elapsed < 1.0
    first = int(datetime(2026, 3, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
    assert seen == [first + h * 3_600_000 for h in range(24)]
    history = await scheduler.history("report", 100)
    assert len(history) == 24
    assert {r.status for r in history} == {"ok"}


async def test_nothing_runs_before_its_time_and_late_slots_are_skipped() -> None:
    clock = FakeClock("2026-03-01T00:00:00+00:00")
    scheduler = _scheduler(clock)
    calls: list[int] = []
    scheduler.every("tick", "10m", lambda ctx: calls.append(ctx.slot))
    clock.advance("9m")
    assert await scheduler.run_due() == []
    clock.advance("1m")
    assert len(await scheduler.run_due()) == 1
    clock.advance("1h")  # six slots passed; only the newest is within max_late (60 s)
    ran = await scheduler.run_due()
    await scheduler.stop()
    assert [r.slot for r in ran] == [clock.now_ms()]
    assert len(calls) == 2


async def test_retries_with_backoff_take_no_real_time() -> None:
    clock = FakeClock()
    scheduler = _scheduler(clock)
    attempts: list[int] = []

    @scheduler.every("flaky", "1h", retry=Retry(attempts=3, backoff="1m"))
    def flaky(ctx: RunContext) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("try again")

    clock.advance("1h")
    started = time.monotonic()
    ran = await scheduler.run_due()
    await scheduler.stop()
    assert time.monotonic() - started < 1.0
    assert [(r.attempt, r.status) for r in ran] == [(1, "error"), (2, "error"), (3, "ok")]
    assert attempts == [1, 2, 3]
    # backoff 1 min, then 2 min, on the fake clock
    assert ran[1].started_at is not None
    assert ran[2].started_at is not None
    assert ran[1].started_at - ran[0].slot >= 60_000
    assert ran[2].started_at - ran[1].started_at >= 120_000


async def test_one_off_run_at_its_time() -> None:
    clock = FakeClock("2026-03-01T00:00:00+00:00")
    scheduler = _scheduler(clock)
    calls: list[int] = []
    when = datetime(2026, 3, 1, 3, 0, tzinfo=timezone.utc)
    scheduler.at("migrate", when, lambda ctx: calls.append(ctx.slot))
    clock.advance("2h")
    assert await scheduler.run_due() == []
    clock.advance("1h")
    ran = await scheduler.run_due()
    clock.advance("1d")
    assert await scheduler.run_due() == []
    await scheduler.stop()
    assert [r.slot for r in ran] == [int(when.timestamp() * 1000)]
    assert calls == [int(when.timestamp() * 1000)]


async def test_run_due_and_start_do_not_mix() -> None:
    clock = FakeClock()
    scheduler = _scheduler(clock)
    scheduler.every("tick", "1m", lambda ctx: None)
    await scheduler.run_due()
    with pytest.raises(InvalidConfigError):
        await scheduler.start()
    await scheduler.stop()
    await scheduler.start()
    try:
        with pytest.raises(InvalidConfigError):
            await scheduler.run_due()
    finally:
        await scheduler.stop()


def test_fake_clock_moves_only_forward() -> None:
    clock = FakeClock(0)
    clock.advance("1s")
    assert (clock.now_ms(), clock.monotonic()) == (1000, 1.0)
    clock.advance_to(5000)
    assert clock.now_ms() == 5000
    with pytest.raises(InvalidConfigError):
        clock.advance_to(10)
    with pytest.raises(InvalidConfigError):
        clock.advance("-1s")
    with pytest.raises(InvalidConfigError):
        FakeClock("yesterday")
    with pytest.raises(InvalidConfigError):
        FakeClock(datetime(2026, 1, 1))  # naive


async def test_a_missed_one_off_run_is_caught_up_on_start_within_catch_up() -> None:
    clock = FakeClock("2026-03-01T12:00:00+00:00")
    when = datetime(2026, 3, 1, 11, 0, tzinfo=timezone.utc)  # an hour ago
    caught = _scheduler(clock)
    calls: list[int] = []
    caught.at("report", when, lambda ctx: calls.append(ctx.slot), catch_up="2h")
    missed = _scheduler(clock)
    missed.at("report", when, lambda ctx: calls.append(ctx.slot))  # max_late 60 s only
    assert await missed.run_due() == []
    ran = await caught.run_due()
    assert [(r.slot, r.status) for r in ran] == [(int(when.timestamp() * 1000), "ok")]
    assert await caught.run_due() == []
    await caught.stop()
    await missed.stop()
    assert len(calls) == 1
