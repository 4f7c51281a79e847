"""The sync facade on the memory backend (and the refusal of a call from the scheduler's loop)."""

from __future__ import annotations

import uuid

import pytest
from anarchon.backend import Backend
from anarchon.backend.memory import MemoryBackend
from anarchon.testing import SyncFacadeContract


class TestMemorySync(SyncFacadeContract):
    @pytest.fixture
    def backend(self) -> Backend:
        return MemoryBackend.from_url(f"memory://sync-{uuid.uuid4().hex[:8]}")


def test_the_start_in_thread_handle_has_the_sync_methods() -> None:
    from anarchon import RunContext, Scheduler

    scheduler = Scheduler(f"memory://thread-{uuid.uuid4().hex[:8]}", instance_id="t-1")
    ran: list[int] = []

    @scheduler.every("tick", "100ms", jitter=0)
    def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    handle = scheduler.start_in_thread()
    try:
        assert handle.running
        manual = handle.run_now("tick")
        assert manual.manual
        assert manual.status == "ok"
        last = handle.last_run("tick")
        assert last is not None
        assert any(r.manual for r in handle.history("tick", 50))
        handle.add("other", scheduler.jobs["tick"].schedule, tick, jitter=0)
        assert "other" in handle.jobs
        assert handle.remove("other")
    finally:
        handle.stop()
    assert not handle.running
    assert ran
