"""The memory lease store equals the reference model (anarchon.lease_model).

With a :class:`FakeClock` the store time is exact, so every answer must match
the model's exactly; with the wall clock, short real leases and sleeps.
"""

from __future__ import annotations

import pytest
from anarchon.backend import Backend
from anarchon.memory import MemoryBackend
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


class TestMemoryWallClockModel(LeaseModelContract):
    """The wall clock: the real-sleep path that the server suites use."""

    model_examples = 10

    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend()
