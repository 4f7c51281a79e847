"""``BackendContract``: the behaviour every backend promises (docs/concepts.md, docs/extending.md).

A backend's test module subclasses it and overrides the ``backend`` fixture::

    from anarchon.testing import BackendContract

    class TestMyBackend(BackendContract):
        @pytest.fixture
        def backend(self):
            yield MyBackend.from_url("my://localhost")

The tests are plain (sync) pytest tests; each runs its own event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import ClassVar

import pytest

from anarchon.backend import Backend
from anarchon.errors import UnsupportedError
from anarchon.testing.contracts._batch import (
    CLAIM_KINDS,
    check_backend_batches,
    run_property,
    scenarios,
)
from anarchon.testing.contracts._support import new_job, new_token, wall_ms
from anarchon.testing.contracts.job_retry import JobRetryContract
from anarchon.testing.contracts.one_off import OneOffContract
from anarchon.types import ClaimInput, JobLimits, RunRecord, StoredResult

__all__ = ["BackendContract"]


async def _base_slot(backend: Backend, rounds: int) -> int:
    """A whole second far enough in the past that ``rounds`` one-second slots after it are past too."""
    now = await backend.now_ms()
    if now is None:
        now = wall_ms()
    return (now // 1000) * 1000 - (rounds + 5) * 1000


async def _run_once(
    backend: Backend,
    job: str,
    slot: int,
    instance_id: str,
    status: str = "ok",
    *,
    error: str | None = None,
    history_size: int = 1000,
    history_ttl_ms: int | None = None,
) -> ClaimInput:
    """Claim ``(job, slot)`` (must win) and store its result, as the scheduler does."""
    claim = ClaimInput(job, slot, new_token(), instance_id, history_size, history_ttl_ms)
    assert await backend.claim(claim), f"a fresh slot {slot} of {job} was not won"
    await backend.record_claim(claim)
    result = StoredResult(
        slot=slot,
        token=claim.token,
        instance_id=instance_id,
        status=status,
        started_at=slot + 10,
        finished_at=slot + 35,
        error=error,
        attempt=1,
    )
    await backend.save_result(job, result, history_size, history_ttl_ms)
    return claim


class BackendContract(OneOffContract, JobRetryContract):
    """Contract tests for :class:`anarchon.Backend` implementations.

    Override the ``backend`` fixture. Class attributes tune the suite:
    ``race_claimers``/``race_rounds`` size the claim race, ``thread_safe``
    (or :meth:`peer_backends`) enables the multi-thread race, and
    ``supports_history_ttl``/``history_ttl_ms`` the TTL test.
    """

    race_claimers: ClassVar[int] = 20
    """Concurrent claimers per slot in the race."""
    race_rounds: ClassVar[int] = 50
    """Slots raced for, one after the other."""
    race_threads: ClassVar[int] = 4
    """Threads (one event loop each) in the multi-thread race."""
    thread_safe: ClassVar[bool] = False
    """True if one backend object may be used from several threads and event loops at once."""
    supports_history_ttl: ClassVar[bool] = True
    """False for backends that refuse ``history_ttl`` (NATS)."""
    history_ttl_ms: ClassVar[int] = 300
    """The TTL the TTL test uses; raise it if the backend keeps records longer for de-duplication."""
    batch_examples: ClassVar[int] = 25
    """Hypothesis examples of the batch property (each builds two small jobs)."""

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        """Backends for the multi-thread race, one per thread, all on ``backend``'s store.

        Default: ``backend`` itself for every thread when :attr:`thread_safe`,
        else None, which fails the race test: a backend must show it is safe
        across event loops (as separate processes use it). Override to return new clients of the
        same server (each is initialised and closed in its own thread's loop).
        """
        return [backend] * count if self.thread_safe else None

    # Identity ---------------------------------------------------------

    def test_name_and_dedupe_window(self, backend: Backend) -> None:
        """``name`` is a non-empty string; ``dedupe_window_ms`` a positive number that fits the defaults."""

        async def body(b: Backend) -> None:
            assert isinstance(b.name, str)
            assert b.name
            window = b.dedupe_window_ms
            assert isinstance(window, (int, float))
            assert not isinstance(window, bool)
            assert window > 0
            # The default job (jitter 2 s + max_late 60 s) must be safe on every backend.
            assert window > 62_000

        self.run(backend, body)

    def test_check_job_accepts_a_normal_job(self, backend: Backend) -> None:
        """``check_job`` accepts a job with the default options."""

        async def body(b: Backend) -> None:
            limits = JobLimits(
                job=new_job("check"),
                period_ms=60_000,
                jitter_ms=2_000,
                max_late_ms=60_000,
                history_size=1000,
            )
            b.check_job(limits)  # must not raise

        self.run(backend, body)

    # The one rule -----------------------------------------------------

    def test_claim_race_has_exactly_one_winner(self, backend: Backend) -> None:
        """Many concurrent claimers of each slot, slot after slot: exactly one wins each."""
        claimers, rounds = self.race_claimers, self.race_rounds

        async def body(b: Backend) -> None:
            job = new_job("race")
            await b.prepare_job(job, 1000)
            base = await _base_slot(b, rounds)
            winners: dict[int, ClaimInput] = {}
            for r in range(rounds):
                slot = base + r * 1000
                inputs = [
                    ClaimInput(job, slot, new_token(), f"instance-{i}", 1000)
                    for i in range(claimers)
                ]
                answers = await asyncio.gather(*(b.claim(x) for x in inputs))
                won = [x for x, ok in zip(inputs, answers, strict=True) if ok]
                assert len(won) == 1, f"slot {slot}: {len(won)} winners among {claimers}"
                winners[slot] = won[0]
                await b.record_claim(won[0])
            records = await b.history(job, rounds * 2)
            assert len(records) == rounds, f"{len(records)} history records for {rounds} runs"
            for record in records:
                assert record.slot in winners
                assert record.instance_id == winners[record.slot].instance_id
                assert record.status == "running"
            assert [r.slot for r in records] == sorted(winners, reverse=True)

        self.run(backend, body)

    def test_claim_race_across_threads(self, backend: Backend) -> None:
        """Several threads, each with its own event loop, race for the same slots."""
        threads = self.race_threads
        peers = self.peer_backends(backend, threads)
        assert peers is not None, (
            "the cross-thread race needs backends for several event loops:"
            " set thread_safe = True or override peer_backends()"
        )
        assert len(peers) == threads
        claimers = max(self.race_claimers // threads, 2)
        rounds = self.race_rounds
        job = new_job("threads")
        base = (wall_ms() // 1000) * 1000 - (rounds + 5) * 1000
        barrier = threading.Barrier(threads)
        wins: list[list[tuple[int, str]]] = [[] for _ in range(threads)]
        errors: list[BaseException] = []

        def worker(index: int, peer: Backend) -> None:
            async def main() -> None:
                await peer.init()
                try:
                    await peer.prepare_job(job, 1000)
                    for r in range(rounds):
                        slot = base + r * 1000
                        barrier.wait(timeout=self.timeout_s)
                        inputs = [
                            ClaimInput(job, slot, new_token(), f"thread-{index}-{i}", 1000)
                            for i in range(claimers)
                        ]
                        answers = await asyncio.gather(*(peer.claim(x) for x in inputs))
                        wins[index].extend(
                            (slot, x.token) for x, ok in zip(inputs, answers, strict=True) if ok
                        )
                finally:
                    if peer is not backend:
                        await peer.close()

            try:
                asyncio.run(main())
            except BaseException as error:
                errors.append(error)
                barrier.abort()

        pool = [
            threading.Thread(target=worker, args=(i, peer), name=f"contract-race-{i}")
            for i, peer in enumerate(peers)
        ]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(self.timeout_s)
        if any(peer is backend for peer in peers):
            asyncio.run(backend.close())
        assert not errors, f"a racing thread failed: {errors[0]!r}"
        counts = Counter(slot for won in wins for slot, _token in won)
        for r in range(rounds):
            slot = base + r * 1000
            assert counts[slot] == 1, f"slot {slot}: {counts[slot]} winners across threads"

    def test_claim_is_safe_to_repeat(self, backend: Backend) -> None:
        """The winner's token wins again; any other token loses, before and after."""

        async def body(b: Backend) -> None:
            job = new_job("repeat")
            await b.prepare_job(job, 1000)
            slot = await _base_slot(b, 1)
            first = ClaimInput(job, slot, new_token(), "instance-a")
            other = ClaimInput(job, slot, new_token(), "instance-b")
            assert await b.claim(first)
            assert await b.claim(first), "a retried claim (same token) must win again"
            assert not await b.claim(other)
            assert await b.claim(first)
            assert not await b.claim(other)
            next_slot = ClaimInput(job, slot + 1000, other.token, "instance-b")
            assert await b.claim(next_slot), "a token is per slot: the next slot is free"

        self.run(backend, body)

    # History ----------------------------------------------------------

    def test_history_merges_claims_and_results(self, backend: Backend) -> None:
        """A claim plus its result is one record; a claim alone is ``running``; newest first."""

        async def body(b: Backend) -> None:
            job = new_job("history")
            await b.prepare_job(job, 1000)
            base = await _base_slot(b, 3)
            s1, s2, s3 = base, base + 1000, base + 2000
            await _run_once(b, job, s1, "instance-a", "ok")
            pending = ClaimInput(job, s2, new_token(), "instance-b")
            assert await b.claim(pending)
            await b.record_claim(pending)
            await _run_once(b, job, s3, "instance-c", "error", error="boom")

            records = await b.history(job, 10)
            assert [r.slot for r in records] == [s3, s2, s1]
            r3, r2, r1 = records
            _check(r1, job=job, slot=s1, instance_id="instance-a", status="ok")
            assert r1.duration_ms == 25
            assert r1.error is None
            assert r1.scheduled_at.timestamp() * 1000 == s1
            _check(r2, job=job, slot=s2, instance_id="instance-b", status="running")
            assert r2.finished_at is None
            _check(r3, job=job, slot=s3, instance_id="instance-c", status="error")
            assert r3.error == "boom"

            assert [r.slot for r in await b.history(job, 2)] == [s3, s2]
            assert [r.slot for r in await b.history(job, 1)] == [s3]
            assert await b.history(new_job("unknown"), 10) == []

        self.run(backend, body)

    def test_history_many_equals_history_of_each_job(self, backend: Backend) -> None:
        """``history_many`` answers, for every job asked (twelve, one of them unknown), its ``history``."""

        async def body(b: Backend) -> None:
            jobs = [new_job(f"many{i}") for i in range(11)]
            base = await _base_slot(b, 3)
            for i, job in enumerate(jobs):
                await b.prepare_job(job, 1000)
                for k in range(i % 3 + 1):
                    await _run_once(b, job, base + 1000 * k, f"instance-{k}", "ok")
                if i % 4 == 0:  # a claim with no result yet: ``running``
                    pending = ClaimInput(job, base + 5000, new_token(), "instance-x")
                    assert await b.claim(pending)
                    await b.record_claim(pending)
            asked = [*jobs, new_job("unknown"), jobs[0]]
            for limit in (10, 2):
                found = await b.history_many(asked, limit)
                assert set(found) == set(asked)
                for job in asked:
                    assert found[job] == await b.history(job, limit), job

        self.run(backend, body)

    def test_manual_runs_are_not_deduplicated(self, backend: Backend) -> None:
        """Two manual runs of one slot both appear, marked manual; the scheduled claim still wins."""

        async def body(b: Backend) -> None:
            job = new_job("manual")
            await b.prepare_job(job, 1000)
            slot = await _base_slot(b, 1)
            used: list[tuple[int, str]] = []
            for instance, status in (("instance-a", "ok"), ("instance-b", "error")):
                run = ClaimInput(job, slot, new_token(), instance)
                chosen = await b.record_manual_run(run)
                run_slot = slot if chosen is None else chosen
                used.append((run_slot, run.token))
                result = StoredResult(
                    slot=run_slot,
                    token=run.token,
                    instance_id=instance,
                    status=status,
                    started_at=run_slot,
                    finished_at=run_slot + 5,
                    error="manual failure" if status == "error" else None,
                    attempt=1,
                    manual=True,
                )
                await b.save_result(job, result, 1000)
            records = await b.history(job, 10)
            assert len(records) == 2, records
            assert all(r.manual for r in records)
            assert sorted(r.status for r in records) == ["error", "ok"]
            assert sorted(r.instance_id for r in records) == ["instance-a", "instance-b"]
            assert {r.slot for r in records} == {s for s, _token in used}

            scheduled = ClaimInput(job, slot, new_token(), "instance-c")
            assert await b.claim(scheduled), "a manual run must not take the scheduled slot"

        self.run(backend, body)

    def test_history_is_trimmed_to_history_size(self, backend: Backend) -> None:
        """After 3N runs, between N and 2N are kept, the newest N among them."""
        size = 10

        async def body(b: Backend) -> None:
            job = new_job("trim")
            await b.prepare_job(job, size)
            base = await _base_slot(b, 3 * size)
            slots = [base + i * 1000 for i in range(3 * size)]
            for i, slot in enumerate(slots):
                await _run_once(b, job, slot, f"instance-{i % 3}", history_size=size)
            records = await b.history(job, 10 * size)
            assert size <= len(records) <= 2 * size, f"{len(records)} kept for history_size={size}"
            kept = [r.slot for r in records]
            assert kept == sorted(kept, reverse=True)
            assert kept[:size] == sorted(slots, reverse=True)[:size], "the newest runs must be kept"
            assert all(r.status == "ok" for r in records)

        self.run(backend, body)

    def test_history_ttl_drops_old_runs(self, backend: Backend) -> None:
        """Runs older than ``history_ttl`` are dropped when newer ones are written.

        A backend that cannot honour ``history_ttl`` must refuse it when the job
        is added (``check_job`` raises ``ANARCHON_UNSUPPORTED``).
        """
        if not self.supports_history_ttl:
            limits = JobLimits(
                job=new_job("ttl"),
                period_ms=60_000,
                jitter_ms=2_000,
                max_late_ms=60_000,
                history_size=1000,
                history_ttl_ms=3_600_000,
            )
            with pytest.raises(UnsupportedError) as refused:
                backend.check_job(limits)
            assert refused.value.code == "ANARCHON_UNSUPPORTED"
            return
        ttl = self.history_ttl_ms

        async def body(b: Backend) -> None:
            job = new_job("ttl")
            await b.prepare_job(job, 1000)
            old = []
            for i in range(3):
                now = await b.now_ms() or wall_ms()
                claim = await _run_once(b, job, now + i, "instance-a", history_ttl_ms=ttl)
                old.append(claim.slot)
            await asyncio.sleep(ttl / 1000 + 0.3)
            now = await b.now_ms() or wall_ms()
            fresh = await _run_once(b, job, now + 10, "instance-b", history_ttl_ms=ttl)
            records = await b.history(job, 100)
            slots = [r.slot for r in records]
            assert fresh.slot in slots
            assert not set(old) & set(slots), f"runs older than {ttl} ms were kept: {records}"

        self.run(backend, body)

    # Batch members ----------------------------------------------------

    def test_batch_claims_answer_like_single_claims(self, backend: Backend) -> None:
        """``claim_many``/``record_claims``/``save_results`` equal the single calls, item for item.

        A hypothesis property: fresh, lost and own slots mixed in one batch,
        repeated items and a batch retried with the same tokens; the answers
        and the resulting history must equal those of the same items sent one
        by one (docs/run-store.md, "Batch members").
        """
        run_property(
            backend,
            scenarios(CLAIM_KINDS),
            check_backend_batches,
            examples=self.batch_examples,
            timeout_s=self.timeout_s,
        )


def _check(record: RunRecord, *, job: str, slot: int, instance_id: str, status: str) -> None:
    assert record.job == job
    assert record.slot == slot
    assert record.instance_id == instance_id, record
    assert record.status == status, record
    assert record.attempt == 1
    assert not record.manual
    assert record.run_id == f"{job}:{slot}"
