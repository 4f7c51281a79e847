"""A backend written against the interface before batch members: single-item calls only.

It wraps a :class:`~anarchon.MemoryBackend` and forwards only the abstract
members (and the optional ones that existed before), so every batch member is
the base class's per-item fallback. The contract suites and scheduler tests
run against it to show that a third-party backend keeps working.
"""

from __future__ import annotations

from typing import ClassVar

from anarchon import (
    ActiveRun,
    Backend,
    ClaimInput,
    ClaimOutcome,
    JobLimits,
    MemoryBackend,
    RunClaim,
    RunRecord,
    RunStore,
    StoredResult,
)
from anarchon.backend.memory import MemoryRunStore


class PlainRunStore(RunStore):
    """The single-call lease members of a memory store, nothing else."""

    def __init__(self, inner: MemoryRunStore) -> None:
        self.inner = inner

    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        return await self.inner.claim(claim)

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        return await self.inner.heartbeat(job, slot, token, lease_ms)

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        return await self.inner.finish(job, slot, token, status, error)

    async def release(self, job: str, slot: int, token: str) -> bool:
        return await self.inner.release(job, slot, token)

    async def now_ms(self) -> int:
        return await self.inner.now_ms()

    async def active(self, job: str) -> list[ActiveRun]:
        return await self.inner.active(job)


class PlainBackend(Backend):
    """A memory backend seen through the pre-batch interface (``leases=False``: claim-only)."""

    name: ClassVar[str] = "plain"

    def __init__(self, *, leases: bool = True) -> None:
        self.inner = MemoryBackend()
        self.runs = PlainRunStore(self.inner._store) if leases else None

    async def init(self) -> None:
        await self.inner.init()

    async def prepare_job(self, job: str, history_size: int) -> None:
        await self.inner.prepare_job(job, history_size)

    def check_job(self, limits: JobLimits) -> None:
        self.inner.check_job(limits)

    async def claim(self, input: ClaimInput) -> bool:
        return await self.inner.claim(input)

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        return await self.inner.record_manual_run(input)

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        await self.inner.save_result(job, result, history_size, history_ttl_ms)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        return await self.inner.history(job, limit)

    async def close(self) -> None:
        await self.inner.close()

    async def now_ms(self) -> int:
        return await self.inner.now_ms()
