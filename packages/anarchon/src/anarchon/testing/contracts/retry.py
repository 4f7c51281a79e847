"""``RetryContract``: ``RunStore.retry`` (docs/leases.md, "Retries"), native or the base-class fallback.

Part of :class:`~anarchon.testing.LeaseContract`, so every lease backend runs it.
"""

from __future__ import annotations

from typing import ClassVar

from anarchon.backend import Backend, RunStore
from anarchon.testing.contracts._support import ContractBase, new_job, new_token
from anarchon.types import RunClaim, RunRetry, StoredResult

__all__ = ["RetryContract"]


def _runs(backend: Backend) -> RunStore:
    runs = backend.runs
    assert runs is not None, f"{type(backend).__name__} has no `runs`: RetryContract needs leases"
    return runs


class RetryContract(ContractBase):
    """Contract tests for :meth:`anarchon.RunStore.retry`."""

    retry_lease_ms: ClassVar[int] = 60_000
    """The lease of the attempts in these tests (never expires during a test)."""

    async def _won(self, b: Backend, job: str, slot: int, token: str, max_attempts: int) -> None:
        await b.prepare_job(job, 100)
        claim = RunClaim(job, slot, token, "r-1", self.retry_lease_ms, max_attempts)
        outcome = await _runs(b).claim(claim)
        assert outcome.won, outcome
        assert outcome.attempt == 1

    def _retry(self, job: str, slot: int, token: str, new: str, most: int) -> RunRetry:
        return RunRetry(job, slot, token, new, "r-1", self.retry_lease_ms, most)

    def test_retry_starts_the_next_attempt_under_the_new_token(self, backend: Backend) -> None:
        """``retry`` → won, attempt 2; the old token lost the run, the new one holds it."""

        async def body(b: Backend) -> None:
            runs = _runs(b)
            job, first, second = new_job("retry"), new_token(), new_token()
            slot = (await runs.now_ms() // 1000) * 1000
            await self._won(b, job, slot, first, 3)
            outcome = await runs.retry(self._retry(job, slot, first, second, 3))
            assert outcome.won, outcome
            assert outcome.attempt == 2
            assert outcome.runner == "r-1"
            assert not await runs.heartbeat(job, slot, first, self.retry_lease_ms)
            assert await runs.heartbeat(job, slot, second, self.retry_lease_ms)
            # The failed attempt's result ends after the retry call (docs/leases.md, "Retries").
            ended = await runs.now_ms() + 1
            failed = StoredResult(
                slot, first, "r-1", "error", slot, ended, "E: x", 1, reason="retried"
            )
            finished = ended + 5
            await b.save_result(job, failed, 100)
            assert await runs.finish(job, slot, second, "ok")
            ok = StoredResult(slot, second, "r-1", "ok", finished, finished + 1, None, 2)
            await b.save_result(job, ok, 100)
            records = sorted(
                (r for r in await b.history(job, 10) if r.slot == slot), key=lambda r: r.attempt
            )
            assert [(r.attempt, r.status) for r in records] == [(1, "error"), (2, "ok")]
            assert records[0].error == "E: x"

        self.run(backend, body)

    def test_retry_from_a_token_that_lost_the_run_is_not_won(self, backend: Backend) -> None:
        """A stale token cannot start an attempt; the run stays with its owner."""

        async def body(b: Backend) -> None:
            runs = _runs(b)
            job, owner = new_job("retry-stale"), new_token()
            slot = (await runs.now_ms() // 1000) * 1000
            await self._won(b, job, slot, owner, 3)
            outcome = await runs.retry(self._retry(job, slot, new_token(), new_token(), 3))
            assert not outcome.won
            assert await runs.heartbeat(job, slot, owner, self.retry_lease_ms)

        self.run(backend, body)

    def test_retry_after_the_run_finished_is_not_won(self, backend: Backend) -> None:
        """A finished run has no next attempt."""

        async def body(b: Backend) -> None:
            runs = _runs(b)
            job, owner = new_job("retry-done"), new_token()
            slot = (await runs.now_ms() // 1000) * 1000
            await self._won(b, job, slot, owner, 3)
            assert await runs.finish(job, slot, owner, "ok")
            outcome = await runs.retry(self._retry(job, slot, owner, new_token(), 3))
            assert not outcome.won

        self.run(backend, body)

    def test_retry_with_no_attempts_left_is_not_won(self, backend: Backend) -> None:
        """``max_attempts`` caps every start: at the cap, no next attempt."""

        async def body(b: Backend) -> None:
            runs = _runs(b)
            job, owner = new_job("retry-cap"), new_token()
            slot = (await runs.now_ms() // 1000) * 1000
            await self._won(b, job, slot, owner, 1)
            outcome = await runs.retry(self._retry(job, slot, owner, new_token(), 1))
            assert not outcome.won
            claim = RunClaim(job, slot, new_token(), "r-2", self.retry_lease_ms, 1)
            assert not (await runs.claim(claim)).won

        self.run(backend, body)
