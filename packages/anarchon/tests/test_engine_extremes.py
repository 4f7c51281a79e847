"""Extreme values through every public call of the slot engine.

``anarchon._core`` (``Schedule.every/cron``, ``next_after``, ``slots``,
``latest_between``, ``period_ms``, ``next_after_many``, ``jitter_ms``,
``Timetable`` and ``build_history``) and ``anarchon.schedules`` get ``i64``
minimum and maximum, 0, ±1, huge periods and offsets and the edges of years 1
and 9999. Run on the dev build (``maturin develop``, debug assertions on), an
overflow in the engine would be a ``PanicException``; in a release build it
would be a wrong answer. So every answer is compared with an exact Python
computation (Python ints do not overflow), and an int outside ``i64`` must
raise ``InvalidJobError`` naming the argument.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from anarchon import Cron, Every, InvalidJobError, _core
from anarchon.backend.history import build_history
from anarchon.types import ClaimRecord, StoredResult

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
SECOND, MINUTE, HOUR, DAY = 1_000, 60_000, 3_600_000, 86_400_000
YEAR_1 = -62_135_596_800_000  # 0001-01-01T00:00:00Z
YEAR_9999_END = 253_402_300_799_000  # 9999-12-31T23:59:59Z, the last cron slot

INSTANTS = [
    I64_MIN,
    I64_MIN + 1,
    -(2**62),
    YEAR_1 - 1,
    YEAR_1,
    YEAR_1 + 1,
    -1,
    0,
    1,
    YEAR_9999_END - 1,
    YEAR_9999_END,
    YEAR_9999_END + 999,
    YEAR_9999_END + 1_000,
    2**62,
    I64_MAX - 1,
    I64_MAX,
]

PERIODS = [1, 2, 999, SECOND, DAY, 2**62, I64_MAX - 1, I64_MAX]
OFFSETS = [0, 1, -1, 500, I64_MIN, I64_MIN + 1, I64_MAX]

OUT_OF_RANGE = [I64_MAX + 1, I64_MIN - 1, 2**100, -(2**100)]


def in_i64(value: int) -> int | None:
    return value if I64_MIN <= value <= I64_MAX else None


# ---------------------------------------------------------------- intervals


class EveryModel:
    """``slot = k * period + offset`` in Python ints: the exact answers."""

    def __init__(self, period: int, offset: int) -> None:
        self.period = period
        self.offset = offset % period

    def next_after(self, ms: int) -> int | None:
        return in_i64(((ms - self.offset) // self.period + 1) * self.period + self.offset)

    def at_or_before(self, ms: int) -> int | None:
        return in_i64(((ms - self.offset) // self.period) * self.period + self.offset)

    def at_or_after(self, ms: int) -> int | None:
        return in_i64(-((self.offset - ms) // self.period) * self.period + self.offset)

    def latest_between(self, a: int, b: int) -> int | None:
        if a > b:
            return None
        slot = self.at_or_before(b)
        return slot if slot is not None and slot >= a else None

    def slots(self, a: int, b: int, limit: int) -> list[int]:
        out: list[int] = []
        slot = self.at_or_after(a)
        while slot is not None and slot < b and len(out) < limit:
            out.append(slot)
            slot = self.next_after(slot)
        return out


EVERY_CASES = list(itertools.product(PERIODS, OFFSETS))


@pytest.mark.parametrize(("period", "offset"), EVERY_CASES)
def test_every_matches_exact_arithmetic(period: int, offset: int) -> None:
    compiled = _core.Schedule.every(period, offset)
    model = EveryModel(period, offset)
    assert compiled.period_ms == period
    for ms in INSTANTS:
        assert compiled.next_after(ms) == model.next_after(ms), ms
    for a, b in itertools.product(INSTANTS, repeat=2):
        assert compiled.latest_between(a, b) == model.latest_between(a, b), (a, b)
        assert compiled.slots(a, b, 3) == model.slots(a, b, 3), (a, b)
    assert _core.next_after_many([compiled] * 3, I64_MIN) == [model.next_after(I64_MIN)] * 3


def test_the_interval_of_the_issue() -> None:
    """``Every("1s", offset="500ms").next_after(-2**63)`` panicked in interval.rs."""
    every = Every("1s", offset="500ms")
    assert every.next_after(I64_MIN) == -9_223_372_036_854_775_500
    assert every.next_after(I64_MAX) is None
    assert every.slots(I64_MIN, I64_MIN + 2_000) == [
        -9_223_372_036_854_775_500,
        -9_223_372_036_854_774_500,
    ]


@pytest.mark.parametrize("interval", ["1ms", 1, timedelta(days=10**6), 2**62 / 1000])
@pytest.mark.parametrize("offset", [0, "1ms", 2**62 / 1000])
def test_python_every_with_huge_values(interval: object, offset: object) -> None:
    every = Every(interval, offset=offset)  # type: ignore[arg-type]
    model = EveryModel(every.interval_ms, every.offset_ms)
    for ms in INSTANTS:
        assert every.next_after(ms) == model.next_after(ms)
        assert every.slots(ms, I64_MAX, 2) == model.slots(ms, I64_MAX, 2)


def test_every_refuses_a_non_positive_period() -> None:
    for period in [0, -1, I64_MIN]:
        with pytest.raises(InvalidJobError) as info:
            _core.Schedule.every(period, 0)
        assert info.value.field == "interval"


# ---------------------------------------------------------------- cron (UTC)


class CronModel:
    """Exact slots of a UTC expression, clamped to years 1-9999.

    ``first(ms)``: the first slot at or after ``ms``; ``last(ms)``: the last
    slot at or before ``ms`` (both None outside the years 1-9999).
    """

    def __init__(
        self, first: Callable[[int], int | None], last: Callable[[int], int | None]
    ) -> None:
        self.first = first
        self.last = last

    def next_after(self, ms: int) -> int | None:
        return self.first(max(ms + 1, YEAR_1))

    def latest_between(self, a: int, b: int) -> int | None:
        slot = self.last(b) if a <= b else None
        return slot if slot is not None and slot >= a else None


def aligned(unit: int, offset: int = 0) -> CronModel:
    """Every ``unit`` ms at ``offset`` (UTC, ``unit`` divides a day) within years 1-9999."""

    def first(ms: int) -> int | None:
        slot = -((offset - max(ms, YEAR_1)) // unit) * unit + offset
        return slot if slot <= YEAR_9999_END else None

    def last(ms: int) -> int | None:
        slot = ((min(ms, YEAR_9999_END) - offset) // unit) * unit + offset
        return slot if slot >= YEAR_1 else None

    return CronModel(first, last)


def _jan_first(year: int) -> int:
    return int(datetime(year, 1, 1, tzinfo=timezone.utc).timestamp()) * 1000


def _year_of(ms: int) -> int:
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)).year


def _yearly_first(ms: int) -> int | None:
    if ms <= YEAR_1:
        return YEAR_1
    if ms > YEAR_9999_END:
        return None
    year = _year_of(ms)
    if _jan_first(year) == ms:
        return ms
    return _jan_first(year + 1) if year < 9999 else None


def _yearly_last(ms: int) -> int | None:
    if ms < YEAR_1:
        return None
    return _jan_first(_year_of(min(ms, YEAR_9999_END)))


CRON_CASES: list[tuple[str, CronModel, int]] = [
    ("* * * * * *", aligned(SECOND), SECOND),
    ("* * * * *", aligned(MINUTE), MINUTE),
    ("*/15 * * * *", aligned(15 * MINUTE), 15 * MINUTE),
    ("0 3 * * *", aligned(DAY, 3 * HOUR), DAY),
    ("@yearly", CronModel(_yearly_first, _yearly_last), 365 * DAY),
]


@pytest.mark.parametrize(("expression", "model", "period"), CRON_CASES)
def test_cron_utc_matches_exact_dates(expression: str, model: CronModel, period: int) -> None:
    compiled = _core.Schedule.cron(expression, "UTC")
    assert compiled.period_ms == period
    for ms in INSTANTS:
        assert compiled.next_after(ms) == model.next_after(ms), ms
        # slots() from ms: the first three slots at or after it.
        expected: list[int] = []
        slot = model.first(max(ms, YEAR_1))
        while slot is not None and len(expected) < 3:
            expected.append(slot)
            slot = model.next_after(slot)
        assert compiled.slots(ms, I64_MAX, 3) == expected, ms
    assert _core.next_after_many([compiled], YEAR_1 - 1) == [model.next_after(YEAR_1 - 1)]


@pytest.mark.parametrize(("expression", "model", "_period"), CRON_CASES)
def test_cron_latest_between_extremes(expression: str, model: CronModel, _period: int) -> None:
    compiled = _core.Schedule.cron(expression, "UTC")
    # Whole range: the last slot of year 9999, found without walking 10 000 years.
    assert compiled.latest_between(I64_MIN, I64_MAX) == model.last(I64_MAX)
    assert compiled.latest_between(YEAR_9999_END + 1, I64_MAX) is None
    assert compiled.latest_between(I64_MIN, YEAR_1 - 1) is None
    first = model.first(YEAR_1)
    assert first is not None
    assert compiled.latest_between(I64_MIN, first) == first
    assert compiled.latest_between(I64_MIN, first - 1) is None
    assert compiled.latest_between(I64_MAX, I64_MIN) is None
    for a, b in itertools.product(INSTANTS, repeat=2):
        assert compiled.latest_between(a, b) == model.latest_between(a, b), (a, b)


def test_cron_in_a_zone_matches_zoneinfo_at_the_year_edges() -> None:
    """Noon in Athens (never in a gap or an overlap), year 1 and year 9999 included."""
    zone = ZoneInfo("Europe/Athens")
    compiled = _core.Schedule.cron("0 12 * * *", "Europe/Athens")

    def expected(ms: int) -> int | None:
        if ms >= YEAR_9999_END:
            return None
        if ms < YEAR_1:
            ms, day = YEAR_1 - 1, date(1, 1, 1)
        else:
            day = (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)).date()
        for delta in (-1, 0, 1, 2):
            try:
                when = day + timedelta(days=delta)
            except OverflowError:
                continue
            slot = int(datetime(when.year, when.month, when.day, 12, tzinfo=zone).timestamp())
            if slot * 1000 > ms:
                return slot * 1000 if slot * 1000 <= YEAR_9999_END else None
        return None

    probes = [*INSTANTS, YEAR_1 + 10 * HOUR, YEAR_9999_END - DAY, YEAR_9999_END - 12 * HOUR]
    for ms in probes:
        assert compiled.next_after(ms) == expected(ms), ms


@pytest.mark.parametrize(
    "tz", ["UTC", "Europe/Athens", "America/New_York", "Australia/Lord_Howe", "Etc/GMT-14"]
)
@pytest.mark.parametrize(
    "expression",
    ["* * * * * *", "0 0 29 2 *", "0 0 30 2 *", "0 0 * 2 1#5", "0 0 L * FRIL", "30 2 * * *"],
)
def test_cron_extremes_are_consistent(expression: str, tz: str) -> None:
    compiled = _core.Schedule.cron(expression, tz)
    assert compiled.period_ms > 0
    for ms in INSTANTS:
        slot = compiled.next_after(ms)
        assert slot is None or (ms < slot <= YEAR_9999_END and slot % 1000 == 0)
        latest = compiled.latest_between(I64_MIN, ms)
        assert latest is None or YEAR_1 <= latest <= ms
        if latest is not None:
            # Nothing between the latest slot and ms.
            after = compiled.next_after(latest)
            assert after is None or after > ms
        assert compiled.slots(ms, I64_MAX, 2) == compiled.slots(ms, I64_MAX, 5)[:2]


# ---------------------------------------------------------------- jitter and timetable


@pytest.mark.parametrize("slot", [I64_MIN, -1, 0, 1, I64_MAX])
def test_jitter_extremes(slot: int) -> None:
    for jitter, gap in itertools.product(INSTANTS, repeat=2):
        delay = _core.jitter_ms("i", "job", slot, jitter, gap)
        half_gap = gap // 2 if gap >= 0 else -(-gap // 2)  # Rust's `/` truncates
        bound = min(jitter, half_gap)
        if bound <= 0:
            assert delay == 0
        else:
            assert 0 <= delay < bound


def expected_entry(
    schedule: _core.Schedule, job: str, jitter: int, now: int, lookback: int
) -> tuple[int, int] | None:
    """(slot, fire_at) the timetable must hold for a job just added."""
    start = max(now - max(lookback, 0), I64_MIN)
    slot = schedule.latest_between(start, now)
    if slot is None:
        slot = schedule.next_after(now)
    if slot is None:
        return None
    following = schedule.next_after(slot)
    gap = I64_MAX if following is None else following - slot
    delay = _core.jitter_ms("tt", job, slot, jitter, gap)
    return slot, min(slot + delay, I64_MAX)


def test_timetable_extremes_match_the_schedules() -> None:
    schedules = [
        _core.Schedule.every(1, 0),
        _core.Schedule.every(SECOND, 500),
        _core.Schedule.every(I64_MAX, I64_MAX - 1),
        _core.Schedule.cron("* * * * * *"),
        _core.Schedule.cron("0 12 * * *", "Europe/Athens"),
    ]
    for index, (schedule, now, lookback, jitter) in enumerate(
        itertools.product(schedules, INSTANTS[::3], [0, 1, I64_MAX], [0, 1, I64_MAX])
    ):
        table = _core.Timetable("tt")
        job = f"j{index}"
        table.add(job, schedule, jitter, now, lookback)
        entry = expected_entry(schedule, job, jitter, now, lookback)
        assert table.next_of(job) == entry, (index, now, lookback, jitter)
        assert table.next_wakeup() == (None if entry is None else entry[1])
        assert table.scan_due_count(now) == (1 if entry is not None and entry[1] <= now else 0)
        due = table.due(I64_MAX, 4)
        assert len(due) <= 4
        assert all(name == job for name, _, _ in due)
        slots = [slot for _, slot, _ in due]
        assert slots == sorted(set(slots))
        if entry is not None:
            assert slots[0] == entry[0]
            # The rest follow the schedule one by one.
            for a, b in itertools.pairwise(slots):
                assert schedule.next_after(a) == b
        assert table.remove(job)
        assert table.next_wakeup() is None


def test_timetable_runs_out_of_slots_at_i64_max() -> None:
    table = _core.Timetable("i")
    table.add("a", _core.Schedule.every(1, 0), 0, I64_MAX - 2)
    assert table.due(I64_MAX) == [
        ("a", I64_MAX - 2, I64_MAX - 2),
        ("a", I64_MAX - 1, I64_MAX - 1),
        ("a", I64_MAX, I64_MAX),
    ]
    assert table.next_wakeup() is None
    # A last slot whose jitter would pass i64::MAX fires at i64::MAX.
    table.add("b", _core.Schedule.every(I64_MAX, 0), I64_MAX, I64_MAX - 1)
    assert table.next_of("b") == (I64_MAX, I64_MAX)


# ---------------------------------------------------------------- history


@pytest.mark.parametrize(("started", "finished"), list(itertools.product(INSTANTS[::2], repeat=2)))
def test_history_durations_are_exact_or_none(started: int, finished: int) -> None:
    result = StoredResult(I64_MAX, "t", "a", "ok", started, finished, attempt=I64_MAX)
    claim = ClaimRecord("job", I64_MIN, "c", "b", I64_MIN, attempt=I64_MIN)
    records = build_history("job", [claim], [result], I64_MAX)
    assert [r.slot for r in records] == [I64_MAX, I64_MIN]
    duration = finished - started
    assert records[0].duration_ms == (max(duration, 0) if in_i64(duration) is not None else None)
    assert records[0].attempt == I64_MAX
    assert records[1].attempt == 1
    assert records[1].started_at == I64_MIN


# ---------------------------------------------------------------- ints outside i64


def calls_with(bad: int) -> list[tuple[str, Callable[[], object]]]:
    every = _core.Schedule.every(SECOND, 0)
    cron = _core.Schedule.cron("* * * * *")
    table = _core.Timetable("i")
    return [
        ("interval", lambda: _core.Schedule.every(bad, 0)),
        ("offset", lambda: _core.Schedule.every(SECOND, bad)),
        ("ms", lambda: every.next_after(bad)),
        ("ms", lambda: cron.next_after(bad)),
        ("ms", lambda: Every("1s").next_after(bad)),
        ("ms", lambda: Cron("* * * * *").next_after(bad)),
        ("start_ms", lambda: every.slots(bad, 0)),
        ("end_ms", lambda: cron.slots(0, bad)),
        ("from_ms", lambda: cron.latest_between(bad, 0)),
        ("to_ms", lambda: every.latest_between(0, bad)),
        ("after_ms", lambda: _core.next_after_many([every, cron], bad)),
        ("slot", lambda: _core.jitter_ms("i", "j", bad, 0, 0)),
        ("jitter_ms", lambda: _core.jitter_ms("i", "j", 0, bad, 0)),
        ("gap_ms", lambda: _core.jitter_ms("i", "j", 0, 0, bad)),
        ("jitter_ms", lambda: table.add("j", every, bad, 0)),
        ("now_ms", lambda: table.add("j", every, 0, bad)),
        ("lookback_ms", lambda: table.add("j", every, 0, 0, bad)),
        ("delay_ms", lambda: table.add("j", every, 0, 0, delay_ms=bad)),
        ("delay_ms", lambda: table.set_delay("j", bad)),
        ("k", lambda: _core.rendezvous_ranks(["a"], "a", ["j"], bad)),
        ("k", lambda: _core.rendezvous_candidates(["a"], "j", bad)),
        ("now_ms", lambda: table.due(bad)),
        ("now_ms", lambda: table.scan_due_count(bad)),
        ("slot", lambda: build_history("j", [ClaimRecord("j", bad, "t", "i", 0)], [], 1)),
        ("at", lambda: build_history("j", [ClaimRecord("j", 0, "t", "i", bad)], [], 1)),
        ("slot", lambda: build_history("j", [], [StoredResult(bad, "t", "i", "ok")], 1)),
        (
            "finished_at",
            lambda: build_history("j", [], [StoredResult(0, "t", "i", "ok", 0, bad)], 1),
        ),
    ]


@pytest.mark.parametrize("bad", OUT_OF_RANGE)
def test_ints_outside_i64_raise_invalid_job(bad: int) -> None:
    for field, call in calls_with(bad):
        with pytest.raises(InvalidJobError) as info:
            call()
        assert info.value.code == "ANARCHON_INVALID_JOB"
        assert info.value.field == field, field


@pytest.mark.parametrize("limit", [-1, 10_000_001, 2**64])
def test_limits_out_of_range_raise_invalid_job(limit: int) -> None:
    every = _core.Schedule.every(1, 0)
    table = _core.Timetable("i")
    calls: list[Callable[[], object]] = [
        lambda: every.slots(0, 10, limit),
        lambda: table.due(0, limit),
    ]
    for call in calls:
        with pytest.raises(InvalidJobError) as info:
            call()
        assert info.value.field == "limit"
    assert every.slots(I64_MAX - 1, I64_MAX, 10_000_000) == [I64_MAX - 1]


def test_default_limits_bound_one_call() -> None:
    every = _core.Schedule.every(1, 0)
    assert len(every.slots(I64_MIN, I64_MAX)) == 100_000
    table = _core.Timetable("i")
    table.add("a", every, 0, I64_MIN)
    assert len(table.due(I64_MAX)) == 100_000
