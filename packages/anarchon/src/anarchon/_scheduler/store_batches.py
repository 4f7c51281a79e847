"""The batch members of a backend as the scheduler calls them: chunked, bounded, retried.

A native batch member is one store operation (it holds one permit of the
in-flight bound). A backend without native members (the base class's per-item
fallback) gets the single calls here instead, each holding a permit, so the
bound counts store operations either way (docs/run-store.md, "Batch members").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from anarchon._scheduler.store_retry import StorePolicy
from anarchon.backend.base import Backend, RunStore
from anarchon.backend.batching import job_of, per_item
from anarchon.types import ClaimInput, ClaimOutcome, ResultWrite, RunClaim, RunFinish, RunKey

__all__ = ["CHUNK", "NotSentError", "StoreBatches", "chunks"]

Item = TypeVar("Item")
Answer = TypeVar("Answer")

CHUNK = 500
"""Items per batch call."""


def chunks(items: Sequence[Item], size: int = CHUNK) -> list[Sequence[Item]]:
    """``items`` cut into consecutive pieces of at most ``size``."""
    if len(items) <= size:
        return [items]
    return [items[i : i + size] for i in range(0, len(items), size)]


class NotSentError(Exception):
    """A batch was not sent: its ``unless`` check said so once it held its permit."""


def _native(obj: object, name: str, base: type) -> bool:
    """True unless ``obj``'s class inherits ``base.name`` unchanged (the per-item fallback)."""
    return getattr(type(obj), name, None) is not getattr(base, name)


def _is_noop_record_claim(backend: Backend) -> bool:
    """True when neither ``record_claim`` nor ``record_claims`` is overridden (both do nothing)."""
    return not _native(backend, "record_claim", Backend) and not _native(
        backend, "record_claims", Backend
    )


class StoreBatches:
    """One scheduler's batch calls to its backend, each one attempt (the caller retries)."""

    def __init__(self, backend: Backend, policy: StorePolicy) -> None:
        self.backend = backend
        self.runs: RunStore | None = backend.runs
        self.policy = policy
        runs = self.runs
        self.native_claims = _native(runs, "claim_many", RunStore) if runs else False
        self.native_beats = _native(runs, "heartbeat_many", RunStore) if runs else False
        self.native_finishes = _native(runs, "finish_many", RunStore) if runs else False
        self.native_finish_saves = (
            _native(runs, "finish_and_save_many", RunStore) if runs else False
        )
        self.native_releases = _native(runs, "release_many", RunStore) if runs else False
        self.native_plain_claims = _native(backend, "claim_many", Backend)
        self.native_saves = _native(backend, "save_results", Backend)
        self.native_records = _native(backend, "record_claims", Backend)
        self.records_nothing = _is_noop_record_claim(backend)

    async def _run(
        self,
        native: bool,
        batch: Callable[[], Awaitable[list[Answer]]],
        single: Callable[[Item], Awaitable[Answer]],
        items: Sequence[Item],
        key: Callable[[Item], Any] = job_of,  # type: ignore[assignment]
        unless: Callable[[], bool] | None = None,
    ) -> list[Answer]:
        gate = self.policy.gate
        if native:
            async with gate:
                if unless is not None and unless():
                    raise NotSentError
                return await batch()

        async def one(item: Item) -> Answer:
            async with gate:
                return await single(item)

        return await per_item(one, items, self.policy.max_in_flight, key)

    # Lease store ---------------------------------------------------------

    async def claim_many(
        self, claims: Sequence[RunClaim], unless: Callable[[], bool] | None = None
    ) -> list[ClaimOutcome]:
        """``runs.claim_many`` (or single claims under the bound).

        ``unless()`` True once a native batch holds its permit (the scheduler
        began to stop while it waited behind the in-flight bound): it is not
        sent, and :class:`NotSentError` is raised.
        """
        runs = self.runs
        assert runs is not None
        return await self._run(
            self.native_claims, lambda: runs.claim_many(claims), runs.claim, claims, unless=unless
        )

    async def heartbeat_many(self, keys: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """``runs.heartbeat_many`` (or single heartbeats under the bound)."""
        runs = self.runs
        assert runs is not None
        return await self._run(
            self.native_beats,
            lambda: runs.heartbeat_many(keys, lease_ms),
            lambda k: runs.heartbeat(k.job, k.slot, k.token, lease_ms),
            keys,
        )

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """``runs.finish_many`` (or single finishes under the bound)."""
        runs = self.runs
        assert runs is not None
        return await self._run(
            self.native_finishes,
            lambda: runs.finish_many(finishes),
            lambda f: runs.finish(f.job, f.slot, f.token, f.status, f.error),
            finishes,
        )

    async def release_many(self, keys: Sequence[RunKey]) -> list[bool]:
        """``runs.release_many`` (or single releases under the bound)."""
        runs = self.runs
        assert runs is not None
        return await self._run(
            self.native_releases,
            lambda: runs.release_many(keys),
            lambda k: runs.release(k.job, k.slot, k.token),
            keys,
        )

    # Claims and history ----------------------------------------------------

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool] | None:
        """``runs.finish_and_save_many`` in one call, or None if the store does not offer it."""
        runs = self.runs
        if runs is None or not self.native_finish_saves:
            return None
        async with self.policy.gate:
            return await runs.finish_and_save_many(finishes, writes)

    async def plain_claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``backend.claim_many`` (or single claims under the bound)."""
        backend = self.backend
        return await self._run(
            self.native_plain_claims, lambda: backend.claim_many(inputs), backend.claim, inputs
        )

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """``backend.record_claims``; nothing at all when the backend records nothing."""
        if self.records_nothing or not inputs:
            return
        backend = self.backend

        async def batch() -> list[Any]:
            await backend.record_claims(inputs)
            return []

        await self._run(self.native_records, batch, backend.record_claim, inputs)

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``backend.save_results`` (or single saves under the bound)."""
        if not writes:
            return
        backend = self.backend

        async def batch() -> list[Any]:
            await backend.save_results(writes)
            return []

        await self._run(
            self.native_saves,
            batch,
            lambda w: backend.save_result(w.job, w.result, w.history_size, w.history_ttl_ms),
            writes,
        )
