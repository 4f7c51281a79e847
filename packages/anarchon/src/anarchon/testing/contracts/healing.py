"""``HealingContract``: a finish that finds no state heals it (docs/durability.md, "Finishes that heal").

Part of :class:`~anarchon.testing.LeaseContract`, so every lease backend runs
it. A failover can lose a claim (or a whole run state) while the runner keeps
running; its finish must then write the run finished, with the finishing
token, and answer True, so the result is stored and no other instance runs
the slot again. The rule is :func:`anarchon.backend.lease_model.decide_finish`.
"""

from __future__ import annotations

from typing import ClassVar

from anarchon.backend import Backend, RunStore
from anarchon.testing.contracts._support import new_job, new_token
from anarchon.testing.contracts.retry import RetryContract
from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult

__all__ = ["HealingContract"]


def _runs(backend: Backend) -> RunStore:
    runs = backend.runs
    assert runs is not None, f"{type(backend).__name__} has no `runs`: HealingContract needs leases"
    return runs


async def _slot(runs: RunStore) -> int:
    now = await runs.now_ms()
    return (now // 1000) * 1000


class HealingContract(RetryContract):
    """Contract tests for finishes of runs the store has no state for."""

    heal_lease_ms: ClassVar[int] = 60_000
    """The lease of the claims in these tests (never expires during a test)."""

    def _claim(self, job: str, slot: int, instance: str, token: str | None = None) -> RunClaim:
        return RunClaim(
            job,
            slot,
            token if token is not None else new_token(),
            instance,
            self.heal_lease_ms,
            3,
            deadline_ms=slot + 60_000,
        )

    def test_finish_without_state_heals(self, backend: Backend) -> None:
        """A finish of a run with no state writes it finished (True); a new claim is ``done``.

        A failover can lose a claim while its runner runs on: the finish then
        finds nothing. It answers True (the result is stored) and leaves the
        slot finished, so no other instance runs it again. A repeated finish
        with the same token is True again; another token's finish is False.
        """

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-heal")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            token = new_token()
            assert await runs.finish(job, slot, token, "ok")
            assert await runs.finish(job, slot, token, "ok"), "a repeated finish is True"
            assert not await runs.finish(job, slot, new_token(), "ok")
            assert (await runs.claim(self._claim(job, slot, "instance-b"))).kind == "done"
            assert (await runs.claim(self._claim(job, slot, "instance-a", token))).kind == ("done")
            assert not await runs.heartbeat(job, slot, token, self.heal_lease_ms)
            assert not await runs.release(job, slot, token)
            assert await runs.active(job) == []
            assert await runs.lease_state(job, slot, token) in ("ended", "unknown")

        self.run(backend, body)

    def test_finish_many_without_state_heals(self, backend: Backend) -> None:
        """``finish_many`` heals like ``finish``: per item, True once and again, others False."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-heal-many")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            won = self._claim(job, slot - 1000, "instance-a")
            assert (await runs.claim(won)).kind == "won"
            lost = [new_token(), new_token()]
            finishes = [
                RunFinish(job, slot, lost[0], "ok"),
                RunFinish(job, slot - 1000, won.token, "ok"),
                RunFinish(job, slot + 1000, lost[1], "error", "boom"),
            ]
            assert list(await runs.finish_many(finishes)) == [True, True, True]
            assert list(await runs.finish_many(finishes)) == [True, True, True]
            others = [RunFinish(f.job, f.slot, new_token(), "ok") for f in finishes]
            assert list(await runs.finish_many(others)) == [False, False, False]
            for f in finishes:
                claim = self._claim(job, f.slot, "instance-b")
                assert (await runs.claim(claim)).kind == "done", f
            assert await runs.active(job) == []

        self.run(backend, body)

    def test_finish_and_save_without_state_stores_the_result(self, backend: Backend) -> None:
        """A healed finish keeps its result: history shows the run ended, not ``running``.

        Through ``finish_and_save_many`` where the store offers it, else
        ``finish_many`` then ``save_results`` as the scheduler does.
        """

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-heal-save")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            token = new_token()
            finish = RunFinish(job, slot, token, "error", "E: boom")
            result = StoredResult(slot, token, "instance-a", "error", slot, slot + 5, "E: boom", 1)
            write = ResultWrite(job, result)
            answers = await runs.finish_and_save_many([finish], [write])
            if answers is None:
                answers = await runs.finish_many([finish])
                await b.save_results([write])
            assert list(answers) == [True]
            records = [r for r in await b.history(job, 10) if r.slot == slot]
            assert [(r.instance_id, r.status, r.error) for r in records] == [
                ("instance-a", "error", "E: boom")
            ]
            assert (await runs.claim(self._claim(job, slot, "instance-b"))).kind == "done"

        self.run(backend, body)
