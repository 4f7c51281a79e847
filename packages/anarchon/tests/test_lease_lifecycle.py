"""A lease lives as long as its handler; the safety margin; fencing; the small fixes (docs/leases.md).

All on the memory backend (a real store in this process); two schedulers on
one backend are two instances.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from anarchon import MemoryBackend, Retry, RunContext, Scheduler
from anarchon._scheduler.leases import safety_margin_ms
from anarchon.backend.memory import MemoryRunStore
from anarchon.context import CancelSignal
from anarchon.types import ClaimOutcome, RunClaim, RunKey
from due_now import yearly_due_now

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""

FAST: dict[str, Any] = {"lease": "600ms", "heartbeat": "200ms"}


async def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "condition not reached in time"
        await asyncio.sleep(0.01)


def test_cancel_signal_is_false_until_set() -> None:
    signal = CancelSignal()
    assert not signal
    assert bool(signal) is False
    signal.set("stop")
    assert signal
    assert signal.reason == "stop"


def test_safety_margin_is_one_heartbeat_within_the_slack() -> None:
    assert safety_margin_ms(30_000, 10_000) == 10_000
    assert safety_margin_ms(3_000, 1_000) == 1_000
    assert safety_margin_ms(3_000, 2_000) == 500  # half the slack: a renewal still lands in time
    assert safety_margin_ms(1_000, 999) == 0


async def test_fencing_token_and_still_owner_while_running() -> None:
    backend = MemoryBackend()
    seen: list[tuple[int, bool, bool]] = []

    def sync_handler(ctx: RunContext) -> None:
        seen.append((ctx.fencing_token, ctx.still_owner_sync(timeout=2), bool(ctx.cancelled)))

    async def async_handler(ctx: RunContext) -> None:
        seen.append((ctx.fencing_token, await ctx.still_owner(), bool(ctx.cancelled)))

    scheduler = Scheduler(backend, instance_id="a", **FAST)
    scheduler.cron("sync", DUE, sync_handler, jitter=0, max_late="2h")
    scheduler.cron("async", DUE, async_handler, jitter=0, max_late="2h")
    async with scheduler:
        await _until(lambda: len(seen) == 2)
    assert seen == [(1, True, False), (1, True, False)]


async def test_fencing_key_is_the_attempt_and_the_token_that_holds_the_lease() -> None:
    """``ctx.fencing_key`` is ``(attempt, token)``; the store's lease is held by that token."""
    backend = MemoryBackend()
    store = backend.runs
    assert store is not None
    keys: list[tuple[tuple[int, str], str | None]] = []

    async def handler(ctx: RunContext) -> None:
        holder = [a.token for a in await store.active(ctx.job) if a.slot == ctx.slot]
        keys.append((ctx.fencing_key, holder[0] if holder else None))
        if ctx.attempt == 1:
            raise ConnectionError("the next attempt gets a token of its own")

    scheduler = Scheduler(backend, instance_id="a", **FAST)
    scheduler.cron("job", DUE, handler, jitter=0, max_late="2h", retry=Retry(attempts=2, backoff=0))
    async with scheduler:
        await _until(lambda: len(keys) == 2)
    (first, held_first), (second, held_second) = keys
    assert (first[0], second[0]) == (1, 2)
    assert first[1] != second[1]
    assert (held_first, held_second) == (first[1], second[1])


async def test_still_owner_is_false_once_another_attempt_owns_the_run() -> None:
    """The store ends this attempt's lease under it: still_owner() says False and cancels."""
    backend = MemoryBackend()
    store = backend.runs
    assert store is not None
    answers: list[bool] = []
    reasons: list[str | None] = []

    async def handler(ctx: RunContext) -> None:
        answers.append(await ctx.still_owner())
        await store.release(ctx.job, ctx.slot, ctx.token)  # as if a backup had taken over
        answers.append(await ctx.still_owner())
        reasons.append(ctx.cancelled.reason)

    scheduler = Scheduler(backend, instance_id="a", **FAST)
    scheduler.cron("job", DUE, handler, jitter=0, max_late="2h")
    async with scheduler:
        await _until(lambda: len(reasons) == 1)
    assert answers == [True, False]
    assert reasons == ["lease_lost"]


async def test_still_owner_without_leases_is_true_unless_cancelled() -> None:
    backend = MemoryBackend(leases=False)
    seen: list[tuple[int, bool]] = []

    async def handler(ctx: RunContext) -> None:
        seen.append((ctx.fencing_token, await ctx.still_owner()))

    scheduler = Scheduler(backend, instance_id="a")
    scheduler.cron("job", DUE, handler, jitter=0, max_late="2h")
    async with scheduler:
        await _until(lambda: len(seen) == 1)
    assert seen == [(1, True)]


async def test_still_owner_sync_refuses_the_event_loop() -> None:
    backend = MemoryBackend()
    errors: list[str] = []

    async def handler(ctx: RunContext) -> None:
        try:
            ctx.still_owner_sync()
        except Exception as error:
            errors.append(getattr(error, "code", ""))

    scheduler = Scheduler(backend, instance_id="a", **FAST)
    scheduler.cron("job", DUE, handler, jitter=0, max_late="2h")
    async with scheduler:
        await _until(lambda: len(errors) == 1)
    assert errors == ["ANARCHON_INVALID_CONFIG"]


async def test_timed_out_sync_handler_keeps_its_lease_until_its_thread_returns() -> None:
    """timeout=300ms, a thread that sleeps 1.5 s, lease 600 ms: no backup starts beside it."""
    backend = MemoryBackend()
    intervals: list[tuple[str, int, float, float]] = []
    lock = threading.Lock()

    def handler(ctx: RunContext) -> None:
        start = time.monotonic()
        time.sleep(1.5)
        with lock:
            intervals.append((ctx.instance_id, ctx.attempt, start, time.monotonic()))

    a = Scheduler(backend, instance_id="a", **FAST)
    b = Scheduler(backend, instance_id="b", **FAST)
    for s in (a, b):
        s.cron("job", DUE, handler, jitter=0, max_late="2h", timeout="300ms")
    async with a:
        await asyncio.sleep(0.2)
        async with b:
            await asyncio.sleep(2.5)
    assert len(intervals) == 1, intervals  # the backup never got the slot
    history = await a.history("job")
    assert [(r.attempt, r.status) for r in history] == [(1, "timeout")]


async def test_async_handler_swallowing_cancellation_keeps_its_lease_at_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend()
    intervals: list[tuple[str, int, float, float]] = []

    async def handler(ctx: RunContext) -> None:
        start = time.monotonic()
        end = start + 1.5
        while time.monotonic() < end:
            try:
                await asyncio.sleep(end - time.monotonic())
            except asyncio.CancelledError:
                continue  # a handler that swallows cancellation
        intervals.append((ctx.instance_id, ctx.attempt, start, time.monotonic()))

    a = Scheduler(backend, instance_id="a", stop_grace="1s", **FAST)
    b = Scheduler(backend, instance_id="b", **FAST)
    for s in (a, b):
        s.cron("job", DUE, handler, jitter=0, max_late="2h", max_attempts=3)
    caplog.set_level(logging.WARNING, logger="anarchon")
    await a.start()
    await asyncio.sleep(0.05)
    async with b:
        await a.stop()  # grace 1 s, cancelled, then waited for: the handler lives 1.5 s
        await asyncio.sleep(1.0)  # b would take a released run over within a heartbeat
    # The handler returned normally: its run completed, it is finished, not handed over
    # (a backup would do the work a second time).
    assert [i[:2] for i in intervals] == [("a", 1)], intervals
    history = await b.history("job")
    assert [(r.attempt, r.instance_id, r.status) for r in history] == [(1, "a", "ok")]
    assert any("still runs after stop() cancelled it" in r.message for r in caplog.records)


async def test_a_sync_handler_outliving_stop_keeps_its_lease_until_it_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``stop()`` returns; the lease thread renews the lease, then finishes the run."""
    backend = MemoryBackend()
    intervals: list[tuple[str, int, float, float]] = []
    release, started = threading.Event(), threading.Event()

    def handler(ctx: RunContext) -> None:
        start = time.monotonic()
        started.set()
        release.wait(10)  # ignores ctx.cancelled: nothing can stop this thread
        intervals.append((ctx.instance_id, ctx.attempt, start, time.monotonic()))

    a = Scheduler(backend, instance_id="a", stop_grace="200ms", **FAST)
    b = Scheduler(backend, instance_id="b", **FAST)
    for s in (a, b):
        s.cron("job", DUE, handler, jitter=0, max_late="2h", max_attempts=3)
    caplog.set_level(logging.WARNING, logger="anarchon")
    await a.start()
    await _until(started.is_set)
    async with b:
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        await a.stop()  # 200 ms grace, cancelled, 200 ms more: then it returns
        assert time.monotonic() - t0 < 2.0
        await asyncio.sleep(2.0)  # more than three leases: b takes over a lease not renewed
        assert not intervals, intervals  # still running, and b has not started it
        active = await backend.runs.active("job") if backend.runs else []
        assert [(r.runner, r.live) for r in active] == [("a", True)]
        release.set()
        await _until(lambda: len(intervals) == 1)
        await _until(lambda: not waiters(), timeout=5)
        await asyncio.sleep(1.0)  # a released run would be taken over within a heartbeat
    assert [i[:2] for i in intervals] == [("a", 1)], intervals
    history = await b.history("job")
    assert [(r.attempt, r.instance_id, r.status) for r in history] == [(1, "a", "ok")]
    assert any("the lease thread renews its lease" in r.message for r in caplog.records)


def waiters() -> list[threading.Thread]:
    """The non-daemon threads that keep the interpreter up for runs that outlived stop()."""
    return [t for t in threading.enumerate() if t.name == "anarchon-lease-keeper-wait"]


class _SlowBeats(MemoryRunStore):
    """The memory store behind a slow link for heartbeats only (80 ms before each reaches it)."""

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        await asyncio.sleep(0.08)
        return await super().heartbeat_many(runs, lease_ms)


async def test_a_finish_racing_a_heartbeat_logs_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = MemoryBackend()
    backend._store = backend.runs = _SlowBeats()
    done: list[int] = []

    async def handler(ctx: RunContext) -> None:
        await asyncio.sleep(0.21 + 0.01 * (ctx.slot // 1000 % 7))  # ends while a heartbeat is out
        done.append(ctx.slot)

    scheduler = Scheduler(backend, instance_id="a", lease="300ms", heartbeat="100ms")
    scheduler.every("job", "500ms", handler, jitter=0)
    caplog.set_level(logging.WARNING, logger="anarchon")
    async with scheduler:
        await _until(lambda: len(done) >= 8, timeout=10)
    lost = [r.message for r in caplog.records if "lost its lease" in r.message]
    assert lost == []
    history = await scheduler.history("job", 50)
    assert sum(r.status == "ok" for r in history) >= 8


class _FutureKinds(MemoryRunStore):
    """A store speaking a newer protocol: every claim is answered with a kind this version lacks."""

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        await super().claim_many(claims)
        return [ClaimOutcome("from-the-future") for _ in claims]


async def test_an_unknown_claim_outcome_counts_as_done() -> None:
    backend = MemoryBackend()
    backend._store = backend.runs = _FutureKinds()
    ran: list[int] = []

    async def handler(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler = Scheduler(backend, instance_id="a", **FAST)
    scheduler.every("job", "100ms", handler, jitter=0)
    async with scheduler:
        await asyncio.sleep(0.5)
        parts = scheduler._parts
        assert parts is not None
        assert parts.executor.active == {}
        assert parts.keeper is not None
        assert parts.keeper._backups == []
    assert ran == []


def test_raise_if_set_raises_only_once_set() -> None:
    signal = CancelSignal()
    signal.raise_if_set()  # not set: nothing happens
    signal.set("stop")
    with pytest.raises(asyncio.CancelledError, match="stop"):
        signal.raise_if_set()
