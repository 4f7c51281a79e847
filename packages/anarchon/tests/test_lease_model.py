"""The memory lease store equals the reference model (anarchon.backend.lease_model).

With a :class:`FakeClock` the store time is exact, so every answer must match
the model's exactly; with the wall clock, short real leases and sleeps; with a
clock that moves on every reading, the store time of each call lies strictly
between the readings around it, as on a server, and leases expire inside them.
"""

from __future__ import annotations

import pytest
from anarchon.backend import Backend
from anarchon.backend.memory import MemoryBackend
from anarchon.testing import FakeClock, LeaseModelContract


class TestMemoryFakeClockModel(LeaseModelContract):
    """The store clock is moved by hand: no sleeps, many programs."""

    model_examples = 60

    @pytest.fixture
    def backend(self) -> Backend:
        self.clock = FakeClock()
        return MemoryBackend(clock=self.clock)

    def advance_store_clock(self, backend: Backend, ms: int) -> bool:
        self.clock.advance(f"{ms}ms")
        return True


class _TickingClock(FakeClock):
    """A fake clock that moves 0-45 ms (a fixed cycle) every time it is read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def now_ms(self) -> int:
        self.reads += 1
        self.advance(f"{(self.reads * 7) % 46}ms")
        return super().now_ms()


class TestMemoryTickingClockModel(LeaseModelContract):
    """Store time strictly inside each call's readings, leases ending in between: no sleeps."""

    model_examples = 200

    @pytest.fixture
    def backend(self) -> Backend:
        self.clock = _TickingClock()
        return MemoryBackend(clock=self.clock)

    def advance_store_clock(self, backend: Backend, ms: int) -> bool:
        self.clock.advance(f"{ms}ms")
        return True


class TestMemoryWallClockModel(LeaseModelContract):
    """The wall clock: the real-sleep path that the server suites use."""

    model_examples = 10

    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend()
