"""The scheduler's lease duties on the memory backend (docs/leases.md): backups, takeover,
bounded attempts, overlap, catch-up, hand-over, lost leases, timeouts, skewed clocks."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from anarchon import (
    Backend,
    Cron,
    MemoryBackend,
    RunContext,
    Scheduler,
    SkewedClock,
    UnsupportedError,
)
from due_now import yearly_due_now

DUE = yearly_due_now()
"""A yearly slot due a minute before import: no other slot falls inside a test."""

FAST: dict[str, Any] = {"lease": "600ms", "heartbeat": "200ms"}


def _crash(scheduler: Scheduler) -> None:
    """Kill a scheduler like ``kill -9`` would: its tasks stop, nothing is released or finished."""
    for task in scheduler._every_task():
        task.cancel()
    scheduler._started = False


async def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> float:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)
    return time.monotonic() - t0


class Recorder:
    """A handler that records each start and blocks (async) until released or cancelled."""

    def __init__(self, hold: float = 30.0) -> None:
        self.starts: list[RunContext] = []
        self.started_at: list[float] = []
        self.cancelled: list[str | None] = []
        self.hold = hold

    async def __call__(self, ctx: RunContext) -> None:
        self.starts.append(ctx)
        self.started_at.append(time.monotonic())
        try:
            await asyncio.sleep(self.hold)
        except asyncio.CancelledError:
            self.cancelled.append(ctx.cancelled.reason)
            raise


def _hourly_now(
    handler: Callable[[RunContext], Awaitable[None]], scheduler: Scheduler, **options: Any
) -> None:
    """A job whose current hourly slot is claimable at once (max_late covers the past hour)."""
    scheduler.cron("hourly", DUE, handler, jitter=0, max_late="2h", **options)


async def _runner_then_backup(
    runner_backend: Backend, backup_backend: Backend, **runner_options: Any
) -> tuple[Scheduler, Scheduler, Recorder, Recorder]:
    """Instance ``a`` wins the hourly slot and holds it; then ``b`` starts as its backup."""
    first, second = Recorder(), Recorder(hold=0.05)
    a = Scheduler(runner_backend, instance_id="a", **runner_options, **FAST)
    b = Scheduler(backup_backend, instance_id="b", **FAST)
    _hourly_now(first, a)
    _hourly_now(second, b)
    await a.start()
    await _until(lambda: bool(first.starts))
    await b.start()
    return a, b, first, second


async def _history_after_takeover(b: Scheduler) -> list[tuple[int, str, str]]:
    """Let attempt 2 finish on ``b``, stop it, and return ``(attempt, instance, status)`` rows."""
    await asyncio.sleep(0.2)
    await b.stop()
    return [(r.attempt, r.instance_id, r.status) for r in await b.history("hourly")]


TAKEN_OVER = [(2, "b", "ok"), (1, "a", "interrupted")]


async def test_crashed_runner_is_taken_over_within_lease_plus_heartbeat() -> None:
    backend = MemoryBackend()
    a, b, first, second = await _runner_then_backup(backend, backend)
    await asyncio.sleep(0.3)
    assert not second.starts, "the backup ran while the lease was live"
    _crash(a)
    crashed = time.monotonic()
    await _until(lambda: bool(second.starts), timeout=3)
    took_over = time.monotonic() - crashed
    assert took_over <= 0.6 + 0.2 + 0.25  # lease + heartbeat, plus scheduling slack
    assert second.starts[0].attempt == 2
    assert second.starts[0].slot == first.starts[0].slot
    assert await _history_after_takeover(b) == TAKEN_OVER
    assert (await b.history("hourly"))[1].reason == "lease_lost"


async def test_attempts_are_bounded() -> None:
    backend = MemoryBackend()
    recorders = [Recorder(), Recorder(), Recorder()]
    schedulers = [Scheduler(backend, instance_id=f"s{n}", **FAST) for n in range(3)]
    for scheduler, recorder in zip(schedulers, recorders, strict=False):
        _hourly_now(recorder, scheduler, max_attempts=2)
    await schedulers[0].start()
    await _until(lambda: bool(recorders[0].starts))
    await schedulers[1].start()
    await schedulers[2].start()
    _crash(schedulers[0])
    await _until(lambda: bool(recorders[1].starts) or bool(recorders[2].starts), timeout=3)
    runner = 1 if recorders[1].starts else 2
    _crash(schedulers[runner])
    await asyncio.sleep(1.5)
    other = 3 - runner
    assert not recorders[other].starts, "a third attempt ran although max_attempts=2"
    await schedulers[other].stop()
    history = await schedulers[other].history("hourly")
    assert [r.attempt for r in history] == [2, 1]
    assert history[0].status == "interrupted"
    assert history[0].reason == "attempts_exhausted"
    active = await backend.runs.active("hourly")  # type: ignore[union-attr]
    assert active == []


async def test_overlap_is_skipped_and_recorded() -> None:
    backend = MemoryBackend()
    runs: list[int] = []

    async def slow(ctx: RunContext) -> None:
        runs.append(ctx.slot)
        await asyncio.sleep(0.55)

    async with Scheduler(backend, instance_id="o", **FAST) as scheduler:
        scheduler.every("slow", "200ms", slow, jitter=0)
        await asyncio.sleep(1.3)
    history = await scheduler.history("slow", limit=50)
    skipped = [r for r in history if r.status == "skipped"]
    assert skipped
    assert all(r.reason == "overlap" for r in skipped)
    ran = [r for r in history if r.status != "skipped"]
    for earlier, later in zip(
        sorted(ran, key=lambda r: r.slot), sorted(ran, key=lambda r: r.slot)[1:], strict=False
    ):
        assert earlier.finished_at is not None
        assert earlier.finished_at <= later.started_at + 5
    assert len(runs) == len(ran)


async def test_overlap_true_allows_concurrent_runs() -> None:
    concurrent = 0
    peak = 0

    async def slow(ctx: RunContext) -> None:
        nonlocal concurrent, peak
        concurrent += 1
        peak = max(peak, concurrent)
        await asyncio.sleep(0.5)
        concurrent -= 1

    async with Scheduler(MemoryBackend(), instance_id="o", **FAST) as scheduler:
        scheduler.every("slow", "100ms", slow, jitter=0, overlap=True)
        await asyncio.sleep(1.0)
    assert peak >= 3


async def test_catch_up_after_downtime_runs_one_slot() -> None:
    backend = MemoryBackend()
    ran: list[int] = []

    async def job(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler = Scheduler(backend, instance_id="late-riser", **FAST)
    scheduler.every("c", "1s", job, jitter=0, max_late="200ms", catch_up="30s")
    start = time.time() * 1000
    async with scheduler:
        await asyncio.sleep(0.1)
    missed = [slot for slot in ran if slot < start - 200]
    assert len(missed) == 1, ran
    assert start - 1200 <= missed[0] < start - 200


async def test_catch_up_is_not_repeated_by_a_second_instance() -> None:
    backend = MemoryBackend()
    ran: list[tuple[int, str]] = []

    async def job(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id))

    schedulers = [Scheduler(backend, instance_id=f"i{n}", **FAST) for n in range(3)]
    for scheduler in schedulers:
        scheduler.every("c", "10s", job, jitter=0, max_late="100ms", catch_up="1h")
    for scheduler in schedulers:
        await scheduler.start()
    await asyncio.sleep(0.3)
    for scheduler in schedulers:
        await scheduler.stop()
    slots = Counter(slot for slot, _ in ran)
    assert len(slots) >= 1
    assert all(c == 1 for c in slots.values())


async def test_hand_over_on_stop_runs_attempt_two_elsewhere() -> None:
    backend = MemoryBackend()
    a, b, first, second = await _runner_then_backup(backend, backend, stop_grace="100ms")
    await asyncio.sleep(0.05)
    await a.stop()
    stopped = time.monotonic()
    assert first.cancelled == ["stop"]
    await _until(lambda: bool(second.starts), timeout=2)
    assert time.monotonic() - stopped <= 0.2 + 0.25, "hand-over not taken up within one heartbeat"
    assert second.starts[0].attempt == 2
    assert await _history_after_takeover(b) == TAKEN_OVER
    assert (await b.history("hourly"))[1].reason == "handed_over"


async def test_blocking_sync_handler_does_not_starve_the_heartbeat() -> None:
    backend = MemoryBackend()
    starts: list[int] = []
    # A 2 s lease renewed every 500 ms: three renewals may come late (a loaded
    # machine) before it runs out; the handler blocks for 2.5 leases.
    leases: dict[str, Any] = {"lease": "2s", "heartbeat": "500ms"}

    def blocking(ctx: RunContext) -> None:
        starts.append(ctx.attempt)
        time.sleep(5.0)

    a = Scheduler(backend, instance_id="a", **leases)
    b = Scheduler(backend, instance_id="b", **leases)
    _hourly_now(blocking, a)
    _hourly_now(blocking, b)
    await a.start()
    await _until(lambda: bool(starts))
    await b.start()
    await asyncio.sleep(5.5)
    await a.stop()
    await b.stop()
    assert starts == [1]
    history = await a.history("hourly")
    assert [(r.attempt, r.status) for r in history] == [(1, "ok")]


class _Partition(Backend):
    """Fault injection in front of a real store: while ``down``, every call fails like a dead network."""

    name = "partition"

    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner
        self.down = False
        self.runs = _PartitionRuns(self)

    def _check(self) -> None:
        if self.down:
            raise ConnectionError("network partition (injected)")

    async def init(self) -> None:
        await self.inner.init()

    async def prepare_job(self, job: str, history_size: int) -> None:
        await self.inner.prepare_job(job, history_size)

    async def claim(self, input: Any) -> bool:
        self._check()
        return await self.inner.claim(input)

    async def record_manual_run(self, input: Any) -> int | None:
        self._check()
        return await self.inner.record_manual_run(input)

    async def save_result(
        self, job: str, result: Any, history_size: int, history_ttl_ms: int | None = None
    ) -> None:
        self._check()
        await self.inner.save_result(job, result, history_size, history_ttl_ms)

    async def history(self, job: str, limit: int) -> list[Any]:
        return await self.inner.history(job, limit)

    async def close(self) -> None:
        return None


class _PartitionRuns:
    def __init__(self, outer: _Partition) -> None:
        self.outer = outer

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.outer.inner.runs, name)

        async def call(*args: Any) -> Any:
            if name != "now_ms":
                self.outer._check()
            return await target(*args)

        return call


async def test_lost_lease_cancels_and_never_overwrites_the_new_runner() -> None:
    store = MemoryBackend()
    cut = _Partition(store)
    a, b, first, second = await _runner_then_backup(cut, store)
    cut.down = True
    cut_at = time.monotonic()
    await _until(lambda: bool(first.cancelled), timeout=3)
    assert first.cancelled == ["lease_lost"]
    assert time.monotonic() - cut_at <= 0.6 + 0.2
    await _until(lambda: bool(second.starts), timeout=3)
    assert second.starts[0].attempt == 2
    cut.down = False
    assert await _history_after_takeover(b) == TAKEN_OVER
    await a.stop()


async def test_timeout_cancels_the_handler() -> None:
    seen: list[str | None] = []

    async def slow(ctx: RunContext) -> None:
        try:
            await asyncio.sleep(5)
        finally:
            seen.append(ctx.cancelled.reason)

    async with Scheduler(MemoryBackend(), instance_id="t", **FAST) as scheduler:
        _hourly_now(slow, scheduler, timeout="150ms")
        await _until(lambda: bool(seen), timeout=2)
        await asyncio.sleep(0.05)
    assert seen == ["timeout"]
    record = await scheduler.last_run("hourly")
    assert record is not None
    assert record.status == "timeout"


async def test_skewed_clocks_never_double_run() -> None:
    backend = MemoryBackend()
    ran: list[tuple[int, str]] = []

    async def job(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id))

    skews = {"behind": -300_000, "exact": 0, "ahead": 300_000}
    schedulers = [
        Scheduler(backend, instance_id=name, clock=SkewedClock(offset), **FAST)
        for name, offset in skews.items()
    ]
    for scheduler in schedulers:
        scheduler.every("skew", "100ms", job, jitter="20ms")
    for scheduler in schedulers:
        await scheduler.start()
    await asyncio.sleep(3)
    for scheduler in schedulers:
        await scheduler.stop()
    slots = Counter(slot for slot, _ in ran)
    assert len(slots) >= 25
    assert all(c == 1 for c in slots.values())
    ordered = sorted(slots)
    assert ordered == list(range(ordered[0], ordered[-1] + 100, 100))
    now = time.time() * 1000
    assert all(slot <= now for slot in slots), "a slot ran before its time"


def _ClaimsOnly() -> MemoryBackend:  # noqa: N802 - reads like the class it builds
    """The memory store without its lease store: a claim-only backend."""
    return MemoryBackend(leases=False)


@pytest.mark.parametrize("option", [{"overlap": False}, {"max_attempts": 3}, {"catch_up": "1m"}])
def test_lease_options_refused_without_leases(option: dict[str, Any]) -> None:
    scheduler = Scheduler(_ClaimsOnly())
    with pytest.raises(UnsupportedError) as info:
        scheduler.every("x", "1s", lambda ctx: None, **option)
    assert info.value.code == "ANARCHON_UNSUPPORTED"
    scheduler.every("y", "1s", lambda ctx: None)  # defaults simply do not apply


@pytest.mark.parametrize("option", [{"lease": "30s"}, {"heartbeat": "10s"}])
def test_scheduler_lease_options_refused_without_leases(option: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedError):
        Scheduler(_ClaimsOnly(), **option)


def test_cron_job_with_lease_options_on_memory() -> None:
    scheduler = Scheduler(MemoryBackend())
    job = scheduler.add("c", Cron("*/5 * * * *"), lambda ctx: None, max_attempts=5, overlap=True)
    assert job.limits().max_attempts == 5
    assert job.limits().overlap is True
    assert job.limits().catch_up_ms is None


async def test_each_outage_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryBackend()
    cut = _Partition(store)
    ran: list[int] = []

    async def job(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    caplog.set_level("INFO", logger="anarchon")
    async with Scheduler(cut, instance_id="flaky-net", **FAST) as scheduler:
        scheduler.every("tick", "100ms", job, jitter=0)
        for _ in range(2):
            await asyncio.sleep(0.4)
            cut.down = True
            await asyncio.sleep(0.6)
            cut.down = False
        await asyncio.sleep(0.5)
    # A run in flight when the store went away loses its lease ("... while the store was
    # unreachable"): that is the run's log line, not the outage's.
    down = [
        r
        for r in caplog.records
        if "unreachable" in r.getMessage() and "lost its lease" not in r.getMessage()
    ]
    back = [r for r in caplog.records if "reachable again" in r.getMessage()]
    assert len(down) == 2, [r.getMessage() for r in down]
    assert len(back) == 2
    history = await store.history("tick", 100)
    slots = [r.slot for r in history]
    assert len(slots) == len(set(slots))
    assert max(ran) > min(ran) + 1500, "the scheduler did not resume after the outages"
