"""The schedule objects (``Every``, ``Cron``) and the compiled core seen from Python.

Covers ``next_after``, half-open ``slots``, ``period_ms``, equality and hashing,
interval spellings, ``_core.next_after_many``, ``_core.jitter_ms`` and the
``_core.Timetable`` (due order, wake-ups, removal, replacement, look-back, delay).
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from anarchon import Cron, Every, InvalidJobError, _core
from anarchon.durations import Duration
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MINUTE = 60_000
HOUR = 3_600_000
DAY = 86_400_000


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    """Epoch ms of a UTC wall time."""
    return int(datetime(year, month, day, hour, minute, tzinfo=timezone.utc).timestamp() * 1000)


def local_ms(tz: str, year: int, month: int, day: int, hour: int = 0, fold: int = 0) -> int:
    """Epoch ms of a wall time in ``tz`` (``fold=1``: the second occurrence)."""
    dt = datetime(year, month, day, hour, tzinfo=ZoneInfo(tz), fold=fold)
    return int(dt.timestamp() * 1000)


# --------------------------------------------------------------------------- Every


@pytest.mark.parametrize(
    ("interval", "expected_ms"),
    [
        ("500ms", 500),
        ("10s", 10_000),
        ("5m", 300_000),
        ("1h30m", 5_400_000),
        ("1h", HOUR),
        ("2m30s", 150_000),
        (timedelta(seconds=10), 10_000),
        (timedelta(milliseconds=250), 250),
        (timedelta(hours=1, minutes=30), 5_400_000),
        (10, 10_000),
        (0.5, 500),
        (2.25, 2_250),
    ],
)
def test_interval_spellings(interval: Duration, expected_ms: int) -> None:
    every = Every(interval)
    assert every.interval_ms == expected_ms
    assert every.period_ms == expected_ms
    assert every.offset_ms == 0


def test_every_is_aligned_to_the_epoch() -> None:
    every = Every("10s")
    assert every.next_after(12_345) == 20_000
    assert every.next_after(0) == 10_000
    assert every.next_after(19_999) == 20_000
    # strictly after: a slot is never its own successor
    assert every.next_after(20_000) == 30_000
    assert every.next_after(-1) == 0
    assert every.next_after(-10_000) == 0
    assert every.next_after(-10_001) == -10_000


def test_every_offset() -> None:
    every = Every("10s", offset="3s")
    assert every.offset_ms == 3_000
    assert every.next_after(0) == 3_000
    assert every.next_after(3_000) == 13_000
    assert Every("1m", offset=timedelta(seconds=15)).next_after(0) == 15_000
    assert Every(60, offset=15).next_after(15_000) == 75_000
    # an offset of one interval or more wraps around
    assert Every("10s", offset="13s").next_after(0) == 3_000


def test_every_slots_are_half_open() -> None:
    every = Every("1s")
    assert every.slots(1_000, 4_000) == [1_000, 2_000, 3_000]
    assert every.slots(999, 4_001) == [1_000, 2_000, 3_000, 4_000]
    assert every.slots(1_000, 4_000, limit=2) == [1_000, 2_000]
    assert every.slots(4_000, 4_000) == []
    assert every.slots(5_000, 4_000) == []
    assert every.slots(1_001, 1_999) == []
    assert Every("10s", offset="3s").slots(0, 30_000) == [3_000, 13_000, 23_000]


def test_every_slots_default_limit() -> None:
    assert len(Every("1ms").slots(0, 10**9)) == 100_000


@given(
    interval=st.integers(1, 10**10),
    offset=st.integers(0, 10**10),
    after=st.integers(-(10**13), 10**13),
)
def test_every_next_after_property(interval: int, offset: int, after: int) -> None:
    every = Every(timedelta(milliseconds=interval), offset=timedelta(milliseconds=offset))
    slot = every.next_after(after)
    assert slot is not None
    assert after < slot <= after + interval
    assert (slot - offset) % interval == 0


def test_every_equality_and_hash() -> None:
    assert Every("10s") == Every(10) == Every(timedelta(seconds=10)) == Every("10000ms")
    assert hash(Every("10s")) == hash(Every(10))
    assert Every("10s", offset="3s") == Every("10s", offset="13s")
    assert hash(Every("10s", offset="3s")) == hash(Every("10s", offset="13s"))
    assert Every("10s") != Every("10s", offset="1s")
    assert Every("10s") != Every("20s")
    assert Every("1m") != Cron("* * * * *")
    assert len({Every("10s"), Every(10), Every("20s")}) == 2
    assert repr(Every("1h30m", offset="1s")) == "Every(5400000ms, offset=1000ms)"


# --------------------------------------------------------------------------- Cron (Python face)


def test_cron_next_after_utc() -> None:
    cron = Cron("0 3 * * *")
    assert cron.next_after(0) == 3 * HOUR
    assert cron.next_after(3 * HOUR - 1) == 3 * HOUR
    assert cron.next_after(3 * HOUR) == DAY + 3 * HOUR
    assert Cron("*/10 * * * * *").next_after(12_345) == 20_000
    assert Cron("@hourly").next_after(1) == HOUR


def test_cron_in_a_zone() -> None:
    # 03:00 in Athens is 00:00 UTC in summer (+03) and 01:00 UTC in winter (+02)
    athens = Cron("0 3 * * *", tz="Europe/Athens")
    assert athens.next_after(utc_ms(2026, 7, 1)) == utc_ms(2026, 7, 2, 0)
    assert athens.next_after(utc_ms(2026, 1, 1)) == utc_ms(2026, 1, 1, 1)


def test_cron_slots_are_half_open() -> None:
    cron = Cron("*/15 * * * *")
    start = utc_ms(2026, 1, 1)
    assert cron.slots(start, start + HOUR) == [start + k * 15 * MINUTE for k in range(4)]
    assert cron.slots(start + 1, start + HOUR + 1) == [start + k * 15 * MINUTE for k in range(1, 5)]
    assert cron.slots(start, start + HOUR, limit=3) == [start + k * 15 * MINUTE for k in range(3)]
    assert cron.slots(start, start) == []
    assert Cron("0 0 30 2 *").slots(start, start + 10 * 365 * DAY) == []


def test_cron_slots_match_next_after() -> None:
    cron = Cron("15,45 */2 * * *", tz="America/New_York")
    start = local_ms("America/New_York", 2026, 3, 7)
    end = local_ms("America/New_York", 2026, 3, 10)
    expected = []
    cursor = start - 1
    while (slot := cron.next_after(cursor)) is not None and slot < end:
        expected.append(slot)
        cursor = slot
    assert cron.slots(start, end) == expected
    # 24 slots a day; on 2026-03-08 02:15 and 02:45 do not exist and the hour is
    # a wildcard (*/2), so they are skipped (real time), not moved to 03:00
    assert len(expected) == 70


def test_impossible_cron_has_no_slot() -> None:
    assert Cron("0 0 30 2 *").next_after(0) is None
    assert Cron("0 0 31 4,6,9,11 *").next_after(0) is None


@pytest.mark.parametrize(
    ("expression", "period_ms"),
    [
        ("*/10 * * * * *", 10_000),
        ("* * * * * *", 1_000),
        ("* * * * *", MINUTE),
        ("*/5 * * * *", 5 * MINUTE),
        ("15,45 */2 * * *", 30 * MINUTE),
        ("0 * * * *", HOUR),
        ("@hourly", HOUR),
        ("0 3 * * *", DAY),
        ("@daily", DAY),
        ("0 9 * * 1-5", DAY),
        ("@weekly", 7 * DAY),
    ],
)
def test_cron_period_in_utc(expression: str, period_ms: int) -> None:
    assert Cron(expression).period_ms == period_ms


@pytest.mark.parametrize(
    ("expression", "tz"),
    [
        ("0 * * * *", "America/New_York"),
        ("30 1 * * *", "America/New_York"),
        ("30 2 * * *", "America/New_York"),
        ("0 3 * * *", "Europe/Athens"),
        ("*/20 1 * * *", "Europe/London"),
        ("0 0 1 * *", "UTC"),
        ("0 0 29 2 *", "UTC"),
        ("0 0 13 * 5", "UTC"),
        ("0 0 * * 5L", "UTC"),
        ("15 2 * * *", "Australia/Lord_Howe"),
    ],
)
def test_cron_period_is_a_lower_bound_of_the_gaps(expression: str, tz: str) -> None:
    """``period_ms`` is the smallest gap: never more than a gap seen over 30 years."""
    cron = Cron(expression, tz=tz)
    slots = cron.slots(utc_ms(2020, 1, 1), utc_ms(2050, 1, 1))
    assert len(slots) > 1
    smallest = min(b - a for a, b in itertools.pairwise(slots))
    assert 0 < cron.period_ms <= smallest


def test_cron_equality_and_hash() -> None:
    assert Cron("0 3 * * *") == Cron("0 3 * * *", tz="UTC")
    assert hash(Cron("0 3 * * *")) == hash(Cron("0 3 * * *", tz="UTC"))
    assert Cron("0 3 * * *") != Cron("0 3 * * *", tz="Europe/Athens")
    assert Cron("0 3 * * *") != Cron("0 4 * * *")
    assert len({Cron("@daily"), Cron("@daily"), Cron("@hourly")}) == 2
    assert repr(Cron("0 3 * * *", tz="Europe/Athens")) == "Cron('0 3 * * *', tz='Europe/Athens')"


# --------------------------------------------------------------------------- next_after_many


def _schedule_pool() -> list[_core.Schedule]:
    pool = [
        _core.Schedule.every(1_000),
        _core.Schedule.every(10_000, 3_000),
        _core.Schedule.every(3_600_000, 1),
        _core.Schedule.every(7, 5),
    ]
    for expression, tz in [
        ("* * * * *", "UTC"),
        ("0 3 * * *", "Europe/Athens"),
        ("30 1 * * *", "America/New_York"),
        ("30 2 * * 0", "America/New_York"),
        ("*/10 * * * * *", "UTC"),
        ("0 0 29 2 *", "Australia/Lord_Howe"),
        ("0 0 30 2 *", "UTC"),  # never: next_after gives None
        ("0 9 * * 1-5", "Europe/London"),
    ]:
        pool.append(_core.Schedule.cron(expression, tz))
    return pool


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    picks=st.lists(st.integers(0, 11), max_size=60),
    after=st.integers(0, 4_102_444_800_000),
)
def test_next_after_many_equals_next_after(picks: list[int], after: int) -> None:
    pool = _schedule_pool()
    schedules = [pool[i] for i in picks]
    assert _core.next_after_many(schedules, after) == [s.next_after(after) for s in schedules]


def test_next_after_many_empty_and_none() -> None:
    assert _core.next_after_many([], 0) == []
    never = _core.Schedule.cron("0 0 30 2 *", "UTC")
    assert _core.next_after_many([never, _core.Schedule.every(5)], 0) == [None, 5]


# --------------------------------------------------------------------------- jitter


@given(
    instance=st.text(max_size=20),
    job=st.text(max_size=20),
    slot=st.integers(-(10**15), 10**15),
    jitter=st.integers(-5, 10**7),
    gap=st.integers(-5, 10**8),
)
def test_jitter_bounds_and_determinism(
    instance: str, job: str, slot: int, jitter: int, gap: int
) -> None:
    delay = _core.jitter_ms(instance, job, slot, jitter, gap)
    bound = min(jitter, gap // 2)
    if bound <= 0:
        assert delay == 0
    else:
        assert 0 <= delay < bound
    assert _core.jitter_ms(instance, job, slot, jitter, gap) == delay


def test_jitter_is_capped_by_half_the_gap() -> None:
    delays = [_core.jitter_ms("web-1", "tick", s * 1_000, 2_000, 1_000) for s in range(2_000)]
    assert max(delays) < 500
    assert min(delays) >= 0
    assert len(set(delays)) > 300  # spread over the capped range


def test_jitter_spreads_instances_and_slots() -> None:
    a = [_core.jitter_ms("web-1", "tick", s, 10_000, 10**9) for s in range(1_000)]
    b = [_core.jitter_ms("web-2", "tick", s, 10_000, 10**9) for s in range(1_000)]
    assert sum(x != y for x, y in zip(a, b, strict=True)) > 990
    assert len(set(a)) > 900
    mean = sum(a) / len(a)
    assert 4_000 < mean < 6_000  # uniform on [0, 10000)


# --------------------------------------------------------------------------- Timetable


def every(ms: int, offset: int = 0) -> _core.Schedule:
    return _core.Schedule.every(ms, offset)


def test_timetable_due_in_fire_order_and_advances() -> None:
    table = _core.Timetable("i")
    table.add("a", every(1_000), 0, 500)
    table.add("b", every(3_000), 0, 500)
    assert len(table) == 2
    assert "a" in table
    assert "c" not in table
    assert table.next_wakeup() == 1_000
    assert table.due(999) == []
    assert table.due(3_000) == [
        ("a", 1_000, 1_000),
        ("a", 2_000, 2_000),
        ("a", 3_000, 3_000),
        ("b", 3_000, 3_000),
    ]
    assert table.next_wakeup() == 4_000
    assert table.next_of("a") == (4_000, 4_000)
    assert table.next_of("b") == (6_000, 6_000)
    assert table.next_of("nope") is None


def test_timetable_empty() -> None:
    table = _core.Timetable("i")
    assert len(table) == 0
    assert table.next_wakeup() is None
    assert table.due(10**15) == []
    assert table.scan_due_count(10**15) == 0
    assert not table.remove("x")


def test_timetable_limit_bounds_one_call() -> None:
    table = _core.Timetable("i")
    for n in range(100):
        table.add(f"j{n}", every(1_000), 0, 1)
    first = table.due(1_000, 30)
    rest = table.due(1_000)
    assert len(first) == 30
    assert len(rest) == 70
    assert {job for job, _, _ in first + rest} == {f"j{n}" for n in range(100)}
    assert table.scan_due_count(1_999) == 0
    assert table.scan_due_count(2_000) == 100


def test_timetable_remove_and_replace() -> None:
    table = _core.Timetable("i")
    table.add("a", every(1_000), 0, 1)
    table.add("b", every(1_000), 0, 1)
    assert table.remove("a")
    assert not table.remove("a")
    assert "a" not in table
    assert table.next_of("a") is None
    assert [job for job, _, _ in table.due(1_000)] == ["b"]
    table.add("b", every(5_000), 0, 1_000)  # replaces b
    assert len(table) == 1
    assert table.next_wakeup() == 5_000
    assert table.due(4_999) == []
    assert table.due(5_000) == [("b", 5_000, 5_000)]


def test_timetable_removal_of_the_earliest_job_moves_the_wakeup() -> None:
    table = _core.Timetable("i")
    table.add("fast", every(1_000), 0, 1)
    table.add("slow", every(60_000), 0, 1)
    assert table.next_wakeup() == 1_000
    table.remove("fast")
    assert table.next_wakeup() == 60_000
    table.add("fast", every(1_000), 0, 10_500)
    assert table.next_wakeup() == 11_000


def test_timetable_lookback_takes_the_latest_recent_slot() -> None:
    table = _core.Timetable("i")
    table.add("a", every(1_000), 0, 5_500, lookback_ms=2_000)
    assert table.next_of("a") == (5_000, 5_000)
    table.add("b", every(10_000), 0, 5_500, lookback_ms=2_000)
    assert table.next_of("b") == (10_000, 10_000)  # nothing in [3500, 5500]
    table.add("c", every(1_000), 0, 5_000, lookback_ms=0)
    assert table.next_of("c") == (5_000, 5_000)  # a slot exactly at now counts
    table.add("d", every(1_000), 0, 5_500)
    assert table.next_of("d") == (6_000, 6_000)
    # due right away: the slots inside the look-back (and at now) are claimed
    assert sorted(table.due(5_500)) == [("a", 5_000, 5_000), ("c", 5_000, 5_000)]


def test_timetable_jitter_delays_the_fire_time_not_the_slot() -> None:
    table = _core.Timetable("web-1")
    table.add("a", every(10_000), 2_000, 1)
    slot, fire_at = table.next_of("a") or (0, 0)
    assert slot == 10_000
    assert fire_at == slot + _core.jitter_ms("web-1", "a", 10_000, 2_000, 10_000)
    assert slot <= fire_at < slot + 2_000
    assert table.next_wakeup() == fire_at
    assert table.due(fire_at - 1) == []
    assert table.due(fire_at) == [("a", 10_000, fire_at)]


def test_timetable_jitter_is_capped_by_half_the_gap() -> None:
    table = _core.Timetable("i")
    table.add("a", every(100), 10_000, 0)
    for _ in range(200):
        slot, fire_at = table.next_of("a") or (0, 0)
        assert slot <= fire_at < slot + 50
        table.due(fire_at)


def test_timetable_delay_moves_the_fire_time_not_the_slot() -> None:
    table = _core.Timetable("web-1")
    table.add("a", every(10_000), 2_000, 1, lead_ms=1_000, delay_ms=3_000)
    jitter = _core.jitter_ms("web-1", "a", 10_000, 2_000, 10_000)
    assert table.next_of("a") == (10_000, 13_000 + jitter)
    # taken its lead before the delayed fire time
    assert table.next_wakeup() == 12_000 + jitter
    assert table.due(11_999 + jitter) == []
    assert table.due(12_000 + jitter) == [("a", 10_000, 13_000 + jitter)]
    assert table.next_of("a") == (
        20_000,
        23_000 + _core.jitter_ms("web-1", "a", 20_000, 2_000, 10_000),
    )


def test_timetable_zero_delay_is_the_plain_add() -> None:
    plain = _core.Timetable("web-1")
    zero = _core.Timetable("web-1")
    for n, period in enumerate([1_000, 7_000, 60_000]):
        plain.add(f"j{n}", every(period), 2_000, 123_456, 5_000, 700)
        zero.add(f"j{n}", every(period), 2_000, 123_456, 5_000, 700, delay_ms=0)
    assert plain.due(10**6) == zero.due(10**6)
    assert plain.next_wakeup() == zero.next_wakeup()


def test_timetable_set_delay_keeps_the_pending_slot() -> None:
    table = _core.Timetable("i")
    table.add("a", every(10_000), 0, 1, delay_ms=5_000)
    assert table.due(12_000) == []
    assert table.set_delay("a", 0)  # now the first candidate: slot 10 000 is due at once
    assert table.due(12_000) == [("a", 10_000, 10_000)]
    assert table.set_delay("a", 2_500)
    assert table.next_of("a") == (20_000, 22_500)
    assert not table.set_delay("missing", 0)


@pytest.mark.parametrize("delay", [-1, DAY + 1, 2**63 - 1])
def test_timetable_delay_out_of_range_is_refused(delay: int) -> None:
    table = _core.Timetable("i")
    table.add("a", every(1_000), 0, 1)
    with pytest.raises(InvalidJobError) as info:
        table.add("a", every(5_000), 0, 1, delay_ms=delay)
    assert info.value.field == "delay_ms"
    with pytest.raises(InvalidJobError) as info:
        table.set_delay("a", delay)
    assert info.value.field == "delay_ms"
    assert table.next_of("a") == (1_000, 1_000)  # unchanged
    table.add("b", every(1_000), 0, 1, delay_ms=DAY)
    assert table.next_of("b") == (1_000, 1_000 + DAY)


def test_timetable_with_cron_schedules() -> None:
    table = _core.Timetable("i")
    start = utc_ms(2026, 1, 1)
    now = start + 1
    table.add("minutely", _core.Schedule.cron("* * * * *", "UTC"), 0, now)
    table.add("daily", _core.Schedule.cron("0 3 * * *", "Europe/Athens"), 0, now)
    table.add("never", _core.Schedule.cron("0 0 30 2 *", "UTC"), 0, now)
    assert len(table) == 3
    assert table.next_of("never") is None
    assert table.next_of("daily") == (start + HOUR, start + HOUR)  # 03:00 in Athens
    assert table.next_wakeup() == start + MINUTE
    due = table.due(start + 59 * MINUTE)
    assert due == [("minutely", start + k * MINUTE, start + k * MINUTE) for k in range(1, 60)]
    assert table.due(start + HOUR - 1) == []
    assert sorted(table.due(start + HOUR)) == [
        ("daily", start + HOUR, start + HOUR),
        ("minutely", start + HOUR, start + HOUR),
    ]
    assert table.next_of("daily") == (start + DAY + HOUR, start + DAY + HOUR)


def test_timetable_cron_jitter_is_capped_by_the_gap_to_the_next_slot() -> None:
    table = _core.Timetable("web-1")
    table.add("fast", _core.Schedule.cron("*/2 * * * * *", "UTC"), 10_000, 1)
    for _ in range(50):
        slot, fire_at = table.next_of("fast") or (0, 0)
        assert slot <= fire_at < slot + 1_000  # half of the 2 s gap
        assert fire_at - slot == _core.jitter_ms("web-1", "fast", slot, 10_000, 2_000)
        table.due(fire_at)


def test_timetable_jobs_without_slots_never_wake() -> None:
    table = _core.Timetable("i")
    table.add("never", _core.Schedule.cron("0 0 30 2 *", "UTC"), 0, 0)
    assert "never" in table
    assert table.next_wakeup() is None
    assert table.due(10**14) == []


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(st.integers(1, 5_000), st.integers(0, 5_000), st.integers(0, 3_000)),
        min_size=1,
        max_size=12,
    ),
    steps=st.lists(st.integers(0, 4_000), min_size=1, max_size=15),
    start=st.integers(0, 10**6),
)
def test_timetable_matches_a_brute_force_model(
    jobs: list[tuple[int, int, int]], steps: list[int], start: int
) -> None:
    """Stepping ``now`` forward yields every (job, slot) exactly once, in fire order."""
    instance = "web-7"
    table = _core.Timetable(instance)
    for n, (period, offset, jitter) in enumerate(jobs):
        table.add(f"j{n}", every(period, offset), jitter, start)

    def fire_times(until: int) -> list[tuple[int, int, str]]:
        out = []
        for n, (period, offset, jitter) in enumerate(jobs):
            schedule = every(period, offset)
            slot = schedule.next_after(start - 1)  # a slot exactly at start is due
            while slot is not None and slot <= until:
                gap = period
                delay = _core.jitter_ms(instance, f"j{n}", slot, jitter, gap)
                if slot + delay <= until:
                    out.append((slot + delay, slot, f"j{n}"))
                slot = schedule.next_after(slot)
        return out

    now = start
    seen: list[tuple[str, int, int]] = []
    for step in steps:
        now += step
        batch = table.due(now)
        assert [fire for _, _, fire in batch] == sorted(fire for _, _, fire in batch)
        assert all(fire <= now for _, _, fire in batch)
        seen.extend(batch)
        wake = table.next_wakeup()
        assert wake is None or wake > now
        assert table.scan_due_count(now) == 0
    expected = sorted(fire_times(now))
    assert sorted((fire, slot, job) for job, slot, fire in seen) == expected
    assert len(set((job, slot) for job, slot, _ in seen)) == len(seen)
