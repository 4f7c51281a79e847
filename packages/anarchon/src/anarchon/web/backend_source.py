"""The status page's data from a :class:`~anarchon.Backend` (the one adapter to the store).

Jobs come from the fleet registry through :func:`anarchon.fleet.status.fleet_status`.
The jobs it was given (``jobs=``, or those of a :class:`~anarchon.Scheduler`)
that no instance declares, or all of them on a backend without a registry,
are shown from history and leases alone. Pause and resume write the fleet-wide control of the job.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from anarchon.backend.base import Backend
from anarchon.backend.registry import resolve_backend
from anarchon.errors import InvalidConfigError, UnsupportedError
from anarchon.fleet.status import JobStatus, LastRun, fleet_status, store_now_ms, unknown_jobs_error
from anarchon.fleet.types import JobControl
from anarchon.types import ActiveRun, RunRecord

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["BackendSource"]


class BackendSource:
    """A :class:`~anarchon.web.StatusSource` reading and writing one backend.

    ``backend`` is a :class:`~anarchon.Backend` or a URL (then the source owns
    it and :meth:`close` closes it). ``jobs`` names the jobs to show when the
    backend has no fleet registry. ``by`` is recorded as who paused or resumed.
    """

    def __init__(
        self,
        backend: Backend | str,
        jobs: Sequence[str] | None = None,
        *,
        by: str = "anarchon.web",
    ) -> None:
        if isinstance(jobs, str):
            raise InvalidConfigError("jobs must be a list of job names, not one string")
        self._owned = isinstance(backend, str)
        self.backend: Backend = resolve_backend(backend)
        self.jobs: list[str] = sorted(set(jobs or ()))
        self.by = by
        self._ready: asyncio.Task[None] | None = None

    @classmethod
    def from_scheduler(cls, scheduler: Scheduler) -> BackendSource:
        """The source of a scheduler's backend, showing at least its jobs."""
        return cls(scheduler.backend, jobs=list(scheduler.jobs))

    async def _init(self) -> None:
        if self._ready is None or (self._ready.done() and self._ready.exception() is not None):
            self._ready = asyncio.ensure_future(self.backend.init())
        await asyncio.shield(self._ready)

    async def now_ms(self) -> int:
        """Store time in ms."""
        await self._init()
        return await store_now_ms(self.backend)

    async def status(self) -> list[JobStatus]:
        """The fleet view of every declared job, and of each given job no instance declares."""
        await self._init()
        try:
            declared = await fleet_status(self.backend)
        except UnsupportedError:
            if not self.jobs:
                raise
            declared = []
        names = {status.job for status in declared}
        extra = [name for name in self.jobs if name not in names]
        if not extra:
            return declared
        controls = await self._controls()
        found = await asyncio.gather(*(self._from_history(name, controls) for name in extra))
        return sorted([*declared, *found], key=lambda status: status.job)

    async def known(self) -> list[str]:
        """The names of the jobs the page shows."""
        await self._init()
        try:
            declared = {d.job for d in await self.backend.declarations()}
        except UnsupportedError:
            declared = set()
        return sorted(declared | set(self.jobs))

    async def _check(self, job: str) -> None:
        known = await self.known()
        if job not in known:
            raise unknown_jobs_error([job], known)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job``, newest first."""
        await self._check(job)
        return await self.backend.history(job, limit)

    async def active(self, job: str) -> list[ActiveRun]:
        """The runs of ``job`` holding a lease (empty without a lease store)."""
        await self._check(job)
        if self.backend.runs is None:
            return []
        return await self.backend.runs.active(job)

    async def pause(self, job: str) -> JobControl:
        """Pause ``job`` for the whole fleet."""
        return await self._set_paused(job, True)

    async def resume(self, job: str) -> JobControl:
        """Resume ``job`` for the whole fleet (a pending skip stays)."""
        return await self._set_paused(job, False)

    async def close(self) -> None:
        """Close the backend if the source built it from a URL."""
        if self._owned:
            await self.backend.close()

    async def _set_paused(self, job: str, paused: bool) -> JobControl:
        await self._check(job)
        current = (await self.backend.controls()).get(job) or JobControl(job)
        control = dataclasses.replace(
            current, paused=paused, updated_at=await store_now_ms(self.backend), updated_by=self.by
        )
        await self.backend.set_control(control)
        return control

    async def _controls(self) -> dict[str, JobControl]:
        try:
            return await self.backend.controls()
        except UnsupportedError:
            return {}

    async def _from_history(self, name: str, controls: dict[str, JobControl]) -> JobStatus:
        records = await self.backend.history(name, 1)
        leases = await self.backend.runs.active(name) if self.backend.runs is not None else []
        control = controls.get(name)
        last = records[0] if records else None
        return JobStatus(
            job=name,
            schedule="",
            zone=None,
            next_slot=None,
            last_run=None
            if last is None
            else LastRun(
                slot=last.slot,
                status=last.status,
                instance_id=last.instance_id,
                attempt=last.attempt,
                reason=last.reason,
                finished_at=last.finished_at,
                duration_ms=last.duration_ms,
                error=last.error,
            ),
            live_leases=sum(1 for run in leases if run.live),
            paused=control.paused if control is not None else False,
            skip_until=control.skip_until if control is not None else None,
        )
