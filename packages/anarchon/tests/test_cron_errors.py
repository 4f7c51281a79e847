"""Malformed schedules: every one raises ``InvalidJobError`` (``ANARCHON_INVALID_JOB``)
with the cron field and the 0-based character offset of the bad token (docs/engine.md, docs/concepts.md "Errors").

Also: random junk never escapes as anything but ``InvalidJobError`` (a pyo3
``PanicException`` would be a bug in the engine).
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from anarchon import AnarchonError, Cron, Every, InvalidJobError
from anarchon.durations import Duration, to_ms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CODE = "ANARCHON_INVALID_JOB"
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

# (expression, field, position of the bad token)
BAD_EXPRESSIONS: list[tuple[str, str | None, int | None]] = [
    # field counts: 5 or 6 (seconds first); a 7th (year) field is refused.
    # Errors about the whole expression name the field "expression".
    ("* * * *", "expression", 7),  # where the missing field would start
    ("0 0 1 1", "expression", 7),
    ("*", "expression", 1),
    ("* * * * * * *", "expression", 12),  # the 7th (year) field
    ("0 0 12 * * ? 2027", "expression", 13),
    ("0 0 0 1 1 * 2030 5", "expression", 12),  # the first field too many
    # Jenkins-style hash and random tokens are refused
    ("H * * * *", "minute", 0),
    ("0 H * * *", "hour", 2),
    ("H/15 * * * *", "minute", 0),
    ("0 0 H(1-7) * *", "day-of-month", 4),
    ("R * * * *", "minute", 0),
    ("0 R * * *", "hour", 2),
    ("0 0 * * R", "day-of-week", 8),
    # out of range, per field (five fields)
    ("60 * * * *", "minute", 0),
    ("0 24 * * *", "hour", 2),
    ("0 0 0 * *", "day-of-month", 4),
    ("0 0 32 * *", "day-of-month", 4),
    ("0 0 * 0 *", "month", 6),
    ("0 0 * 13 *", "month", 6),
    ("0 0 * * 8", "day-of-week", 8),
    # out of range, six fields (seconds first)
    ("60 * * * * *", "second", 0),
    ("0 60 * * * *", "minute", 2),
    ("0 0 24 * * *", "hour", 4),
    ("0 0 0 32 * *", "day-of-month", 6),
    ("0 0 0 * 13 *", "month", 8),
    ("0 0 0 * * 8", "day-of-week", 10),
    # the bad value inside a list or a range
    ("0 0 1,32 * *", "day-of-month", 6),
    ("0 0 1-32 * *", "day-of-month", 6),
    ("0,61 * * * *", "minute", 2),
    ("0 22-25 * * *", "hour", 5),
    ("0 0 * 1-13/2 *", "month", 8),
    # step 0 (and steps that are not numbers)
    ("*/0 * * * *", "minute", 2),
    ("0 */0 * * *", "hour", 4),
    ("0 0 1-31/0 * *", "day-of-month", 9),
    ("0 0 * * */0", "day-of-week", 10),
    ("*/x * * * *", "minute", 2),
    # bad names
    ("0 0 * FOO *", "month", 6),
    ("0 0 * * FUN", "day-of-week", 8),
    ("0 0 * * MON-FUN", "day-of-week", 12),
    ("0 0 * * JAN", "day-of-week", 8),
    ("0 0 * MON *", "month", 6),
    ("0 0 JAN * *", "day-of-month", 4),
    ("MON * * * *", "minute", 0),
    # L, W, # in the wrong place or out of range
    ("0 0 * * 5#6", "day-of-week", 10),
    ("0 0 * * 5#0", "day-of-week", 10),
    ("0 0 * * 8#1", "day-of-week", 8),
    ("0 0 32W * *", "day-of-month", 4),
    ("0 0 0W * *", "day-of-month", 4),
    ("L * * * *", "minute", 0),
    ("0 L * * *", "hour", 2),
    ("0 0 * L *", "month", 6),
    ("0 0 * * 9L", "day-of-week", 8),
    ("0 0 * * FUNL", "day-of-week", 8),
    ("0 0 * * */2L", "day-of-week", 8),
    # "?" is for the day fields only (as in croniter, Quartz and most libraries)
    ("? * * * *", "minute", 0),
    ("0 ? * * *", "hour", 2),
    ("0 0 * ? *", "month", 6),
    ("? 0 0 * * *", "second", 0),
    ("0 0 5#2 * *", "day-of-month", 4),
    # syntax
    ("0 0 1- * *", "day-of-month", 6),  # the missing value
    ("0 0 -1 * *", "day-of-month", 4),
    ("- * * * *", "minute", 0),  # a lone "-"
    ("0 0 * * -", "day-of-week", 8),
    ("0 0 -L * *", "day-of-month", 4),
    ("0 0 1,,2 * *", "day-of-month", 6),  # the empty item
    ("0 0 ,1 * *", "day-of-month", 4),
    ("0 0 1-2-3 * *", "day-of-month", 6),
    ("0 0 1/2/3 * *", "day-of-month", 4),
    ("** * * * *", "minute", 0),
    ("0 0 * * 1.5", "day-of-week", 8),
    # unknown macro, or a macro with more
    ("@fortnightly", "expression", 0),
    ("@", "expression", 0),
    ("@daily 0", "expression", 7),
    # empty and blank
    ("", "expression", 0),
    ("   ", "expression", None),
    # garbage bytes and unicode
    ("0 0 * * \x00", "day-of-week", 8),
    ("\x00 * * * *", "minute", 0),
    ("\uff10 \uff10 * * *", "minute", 0),  # fullwidth digits are not digits here
    ("0 0 * * MÖN", "day-of-week", 8),
    ("💥 * * * *", "minute", 0),
    ("0 0 * * \u0661", "day-of-week", 8),  # Arabic-Indic digit one
    ("0 0 * * *\ufffd", "day-of-week", 8),
]


def _assert_invalid(
    error: InvalidJobError, field: str | None, position: int | None, expression: str
) -> None:
    assert isinstance(error, AnarchonError)
    assert isinstance(error, ValueError)
    assert error.code == CODE
    assert str(error).startswith(f"{CODE}: ")
    if field is not None:
        assert error.field == field, (expression, error)
    if position is not None:
        assert error.position == position, (expression, error)
        assert 0 <= error.position <= len(expression)


@pytest.mark.parametrize(("expression", "field", "position"), BAD_EXPRESSIONS)
def test_bad_expression(expression: str, field: str | None, position: int | None) -> None:
    with pytest.raises(InvalidJobError) as info:
        Cron(expression)
    _assert_invalid(info.value, field, position, expression)


@pytest.mark.parametrize(
    ("expression", "field", "words"),
    [
        ("- * * * *", "minute", "a lone `-` in the minute field"),
        ("0 0 * * -#2", "day-of-week", "a lone `-`"),
        ("0 0 -1 * *", "day-of-month", "negative value `-1`"),
        ("0 0 * * -FRI", "day-of-week", "range `-FRI` has no start value"),
    ],
)
def test_a_leading_dash_says_what_is_wrong(expression: str, field: str, words: str) -> None:
    with pytest.raises(InvalidJobError) as info:
        Cron(expression)
    assert info.value.field == field
    assert words in info.value.message
    if "lone" in words:
        assert "negative" not in info.value.message


@pytest.mark.parametrize("field_index", [0, 1, 3])
def test_question_mark_outside_the_day_fields_names_the_field(field_index: int) -> None:
    fields = ["0", "0", "1", "1", "*"]
    fields[field_index] = "?"
    expression = " ".join(fields)
    name = ["minute", "hour", "day-of-month", "month", "day-of-week"][field_index]
    with pytest.raises(InvalidJobError) as info:
        Cron(expression)
    assert info.value.field == name
    assert info.value.position == 2 * field_index
    assert f"not in the {name} field" in info.value.message
    assert "day-of-month and day-of-week" in info.value.message


def _next(expression: str, n: int = 6) -> list[int]:
    cron, cursor, out = Cron(expression), 1_767_225_600_000, []  # 2026-01-01
    for _ in range(n):
        slot = cron.next_after(cursor)
        assert slot is not None
        out.append(slot)
        cursor = slot
    return out


@pytest.mark.parametrize(
    ("named", "numbered"),
    [
        ("0 0 * * FRIL", "0 0 * * 5L"),
        ("0 0 * * LFRI", "0 0 * * L5"),
        ("0 0 * * fril", "0 0 * * 5L"),
        ("0 0 * * SUNL", "0 0 * * 0L"),
        ("0 0 * * SUNL", "0 0 * * 7L"),
        ("0 0 * * MON-FRIL", "0 0 * * 1L,2L,3L,4L,5L"),
        ("0 0 * * 1-5L", "0 0 * * 1L,2L,3L,4L,5L"),
        ("0 0 * * L1-5", "0 0 * * 1L,2L,3L,4L,5L"),
        ("0 0 * * FRI-MONL", "0 0 * * 5L,6L,0L,1L"),
    ],
)
def test_weekday_names_and_ranges_take_l(named: str, numbered: str) -> None:
    assert _next(named, 12) == _next(numbered, 12)


def test_mon_to_fril_is_the_last_week_day_by_day() -> None:
    # January 2026 ends on a Saturday: the last Monday-Friday are the 26th-30th.
    days = [s // 86_400_000 - 20_453 for s in _next("0 0 * * MON-FRIL", 5)]
    assert days == [26, 27, 28, 29, 30]


@pytest.mark.parametrize(
    ("duplicated", "plain"),
    [
        ("0,0 * * * *", "0 * * * *"),
        ("5,1-10,5 * * * *", "1-10 * * * *"),
        ("0 0 * * 0,7", "0 0 * * 0"),
        ("0 0 * * 0,7,SUN", "0 0 * * 0"),
        ("0 0 1,1,L,31 * *", "0 0 1,L * *"),
        ("0 0 * * 5L,FRIL,L5", "0 0 * * 5L"),
    ],
)
def test_duplicate_values_are_one_value(duplicated: str, plain: str) -> None:
    """A list is a set: the same value twice (or 0 and 7, both Sunday) fires once."""
    assert _next(duplicated, 40) == _next(plain, 40)


def test_seventh_field_names_the_year() -> None:
    with pytest.raises(InvalidJobError) as info:
        Cron("0 0 12 * * ? 2027")
    assert "year" in info.value.message.lower()


@pytest.mark.parametrize("token", ["H", "R"])
def test_hash_and_random_are_named(token: str) -> None:
    with pytest.raises(InvalidJobError) as info:
        Cron(f"{token} * * * *")
    assert repr(token) in info.value.message or f"{token}" in info.value.message


@pytest.mark.parametrize(
    "tz", ["Mars/Olympus_Mons", "", "utc+1", "America/New York", "../etc/passwd", "\x00"]
)
def test_unknown_time_zone(tz: str) -> None:
    with pytest.raises(InvalidJobError) as info:
        Cron("0 3 * * *", tz=tz)
    assert info.value.code == CODE
    assert info.value.field == "tz"


def test_non_string_inputs() -> None:
    with pytest.raises(InvalidJobError) as info:
        Cron(5)  # type: ignore[arg-type]
    assert info.value.code == CODE
    with pytest.raises(InvalidJobError) as info:
        Cron("0 3 * * *", tz=None)  # type: ignore[arg-type]
    assert info.value.field == "tz"


@pytest.mark.parametrize(
    "interval",
    [
        "0s",
        "0ms",
        "-5s",
        "10 parsecs",
        "",
        "5",
        "s",
        "1.5ms",
        "10s!",
        0,
        0.0,
        -5,
        0.0001,
        math.nan,
        math.inf,
        -math.inf,
        True,
        False,
        None,
        [10],
        timedelta(0),
        timedelta(seconds=-1),
        timedelta(microseconds=1),
        10**17,  # 10**20 ms does not fit the engine's 64-bit milliseconds
        10**400,  # too large for a float: still InvalidJobError, not OverflowError
        -(10**400),
        pytest.param(10**5000, id="10**5000"),  # too long for repr() (Python's 4300-digit limit)
        "1" * 400 + "ms",
        "9999999999999999h",
    ],
)
def test_bad_interval(interval: object) -> None:
    with pytest.raises(InvalidJobError) as info:
        Every(interval)  # type: ignore[arg-type]
    assert info.value.code == CODE


@pytest.mark.parametrize(
    ("interval", "position"), [("10 parsecs", 0), ("5m3x", 2), ("1h30", 2), ("-5s", 0)]
)
def test_bad_interval_text_position(interval: str, position: int) -> None:
    with pytest.raises(InvalidJobError) as info:
        Every(interval)
    assert info.value.field == "interval"
    assert info.value.position == position


@pytest.mark.parametrize(
    "offset",
    ["-1s", -1, math.nan, True, "x", 10**400, pytest.param(-(10**5000), id="-10**5000"), 2**62],
)
def test_bad_offset(offset: object) -> None:
    with pytest.raises(InvalidJobError) as info:
        Every("10s", offset=offset)  # type: ignore[arg-type]
    assert info.value.code == CODE


@pytest.mark.parametrize("zero", [0, 0.0, "0", "00", "0.0", " 0 ", "0s", "0ms", timedelta(0)])
def test_zero_jitter_in_every_spelling(zero: Duration) -> None:
    """A bare ``"0"`` is zero like ``0`` and ``"0s"``; any other bare number needs a unit."""
    assert to_ms(zero, what="jitter") == 0
    with pytest.raises(InvalidJobError) as info:
        to_ms("5", what="jitter")
    assert info.value.field == "jitter"
    with pytest.raises(InvalidJobError):
        Every("0")


CRON_ALPHABET = st.sampled_from(
    list("0123456789") * 3
    + list("*/,-#?LW@ ")
    + ["MON", "FRI", "JAN", "DEC", "H", "R", "L", "W", "@daily", "@hourly", " ", "  "]
    + ["99999999999999999999", "-1", "\t", "\x00", "é", "💥", "\u00a0", "0x1F"]
)


def _parse_or_invalid(expression: str, tz: str = "UTC") -> Cron | None:
    """Either a Cron or InvalidJobError; anything else (PanicException) fails the test."""
    refused: InvalidJobError | None = None
    try:
        return Cron(expression, tz=tz)
    except InvalidJobError as error:
        refused = error
    assert refused is not None
    assert refused.code == CODE
    if refused.position is not None:
        assert 0 <= refused.position <= len(expression)
    return None


def _exercise(cron: Cron) -> None:
    for start in (0, 1_700_000_000_123, 4_102_444_800_000, -86_400_000):
        slot = cron.next_after(start)
        assert slot is None or slot > start
    assert cron.period_ms > 0


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_random_text_parses_or_is_refused(expression: str) -> None:
    cron = _parse_or_invalid(expression)
    if cron is not None:
        _exercise(cron)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CRON_ALPHABET, max_size=24).map("".join))
def test_cron_like_junk_parses_or_is_refused(expression: str) -> None:
    cron = _parse_or_invalid(expression)
    if cron is not None:
        _exercise(cron)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_random_time_zone_parses_or_is_refused(tz: str) -> None:
    refused: InvalidJobError | None = None
    try:
        cron = Cron("0 3 * * *", tz=tz)
    except InvalidJobError as error:
        refused = error
    else:
        _exercise(cron)
    assert refused is None or refused.field == "tz"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=12),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**20), 10**20),
        st.timedeltas(),
    )
)
def test_random_interval_parses_or_is_refused(interval: Duration) -> None:
    refused: InvalidJobError | None = None
    try:
        every = Every(interval)
    except InvalidJobError as error:
        refused = error
    else:
        assert every.interval_ms > 0
        slot = every.next_after(0)
        assert slot is None or slot > 0
    assert refused is None or refused.code == CODE


@pytest.mark.parametrize("ms", [I64_MIN, I64_MIN + 1, I64_MAX, I64_MAX - 1, -1, 0])
@pytest.mark.parametrize(
    ("expression", "tz"),
    [
        ("* * * * *", "UTC"),
        ("*/10 * * * * *", "Europe/Athens"),
        ("0 0 29 2 *", "America/New_York"),
        ("0 0 30 2 *", "UTC"),
        ("30 2 * * 0", "America/New_York"),
        ("0 0 * * 5L", "Australia/Lord_Howe"),
    ],
)
def test_extreme_instants_do_not_panic(expression: str, tz: str, ms: int) -> None:
    cron = Cron(expression, tz=tz)
    slot = cron.next_after(ms)
    assert slot is None or slot > ms
    end = min(ms + 10**9, I64_MAX)
    assert all(ms <= s < end for s in cron.slots(ms, end, limit=3))
    latest = cron._compiled.latest_between(max(ms - 10**9, I64_MIN), ms)
    assert latest is None or latest <= ms
