"""Memory-specific lease behaviour, driven by a hand-moved store clock (no sleeping)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

import pytest
from anarchon.backend.durability import check_durability
from anarchon.backend.memory import MemoryBackend, MemoryRunStore
from anarchon.errors import InvalidConfigError
from anarchon.types import PLAIN_CLAIM_LEASE_MS, ClaimInput, JobLimits, RunClaim, StoredResult

T = TypeVar("T")
START = 1_800_000_000_000
LEASE = 30_000


class ManualClock:
    """A store clock the test moves by hand."""

    def __init__(self, now: int = START) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def store(backend: MemoryBackend) -> MemoryRunStore:
    runs = backend.runs
    assert runs is not None
    return runs


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def claim(
    job: str,
    slot: int,
    token: str,
    *,
    lease_ms: int = LEASE,
    max_attempts: int = 3,
    overlap: bool = False,
    deadline_ms: int | None = None,
    create: bool = True,
    history_size: int = 1000,
    history_ttl_ms: int | None = None,
) -> RunClaim:
    return RunClaim(
        job=job,
        slot=slot,
        token=token,
        instance_id=f"i-{token}",
        lease_ms=lease_ms,
        max_attempts=max_attempts,
        overlap=overlap,
        deadline_ms=slot + 60_000 if deadline_ms is None else deadline_ms,
        create=create,
        history_size=history_size,
        history_ttl_ms=history_ttl_ms,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(clock: ManualClock) -> MemoryBackend:
    return MemoryBackend(clock=clock)


def test_store_clock_is_the_given_clock(backend: MemoryBackend, clock: ManualClock) -> None:
    assert run(backend.now_ms()) == START
    clock.advance(1234)
    assert run(store(backend).now_ms()) == START + 1234
    assert backend.clock is clock
    assert backend.name == "memory"
    assert backend.dedupe_window_ms == float("inf")


def test_lease_boundary_and_takeover(backend: MemoryBackend, clock: ManualClock) -> None:
    runs = store(backend)
    won = run(runs.claim(claim("j", START, "a")))
    assert (won.kind, won.attempt, won.lease_expires_at) == ("won", 1, START + LEASE)
    clock.advance(LEASE - 1)
    assert run(runs.claim(claim("j", START, "b", create=False))).kind == "running"
    clock.advance(1)  # store time == lease expiry: the lease is over
    taken = run(runs.claim(claim("j", START, "b", create=False)))
    assert (taken.kind, taken.attempt, taken.runner) == ("won", 2, "i-b")
    assert taken.lease_expires_at == START + 2 * LEASE
    records = run(backend.history("j", 10))
    assert [(r.attempt, r.status, r.reason, r.finished_at) for r in records] == [
        (2, "running", None, None),
        (1, "interrupted", "lease_lost", START + LEASE),
    ]


def test_deadline_boundary(backend: MemoryBackend, clock: ManualClock) -> None:
    clock.advance(60_000)
    assert run(store(backend).claim(claim("j", START, "a", deadline_ms=START + 60_000))).won
    clock.advance(1)
    late = run(store(backend).claim(claim("j", START + 1, "b", deadline_ms=START + 60_000)))
    assert late.kind == "late"


def test_attempts_are_bounded(backend: MemoryBackend, clock: ManualClock) -> None:
    runs = store(backend)
    for attempt, token in enumerate("abc", start=1):
        outcome = run(runs.claim(claim("j", START, token, max_attempts=3)))
        assert (outcome.kind, outcome.attempt) == ("won", attempt)
        clock.advance(LEASE)
    assert run(runs.claim(claim("j", START, "d", max_attempts=3))).kind == "done"
    records = run(backend.history("j", 10))
    assert [(r.attempt, r.status, r.reason) for r in records] == [
        (3, "interrupted", "attempts_exhausted"),
        (2, "interrupted", "lease_lost"),
        (1, "interrupted", "lease_lost"),
    ]
    assert run(runs.active("j")) == []


def test_expired_older_lease_does_not_cause_overlap(
    backend: MemoryBackend, clock: ManualClock
) -> None:
    runs = store(backend)
    assert run(runs.claim(claim("j", START, "a"))).won
    clock.advance(LEASE)
    assert run(runs.claim(claim("j", START + 1000, "b"))).won
    released = run(runs.claim(claim("j", START + 2000, "c", overlap=True)))
    assert released.won
    assert run(runs.release("j", START + 2000, "c"))
    assert run(runs.claim(claim("j", START + 3000, "d"))).kind == "overlap", "b is still live"


def test_release_then_takeover_records_handed_over_once(backend: MemoryBackend) -> None:
    runs = store(backend)
    assert run(runs.claim(claim("j", START, "a"))).won
    assert run(runs.release("j", START, "a"))
    assert run(runs.release("j", START, "a")), "a retried release is answered again"
    assert not run(runs.heartbeat("j", START, "a", LEASE))
    (active,) = run(runs.active("j"))
    assert not active.live
    taken = run(runs.claim(claim("j", START, "b", create=False)))
    assert (taken.kind, taken.attempt) == ("won", 2)
    records = run(backend.history("j", 10))
    assert [(r.attempt, r.status, r.reason) for r in records] == [
        (2, "running", None),
        (1, "interrupted", "handed_over"),
    ]
    assert not run(runs.release("j", START, "a"))


def test_released_token_cannot_reclaim(backend: MemoryBackend) -> None:
    runs = store(backend)
    first = claim("j", START, "a")
    assert run(runs.claim(first)).won
    assert run(runs.release("j", START, "a"))
    assert run(runs.claim(first)).kind == "done"


def test_finish_is_retry_safe(backend: MemoryBackend) -> None:
    runs = store(backend)
    assert run(runs.claim(claim("j", START, "a"))).won
    assert run(runs.finish("j", START, "a", "ok"))
    assert run(runs.finish("j", START, "a", "ok")), "a retried finish is answered again"
    assert not run(runs.finish("j", START, "b", "ok"))
    assert not run(runs.release("j", START, "a"))


def test_plain_claim_result_is_never_turned_into_interrupted(
    backend: MemoryBackend, clock: ManualClock
) -> None:
    first = ClaimInput("j", START, "a", "web-1")
    assert run(backend.claim(first))
    result = StoredResult(START, "a", "web-1", "ok", START, START + 10)
    run(backend.save_result("j", result, 1000))
    clock.advance(PLAIN_CLAIM_LEASE_MS + 1)
    assert not run(backend.claim(ClaimInput("j", START, "b", "web-2")))
    assert run(backend.claim(first)), "the winner's token wins again, even after its result"
    (record,) = run(backend.history("j", 10))
    assert (record.status, record.instance_id) == ("ok", "web-1")


def test_crashed_plain_claim_is_marked_interrupted_after_its_lease(
    backend: MemoryBackend, clock: ManualClock
) -> None:
    assert run(backend.claim(ClaimInput("j", START, "a", "web-1")))
    clock.advance(PLAIN_CLAIM_LEASE_MS)
    assert not run(backend.claim(ClaimInput("j", START, "b", "web-2")))
    (record,) = run(backend.history("j", 10))
    assert (record.status, record.reason) == ("interrupted", "attempts_exhausted")


def test_history_trimming_keeps_running_runs(backend: MemoryBackend, clock: ManualClock) -> None:
    runs, size = store(backend), 5
    slots = [START + i * 1000 for i in range(40)]
    kept_running = set(slots[:3])
    for i, slot in enumerate(slots):
        token = f"t{i}"
        outcome = run(runs.claim(claim("j", slot, token, overlap=True, history_size=size)))
        assert outcome.won
        if slot not in kept_running:
            assert run(runs.finish("j", slot, token, "ok"))
            result = StoredResult(slot, token, f"i-{token}", "ok", slot, slot + 1)
            run(backend.save_result("j", result, size))
        clock.advance(1000)
    records = run(backend.history("j", 1000))
    finished = [r for r in records if r.status == "ok"]
    running = [r for r in records if r.status == "running"]
    assert size <= len(finished) <= 2 * size
    assert {r.slot for r in running} == kept_running, "running runs are never trimmed"
    assert [r.slot for r in finished][:size] == sorted(slots, reverse=True)[:size]
    assert {a.slot for a in run(runs.active("j"))} == kept_running


def test_history_ttl_keeps_running_runs(backend: MemoryBackend, clock: ManualClock) -> None:
    runs, ttl = store(backend), 10_000
    assert run(runs.claim(claim("j", START, "old-running", history_ttl_ms=ttl))).won
    assert run(runs.claim(claim("j", START + 1, "old-done", overlap=True, history_ttl_ms=ttl))).won
    assert run(runs.finish("j", START + 1, "old-done", "ok"))
    run(backend.save_result("j", StoredResult(START + 1, "old-done", "x", "ok"), 1000, ttl))
    clock.advance(ttl + 5_000)
    fresh = claim("j", clock.now, "fresh", overlap=True, history_ttl_ms=ttl)
    assert run(runs.claim(fresh)).won
    assert {r.slot for r in run(backend.history("j", 100))} == {START, clock.now}


def test_state_kept_forever_without_check_job(backend: MemoryBackend, clock: ManualClock) -> None:
    runs = store(backend)
    for i in range(30):
        token = f"t{i}"
        assert run(runs.claim(claim("j", START + i, token, overlap=True, history_size=2))).won
        assert run(runs.finish("j", START + i, token, "ok"))
    clock.advance(10 * 86_400_000)
    assert run(runs.claim(claim("j", clock.now, "new", history_size=2))).won
    again = run(runs.claim(claim("j", START, "again", deadline_ms=clock.now + 1)))
    assert again.kind == "done", "without limits the store remembers every run"


def test_state_trimmed_only_past_what_late_claims_need(
    backend: MemoryBackend, clock: ManualClock
) -> None:
    runs, size = store(backend), 2
    backend.check_job(JobLimits("j", 1000, 0, 5_000, size))
    slots = [START + i * 1000 for i in range(30)]
    for i, slot in enumerate(slots):
        token = f"t{i}"
        assert run(runs.claim(claim("j", slot, token, overlap=True, history_size=size))).won
        if i != 0:  # slot 0 stays running
            assert run(runs.finish("j", slot, token, "ok"))
    clock.advance(3_600_000)
    assert run(runs.claim(claim("j", clock.now, "new", overlap=True, history_size=size))).won
    # The running run's state survives (its lease expired: a backup takes it over); a
    # trimmed slot answers `late` (store time is past its deadline), never a second `won`.
    assert slots[0] in {a.slot for a in run(runs.active("j"))}
    takeover = run(runs.claim(claim("j", slots[0], "x", create=False)))
    assert (takeover.kind, takeover.attempt) == ("won", 2)
    assert run(runs.claim(claim("j", slots[5], "y"))).kind == "late"
    # A recent finished run is still remembered.
    assert run(runs.finish("j", clock.now, "new", "ok"))
    for i in range(2 * size + 2):  # more runs: trimming happens again, `new` is too young
        token = f"more{i}"
        slot = clock.now + 1 + i
        assert run(runs.claim(claim("j", slot, token, overlap=True, history_size=size))).won
        assert run(runs.finish("j", slot, token, "ok"))
    assert run(runs.claim(claim("j", clock.now, "z"))).kind == "done"


def test_check_job_retention_covers_catch_up(backend: MemoryBackend, clock: ManualClock) -> None:
    runs, size = store(backend), 1
    backend.check_job(JobLimits("j", 1000, 0, 5_000, size, catch_up_ms=3_600_000))
    for i in range(10):
        token = f"t{i}"
        assert run(runs.claim(claim("j", START + i, token, overlap=True, history_size=size))).won
        assert run(runs.finish("j", START + i, token, "ok"))
    clock.advance(1_800_000)
    assert run(runs.claim(claim("j", clock.now, "n", overlap=True, history_size=size))).won
    catch_up = claim("j", START, "late-catch-up", deadline_ms=START + 3_600_000)
    assert run(runs.claim(catch_up)).kind == "done", "kept while a catch-up claim may ask"


def test_threads_share_one_backend_safely() -> None:
    backend = MemoryBackend()
    winners: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        async def main() -> None:
            barrier.wait()
            for slot in range(200):
                outcome = await store(backend).claim(
                    claim("j", START + slot, f"{n}-{slot}", overlap=True)
                )
                if outcome.won:
                    with lock:
                        winners.append(f"{slot}")

        asyncio.run(main())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(winners, key=int) == [str(slot) for slot in range(200)]


def test_from_url_rejects_options_and_other_schemes() -> None:
    with pytest.raises(InvalidConfigError):
        MemoryBackend.from_url("memory://x?lease=1")
    with pytest.raises(InvalidConfigError):
        MemoryBackend.from_url("redis://localhost")
    assert isinstance(MemoryBackend.from_url("memory://"), MemoryBackend)


def test_claim_only_memory_backend() -> None:
    backend = MemoryBackend(leases=False)
    assert backend.runs is None
    first = ClaimInput("j", START, "a", "web-1")
    assert run(backend.claim(first))
    assert run(backend.claim(first))
    assert not run(backend.claim(ClaimInput("j", START, "b", "web-2")))
    (record,) = run(backend.history("j", 10))
    assert (record.instance_id, record.status) == ("web-1", "running")


def test_memory_accepts_fast_durability_only() -> None:
    """One process has no replica: ``replicated`` and unknown values are coded config errors."""
    assert MemoryBackend(durability="fast").runs is not None
    assert MemoryBackend.from_url("memory://?durability=fast").runs is not None
    with pytest.raises(InvalidConfigError, match="no replica") as caught:
        MemoryBackend(durability="replicated")
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    with pytest.raises(InvalidConfigError, match="no replica"):
        MemoryBackend.from_url("memory://?durability=replicated")
    with pytest.raises(InvalidConfigError, match=r"one of 'fast', 'replicated', got 'strong'"):
        MemoryBackend.from_url("memory://", durability="strong")
    with pytest.raises(InvalidConfigError, match="takes one option"):
        MemoryBackend.from_url("memory://?pool=3")
    assert check_durability("replicated") == "replicated"
