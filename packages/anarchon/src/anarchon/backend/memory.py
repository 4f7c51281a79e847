"""The in-process backend (docs/backends/memory.md): claims, history and leases in a dict.

For tests, and for learning the contract. Everything lives in one process:
schedulers on one event loop, on several loops (``start_in_thread``) or in
threads share a :class:`MemoryBackend` safely, because every store step runs
under one :class:`threading.Lock` and never awaits between its read and its
write.

``memory://name`` gives the same backend for every resolution of that name in
the process (instances of one program "share a store"); ``memory://`` a fresh
one.

Retention (docs/leases.md, :mod:`anarchon.backend.retention`): history is trimmed to about ``history_size`` runs per job
(between N and 2N) and by ``history_ttl`` when given, but the records of a run
still in progress are never trimmed. Run state (what decides claims) is kept
forever unless :meth:`MemoryBackend.check_job` told the backend how long late
and catch-up claims may still ask for a slot; then finished state older than
that window (plus a minute of margin) is trimmed, down to about
``history_size`` entries. Running state is never trimmed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

from anarchon.backend._memory_store import MemoryStore, NowMs
from anarchon.backend.base import Backend, RunStore
from anarchon.backend.durability import check_single_node_durability
from anarchon.backend.history import build_history
from anarchon.backend.membership import check_member_id, check_refresh
from anarchon.backend.retention import RETENTION_MARGIN_MS
from anarchon.errors import InvalidConfigError
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import (
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    JobLimits,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRecord,
    RunRetry,
    StoredResult,
)

__all__ = ["RETENTION_MARGIN_MS", "MemoryBackend", "MemoryRunStore", "NowMs"]


class MemoryRunStore(RunStore):
    """Leases of the memory backend: the claim tree of docs/leases.md, one locked step per call."""

    def __init__(self, clock: NowMs | None = None) -> None:
        self.state = MemoryStore(clock)
        """The records (every call takes ``state.lock``); shared with the owning backend."""
        self.saves_results = False
        """True on the store a :class:`MemoryBackend` built for itself: only there is
        ``finish_and_save_many`` offered (a store swapped in by a test leaves the
        scheduler on separate finish and save calls)."""

    @property
    def clock(self) -> NowMs:
        """The store clock."""
        return self.state.clock

    # RunStore ---------------------------------------------------------

    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree of docs/leases.md atomically and return its outcome."""
        with self.state.lock:
            return self.state.claim(claim)

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to store time + ``lease_ms`` if ``token`` still owns the run."""
        with self.state.lock:
            return self.state.heartbeat(job, slot, token, lease_ms)

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Mark the run finished with ``status`` if ``token`` still owns it.

        Only the run state changes: the scheduler stores the result with
        :meth:`MemoryBackend.save_result` after a successful ``finish``.
        """
        with self.state.lock:
            return self.state.finish(job, slot, token, status, error)

    # Batch members: every item under one lock acquisition, in request order.

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """``claim()`` for each item, in order, in one locked step."""
        with self.state.lock:
            return [self.state.claim(claim) for claim in claims]

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """``heartbeat()`` for each run, in order, in one locked step."""
        with self.state.lock:
            return [self.state.heartbeat(r.job, r.slot, r.token, lease_ms) for r in runs]

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """``finish()`` for each item, in order, in one locked step."""
        with self.state.lock:
            return [self.state.finish(f.job, f.slot, f.token, f.status, f.error) for f in finishes]

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool] | None:
        """Each finish, and its result if it finished the run, in one locked step."""
        if not self.saves_results:
            return None
        answers: list[bool] = []
        with self.state.lock:
            for f, w in zip(finishes, writes, strict=True):
                done = self.state.finish(f.job, f.slot, f.token, f.status, f.error)
                if done:
                    self.state.save(w.job, w.result, w.history_size, w.history_ttl_ms)
                answers.append(done)
        return answers

    async def release(self, job: str, slot: int, token: str) -> bool:
        """End ``token``'s lease now so a backup takes over at once (hand-over).

        The released attempt is recorded in history as ``interrupted`` with
        reason ``handed_over``. On the last attempt the run is marked
        interrupted instead, so no backup starts it again.
        """
        with self.state.lock:
            return self.state.release(job, slot, token)

    async def release_many(self, runs: Sequence[RunKey]) -> list[bool]:
        """``release()`` for each run, in order, in one locked step."""
        with self.state.lock:
            return [self.state.release(r.job, r.slot, r.token) for r in runs]

    native_retry = True
    overlap_wait = True

    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End attempt ``retry.token`` after an error and start the next one, in one locked step."""
        with self.state.lock:
            return self.state.retry(retry)

    async def now_ms(self) -> int:
        """The store clock (the clock given to the backend, else the wall clock)."""
        return self.state.now()

    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)``."""
        with self.state.lock:
            return self.state.lease_state(job, slot, token)

    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        with self.state.lock:
            return self.state.active(job)


class MemoryBackend(Backend):
    """An in-process backend with leases; ``memory://name`` shares one per process by name.

    ``clock`` is any object with ``now_ms() -> int``; it is the store clock
    (default: the wall clock), so tests can make leases expire without
    sleeping. ``leases=False`` gives a claim-only backend (``runs`` is None),
    to test code paths of backends without leases. ``durability`` is
    ``"fast"`` only: one process has no replica to confirm a write on
    (docs/durability.md); any other value raises ``InvalidConfigError``.
    """

    name: ClassVar[str] = "memory"
    dedupe_window_ms: float = math.inf
    runs: MemoryRunStore | None

    def __init__(
        self, clock: NowMs | None = None, *, leases: bool = True, durability: str = "fast"
    ) -> None:
        check_single_node_durability("memory", durability)
        self._store = MemoryRunStore(clock)
        self._store.saves_results = True
        self.runs = self._store if leases else None
        self.url: str = "memory://"

    @property
    def _state(self) -> MemoryStore:
        # Through the run store, so a test that swaps ``_store`` swaps every record.
        return self._store.state

    @property
    def clock(self) -> NowMs:
        """The store clock."""
        return self._state.clock

    def __repr__(self) -> str:
        return f"MemoryBackend({self.url!r})"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MemoryBackend:
        """``memory://`` → a fresh backend; ``memory://name`` → this process's backend of that name.

        The memory backend takes one option, ``durability`` (``"fast"`` only);
        any other query option (in the URL or as a keyword) raises
        ``InvalidConfigError``.
        """
        parts = urlsplit(url)
        if parts.scheme.lower() != "memory":
            raise InvalidConfigError(f"not a memory:// URL: {url!r}")
        given = dict(parse_qsl(parts.query, keep_blank_values=True))
        given.update(options)
        if "durability" in given:
            check_single_node_durability("memory", given.pop("durability"))
        if given:
            names = ", ".join(sorted(given))
            raise InvalidConfigError(f"memory:// takes one option, durability; got: {names}")
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

    # Fleet registry and controls (docs/fleet.md, "Fleet registry") ----

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Record or refresh each declaration; it expires ``ttl_ms`` after store time now."""
        with self._state.lock:
            self._state.declare(declarations, ttl_ms)

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        with self._state.lock:
            return self._state.live_declarations(job)

    async def set_control(self, control: JobControl) -> None:
        """Store the control of ``control.job``, stamped with store time."""
        with self._state.lock:
            self._state.set_control(control)

    async def controls(self) -> dict[str, JobControl]:
        """The control of every job that has one."""
        with self._state.lock:
            return dict(self._state.controls)

    # Membership (docs/fleet.md, "Membership") -------------------------

    async def refresh_member(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Upsert this instance's record (store time), drop expired ones; every live member."""
        check_refresh(instance_id, roster, ttl_ms)
        with self._state.lock:
            return self._state.refresh_member(instance_id, roster, ttl_ms)

    async def leave_member(self, instance_id: str) -> None:
        """Remove this instance's record (nothing to do if there is none)."""
        check_member_id(instance_id)
        with self._state.lock:
            self._state.members.pop(instance_id, None)

    async def members(self) -> list[Member]:
        """Every live member, sorted by instance id."""
        with self._state.lock:
            return self._state.live_members()

    # Backend ----------------------------------------------------------

    async def init(self) -> None:
        """Nothing to connect."""
        return None

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Create the job's (empty) storage."""
        with self._state.lock:
            self._state.job(job)

    def check_job(self, limits: JobLimits) -> None:
        """Accept every job; learn how long late and catch-up claims may ask for a slot."""
        with self._state.lock:
            self._state.learn(limits)

    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one token per ``(job, slot)``, again for the same token.

        Equals ``runs.claim()`` with ``create=True``, no overlap check, one
        attempt and a one-day lease, mapped to a bool.
        """
        with self._state.lock:
            return self._state.plain_claim(input)

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item, in order, in one locked step."""
        with self._state.lock:
            return [self._state.plain_claim(item) for item in inputs]

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: a memory claim is its own history record."""
        return None

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Append a manual claim record (never de-duplicated); the slot is kept as given."""
        with self._state.lock:
            self._state.manual_run(input)
        return None

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Store how a run ended; a plain claim's run state is marked finished too."""
        with self._state.lock:
            self._state.save(job, result, history_size, history_ttl_ms)

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item, in order, in one locked step."""
        with self._state.lock:
            for w in writes:
                self._state.save(w.job, w.result, w.history_size, w.history_ttl_ms)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` (all instances), newest first."""
        with self._state.lock:
            claims, results = self._state.history_records(job)
        return build_history(job, claims, results, limit)

    async def close(self) -> None:
        """Nothing to close; the data stays (a named backend is shared by the process)."""
        return None

    def clone(self) -> MemoryBackend:
        """This backend itself: each store step is one locked step, safe from any thread and loop."""
        return self

    async def now_ms(self) -> int:
        """The store clock in ms."""
        return self._state.now()


_NAMED: dict[str, MemoryBackend] = {}
_NAMED_LOCK = threading.Lock()
