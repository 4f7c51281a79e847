"""One-off runs (docs/one-off-runs.md): :class:`Once`, a schedule with a single slot.

``Scheduler.at(name, when, handler)`` declares a job whose only slot is
``when``. It is claimed, leased, retried and recorded exactly like a slot of
a recurring job, so it runs once on one instance of the fleet.

The engine has no one-slot schedule, so :class:`Once` compiles to an
interval whose period is so long (2**62 ms, about 146 million years) that
``when`` is its only slot within any date the scheduler can represent.
"""

from __future__ import annotations

from datetime import datetime

from anarchon import _core
from anarchon.errors import InvalidJobError
from anarchon.schedules import Schedule

__all__ = ["Once", "to_epoch_ms"]

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
