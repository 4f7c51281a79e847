"""``LeaseContract``: every branch of the lease claim tree (docs/leases.md) for backends with ``runs``.

Expiry is provoked with short real leases (``lease_ms``, default 300 ms) and
short sleeps, checked against the store's own clock (``runs.now_ms()``): the
suite runs against real servers whose clocks nobody controls.

    from anarchon.testing import LeaseContract

    class TestMyLeases(LeaseContract):
        @pytest.fixture
        def backend(self):
            yield MyBackend.from_url("my://localhost")
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from anarchon.backend import Backend, RunStore
from anarchon.testing.contracts._batch import (
    LEASE_KINDS,
    check_lease_batches,
    run_property,
    scenarios,
)
from anarchon.testing.contracts._support import new_job, new_token
from anarchon.testing.contracts.healing import HealingContract
from anarchon.types import (
    ClaimInput,
    ClaimOutcome,
    RunClaim,
    RunRecord,
    StoredResult,
)

__all__ = ["LeaseContract"]

_SLACK_MS = 5
"""Tolerance when comparing a lease with store-clock readings taken around the call."""


def _runs(backend: Backend) -> RunStore:
    runs = backend.runs
    assert runs is not None, f"{type(backend).__name__} has no `runs`: LeaseContract needs leases"
    return runs


async def _slot(runs: RunStore, seconds_ago: int = 0) -> int:
    """A whole-second slot at (or ``seconds_ago`` before) store time."""
    now = await runs.now_ms()
    return (now // 1000) * 1000 - seconds_ago * 1000


async def _wait_expired(runs: RunStore, expires_at: int, limit_s: float = 10.0) -> None:
    """Sleep until the store clock is past ``expires_at``."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + limit_s
    while True:
        now = await runs.now_ms()
        if now > expires_at:
            return
        assert loop.time() < give_up, "the store clock did not pass the lease expiry"
        await asyncio.sleep((expires_at - now) / 1000 + 0.01)


async def _records(backend: Backend, job: str, slot: int) -> list[RunRecord]:
    return [r for r in await backend.history(job, 100) if r.slot == slot]


class LeaseContract(HealingContract):
    """Contract tests for :class:`anarchon.RunStore` (``backend.runs``).

    Override the ``backend`` fixture (it must have ``runs``). ``lease_ms`` is
    the short lease used to provoke expiry; raise it for a slow server.
    """

    lease_ms: ClassVar[int] = 300
    """A lease short enough to wait out (ms)."""
    long_lease_ms: ClassVar[int] = 60_000
    """A lease that outlives any test (ms)."""
    race_claimers: ClassVar[int] = 20
    """Concurrent claimers in the lease races."""
    race_rounds: ClassVar[int] = 20
    """Fresh slots raced for in the fresh-claim race."""
    batch_examples: ClassVar[int] = 25
    """Hypothesis examples of the batch property (each builds two small jobs)."""
    batch_lease_ms: ClassVar[int] = 50
    """The lease of the expired states in the batch property (waited out once per example)."""

    def request(
        self,
        job: str,
        slot: int,
        instance_id: str,
        *,
        token: str | None = None,
        lease_ms: int | None = None,
        max_attempts: int = 3,
        overlap: bool = False,
        deadline_ms: int | None = None,
        create: bool = True,
        early_ms: int | None = None,
        overlap_wait: bool = False,
    ) -> RunClaim:
        """A :class:`RunClaim` with the suite's defaults (deadline: slot + 60 s)."""
        return RunClaim(
            job=job,
            slot=slot,
            token=token if token is not None else new_token(),
            instance_id=instance_id,
            lease_ms=lease_ms if lease_ms is not None else self.long_lease_ms,
            max_attempts=max_attempts,
            overlap=overlap,
            deadline_ms=deadline_ms if deadline_ms is not None else slot + 60_000,
            create=create,
            early_ms=early_ms,
            overlap_wait=overlap_wait,
        )

    # won / running / retry ------------------------------------------

    def test_first_claim_wins_and_others_become_backups(self, backend: Backend) -> None:
        """won (attempt 1, lease from store time), then ``running`` for everyone else."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-won")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            before = await runs.now_ms()
            won = await runs.claim(self.request(job, slot, "instance-a"))
            after = await runs.now_ms()
            assert won.kind == "won"
            assert won.won
            assert won.attempt == 1
            assert won.runner == "instance-a"
            assert won.lease_expires_at is not None
            low, high = before + self.long_lease_ms, after + self.long_lease_ms
            assert low - _SLACK_MS <= won.lease_expires_at <= high + _SLACK_MS

            backup = await runs.claim(self.request(job, slot, "instance-b"))
            assert backup.kind == "running"
            assert not backup.won
            assert backup.attempt == 1
            assert backup.runner == "instance-a"
            assert backup.lease_expires_at == won.lease_expires_at
            recheck = await runs.claim(self.request(job, slot, "instance-b", create=False))
            assert recheck.kind == "running"

            active = await runs.active(job)
            assert [(a.slot, a.attempt, a.runner, a.live) for a in active] == [
                (slot, 1, "instance-a", True)
            ]
            records = await _records(b, job, slot)
            assert [(r.instance_id, r.status, r.attempt) for r in records] == [
                ("instance-a", "running", 1)
            ]

        self.run(backend, body)

    def test_retried_claim_with_same_token_wins_again(self, backend: Backend) -> None:
        """Same token while running → won again, with no second history record."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-retry")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a")
            assert (await runs.claim(first)).kind == "won"
            again = await runs.claim(first)
            assert again.kind == "won"
            assert again.attempt == 1
            assert again.runner == "instance-a"
            assert (await runs.claim(self.request(job, slot, "instance-b"))).kind == "running"
            assert len(await _records(b, job, slot)) == 1

        self.run(backend, body)

    # Expiry, attempts -------------------------------------------------

    def test_expired_lease_is_taken_over_with_the_next_attempt(self, backend: Backend) -> None:
        """Expired lease, attempts left → won (attempt 2); the dead attempt is interrupted."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-takeover")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a", lease_ms=self.lease_ms)
            won = await runs.claim(first)
            assert won.kind == "won"
            assert won.lease_expires_at is not None
            await _wait_expired(runs, won.lease_expires_at)

            backup = self.request(job, slot, "instance-b", create=False)
            taken = await runs.claim(backup)
            assert taken.kind == "won"
            assert taken.attempt == 2
            assert taken.runner == "instance-b"
            assert not await runs.heartbeat(job, slot, first.token, self.lease_ms)
            assert not await runs.finish(job, slot, first.token, "ok")
            late = await runs.claim(self.request(job, slot, "instance-c"))
            assert late.kind == "running"
            assert late.runner == "instance-b"
            assert late.attempt == 2

            records = await _records(b, job, slot)
            assert [(r.attempt, r.instance_id, r.status) for r in records] == [
                (2, "instance-b", "running"),
                (1, "instance-a", "interrupted"),
            ]
            assert records[1].reason == "lease_lost"

        self.run(backend, body)

    def test_no_attempts_left_marks_the_run_interrupted(self, backend: Backend) -> None:
        """Expired lease on the last attempt → done, and the run is interrupted for good."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-exhausted")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a", lease_ms=self.lease_ms, max_attempts=1)
            won = await runs.claim(first)
            assert won.kind == "won"
            assert won.lease_expires_at is not None
            await _wait_expired(runs, won.lease_expires_at)

            again = self.request(job, slot, "instance-b", create=False, max_attempts=1)
            assert (await runs.claim(again)).kind == "done"
            assert (await runs.claim(self.request(job, slot, "instance-c"))).kind == "done"
            assert not await runs.finish(job, slot, first.token, "ok")
            assert [a for a in await runs.active(job) if a.slot == slot] == []
            records = await _records(b, job, slot)
            assert [(r.attempt, r.instance_id, r.status) for r in records] == [
                (1, "instance-a", "interrupted")
            ]
            assert records[0].reason == "attempts_exhausted"

        self.run(backend, body)

    # Finished and skipped runs ----------------------------------------

    def test_finished_run_is_done(self, backend: Backend) -> None:
        """After ``finish()`` every claim, even the runner's own token, is ``done``."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-finished")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a")
            assert (await runs.claim(first)).kind == "won"
            assert await runs.finish(job, slot, first.token, "ok")
            assert (await runs.claim(self.request(job, slot, "instance-b"))).kind == "done"
            assert (await runs.claim(first)).kind == "done"
            assert not await runs.heartbeat(job, slot, first.token, self.lease_ms)
            assert await runs.active(job) == []
            now = await runs.now_ms()
            result = StoredResult(slot, first.token, "instance-a", "ok", now - 20, now, None, 1)
            await b.save_result(job, result, 1000)
            records = await _records(b, job, slot)
            assert [(r.attempt, r.instance_id, r.status) for r in records] == [
                (1, "instance-a", "ok")
            ]

        self.run(backend, body)

    def test_overlap_false_skips_while_an_older_run_is_live(self, backend: Backend) -> None:
        """overlap=False and an older live lease → ``overlap`` (skipped); then ``done`` for all."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-overlap")
            await b.prepare_job(job, 1000)
            slot1 = await _slot(runs, seconds_ago=1)
            slot2 = slot1 + 1000
            assert (await runs.claim(self.request(job, slot1, "instance-a"))).kind == "won"
            skipped = await runs.claim(self.request(job, slot2, "instance-b"))
            assert skipped.kind == "overlap"
            assert not skipped.won
            for instance, overlap, create in (
                ("instance-c", False, True),
                ("instance-a", True, True),
                ("instance-d", False, False),
            ):
                claim = self.request(job, slot2, instance, overlap=overlap, create=create)
                assert (await runs.claim(claim)).kind == "done", (instance, overlap, create)
            assert [a.slot for a in await runs.active(job)] == [slot1]
            records = await _records(b, job, slot2)
            assert len(records) == 1
            assert records[0].status == "skipped"
            assert records[0].reason == "overlap"

        self.run(backend, body)

    def test_overlap_wait_writes_nothing_until_the_last_claim(self, backend: Backend) -> None:
        """``overlap_wait``: ``overlap`` with nothing written; the same token wins once the run ended.

        A store that does not declare it (``RunStore.overlap_wait`` False) is
        only asked for the ``overlap`` answer: the scheduler then never sets it.
        """

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-overlap-wait")
            await b.prepare_job(job, 1000)
            slot1 = await _slot(runs, seconds_ago=1)
            slot2, slot3 = slot1 + 1000, slot1 + 2000
            first = self.request(job, slot1, "instance-a")
            assert (await runs.claim(first)).kind == "won"
            waiting = self.request(job, slot2, "instance-b", overlap_wait=True)
            answer = await runs.claim(waiting)
            assert answer.kind == "overlap"
            assert answer.runner == "instance-a"
            if not runs.overlap_wait:
                return
            assert await _records(b, job, slot2) == []
            assert (await runs.claim(waiting)).kind == "overlap"  # re-checked: still blocked
            # The last claim (no overlap_wait) of another slot records the skip as before.
            last = self.request(job, slot3, "instance-c")
            assert (await runs.claim(last)).kind == "overlap"
            assert [r.reason for r in await _records(b, job, slot3)] == ["overlap"]
            # The blocking run ends: the waiting slot's re-check wins it, with its token.
            assert await runs.finish(job, slot1, first.token, "ok")
            won = await runs.claim(waiting)
            assert won.kind == "won"
            assert won.attempt == 1
            assert won.runner == "instance-b"
            other = self.request(job, slot2, "instance-c", overlap_wait=True)
            assert (await runs.claim(other)).kind == "running"

        self.run(backend, body)

    def test_overlap_true_runs_alongside(self, backend: Backend) -> None:
        """overlap=True ignores the live older run; finished and newer runs never block."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-overlap-ok")
            await b.prepare_job(job, 1000)
            base = await _slot(runs, seconds_ago=5)
            first = self.request(job, base, "instance-a")
            assert (await runs.claim(first)).kind == "won"
            along = await runs.claim(self.request(job, base + 1000, "instance-b", overlap=True))
            assert along.kind == "won"
            assert {(a.slot, a.live) for a in await runs.active(job)} == {
                (base, True),
                (base + 1000, True),
            }
            # An older run that finished does not block; a newer live one never does.
            other = new_job("lease-overlap-ok")
            older = self.request(other, base, "instance-a")
            assert (await runs.claim(older)).kind == "won"
            assert await runs.finish(other, base, older.token, "ok")
            assert (await runs.claim(self.request(other, base + 2000, "b"))).kind == "won"
            assert (await runs.claim(self.request(other, base + 1000, "c"))).kind == "won"

        self.run(backend, body)

    # Missing state: none, late, catch-up ------------------------------

    def test_backup_recheck_without_state_is_none(self, backend: Backend) -> None:
        """create=False and no state → ``none``, and nothing is written."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-none")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            outcome = await runs.claim(self.request(job, slot, "instance-a", create=False))
            assert outcome.kind == "none"
            assert await runs.active(job) == []
            assert await b.history(job, 10) == []
            fresh = await runs.claim(self.request(job, slot, "instance-b"))
            assert fresh.kind == "won"
            assert fresh.attempt == 1

        self.run(backend, body)

    def test_late_claim_writes_nothing_and_catch_up_deadline_applies(
        self, backend: Backend
    ) -> None:
        """No state and store time past the deadline → ``late``; a catch-up deadline still wins."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-late")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs, seconds_ago=600)
            late = self.request(job, slot, "instance-a", deadline_ms=slot + 60_000)
            assert (await runs.claim(late)).kind == "late"
            short = self.request(job, slot, "instance-a", deadline_ms=slot + 300_000)
            assert (await runs.claim(short)).kind == "late", "catch_up of 5 min < 10 min ago"
            assert await runs.active(job) == []
            assert await b.history(job, 10) == []

            catch_up = self.request(job, slot, "instance-b", deadline_ms=slot + 900_000)
            won = await runs.claim(catch_up)
            assert won.kind == "won"
            assert won.attempt == 1
            # With state present, the deadline no longer matters: a late claimer is a backup.
            again = await runs.claim(self.request(job, slot, "instance-c", deadline_ms=slot))
            assert again.kind == "running"
            assert again.runner == "instance-b"

        self.run(backend, body)

    def test_claim_for_a_future_slot_is_early(self, backend: Backend) -> None:
        """A slot 40 s past store time, with 5 s allowed → ``early``, nothing written; in range → won."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-early")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs, seconds_ago=-40)
            early = self.request(job, slot, "instance-a", early_ms=5_000)
            assert (await runs.claim(early)).kind == "early"
            assert (await runs.claim_many([early]))[0].kind == "early"
            assert await runs.active(job) == []
            assert await b.history(job, 10) == []
            # Without the check (an older scheduler) the store still says yes.
            unchecked = await runs.claim(self.request(job, slot, "instance-b"))
            assert unchecked.kind == "won"
            # A slot within the allowance wins.
            near = await _slot(runs, seconds_ago=-2)
            won = await runs.claim(self.request(job, near, "instance-a", early_ms=5_000))
            assert won.kind == "won"

        self.run(backend, body)

    def test_lease_state_tells_why_a_token_has_no_lease(self, backend: Backend) -> None:
        """``lease_state``: held, other, ended, gone (or ``unknown`` from the fallback)."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-why")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            mine = self.request(job, slot, "instance-a")
            assert (await runs.claim(mine)).kind == "won"
            if type(runs).lease_state is RunStore.lease_state:
                assert await runs.lease_state(job, slot, mine.token) == "unknown"
                return
            assert await runs.lease_state(job, slot, mine.token) == "held"
            assert await runs.lease_state(job, slot, new_token()) == "other"
            assert await runs.lease_state(job, slot - 1000, mine.token) == "gone"
            assert await runs.lease_state(new_job("never"), slot, mine.token) == "gone"
            assert await runs.finish(job, slot, mine.token, "ok")
            assert await runs.lease_state(job, slot, mine.token) == "ended"

        self.run(backend, body)

    # Heartbeat / finish / release -------------------------------------

    def test_wrong_token_changes_nothing(self, backend: Backend) -> None:
        """heartbeat/finish/release with another token (or no run) → False, state unchanged.

        A finish of a slot with no state is not "no run": it heals
        (:class:`~anarchon.testing.contracts.healing.HealingContract`).
        """

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-token")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            won = await runs.claim(self.request(job, slot, "instance-a"))
            assert won.kind == "won"
            wrong = new_token()
            assert not await runs.heartbeat(job, slot, wrong, 5 * self.long_lease_ms)
            assert not await runs.finish(job, slot, wrong, "ok")
            assert not await runs.release(job, slot, wrong)
            assert not await runs.heartbeat(job, slot + 1000, wrong, self.lease_ms)
            assert not await runs.release(job, slot + 1000, wrong)

            backup = await runs.claim(self.request(job, slot, "instance-b"))
            assert backup.kind == "running"
            assert backup.runner == "instance-a"
            assert backup.lease_expires_at == won.lease_expires_at
            active = await runs.active(job)
            assert [(a.slot, a.runner, a.live, a.lease_expires_at) for a in active] == [
                (slot, "instance-a", True, won.lease_expires_at)
            ]
            records = await _records(b, job, slot)
            assert [r.status for r in records] == ["running"]

        self.run(backend, body)

    def test_heartbeat_extends_the_lease(self, backend: Backend) -> None:
        """A heartbeat moves the lease to store time + lease_ms; it outlives the first lease."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-heartbeat")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a", lease_ms=self.lease_ms)
            won = await runs.claim(first)
            assert won.kind == "won"
            assert won.lease_expires_at is not None
            before = await runs.now_ms()
            assert await runs.heartbeat(job, slot, first.token, self.long_lease_ms)
            after = await runs.now_ms()
            (active,) = await runs.active(job)
            low, high = before + self.long_lease_ms, after + self.long_lease_ms
            assert low - _SLACK_MS <= active.lease_expires_at <= high + _SLACK_MS
            await _wait_expired(runs, won.lease_expires_at)
            backup = await runs.claim(self.request(job, slot, "instance-b", create=False))
            assert backup.kind == "running", "the heartbeat must keep the run alive"
            assert backup.runner == "instance-a"
            (active,) = await runs.active(job)
            assert active.live

        self.run(backend, body)

    def test_release_hands_over_at_once(self, backend: Backend) -> None:
        """``release()`` ends the lease now: a backup's re-check wins attempt 2 without waiting."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-release")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a")
            assert (await runs.claim(first)).kind == "won"
            assert await runs.release(job, slot, first.token)
            taken = await runs.claim(self.request(job, slot, "instance-b", create=False))
            assert taken.kind == "won"
            assert taken.attempt == 2
            assert taken.runner == "instance-b"
            assert not await runs.heartbeat(job, slot, first.token, self.lease_ms)
            assert not await runs.finish(job, slot, first.token, "ok")
            records = await _records(b, job, slot)
            assert [(r.attempt, r.instance_id, r.status) for r in records] == [
                (2, "instance-b", "running"),
                (1, "instance-a", "interrupted"),
            ]
            assert records[1].reason in ("handed_over", "lease_lost")

        self.run(backend, body)

    def test_release_on_the_last_attempt_interrupts(self, backend: Backend) -> None:
        """``release()`` on the last attempt marks the run interrupted (handed_over): done."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-release-last")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            first = self.request(job, slot, "instance-a", max_attempts=1)
            assert (await runs.claim(first)).kind == "won"
            assert await runs.release(job, slot, first.token)
            again = self.request(job, slot, "instance-b", create=False, max_attempts=1)
            assert (await runs.claim(again)).kind == "done"
            assert await runs.active(job) == []
            records = await _records(b, job, slot)
            assert [(r.attempt, r.instance_id, r.status, r.reason) for r in records] == [
                (1, "instance-a", "interrupted", "handed_over")
            ]

        self.run(backend, body)

    # active() ---------------------------------------------------------

    def test_active_lists_unfinished_runs(self, backend: Backend) -> None:
        """``active()`` lists running runs (live or expired), never finished ones."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-active")
            await b.prepare_job(job, 1000)
            base = await _slot(runs, seconds_ago=3)
            live = await runs.claim(self.request(job, base, "instance-a", overlap=True))
            done = self.request(job, base + 1000, "instance-b", overlap=True)
            assert (await runs.claim(done)).kind == "won"
            assert await runs.finish(job, base + 1000, done.token, "error", "boom")
            short = self.request(
                job, base + 2000, "instance-c", overlap=True, lease_ms=self.lease_ms
            )
            dying = await runs.claim(short)
            assert live.kind == "won"
            assert dying.kind == "won"
            assert dying.lease_expires_at is not None
            await _wait_expired(runs, dying.lease_expires_at)

            active = {a.slot: a for a in await runs.active(job)}
            assert set(active) == {base, base + 2000}
            assert active[base].live
            assert active[base].runner == "instance-a"
            assert active[base].attempt == 1
            assert active[base].lease_expires_at == live.lease_expires_at
            assert not active[base + 2000].live
            assert active[base + 2000].runner == "instance-c"
            assert active[base + 2000].lease_expires_at == dying.lease_expires_at
            assert await runs.active(new_job("lease-active-none")) == []

        self.run(backend, body)

    # Races ------------------------------------------------------------

    def test_race_for_fresh_slots(self, backend: Backend) -> None:
        """Concurrent first claims: one ``won``, every other claimer ``running`` behind it."""
        claimers, rounds = self.race_claimers, self.race_rounds

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-race")
            await b.prepare_job(job, 1000)
            base = await _slot(runs, seconds_ago=rounds + 1)
            for r in range(rounds):
                slot = base + r * 1000
                requests = [
                    self.request(job, slot, f"instance-{i}", overlap=True) for i in range(claimers)
                ]
                outcomes = await asyncio.gather(*(runs.claim(x) for x in requests))
                winners = [x for x, o in zip(requests, outcomes, strict=True) if o.kind == "won"]
                assert len(winners) == 1, f"slot {slot}: {len(winners)} winners"
                others = [o for o in outcomes if o.kind != "won"]
                assert {o.kind for o in others} == {"running"}
                assert {o.runner for o in others} == {winners[0].instance_id}

        self.run(backend, body)

    def test_race_for_an_expired_lease(self, backend: Backend) -> None:
        """Many backups re-check one expired lease at once: exactly one takes over."""
        claimers = self.race_claimers

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-race-expired")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            won = await runs.claim(self.request(job, slot, "instance-a", lease_ms=self.lease_ms))
            assert won.kind == "won"
            assert won.lease_expires_at is not None
            await _wait_expired(runs, won.lease_expires_at)
            requests = [
                self.request(job, slot, f"backup-{i}", create=False) for i in range(claimers)
            ]
            outcomes: list[ClaimOutcome] = await asyncio.gather(*(runs.claim(x) for x in requests))
            winners = [x for x, o in zip(requests, outcomes, strict=True) if o.kind == "won"]
            assert len(winners) == 1, f"{len(winners)} backups took over one expired lease"
            won_outcome = next(o for o in outcomes if o.kind == "won")
            assert won_outcome.attempt == 2
            others = [o for o in outcomes if o.kind != "won"]
            assert {o.kind for o in others} == {"running"}
            assert {o.runner for o in others} == {winners[0].instance_id}
            records = await _records(b, job, slot)
            assert [(r.attempt, r.status) for r in records] == [(2, "running"), (1, "interrupted")]

        self.run(backend, body)

    # The plain claim on a lease backend --------------------------------

    def test_plain_claim_is_a_lease_claim(self, backend: Backend) -> None:
        """``Backend.claim()`` creates the run: a lease claim of another token does not win."""

        async def body(b: Backend) -> None:
            runs, job = _runs(b), new_job("lease-plain")
            await b.prepare_job(job, 1000)
            slot = await _slot(runs)
            plain = ClaimInput(job, slot, new_token(), "instance-a")
            assert await b.claim(plain)
            other = await runs.claim(self.request(job, slot, "instance-b", overlap=True))
            assert other.kind in ("running", "done")
            assert other.runner == "instance-a"
            assert await b.claim(plain)
            assert not await b.claim(ClaimInput(job, slot, new_token(), "instance-c"))

        self.run(backend, body)

    # Batch members ----------------------------------------------------

    def test_lease_batches_answer_like_single_calls(self, backend: Backend) -> None:
        """``claim_many``/``heartbeat_many``/``finish_many``/``release_many`` equal the single
        calls, item for item.

        A hypothesis property over mixed states in one batch: won, running,
        a backup's re-check, the caller's own lease, done, overlap, late,
        none, a takeover, attempts exhausted and a released lease; with
        repeated items and a batch retried with the same tokens. Answers
        (kind, attempt, runner) and the resulting active runs and history
        must equal those of the same items sent one by one
        (docs/run-store.md, "Batch members").
        """
        long_ms, short_ms = self.long_lease_ms, self.batch_lease_ms

        async def check(b: Backend, scenario: Any) -> None:
            await check_lease_batches(b, scenario, long_ms, short_ms)

        run_property(
            backend,
            scenarios(LEASE_KINDS),
            check,
            examples=self.batch_examples,
            timeout_s=self.timeout_s,
        )
