"""A clock sync counts as contact with the store only when it read the store."""

from __future__ import annotations

from anarchon._scheduler.store_time import StoreTime
from anarchon.testing import FakeClock


async def test_a_sync_without_a_store_clock_reads_nothing() -> None:
    clock = FakeClock()

    async def no_clock() -> int | None:
        return None

    async def store_clock() -> int:
        return clock.now_ms() - 40_000

    silent = StoreTime(clock, no_clock)
    assert await silent.sync() == 0
    assert silent.read_store is False

    real = StoreTime(clock, store_clock)
    shift = await real.sync()
    assert real.read_store is True
    assert shift == -40_000, "the estimate moved back to the store's clock"
    real.resync_soon()
    assert real.sync_due()


async def test_the_estimate_is_never_ahead_of_the_store_however_the_trip_splits() -> None:
    """The store reads its clock at the start of a 30 ms trip or at its end: either way the
    estimate right after the sync is at most the store's time (docs/concepts.md)."""
    clock = FakeClock()

    async def read_then_slow_reply() -> int:
        reading = clock.now_ms()
        clock.advance(0.030)
        return reading

    async def slow_request_then_read() -> int:
        clock.advance(0.030)
        return clock.now_ms()

    for source in (read_then_slow_reply, slow_request_then_read):
        estimate = StoreTime(clock, source)
        await estimate.sync()
        assert clock.now_ms() - 30 <= estimate.now_ms() <= clock.now_ms()
    estimate = StoreTime(clock, slow_request_then_read)
    await estimate.sync()
    assert estimate.now_ms() == clock.now_ms(), "a reading at the reply's arrival is exact"
