"""A clock sync counts as contact with the store only when it read the store (issue 18)."""

from __future__ import annotations

from anarchon.store_time import StoreTime
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
