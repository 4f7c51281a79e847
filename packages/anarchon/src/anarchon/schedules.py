"""Schedule objects users build and preview: :class:`Every`, :class:`Cron` and :class:`Once`.

One-off runs (docs/one-off-runs.md): ``Scheduler.at(name, when, handler)``
declares a job whose only slot is ``when``, with the schedule :class:`Once`.
It is claimed, leased, retried and recorded exactly like a slot of a
recurring job, so it runs once on one instance of the fleet. The engine has
no one-slot schedule, so :class:`Once` compiles to an interval whose period is
so long (2**62 ms, about 146 million years) that ``when`` is its only slot
within any date the scheduler can represent.
"""

from __future__ import annotations

from datetime import datetime

from anarchon import _core
from anarchon.durations import Duration, to_ms
from anarchon.errors import InvalidJobError

__all__ = ["Cron", "Every", "Once", "Schedule", "to_epoch_ms"]


class Schedule:
    """Base of the schedule objects; wraps a compiled engine schedule."""

    __slots__ = ("_compiled",)
    _compiled: _core.Schedule

    def next_after(self, ms: int) -> int | None:
        """The first slot (ms since the epoch, UTC) strictly after ``ms``, or None."""
        return self._compiled.next_after(ms)

    def slots(self, start_ms: int, end_ms: int, limit: int = 100_000) -> list[int]:
        """Slots ``s`` with ``start_ms <= s < end_ms`` (at most ``limit``)."""
        return self._compiled.slots(start_ms, end_ms, limit)

    @property
    def period_ms(self) -> int:
        """The smallest gap between two consecutive slots, in ms."""
        return self._compiled.period_ms


class Every(Schedule):
    """Every ``interval``, aligned to the Unix epoch: ``slot = k * interval + offset``.

    >>> Every("10s").next_after(12_345)
    20000
    """

    __slots__ = ("interval_ms", "offset_ms")

    def __init__(self, interval: Duration, offset: Duration = 0) -> None:
        self.interval_ms = to_ms(interval, what="interval", allow_zero=False)
        self.offset_ms = to_ms(offset, what="offset")
        self._compiled = _core.Schedule.every(self.interval_ms, self.offset_ms)

    def __repr__(self) -> str:
        return f"Every({self.interval_ms}ms, offset={self.offset_ms}ms)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Every) and (
            self.interval_ms,
            self.offset_ms % self.interval_ms,
        ) == (other.interval_ms, other.offset_ms % other.interval_ms)

    def __hash__(self) -> int:
        return hash(("every", self.interval_ms, self.offset_ms % self.interval_ms))


class Cron(Schedule):
    """A cron expression evaluated in an IANA time zone.

    Five fields, six with the seconds field first, or a macro (``@daily``).

    >>> Cron("0 3 * * *", tz="UTC").next_after(0)
    10800000
    """

    __slots__ = ("expression", "tz")

    def __init__(self, expression: str, tz: str = "UTC") -> None:
        if not isinstance(expression, str):
            raise InvalidJobError(
                f"cron expression must be a string, got {type(expression).__name__}"
            )
        if not isinstance(tz, str):
            raise InvalidJobError(
                f"tz must be an IANA zone name, got {type(tz).__name__}", field="tz"
            )
        self.expression = expression
        self.tz = tz
        self._compiled = _core.Schedule.cron(expression, tz)

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, tz={self.tz!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cron) and (self.expression, self.tz) == (
            other.expression,
            other.tz,
        )

    def __hash__(self) -> int:
        return hash(("cron", self.expression, self.tz))


_PERIOD_MS = 2**62
_LATEST_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def to_epoch_ms(when: datetime | int) -> int:
    """``when`` as ms since the Unix epoch: an aware datetime, or an int of epoch ms."""
    if isinstance(when, bool):
        raise InvalidJobError(f"when must be an aware datetime or epoch ms, got {when!r}")
    if isinstance(when, datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise InvalidJobError(
                f"when must be an aware datetime (with tzinfo), got the naive {when.isoformat()}",
                field="when",
            )
        ms = int(when.timestamp() * 1000)
    elif isinstance(when, int):
        ms = when
    else:
        raise InvalidJobError(
            f"when must be an aware datetime or epoch ms (int), got {type(when).__name__}",
            field="when",
        )
    if not 0 <= ms <= _LATEST_MS:
        raise InvalidJobError(
            f"when must be between 1970-01-01 and 9999-12-31 (epoch ms), got {ms}", field="when"
        )
    return ms


class Once(Schedule):
    """The schedule of a one-off run: the single slot ``at_ms`` (ms since the epoch, UTC).

    >>> Once(1_800_000_000_000).next_after(0)
    1800000000000
    >>> Once(1_800_000_000_000).next_after(1_800_000_000_000) is None
    True
    """

    __slots__ = ("at_ms",)

    def __init__(self, when: datetime | int) -> None:
        self.at_ms = to_epoch_ms(when)
        self._compiled = _core.Schedule.every(_PERIOD_MS, self.at_ms)

    def next_after(self, ms: int) -> int | None:
        """``at_ms`` if it is after ``ms``, else None."""
        return self.at_ms if ms < self.at_ms else None

    def slots(self, start_ms: int, end_ms: int, limit: int = 100_000) -> list[int]:
        """``[at_ms]`` if ``start_ms <= at_ms < end_ms``, else ``[]``."""
        return [self.at_ms] if start_ms <= self.at_ms < end_ms and limit > 0 else []

    def __repr__(self) -> str:
        return f"Once({self.at_ms}ms)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Once) and self.at_ms == other.at_ms

    def __hash__(self) -> int:
        return hash(("once", self.at_ms))
