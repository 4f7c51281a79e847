"""The state of the memory backend: :class:`MemoryStore`, the one owner of every record.

:class:`~anarchon.backend.memory.MemoryBackend` (claims, history, fleet) and
:class:`~anarchon.backend.memory.MemoryRunStore` (leases) are views of one
:class:`MemoryStore`: each of their calls takes :attr:`MemoryStore.lock` and
then calls the store's steps, which read and write without awaiting. The lease
rules are those of :mod:`anarchon.backend.lease_model`; what is kept, and how
long, follows :mod:`anarchon.backend.retention`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from anarchon.backend.history import DEFAULT_HISTORY_SIZE
from anarchon.backend.lease_model import (
    HEALED_WARNING,
    Blocker,
    decide_claim,
    decide_finish,
    decide_heartbeat,
    decide_release,
)
from anarchon.backend.lease_model import LeaseState as ModelState
from anarchon.backend.membership import live_members
from anarchon.backend.retention import (
    StateRetention,
    history_over,
    history_to_keep,
    kept_runs,
    states_to_drop,
)
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import (
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    ClaimRecord,
    JobLimits,
    LeaseState,
    RunClaim,
    RunRetry,
    StoredResult,
    lease_state_of,
)

__all__ = ["MemoryStore", "NowMs"]

log = logging.getLogger("anarchon.store")


class NowMs(Protocol):
    """A clock the memory store reads: anything with ``now_ms()`` (ms since the epoch)."""

    def now_ms(self) -> int:
        """Current time in ms since the Unix epoch."""
        ...


class _WallClock:
    """The machine's wall clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _RunState:
    """The lease state of one ``(job, slot)`` (docs/leases.md)."""

    slot: int
    attempt: int
    token: str
    runner: str
    status: str  # running / finished / interrupted / skipped
    lease_expires_at: int
    max_attempts: int
    started_at: int
    finished_at: int | None = None
    released: bool = False
    end_reason: str | None = None
    result_status: str | None = None
    error: str | None = None

    def model(self) -> ModelState:
        """This state as the reference model's :class:`anarchon.backend.lease_model.LeaseState`."""
        return ModelState(
            attempt=self.attempt,
            token=self.token,
            runner=self.runner,
            status=self.status,
            lease_expires_at=self.lease_expires_at,
            max_attempts=self.max_attempts,
            started_at=self.started_at,
            released=self.released,
            end_reason=self.end_reason,
        )

    def apply(self, new: ModelState) -> None:
        """Take the lease fields of the model's new state."""
        self.attempt = new.attempt
        self.token = new.token
        self.runner = new.runner
        self.status = new.status
        self.lease_expires_at = new.lease_expires_at
        self.max_attempts = new.max_attempts
        self.started_at = new.started_at
        self.released = new.released
        self.end_reason = new.end_reason

    def outcome(self, kind: str) -> ClaimOutcome:
        return ClaimOutcome(kind, self.attempt, self.runner, self.lease_expires_at)

    def interrupted(self, reason: str, at: int) -> StoredResult:
        """The history record of this attempt ending ``interrupted`` at ``at``."""
        return StoredResult(
            slot=self.slot,
            token=self.token,
            instance_id=self.runner,
            status="interrupted",
            started_at=self.started_at,
            finished_at=max(at, self.started_at),
            attempt=self.attempt,
            reason=reason,
        )


@dataclass
class _JobData:
    """Everything the store keeps for one job."""

    states: dict[int, _RunState] = field(default_factory=dict)
    running: set[int] = field(default_factory=set)
    claims: list[ClaimRecord] = field(default_factory=list)
    results: list[StoredResult] = field(default_factory=list)
    # token -> (slot, attempt) of every attempt in history: counts runs for trimming.
    tokens: dict[str, tuple[int, int]] = field(default_factory=dict)
    oldest_slot: int | None = None
    # Run-state count at which trimming is tried next (amortises the scan).
    trim_states_at: int = 0
    # The latest history settings a caller gave (release() and finish() get none).
    history_size: int = DEFAULT_HISTORY_SIZE
    history_ttl_ms: int | None = None

    def owned(self, slot: int, token: str) -> _RunState | None:
        """The run state if ``token`` holds it and it is still running (not released)."""
        state = self.states.get(slot)
        if state is None or state.token != token or state.status != "running" or state.released:
            return None
        return state

    def apply(self, state: _RunState, new: ModelState, now: int) -> None:
        """Write the model's new state; a run that stops running leaves ``running``."""
        was_running = state.status == "running"
        state.apply(new)
        if was_running and new.status != "running":
            state.finished_at = now
            self.running.discard(state.slot)
        elif new.status == "running":
            self.running.add(state.slot)

    def end(self, state: _RunState, status: str, now: int) -> None:
        state.status = status
        state.finished_at = now
        self.running.discard(state.slot)

    def live_older(self, slot: int, now: int) -> _RunState | None:
        """The newest older slot of the job that still holds a live lease."""
        blocker: _RunState | None = None
        for other in self.running:
            state = self.states[other]
            live = other < slot and state.lease_expires_at > now
            if live and (blocker is None or other > blocker.slot):
                blocker = state
        return blocker


class MemoryStore:
    """Every record of one memory backend, and the lock each step runs under.

    Each method is one store step: call it with :attr:`lock` held and it
    neither awaits nor lets go of the lock between its reads and its writes.
    """

    def __init__(self, clock: NowMs | None = None) -> None:
        self.clock: NowMs = clock if clock is not None else _WallClock()
        self.lock = threading.Lock()
        self.jobs: dict[str, _JobData] = {}
        self.declared: dict[tuple[str, str], Declaration] = {}
        self.controls: dict[str, JobControl] = {}
        self.members: dict[str, Member] = {}
        self.retention = StateRetention()

    def now(self) -> int:
        """The store clock in ms."""
        return int(self.clock.now_ms())

    def job(self, job: str) -> _JobData:
        """The records of ``job``, created empty on first use."""
        data = self.jobs.get(job)
        if data is None:
            data = self.jobs[job] = _JobData()
        return data

    def _state(self, job: str, slot: int) -> tuple[_JobData, _RunState] | None:
        data = self.jobs.get(job)
        state = None if data is None else data.states.get(slot)
        return None if data is None or state is None else (data, state)

    # Leases -------------------------------------------------------------

    def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree of docs/leases.md."""
        now = self.now()
        data = self.job(claim.job)
        state = data.states.get(claim.slot)
        blocker = None
        if state is None and claim.create and not claim.overlap:
            found = data.live_older(claim.slot, now)
            if found is not None:
                blocker = Blocker(found.runner, found.lease_expires_at)
        decision = decide_claim(None if state is None else state.model(), claim, now, blocker)
        new = decision.state
        if decision.interrupted is not None and state is not None:
            # The dead attempt is recorded interrupted in this same step.
            at = decision.interrupted_at if decision.interrupted_at is not None else now
            self._add_history(
                data,
                None,
                state.interrupted(decision.interrupted, at),
                claim.history_size,
                claim.history_ttl_ms,
                now,
            )
        if new is None:
            return decision.outcome
        if state is None:
            state = _RunState(
                slot=claim.slot,
                attempt=new.attempt,
                token=new.token,
                runner=new.runner,
                status=new.status,
                lease_expires_at=new.lease_expires_at,
                max_attempts=new.max_attempts,
                started_at=new.started_at,
            )
            data.states[claim.slot] = state
            if new.status == "running":
                data.running.add(claim.slot)
            else:
                state.finished_at = now
        else:
            data.apply(state, new, now)
        if decision.skipped:
            skipped = StoredResult(
                slot=claim.slot,
                token=claim.token,
                instance_id=claim.instance_id,
                status="skipped",
                started_at=now,
                finished_at=now,
                attempt=1,
                reason="overlap",
            )
            self._add_history(data, None, skipped, claim.history_size, claim.history_ttl_ms, now)
        if decision.claim_record:
            self._add_claim(claim, data, state, now)
        return decision.outcome

    def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to store time + ``lease_ms`` if ``token`` still owns the run."""
        found = self._state(job, slot)
        if found is None:
            return False
        data, state = found
        now = self.now()
        decision = decide_heartbeat(state.model(), token, lease_ms, now)
        if decision.ok and decision.state is not None:
            data.apply(state, decision.state, now)
        return decision.ok

    def finish(self, job: str, slot: int, token: str, status: str, error: str | None) -> bool:
        """Mark the run finished with ``status`` if ``token`` still owns it.

        A run with no state at all is written finished by ``token`` (the
        lease model's healing finish) and logged at WARNING.
        """
        found = self._state(job, slot)
        if found is None:
            return self._heal(job, slot, token, status, error)
        data, state = found
        was_running = state.status == "running" and not state.released
        now = self.now()
        decision = decide_finish(state.model(), token, now)
        if decision.ok and was_running and decision.state is not None:
            data.apply(state, decision.state, now)
            state.result_status = status
            state.error = error
        return decision.ok

    def _heal(self, job: str, slot: int, token: str, status: str, error: str | None) -> bool:
        """A finish that found no state: write the finished state the lease model decides."""
        now = self.now()
        decision = decide_finish(None, token, now)
        new = decision.state
        if not decision.ok or new is None:
            return decision.ok
        self.job(job).states[slot] = _RunState(
            slot=slot,
            attempt=new.attempt,
            token=new.token,
            runner=new.runner,
            status=new.status,
            lease_expires_at=new.lease_expires_at,
            max_attempts=new.max_attempts,
            started_at=new.started_at,
            finished_at=now,
            end_reason=new.end_reason,
            result_status=status,
            error=error,
        )
        log.warning("anarchon: %s slot %d: %s", job, slot, HEALED_WARNING)
        return True

    def release(self, job: str, slot: int, token: str) -> bool:
        """End ``token``'s lease now; the attempt is recorded ``interrupted`` (``handed_over``)."""
        found = self._state(job, slot)
        if found is None:
            return False
        data, state = found
        now = self.now()
        decision = decide_release(state.model(), token, now)
        if decision.record:
            self._add_history(
                data,
                None,
                state.interrupted("handed_over", now),
                data.history_size,
                data.history_ttl_ms,
                now,
            )
        if decision.state is not None:
            data.apply(state, decision.state, now)
        return decision.ok

    def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End attempt ``retry.token`` after an error and start the next one."""
        found = self._state(retry.job, retry.slot)
        if found is None:
            return ClaimOutcome("done")
        data, state = found
        if state.token == retry.new_token and state.status == "running":
            return state.outcome("won")  # a repeated call
        if data.owned(retry.slot, retry.token) is None:
            return state.outcome("running" if state.status == "running" else "done")
        if state.attempt >= retry.max_attempts:
            return state.outcome("done")
        now = self.now()
        state.attempt += 1
        state.token = retry.new_token
        state.runner = retry.instance_id
        state.lease_expires_at = now + retry.lease_ms
        state.max_attempts = retry.max_attempts
        state.started_at = now
        claim = RunClaim(
            job=retry.job,
            slot=retry.slot,
            token=retry.new_token,
            instance_id=retry.instance_id,
            lease_ms=retry.lease_ms,
            max_attempts=retry.max_attempts,
            history_size=retry.history_size,
            history_ttl_ms=retry.history_ttl_ms,
        )
        self._add_claim(claim, data, state, now)
        return state.outcome("won")

    def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)``."""
        found = self._state(job, slot)
        if found is None:
            return lease_state_of(token, None, False, False)
        state = found[1]
        return lease_state_of(token, state.token, state.status == "running", state.released)

    def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        now = self.now()
        data = self.jobs.get(job)
        if data is None:
            return []
        runs = []
        for slot in sorted(data.running):
            state = data.states[slot]
            runs.append(
                ActiveRun(
                    slot=slot,
                    attempt=state.attempt,
                    runner=state.runner,
                    lease_expires_at=state.lease_expires_at,
                    live=state.lease_expires_at > now,
                    token=state.token,
                )
            )
        return runs

    # Claims and history ---------------------------------------------------

    def plain_claim(self, input: ClaimInput) -> bool:
        """A claim-only claim: True for exactly one token per ``(job, slot)``, again for it."""
        data = self.jobs.get(input.job)
        state = None if data is None else data.states.get(input.slot)
        if state is not None and state.token == input.token:
            return True
        return self.claim(RunClaim.plain(input)).won

    def manual_run(self, input: ClaimInput) -> None:
        """Append a manual claim record (never de-duplicated); the slot is kept as given."""
        now = self.now()
        record = ClaimRecord(
            job=input.job,
            slot=input.slot,
            token=input.token,
            instance_id=input.instance_id,
            at=now,
            manual=True,
            attempt=1,
        )
        self._add_history(
            self.job(input.job), record, None, input.history_size, input.history_ttl_ms, now
        )

    def save(
        self, job: str, result: StoredResult, history_size: int, history_ttl_ms: int | None
    ) -> None:
        """Store how a run ended; a plain claim's run state is marked finished too."""
        now = self.now()
        data = self.job(job)
        state = data.states.get(result.slot)
        if (
            state is not None
            and state.token == result.token
            and state.status == "running"
            and result.status != "running"
        ):
            data.end(state, "finished", now)
            state.result_status = result.status
            state.error = result.error
        self._add_history(data, None, result, history_size, history_ttl_ms, now)

    def history_records(self, job: str) -> tuple[list[ClaimRecord], list[StoredResult]]:
        """Copies of the claim records and results of ``job``."""
        data = self.jobs.get(job)
        if data is None:
            return [], []
        return list(data.claims), list(data.results)

    def learn(self, limits: JobLimits) -> None:
        """Learn how long late and catch-up claims may ask for a slot of ``limits.job``."""
        self.job(limits.job)
        self.retention.learn(limits)

    # Fleet registry and controls ------------------------------------------

    def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Record or refresh each declaration until ``ttl_ms`` after now; drop expired ones."""
        now = self.now()
        for d in declarations:
            self.declared[(d.job, d.instance_id)] = dataclasses.replace(
                d, seen_at=now, expires_at=now + ttl_ms
            )
        for key in [k for k, d in self.declared.items() if d.expires_at <= now]:
            del self.declared[key]

    def live_declarations(self, job: str | None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        now = self.now()
        return [
            d
            for d in self.declared.values()
            if d.expires_at > now and (job is None or d.job == job)
        ]

    def set_control(self, control: JobControl) -> None:
        """Store the control of ``control.job``, stamped with store time."""
        self.controls[control.job] = dataclasses.replace(control, updated_at=self.now())

    # Membership (docs/fleet.md, "Membership") ------------------------------

    def refresh_member(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Upsert the record until ``ttl_ms`` after now, drop expired ones; every live member."""
        now = self.now()
        self.members[instance_id] = Member(instance_id, roster, now, now + ttl_ms)
        for key in [k for k, m in self.members.items() if m.expires_at <= now]:
            del self.members[key]
        return live_members(self.members.values(), now)

    def live_members(self) -> list[Member]:
        """Every unexpired record, sorted by instance id."""
        return live_members(self.members.values(), self.now())

    # Records and retention (docs/leases.md, anarchon.backend.retention) ----

    def _add_claim(self, claim: RunClaim, data: _JobData, state: _RunState, now: int) -> None:
        record = ClaimRecord(
            job=claim.job,
            slot=claim.slot,
            token=claim.token,
            instance_id=claim.instance_id,
            at=now,
            manual=False,
            attempt=state.attempt,
        )
        self._add_history(data, record, None, claim.history_size, claim.history_ttl_ms, now)
        self._trim_states(claim.job, data, claim.history_size, now)

    @staticmethod
    def _add_history(
        data: _JobData,
        claim: ClaimRecord | None,
        result: StoredResult | None,
        history_size: int,
        history_ttl_ms: int | None,
        now: int,
    ) -> None:
        record = claim if claim is not None else result
        assert record is not None
        data.history_size = history_size
        data.history_ttl_ms = history_ttl_ms
        if claim is not None:
            data.claims.append(claim)
        if result is not None:
            data.results.append(result)
        data.tokens.setdefault(record.token, (record.slot, record.attempt))
        if data.oldest_slot is None or record.slot < data.oldest_slot:
            data.oldest_slot = record.slot
        keep = history_to_keep(
            data.tokens, data.running, history_size, history_ttl_ms, now, data.oldest_slot
        )
        if keep is None:
            return
        data.claims = [c for c in data.claims if c.token in keep]
        data.results = [r for r in data.results if r.token in keep]
        data.tokens = {token: key for token, key in data.tokens.items() if token in keep}
        data.oldest_slot = min((slot for slot, _a in data.tokens.values()), default=None)

    def _trim_states(self, job: str, data: _JobData, history_size: int, now: int) -> None:
        """Drop old finished run state once late and catch-up claims can no longer ask for it."""
        retention_ms = self.retention.get(job)
        count = len(data.states)
        if (
            retention_ms is None
            or not history_over(count, history_size)
            or count < data.trim_states_at
        ):
            return
        data.trim_states_at = count + kept_runs(history_size)  # retried after N more runs
        finished = {slot: state.status != "running" for slot, state in data.states.items()}
        for slot in states_to_drop(finished, history_size, retention_ms, now):
            del data.states[slot]
