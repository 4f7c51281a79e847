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
from anarchon.errors import InvalidJobError
from anarchon.fleet.fingerprints import describe_schedule, parse_schedule
from anarchon.fleet.types import JobControl
from anarchon.jobs import Job
from anarchon.schedules import Cron, Every
from anarchon.testing import FakeClock
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
    messages = [r.getMessage() for r in notes]
    assert len(notes) == 3, messages  # registry once, controls once, membership once
    membership = [r for r in notes if "membership" in r.getMessage()]
    assert len(membership) == 1, messages
    assert membership[0].levelno == logging.INFO  # every instance claims every job-slot
    assert all(r.levelno == logging.DEBUG for r in notes if r not in membership)


def test_schedule_text_round_trips() -> None:
    for schedule in (Every("5s"), Every("1m", "10s"), Cron("0 3 * * *", tz="Europe/Athens")):
        text = describe_schedule(schedule)
        assert parse_schedule(text) == schedule
    assert describe_schedule(Every("5s")) == "every 5000ms"
    assert describe_schedule(Cron("0  3 * * *", tz="UTC")) == "cron 0 3 * * * UTC"


def test_one_off_schedule_round_trips() -> None:
    from anarchon.schedules import Once

    once = Once(1_800_000_000_000)
    assert describe_schedule(once) == "once 1800000000000ms"
    assert parse_schedule("once 1800000000000ms") == once


def test_skip_reason_spares_slots_due_before_the_skip_was_stored() -> None:
    from anarchon.fleet.controls import skip_reason
    from anarchon.fleet.types import JobControl

    control = JobControl("j", skip_until=3_000, updated_at=2_100)
    assert skip_reason(control, 2_000) is None  # due before the skip, claimed late
    assert skip_reason(control, 3_000) == "skip_next"
    assert skip_reason(control, 4_000) is None
    assert skip_reason(JobControl("j", paused=True), 1) == "paused"
    assert skip_reason(None, 1) is None
    assert skip_reason(JobControl("j", skip_until=3_000), 3_000) == "skip_next"
    assert skip_reason(JobControl("j", skip_until=3_000), 4_000) is None


# Catch-up after resume (docs/fleet.md, "Pause, resume and skip") ---------

_T0 = 1_800_000_000_000  # a whole second


def _fake_pair(
    catch_up: str | None, every: str = "1s", n: int = 1
) -> tuple[FakeClock, list[Scheduler], list[RunContext]]:
    clock = FakeClock(_T0 + 100)
    backend = MemoryBackend(clock=clock)
    seen: list[RunContext] = []

    async def tick(ctx: RunContext) -> None:
        seen.append(ctx)

    schedulers = []
    for k in range(n):
        s = Scheduler(backend, clock=clock, instance_id=f"f{k}", control_cache=0)
        if catch_up is None:
            s.every("tick", every, tick, max_late="500ms")
        else:
            s.every("tick", every, tick, max_late="500ms", catch_up=catch_up)
        schedulers.append(s)
    return clock, schedulers, seen


async def _pause_three_slots_then_resume(clock: FakeClock, s: Scheduler) -> JobControl:
    """Run T0+1s, pause at T0+1.1s, let T0+2..4s fall due (skipped), resume at T0+4.6s."""
    clock.advance_to(_T0 + 1_000)
    await s.run_due()
    clock.advance_to(_T0 + 1_100)
    await s.pause("tick")
    for k in (2, 3, 4):
        clock.advance_to(_T0 + k * 1_000)
        records = await s.run_due()
        assert [(r.slot, r.status, r.reason) for r in records] == [
            (_T0 + k * 1_000, "skipped", "paused")
        ]
    clock.advance_to(_T0 + 4_600)
    return await s.resume("tick")


async def test_resume_runs_the_newest_paused_slot_once_with_catch_up() -> None:
    clock, (s,), seen = _fake_pair("10s")
    try:
        await s.run_due()
        control = await _pause_three_slots_then_resume(clock, s)
        assert control.paused_at == _T0 + 1_100
        assert control.resumed_at == _T0 + 4_600
        records = await s.run_due()  # at the resume: the catch-up runs, at slot resumed_at
        assert [(r.slot, r.status) for r in records] == [(_T0 + 4_600, "ok")]
        assert seen[-1].slot == _T0 + 4_600
        assert seen[-1].catch_up_of == _T0 + 4_000  # the newest paused slot
        clock.advance_to(_T0 + 5_000)
        records = await s.run_due()  # then the job goes on, no second catch-up
        assert [(r.slot, r.status) for r in records] == [(_T0 + 5_000, "ok")]
        assert seen[-1].catch_up_of is None
        history = {r.slot: r for r in await s.history("tick", limit=100)}
    finally:
        await s.stop()
    for k in (2, 3, 4):  # the paused slots keep their records
        assert (history[_T0 + k * 1_000].status, history[_T0 + k * 1_000].reason) == (
            "skipped",
            "paused",
        )
    assert history[_T0 + 4_600].status == "ok"
    assert [c.slot for c in seen if c.catch_up_of is not None] == [_T0 + 4_600]


@pytest.mark.parametrize(
    ("catch_up", "every"),
    [(None, "1s"), ("3s", "5s")],
    ids=["no-catch-up", "paused-slot-older-than-catch-up"],
)
async def test_resume_runs_nothing_without_a_paused_slot_within_catch_up(
    catch_up: str | None, every: str
) -> None:
    clock, (s,), seen = _fake_pair(catch_up, every)
    try:
        await s.run_due()
        clock.advance_to(_T0 + 100)
        await s.pause("tick")
        clock.advance_to(_T0 + 5_000)  # one slot of the 5 s job, 4 of the 1 s one
        assert {r.reason for r in await s.run_due()} == {"paused"}
        clock.advance_to(_T0 + 8_900)  # 3.9 s after the 5 s job's paused slot
        control = await s.resume("tick")
        assert control.resumed_at == _T0 + 8_900
        assert await s.run_due() == []
        clock.advance_to(_T0 + 10_000)
        records = await s.run_due()
    finally:
        await s.stop()
    assert [(r.slot, r.status) for r in records] == [(_T0 + 10_000, "ok")]
    assert all(c.catch_up_of is None for c in seen)


async def test_catch_up_runs_once_across_instances_and_not_again_on_a_late_start() -> None:
    clock, (a, b, late), seen = _fake_pair("10s", n=3)
    try:
        await a.run_due()
        await b.run_due()
        control = await _pause_three_slots_then_resume(clock, a)
        await b.run_due()  # b claims the same catch-up: done, not run again
        first = await a.run_due()
        await b.run_due()
        clock.advance_to(_T0 + 4_900)
        await late.run_due()  # started after the resume, within the window: done
        clock.advance_to(_T0 + 5_000)
        await a.run_due()
        await a.pause("tick")
        clock.advance_to(_T0 + 6_000)
        await b.run_due()
        clock.advance_to(_T0 + 6_300)
        second_resume = await b.resume("tick")  # a second cycle: its own catch-up
        await late.run_due()
        await a.run_due()
        history = await a.history("tick", limit=100)
    finally:
        for s in (a, b, late):
            await s.stop()
    assert control.resumed_at is not None
    assert second_resume.resumed_at == _T0 + 6_300
    assert second_resume.paused_at == _T0 + 5_000
    catch_ups = [(c.slot, c.catch_up_of) for c in seen if c.catch_up_of is not None]
    assert catch_ups == [(_T0 + 4_600, _T0 + 4_000), (_T0 + 6_300, _T0 + 6_000)]
    assert [r.slot for r in first] in ([], [_T0 + 4_600])  # b may have run it first
    assert Counter(c.slot for c in seen)[_T0 + 4_600] == 1
    assert Counter(r.slot for r in history)[_T0 + 4_600] == 1


async def test_no_catch_up_when_the_paused_slot_ran_after_all() -> None:
    clock = FakeClock(_T0 + 100)
    backend = MemoryBackend(clock=clock)
    seen: list[RunContext] = []

    async def tick(ctx: RunContext) -> None:
        seen.append(ctx)

    stale = Scheduler(backend, clock=clock, instance_id="stale", control_cache="1h")
    fresh = Scheduler(backend, clock=clock, instance_id="fresh", control_cache=0)
    for s in (stale, fresh):
        s.every("tick", "1s", tick, max_late="500ms", catch_up="10s")
    try:
        await stale.run_due()  # reads the controls now, and keeps them for an hour
        await fresh.run_due()
        clock.advance_to(_T0 + 1_100)
        await fresh.pause("tick")
        clock.advance_to(_T0 + 2_000)
        ran = await stale.run_due()  # its cached controls say "not paused"
        assert [(r.slot, r.status) for r in ran] == [(_T0 + 2_000, "ok")]
        clock.advance_to(_T0 + 2_500)
        control = await fresh.resume("tick")
        assert (control.paused_at, control.resumed_at) == (_T0 + 1_100, _T0 + 2_500)
        records = await fresh.run_due()  # the newest paused slot ran: nothing to catch up
        history = await fresh.history("tick", limit=100)
    finally:
        for s in (stale, fresh):
            await s.stop()
    assert _T0 + 2_500 not in {r.slot for r in records}
    assert _T0 + 2_500 not in {r.slot for r in history}
    assert all(c.catch_up_of is None for c in seen)


async def test_catch_up_in_real_time_two_schedulers_and_a_late_starter() -> None:
    backend = MemoryBackend()
    seen: list[RunContext] = []

    async def tick(ctx: RunContext) -> None:
        seen.append(ctx)
        await asyncio.sleep(0.05)

    def make(name: str) -> Scheduler:
        s = Scheduler(backend, instance_id=name, control_cache=0, fleet_refresh="1s")
        s.every("tick", PERIOD, tick, catch_up="10s", max_late="2s")
        return s

    a, b = make("a"), make("b")
    await a.start()
    await b.start()
    late: Scheduler | None = None
    try:
        await _until(lambda: len(seen) >= 3)
        await a.pause("tick")
        await asyncio.sleep(1.0)  # several slots fall due while paused
        # Resume mid-period, so the wake-up of the slot before it has read "paused".
        await asyncio.sleep(((100 - _wall_ms() % 200) % 200) / 1000)
        control = await b.resume("tick")
        resumed_at = control.resumed_at
        assert resumed_at is not None
        assert control.paused_at is not None
        newest = (resumed_at - 1) // 200 * 200  # the newest slot before the resume
        await _until(lambda: any(c.slot > resumed_at + 600 for c in seen))
        history = await a.history("tick", limit=1000)
        missed = [r.reason for r in history if r.slot == newest] == ["paused"]
        if missed:
            await _until(lambda: any(c.slot == resumed_at for c in seen))
        late = make("late")  # started after the resume, within catch_up
        await late.start()
        await _until(lambda: any(c.instance_id == "late" for c in seen))
        history = await a.history("tick", limit=1000)
    finally:
        for s in (a, b, late):
            if s is not None:
                await s.stop()
    runs = [c for c in seen if c.slot == resumed_at]
    assert [c.slot for c in seen if c.catch_up_of is not None] == [c.slot for c in runs]
    if not missed:  # a wake-up lagged past the resume and ran that slot: nothing to catch up
        assert runs == []
        return
    assert len(runs) == 1, runs
    assert runs[0].catch_up_of == newest
    assert control.paused_at <= newest < resumed_at
    assert Counter(r.slot for r in history)[resumed_at] == 1


def test_resume_catch_up_rule() -> None:
    from anarchon._scheduler.resume_catch_up import resume_catch_up
    from anarchon.fleet.types import JobControl
    from anarchon.jobs import build_job

    def job(every: str, **options: object) -> Job:
        return build_job("j", Every(every), lambda ctx: None, options, leases=True)

    resumed = JobControl("j", paused_at=10_100, resumed_at=14_600)
    assert resume_catch_up(job("1s", catch_up="10s", max_late="1s"), resumed) == (
        14_000,
        24_000,  # slot + catch_up
    )
    # never shorter than max_late after the resume
    assert resume_catch_up(job("1s", catch_up="2s", max_late="1500ms"), resumed) == (
        14_000,
        16_100,
    )
    assert resume_catch_up(job("1s", catch_up="10s"), resumed) is None  # max_late 60 s
    assert resume_catch_up(job("1s", catch_up="500ms", max_late="100ms"), resumed) is None
    assert resume_catch_up(job("5s", catch_up="10s", max_late="1s"), resumed) is None
    paused = JobControl("j", paused=True, paused_at=10_100, resumed_at=14_600)
    assert resume_catch_up(job("1s", catch_up="10s", max_late="1s"), paused) is None
    no_pause = JobControl("j", resumed_at=14_600)  # stored before paused_at existed
    assert resume_catch_up(job("1s", catch_up="10s", max_late="1s"), no_pause) is None
    on_slot = JobControl("j", paused_at=10_000, resumed_at=14_000)  # resumed_at is excluded
    with pytest.raises(InvalidJobError):  # ResumeCatchUp logs it and catches nothing up
        resume_catch_up(
            job("1s", catch_up="10s", max_late="1s"), JobControl("j", paused_at=0, resumed_at=2**70)
        )
    assert resume_catch_up(job("1s", catch_up="10s", max_late="1s"), on_slot) == (13_000, 23_000)


async def test_a_paused_catch_up_job_polls_the_controls_until_it_is_resumed() -> None:
    """No slot falls due for an hour: the controls are still read about once a second."""
    reads: list[float] = []

    class CountingReads(MemoryBackend):
        async def controls(self) -> dict[str, JobControl]:
            reads.append(time.monotonic())
            return await super().controls()

    async def noop(ctx: RunContext) -> None:
        return None

    s = Scheduler(CountingReads(), instance_id="p", control_cache=0, fleet_refresh="1h")
    s.every("hourly", "1h", noop, catch_up="2h", max_late="1m")
    await s.pause("hourly")
    await s.start()  # reads the controls: paused
    try:
        first = len(reads)
        await asyncio.sleep(2.0)
        polled = len(reads) - first
        await s.resume("hourly")
        await asyncio.sleep(2.0)  # one more read sees the resume, then the polling stops
        settled = len(reads)
        await asyncio.sleep(1.5)
        after = len(reads) - settled
    finally:
        await s.stop()
    assert polled >= 1, "no controls read while paused and idle"
    assert after == 0, f"{after} reads after the resume was seen"


async def test_resume_catch_up_acts_once_per_resume_and_waits_for_a_final_record() -> None:
    from anarchon._scheduler.resume_catch_up import ResumeCatchUp
    from anarchon._scheduler.run_state import Run
    from anarchon.jobs import build_job
    from anarchon.types import RunRecord

    job = build_job(
        "j", Every("1s"), lambda ctx: None, {"catch_up": "10s", "max_late": "1s"}, leases=True
    )
    records: list[RunRecord] = []
    submitted: list[Run] = []

    async def history(name: str, limit: int) -> list[RunRecord]:
        return list(records)

    catch_up = ResumeCatchUp(
        jobs={"j": job},
        scheduled=lambda name: True,
        now_ms=lambda: 14_700,
        history=history,
        new_run=lambda j, slot, deadline: Run(j, slot, "t", deadline, leased=True),
        submit=submitted.extend,
        log=logging.getLogger("anarchon.test"),
    )
    await catch_up.check({"j": JobControl("j", paused=True, paused_at=10_100)})
    assert catch_up.watching
    resumed = {"j": JobControl("j", paused_at=10_100, resumed_at=14_600)}
    records.append(RunRecord("j", 14_000, "i", "running"))  # its skip is not written yet
    await catch_up.check(resumed)
    assert (submitted, catch_up.watching) == ([], True)
    records[0] = RunRecord("j", 14_000, "i", "skipped", "paused")
    await catch_up.check(resumed)
    await catch_up.check(resumed)  # the same resume again: nothing more
    assert [(r.slot, r.catch_up_of, r.deadline_ms) for r in submitted] == [(14_600, 14_000, 24_000)]
    assert not catch_up.watching
    bad = {"j": JobControl("j", paused_at=0, resumed_at=2**70)}
    await catch_up.check(bad)  # logged, nothing submitted, never raised into the wake-up loop
    assert len(submitted) == 1


def test_skip_names_the_first_slot_not_claimed_yet() -> None:
    """Within claim lead + control cache the next slot is claimed: skip starts after it."""
    from anarchon.fleet.controls import first_skippable

    now = 10_000_000
    every_second = Every("1s")
    first = first_skippable(every_second, now, lead_ms=2_000, cache_ms=1_000)
    # lead on a 1 s job is a quarter of its period (250 ms): 10_000_000 + 1 s is
    # claimed at most 1.25 s ahead of its time, so it is already taken.
    assert first == now + 2_000
    assert first_skippable(Every("1250ms"), 10_000_000 - 10_000_000 % 1250, 2_000, 1_000) == (
        10_000_000 - 10_000_000 % 1250 + 2_500
    )
    assert first_skippable(Every("1h"), now, 2_000, 1_000) == Every("1h").next_after(now)
    assert first_skippable(Every("1s"), now, 0, 0) == now + 1_000


async def test_skip_next_skips_exactly_the_slot_it_names() -> None:
    backend = MemoryBackend()
    ran: list[int] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler = Scheduler(backend, instance_id="s")
    scheduler.every("job", "1s", tick, jitter=0)
    await scheduler.start()
    try:
        await _until(lambda: len(ran) >= 1)
        from anarchon.fleet.controls import skip_slots

        control, first = await skip_slots(backend, "job", Every("1s"), 1, "test")
        assert control.skip_until == first
        await _until(lambda: any(slot > first for slot in ran), 10)
    finally:
        await scheduler.stop()
    assert first not in ran
    history = await backend.history("job", 50)
    assert [(r.slot, r.reason) for r in history if r.status == "skipped"] == [(first, "skip_next")]


async def test_last_run_says_claimed_until_the_slot() -> None:
    from anarchon.fleet.status import fleet_status
    from anarchon.fleet.types import Declaration
    from anarchon.types import ClaimInput

    backend = MemoryBackend()
    await backend.init()
    now = _wall_ms()
    await backend.declare([Declaration("later", "i", "f" * 16, "every 60000ms", 0, 0)], 60_000)
    await backend.declare([Declaration("now", "i", "f" * 16, "every 60000ms", 0, 0)], 60_000)
    await backend.claim(ClaimInput("later", now + 30_000, "t1", "i"))
    await backend.claim(ClaimInput("now", now - 1_000, "t2", "i"))
    rows = {row.job: row for row in await fleet_status(backend)}
    assert rows["later"].last_run is not None
    assert rows["later"].last_run.status == "claimed"
    assert rows["now"].last_run is not None
    assert rows["now"].last_run.status == "running"


async def test_drift_of_many_jobs_is_one_line_and_its_end_another(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A deploy changing 30 jobs: one summary line per instance, not 30; then one when it ends."""
    backend = MemoryBackend()

    async def noop(ctx: RunContext) -> None:
        return None

    a = Scheduler(backend, instance_id="a", fleet_refresh="300ms")
    b = Scheduler(backend, instance_id="b", fleet_refresh="300ms")
    for n in range(30):
        a.every(f"job-{n:02d}", "1h", noop)
        b.every(f"job-{n:02d}", "2h", noop)
    caplog.set_level(logging.INFO, logger="anarchon")
    await a.start()
    await b.start()

    def lines(instance: str, text: str) -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if text in r.getMessage() and r.__dict__.get("instance") == instance
        ]

    try:
        await _until(lambda: lines("a", "schedule drift on"))
        await asyncio.sleep(1.0)  # more refreshes, the same drift: no new line
        await b.stop()  # its declarations expire (3 refreshes): the drift ends
        await _until(lambda: lines("a", "schedule drift ended"), 10)
    finally:
        await a.stop()
        await b.stop()
    summary = lines("a", "schedule drift on")
    assert len(summary) == 1, [r.getMessage() for r in summary]
    assert summary[0].levelno == logging.WARNING
    assert "30 job(s)" in summary[0].getMessage()
    assert "and 25 more" in summary[0].getMessage()
    assert len(lines("a", "schedule drift ended")) == 1


class _StuckControls(MemoryBackend):
    """A memory store whose controls stop answering once ``stuck`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.stuck = asyncio.Event()
        self.unstuck = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0

    async def controls(self) -> dict[str, JobControl]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.stuck.is_set():
                await self.unstuck.wait()
            return await super().controls()
        finally:
            self.in_flight -= 1


async def test_claims_go_on_with_known_controls_while_a_refresh_hangs() -> None:
    """docs/fleet.md, "Pause, resume and skip": controls read once are kept while a read
    hangs (a KV stream electing its leader); claims wait for it only briefly, and one
    read at a time is in flight."""
    backend = _StuckControls()
    ran: list[int] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    s = Scheduler(backend, instance_id="i", control_cache=0, fleet_refresh="1s")
    s.every("tick", PERIOD, tick)
    await s.start()
    try:
        await _until(lambda: len(ran) >= 2)
        backend.stuck.set()
        seen = len(ran)
        await _until(lambda: len(ran) >= seen + 5)
        assert backend.in_flight == 1
    finally:
        backend.unstuck.set()
        await s.stop()
    assert backend.most_in_flight == 1
