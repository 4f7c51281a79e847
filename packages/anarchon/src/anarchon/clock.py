"""Time sources. The scheduler reads time only through a :class:`Clock`, so tests can skew it."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SkewedClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """What the scheduler needs from a clock."""

    def now_ms(self) -> int:
        """Wall-clock time in ms since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from a monotonic source (lease expiry as the runner sees it)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class SystemClock:
    """The machine's clocks."""

    def now_ms(self) -> int:
        """Wall-clock time in ms since the Unix epoch."""
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(seconds)


class SkewedClock(SystemClock):
    """The system clock shifted by ``offset_ms``: an instance whose wall clock is wrong.

    Useful to test that a fleet with skewed clocks still runs each slot once.
    """

    def __init__(self, offset_ms: int) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        """Wall-clock time plus the skew."""
        return super().now_ms() + self.offset_ms
