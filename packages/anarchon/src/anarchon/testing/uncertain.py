"""Uncertain claims on demand: test a job's ``if_uncertain`` choice without a failover.

A lease store with ``durability="replicated"`` answers a claim it won but
could not confirm on its replicas as ``uncertain`` (docs/durability.md,
"Uncertain claims"). That takes a replica that falls behind at the right
moment. :func:`make_claims_uncertain` wraps a real backend's run store so that
every claim it wins is answered ``uncertain`` instead, for the jobs named (or
all): the store keeps the lease exactly as for ``won``, and the scheduler
skips the slot (``if_uncertain="skip"``, reason ``claim_not_durable``) or runs
it anyway (``if_uncertain="run"``)::

    from anarchon import Scheduler
    from anarchon.backend.memory import MemoryBackend
    from anarchon.testing import make_claims_uncertain

    backend = MemoryBackend()
    make_claims_uncertain(backend, jobs={"report"})
    scheduler = Scheduler(backend)

It is a test tool: nothing in production answers ``uncertain`` unless the
store itself could not confirm a claim.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar

from anarchon.backend.base import Backend, RunStore
from anarchon.errors import UnsupportedError
from anarchon.types import (
    ActiveRun,
    ClaimOutcome,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRetry,
)

__all__ = ["UncertainClaims", "make_claims_uncertain"]


class UncertainClaims(RunStore):
    """A run store that answers ``uncertain`` where the store it wraps answers ``won``.

    Every call goes to ``inner`` unchanged; only the answers of ``claim``,
    ``claim_many`` and ``retry`` for the jobs in ``jobs`` (None: every job)
    are rewritten from ``won`` to ``uncertain``. :attr:`uncertain` counts them.
    Build it with :meth:`wrap` (or :func:`make_claims_uncertain`), which keeps
    the inner store's ``native_retry``.
    """

    def __init__(self, inner: RunStore, *, jobs: Collection[str] | None = None) -> None:
        self.inner = inner
        """The real run store."""
        self.jobs = None if jobs is None else frozenset(jobs)
        """The jobs whose won claims are answered ``uncertain`` (None: every job)."""
        self.uncertain = 0
        """How many ``won`` answers were rewritten to ``uncertain``."""
        self.overlap_wait = inner.overlap_wait

    @classmethod
    def wrap(cls, inner: RunStore, *, jobs: Collection[str] | None = None) -> UncertainClaims:
        """Wrap ``inner``; the wrapper's ``native_retry`` is the inner store's."""
        if type(inner).native_retry:
            return _NativeUncertainClaims(inner, jobs=jobs)
        return cls(inner, jobs=jobs)

    def _downgrade(self, job: str, outcome: ClaimOutcome) -> ClaimOutcome:
        if outcome.kind != "won" or (self.jobs is not None and job not in self.jobs):
            return outcome
        self.uncertain += 1
        return ClaimOutcome("uncertain", outcome.attempt, outcome.runner, outcome.lease_expires_at)

    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """The inner store's claim; ``won`` becomes ``uncertain``."""
        return self._downgrade(claim.job, await self.inner.claim(claim))

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """The inner store's ``claim_many``; each ``won`` becomes ``uncertain``."""
        outcomes = await self.inner.claim_many(claims)
        return [self._downgrade(c.job, o) for c, o in zip(claims, outcomes, strict=True)]

    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """The inner store's retry; ``won`` becomes ``uncertain``."""
        return self._downgrade(retry.job, await self.inner.retry(retry))

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """The inner store's heartbeat."""
        return await self.inner.heartbeat(job, slot, token, lease_ms)

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """The inner store's ``heartbeat_many``."""
        return await self.inner.heartbeat_many(runs, lease_ms)

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """The inner store's finish."""
        return await self.inner.finish(job, slot, token, status, error)

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """The inner store's ``finish_many``."""
        return await self.inner.finish_many(finishes)

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool] | None:
        """The inner store's ``finish_and_save_many``."""
        return await self.inner.finish_and_save_many(finishes, writes)

    async def release(self, job: str, slot: int, token: str) -> bool:
        """The inner store's release."""
        return await self.inner.release(job, slot, token)

    async def release_many(self, runs: Sequence[RunKey]) -> list[bool]:
        """The inner store's ``release_many``."""
        return await self.inner.release_many(runs)

    async def now_ms(self) -> int:
        """The inner store's clock."""
        return await self.inner.now_ms()

    async def active(self, job: str) -> list[ActiveRun]:
        """The inner store's unfinished runs of ``job``."""
        return await self.inner.active(job)

    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """The inner store's ``lease_state``."""
        return await self.inner.lease_state(job, slot, token)

    async def still_owner(self, run: RunKey, lease_ms: int) -> bool:
        """The inner store's ``still_owner``."""
        return await self.inner.still_owner(run, lease_ms)


class _NativeUncertainClaims(UncertainClaims):
    """The wrapper of a store whose ``retry`` is one atomic step."""

    native_retry: ClassVar[bool] = True


def make_claims_uncertain(
    backend: Backend, *, jobs: Collection[str] | None = None
) -> UncertainClaims:
    """Make every claim ``backend`` wins for ``jobs`` (None: all) answer ``uncertain``.

    Replaces ``backend.runs`` with an :class:`UncertainClaims` around it, and
    returns the wrapper (its ``uncertain`` counts the rewritten answers). Call
    it before the scheduler starts. A backend without leases has no claims
    to make uncertain: ``UnsupportedError``.
    """
    runs = backend.runs
    if runs is None:
        raise UnsupportedError(
            f"{type(backend).__name__} has no leases: its claims cannot be uncertain"
        )
    wrapper = UncertainClaims.wrap(runs, jobs=jobs)
    backend.runs = wrapper
    return wrapper
