"""``SyncFacadeContract``: :class:`anarchon.SyncScheduler` on a backend, from plain threads (docs/sync.md).

A backend's test module subclasses it and overrides the ``backend`` fixture,
as for :class:`~anarchon.testing.BackendContract`. No test here uses asyncio:
they are what a Django or Flask program does.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest

from anarchon.backend import Backend
from anarchon.context import RunContext
from anarchon.errors import InvalidConfigError
from anarchon.sync import SyncScheduler
from anarchon.types import RunRecord

__all__ = ["SyncFacadeContract"]


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def _in_threads(call: Callable[[], object], count: int) -> list[object]:
    """``call()`` in ``count`` new threads at once; their results (or errors) in order."""
    answers: list[object] = [None] * count
    start = threading.Barrier(count)

    def work(index: int) -> None:
        start.wait()
        try:
            answers[index] = call()
        except BaseException as error:  # reported to the test below
            answers[index] = error

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return answers


class SyncFacadeContract:
    """Sync programs on a real backend: jobs run, reads work from any thread."""

    @pytest.fixture
    def backend(self) -> Backend:
        """A fresh backend; override in the subclass."""
        raise NotImplementedError("override the backend fixture")

    def test_sync_program_runs_jobs_and_reads_history_from_another_thread(
        self, backend: Backend
    ) -> None:
        job = f"sync-{uuid.uuid4().hex[:8]}"
        scheduler = SyncScheduler(backend, instance_id="sync-1")
        ran: list[int] = []

        @scheduler.every(job, "200ms", jitter=0)
        def tick(ctx: RunContext) -> None:
            ran.append(ctx.slot)

        scheduler.start()
        try:
            _until(lambda: len(ran) >= 3, 15, "three runs of a sync handler")
            _until(
                lambda: sum(r.status == "ok" for r in scheduler.history(job, 10)) >= 2,
                10,
                "two finished runs in history",
            )
            answers = _in_threads(lambda: scheduler.history(job, 10), 4)
            for answer in answers:
                assert isinstance(answer, list), f"history() from a thread failed: {answer!r}"
                assert answer, "history() from a thread was empty"
                assert all(isinstance(r, RunRecord) and r.job == job for r in answer)
                assert {r.instance_id for r in answer} == {"sync-1"}
            last = scheduler.last_run(job)
            assert last is not None
            assert last.slot in ran or last.status == "running"
        finally:
            scheduler.stop(timeout=30)
        assert not scheduler.running

    def test_reads_and_run_now_before_start_then_from_many_threads(self, backend: Backend) -> None:
        job = f"sync-{uuid.uuid4().hex[:8]}"
        scheduler = SyncScheduler(backend, instance_id="sync-2")
        calls: list[str] = []

        @scheduler.every(job, "1h")
        def hourly(ctx: RunContext) -> None:
            calls.append(threading.current_thread().name)

        try:
            assert scheduler.last_run(job) is None
            record = scheduler.run_now(job)
            assert record.manual
            assert record.status == "ok"
            assert calls, "run_now() did not call the handler"
            answers = _in_threads(lambda: scheduler.last_run(job), 4)
            for answer in answers:
                assert isinstance(answer, RunRecord), f"last_run() from a thread: {answer!r}"
                assert answer.manual
            scheduler.start()
            again = _in_threads(lambda: scheduler.run_now(job), 3)
            assert all(isinstance(a, RunRecord) and a.status == "ok" for a in again), again
            _until(
                lambda: len([r for r in scheduler.history(job, 20) if r.manual]) >= 4,
                10,
                "four manual runs in history",
            )
        finally:
            scheduler.stop(timeout=30)

    def test_add_and_remove_while_running(self, backend: Backend) -> None:
        job = f"sync-{uuid.uuid4().hex[:8]}"
        scheduler = SyncScheduler(backend, instance_id="sync-3")
        ran: list[int] = []

        @scheduler.every(f"{job}-idle", "1h")
        def idle(ctx: RunContext) -> None: ...

        scheduler.start()
        try:
            from anarchon.schedules import Every

            scheduler.add(job, Every("200ms"), lambda ctx: ran.append(ctx.slot), jitter=0)
            _until(lambda: len(ran) >= 2, 15, "runs of a job added while running")
            assert scheduler.remove(job)
            assert job not in scheduler.jobs
        finally:
            scheduler.stop(timeout=30)

    def test_a_sync_call_on_the_scheduler_loop_is_refused(self, backend: Backend) -> None:
        job = f"sync-{uuid.uuid4().hex[:8]}"
        scheduler = SyncScheduler(backend, instance_id="sync-4")
        seen: list[BaseException] = []

        @scheduler.every(job, "1h")
        async def on_loop(ctx: RunContext) -> None:
            try:
                scheduler.history(job)
            except InvalidConfigError as error:
                seen.append(error)

        try:
            scheduler.run_now(job)
        finally:
            scheduler.stop(timeout=30)
        assert len(seen) == 1
        assert seen[0].code == "ANARCHON_INVALID_CONFIG"  # type: ignore[attr-defined]
