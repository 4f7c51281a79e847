"""Retry on error (docs/retries.md): validation, attempts in history, backoff, next-slot rule,
takeover of a crashed retry; on the native memory store, the base-class fallback and without leases."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from anarchon import (
    Backend,
    InvalidJobError,
    MemoryBackend,
    Retry,
    RunContext,
    RunKey,
    RunRecord,
    Scheduler,
)
from anarchon.errors import UnsupportedError
from due_now import yearly_due_now
from plain_backend import PlainBackend

FAST: dict[str, Any] = {"lease": "600ms", "heartbeat": "200ms"}


class FailsTwice:
    """Raises on the first two calls, then succeeds; records when each call started."""

    def __init__(self, fails: int = 2, error: type[Exception] = RuntimeError) -> None:
        self.fails = fails
        self.error = error
        self.calls: list[tuple[int, float]] = []

    async def __call__(self, ctx: RunContext) -> None:
        self.calls.append((ctx.attempt, time.monotonic()))
        if len(self.calls) <= self.fails:
            raise self.error(f"boom {len(self.calls)}")


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def _three_attempts(scheduler: Scheduler, handler: FailsTwice, job: str) -> list[RunRecord]:
    """Run ``scheduler`` until ``handler`` was called three times and the run's end is stored;
    the job's history by attempt."""
    await scheduler.start()
    try:
        await _until(lambda: len(handler.calls) == 3)
        for _ in range(200):
            records = await scheduler.history(job, 10)
            if records and records[0].status == "ok":
                break
            await asyncio.sleep(0.01)
    finally:
        await scheduler.stop()
    return sorted(await scheduler.history(job, 10), key=lambda r: r.attempt)


def _backends() -> list[tuple[str, Any]]:
    return [
        ("memory-native", lambda: MemoryBackend()),
        ("fallback", lambda: PlainBackend()),
        ("no-leases", lambda: MemoryBackend(leases=False)),
    ]


@pytest.mark.parametrize(("kind", "make"), _backends(), ids=[k for k, _ in _backends()])
async def test_fails_twice_then_succeeds_shows_three_attempts(kind: str, make: Any) -> None:
    backend: Backend = make()
    handler = FailsTwice()
    options: dict[str, Any] = FAST if backend.runs is not None else {}
    scheduler = Scheduler(backend, instance_id="a", **options)
    scheduler.cron(
        "flaky", yearly_due_now(), handler, jitter=0, max_late="2h", retry=Retry(3, "200ms", "1s")
    )
    records = await _three_attempts(scheduler, handler, "flaky")
    assert [(r.attempt, r.status) for r in records] == [(1, "error"), (2, "error"), (3, "ok")]
    assert records[0].error == "RuntimeError: boom 1"
    assert records[1].error == "RuntimeError: boom 2"
    assert records[0].reason == records[1].reason == "retried"
    assert len({r.slot for r in records}) == 1
    # the backoff: 200 ms before retry 1, 400 ms before retry 2
    assert [a for a, _t in handler.calls] == [1, 2, 3]
    gaps = [b - a for (_x, a), (_y, b) in zip(handler.calls, handler.calls[1:])]  # noqa: B905
    assert gaps[0] >= 0.19
    assert gaps[1] >= 0.39
    assert records[1].started_at is not None
    assert records[0].finished_at is not None
    assert records[1].started_at - records[0].finished_at >= 190


@pytest.mark.parametrize(("kind", "make"), _backends()[:2], ids=[k for k, _ in _backends()[:2]])
async def test_a_heartbeat_answered_after_the_retry_does_not_end_the_next_attempt(
    kind: str, make: Any
) -> None:
    """A renewal of attempt 1 in flight while the retry starts attempt 2: the store refuses the
    old token, and that answer is about an attempt that has ended, not the running one."""
    backend: Backend = make()
    runs = backend.runs
    assert runs is not None
    renew = runs.heartbeat
    beats: list[float] = []
    answers: list[bool] = []

    async def slow_renewal(job: str, slot: int, token: str, lease_ms: int) -> bool:
        beats.append(time.monotonic())
        await asyncio.sleep(0.4)  # answered after the handler failed and the retry began
        answers.append(await renew(job, slot, token, lease_ms))
        return answers[-1]

    async def slow_renewals(keys: Sequence[RunKey], lease_ms: int) -> list[bool]:
        return [await slow_renewal(k.job, k.slot, k.token, lease_ms) for k in keys]

    runs.heartbeat = slow_renewal  # type: ignore[method-assign]
    runs.heartbeat_many = slow_renewals  # type: ignore[method-assign]
    handler = FailsTwice()

    async def first_call_slow(ctx: RunContext) -> None:
        if ctx.attempt == 1:
            await asyncio.sleep(0.7)  # a renewal (sent 0.5 s in) is in flight now
        await handler(ctx)

    lost: list[Any] = []
    scheduler = Scheduler(backend, instance_id="a", lease="1500ms", heartbeat="500ms")
    scheduler.on("lease_lost", lost.append)
    scheduler.cron(
        "renewed",
        yearly_due_now(),
        first_call_slow,
        jitter=0,
        max_late="2h",
        retry=Retry(3, "200ms", "1s"),
    )
    records = await _three_attempts(scheduler, handler, "renewed")
    assert beats
    assert beats[0] < handler.calls[0][1], "a renewal was in flight at the failure"
    assert False in answers, "the store refused the renewal of attempt 1"
    assert [(r.attempt, r.status) for r in records] == [(1, "error"), (2, "error"), (3, "ok")]
    assert lost == []


async def test_only_listed_errors_are_retried() -> None:
    handler = FailsTwice(error=KeyError)
    scheduler = Scheduler(MemoryBackend(), instance_id="a", **FAST)
    scheduler.cron(
        "picky",
        yearly_due_now(),
        handler,
        jitter=0,
        max_late="2h",
        retry=Retry(3, 0, on=(ValueError,)),
    )
    await scheduler.start()
    try:
        await _until(lambda: len(handler.calls) == 1)
        await asyncio.sleep(0.2)
    finally:
        await scheduler.stop()
    records = await scheduler.history("picky", 10)
    assert [(r.attempt, r.status, r.reason) for r in records] == [(1, "error", None)]


async def test_attempts_bound_the_retries() -> None:
    handler = FailsTwice(fails=10)
    scheduler = Scheduler(MemoryBackend(), instance_id="a", **FAST)
    scheduler.cron("doomed", yearly_due_now(), handler, jitter=0, max_late="2h", retry=Retry(2, 0))
    await scheduler.start()
    try:
        await _until(lambda: len(handler.calls) == 2)
        await asyncio.sleep(0.2)
    finally:
        await scheduler.stop()
    records = sorted(await scheduler.history("doomed", 10), key=lambda r: r.attempt)
    assert [(r.attempt, r.status) for r in records] == [(1, "error"), (2, "error")]
    assert len(handler.calls) == 2


async def test_a_retry_never_starts_after_the_next_slot() -> None:
    handler = FailsTwice(fails=100)
    scheduler = Scheduler(MemoryBackend(), instance_id="a", **FAST)
    # every 1 s; a 5 s backoff would start after the next slot: no retry
    scheduler.every("tight", "1s", handler, jitter=0, retry=Retry(3, "5s", "5s"))
    await scheduler.start()
    try:
        await _until(lambda: len(handler.calls) >= 3, timeout=10)
    finally:
        await scheduler.stop()
    records = await scheduler.history("tight", 50)
    assert records
    assert all(r.attempt == 1 for r in records)
    slots = [r.slot for r in records]
    assert len(slots) == len(set(slots))


async def test_with_overlap_a_retry_may_start_after_the_next_slot() -> None:
    handler = FailsTwice(fails=1)
    scheduler = Scheduler(MemoryBackend(), instance_id="a", **FAST)
    scheduler.every(
        "loose", "300ms", handler, jitter=0, overlap=True, retry=Retry(2, "700ms", "700ms")
    )
    await scheduler.start()
    try:
        await _until(lambda: any(a == 2 for a, _t in handler.calls), timeout=10)
    finally:
        await scheduler.stop()
    records = await scheduler.history("loose", 50)
    retried = [r for r in records if r.attempt == 2]
    assert retried
    assert retried[0].status == "ok"


async def test_a_crash_during_the_backoff_is_taken_over() -> None:
    backend = MemoryBackend()
    first = FailsTwice(fails=100)
    second = FailsTwice(fails=0)
    a = Scheduler(backend, instance_id="a", **FAST)
    b = Scheduler(backend, instance_id="b", **FAST)
    due = yearly_due_now()  # one slot for both
    a.cron("crashy", due, first, jitter=0, max_late="2h", retry=Retry(3, "30s", "30s"))
    b.cron("crashy", due, second, jitter=0, max_late="2h", retry=Retry(3, "30s", "30s"))
    await a.start()
    await _until(lambda: len(first.calls) == 1)
    await asyncio.sleep(0.1)  # attempt 2 has started (the retry's backoff)
    for task in a._every_task():  # kill -9
        task.cancel()
    a._started = False
    await b.start()
    try:
        await _until(lambda: len(second.calls) == 1, timeout=10)
        for _ in range(200):
            records = await b.history("crashy", 10)
            if records and records[0].status == "ok":
                break
            await asyncio.sleep(0.01)
    finally:
        await b.stop()
    records = sorted(await b.history("crashy", 10), key=lambda r: r.attempt)
    assert [(r.attempt, r.status, r.instance_id) for r in records] == [
        (1, "error", "a"),
        (2, "interrupted", "a"),
        (3, "ok", "b"),
    ]
    assert records[1].reason == "lease_lost"


def test_retry_is_validated_at_declaration() -> None:
    for bad in (
        {"attempts": 0},
        {"attempts": True},
        {"attempts": 2.5},
        {"backoff": "soon"},
        {"backoff": "10s", "max_backoff": "1s"},
        {"on": ()},
        {"on": (int,)},
        {"on": "ValueError"},
    ):
        with pytest.raises(InvalidJobError) as caught:
            Retry(**bad)
        assert caught.value.code == "ANARCHON_INVALID_JOB"
    scheduler = Scheduler(MemoryBackend(), instance_id="a")
    with pytest.raises(InvalidJobError, match=r"anarchon\.Retry"):
        scheduler.every("x", "1s", FailsTwice(), retry=3)  # type: ignore[typeddict-item]


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = Retry(attempts=6, backoff="10s", max_backoff="1m")
    assert [policy.delay_ms(n) for n in range(1, 6)] == [10_000, 20_000, 40_000, 60_000, 60_000]
    assert Retry(attempts=2, backoff=0).delay_ms(1) == 0


def test_retry_needs_no_leases() -> None:
    scheduler = Scheduler(MemoryBackend(leases=False), instance_id="a")
    scheduler.every("ok", "1s", FailsTwice(), retry=Retry())
    with pytest.raises(UnsupportedError):
        scheduler.every("no", "1s", FailsTwice(), max_attempts=2)


async def test_a_stop_during_the_backoff_hands_the_slot_over() -> None:
    backend = MemoryBackend()
    first = FailsTwice(fails=100)
    second = FailsTwice(fails=0)
    a = Scheduler(backend, instance_id="a", stop_grace="200ms", **FAST)
    b = Scheduler(backend, instance_id="b", **FAST)
    due = yearly_due_now()  # one slot for both
    a.cron("handy", due, first, jitter=0, max_late="2h", retry=Retry(3, "30s", "30s"))
    b.cron("handy", due, second, jitter=0, max_late="2h", retry=Retry(3, "30s", "30s"))
    await a.start()
    await _until(lambda: len(first.calls) == 1)
    await b.start()
    await asyncio.sleep(0.1)  # b is a backup of attempt 2 (in its backoff)
    await a.stop()
    try:
        await _until(lambda: len(second.calls) == 1, timeout=10)
        for _ in range(200):
            records = await b.history("handy", 10)
            if records and records[0].status == "ok":
                break
            await asyncio.sleep(0.01)
    finally:
        await b.stop()
    records = sorted(await b.history("handy", 10), key=lambda r: r.attempt)
    assert [(r.attempt, r.status, r.reason, r.instance_id) for r in records] == [
        (1, "error", "retried", "a"),
        (2, "interrupted", "handed_over", "a"),
        (3, "ok", None, "b"),
    ]
