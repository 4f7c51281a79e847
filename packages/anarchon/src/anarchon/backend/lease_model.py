"""The lease rules of docs/leases.md written once, as pure functions.

Each decision takes the stored state of one ``(job, slot)`` (or ``None``), a
request and the store time ``now``, and returns the answer and the new state.
Nothing here touches a store: a lease store runs the decision inside its own
atomic step (the memory store under its lock) and writes what it says, and
the state-machine test (:mod:`anarchon.testing.contracts.lease_model`) runs
the same decisions next to a real store and compares the answers.

History side effects are described, not performed: a decision names the
record the store adds (``interrupted`` with a reason, a claim record, a
``skipped`` result), and the store writes it in its own format.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from anarchon.types import ClaimOutcome, RunClaim

__all__ = [
    "HEALED_WARNING",
    "Blocker",
    "ClaimDecision",
    "LeaseState",
    "ReleaseDecision",
    "TokenDecision",
    "decide_claim",
    "decide_finish",
    "decide_heartbeat",
    "decide_release",
]


@dataclass(frozen=True, slots=True)
class LeaseState:
    """What a lease store keeps for one ``(job, slot)`` (docs/leases.md, "What the store keeps")."""

    attempt: int
    token: str
    runner: str
    status: str  # running / finished / interrupted / skipped
    lease_expires_at: int
    max_attempts: int
    started_at: int
    released: bool = False
    end_reason: str | None = None  # "handed_over" once released, "finished" once finished

    @property
    def live_running(self) -> bool:
        """Running and not released: a token may still heartbeat, finish or release it."""
        return self.status == "running" and not self.released


@dataclass(frozen=True, slots=True)
class Blocker:
    """The newest older slot of the job that holds a live lease (the overlap check)."""

    runner: str
    lease_expires_at: int


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    """The answer of a claim, the new state, and what the store records.

    ``interrupted`` is the reason of an ``interrupted`` record for the
    attempt that held the state before (``lease_lost`` or
    ``attempts_exhausted``), at ``interrupted_at``; ``claim_record`` is True
    when a new attempt starts (a claim record is added); ``skipped`` is True
    when the slot is written ``skipped`` (reason ``overlap``).
    """

    outcome: ClaimOutcome
    state: LeaseState | None
    interrupted: str | None = None
    interrupted_at: int | None = None
    claim_record: bool = False
    skipped: bool = False

    @property
    def writes(self) -> bool:
        """True if the store must write ``state`` (it changed)."""
        return self.claim_record or self.skipped or self.interrupted is not None


@dataclass(frozen=True, slots=True)
class TokenDecision:
    """The answer of a heartbeat or finish, and the new state (unchanged when False).

    ``healed`` is True when a finish found no state at all and wrote a
    finished one: the store logs a WARNING naming the job and slot.
    """

    ok: bool
    state: LeaseState | None
    healed: bool = False


@dataclass(frozen=True, slots=True)
class ReleaseDecision:
    """The answer of a release; ``record`` is True when an ``interrupted`` (``handed_over``) record is added."""

    ok: bool
    state: LeaseState | None
    record: bool = False


def _outcome(kind: str, state: LeaseState) -> ClaimOutcome:
    return ClaimOutcome(kind, state.attempt, state.runner, state.lease_expires_at)


def decide_claim(
    state: LeaseState | None, claim: RunClaim, now: int, blocker: Blocker | None
) -> ClaimDecision:
    """The claim tree of docs/leases.md.

    ``blocker`` is the newest older slot of the job with a live lease at
    ``now`` (only consulted for a new slot with ``overlap=False``).
    """
    if state is None:
        return _claim_new(claim, now, blocker)
    if state.token == claim.token and state.live_running:
        # A retried claim: the same answer, and the lease counts from now.
        extended = replace(
            state, lease_expires_at=max(state.lease_expires_at, now + claim.lease_ms)
        )
        return ClaimDecision(_outcome("won", extended), extended)
    if state.status != "running" or state.token == claim.token:
        return ClaimDecision(_outcome("done", state), state)
    if state.lease_expires_at > now:
        return ClaimDecision(_outcome("running", state), state)
    # The lease has expired (or was released).
    reason = None if state.released else "lease_lost"
    if state.attempt < claim.max_attempts:
        taken = LeaseState(
            attempt=state.attempt + 1,
            token=claim.token,
            runner=claim.instance_id,
            status="running",
            lease_expires_at=now + claim.lease_ms,
            max_attempts=claim.max_attempts,
            started_at=now,
        )
        return ClaimDecision(
            _outcome("won", taken),
            taken,
            interrupted=reason,
            interrupted_at=state.lease_expires_at,
            claim_record=True,
        )
    ended = replace(state, status="interrupted")
    return ClaimDecision(
        _outcome("done", ended),
        ended,
        interrupted=None if state.released else "attempts_exhausted",
        interrupted_at=now,
    )


def _claim_new(claim: RunClaim, now: int, blocker: Blocker | None) -> ClaimDecision:
    if claim.early_ms is not None and claim.slot > now + claim.early_ms:
        return ClaimDecision(ClaimOutcome("early"), None)
    if claim.deadline_ms is not None and now > claim.deadline_ms:
        return ClaimDecision(ClaimOutcome("late"), None)
    if not claim.create:
        return ClaimDecision(ClaimOutcome("none"), None)
    if not claim.overlap and blocker is not None:
        if claim.overlap_wait:  # the caller re-checks: nothing is written yet
            return ClaimDecision(
                ClaimOutcome("overlap", 0, blocker.runner, blocker.lease_expires_at), None
            )
        skipped = LeaseState(
            attempt=0,
            token=claim.token,
            runner=claim.instance_id,
            status="skipped",
            lease_expires_at=now,
            max_attempts=claim.max_attempts,
            started_at=now,
        )
        outcome = ClaimOutcome("overlap", 0, blocker.runner, blocker.lease_expires_at)
        return ClaimDecision(outcome, skipped, skipped=True)
    state = LeaseState(
        attempt=1,
        token=claim.token,
        runner=claim.instance_id,
        status="running",
        lease_expires_at=now + claim.lease_ms,
        max_attempts=claim.max_attempts,
        started_at=now,
    )
    return ClaimDecision(_outcome("won", state), state, claim_record=True)


def decide_heartbeat(
    state: LeaseState | None, token: str, lease_ms: int, now: int
) -> TokenDecision:
    """Extend the lease to ``now + lease_ms`` if ``token`` holds the running (unreleased) state."""
    if state is None or state.token != token or not state.live_running:
        return TokenDecision(False, state)
    return TokenDecision(True, replace(state, lease_expires_at=now + lease_ms))


HEALED_WARNING = "no state for the run; a failover lost its claim; finished record written"
"""What a store logs (WARNING, after the job and slot) when a finish heals a lost state."""


def decide_finish(state: LeaseState | None, token: str, now: int) -> TokenDecision:
    """Mark the run finished if ``token`` holds it; a repeated finish of that token is True again.

    A finish that finds no state at all (a failover lost the claim, or the
    state was dropped after its retention) writes a finished state held by
    ``token`` and answers True (``healed``): the run's result is stored, and
    a later claim of the slot answers ``done`` instead of running it again
    (docs/durability.md, "Finishes that heal"). A state held by another
    token answers False: another instance owns the run.
    """
    if state is None:
        healed = LeaseState(
            attempt=1,
            token=token,
            runner="",
            status="finished",
            lease_expires_at=now,
            max_attempts=1,
            started_at=now,
            end_reason="finished",
        )
        return TokenDecision(True, healed, healed=True)
    if state.token != token:
        return TokenDecision(False, state)
    if not state.live_running:
        return TokenDecision(state.status == "finished", state)
    return TokenDecision(True, replace(state, status="finished", end_reason="finished"))


def decide_release(state: LeaseState | None, token: str, now: int) -> ReleaseDecision:
    """End ``token``'s lease now (hand-over); on the last attempt mark the run interrupted.

    A repeated release of the same token is True again and records nothing.
    """
    if state is None or state.token != token:
        return ReleaseDecision(False, state)
    if not state.live_running:
        return ReleaseDecision(state.end_reason == "handed_over", state)
    if state.attempt >= state.max_attempts:
        ended = replace(state, status="interrupted", end_reason="handed_over")
        return ReleaseDecision(True, ended, record=True)
    released = replace(state, lease_expires_at=now, released=True, end_reason="handed_over")
    return ReleaseDecision(True, released, record=True)
