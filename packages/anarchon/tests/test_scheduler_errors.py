"""Errors reach the user (docs/concepts.md, "Errors"): only transient store errors are retried,
every other error is raised with its code or, for a run in progress, logged once and recorded;
and store time follows the monotonic clock between syncs (docs/concepts.md, "Time")."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from anarchon import (
    BackendError,
    ForeignDataError,
    InvalidConfigError,
    MemoryBackend,
    RunContext,
    Scheduler,
    UnsupportedError,
)
from anarchon.backend.registry import ENV_VAR
from anarchon.testing.scenarios.clock_step import check_wall_clock_step
from instrumented import ProbedBackend

FAST: dict[str, Any] = {"lease": "600ms", "heartbeat": "200ms"}


async def _noop(ctx: RunContext) -> None:
    return None


def _messages(caplog: pytest.LogCaptureFixture, text: str, level: int | None = None) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if text in r.getMessage() and (level is None or r.levelno == level)
    ]


# start(), add(), run_now() --------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        InvalidConfigError("history_size too large for this store"),
        ForeignDataError("key anarchon:x holds a string", key="anarchon:x"),
        BackendError("redis://cache:6379/99: invalid DB index"),
    ],
)
async def test_start_raises_a_permanent_prepare_job_error_within_a_second(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    backend = ProbedBackend()
    backend.probe.faults["prepare_job"] = error
    scheduler = Scheduler(backend, instance_id="s")
    scheduler.every("job", "1s", _noop)
    t0 = time.monotonic()
    with pytest.raises(type(error)) as raised:
        await asyncio.wait_for(scheduler.start(), 1.0)
    assert time.monotonic() - t0 < 1.0
    assert raised.value is error
    assert raised.value.code == error.code  # type: ignore[attr-defined]
    assert backend.probe.calls["prepare_job"] == 1, "a permanent error was retried"
    assert not _messages(caplog, "retrying with backoff")
    assert not scheduler._started


async def test_transient_prepare_job_errors_are_retried_with_one_outage_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An empty ConnectionError: retried, logged once, and the line names the exception type."""
    backend = ProbedBackend()
    backend.probe.faults["prepare_job"] = ConnectionError()
    scheduler = Scheduler(backend, instance_id="s")
    scheduler.every("job", "1s", _noop)
    caplog.set_level(logging.INFO, logger="anarchon")

    async def heal() -> None:
        await asyncio.sleep(0.4)
        del backend.probe.faults["prepare_job"]

    healer = asyncio.create_task(heal())
    await asyncio.wait_for(scheduler.start(), 5)
    await healer
    await scheduler.stop()
    assert backend.probe.calls["prepare_job"] >= 3
    down = _messages(caplog, "unreachable", logging.WARNING)
    assert down == [
        "anarchon: store memory unreachable (ConnectionError (no message)); retrying with backoff"
    ]
    assert len(_messages(caplog, "reachable again")) == 1


async def test_add_raises_the_backends_refusal() -> None:
    class Refusing(MemoryBackend):
        def check_job(self, limits: Any) -> None:
            raise UnsupportedError(f"job {limits.job}: cannot run here")

    scheduler = Scheduler(Refusing(), instance_id="s")
    with pytest.raises(UnsupportedError) as refused:
        scheduler.every("job", "1s", _noop)
    assert refused.value.code == "ANARCHON_UNSUPPORTED"
    assert "job" not in scheduler.jobs


async def test_add_while_running_logs_a_permanent_prepare_error_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = ProbedBackend()
    async with Scheduler(backend, instance_id="s") as scheduler:
        backend.probe.faults["prepare_job"] = ForeignDataError("foreign data", key="k")
        scheduler.every("late-job", "100ms", _noop, jitter=0)
        await asyncio.sleep(0.3)
        assert "late-job" not in scheduler.jobs, "a job that cannot be prepared stays registered"
    errors = _messages(caplog, "refused prepare_job", logging.ERROR)
    assert len(errors) == 1
    assert "ANARCHON_FOREIGN_DATA" in errors[0]
    assert backend.probe.calls["prepare_job"] == 1


async def test_run_now_raises_a_permanent_error_with_its_code() -> None:
    backend = ProbedBackend()
    ran: list[int] = []

    async def job(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler = Scheduler(backend, instance_id="s")
    scheduler.every("job", "1h", job)
    backend.probe.faults["record_manual_run"] = ForeignDataError("not ours", key="jobs/job")
    with pytest.raises(ForeignDataError) as raised:
        await asyncio.wait_for(scheduler.run_now("job"), 1.0)
    assert raised.value.code == "ANARCHON_FOREIGN_DATA"
    assert raised.value.key == "jobs/job"
    assert ran == [], "the handler ran although the run could not be recorded"
    del backend.probe.faults["record_manual_run"]
    backend.probe.faults["save_result"] = BackendError("the store refused the result")
    with pytest.raises(BackendError):
        await asyncio.wait_for(scheduler.run_now("job"), 1.0)


# Runs in progress -------------------------------------------------------------


async def test_a_permanent_claim_error_is_logged_once_and_the_scheduler_keeps_going(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = ProbedBackend()
    backend.probe.faults["claim_many"] = BackendError("claims refused")
    async with Scheduler(backend, instance_id="s") as scheduler:
        scheduler.every("tick", "100ms", _noop, jitter=0)
        await asyncio.sleep(0.55)
        assert backend.probe.calls["claim_many"] >= 4, "the scheduler stopped claiming"
        del backend.probe.faults["claim_many"]
        await asyncio.sleep(0.35)
    assert len(_messages(caplog, "refused claims", logging.ERROR)) == 1
    assert not _messages(caplog, "retrying with backoff")
    assert sum(r.status == "ok" for r in await backend.history("tick", 50)) >= 2


async def test_a_permanent_finish_error_is_logged_once_and_recorded_as_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = ProbedBackend()
    backend.probe.faults["finish_many"] = BackendError("finish refused")
    async with Scheduler(backend, instance_id="s", **FAST) as scheduler:
        scheduler.every("tick", "100ms", _noop, jitter=0, overlap=True)
        await asyncio.sleep(0.55)
    assert len(_messages(caplog, "refused finishes", logging.ERROR)) == 1
    history = [r for r in await backend.history("tick", 50) if r.status != "running"]
    assert history
    assert {r.status for r in history} == {"error"}
    assert all("finish refused" in (r.error or "") for r in history)


async def test_a_permanent_heartbeat_error_ends_the_run_as_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = ProbedBackend()
    reasons: list[str | None] = []

    async def hold(ctx: RunContext) -> None:
        try:
            await asyncio.sleep(5)
        finally:
            reasons.append(ctx.cancelled.reason)

    async with Scheduler(backend, instance_id="s", **FAST) as scheduler:
        scheduler.every("long", "1h", hold, jitter=0, max_late="2h")
        await asyncio.sleep(0.1)
        backend.probe.faults["heartbeat_many"] = BackendError("renewal refused")
        await asyncio.sleep(0.4)
    assert reasons == ["store_error"]
    assert len(_messages(caplog, "refused heartbeats", logging.ERROR)) == 1
    (record,) = await backend.history("long", 5)
    assert record.status == "error"
    assert "renewal refused" in (record.error or "")


# The silent single-instance mode ------------------------------------------------


async def test_implicit_memory_backend_warns_at_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    async with Scheduler(instance_id="alone"):
        pass
    warnings = _messages(caplog, "every instance runs every job", logging.WARNING)
    assert len(warnings) == 1
    assert ENV_VAR in warnings[0]


@pytest.mark.parametrize("given", ["memory://", "env"])
async def test_a_memory_backend_asked_for_does_not_warn(
    given: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if given == "env":
        monkeypatch.setenv(ENV_VAR, "memory://")
        scheduler = Scheduler(instance_id="asked")
    else:
        scheduler = Scheduler(given, instance_id="asked")
    async with scheduler:
        pass
    assert not _messages(caplog, "every instance runs every job")


# Time -----------------------------------------------------------------------------


async def test_a_wall_clock_step_between_syncs_changes_nothing() -> None:
    """+40 s on one instance's wall clock mid-run: 0 early runs, 0 duplicates, no slot lost."""
    backend = MemoryBackend()  # the store clock is the real wall clock
    await check_wall_clock_step(lambda: backend)


async def test_a_claim_only_outage_is_retried_within_max_late_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = ProbedBackend(leases=False)
    caplog.set_level(logging.INFO, logger="anarchon")
    async with Scheduler(backend, instance_id="s") as scheduler:
        scheduler.every("tick", "100ms", _noop, jitter=0, max_late="150ms")
        await asyncio.sleep(0.35)
        backend.probe.faults["plain_claim_many"] = ConnectionError("connection reset (injected)")
        await asyncio.sleep(0.5)
        del backend.probe.faults["plain_claim_many"]
        await asyncio.sleep(0.45)
    assert len(_messages(caplog, "unreachable", logging.WARNING)) == 1
    assert len(_messages(caplog, "reachable again")) == 1
    history = await backend.history("tick", 100)
    slots = [r.slot for r in history]
    assert len(slots) == len(set(slots))
    claimed_late = [r for r in history if r.started_at is not None and r.started_at > r.slot + 250]
    assert claimed_late == [], "a claim was retried past max_late"
    assert max(slots) > min(slots) + 1000, "the scheduler did not resume after the outage"
