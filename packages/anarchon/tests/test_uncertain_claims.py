"""Uncertain claims (docs/durability.md): skipped by default, run with ``if_uncertain="run"``.

The memory backend answers ``uncertain`` through the public test tool
:func:`anarchon.testing.make_claims_uncertain`, which rewrites the answers of
the real store (the lease is held exactly as for ``won``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

import pytest
from anarchon import MemoryBackend, Retry, RunContext, Scheduler
from anarchon.errors import InvalidJobError, UnsupportedError
from anarchon.events import Event
from anarchon.metrics import prometheus as anarchon_prometheus
from anarchon.testing import FakeClock, make_claims_uncertain
from anarchon.types import RunClaim
from plain_backend import PlainBackend
from prometheus_client import CollectorRegistry

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _setup(jobs: set[str] | None = None) -> tuple[FakeClock, MemoryBackend, Scheduler]:
    clock = FakeClock(START)
    backend = MemoryBackend(clock=clock)
    make_claims_uncertain(backend, jobs=jobs)
    return clock, backend, Scheduler(backend, clock=clock, instance_id="a")


async def test_an_uncertain_claim_is_skipped_by_default(caplog: pytest.LogCaptureFixture) -> None:
    """Default ``if_uncertain="skip"``: no handler, history ``skipped``/``claim_not_durable``."""
    clock, backend, scheduler = _setup()
    ran: list[int] = []
    skipped: list[Event] = []
    scheduler.on("skipped", skipped.append)
    registry = CollectorRegistry()
    anarchon_prometheus.attach(scheduler, registry=registry)

    @scheduler.every("report", "1m")
    async def report(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    clock.advance("1m")
    with caplog.at_level(logging.WARNING, logger="anarchon"):
        records = await scheduler.run_due()
    await scheduler.stop()
    assert ran == []
    assert [(r.status, r.reason, r.attempt) for r in records] == [
        ("skipped", "claim_not_durable", 1)
    ]
    assert [(e.job, e.reason) for e in skipped] == [("report", "claim_not_durable")]
    assert "skipped (claim_not_durable)" in caplog.text
    skips = {"job": "report", "reason": "claim_not_durable"}
    assert registry.get_sample_value("anarchon_skips_total", skips) == 1
    # The skip finished the run: the store answers ``done`` to anyone else.
    assert backend.runs is not None
    slot = records[0].slot
    again = await backend.runs.claim(RunClaim("report", slot, "other", "b", 30_000, 3))
    assert again.kind == "done"


async def test_if_uncertain_run_runs_it_and_history_says_why() -> None:
    """``if_uncertain="run"``: the handler runs; its record carries ``claim_not_durable``."""
    clock, _backend, scheduler = _setup()
    ran: list[int] = []

    @scheduler.every("report", "1m", if_uncertain="run")
    async def report(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    clock.advance("1m")
    records = await scheduler.run_due()
    await scheduler.stop()
    assert len(ran) == 1
    assert [(r.status, r.reason) for r in records] == [("ok", "claim_not_durable")]


async def test_only_the_uncertain_jobs_are_skipped() -> None:
    """A confirmed claim runs as before, with no reason on its record."""
    clock, _backend, scheduler = _setup(jobs={"doubtful"})
    ran: list[str] = []

    @scheduler.every("doubtful", "1m")
    async def doubtful(ctx: RunContext) -> None:
        ran.append(ctx.job)

    @scheduler.every("confirmed", "1m")
    async def confirmed(ctx: RunContext) -> None:
        ran.append(ctx.job)

    clock.advance("1m")
    records = await scheduler.run_due()
    await scheduler.stop()
    assert ran == ["confirmed"]
    assert sorted((r.job, r.status, r.reason) for r in records) == [
        ("confirmed", "ok", None),
        ("doubtful", "skipped", "claim_not_durable"),
    ]


async def test_uncertain_retries_run_with_if_uncertain_run() -> None:
    """``if_uncertain="run"`` with retries: every attempt runs; the last record says why."""
    clock, _backend, scheduler = _setup()
    calls: list[int] = []

    @scheduler.every("flaky", "1h", retry=Retry(attempts=3, backoff="1s"), if_uncertain="run")
    def flaky(ctx: RunContext) -> None:
        calls.append(ctx.attempt)
        raise ConnectionError("upstream")

    clock.advance_to(START + timedelta(hours=1))
    records = await scheduler.run_due()
    await scheduler.stop()
    assert calls == [1, 2, 3]
    assert [(r.attempt, r.status, r.reason) for r in records] == [
        (1, "error", "retried"),
        (2, "error", "retried"),
        (3, "error", "claim_not_durable"),
    ]


async def test_an_uncertain_retry_after_a_confirmed_claim_is_skipped() -> None:
    """Confirmed first claim, uncertain retry: attempt 1's error stands, attempt 2 is skipped."""
    clock = FakeClock(START)
    backend = MemoryBackend(clock=clock)
    runs = backend.runs
    assert runs is not None
    wrapper = make_claims_uncertain(backend, jobs=set())  # nothing yet
    scheduler = Scheduler(backend, clock=clock, instance_id="a")
    calls: list[int] = []

    @scheduler.every("flaky", "1h", retry=Retry(attempts=3, backoff="1s"))
    def flaky(ctx: RunContext) -> None:
        calls.append(ctx.attempt)
        wrapper.jobs = frozenset({"flaky"})  # the retry's claim will be uncertain
        raise ConnectionError("upstream")

    clock.advance_to(START + timedelta(hours=1))
    records = await scheduler.run_due()
    await scheduler.stop()
    assert calls == [1]
    assert [(r.attempt, r.status, r.reason) for r in records] == [
        (1, "error", "retried"),
        (2, "skipped", "claim_not_durable"),
    ]


def test_if_uncertain_is_validated_with_a_coded_error() -> None:
    """A value other than ``"skip"``/``"run"``: ``ANARCHON_INVALID_JOB`` naming the value."""
    scheduler = Scheduler(MemoryBackend())
    with pytest.raises(InvalidJobError, match=r"if_uncertain.*'always'") as caught:
        scheduler.every("x", "1m", lambda ctx: None, if_uncertain="always")  # type: ignore[call-overload]
    assert caught.value.code == "ANARCHON_INVALID_JOB"
    scheduler.every("y", "1m", lambda ctx: None, if_uncertain="run")
    scheduler.every("z", "1m", lambda ctx: None)
    assert scheduler.jobs["y"].if_uncertain == "run"
    assert scheduler.jobs["z"].if_uncertain == "skip"


def test_if_uncertain_needs_leases() -> None:
    """Like the other lease options, ``if_uncertain`` on a claim-only backend is refused."""
    scheduler = Scheduler(PlainBackend(leases=False))
    with pytest.raises(UnsupportedError, match="if_uncertain"):
        scheduler.every("x", "1m", lambda ctx: None, if_uncertain="run")
    with pytest.raises(UnsupportedError, match="no leases"):
        make_claims_uncertain(PlainBackend(leases=False))
