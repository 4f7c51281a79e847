"""The rules core gives backend authors: InitOnce, the retention rule, the history default."""

from __future__ import annotations

import asyncio
import threading

import pytest
from anarchon.backend import (
    DEFAULT_HISTORY_SIZE,
    RETENTION_MARGIN_MS,
    InitOnce,
    StateRetention,
    history_over,
    history_to_keep,
    kept_runs,
    state_retention_ms,
    states_to_drop,
    ttl_cutoff,
)
from anarchon.jobs import DEFAULTS
from anarchon.types import JobLimits


class _Connecting:
    """A backend's init(): slow to connect, counting its connections."""

    def __init__(self) -> None:
        self.connected = False
        self.connects = 0
        self.fail_next = False
        self.once = InitOnce()

    async def _connect(self) -> None:
        self.connects += 1
        await asyncio.sleep(0.01)
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("refused")
        self.connected = True

    async def init(self) -> None:
        await self.once.run(lambda: self.connected, self._connect)


async def test_concurrent_inits_connect_once() -> None:
    backend = _Connecting()
    await asyncio.gather(*(backend.init() for _ in range(20)))
    assert backend.connects == 1
    await backend.init()
    assert backend.connects == 1


async def test_a_failed_init_reaches_its_caller_and_the_next_one_retries() -> None:
    backend = _Connecting()
    backend.fail_next = True
    with pytest.raises(ConnectionError):
        await backend.init()
    await backend.init()
    assert (backend.connects, backend.connected) == (2, True)


def test_another_event_loop_gets_a_lock_of_its_own() -> None:
    """A backend used from a second loop (e.g. a thread's) does not hit a foreign lock."""
    backend = _Connecting()
    asyncio.run(backend.init())
    first = backend.once._lock
    backend.connected = False  # e.g. closed
    errors: list[BaseException] = []

    def other_loop() -> None:
        try:
            asyncio.run(backend.init())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=other_loop)
    thread.start()
    thread.join()
    assert errors == []
    assert backend.once._lock is not first
    assert backend.connects == 2


async def test_reset_forgets_the_lock() -> None:
    once = InitOnce()
    lock = once.lock()
    assert once.lock() is lock
    once.reset()
    assert once.lock() is not lock


def test_the_history_default_is_the_job_option_default() -> None:
    assert DEFAULT_HISTORY_SIZE == DEFAULTS["history_size"] == 1000


def test_state_is_kept_for_late_and_catch_up_claims_plus_a_margin() -> None:
    late = JobLimits("j", 60_000, 2_000, 30_000, 10)
    assert state_retention_ms(late) == 30_000 + 2_000 + RETENTION_MARGIN_MS
    catch_up = JobLimits("j", 60_000, 0, 30_000, 10, catch_up_ms=3_600_000)
    assert state_retention_ms(catch_up) == 3_600_000 + RETENTION_MARGIN_MS


def test_a_job_keeps_the_widest_window_it_was_told() -> None:
    kept = StateRetention()
    assert kept.get("j") is None
    assert kept.learn(JobLimits("j", 1000, 0, 90_000, 10)) == 150_000
    assert kept.learn(JobLimits("j", 1000, 0, 5_000, 10)) == 150_000
    assert kept.get("j") == 150_000
    assert kept.get("other") is None


def test_history_is_trimmed_above_twice_the_size_to_the_newest_runs() -> None:
    assert kept_runs(0) == 1
    assert not history_over(20, 10)
    assert history_over(21, 10)
    runs = {f"t{slot}": (slot, 1) for slot in range(21)}
    assert history_to_keep(dict(list(runs.items())[:20]), set(), 10, None, 100, 0) is None
    keep = history_to_keep(runs, {3}, 10, None, 100, 0)
    assert keep == {f"t{slot}" for slot in range(11, 21)} | {"t3"}  # a running run stays


def test_history_past_the_ttl_goes_but_not_a_running_run() -> None:
    assert ttl_cutoff(1000, None) is None
    assert ttl_cutoff(1000, 300) == 700
    runs = {"old": (100, 1), "running": (200, 1), "new": (900, 1)}
    assert history_to_keep(runs, {200}, 10, 300, 1000, 100) == {"running", "new"}
    assert history_to_keep(runs, {200}, 10, 300, 1000, 800) is None  # nothing older than the TTL


def test_finished_state_older_than_the_window_goes_down_to_the_size() -> None:
    finished = {slot: slot != 2 for slot in range(10)}  # slot 2 still runs
    assert states_to_drop(finished, 4, 1000, 1005) == [0, 1, 3, 4]
    assert states_to_drop(finished, 4, 1000, 1000) == []  # all inside the window
