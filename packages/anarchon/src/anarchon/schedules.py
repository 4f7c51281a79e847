"""Schedule objects users build and preview: :class:`Every` and :class:`Cron`."""

from __future__ import annotations

from anarchon import _core
from anarchon.durations import Duration, to_ms
from anarchon.errors import InvalidJobError

__all__ = ["Cron", "Every", "Schedule"]


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
