"""Differential test: ``anarchon.Cron(expr, tz).next_after`` against croniter (docs/engine.md).

For generated expressions, zones and start instants, the next slots of anarchon
are compared with croniter's, several consecutive slots per example, as epoch
milliseconds. croniter is the reference. Where docs/engine.md deliberately differs
from croniter, a NAMED RULE decides, from the expression and the instants, that
the case is one of those differences and asserts anarchon's semantics instead;
the comparison is never loosened. Any other difference is a bug in the engine.

Named rules (also listed in docs/engine.md). Rules on the expression rewrite
what croniter evaluates; rules on instants explain one slot at a divergence.

- ``fold-once``: a fixed local time (hour field not ``*``/``*/n``) inside a
  fall-back overlap fires once, at its first occurrence; croniter fires at both.
  Asserted: anarchon fires at the first occurrence; croniter's second one is
  dropped from its sequence.
- ``step-hour-gap``: an hour field ``*/n`` is a wildcard hour and follows real
  time, so wall times inside a spring-forward gap are skipped; croniter treats
  only a literal ``*`` that way and moves such a time to the end of the gap.
  Asserted: croniter's slot lies within a minute after a gap's end and its
  wall time does not match the expression; anarchon does not fire there.
- ``gap-keeps-seconds``: a fixed time with seconds inside a gap fires at the
  first instant after the gap (03:00:00); croniter moves it minute by minute and
  keeps its seconds (03:00:30). Asserted: anarchon's slot is the gap's end, a
  wall time of the gap matches, croniter's slot is less than a minute later.
- ``full-hour-list``: an hour field listing all 24 hours without being ``*`` or
  ``*/n`` (``0-23``) is a fixed hour (docs/engine.md, "DST rules"): a matching time in a gap fires
  at the gap's end; croniter reads the list as ``*`` and skips it. Asserted:
  anarchon's slot is the gap's end and a wall time of the gap matches. (In a
  fold, ``fold-once`` covers the same fields.)
- ``or-special-day``: day-of-month and day-of-week combine with OR when neither
  is a bare ``*``, also when one of them uses ``W``, ``#`` or ``L`` (last
  weekday); croniter then intersects the two, or gives up. Asserted: anarchon
  equals the union of croniter's day-of-month-only and day-of-week-only
  schedules.
- ``or-star-collapse``: croniter turns a day field that lists every value
  (``1-31``, ``0-6``) into ``*`` when the other field's text contains a ``*``
  (``*/2``), which drops the OR; docs/engine.md counts ``*/2`` as restricted and
  combines with OR. Asserted as for ``or-special-day`` (the union).
- ``l-miscount``: a day-of-month list of 30 days plus ``L`` (``2-31,L``) is
  those days; croniter counts ``L`` as a day value, takes the list for all 31
  and reads it as ``*`` when the day-of-week text has a ``*`` (day 1 fires). A
  croniter defect. Asserted: anarchon equals the union of croniter's schedules
  for the 30 days and for ``L``.
- ``fold-second-pass``: a wildcard-hour expression follows real time, so in a
  fall-back overlap the repeated wall times fire again in the second pass;
  croniter handles one-hour overlaps so, but in Lord_Howe's 30-minute overlap
  it skips repeated wall times when it starts inside the first pass
  (``0-30 * * * *`` from 01:40+11:00 skips 01:30+10:30). Asserted, for
  overlaps shorter than an hour only: anarchon's slot is the second occurrence
  of a matching wall time.
- ``equal-range``: ``a-a`` is the single value ``a``; croniter reads an equal
  range as the whole cycle (``5-5`` = every hour). A decision of anarchon's,
  recorded in docs/engine.md. Asserted: anarchon equals croniter given ``a`` instead of ``a-a``.

Inputs given to croniter: six fields go with ``second_at_beginning=True``;
``5L`` (last Friday, docs/engine.md) is spelled ``L5`` for croniter, which knows only
that spelling; a day field croniter refuses because it mixes ``W`` days or
``#``/``L`` weekdays with other items in a list (``1,15W``, ``1,5#2``) is
given as one expression per part, whose slots are united (a list is the union
of its items; see ``croniter_inputs``). Not generated: ``a/n`` in day-of-week
(croniter and anarchon read it as ``a-6/n``, cron's range is 0-7), ``LW``,
``W15`` and names with ``L`` (left out of this comparison).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from anarchon import Cron
from croniter import croniter
from croniter.croniter import CroniterBadDateError
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

SLOTS_PER_EXAMPLE = 5
"""Consecutive slots compared per generated example."""

MAX_SKIPPED = 4_000
"""Slots a rule may explain in one example (a one-hour fold of a per-second job: 3,600)."""

MAX_EXAMPLES = int(os.environ.get("ANARCHON_CRON_EXAMPLES", "1000"))
"""Sized so that this file runs in about 20 s on 2 cores (debug build; CI is near its 30 min).

``ANARCHON_CRON_EXAMPLES=50000 uv run pytest packages/anarchon/tests/test_cron_differential.py``
searches deeper (hypothesis also keeps its failing examples in ``.hypothesis/``).
"""

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
END_2100_MS = 4_102_444_800_000
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

DST_ZONES = ("America/New_York", "Europe/Athens", "Australia/Lord_Howe", "Europe/London")
OTHER_ZONES = (
    "UTC",
    "America/Santiago",  # transitions at midnight
    "Pacific/Chatham",  # +12:45/+13:45, transitions at 02:45
    "Asia/Kolkata",
    "America/St_Johns",
)
ALL_ZONES = DST_ZONES + OTHER_ZONES

MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DOW_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


# --------------------------------------------------------------------------- time helpers


def to_ms(dt: datetime) -> int:
    """Exact epoch ms of an aware datetime."""
    return (dt - EPOCH) // timedelta(milliseconds=1)


def from_ms(ms: int, tz: str) -> datetime:
    """The aware local datetime of an epoch ms (exact, fold set)."""
    return (EPOCH + timedelta(milliseconds=ms)).astimezone(ZoneInfo(tz))


def show(ms: int | None, tz: str) -> str:
    return "None" if ms is None else f"{ms} ({from_ms(ms, tz).isoformat()})"


def wall_occurrences(tz: str, ms: int) -> list[int]:
    """Every instant whose wall time in ``tz`` equals the wall time of ``ms`` (1 or 2)."""
    wall = from_ms(ms, tz).replace(tzinfo=None)
    zone = ZoneInfo(tz)
    out = set()
    for fold in (0, 1):
        candidate = wall.replace(tzinfo=zone, fold=fold)
        # a wall time that exists maps back to itself
        if candidate.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None) == wall:
            out.add(to_ms(candidate))
    return sorted(out)


def is_gap_end(tz: str, ms: int) -> bool:
    """True if the UTC offset of ``tz`` jumps forward exactly at ``ms``."""
    before = from_ms(ms - 1, tz).utcoffset()
    after = from_ms(ms, tz).utcoffset()
    assert before is not None
    assert after is not None
    return after > before


@functools.cache
def transitions(tz: str) -> list[int]:
    """The UTC-offset changes of ``tz`` in 1970-2100, in epoch ms (to the second)."""
    zone = ZoneInfo(tz)

    def offset(ms: int) -> timedelta | None:
        return (EPOCH + timedelta(milliseconds=ms)).astimezone(zone).utcoffset()

    out = []
    step = DAY
    ms = 0
    previous = offset(0)
    while ms < END_2100_MS + 400 * DAY:
        current = offset(ms + step)
        if current != previous:
            lo, hi = ms, ms + step  # offset(lo) == previous, offset(hi) == current
            while hi - lo > SECOND:
                mid = (lo + hi) // 2
                if offset(mid) == previous:
                    lo = mid
                else:
                    hi = mid
            out.append(hi - hi % SECOND)
            previous = current
        ms += step
    return out


# --------------------------------------------------------------------------- a small model


@dataclass(frozen=True)
class Model:
    """What the rules need to know about an expression (docs/engine.md syntax)."""

    text: str
    fields: tuple[str, str, str, str, str, str]  # second, minute, hour, dom, month, dow
    six: bool  # written with six fields (seconds first)
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    dom_values: frozenset[int]
    dom_special: bool  # L or W
    dow_values: frozenset[int]
    dow_special: bool  # # or L

    @property
    def hour_is_wildcard(self) -> bool:
        """docs/engine.md: a wildcard hour is ``*`` or ``*/n``; it follows real time."""
        return re.fullmatch(r"\*(/\d+)?", self.fields[2]) is not None

    @property
    def hour_is_step_wildcard(self) -> bool:
        """``*/n`` with n >= 2: a wildcard for docs/engine.md, a fixed list for croniter."""
        m = re.fullmatch(r"\*/(\d+)", self.fields[2])
        return m is not None and int(m.group(1)) >= 2

    @property
    def dom_bare(self) -> bool:
        return self.fields[3] in ("*", "?")

    @property
    def dow_bare(self) -> bool:
        return self.fields[5] in ("*", "?")

    def time_matches(self, wall: datetime) -> bool:
        return (
            wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.microsecond == 0
        )

    def with_day_fields(self, dom: str, dow: str) -> str:
        """The expression with day-of-month and day-of-week replaced (same shape)."""
        second, minute, hour, _, month, _ = self.fields
        head = [second] if self.six else []
        return " ".join([*head, minute, hour, dom, month, dow])


def _name_value(token: str, names: tuple[str, ...], base: int) -> int:
    if token.isdigit():
        return int(token)
    return names.index(token.upper()) + base


def _expand(text: str, lo: int, hi: int, names: tuple[str, ...] = (), base: int = 0) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        body, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if body in ("*", "?"):
            first, last = lo, hi
        elif "-" in body:
            a, b = body.split("-")
            first, last = _name_value(a, names, base), _name_value(b, names, base)
        else:
            first = _name_value(body, names, base)
            last = hi if step_text else first
        out.update(range(first, last + 1, step))
    return out


def parse_model(expression: str) -> Model:
    """Parse what the generator writes (and the explicit examples use)."""
    text = MACROS.get(expression.strip(), expression)
    parts = text.split()
    six = len(parts) == 6
    if not six:
        parts = ["0", *parts]
    second, minute, hour, dom, month, dow = parts
    dom_items = dom.split(",")
    dom_plain = [i for i in dom_items if i != "L" and not i.endswith("W")]
    dow_items = dow.split(",")
    dow_plain = [i for i in dow_items if "#" not in i and "L" not in i]
    return Model(
        text=expression,
        fields=(second, minute, hour, dom, month, dow),
        six=six,
        seconds=frozenset(_expand(second, 0, 59)),
        minutes=frozenset(_expand(minute, 0, 59)),
        hours=frozenset(_expand(hour, 0, 23)),
        dom_values=frozenset(_expand(",".join(dom_plain), 1, 31) if dom_plain else ()),
        dom_special=len(dom_plain) < len(dom_items),
        dow_values=frozenset(
            d % 7 for d in (_expand(",".join(dow_plain), 0, 7, DOW_NAMES) if dow_plain else ())
        ),
        dow_special=len(dow_plain) < len(dow_items),
    )


# --------------------------------------------------------------------------- croniter side


def croniter_spelling(expression: str) -> tuple[str, dict[str, Any]]:
    """The same schedule written for croniter."""
    text = expression.strip()
    parts = text.split()
    kwargs: dict[str, Any] = {}
    if len(parts) == 6:
        kwargs["second_at_beginning"] = True
    if len(parts) in (5, 6):
        dow = ",".join(_croniter_last_weekday(item) for item in parts[-1].split(","))
        text = " ".join([*parts[:-1], dow])
    return text, kwargs


def _croniter_last_weekday(item: str) -> str:
    """croniter knows the last weekday only as ``L<digit>``: ``5L``/``FRIL``/``LFRI`` -> ``L5``."""
    m = re.fullmatch(r"(\d|[A-Z]{3})L|L(\d|[A-Z]{3})", item)
    if m is None:
        return item
    day = m.group(1) or m.group(2)
    return f"L{day if day.isdigit() else DOW_NAMES.index(day)}"


def croniter_inputs(expression: str) -> list[str]:
    """Expressions croniter accepts whose slots together are those of ``expression``.

    croniter refuses a ``W`` day in a list (``1,15W``) and plain weekdays mixed
    with ``#``/``L`` ones (``1,5#2``). A list is the union of its items, so such
    a field is split (``1`` and ``15W``; ``1`` and ``5#2``) when the other day
    field is a bare ``*`` (the ``or-*`` rules split first when it is not).
    """
    parts = expression.split()
    if len(parts) not in (5, 6):
        return [expression]
    dom_at, dow_at = len(parts) - 3, len(parts) - 1
    dom_items, dow_items = parts[dom_at].split(","), parts[dow_at].split(",")
    groups: list[tuple[int, list[str]]] = []
    if len(dom_items) > 1 and any(i.endswith("W") for i in dom_items):
        w_items = [i for i in dom_items if i.endswith("W")]
        rest = [i for i in dom_items if not i.endswith("W")]
        groups.append((dom_at, w_items + ([",".join(rest)] if rest else [])))
    special = [i for i in dow_items if "#" in i or "L" in i]
    if special and len(special) < len(dow_items):
        plain = [i for i in dow_items if i not in special]
        groups.append((dow_at, [",".join(special), ",".join(plain)]))
    out = [parts]
    for index, pieces in groups:
        out = [[*p[:index], piece, *p[index + 1 :]] for p in out for piece in pieces]
    return [" ".join(p) for p in out]


def croniter_slots(expression: str, tz: str, start_ms: int) -> Iterator[int]:
    """croniter's slots strictly after ``start_ms``, until it finds no more."""
    text, kwargs = croniter_spelling(expression)
    it = croniter(text, from_ms(start_ms, tz), **kwargs)
    while True:
        try:
            ts = it.get_next(float)
        except CroniterBadDateError:
            return
        yield round(ts * 1000)


def croniter_wall_next(expression: str, wall: datetime) -> datetime | None:
    """croniter's first matching wall-clock time after the naive ``wall`` (no zone, no DST)."""
    text, kwargs = croniter_spelling(expression)
    try:
        result = croniter(text, wall, **kwargs).get_next(datetime)
    except CroniterBadDateError:
        return None
    assert isinstance(result, datetime)
    return result


def union(*streams: Iterator[int]) -> Iterator[int]:
    last = None
    for value in heapq.merge(*streams):
        if value != last:
            yield value
            last = value


# --------------------------------------------------------------------------- named rules


@dataclass
class Case:
    expression: str
    tz: str
    start_ms: int
    model: Model
    cron: Cron
    # the expressions croniter evaluates; the reference is the union of their slots
    reference: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)

    def reference_slots(self) -> Iterator[int]:
        return union(*(croniter_slots(e, self.tz, self.start_ms) for e in self.reference))

    def gap_has_match(self, gap_end: int) -> bool:
        """Does a wall time inside the spring-forward gap that ends at ``gap_end`` match?"""
        before = from_ms(gap_end - 1, self.tz).utcoffset()
        after = from_ms(gap_end, self.tz).utcoffset()
        assert before is not None
        assert after is not None
        gap_start = (EPOCH + timedelta(milliseconds=gap_end) + before).replace(tzinfo=None)
        gap_stop = (EPOCH + timedelta(milliseconds=gap_end) + after).replace(tzinfo=None)
        found = [croniter_wall_next(e, gap_start - timedelta(seconds=1)) for e in self.reference]
        return any(f is not None and f < gap_stop for f in found)


def recent_gap_end(tz: str, ms: int, within: int = MINUTE) -> int | None:
    """The spring-forward transition T with ``T <= ms < T + within``, if any."""
    lo, hi = ms - within, ms
    before = from_ms(lo, tz).utcoffset()
    after = from_ms(hi, tz).utcoffset()
    assert before is not None
    assert after is not None
    if not after > before:
        return None
    while hi - lo > 1:  # offset(lo) == before, offset(hi) == after
        mid = (lo + hi) // 2
        if from_ms(mid, tz).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return hi


ExpressionRule = Callable[[Case, str], "list[str] | None"]
InstantRule = Callable[[Case, "int | None", "int | None"], "str | None"]

EXPRESSION_RULES: dict[str, ExpressionRule] = {}
INSTANT_RULES: dict[str, InstantRule] = {}


def expression_rule(name: str) -> Callable[[ExpressionRule], ExpressionRule]:
    """A rule decided by the expression: it rewrites what croniter evaluates.

    Called with each reference expression; returns its replacement(s) (whose
    slots are united), or None when the rule does not apply.
    """

    def register(fn: ExpressionRule) -> ExpressionRule:
        EXPRESSION_RULES[name] = fn
        return fn

    return register


def instant_rule(name: str) -> Callable[[InstantRule], InstantRule]:
    """A rule decided at a divergence: returns whose slot it explains.

    ``"theirs"``: croniter's slot is not a slot of anarchon; ``"ours"``:
    anarchon's slot is not one of croniter's; ``"both"``: the two slots are
    the same firing at different instants. The rule asserts anarchon's
    semantics before it answers.
    """

    def register(fn: InstantRule) -> InstantRule:
        INSTANT_RULES[name] = fn
        return fn

    return register


_FIELD_NAMES: tuple[tuple[tuple[str, ...], int], ...] = (
    ((), 0),  # second
    ((), 0),  # minute
    ((), 0),  # hour
    ((), 0),  # day-of-month
    (MONTH_NAMES, 1),
    (DOW_NAMES, 0),
)


def _single_value_ranges(expression: str) -> str:
    """``expression`` with every range whose two ends are one value (``5-5``,
    ``8-AUG``) written as that value."""
    parts = expression.split()
    offset = 0 if len(parts) == 6 else 1
    out = []
    for index, text in enumerate(parts):
        names, base = _FIELD_NAMES[index + offset]
        items = []
        for item in text.split(","):
            m = re.fullmatch(r"(\d+|[A-Z]{3})-(\d+|[A-Z]{3})", item)
            if m and _name_value(m.group(1), names, base) == _name_value(m.group(2), names, base):
                item = m.group(1)
            items.append(item)
        out.append(",".join(items))
    return " ".join(out)


@expression_rule("equal-range")
def rule_equal_range(case: Case, expression: str) -> list[str] | None:
    rewritten = _single_value_ranges(expression)
    return None if rewritten == expression else [rewritten]


def _or_split(expression: str) -> list[str]:
    m = parse_model(expression)
    return [m.with_day_fields(m.fields[3], "*"), m.with_day_fields("*", m.fields[5])]


@expression_rule("or-special-day")
def rule_or_special_day(case: Case, expression: str) -> list[str] | None:
    m = parse_model(expression)
    if m.dom_bare or m.dow_bare or not (m.dom_special or m.dow_special):
        return None
    return _or_split(expression)


@expression_rule("or-star-collapse")
def rule_or_star_collapse(case: Case, expression: str) -> list[str] | None:
    m = parse_model(expression)
    if m.dom_bare or m.dow_bare or m.dom_special or m.dow_special:
        return None
    dom_all = m.dom_values == frozenset(range(1, 32)) and "*" in m.fields[5]
    dow_all = m.dow_values == frozenset(range(7)) and "*" in m.fields[3]
    if not (dom_all or dow_all):
        return None
    return _or_split(expression)


@expression_rule("l-miscount")
def rule_l_miscount(case: Case, expression: str) -> list[str] | None:
    m = parse_model(expression)
    items = m.fields[3].split(",")
    if "L" not in items or len(m.dom_values) != 30 or "*" not in m.fields[5]:
        return None
    # croniter counts L as a 31st value and reads the list as `*`: give it apart
    rest = ",".join(i for i in items if i != "L")
    return [m.with_day_fields(rest, m.fields[5]), m.with_day_fields("L", m.fields[5])]


@instant_rule("fold-once")
def rule_fold_once(case: Case, ours: int | None, theirs: int | None) -> str | None:
    if theirs is None or (ours is not None and ours < theirs):
        return None
    if case.model.hour_is_wildcard:
        return None
    occurrences = wall_occurrences(case.tz, theirs)
    if len(occurrences) != 2 or theirs != occurrences[1]:
        return None
    first = occurrences[0]
    # anarchon's semantics: the wall time fires once, at its first occurrence
    if first > case.start_ms:
        assert case.cron.next_after(first - 1) == first, (
            f"fold-once: {case.expression!r} in {case.tz} should fire at the first "
            f"occurrence {show(first, case.tz)}"
        )
    return "theirs"


@instant_rule("step-hour-gap")
def rule_step_hour_gap(case: Case, ours: int | None, theirs: int | None) -> str | None:
    if theirs is None or (ours is not None and ours < theirs):
        return None
    if not case.model.hour_is_step_wildcard:
        return None
    gap_end = recent_gap_end(case.tz, theirs)
    if gap_end is None:
        return None
    # croniter's slot is where it moved a wall time of the gap; not a real slot
    assert not case.model.time_matches(from_ms(theirs, case.tz)), (
        f"step-hour-gap: {show(theirs, case.tz)} is a real slot of {case.expression!r}"
    )
    return "theirs"


@instant_rule("fold-second-pass")
def rule_fold_second_pass(case: Case, ours: int | None, theirs: int | None) -> str | None:
    if ours is None or (theirs is not None and theirs < ours):
        return None
    if not case.model.hour_is_wildcard:
        return None
    occurrences = wall_occurrences(case.tz, ours)
    if len(occurrences) != 2 or ours != occurrences[1]:
        return None
    if occurrences[1] - occurrences[0] >= HOUR:
        return None  # croniter handles one-hour overlaps right: compare strictly there
    # real time: the wall time comes round again after the fall-back, and matches
    assert case.model.time_matches(from_ms(ours, case.tz)), (
        f"fold-second-pass: {show(ours, case.tz)} does not match {case.expression!r}"
    )
    return "ours"


@instant_rule("gap-keeps-seconds")
def rule_gap_keeps_seconds(case: Case, ours: int | None, theirs: int | None) -> str | None:
    if ours is None or (theirs is not None and theirs < ours):
        return None
    if case.model.hour_is_wildcard or not is_gap_end(case.tz, ours):
        return None
    if theirs is None or not ours < theirs < ours + MINUTE:
        return None
    if from_ms(theirs, case.tz).second == 0:
        return None
    # anarchon fires the gap's wall times at the first instant after the gap
    assert case.gap_has_match(ours), "gap-keeps-seconds: no wall time of the gap matches"
    if case.model.time_matches(from_ms(theirs, case.tz)):
        return "ours"  # croniter's slot is also a real one, anarchon fires it next
    return "both"


@instant_rule("full-hour-list")
def rule_full_hour_list(case: Case, ours: int | None, theirs: int | None) -> str | None:
    if ours is None or (theirs is not None and theirs < ours):
        return None
    m = case.model
    if m.hour_is_wildcard or m.hours != frozenset(range(24)):
        return None
    if not is_gap_end(case.tz, ours):
        return None
    # a fixed hour (docs/engine.md: not * or */n) fires the gap's wall times after the gap
    assert case.gap_has_match(ours), "full-hour-list: no wall time of the gap matches"
    return "ours"


# --------------------------------------------------------------------------- the comparison


class DivergenceError(AssertionError):
    pass


def compare(expression: str, tz: str, start_ms: int, count: int = SLOTS_PER_EXAMPLE) -> list[str]:
    """Compare ``count`` slots after ``start_ms``; return the rules that applied."""
    cron = Cron(expression, tz=tz)
    case = Case(expression, tz, start_ms, parse_model(expression), cron)
    case.reference = [MACROS.get(expression, expression)]
    for name, expr_rule in EXPRESSION_RULES.items():
        rewritten: list[str] = []
        for text in case.reference:
            replaced = expr_rule(case, text)
            rewritten.extend([text] if replaced is None else replaced)
        if rewritten != case.reference:
            case.applied.append(name)
            case.reference = rewritten
    case.reference = [piece for text in case.reference for piece in croniter_inputs(text)]
    reference = case.reference_slots()

    ours = cron.next_after(start_ms)
    theirs = next(reference, None)
    seen_ours: list[int | None] = []
    matched = 0
    # a fold of an hour holds 3,600 second-occurrence slots of a per-second job
    for _ in range(count + MAX_SKIPPED):
        if matched >= count or (ours is None and theirs is None):
            return case.applied
        if ours == theirs:
            assert ours is not None
            matched += 1
            seen_ours.append(ours)
            ours = cron.next_after(ours)
            theirs = next(reference, None)
            continue
        for name, inst_rule in INSTANT_RULES.items():
            side = inst_rule(case, ours, theirs)
            if side is None:
                continue
            case.applied.append(name)
            if side in ("theirs", "both"):
                theirs = next(reference, None)
            if side in ("ours", "both"):
                assert ours is not None
                seen_ours.append(ours)
                ours = cron.next_after(ours)
            break
        else:
            raise DivergenceError(
                f"anarchon and croniter differ (no named rule applies)\n"
                f"  expression: {expression!r}  tz: {tz!r}  start_ms: {start_ms} "
                f"({from_ms(start_ms, tz).isoformat()})\n"
                f"  croniter evaluated: {case.reference}\n"
                f"  agreed so far: {[show(s, tz) for s in seen_ours]}\n"
                f"  anarchon next: {show(ours, tz)}\n"
                f"  croniter next: {show(theirs, tz)}\n"
                f"  rules so far: {case.applied}"
            )
    raise AssertionError(f"rules kept skipping slots: {case.applied}")


# --------------------------------------------------------------------------- generators

HOT_HOURS = (0, 1, 2, 3, 4, 23)
HOT_DAYS = (1, 13, 15, 28, 29, 30, 31)
HOT_MONTHS = (2, 3, 4, 10, 11)


@st.composite
def plain_item(
    draw: st.DrawFn,
    lo: int,
    hi: int,
    names: tuple[str, ...] = (),
    base: int = 0,
    hot: tuple[int, ...] = (),
    start_step: bool = True,
) -> str:
    def value(low: int = lo, high: int = hi) -> int:
        use_hot = draw(st.booleans())
        if hot and use_hot:
            candidates = [h for h in hot if low <= h <= high]
            if candidates:
                return draw(st.sampled_from(candidates))
        return draw(st.integers(low, high))

    def spell(v: int) -> str:
        if names and 0 <= v - base < len(names) and draw(st.integers(0, 3)) == 0:
            return names[v - base]
        return str(v)

    kinds = ["value"] * 6 + ["range", "range", "range_step", "star_step", "star_step"]
    if start_step:
        kinds.append("start_step")
    kind = draw(st.sampled_from(kinds))
    if draw(st.integers(0, 24)) == 0:
        kind = "equal_range"
    if kind == "value":
        return spell(value())
    if kind == "equal_range":
        v = value()
        return f"{spell(v)}-{spell(v)}"
    if kind == "star_step":
        return f"*/{draw(st.integers(1, max(1, hi - lo)))}"
    if kind == "start_step":
        return f"{value()}/{draw(st.integers(1, max(1, hi - lo)))}"
    a = value(lo, hi - 1)
    b = value(a + 1, hi)
    text = f"{spell(a)}-{spell(b)}"
    if kind == "range_step":
        text += f"/{draw(st.integers(1, max(1, hi - lo)))}"
    return text


def plain_field(
    lo: int,
    hi: int,
    names: tuple[str, ...] = (),
    base: int = 0,
    hot: tuple[int, ...] = (),
    star_weight: int = 3,
    start_step: bool = True,
) -> st.SearchStrategy[str]:
    items = st.lists(plain_item(lo, hi, names, base, hot, start_step), min_size=1, max_size=3).map(
        ",".join
    )
    return st.one_of(*([st.just("*")] * star_weight), items, items)


@st.composite
def dom_field(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind <= 3:
        return "*"
    if kind == 4:
        return "?"
    w_day = f"{draw(st.sampled_from(HOT_DAYS) | st.integers(1, 31))}W"
    plain = draw(plain_field(1, 31, hot=HOT_DAYS, star_weight=0))
    if kind == 5:
        return draw(st.sampled_from([w_day, w_day, f"{plain},{w_day}", f"{w_day},L"]))
    if kind == 6:
        return draw(st.sampled_from(["L", f"{plain},L", f"L,{plain}"]))
    return plain


@st.composite
def dow_field(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind <= 3:
        return "*"
    if kind == 4:
        return "?"
    # croniter reads "a/n" as a-6/n in this field, cron's range is 0-7: not generated
    plain = draw(plain_field(0, 7, DOW_NAMES, 0, star_weight=0, start_step=False))
    if kind >= 7:
        return plain
    nths = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 5)), min_size=1, max_size=2))
    special = [f"{DOW_NAMES[d] if draw(st.integers(0, 3)) == 0 else d}#{n}" for d, n in nths]
    day = draw(st.integers(0, 7))
    # docs/engine.md: 5L and L5 (a weekday number); names are refused with L
    special.append(draw(st.sampled_from([f"{day}L", f"L{day}"])))
    items = draw(st.lists(st.sampled_from(special), min_size=1, max_size=2, unique=True))
    if kind == 6:
        items.append(plain)  # mixed with plain weekdays: croniter refuses, see list-split
    return ",".join(draw(st.permutations(items)))


@st.composite
def expressions(
    draw: st.DrawFn,
    hot_hours: tuple[int, ...] = HOT_HOURS,
    hot_minutes: tuple[int, ...] = (0, 15, 30, 45, 59),
    any_day: bool = False,
) -> str:
    """5 fields, 6 fields (seconds first) or a macro.

    ``any_day`` (starts near an offset change): the day fields are mostly
    ``* * *`` and the hour is often one of ``hot_hours`` alone.
    """
    shape = draw(st.integers(0, 9))
    if shape == 0:
        return draw(st.sampled_from(sorted(MACROS)))
    minute = draw(plain_field(0, 59, hot=hot_minutes, star_weight=1))
    if any_day and draw(st.integers(0, 2)) == 0:
        hour = str(draw(st.sampled_from(hot_hours)))
    else:
        hour = draw(plain_field(0, 23, hot=hot_hours, star_weight=2))
    if any_day and draw(st.integers(0, 2)) > 0:
        dom, month, dow = "*", "*", "*"
    else:
        dom = draw(dom_field())
        month = draw(plain_field(1, 12, MONTH_NAMES, 1, hot=HOT_MONTHS, star_weight=4))
        dow = draw(dow_field())
    fields = [minute, hour, dom, month, dow]
    if shape >= 8:  # six fields, seconds first
        fields.insert(0, draw(plain_field(0, 59, hot=(0, 30, 59), star_weight=1)))
    return " ".join(fields)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, int]:
    """(expression, zone, start ms).

    Near half the starts are near a UTC-offset change of a DST zone, and then
    the expression favours the wall hours and minutes around it; the rest are
    near 29 February or anywhere in 1970-2100.
    """
    kind = draw(st.integers(0, 19))
    if kind < 9:
        tz = draw(st.sampled_from([*DST_ZONES, "America/Santiago", "Pacific/Chatham"]))
        moments = transitions(tz)
        at = moments[draw(st.integers(0, len(moments) - 1))]
        scale = draw(st.sampled_from([2 * MINUTE, 3 * HOUR, 36 * HOUR]))
        offset = draw(st.sampled_from([0, -1, 1, -SECOND]) | st.integers(-scale, scale))
        before, after = from_ms(at - 1, tz), from_ms(at, tz)
        hours = tuple(
            sorted({before.hour, after.hour, (before.hour + 1) % 24, (after.hour - 1) % 24})
        )
        minutes = tuple(sorted({0, 15, 30, 45, 59, before.minute, after.minute}))
        expression = draw(expressions(hot_hours=hours, hot_minutes=minutes, any_day=True))
        return expression, tz, at + offset
    expression = draw(expressions())
    tz = draw(st.sampled_from(ALL_ZONES))
    if kind < 12:
        year = draw(st.integers(1972, 2096).filter(lambda y: y % 4 == 0) | st.just(2100))
        day = datetime(year, 2, 28, 12, tzinfo=timezone.utc)
        return expression, tz, to_ms(day) + draw(st.integers(-2 * DAY, 2 * DAY))
    return expression, tz, draw(st.integers(0, END_2100_MS))


# --------------------------------------------------------------------------- the tests


@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_matches_croniter(case: tuple[str, str, int]) -> None:
    expression, tz, start_ms = case
    note(f"reproduce: compare({expression!r}, {tz!r}, {start_ms})")
    for name in compare(expression, tz, start_ms):
        event(f"rule {name}")


def _local(tz: str, text: str, fold: int = 0) -> int:
    return to_ms(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz), fold=fold))


NY = "America/New_York"

EXAMPLES: list[tuple[str, str, str, str, list[str], set[str]]] = [
    # id, expression, tz, start (local wall time), expected slots (ISO), rules expected
    (
        "ny-gap-0230",
        "30 2 * * *",
        NY,
        "2026-03-07T12:00",
        ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        set(),
    ),
    (
        "ny-fold-0130",
        "30 1 * * *",
        NY,
        "2026-10-31T12:00",
        ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        {"fold-once"},
    ),
    (
        "athens-gap-0300",
        "0 3 * * *",
        "Europe/Athens",
        "2026-03-28T12:00",
        ["2026-03-29T04:00:00+03:00", "2026-03-30T03:00:00+03:00"],
        set(),
    ),
    (
        "athens-fold-0330",
        "30 3 * * *",
        "Europe/Athens",
        "2026-10-24T12:00",
        ["2026-10-25T03:30:00+03:00", "2026-10-26T03:30:00+02:00"],
        {"fold-once"},
    ),
    (
        "hourly-skips-0200",
        "0 * * * *",
        NY,
        "2026-03-08T00:30",
        ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"],
        set(),
    ),
    (
        "wildcard-hour-fold-fires-both",
        "0 * * * *",
        NY,
        "2026-11-01T00:30",
        ["2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"],
        set(),
    ),
    (
        "fold-second-pass",
        "0-30 * * * *",
        "Australia/Lord_Howe",
        "2026-04-05T01:40",
        ["2026-04-05T01:30:00+10:30", "2026-04-05T02:00:00+10:30", "2026-04-05T02:01:00+10:30"],
        {"fold-second-pass"},
    ),
    (
        "step-hour-gap",
        "0 */2 * * *",
        NY,
        "2026-03-08T00:30",
        ["2026-03-08T04:00:00-04:00", "2026-03-08T06:00:00-04:00"],
        {"step-hour-gap"},
    ),
    (
        "step-hour-fold-fires-both",
        "0 */3 * * *",
        "Europe/Athens",
        "2026-10-25T01:30",
        ["2026-10-25T03:00:00+03:00", "2026-10-25T03:00:00+02:00", "2026-10-25T06:00:00+02:00"],
        set(),
    ),
    (
        "gap-keeps-seconds",
        "30 30 2 * * *",
        NY,
        "2026-03-07T12:00",
        ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:30-04:00"],
        {"gap-keeps-seconds"},
    ),
    (
        "full-hour-list-gap",
        "30 0-23 * * *",
        NY,
        "2026-03-08T00:00",
        [
            "2026-03-08T00:30:00-05:00",
            "2026-03-08T01:30:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T03:30:00-04:00",
        ],
        {"full-hour-list"},
    ),
    (
        "full-hour-list-fold",
        "0 0-23 * * *",
        NY,
        "2026-11-01T00:30",
        ["2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00"],
        {"fold-once"},
    ),
    (
        "equal-range",
        "0 5-5 * * *",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-01T05:00:00+00:00", "2026-01-02T05:00:00+00:00"],
        {"equal-range"},
    ),
    (
        "l-miscount",
        "0 0 2-31,L * *",
        "UTC",
        "2026-01-31T12:00",
        ["2026-02-02T00:00:00+00:00", "2026-02-03T00:00:00+00:00"],
        {"l-miscount"},
    ),
    (
        "lord-howe-half-hour-gap",
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T12:00",
        ["2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"],
        set(),
    ),
    (
        "lord-howe-half-hour-fold",
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04T12:00",
        ["2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"],
        {"fold-once"},
    ),
    (
        "london-fold-minutes",
        "*/20 1 * * *",
        "Europe/London",
        "2026-10-25T00:30",
        [
            "2026-10-25T01:00:00+01:00",
            "2026-10-25T01:20:00+01:00",
            "2026-10-25T01:40:00+01:00",
            "2026-10-26T01:00:00+00:00",
        ],
        {"fold-once"},
    ),
    (
        "feb-29-2096-to-2104",
        "0 0 29 2 *",
        "UTC",
        "2096-03-01T00:00",
        ["2104-02-29T00:00:00+00:00", "2108-02-29T00:00:00+00:00"],
        set(),
    ),
    (
        "dom-dow-or",
        "0 0 13 * 5",
        "UTC",
        "2026-01-01T00:00",
        [
            "2026-01-02T00:00:00+00:00",
            "2026-01-09T00:00:00+00:00",
            "2026-01-13T00:00:00+00:00",
            "2026-01-16T00:00:00+00:00",
        ],
        set(),
    ),
    (
        "dom-step-dow-or",
        "0 0 */2 * 1",
        "UTC",
        "2026-01-01T00:00",
        [
            "2026-01-03T00:00:00+00:00",
            "2026-01-05T00:00:00+00:00",
            "2026-01-07T00:00:00+00:00",
            "2026-01-09T00:00:00+00:00",
            "2026-01-11T00:00:00+00:00",
            "2026-01-12T00:00:00+00:00",
            "2026-01-13T00:00:00+00:00",
        ],
        set(),
    ),
    (
        "or-star-collapse",
        "0 0 1-31 * */2",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00", "2026-01-04T00:00:00+00:00"],
        {"or-star-collapse"},
    ),
    (
        "or-with-nth",
        "0 0 1 * 5#3",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-16T00:00:00+00:00", "2026-02-01T00:00:00+00:00", "2026-02-20T00:00:00+00:00"],
        {"or-special-day"},
    ),
    (
        "or-with-w",
        "0 0 15W * 1",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-05T00:00:00+00:00", "2026-01-12T00:00:00+00:00", "2026-01-15T00:00:00+00:00"],
        {"or-special-day"},
    ),
    (
        "seconds-first",
        "*/10 * * * * *",
        "UTC",
        "2026-01-01T00:00:05",
        ["2026-01-01T00:00:10+00:00", "2026-01-01T00:00:20+00:00", "2026-01-01T00:00:30+00:00"],
        set(),
    ),
    (
        "last-friday-5L",
        "0 0 * * 5L",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00"],
        set(),
    ),
    (
        "last-friday-L5",
        "0 0 * * L5",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00"],
        set(),
    ),
    (
        "nearest-weekday",
        "0 0 1W * *",
        "UTC",
        "2026-07-15T00:00",
        [
            "2026-08-03T00:00:00+00:00",  # the 1st is a Saturday: Monday the 3rd
            "2026-09-01T00:00:00+00:00",
            "2026-10-01T00:00:00+00:00",
            "2026-11-02T00:00:00+00:00",  # the 1st is a Sunday
        ],
        set(),
    ),
    (
        "third-friday-names",
        "0 12 * JAN-MAR FRI#3",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-16T12:00:00+00:00", "2026-02-20T12:00:00+00:00", "2026-03-20T12:00:00+00:00"],
        set(),
    ),
    (
        "weekly-macro",
        "@weekly",
        "UTC",
        "2026-01-01T00:00",
        ["2026-01-04T00:00:00+00:00", "2026-01-11T00:00:00+00:00"],
        set(),
    ),
]


@pytest.mark.parametrize(
    ("expression", "tz", "start", "expected", "rules"),
    [pytest.param(*example[1:], id=example[0]) for example in EXAMPLES],
)
def test_examples(
    expression: str, tz: str, start: str, expected: list[str], rules: set[str]
) -> None:
    cron = Cron(expression, tz=tz)
    start_ms = _local(tz, start)
    got = cron.slots(start_ms + 1, to_ms(datetime.fromisoformat(expected[-1])) + 1)
    assert [from_ms(ms, tz).isoformat() for ms in got] == expected
    applied = compare(expression, tz, start_ms, count=len(expected))
    assert set(applied) == rules


def test_every_rule_is_exercised_by_an_example() -> None:
    used = set().union(*(example[5] for example in EXAMPLES))
    assert used == set(EXPRESSION_RULES) | set(INSTANT_RULES)


def test_transitions_are_found() -> None:
    ny = transitions(NY)
    assert _local(NY, "2026-03-08T03:00") in ny
    assert to_ms(datetime(2026, 11, 1, 6, tzinfo=timezone.utc)) in ny
    assert 2 * 120 < len(ny) < 2 * 135
    index = bisect.bisect_left(ny, _local(NY, "2026-03-08T03:00"))
    assert ny[index] == _local(NY, "2026-03-08T03:00")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 0 * * 5L", ("0 0 * * L5", {})),
        ("0 0 * * FRIL,1#2", ("0 0 * * L5,1#2", {})),
        ("0 0 * * LSAT", ("0 0 * * L6", {})),
        ("0 0 * * L5", ("0 0 * * L5", {})),
        ("*/10 * * * * *", ("*/10 * * * * *", {"second_at_beginning": True})),
        ("@daily", ("@daily", {})),
    ],
)
def test_croniter_spelling(expression: str, expected: tuple[str, dict[str, Any]]) -> None:
    assert croniter_spelling(expression) == expected
