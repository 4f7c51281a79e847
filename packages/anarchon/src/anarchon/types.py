"""Data types shared by the scheduler and the backends (docs/extending.md, docs/leases.md).

All times are integer milliseconds since the Unix epoch (UTC). New fields may
be added in minor versions, always with a default, so backends ignore what
they do not know. The records built once per run (claims, outcomes, results)
are plain slotted dataclasses, because a frozen dataclass costs about 1 µs
more to build and they sit on the hot path; treat them as read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

__all__ = [
    "PLAIN_CLAIM_LEASE_MS",
    "ActiveRun",
    "ClaimInput",
    "ClaimOutcome",
    "ClaimRecord",
    "JobLimits",
    "LeaseState",
    "OutcomeKind",
    "ResultWrite",
    "RunClaim",
    "RunFinish",
    "RunKey",
    "RunRecord",
    "RunRetry",
    "RunStatus",
    "StoredResult",
    "lease_state_of",
]

RunStatus = Literal["running", "ok", "error", "timeout", "cancelled", "interrupted", "skipped"]
"""How a run ended (``running`` while it has no result)."""

OutcomeKind = Literal["won", "uncertain", "running", "done", "overlap", "none", "late", "early"]
"""The kinds of :class:`ClaimOutcome` this version knows; backends may return others (treated as ``done``).

``uncertain``: the claim won on the store, but a ``durability="replicated"``
store could not confirm it reached the replicas; the caller holds the lease
as for ``won`` (docs/durability.md, "Uncertain claims").
"""


LeaseState = Literal["held", "other", "ended", "gone", "unknown"]
"""Why a token does (not) hold a run's lease: ``RunStore.lease_state`` (docs/leases.md).

``held``: the token's attempt is running; ``other``: another token's attempt
owns the run; ``ended``: the run (or this attempt) ended; ``gone``: the store
has no state for the run at all (e.g. a restart without persistence);
``unknown``: the store cannot tell (the default).
"""


def lease_state_of(
    token: str, state_token: str | None, running: bool, released: bool
) -> LeaseState:
    """Classify a stored run state (``state_token`` None: no state) for ``token``."""
    if state_token is None:
        return "gone"
    if state_token != token:
        return "other"
    if running and not released:
        return "held"
    return "ended"


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(slots=True)
class ClaimInput:
    """One claim attempt of ``(job, slot)`` by one instance."""

    job: str
    slot: int
    token: str
    instance_id: str
    history_size: int = 1000
    history_ttl_ms: int | None = None


@dataclass(slots=True)
class ClaimRecord:
    """A won claim as a backend stored it (history input)."""

    job: str
    slot: int
    token: str
    instance_id: str
    at: int
    manual: bool = False
    attempt: int = 1


@dataclass(slots=True)
class StoredResult:
    """How one attempt of a run ended, as stored by ``save_result``."""

    slot: int
    token: str
    instance_id: str
    status: str
    started_at: int | None = None
    finished_at: int | None = None
    error: str | None = None
    attempt: int = 1
    manual: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class RunRecord:
    """One attempt of one run, as history returns it (newest first)."""

    job: str
    slot: int
    instance_id: str
    status: str
    reason: str | None = None
    attempt: int = 1
    manual: bool = False
    started_at: int | None = None
    finished_at: int | None = None
    duration_ms: int | None = None
    error: str | None = None

    @property
    def scheduled_at(self) -> datetime:
        """The slot as an aware UTC datetime."""
        return _utc(self.slot)

    @property
    def run_id(self) -> str:
        """``"<job>:<slot>"``: the identity of the run."""
        return f"{self.job}:{self.slot}"


@dataclass(frozen=True)
class JobLimits:
    """What a backend learns about a job when it is added (``Backend.check_job``).

    The lease options are ``None`` when the user did not pass them.
    """

    job: str
    period_ms: int
    jitter_ms: int
    max_late_ms: int
    history_size: int
    history_ttl_ms: int | None = None
    overlap: bool | None = None
    max_attempts: int | None = None
    catch_up_ms: int | None = None
    lease_ms: int | None = None
    """The scheduler's lease, on lease backends (state must outlive it: docs/leases.md, retention)."""

    def lease_options_given(self) -> list[str]:
        """The lease options the user passed (claim-only backends refuse them)."""
        given = (
            ("overlap", self.overlap),
            ("max_attempts", self.max_attempts),
            ("catch_up", self.catch_up_ms),
        )
        return [name for name, value in given if value is not None]


PLAIN_CLAIM_LEASE_MS = 86_400_000
"""Lease of a plain ``Backend.claim()`` on a lease backend (one attempt, no heartbeats): a day."""


@dataclass(slots=True)
class RunClaim:
    """A lease claim of ``(job, slot)`` (docs/leases.md)."""

    job: str
    slot: int
    token: str
    instance_id: str
    lease_ms: int
    max_attempts: int = 3
    overlap: bool = False
    deadline_ms: int | None = None
    create: bool = True
    history_size: int = 1000
    history_ttl_ms: int | None = None
    early_ms: int | None = None
    """How far ahead of the store's clock the slot may be (the job's jitter plus an allowance).

    A new run for ``slot > store now + early_ms`` is refused with the outcome
    ``early`` (nothing written): the caller's clock runs ahead. ``None``: no check.
    """
    overlap_wait: bool = False
    """With ``overlap=False``: an ``overlap`` answer writes nothing (no ``skipped`` state).

    The caller re-claims with the same token until the blocking run has
    ended, and sends a last claim without ``overlap_wait`` to record the skip
    (docs/leases.md, "A run ends when its handler ends"). Honoured by stores
    whose :attr:`~anarchon.RunStore.overlap_wait` is True; others ignore it.
    """

    @classmethod
    def plain(cls, input: ClaimInput) -> RunClaim:
        """The lease claim that a plain ``Backend.claim(input)`` equals on a lease backend.

        docs/leases.md: ``create=True``, no overlap check, one attempt.
        """
        return cls(
            job=input.job,
            slot=input.slot,
            token=input.token,
            instance_id=input.instance_id,
            lease_ms=PLAIN_CLAIM_LEASE_MS,
            max_attempts=1,
            overlap=True,
            deadline_ms=None,
            create=True,
            history_size=input.history_size,
            history_ttl_ms=input.history_ttl_ms,
        )


@dataclass(slots=True)
class ClaimOutcome:
    """The answer of ``RunStore.claim``. ``kind`` is a plain string; unknown kinds mean ``done``."""

    kind: str
    attempt: int = 0
    runner: str | None = None
    lease_expires_at: int | None = None

    @property
    def won(self) -> bool:
        """True when the caller now runs the slot (a confirmed claim: ``uncertain`` is not ``won``)."""
        return self.kind == "won"

    @property
    def holds_lease(self) -> bool:
        """True when the caller now holds the lease: ``won``, or ``uncertain`` (not confirmed durable)."""
        return self.kind in ("won", "uncertain")


@dataclass(frozen=True)
class ActiveRun:
    """An unfinished run and whether its lease is live (store clock)."""

    slot: int
    attempt: int
    runner: str
    lease_expires_at: int
    live: bool
    token: str | None = field(default=None, compare=False)


@dataclass(slots=True)
class RunKey:
    """One attempt of one run: ``(job, slot)`` and the claim token that owns it (batch heartbeats)."""

    job: str
    slot: int
    token: str


@dataclass(slots=True)
class RunFinish:
    """A ``RunStore.finish`` request, as an item of ``RunStore.finish_many``."""

    job: str
    slot: int
    token: str
    status: str
    error: str | None = None


@dataclass(slots=True)
class ResultWrite:
    """A ``Backend.save_result`` request, as an item of ``Backend.save_results``."""

    job: str
    result: StoredResult
    history_size: int = 1000
    history_ttl_ms: int | None = None


@dataclass(slots=True)
class RunRetry:
    """A ``RunStore.retry`` request: end attempt ``token`` after an error and start the next one.

    The next attempt belongs to ``instance_id`` with ``new_token`` and a
    lease of ``lease_ms``; ``max_attempts`` caps every start of the slot
    (docs/leases.md, "Retries").
    """

    job: str
    slot: int
    token: str
    new_token: str
    instance_id: str
    lease_ms: int
    max_attempts: int
    history_size: int = 1000
    history_ttl_ms: int | None = None
