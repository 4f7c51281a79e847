"""The memory store with instruments: it counts calls, measures concurrency and injects errors.

Every call still goes to the real memory store; the instruments only watch
(and, when asked, slow a call down or make it fail before it reaches the store).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from anarchon import (
    ClaimInput,
    ClaimOutcome,
    MemoryBackend,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    StoredResult,
)
from anarchon.backend.memory import MemoryRunStore

T = TypeVar("T")


class Probe:
    """What the instrumented store saw, and the faults it injects."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: Counter[str] = Counter()
        self.sizes: dict[str, list[int]] = {}
        self.creates: list[list[bool]] = []
        self.in_flight = 0
        self.peak = 0
        """Most calls in flight at once from the thread that made the probe (the scheduler's loop)."""
        self.thread_peak = 0
        """Most calls in flight at once from other threads (the lease thread: memory's ``clone()`` is itself)."""
        self._thread_in_flight = 0
        self._home = threading.get_ident()
        self.faults: dict[str, BaseException] = {}
        """Member name → error raised instead of calling the store."""

    async def watch(self, name: str, size: int, call: Callable[[], Awaitable[T]]) -> T:
        self.calls[name] += 1
        self.sizes.setdefault(name, []).append(size)
        fault = self.faults.get(name)
        if fault is not None:
            raise fault
        home = threading.get_ident() == self._home
        if home:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        else:
            self._thread_in_flight += 1
            self.thread_peak = max(self.thread_peak, self._thread_in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return await call()
        finally:
            if home:
                self.in_flight -= 1
            else:
                self._thread_in_flight -= 1


class ProbedRunStore(MemoryRunStore):
    """The memory lease store under a :class:`Probe`."""

    def __init__(self, probe: Probe) -> None:
        super().__init__()
        self.probe = probe

    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        return await self.probe.watch("claim", 1, lambda: super(ProbedRunStore, self).claim(claim))

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        self.probe.creates.append([c.create for c in claims])
        return await self.probe.watch(
            "claim_many", len(claims), lambda: super(ProbedRunStore, self).claim_many(claims)
        )

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        return await self.probe.watch(
            "heartbeat",
            1,
            lambda: super(ProbedRunStore, self).heartbeat(job, slot, token, lease_ms),
        )

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        return await self.probe.watch(
            "heartbeat_many",
            len(runs),
            lambda: super(ProbedRunStore, self).heartbeat_many(runs, lease_ms),
        )

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        return await self.probe.watch(
            "finish",
            1,
            lambda: super(ProbedRunStore, self).finish(job, slot, token, status, error),
        )

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        return await self.probe.watch(
            "finish_many", len(finishes), lambda: super(ProbedRunStore, self).finish_many(finishes)
        )

    async def release(self, job: str, slot: int, token: str) -> bool:
        return await self.probe.watch(
            "release", 1, lambda: super(ProbedRunStore, self).release(job, slot, token)
        )

    async def release_many(self, runs: Sequence[RunKey]) -> list[bool]:
        return await self.probe.watch(
            "release_many", len(runs), lambda: super(ProbedRunStore, self).release_many(runs)
        )


class ProbedBackend(MemoryBackend):
    """A memory backend (leases or claim-only) whose every store call goes through a :class:`Probe`."""

    def __init__(self, probe: Probe | None = None, *, leases: bool = True) -> None:
        super().__init__(leases=leases)
        self.probe = probe or Probe()
        store = ProbedRunStore(self.probe)
        self._store = store
        self.runs = store if leases else None

    async def prepare_job(self, job: str, history_size: int) -> None:
        await self.probe.watch(
            "prepare_job", 1, lambda: super(ProbedBackend, self).prepare_job(job, history_size)
        )

    async def claim(self, input: ClaimInput) -> bool:
        return await self.probe.watch(
            "plain_claim", 1, lambda: super(ProbedBackend, self).claim(input)
        )

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        return await self.probe.watch(
            "plain_claim_many", len(inputs), lambda: super(ProbedBackend, self).claim_many(inputs)
        )

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        return await self.probe.watch(
            "record_manual_run", 1, lambda: super(ProbedBackend, self).record_manual_run(input)
        )

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        await self.probe.watch(
            "save_result",
            1,
            lambda: super(ProbedBackend, self).save_result(
                job, result, history_size, history_ttl_ms
            ),
        )

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        await self.probe.watch(
            "save_results", len(writes), lambda: super(ProbedBackend, self).save_results(writes)
        )

    def ran(self) -> Any:
        """Slots with a result, per job: ``Counter((job, slot))`` of non-skipped results."""
        counts: Counter[tuple[str, int]] = Counter()
        for name, data in self._store.state.jobs.items():
            for result in data.results:
                if result.status not in ("skipped", "interrupted"):
                    counts[(name, result.slot)] += 1
        return counts
