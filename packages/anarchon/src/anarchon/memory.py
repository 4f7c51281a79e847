"""The in-process backend (docs/backends/memory.md): claims, history and leases in a dict.

For tests, and for learning the contract. Everything lives in one process:
schedulers on one event loop, on several loops (``start_in_thread``) or in
threads share a :class:`MemoryBackend` safely, because every store step runs
under one :class:`threading.Lock` and never awaits between its read and its
write.

``memory://name`` gives the same backend for every resolution of that name in
the process (instances of one program "share a store"); ``memory://`` a fresh
one.

Retention (docs/leases.md): history is trimmed to about ``history_size`` runs per job
(between N and 2N) and by ``history_ttl`` when given, but the records of a run
still in progress are never trimmed. Run state (what decides claims) is kept
forever unless :meth:`MemoryBackend.check_job` told the backend how long late
and catch-up claims may still ask for a slot; then finished state older than
that window (plus a minute of margin) is trimmed, down to about
``history_size`` entries. Running state is never trimmed.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol
from urllib.parse import parse_qsl, urlsplit

from anarchon.backend import Backend, RunStore
from anarchon.errors import InvalidConfigError
from anarchon.fleet_types import Declaration, JobControl
from anarchon.history import build_history
from anarchon.lease_model import (
    Blocker,
    decide_claim,
    decide_finish,
    decide_heartbeat,
    decide_release,
)
from anarchon.lease_model import LeaseState as ModelState
from anarchon.types import (
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    ClaimRecord,
    JobLimits,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRecord,
    RunRetry,
    StoredResult,
    lease_state_of,
)

__all__ = ["MemoryBackend", "MemoryRunStore", "NowMs"]


RETENTION_MARGIN_MS = 60_000
"""Extra time finished run state is kept beyond what late and catch-up claims need."""


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
        """This state as the reference model's :class:`anarchon.lease_model.LeaseState`."""
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
    retention_ms: int | None = None
    # Run-state count at which trimming is tried next (amortises the scan).
    trim_states_at: int = 0
    # The latest history settings a caller gave (release() and finish() get none).
    history_size: int = 1000
    history_ttl_ms: int | None = None


class MemoryRunStore(RunStore):
    """Leases of the memory backend: the claim tree of docs/leases.md, one locked step per call."""

    def __init__(self, clock: NowMs | None = None) -> None:
        self.clock: NowMs = clock if clock is not None else _WallClock()
        self._lock = threading.Lock()
        self._jobs: dict[str, _JobData] = {}
        self.save_locked: Callable[[ResultWrite], None] | None = None
        """Stores one result with the lock held (set by the :class:`MemoryBackend` owning it)."""

    # RunStore ---------------------------------------------------------

    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree of docs/leases.md atomically and return its outcome."""
        with self._lock:
            return self._claim_locked(claim)

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to store time + ``lease_ms`` if ``token`` still owns the run."""
        with self._lock:
            return self._heartbeat_locked(job, slot, token, lease_ms)

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Mark the run finished with ``status`` if ``token`` still owns it.

        Only the run state changes: the scheduler stores the result with
        :meth:`MemoryBackend.save_result` after a successful ``finish``.
        """
        with self._lock:
            return self._finish_locked(job, slot, token, status, error)

    # Batch members: every item under one lock acquisition, in request order.

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """``claim()`` for each item, in order, in one locked step."""
        with self._lock:
            return [self._claim_locked(claim) for claim in claims]

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """``heartbeat()`` for each run, in order, in one locked step."""
        with self._lock:
            return [self._heartbeat_locked(r.job, r.slot, r.token, lease_ms) for r in runs]

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """``finish()`` for each item, in order, in one locked step."""
        with self._lock:
            return [
                self._finish_locked(f.job, f.slot, f.token, f.status, f.error) for f in finishes
            ]

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool] | None:
        """Each finish, and its result if it finished the run, in one locked step."""
        save = self.save_locked
        if save is None:
            return None
        answers: list[bool] = []
        with self._lock:
            for f, w in zip(finishes, writes, strict=True):
                done = self._finish_locked(f.job, f.slot, f.token, f.status, f.error)
                if done:
                    save(w)
                answers.append(done)
        return answers

    async def release(self, job: str, slot: int, token: str) -> bool:
        """End ``token``'s lease now so a backup takes over at once (hand-over).

        The released attempt is recorded in history as ``interrupted`` with
        reason ``handed_over``. On the last attempt the run is marked
        interrupted instead, so no backup starts it again.
        """
        with self._lock:
            return self._release_locked(job, slot, token)

    async def release_many(self, runs: Sequence[RunKey]) -> list[bool]:
        """``release()`` for each run, in order, in one locked step."""
        with self._lock:
            return [self._release_locked(r.job, r.slot, r.token) for r in runs]

    def _release_locked(self, job: str, slot: int, token: str) -> bool:
        data = self._jobs.get(job)
        state = None if data is None else data.states.get(slot)
        if data is None or state is None:
            return False
        now = self._now()
        decision = decide_release(state.model(), token, now)
        if decision.record:
            self._add_result(
                data,
                self._interrupted(state, "handed_over", now),
                data.history_size,
                data.history_ttl_ms,
                now,
            )
        if decision.state is not None:
            self._apply(data, state, decision.state, now)
        return decision.ok

    native_retry = True
    overlap_wait = True

    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End attempt ``retry.token`` after an error and start the next one, in one locked step."""
        with self._lock:
            data = self._jobs.get(retry.job)
            state = None if data is None else data.states.get(retry.slot)
            if data is None or state is None:
                return ClaimOutcome("done")
            if state.token == retry.new_token and state.status == "running":
                return self._outcome("won", state)  # a repeated call
            if self._owned(retry.job, retry.slot, retry.token) is None:
                if state.status == "running":
                    return self._outcome("running", state)
                return self._outcome("done", state)
            if state.attempt >= retry.max_attempts:
                return self._outcome("done", state)
            now = self._now()
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
            return self._outcome("won", state)

    async def now_ms(self) -> int:
        """The store clock (the clock given to the backend, else the wall clock)."""
        return self._now()

    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)``."""
        with self._lock:
            data = self._jobs.get(job)
            state = None if data is None else data.states.get(slot)
            if state is None:
                return lease_state_of(token, None, False, False)
            return lease_state_of(token, state.token, state.status == "running", state.released)

    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        with self._lock:
            now = self._now()
            data = self._jobs.get(job)
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

    # Internals (all called with the lock held) -----------------------

    def _now(self) -> int:
        return int(self.clock.now_ms())

    def _heartbeat_locked(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        data = self._jobs.get(job)
        state = None if data is None else data.states.get(slot)
        if data is None or state is None:
            return False
        now = self._now()
        decision = decide_heartbeat(state.model(), token, lease_ms, now)
        if decision.ok and decision.state is not None:
            self._apply(data, state, decision.state, now)
        return decision.ok

    def _finish_locked(
        self, job: str, slot: int, token: str, status: str, error: str | None
    ) -> bool:
        data = self._jobs.get(job)
        state = None if data is None else data.states.get(slot)
        if data is None or state is None:
            return False
        was_running = state.status == "running" and not state.released
        now = self._now()
        decision = decide_finish(state.model(), token, now)
        if decision.ok and was_running and decision.state is not None:
            self._apply(data, state, decision.state, now)
            state.result_status = status
            state.error = error
        return decision.ok

    @staticmethod
    def _apply(data: _JobData, state: _RunState, new: ModelState, now: int) -> None:
        """Write the model's new state; a run that stops running leaves ``data.running``."""
        was_running = state.status == "running"
        state.apply(new)
        if was_running and new.status != "running":
            state.finished_at = now
            data.running.discard(state.slot)
        elif new.status == "running":
            data.running.add(state.slot)

    def _job(self, job: str) -> _JobData:
        data = self._jobs.get(job)
        if data is None:
            data = self._jobs[job] = _JobData()
        return data

    def _owned(self, job: str, slot: int, token: str) -> _RunState | None:
        """The run state if ``token`` holds it and it is still running (not released)."""
        data = self._jobs.get(job)
        state = None if data is None else data.states.get(slot)
        if state is None or state.token != token or state.status != "running" or state.released:
            return None
        return state

    def _claim_locked(self, claim: RunClaim) -> ClaimOutcome:
        now = self._now()
        data = self._job(claim.job)
        state = data.states.get(claim.slot)
        blocker = None
        if state is None and claim.create and not claim.overlap:
            found = self._live_older(data, claim.slot, now)
            if found is not None:
                blocker = Blocker(found.runner, found.lease_expires_at)
        decision = decide_claim(None if state is None else state.model(), claim, now, blocker)
        new = decision.state
        if decision.interrupted is not None and state is not None:
            # The dead attempt is recorded interrupted in this same step.
            at = decision.interrupted_at if decision.interrupted_at is not None else now
            self._add_result(
                data,
                self._interrupted(state, decision.interrupted, at),
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
            self._apply(data, state, new, now)
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
            self._add_result(data, skipped, claim.history_size, claim.history_ttl_ms, now)
        if decision.claim_record:
            self._add_claim(claim, data, state, now)
        return decision.outcome

    @staticmethod
    def _live_older(data: _JobData, slot: int, now: int) -> _RunState | None:
        """The newest older slot of the job that still holds a live lease."""
        blocker: _RunState | None = None
        for other in data.running:
            state = data.states[other]
            live = other < slot and state.lease_expires_at > now
            if live and (blocker is None or other > blocker.slot):
                blocker = state
        return blocker

    @staticmethod
    def _outcome(kind: str, state: _RunState) -> ClaimOutcome:
        return ClaimOutcome(kind, state.attempt, state.runner, state.lease_expires_at)

    @staticmethod
    def _interrupted(state: _RunState, reason: str, at: int) -> StoredResult:
        return StoredResult(
            slot=state.slot,
            token=state.token,
            instance_id=state.runner,
            status="interrupted",
            started_at=state.started_at,
            finished_at=max(at, state.started_at),
            attempt=state.attempt,
            reason=reason,
        )

    @staticmethod
    def _end(data: _JobData, state: _RunState, status: str, now: int) -> None:
        state.status = status
        state.finished_at = now
        data.running.discard(state.slot)

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
        self._trim_states(data, claim.history_size, now)

    def _add_result(
        self,
        data: _JobData,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None,
        now: int,
    ) -> None:
        self._add_history(data, None, result, history_size, history_ttl_ms, now)

    def _add_history(
        self,
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
        self._trim_history(data, history_size, history_ttl_ms, now)

    @staticmethod
    def _trim_history(
        data: _JobData, history_size: int, history_ttl_ms: int | None, now: int
    ) -> None:
        """Keep about ``history_size`` runs (N..2N) and nothing older than the TTL.

        Records of a run whose state is still running are never dropped.
        """
        size = max(int(history_size), 1)
        keep: set[str] | None = None
        if history_ttl_ms is not None and data.oldest_slot is not None:
            cutoff = now - history_ttl_ms
            if data.oldest_slot < cutoff:
                keep = {
                    token
                    for token, (slot, _attempt) in data.tokens.items()
                    if slot >= cutoff or slot in data.running
                }
        candidates = data.tokens if keep is None else {t: data.tokens[t] for t in keep}
        if len(candidates) > 2 * size:
            newest = sorted(candidates.items(), key=lambda item: item[1], reverse=True)
            keep = {token for token, _key in newest[:size]}
            keep.update(token for token, (slot, _a) in candidates.items() if slot in data.running)
        if keep is None:
            return
        data.claims = [c for c in data.claims if c.token in keep]
        data.results = [r for r in data.results if r.token in keep]
        data.tokens = {token: key for token, key in data.tokens.items() if token in keep}
        data.oldest_slot = min((slot for slot, _a in data.tokens.values()), default=None)

    @staticmethod
    def _trim_states(data: _JobData, history_size: int, now: int) -> None:
        """Drop old finished run state once late and catch-up claims can no longer ask for it."""
        size = max(int(history_size), 1)
        count = len(data.states)
        if data.retention_ms is None or count <= 2 * size or count < data.trim_states_at:
            return
        data.trim_states_at = count + size  # retried after ``size`` more runs at the earliest
        horizon = now - data.retention_ms
        removable = sorted(
            slot
            for slot, state in data.states.items()
            if state.status != "running" and slot < horizon
        )
        excess = len(data.states) - size
        for slot in removable[:excess]:
            del data.states[slot]


class MemoryBackend(Backend):
    """An in-process backend with leases; ``memory://name`` shares one per process by name.

    ``clock`` is any object with ``now_ms() -> int``; it is the store clock
    (default: the wall clock), so tests can make leases expire without
    sleeping. ``leases=False`` gives a claim-only backend (``runs`` is None),
    to test code paths of backends without leases.
    """

    name: ClassVar[str] = "memory"
    dedupe_window_ms: float = math.inf
    runs: MemoryRunStore | None

    def __init__(self, clock: NowMs | None = None, *, leases: bool = True) -> None:
        self._store = MemoryRunStore(clock)
        self._store.save_locked = lambda w: self._save_locked(
            w.job, w.result, w.history_size, w.history_ttl_ms
        )
        self.runs = self._store if leases else None
        self.url: str = "memory://"
        self._declared: dict[tuple[str, str], Declaration] = {}
        self._controls: dict[str, JobControl] = {}

    @property
    def clock(self) -> NowMs:
        """The store clock."""
        return self._store.clock

    def __repr__(self) -> str:
        return f"MemoryBackend({self.url!r})"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryBackend:
        """``memory://`` → a fresh backend; ``memory://name`` → this process's backend of that name.

        The memory backend takes no options: any query option (in the URL or
        as a keyword) raises ``InvalidConfigError``.
        """
        parts = urlsplit(url)
        if parts.scheme.lower() != "memory":
            raise InvalidConfigError(f"not a memory:// URL: {url!r}")
        given = dict(parse_qsl(parts.query, keep_blank_values=True))
        given.update(options)
        if given:
            names = ", ".join(sorted(given))
            raise InvalidConfigError(f"memory:// takes no options (got: {names})")
        name = (parts.netloc + parts.path).strip("/")
        if not name:
            return cls()
        with _NAMED_LOCK:
            backend = _NAMED.get(name)
            if backend is None:
                backend = cls()
                backend.url = f"memory://{name}"
                _NAMED[name] = backend
            return backend

    # Fleet registry and controls (docs/operations.md, "Fleet registry") ----

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Record or refresh each declaration; it expires ``ttl_ms`` after store time now."""
        with self._store._lock:
            now = self.clock.now_ms()
            for d in declarations:
                self._declared[(d.job, d.instance_id)] = dataclasses.replace(
                    d, seen_at=now, expires_at=now + ttl_ms
                )
            for key in [k for k, d in self._declared.items() if d.expires_at <= now]:
                del self._declared[key]

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        with self._store._lock:
            now = self.clock.now_ms()
            return [
                d
                for d in self._declared.values()
                if d.expires_at > now and (job is None or d.job == job)
            ]

    async def set_control(self, control: JobControl) -> None:
        """Store the control of ``control.job``, stamped with store time."""
        with self._store._lock:
            self._controls[control.job] = dataclasses.replace(
                control, updated_at=self.clock.now_ms()
            )

    async def controls(self) -> dict[str, JobControl]:
        """The control of every job that has one."""
        with self._store._lock:
            return dict(self._controls)

    # Backend ----------------------------------------------------------

    async def init(self) -> None:
        """Nothing to connect."""
        return None

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Create the job's (empty) storage."""
        with self._store._lock:
            self._store._job(job)

    def check_job(self, limits: JobLimits) -> None:
        """Accept every job; learn how long late and catch-up claims may ask for a slot."""
        needed = (
            max(limits.max_late_ms, limits.catch_up_ms or 0)
            + limits.jitter_ms
            + RETENTION_MARGIN_MS
        )
        with self._store._lock:
            data = self._store._job(limits.job)
            data.retention_ms = max(data.retention_ms or 0, needed)

    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one token per ``(job, slot)``, again for the same token.

        Equals ``runs.claim()`` with ``create=True``, no overlap check, one
        attempt and a one-day lease, mapped to a bool.
        """
        with self._store._lock:
            return self._claim_plain_locked(input)

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item, in order, in one locked step."""
        with self._store._lock:
            return [self._claim_plain_locked(item) for item in inputs]

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: a memory claim is its own history record."""
        return None

    def _claim_plain_locked(self, input: ClaimInput) -> bool:
        data = self._store._jobs.get(input.job)
        state = None if data is None else data.states.get(input.slot)
        if state is not None and state.token == input.token:
            return True
        return self._store._claim_locked(RunClaim.plain(input)).won

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Append a manual claim record (never de-duplicated); the slot is kept as given."""
        with self._store._lock:
            now = self._store._now()
            data = self._store._job(input.job)
            record = ClaimRecord(
                job=input.job,
                slot=input.slot,
                token=input.token,
                instance_id=input.instance_id,
                at=now,
                manual=True,
                attempt=1,
            )
            self._store._add_history(
                data, record, None, input.history_size, input.history_ttl_ms, now
            )
        return None

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Store how a run ended; a plain claim's run state is marked finished too."""
        with self._store._lock:
            self._save_locked(job, result, history_size, history_ttl_ms)

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item, in order, in one locked step."""
        with self._store._lock:
            for w in writes:
                self._save_locked(w.job, w.result, w.history_size, w.history_ttl_ms)

    def _save_locked(
        self, job: str, result: StoredResult, history_size: int, history_ttl_ms: int | None
    ) -> None:
        now = self._store._now()
        data = self._store._job(job)
        state = data.states.get(result.slot)
        if (
            state is not None
            and state.token == result.token
            and state.status == "running"
            and result.status != "running"
        ):
            self._store._end(data, state, "finished", now)
            state.result_status = result.status
            state.error = result.error
        self._store._add_history(data, None, result, history_size, history_ttl_ms, now)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` (all instances), newest first."""
        with self._store._lock:
            data = self._store._jobs.get(job)
            if data is None:
                return []
            claims = list(data.claims)
            results = list(data.results)
        return build_history(job, claims, results, limit)

    async def close(self) -> None:
        """Nothing to close; the data stays (a named backend is shared by the process)."""
        return None

    def clone(self) -> MemoryBackend:
        """This backend itself: each store step is one locked step, safe from any thread and loop."""
        return self

    async def now_ms(self) -> int:
        """The store clock in ms."""
        return self._store._now()


_NAMED: dict[str, MemoryBackend] = {}
_NAMED_LOCK = threading.Lock()
