"""``OneOffContract``: one-off runs (``Scheduler.at``, docs/one-off-runs.md) on a backend.

Part of :class:`~anarchon.testing.BackendContract`, so every backend runs it.
Several schedulers share the backend under test (one event loop), as
instances of a fleet share a store.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from anarchon.backend import Backend
from anarchon.context import RunContext
from anarchon.scheduler import Scheduler
from anarchon.testing.contracts._support import ContractBase, new_job, wall_ms
from anarchon.types import RunRecord

__all__ = ["OneOffContract"]


async def _store_now(backend: Backend) -> int:
    runs = backend.runs
    now = await (runs.now_ms() if runs is not None else backend.now_ms())
    return wall_ms() if now is None else int(now)


async def _wait_for_ok(backend: Backend, job: str, limit_s: float) -> list[RunRecord]:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + limit_s
    while True:
        records = await backend.history(job, 20)
        if any(r.status == "ok" for r in records):
            return records
        assert loop.time() < give_up, f"one-off run {job} did not run; history: {records}"
        await asyncio.sleep(0.05)


class OneOffContract(ContractBase):
    """Contract tests for one-off runs: once per fleet, late rules, restarts."""

    one_off_instances: ClassVar[int] = 4
    """Schedulers that declare the same one-off run."""

    def _fleet(self, backend: Backend, count: int) -> list[Scheduler]:
        return [Scheduler(backend, instance_id=f"one-off-{i}") for i in range(count)]

    def test_one_off_run_runs_once_across_instances(self, backend: Backend) -> None:
        """Every instance declares ``at(when)``: exactly one runs it, once, recorded in history."""

        async def body(b: Backend) -> None:
            job = new_job("once")
            when = await _store_now(b) + 1_000
            calls: list[RunContext] = []
            fleet = self._fleet(b, self.one_off_instances)
            for scheduler in fleet:
                scheduler.at(job, when, calls.append, jitter="300ms")
            for scheduler in fleet:
                await scheduler.start()
            try:
                await _wait_for_ok(b, job, 20)
                await asyncio.sleep(0.5)  # any second run would have started by now
            finally:
                for scheduler in fleet:
                    await scheduler.stop()
            assert len(calls) == 1, f"ran {len(calls)} times: {calls}"
            assert calls[0].slot == when
            records = await b.history(job, 20)
            assert [(r.slot, r.status, r.attempt) for r in records] == [(when, "ok", 1)]
            assert records[0].instance_id == calls[0].instance_id

        self.run(backend, body)

    def test_one_off_run_declared_after_its_time(self, backend: Backend) -> None:
        """An instance started after ``when`` still runs it within ``max_late``; not after it ran."""

        async def body(b: Backend) -> None:
            job = new_job("once-late")
            when = await _store_now(b) - 3_000
            calls: list[int] = []
            first = Scheduler(b, instance_id="late-1")
            first.at(job, when, lambda ctx: calls.append(ctx.slot), jitter=0, max_late="1m")
            await first.start()
            try:
                await _wait_for_ok(b, job, 20)
            finally:
                await first.stop()
            # a restart (another instance declaring it) after it ran: not again
            again = Scheduler(b, instance_id="late-2")
            again.at(job, when, lambda ctx: calls.append(ctx.slot), jitter=0, max_late="1m")
            await again.start()
            try:
                await asyncio.sleep(0.5)
            finally:
                await again.stop()
            assert calls == [when]

        self.run(backend, body)

    def test_one_off_run_past_max_late_is_not_run(self, backend: Backend) -> None:
        """A one-off run more than ``max_late`` in the past is not claimed."""

        async def body(b: Backend) -> None:
            job = new_job("once-missed")
            when = await _store_now(b) - 10_000
            calls: list[int] = []
            scheduler = Scheduler(b, instance_id="missed")
            scheduler.at(job, when, lambda ctx: calls.append(ctx.slot), jitter=0, max_late="2s")
            await scheduler.start()
            try:
                await asyncio.sleep(0.5)
            finally:
                await scheduler.stop()
            assert calls == []
            assert await b.history(job, 10) == []

        self.run(backend, body)
