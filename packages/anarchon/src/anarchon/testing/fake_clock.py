""":class:`FakeClock`: a clock a test moves by hand (docs/testing-your-jobs.md).

Give the same clock to the memory backend (its store clock) and to the
scheduler, then ``clock.advance("1h")`` and ``await scheduler.run_due()``:
the slots of that hour run, with no real sleeping.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime

from anarchon.durations import Duration, to_ms
from anarchon.errors import InvalidConfigError, InvalidJobError
from anarchon.schedules import to_epoch_ms

__all__ = ["DEFAULT_START_MS", "FakeClock"]

DEFAULT_START_MS = 1_767_225_600_000
"""Where a :class:`FakeClock` starts unless told: 2026-01-01T00:00:00Z."""


class FakeClock:
    """A wall clock and a monotonic clock that move only when the test says so.

    It is a :class:`anarchon.Clock` (for ``Scheduler(clock=...)``) and a store
    clock (for ``MemoryBackend(clock=...)``). ``sleep(seconds)`` advances the
    clock by ``seconds`` and returns at once (a retry's backoff takes no real
    time). Safe to read from several threads.

    >>> clock = FakeClock("2026-01-01T00:00:00+00:00")
    >>> clock.advance("1h30m")
    >>> clock.now_ms() - DEFAULT_START_MS
    5400000
    """

    def __init__(self, start: datetime | int | str | None = None) -> None:
        if start is None:
            start_ms = DEFAULT_START_MS
        elif isinstance(start, str):
            try:
                parsed = datetime.fromisoformat(start)
            except ValueError:
                raise InvalidConfigError(
                    f"FakeClock start must be an ISO 8601 time with an offset, got {start!r}"
                ) from None
            start_ms = _epoch_ms(parsed)
        else:
            start_ms = _epoch_ms(start)
        self._lock = threading.Lock()
        self._now_ms = start_ms
        self._mono_ms = 0

    def now_ms(self) -> int:
        """The fake wall clock, in ms since the Unix epoch."""
        with self._lock:
            return self._now_ms

    def now(self) -> datetime:
        """The fake wall clock as an aware UTC datetime."""
        from datetime import timezone

        return datetime.fromtimestamp(self.now_ms() / 1000, tz=timezone.utc)

    def monotonic(self) -> float:
        """Seconds on the fake monotonic clock (moves with :meth:`advance`)."""
        with self._lock:
            return self._mono_ms / 1000

    def advance(self, duration: Duration) -> None:
        """Move both clocks forward by ``duration`` (``"1h"``, seconds, a ``timedelta``)."""
        try:
            ms = to_ms(duration, what="advance")
        except InvalidJobError as error:
            raise InvalidConfigError(error.message) from None
        with self._lock:
            self._now_ms += ms
            self._mono_ms += ms

    def advance_to(self, when: datetime | int) -> None:
        """Move both clocks forward to ``when`` (an aware datetime or epoch ms; never back)."""
        target = _epoch_ms(when)
        with self._lock:
            if target < self._now_ms:
                raise InvalidConfigError(
                    f"FakeClock only moves forward: {target} is before {self._now_ms}"
                )
            step = target - self._now_ms
            self._now_ms += step
            self._mono_ms += step

    async def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds``, then yield to the event loop once."""
        if seconds > 0:
            self.advance(seconds)
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"FakeClock({self.now().isoformat()})"


def _epoch_ms(when: datetime | int) -> int:
    try:
        return to_epoch_ms(when)
    except InvalidJobError as error:
        raise InvalidConfigError(error.message) from None
