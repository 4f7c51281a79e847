"""Store time as one instance estimates it (docs/concepts.md, "Time").

Every slot is scheduled on the store's clock. An instance reads that clock at
each sync and, between syncs, adds the *monotonic* time elapsed since: a step
of the local wall clock (an NTP correction, a VM resume) between syncs changes
nothing. A backend without a clock (``now_ms()`` is None) is read as the local
wall clock at each sync, and monotonic time in between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from anarchon.clock import Clock

if TYPE_CHECKING:
    from anarchon._scheduler.store_retry import StorePolicy

__all__ = ["SYNC_INTERVAL_S", "StoreTime", "sync_under"]

SYNC_INTERVAL_S = 60.0
"""Seconds between two readings of the store clock."""


class StoreTime:
    """``now_ms()``: the store clock at the last sync plus monotonic time elapsed since."""

    __slots__ = ("_base_mono", "_base_ms", "_clock", "_source", "read_store", "synced_at")

    def __init__(self, clock: Clock, source: Callable[[], Awaitable[int | None]]) -> None:
        self._clock = clock
        self._source = source
        self._base_ms = clock.now_ms()
        self._base_mono = clock.monotonic()
        self.synced_at = float("-inf")
        """Monotonic time of the last successful sync (``-inf`` before the first)."""
        self.read_store = False
        """True when the last sync read the store (a backend without a clock reads nothing)."""

    def now_ms(self) -> int:
        """Store time in ms since the epoch, as estimated now."""
        return self._base_ms + int((self._clock.monotonic() - self._base_mono) * 1000)

    def sync_due(self) -> bool:
        """True when the last sync is older than :data:`SYNC_INTERVAL_S`."""
        return self._clock.monotonic() - self.synced_at >= SYNC_INTERVAL_S

    async def sync(self) -> int:
        """Read the store clock (errors reach the caller; the estimate is kept).

        Returns how far the estimate moved, in ms (negative: it was ahead).
        """
        store_ms = await self._source()
        received = self._clock.monotonic()
        self.read_store = store_ms is not None
        if store_ms is None:
            store_ms = self._clock.now_ms()
        # The store read its clock somewhere between sent and received; anchoring it at
        # received makes the estimate a lower bound (late by at most the round trip, never
        # early, however the trip splits between request and reply).
        before = self.now_ms()
        self._base_ms = int(store_ms)
        self._base_mono = received
        self.synced_at = received
        return self.now_ms() - before

    def resync_soon(self) -> None:
        """Make the next :meth:`sync_due` true (the store said our estimate is off)."""
        self.synced_at = float("-inf")

    def postpone(self, retry_s: float = 5.0) -> None:
        """After a failed sync: keep the estimate and try again in ``retry_s`` seconds."""
        self.synced_at = self._clock.monotonic() - SYNC_INTERVAL_S + retry_s


async def sync_under(time: StoreTime, policy: StorePolicy) -> bool:
    """Sync ``time`` through ``policy``'s in-flight gate; False after a transient store error.

    The transient error is noted as an outage; any other error is raised.
    """
    try:
        async with policy.gate:
            await time.sync()
    except asyncio.CancelledError:
        raise
    except Exception as error:
        if not policy.is_transient(error):
            raise
        policy.note_outage(error)
        return False
    return True
