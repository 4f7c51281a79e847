"""Finishes re-sent after an outage: what a failover lost is written again (docs/durability.md).

A store that fails over can lose the last writes its old primary
acknowledged: a finish (the run shows ``running`` with a lease nobody renews,
and a backup runs the finished slot again once it expires), or the result
record. This instance keeps the finishes of its runs that ended within the
last lease, keyed by run, and once the store answers again after an outage
sends them again in one ``finish_many`` per chunk (the same tokens: a finish already
stored answers True again and changes nothing), then stores again the
results of those that answered True (history keeps one record per token).
A finish whose run state another instance holds answers False and is left
alone; one whose state is gone is healed by the store (a finished record).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from anarchon._scheduler.store_batches import StoreBatches, chunks
from anarchon._scheduler.store_retry import StorePolicy
from anarchon._scheduler.tasks import TaskSet
from anarchon.clock import Clock
from anarchon.types import ResultWrite, RunFinish

__all__ = ["RECENT_LIMIT", "RecentFinishes"]

RECENT_LIMIT = 50_000
"""The most finishes kept at once (the oldest go first): about 560 bytes each with the
result they re-store, so at most about 28 MB whatever the run rate."""


class RecentFinishes:
    """The finishes of the last lease, re-sent once the store is reachable again."""

    def __init__(
        self,
        *,
        lease_s: float,
        batches: StoreBatches,
        policy: StorePolicy,
        clock: Clock,
        tasks: TaskSet,
        log: logging.Logger,
        limit: int = RECENT_LIMIT,
    ) -> None:
        self.lease_s = lease_s
        self.batches = batches
        self.policy = policy
        self.clock = clock
        self.tasks = tasks
        self.log = log
        self.limit = limit
        self._kept: OrderedDict[tuple[str, int], tuple[float, RunFinish, ResultWrite]] = (
            OrderedDict()
        )
        self._sending: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._kept)

    def add(self, finish: RunFinish, write: ResultWrite) -> None:
        """Keep a finish the store answered True, for one lease from now."""
        key = (finish.job, finish.slot)
        now = self.clock.monotonic()
        kept = self._kept
        kept.pop(key, None)
        kept[key] = (now + self.lease_s, finish, write)
        self._drop_old(now)
        while len(kept) > self.limit:
            kept.popitem(last=False)

    def _drop_old(self, now: float) -> None:
        kept = self._kept
        while kept:
            until = next(iter(kept.values()))[0]
            if until > now:
                break
            kept.popitem(last=False)

    def recovered(self) -> None:
        """The store answers again after an outage: re-send the kept finishes (one task)."""
        if self._sending is not None and not self._sending.done():
            return
        self._drop_old(self.clock.monotonic())
        if not self._kept:
            return
        self._sending = self.tasks.spawn(self.resend(), "anarchon-resend")

    async def resend(self) -> int:
        """Send the kept finishes again in one ``finish_many``; return how many were sent."""
        self._drop_old(self.clock.monotonic())
        items = list(self._kept.values())
        if not items:
            return 0
        finishes = [finish for _until, finish, _write in items]
        writes: list[ResultWrite] = []
        try:
            for chunk in chunks(items):  # one finish_many per chunk, like every batch
                answers = await self.policy.bounded(
                    self.batches.finish_many([finish for _u, finish, _w in chunk])
                )
                done = [w for (_u, _f, w), ok in zip(chunk, answers, strict=True) if ok is True]
                if done:
                    await self.policy.bounded(self.batches.save_results(done))
                writes.extend(done)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if self.policy.is_transient(error):
                self.policy.note_outage(error)  # sent again at the next recovery
            else:
                self.policy.report("finishes", error)
            return 0
        self.log.info(
            "anarchon: store %s reachable again: re-sent the finishes of %d run(s) that ended"
            " within the last lease (%d still held by their token or healed, %d owned by"
            " another instance)",
            self.policy.backend.name,
            len(finishes),
            len(writes),
            len(finishes) - len(writes),
        )
        return len(finishes)
