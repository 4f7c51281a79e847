"""``JobRetryContract``: the ``retry`` job option through a real scheduler (docs/retries.md).

Part of :class:`~anarchon.testing.BackendContract`, so every backend runs it:
lease backends retry through ``RunStore.retry``, the others retry locally.
"""

from __future__ import annotations

import asyncio
import time

from anarchon.backend import Backend
from anarchon.context import RunContext
from anarchon.retry import Retry
from anarchon.scheduler import Scheduler
from anarchon.testing.contracts._support import ContractBase, new_job
from anarchon.types import RunRecord

__all__ = ["JobRetryContract"]


class JobRetryContract(ContractBase):
    """Contract tests for retries of failed handlers."""

    def test_a_handler_that_fails_twice_shows_three_attempts(self, backend: Backend) -> None:
        """Fails twice, then succeeds: 3 attempts of one slot in history, with the backoff between."""

        async def body(b: Backend) -> None:
            job = new_job("retry-job")
            calls: list[tuple[int, int, float]] = []

            async def handler(ctx: RunContext) -> None:
                calls.append((ctx.slot, ctx.attempt, time.monotonic()))
                if len(calls) <= 2:
                    raise ConnectionError(f"down {len(calls)}")

            scheduler = Scheduler(b, instance_id="retrier")
            # max_late 500 ms: the first slot claimed has its retries well before the next one
            scheduler.every(
                job, "3s", handler, jitter=0, max_late="500ms", retry=Retry(3, "200ms", "1s")
            )
            await scheduler.start()
            records: list[RunRecord] = []
            try:
                loop = asyncio.get_running_loop()
                give_up = loop.time() + 20
                while loop.time() < give_up:
                    if len(calls) >= 3:
                        slot = calls[0][0]
                        records = [r for r in await b.history(job, 20) if r.slot == slot]
                        if any(r.status == "ok" for r in records):
                            break
                    await asyncio.sleep(0.05)
            finally:
                await scheduler.stop()
            slot = calls[0][0]
            assert [(s, a) for s, a, _t in calls[:3]] == [(slot, 1), (slot, 2), (slot, 3)]
            assert calls[1][2] - calls[0][2] >= 0.19
            assert calls[2][2] - calls[1][2] >= 0.39
            records.sort(key=lambda r: r.attempt)
            assert [(r.attempt, r.status, r.reason) for r in records] == [
                (1, "error", "retried"),
                (2, "error", "retried"),
                (3, "ok", None),
            ], records
            assert records[0].error == "ConnectionError: down 1"
            assert records[1].error == "ConnectionError: down 2"
            assert all(r.instance_id == "retrier" for r in records)

        self.run(backend, body)
